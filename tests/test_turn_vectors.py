"""Turn vectors: conform judges a turn scheduler (R9, R36-R38) through the adapter protocol.

Why these tests exist: the scheduler sits above the registry boundary, so no call vector can see
it.  Turn vectors run a batch of calls under one turn signal, aborted at every gate, through the
adapter's own scheduler; conform judges what the environment saw with the same rule checks
``toolcancel verify`` runs on the reference (:func:`toolcancel.oracle.judge.turns.turn_problems`).
Each broken scheduler of ``machine/selfcheck/mutants.py`` (``TURN_MUTANTS``) must be caught by both,
citing its rule; ``forgets_turn_contexts`` passed the turn checks before they asked whether every
committed result's contexts are logged (issue 14, blind spot 4).  An adapter written before turn
vectors still runs, and is told loudly that the scheduler went unchecked.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from support import run_cli
from toolcancel.oracle.conform import run_vectors
from toolcancel.oracle.vectors import REVISIONS, shipped_dir
from toolcancel.oracle.vectors.turns import TurnVector, load_turn_vectors, turn_file
from toolcancel.selfcheck.mutants import TURN_MUTANTS
from toolcancel.selfcheck.turncheck import verify_turns

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = str(Path(__file__).resolve().parent / "fixtures" / "misbehaving_adapter.py")


def shipped_turns(revision: str) -> list[TurnVector]:
    return load_turn_vectors(turn_file(shipped_dir(), revision))


@pytest.mark.parametrize("revision", REVISIONS)
def test_the_turn_vectors_cover_every_kind_and_abort_point(revision: str) -> None:
    turns = shipped_turns(revision)
    assert len({t.id for t in turns}) == len(turns) > 1000
    kinds = {k for t in turns for k in t.turn.kinds}
    assert kinds == {"ok", "ok_exclusive", "defer", "throw", "denied"}
    aborts = {t.turn.abort.split(":")[-1] for t in turns}
    assert aborts == {"never", "before_turn", "pre", "body", "post"}
    assert max(len(t.turn.kinds) for t in turns) == 3


@pytest.mark.parametrize(("revision", "level"), [("seed", "trace"), ("revised", "outcome")])
def test_our_scheduler_passes_every_turn_vector(
    revision: str, level: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--self", "--level", level, "--revision", revision, "--json", "--only", "R37"]
    code, report, err = run_cli(args, capsys)
    assert (code, report["failed"]) == (0, 0), err
    assert report["passed"] == len(shipped_turns(revision))
    assert report["turns"] is True
    for rule in ("R9", "R36", "R37", "R38"):
        assert report["by_rule"][rule]["status"] == "checked"


KILLERS = {
    # the turns each broken scheduler shows in, so the test runs a few hundred vectors
    "forgets_turn_contexts": lambda t: "defer" in t.turn.kinds,
    "skips_with_aborted": lambda t: t.turn.abort == "before_turn",
}


@pytest.mark.parametrize("mutant", TURN_MUTANTS, ids=lambda m: m.name)
@pytest.mark.parametrize("revision", REVISIONS)
def test_verify_catches_the_broken_scheduler(mutant: Any, revision: str) -> None:
    with mutant.active():
        tally = verify_turns(revision, 2)
    assert mutant.rule in {rule for rule, _, _ in tally.violations}


@pytest.mark.parametrize("mutant", TURN_MUTANTS, ids=lambda m: m.name)
def test_conform_catches_the_broken_scheduler(mutant: Any) -> None:
    turns = [t for t in shipped_turns("seed") if KILLERS[mutant.name](t)][:200]
    command = [sys.executable, "-m", "toolcancel.selfcheck.adapter", "--mutant", mutant.name]
    report = asyncio.run(run_vectors(command, [], "seed", timeout=60, turns=turns))
    assert report.failed > 0
    assert {j.rule for j in report.judgements if not j.passed} == {mutant.rule}


def test_an_adapter_without_turns_is_told_the_scheduler_went_unchecked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A hello without ``turns`` (an adapter of before turn vectors) still conforms on the call
    vectors; the report says, loudly, that R9 and R36-R38 were not checked and why."""
    args = ["--revision", "seed", "--only", "seed-00002", "--adapter", sys.executable, FIXTURE,
            "no_turns"]  # fmt: skip
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert "1 passed, 0 failed" in out
    assert "NOT CHECKED: the turn scheduler (R9, R36-R38)" in out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  R")}
    for rule in ("R9", "R36", "R37", "R38"):
        assert "not checked (THE SCHEDULER WAS NOT RUN" in rows[rule]


