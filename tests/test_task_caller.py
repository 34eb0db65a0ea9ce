"""The caller that gives up by cancelling the task awaiting the call (issue 39, item 6).

Why: the scenario harness used to give every call a signal and only ever abort it, so a registry
whose task cancellation no longer aborts the call, or that keeps a late success in a call made
without ``signal=``, passed all of verify and conform.  The ``task`` caller cancels the awaiting
task instead (``task.cancel()``); its await raises ``CancelledError`` after the call published its
one result, which the judge accepts only then, and judges as the caller's abort it was.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from support import mutant, shipped_vectors
from toolcancel.contract.loader import load_contract
from toolcancel.oracle.conform import run_vectors
from toolcancel.oracle.judge import environment_record
from toolcancel.oracle.judge.calls import cancelled_after_publication
from toolcancel.oracle.judge.record import Record, Want
from toolcancel.oracle.scenario_language import Scenario, ScenarioError
from toolcancel.selfcheck.harness import run_scenario
from toolcancel.selfcheck.space import configurations, schedules
from toolcancel.selfcheck.verifier import check, run_batch

ABORTED = "ABORTED"


def _checked(s: Scenario) -> tuple[Any, list[tuple[str, str]]]:
    obs = run_scenario(s)
    found = check(obs, load_contract().revision(s.revision))
    return obs, [(v.rule, v.explanation) for v in found.violations]


@pytest.mark.rules("R28", "R31")
@pytest.mark.parametrize("revision", ["seed", "revised"])
@pytest.mark.parametrize("cooperative", [True, False])
def test_a_task_cancelled_while_the_body_runs_publishes_aborted_then_raises(
    revision: str, cooperative: bool
) -> None:
    obs, violations = _checked(
        Scenario(revision=revision, caller="task", cancel="gate:body", cooperative=cooperative)
    )
    assert violations == []
    assert obs.caller_cancelled and obs.error is None  # the caller got CancelledError ...
    assert obs.result is not None and obs.result.error is not None
    assert obs.result.error.code == ABORTED  # ... after exactly one published ABORTED
    assert len(obs.notified) == 1 and obs.notified[0] is obs.result
    events = [line["event"] for line in obs.lines()]
    assert events.index("caller_cancelled") == events.index("returned") + 1
    assert obs.settled == (1, 1)  # the body was awaited to quiescence first


@pytest.mark.rules("R13", "R43")
@pytest.mark.parametrize("revision", ["seed", "revised"])
@pytest.mark.parametrize("cancel", ["after_call", "gate:pre"])
def test_a_task_cancelled_before_the_body_starts_none(revision: str, cancel: str) -> None:
    obs, violations = _checked(Scenario(revision=revision, caller="task", cancel=cancel))
    assert violations == [] and obs.caller_cancelled
    assert obs.body_starts == 0


def test_a_seed_task_caller_passes_no_signal_and_a_revised_one_a_live_signal() -> None:
    seed = run_scenario(Scenario(caller="task", cancel="gate:body"))
    revised = run_scenario(Scenario(revision="revised", caller="task", cancel="gate:body"))
    # the registry's own trace: both calls have a live caller signal at entry (seed: its own)
    for obs in (seed, revised):
        (entry,) = [line for line in obs.trace if line["event"] == "call_entry"]
        assert entry["caller"] == "live"
    watched = {r.scenario.revision: r.watched for r in (seed, revised)}
    assert watched["revised"] == watched["seed"] + 1  # only the revised caller has a signal


@pytest.mark.parametrize("cancel", ["before_entry", "in_entry", "step:1", "after"])
def test_a_task_caller_cancels_only_where_the_call_is_suspended(cancel: str) -> None:
    with pytest.raises(ScenarioError, match="a task caller cancels only after_call or at a gate"):
        Scenario(caller="task", cancel=cancel)


def test_the_task_callers_schedules_are_after_call_and_every_gate_reached() -> None:
    config = Scenario(caller="task", wrappers=("wait_after",))
    kept, pruned = schedules(config, run_scenario(config))
    assert kept == ["after_call", "gate:pre", "gate:body", "gate:w0_after", "gate:post"]
    assert pruned == 0
    uncooperative = Scenario(caller="task", cooperative=False)
    assert schedules(uncooperative, run_scenario(uncooperative)) == (["gate:body"], 3)


def test_the_task_caller_is_added_only_up_to_one_wrapper_and_never_with_a_guard() -> None:
    space = [c for c in configurations("seed", 2) if c.caller == "task"]
    assert space and max(len(c.wrappers) for c in space) == 1
    assert {c.guard for c in space} == {"none"}
    assert {c.pre for c in space} == {"allow", "deny", "ask", "throw", "throw_structured"}
    live = sum(1 for c in configurations("seed", 2) if c.caller == "live")
    assert len(space) < live / 9  # modest: a tenth of the live caller's configurations


# ------------------------------------------------------------------------------------------------
# The judge: CancelledError only after exactly one published result, to a caller that cancelled
# ------------------------------------------------------------------------------------------------


def _record(s: Scenario, **changes: Any) -> Record:
    """The environment's record of ``s`` run, with ``notified``'s count changed and lines left
    out as ``changes`` say."""
    obs = run_scenario(s)
    lines = obs.lines()
    drop = changes.get("drop", ())
    lines = [line for line in lines if line["event"] not in drop]
    for line in lines:
        if line["event"] == "notified" and "count" in changes:
            line["count"] = changes["count"]
    return Record(lines, s.revision, s.entry_caller)


@pytest.mark.rules("R31")
def test_the_judge_accepts_cancelled_error_after_exactly_one_published_result() -> None:
    s = Scenario(caller="task", cancel="gate:body")
    assert cancelled_after_publication(_record(s), Want(s)) is None


@pytest.mark.rules("R31")
@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"count": 2}, "2 notifications were published, not exactly one"),
        ({"count": 0}, "0 notifications were published, not exactly one"),
        ({"drop": ("returned",)}, "no result was published before it"),
    ],
)
def test_the_judge_refuses_cancelled_error_without_exactly_one_published_result(
    changes: dict[str, Any], why: str
) -> None:
    s = Scenario(caller="task", cancel="gate:body")
    failure = cancelled_after_publication(_record(s, **changes), Want(s))
    assert failure is not None and failure.rule == "R31" and why in failure.why


@pytest.mark.rules("R31")
@pytest.mark.parametrize("cancel", ["never", "after"])
def test_the_judge_refuses_cancelled_error_to_a_caller_that_never_cancelled(cancel: str) -> None:
    ran = Scenario(caller="task", cancel="gate:body")
    claimed = Scenario(caller="live", cancel=cancel)  # what the vector said the caller did
    failure = cancelled_after_publication(_record(ran), Want(claimed))
    assert failure is not None and failure.rule == "R31"
    assert "its caller never cancelled the task awaiting it after entry" in failure.why


@pytest.mark.rules("R28", "R31")
def test_a_published_success_after_the_task_was_cancelled_is_a_late_success() -> None:
    # the same record judged whole: a result judged as the caller's abort it was (R28), not
    # accepted because the caller saw CancelledError instead of it
    broken = mutant("ignores_task_cancellation")
    with broken.active() as factory:
        obs = run_scenario(Scenario(caller="task", cancel="gate:body"), factory)
    assert obs.caller_cancelled and obs.result is not None and obs.result.error is None
    found = check(obs, load_contract().revision("seed"))
    assert "R28" in {v.rule for v in found.violations}, found.violations
    assert environment_record(obs).caller == "live"


# ------------------------------------------------------------------------------------------------
# The two mutants: verify kills each under its declared rule, and so does conform --cancel task
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "revision", "rule"),
    [
        ("ignores_task_cancellation", "seed", "R13"),
        ("ignores_task_cancellation", "revised", "R43"),
        ("keeps_late_success_without_signal", "seed", "R28"),
    ],
)
def test_verify_kills_each_task_mutant_under_its_rule(name: str, revision: str, rule: str) -> None:
    broken = mutant(name)
    assert broken.rule_in(revision) == rule
    space = [c for c in configurations(revision, 1) if c.caller == "task" and c.pre == "allow"]
    with broken.active() as factory:
        tally = run_batch(space[:40], factory)
    assert tally.violations, f"{name} survived the task caller's configurations"
    assert tally.violations[0].rule == rule, tally.violations[0]
    clean = run_batch(space[:40])
    assert clean.violation_count == 0, clean.violations[:1]


def _adapter(*args: str) -> list[str]:
    return [sys.executable, "-m", "toolcancel.selfcheck.adapter", *args]


@pytest.mark.parametrize(
    ("name", "cancel", "level", "rule"),
    [("ignores_task_cancellation", "gate:pre", "trace", "R13"),
     # a black box sees the body run and its success reach post-execute, where C3 must have
     # replaced it (R19); the abort C1 missed is in the trace alone
     ("ignores_task_cancellation", "gate:pre", "outcome", "R19"),
     ("keeps_late_success_without_signal", "gate:post", "trace", "R28"),
     ("keeps_late_success_without_signal", "gate:post", "outcome", "R28")],
)  # fmt: skip
def test_conform_with_a_task_cancelling_adapter_kills_each_task_mutant(
    name: str, cancel: str, level: str, rule: str
) -> None:
    vectors = [
        v for v in shipped_vectors("seed")
        if v.scenario.caller == "live" and v.scenario.cancel == cancel and v.scenario.pre == "allow"
    ][:12]  # fmt: skip (a throwing pre-policy's missed abort is R14's, C1')
    assert vectors
    plain = asyncio.run(run_vectors(_adapter("--cancel", "task", "--level", level), vectors,
                                    "seed", timeout=60))  # fmt: skip
    assert all(j.passed for j in plain.judgements), [j for j in plain.judgements if not j.passed]
    by_signal = asyncio.run(run_vectors(_adapter("--mutant", name, "--level", level), vectors,
                                        "seed", timeout=60))  # fmt: skip
    assert all(j.passed for j in by_signal.judgements)  # a signal caller never shows it
    report = asyncio.run(run_vectors(
        _adapter("--mutant", name, "--cancel", "task", "--level", level), vectors, "seed",
        timeout=60))  # fmt: skip
    failed = [j for j in report.judgements if not j.passed]
    assert failed and {j.rule for j in failed} == {rule}, [(j.id, j.rule) for j in failed]


def test_caller_cancelled_is_optional_boolean_and_needs_a_result_or_a_raise() -> None:
    from toolcancel.oracle.conform.protocol import outcome_problem

    observed = {"raised": None, "notifications": 1, "notified_same": True, "bodies": [],
                "settled": {"bodies_started": 0, "bodies_settled": 0}}  # fmt: skip
    answer: dict[str, Any] = {"result": {"content": [], "isError": False}, "observed": observed}
    assert outcome_problem(answer) is None  # absent: the caller got the result
    observed["caller_cancelled"] = True
    assert outcome_problem(answer) is None
    observed["caller_cancelled"] = "yes"
    assert outcome_problem(answer) == "observed.caller_cancelled must be true or false (or absent)"
    observed["caller_cancelled"], observed["raised"], answer["result"] = True, "Cancelled", None
    assert outcome_problem(answer) is None  # the other form: the cancellation came back raised
    observed["raised"] = None
    problem = outcome_problem(answer)
    assert problem is not None and "caller_cancelled is true with neither a result nor a raise" in (
        problem
    )
