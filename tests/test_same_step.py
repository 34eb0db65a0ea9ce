"""A caller abort in the synchronous step the tool's deadline expires (CONTRACT.md R34, a MAY):
the scenario language says it (``cancel = "with_deadline"``), the harness runs the step in either
order, verify's space reaches both orders, every shipped vector of it allows both
classifications, and conform passes an answer in either order -- and fails one that mixes them."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from toolcancel.oracle.conform.judge import Judge
from toolcancel.oracle.observation import Observation
from toolcancel.oracle.scenario_language import Scenario, ScenarioError
from toolcancel.oracle.vectors import Vector, VectorError, body_signals, canonical
from toolcancel.oracle.vectors import shipped_vectors as _load
from toolcancel.selfcheck.harness import run_scenario
from toolcancel.selfcheck.space import schedules

REVISIONS = ("seed", "revised")


@functools.cache
def shipped_vectors(revision: str) -> list[Vector]:
    return _load(revision)  # read once: the files are large


def _same_step(revision: str, first: str | None = None, **fields: Any) -> Scenario:
    cancel = "with_deadline" if first is None else f"with_deadline:{first}"
    return Scenario(revision=revision, timeout="timer_first", cancel=cancel, **fields)


@pytest.mark.parametrize("revision", REVISIONS)
def test_the_harness_runs_the_step_either_way_round(revision: str) -> None:
    """Caller first, the deadline carries the caller's reason and the registry's result stands
    (ABORTED for a late success); timer first, TOOL_TIMEOUT.  The bare value runs caller first.
    Timer first, nothing runs between the timer and the caller's abort: no body settles."""
    caller = run_scenario(_same_step(revision, "caller"))
    timer = run_scenario(_same_step(revision, "timer"))
    bare = run_scenario(_same_step(revision))
    assert (caller.path[-1].outcome, body_signals(caller)) == (
        "aborted", [{"aborted": True, "reason": "caller"}])  # fmt: skip
    assert (timer.path[-1].outcome, body_signals(timer)) == (
        "tool_timeout", [{"aborted": True, "reason": "timeout"}])  # fmt: skip
    assert [p.event for p in bare.path] == [p.event for p in caller.path]
    assert not caller.problems and not timer.problems
    kinds = [e[0] for e in timer.log]
    at_timer = kinds.index("timer")
    assert timer.log[at_timer + 1][:2] == ("abort", "caller"), timer.log[at_timer:]
    at_caller = [e[:2] for e in caller.log].index(("abort", "caller"))
    assert caller.log[at_caller + 1][0] == "timer", caller.log[at_caller:]


@pytest.mark.parametrize(
    "fields",
    [{"timeout": "budget"}, {"timeout": "absent"}, {"caller": "aborted", "timeout": "timer_first"},
     {"caller": "task", "timeout": "timer_first"}],
)  # fmt: skip
def test_the_language_refuses_the_step_without_the_tools_deadline_or_a_live_caller(
    fields: dict[str, Any],
) -> None:
    with pytest.raises(ScenarioError, match="needs caller live and timeout timer_first"):
        Scenario(cancel="with_deadline", **fields)
    with pytest.raises(ScenarioError, match="is not never"):
        Scenario(timeout="timer_first", cancel="with_deadline:both")


def test_a_vector_leaves_the_order_to_the_adapter() -> None:
    v = next(v for v in shipped_vectors("seed") if v.scenario.cancel == "with_deadline")
    data = json.loads(json.dumps(v.to_data()))
    data["scenario"]["cancel"] = "with_deadline:timer"
    with pytest.raises(VectorError, match="takes no order in a vector"):
        Vector.from_data(data, "line 1")


def _uncancelled(s: Scenario) -> Observation:
    return run_scenario(s.with_cancel("never"))


def test_verify_runs_the_step_both_ways_round_where_the_deadline_fires_during_the_body() -> None:
    plain = _same_step("seed").with_cancel("never")
    kept, _ = schedules(plain, _uncancelled(plain))
    assert {"with_deadline:caller", "with_deadline:timer"} <= set(kept)
    uncooperative = Scenario(timeout="timer_first", cooperative=False)
    assert "with_deadline:timer" in schedules(uncooperative, _uncancelled(uncooperative))[0]
    for elsewhere in (Scenario(timeout="budget"), Scenario(timeout="timer_first", pre="deny")):
        assert not any(k.startswith("with_deadline") for k in
                       schedules(elsewhere, _uncancelled(elsewhere))[0]), elsewhere  # fmt: skip


@pytest.mark.parametrize("revision", REVISIONS)
def test_every_shipped_same_step_vector_allows_both_classifications(revision: str) -> None:
    """Each one's expectations hold both orders' runs (result and body signals), and they are
    numbered after every other vector, so adding them renumbered none."""
    vectors = shipped_vectors(revision)
    same = [i for i, v in enumerate(vectors) if v.scenario.cancel == "with_deadline"]
    assert same and same == list(range(same[0], len(vectors))), "the same-step vectors come last"
    for i in same:
        v = vectors[i]
        allowed = {(e.result_json, canonical([dict(b) for b in e.body_signals]))
                   for e in v.expectations()}  # fmt: skip
        for first in ("caller", "timer"):
            run = run_scenario(v.scenario.with_cancel(f"with_deadline:{first}"))
            assert run.result is not None
            seen = (canonical(run.result.to_data()), canonical(body_signals(run)))
            assert seen in allowed, (v.id, first)


def _answer(v: Vector, first: str, level: str) -> dict[str, Any]:
    """Our adapter's answer to ``v`` with the step run ``first`` first (in process)."""
    from toolcancel.runtime.registry import ToolRegistry
    from toolcancel.selfcheck.adapter import Session

    session = Session(ToolRegistry, REVISIONS, level=level)
    try:
        run = session.run if level == "trace" else session.run_outcome
        scenario = v.scenario.with_cancel(f"with_deadline:{first}")
        answer: dict[str, Any] = session.loop.run_until_complete(run(v.id, scenario))
        return answer
    finally:
        session.close()


@pytest.mark.parametrize("level", ["trace", "outcome"])
@pytest.mark.parametrize("revision", REVISIONS)
def test_conform_passes_either_order_and_fails_a_mix(revision: str, level: str) -> None:
    plain = _same_step(revision)
    v = next(v for v in shipped_vectors(revision) if v.scenario == plain)
    judge = Judge(revision, level=level)
    for first in ("caller", "timer"):
        j = judge.judge(v, _answer(v, first, level))
        assert j.passed, (first, j.explanation)
    # TOOL_TIMEOUT with a body that saw the caller's reason is neither order
    mixed = _answer(v, "timer", level)
    observed = mixed["observed"]
    if level == "trace":
        observed["body_signals"] = [{"aborted": True, "reason": "caller"}]
    else:
        observed["bodies"][0]["settle"]["reason"] = "caller"
    j = judge.judge(v, mixed)
    assert not j.passed and j.rule == "R21", j.explanation


def test_only_a_runtime_whose_caller_aborts_a_signal_runs_the_step() -> None:
    """A task's or a message's cancellation lands when the call next runs, never in the step the
    deadline expires: such a runtime is not sent these vectors."""
    from toolcancel.oracle.conform.capabilities import CANCEL_SIGNAL, needs

    v = next(v for v in shipped_vectors("seed") if v.scenario.cancel == "with_deadline")
    assert CANCEL_SIGNAL in needs(v, Judge("seed").table)