def test_a_turn_vectors_file_given_as_call_vectors_is_named_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = turn_file(shipped_dir(), "seed")
    code, out, err = run_cli(["--self", "--vectors", str(path)], capsys)
    assert (code, out) == (2, "")
    assert err == (
        f"toolcancel conform: {path}:1: a line of a turn vectors file; this reads call vectors "
        "(conform runs the shipped turn vectors with the shipped call vectors)\n"
    )


def test_a_malformed_turn_answer_is_a_protocol_failure() -> None:
    from toolcancel.oracle.conform.judge import Judge
    from toolcancel.oracle.conform.protocol import PROTOCOL_RULE

    v = shipped_turns("seed")[0]
    answer: dict[str, Any] = {"log": [], "observed": {"events": [{"event": "pre"}], "returned": 1}}
    verdict = Judge("seed").judge_turn(v, answer)
    assert (verdict.passed, verdict.rule) == (False, PROTOCOL_RULE)
    assert "observed.events" in verdict.explanation


def _turn_answer(v: TurnVector) -> dict[str, Any]:
    from toolcancel.runtime.registry import ToolRegistry
    from toolcancel.selfcheck.adapter import Session

    session = Session(ToolRegistry, REVISIONS)
    try:
        return session.answer(v.message(2).decode())
    finally:
        session.close()


def _verdict(v: TurnVector, answer: dict[str, Any]) -> tuple[bool, str | None, str]:
    from toolcancel.oracle.conform.judge import Judge

    j = Judge(v.revision).judge_turn(v, answer)
    return j.passed, j.rule, j.step


def _publish(answer: dict[str, Any], call: str, result: dict[str, Any]) -> None:
    """Make ``call`` publish ``result``: its notification and its log entry."""
    for e in answer["observed"]["events"]:
        if e.get("call") == call and e["event"] == "notify":
            e["result"] = result
    for e in answer["log"]:
        if e["callId"] == call and e["kind"] == "tool/result":
            e["payload"] = result


SUCCESS = {"content": [{"type": "text", "text": "done c0"}], "isError": False}


def test_a_turn_calls_late_start_and_late_success_cite_the_late_start_check() -> None:
    # The turn signal is each call's caller signal: a call whose pre-execute was running when
    # it aborted gets ABORTED at C1.  Its body starting anyway, or its success published, is
    # what the call check of R28 reads from the call's record, not a rule restated here.
    v = next(t for t in shipped_turns("seed")
             if t.turn.kinds == ("ok",) and t.turn.abort == "gate:0:pre")  # fmt: skip
    answer = _turn_answer(v)
    assert _verdict(v, answer) == (True, None, "")
    late_start = {**answer, "observed": dict(answer["observed"])}
    events = list(answer["observed"]["events"])
    at = events.index({"event": "pre_done", "call": "c0"}) + 1
    events[at:at] = [{"event": "body_start", "call": "c0"}, {"event": "body_settle", "call": "c0"}]
    late_start["observed"]["events"] = events
    late_start["observed"]["returned"] += 2
    assert _verdict(v, late_start) == (False, "R28", "turn_calls")
    _publish(answer, "c0", SUCCESS)
    assert _verdict(v, answer) == (False, "R28", "turn_result")


def test_a_turn_calls_other_result_or_path_cites_the_contracts_rule_for_it() -> None:
    v = next(t for t in shipped_turns("seed")
             if t.turn.kinds == ("ok",) and t.turn.abort == "never")  # fmt: skip
    answer = _turn_answer(v)
    assert _verdict(v, answer) == (True, None, "")
    # a success the body did not make: the rule of the outcome the contract gives (body_success)
    other = {"content": [{"type": "text", "text": "something else"}], "isError": False}
    wrong = {**answer, "log": [dict(e) for e in answer["log"]],
             "observed": {**answer["observed"],
                          "events": [dict(e) for e in answer["observed"]["events"]]}}  # fmt: skip
    _publish(wrong, "c0", other)
    assert _verdict(v, wrong) == (False, "R2", "turn_result")
    # post-execute never ran: where the scheduler runs a call's hooks
    events = [e for e in answer["observed"]["events"] if e["event"] not in ("post", "post_done")]
    skipped = {**answer, "observed": {**answer["observed"], "events": events,
                                      "returned": answer["observed"]["returned"] - 2}}
    assert _verdict(v, skipped) == (False, "R38", "turn_calls")
