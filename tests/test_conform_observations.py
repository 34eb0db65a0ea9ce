"""The protocol's optional observations (issue 14, blind spot 6): conform sees what observers,
the approval seam and wrappers were handed, not only results and counts.

Why these tests exist: a registry can publish a result that serializes exactly like a frozen one
but that an observer can write into (R30), leave the view's slot writable after publication
(R31), hand the approval seam a signal other than C (R24), or hand every observer the right
object while a second observer gets a copy (R31), or hand post-execute the late success C3
must replace while C4 still publishes ABORTED (R19).  None of that shows in a result, a trace's
events or a notification count.  Each broken registry of ``OBSERVATION_MUTANTS`` must fail
conform at both levels, citing its rule; a doctored answer is judged one field at a time.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from support import mutants, shipped_vectors
from toolcancel.oracle.conform import run_vectors
from toolcancel.oracle.conform.judge import Judge
from toolcancel.oracle.conform.protocol import PROTOCOL_RULE
from toolcancel.oracle.vectors import REVISIONS, Vector
from toolcancel.runtime.registry import ToolRegistry
from toolcancel.selfcheck.adapter import Session
from toolcancel.selfcheck.verifier import verify

ROOT = Path(__file__).resolve().parent.parent


OBSERVATION_MUTANTS = mutants().OBSERVATION_MUTANTS


@pytest.fixture(scope="module")
def seed() -> list[Vector]:
    return shipped_vectors("seed")


def _asks(v: Vector) -> bool:
    s = v.scenario
    return s.pre == "ask" and s.approval_seam and s.agent and s.caller == "live"


def _late_success(v: Vector) -> bool:
    """A success C3 turns into ABORTED before post-execute sees it."""
    received = v.expected.post_received
    return (
        isinstance(received, dict)
        and "ABORTED" in json.dumps(received)
        and v.scenario.body in ("success", "defer_success", "success_meta")
        and v.scenario.post == "accept"  # a rewrite would also change the result
        and not v.scenario.wrappers
    )


KILLERS = {
    "mutable_result": lambda v: True,
    "unfrozen_view": lambda v: True,
    "approval_gets_a_copy": _asks,
    "late_success_reaches_post": _late_success,
}


@pytest.mark.parametrize("level", ["trace", "outcome"])
@pytest.mark.parametrize("mutant", OBSERVATION_MUTANTS, ids=lambda m: m.name)
def test_conform_catches_what_only_the_observations_show(
    mutant: Any, level: str, seed: list[Vector]
) -> None:
    vectors = [v for v in seed if KILLERS[mutant.name](v)][:40]
    command = [sys.executable, "-m", "toolcancel.selfcheck.adapter", "--mutant", mutant.name]
    command += ["--level", level]
    report = asyncio.run(run_vectors(command, vectors, "seed", timeout=60))
    failed = [j for j in report.judgements if not j.passed]
    assert failed, f"{mutant.name} passed conform at {level} level"
    rules = {j.rule for j in failed}
    # at trace level the checker may see the probe's own write of the slot first (R23)
    assert rules <= {mutant.rule, "R23"} and (level == "trace" or rules == {mutant.rule})


@pytest.mark.parametrize(
    ("name", "rule"), [("approval_gets_a_copy", "R24"), ("late_success_reaches_post", "R28")]
)
def test_verify_catches_those_within_its_reach(name: str, rule: str) -> None:
    """The harness compares the approval request's signal with the slot pre-execute saw (R24)
    and checks that post-execute never receives a success after C3 (R28), so the model check
    catches these two as well.  A writable result or view is not within its reach (issue 14,
    blind spot 5: verify's record of immutability)."""
    mutant = next(m for m in OBSERVATION_MUTANTS if m.name == name)
    with mutant.active() as factory:
        report = verify(
            "seed", workers=1, factory=factory, max_wrappers=0, max_calls=1, stop_at_first=True
        )
    assert rule in {v.rule for v in report.tally.violations}


def _answer(v: Vector, level: str) -> dict[str, Any]:
    session = Session(ToolRegistry, REVISIONS, level=level)
    try:
        line = json.dumps({"protocol": 2, "type": "vector", "id": v.id, "revision": v.revision,
                           "scenario": v.scenario.to_data()})  # fmt: skip
        return session.answer(line)
    finally:
        session.close()


@pytest.mark.parametrize("level", ["trace", "outcome"])
@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("frozen", {"result": False, "view": True}, "R30"),
        ("frozen", {"result": True, "view": False}, "R31"),
        ("approval_signal", "other", "R24"),
        ("slot_after_next", [True, False], "R23"),
        ("notified_same", False, "R31"),
        ("post_received", None, "R10"),
        ("post_received", {"content": [], "isError": False}, "R20"),
        ("frozen", {"result": "yes"}, PROTOCOL_RULE),
        ("approval_signal", "caller", PROTOCOL_RULE),
        ("slot_after_next", [1], PROTOCOL_RULE),
        ("post_received", [], PROTOCOL_RULE),
    ],
)
def test_each_observation_is_judged(
    field: str, value: Any, rule: str, level: str, seed: list[Vector]
) -> None:
    if field == "approval_signal":
        v = next(v for v in seed if _asks(v) and v.scenario.approval == "approved")
    else:
        v = next(v for v in seed if "delegate" in v.scenario.wrappers and v.expected.body_starts)
    answer = _answer(v, level)
    assert Judge("seed", level=level).judge(v, answer).passed
    observed = answer["observed"]
    assert observed["frozen"] == {"result": True, "view": True}
    assert observed.get("approval_signal", "pre_slot") == "pre_slot"
    assert all(observed["slot_after_next"])
    assert bool(observed["slot_after_next"]) == (field != "approval_signal")
    observed[field] = value
    verdict = Judge("seed", level=level).judge(v, answer)
    assert (verdict.passed, verdict.rule) == (False, rule)


