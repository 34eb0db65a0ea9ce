"""A verify schedule leaves nothing for the cycle collector.

Why this test exists: every schedule of ``toolcancel verify`` builds a harness, a registry and a
call, and each of them used to end in a reference cycle (the registry's plan held the registry's
own bound ``definition``; the harness kept the call's task, whose call holds the harness's hooks;
the timeout policy's wrapper holds its registry; a wrapper failure stayed on the call with its
traceback).  Some 80 objects a schedule were left for the cycle collector, whose collections were
5-10 % of verify's CPU time.  These tests run such schedules with the collector off and look at
what only it could free.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest
from toolcancel.oracle.scenario_language import TOOL_NAME, Scenario
from toolcancel.runtime.registry import ToolRegistry
from toolcancel.runtime.virtual_time import VirtualClock, run
from toolcancel.selfcheck.harness import Harness

# Each ended in a cycle: any call (the task and the plan), the timeout policy, a wrapper
# failure caught at the around stage (a second next() under retry="reject").
SCHEDULES = [
    (Scenario(), None),
    (Scenario(cancel="gate:body", cooperative=False), None),
    (Scenario(timeout="budget", wrappers=("wait_before",), cancel="gate:w0_before"), None),
    (Scenario(wrappers=("retry",)), "reject"),
]

LEFT_TO_THE_COLLECTOR = {"Harness", "ToolRegistry", "_Call", "CallPlan", "Execution"}


def collector_only(scenario: Scenario, retry: str | None) -> set[str]:
    """The types of the run's objects only the cycle collector frees, of those above."""
    gc.collect()
    gc.disable()
    try:
        clock = VirtualClock()
        obs = run(Harness(scenario, ToolRegistry, clock, retry, trace=True).run(), clock=clock)
        assert obs.result is not None, obs.error
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        return {type(o).__name__ for o in gc.garbage} & LEFT_TO_THE_COLLECTOR
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


@pytest.mark.parametrize(("scenario", "retry"), SCHEDULES)
def test_a_schedule_is_freed_by_reference_counting(scenario: Scenario, retry: str | None) -> None:
    assert collector_only(scenario, retry) == set()


def test_a_subclass_lookup_is_still_what_the_call_asks() -> None:
    """The plan holds a lookup over the tools table rather than the registry's bound method,
    unless the registry's class has another ``definition`` (the mutants patch theirs)."""
    asked: list[str] = []

    class Asking(ToolRegistry):
        def definition(self, name: str, agent: str | None = None) -> Any:
            asked.append(name)
            return super().definition(name, agent)

    clock = VirtualClock()
    obs = run(Harness(Scenario(), Asking, clock, trace=True).run(), clock=clock)
    assert obs.result is not None and not obs.result.is_error
    assert asked == [TOOL_NAME]  # the call's base dispatch asked the subclass