def _held(v: Vector) -> bool:
    """A body that ignores its aborted signal: our harness holds it (R27), and says so."""
    s = v.scenario
    held = s.caller == "live" and s.cancel == "gate:body" and not s.cooperative
    return held and s.timeout == "budget"  # the tool's own deadline: observed.deadline


@pytest.mark.parametrize(
    ("level", "field", "value", "says"),
    [
        ("trace", "held", {"seconds": -1}, "observed.held must be {seconds[, went]}"),
        ("trace", "held", {"seconds": 86400, "went": 3}, "observed.held must be"),
        ("trace", "held", {"seconds": 1, "for": "ever"}, "observed.held must be"),
        ("trace", "held", None, "observed.held and observed.held_at come together"),
        ("trace", "held_at", None, "observed.held and observed.held_at come together"),
        ("trace", "held_at", 10_000, "observed.held_at must be a trace length"),
        ("trace", "held_at", "3", "observed.held_at must be a trace length"),
        ("trace", "settled", {"bodies_started": 0, "bodies_settled": 1}, "observed.settled must"),
        ("trace", "settled", [1, 1], "observed.settled must be {bodies_started, bodies_settled}"),
        ("outcome", "settled", {"bodies_started": 1}, "observed.settled must be"),
        ("trace", "caller_aborted", {"bodies_after": 0}, "observed.caller_aborted must be"),
        ("outcome", "caller_aborted", {"bodies_after": -1, "before_post": True}, "observed.c"),
        ("outcome", "caller_aborted", {"bodies_after": 0, "before_post": 1}, "observed.c"),
        ("trace", "deadline", {"expired": "no", "outer": False}, "observed.deadline must be"),
        ("outcome", "deadline", {"expired": False}, "observed.deadline must be {expired, outer}"),
    ],
)
def test_a_malformed_optional_observation_is_refused_naming_the_vector_and_field(
    level: str, field: str, value: Any, says: str, seed: list[Vector]
) -> None:
    # An optional observation the record is built from: a malformed one used to be dropped in
    # silence (the record then lacked what the answer claimed to report); now it is the
    # adapter's protocol failure, in one line, and the well-formed one our adapter writes passes.
    v = next(v for v in seed if _held(v))
    answer = _answer(v, level)
    assert Judge("seed", level=level).judge(v, answer).passed
    assert {"caller_aborted", "deadline", "settled"} <= answer["observed"].keys()
    if level == "trace":
        assert {"held", "held_at"} <= answer["observed"].keys()
    if value is None:
        del answer["observed"][field]
    else:
        answer["observed"][field] = value
    verdict = Judge("seed", level=level).judge(v, answer)
    assert (verdict.passed, verdict.rule, verdict.step) == (False, PROTOCOL_RULE, "answer")
    assert verdict.explanation.startswith(f"{v.id}: {says}"), verdict.explanation
    assert "\n" not in verdict.explanation


def test_an_outcome_level_answer_with_a_trace_is_refused(seed: list[Vector]) -> None:
    v = seed[0]
    answer = _answer(v, "outcome")
    answer["trace"] = "not a trace"  # read as the registry's trace, it crashed the judge
    verdict = Judge("seed", level="outcome").judge(v, answer)
    assert (verdict.passed, verdict.rule) == (False, PROTOCOL_RULE)
    assert "carries no trace" in verdict.explanation


@pytest.mark.parametrize("level", ["trace", "outcome"])
def test_the_deadline_observation_is_asked_by_r35(level: str, seed: list[Vector]) -> None:
    # An enclosing deadline of the same code expired, the tool's own did not: ordinary
    # cancellation.  A registry that classifies by code reports TOOL_TIMEOUT (D13), R35's breach
    # -- which the harness that drives the clock can tell, and the record decides first.
    v = next(v for v in seed if "outer_deadline" in v.scenario.wrappers
             and v.expected.body_starts and v.expected.outcome == "aborted")  # fmt: skip
    answer = _answer(v, level)
    assert answer["observed"]["deadline"] == {"expired": False, "outer": True}
    assert Judge("seed", level=level).judge(v, answer).passed
    answer["result"] = {
        "content": [{"type": "text", "text": "Error: tool call timed out after 100ms"}],
        "isError": True,
        "error": {"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"},
    }
    verdict = Judge("seed", level=level).judge(v, answer)
    assert (verdict.passed, verdict.rule, verdict.step) == (False, "R35", "timeout_identity")
    assert "outer deadline expired" in verdict.explanation
