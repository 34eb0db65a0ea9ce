"""Tests for the tool-call timeout policy (R32-R35, R8): budgets, classification, quiescence.

Time is virtual (conftest): a 100 ms budget expires exactly at loop time 0.1, at no real cost.
Races are ordered with gates; the bodies here either cooperate (stop when their signal aborts)
or deliberately do not.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support import Gate, Harness, aborted, canon, controller, expected, ok, text, until_idle
from toolcancel import (
    AbortSignal,
    Accept,
    Allow,
    Execution,
    ToolRegistry,
    ToolResult,
    install_timeout_policy,
)
from toolcancel.runtime import timeout_policy as policy_module
from toolcancel.runtime.deadline import Deadline, TimeoutReason, timeout_of
from toolcancel.runtime.registry import Next

TIMEOUT_ERROR = {"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"}


def timed_out(ms: str) -> str:
    """The canonical seed TOOL_TIMEOUT (R8) for a budget written ``ms``."""
    return expected(f"Error: tool call timed out after {ms}ms", error=TIMEOUT_ERROR)


def live_timers() -> list[asyncio.TimerHandle]:
    scheduled: list[asyncio.TimerHandle] = vars(asyncio.get_running_loop())["_scheduled"]
    return [h for h in scheduled if not h.cancelled()]


def now_ms() -> float:
    return asyncio.get_running_loop().time() * 1000


class Cooperative:
    """A body that keeps working until its signal aborts (or ``work_ms`` passes), then settles.

    After the abort it may wait at ``drain`` (cleanup that takes a while), then raises ``raises``
    if given, else returns success.  Records every signal it saw and when it settled.
    """

    def __init__(
        self,
        *,
        work_ms: float | None = None,
        raises: Exception | None = None,
        drain: Gate | None = None,
        returns: Any = None,
    ) -> None:
        self.work_ms = work_ms
        self.raises = raises
        self.drain = drain
        self.returns = [text("ok")] if returns is None else returns
        self.signals: list[AbortSignal | None] = []
        self.started = asyncio.Event()
        self.settled_at: list[float] = []

    async def __call__(self, arguments: Any, view: Execution) -> Any:
        signal = view.signal
        self.signals.append(signal)
        self.started.set()
        stopped = asyncio.get_running_loop().create_future()

        def stop(_: AbortSignal) -> None:
            if not stopped.done():
                stopped.set_result(None)

        if signal is not None:
            if signal.aborted:
                stop(signal)
            signal.add_listener(stop)
        try:
            timeout = None if self.work_ms is None else self.work_ms / 1000
            await asyncio.wait([stopped], timeout=timeout)
        finally:
            if signal is not None:
                signal.remove_listener(stop)
        if self.drain is not None:
            await self.drain.passage()
        self.settled_at.append(now_ms())
        if self.raises is not None and stopped.done():
            raise self.raises
        return self.returns


@pytest.fixture
def deadlines(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Deadline]]:
    """Every deadline the policy creates, to check each one was disposed."""
    made: list[Deadline] = []
    real = policy_module.deadline

    def spy(upstream: AbortSignal | None, ms: float, code: str) -> Deadline:
        d = real(upstream, ms, code)
        made.append(d)
        return d

    monkeypatch.setattr(policy_module, "deadline", spy)
    yield made


def budgeted(
    h: Harness, body: Callable[..., Any], ms: float = 100, name: str = "t"
) -> Callable[[], None]:
    h.registry.register(name, body, timeout_ms=ms)
    return install_timeout_policy(h.registry)


# ------------------------------------------------------------------------------------------------
# R32: declaring a budget
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R32")
@pytest.mark.parametrize("ms", [0, 0.0, -1, -0.5, math.inf, -math.inf, math.nan, True, False])
def test_registration_refuses_a_budget_that_is_not_positive_finite(ms: Any) -> None:
    registry = ToolRegistry()

    async def body(arguments: Any, view: Execution) -> Any:
        return [text("ok")]

    with pytest.raises(ValueError) as info:  # InvalidBudget: R32's TypeError too
        registry.register("slow", body, timeout_ms=ms)
    assert isinstance(info.value, TypeError)
    assert str(info.value) == (
        f'tool "slow" timeout_ms must be a positive finite number (milliseconds), not {ms!r}'
    )
    assert registry.definition("slow") is None


@pytest.mark.rules("R32")
@pytest.mark.parametrize("ms", [1, 0.001, 1.5, 10**9])
def test_registration_accepts_positive_finite_budgets(ms: float) -> None:
    registry = ToolRegistry()

    async def body(arguments: Any, view: Execution) -> Any:
        return [text("ok")]

    assert registry.register("t", body, timeout_ms=ms).timeout_ms == ms


# ------------------------------------------------------------------------------------------------
# R33/R34: timer first
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R33", "R34", "R8")
@pytest.mark.parametrize("raises", [None, RuntimeError("disk gone")], ids=["success", "error"])
async def test_timer_first_reports_tool_timeout_over_success_and_error(
    raises: Exception | None, deadlines: list[Deadline]
) -> None:
    h = Harness()
    body = Cooperative(raises=raises)
    budgeted(h, body)
    _, c = controller()
    call = await h.call("t", signal=c)
    assert call.json == timed_out("100")
    assert now_ms() == pytest.approx(100)
    reason = body.signals[0].reason if body.signals[0] is not None else None
    assert isinstance(reason, TimeoutReason) and reason.deadline is deadlines[0]
    assert call.step("wrapper_returned").outcome == "tool_timeout"
    assert not c.aborted


@pytest.mark.rules("R8", "R33")
@pytest.mark.parametrize(
    ("ms", "written"), [(100, "100"), (1.5, "1.5"), (2.0, "2"), (0.25, "0.25")]
)
async def test_tool_timeout_writes_the_budget_as_javascript_does(ms: float, written: str) -> None:
    h = Harness()
    budgeted(h, Cooperative(), ms)
    call = await h.call("t", signal=controller()[1])
    assert call.json == timed_out(written)


@pytest.mark.rules("R8", "R33")
async def test_tool_timeout_in_the_revised_shape() -> None:
    h = Harness("revised")
    budgeted(h, Cooperative())
    call = await h.call("t", signal=controller()[1])
    assert call.json == canon(
        {
            "content": [text("Error: tool call timed out after 100ms")],
            "isError": True,
            "error": {
                "message": "tool call timed out after 100ms",
                "info": {"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"},
            },
        }
    )


@pytest.mark.rules("R34", "R33", "R28")
@pytest.mark.parametrize("where", ["body drain", "post-execute"])
async def test_a_caller_abort_after_the_timer_does_not_change_tool_timeout(where: str) -> None:
    h = Harness()
    drain, post_gate = Gate("drain"), Gate("post")
    budgeted(h, Cooperative(drain=drain))

    async def post(view: Execution, result: ToolResult) -> Accept:
        await post_gate.passage()
        return Accept()

    h.post(post)
    ctl, c = controller()
    task = h.start("t", signal=c)
    await drain.reached()  # the timer fired: the body is cleaning up
    assert now_ms() == pytest.approx(100)
    if where == "body drain":
        ctl.abort(RuntimeError("user stop"))
        drain.open()
        post_gate.open()
    else:
        drain.open()
        reached = asyncio.ensure_future(post_gate.reached())
        await asyncio.wait([reached, task], return_when=asyncio.FIRST_COMPLETED)
        assert post_gate.is_reached, f"the call settled before post-execute: {task}"
        ctl.abort(RuntimeError("user stop"))
        post_gate.open()
    call = await task
    assert call.json == timed_out("100")


# ------------------------------------------------------------------------------------------------
# R34: caller first
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R34", "R18")
async def test_caller_first_after_the_body_started_keeps_aborted_and_no_budget() -> None:
    h = Harness()
    body = Cooperative()
    budgeted(h, body)
    ctl, c = controller()
    timers = len(live_timers())
    task = h.start("t", signal=c)
    await body.started.wait()
    assert len(live_timers()) == timers + 1  # the deadline's timer is armed
    ctl.abort(RuntimeError("user stop"))
    call = await task
    assert call.json == aborted()
    assert now_ms() == 0
    assert len(live_timers()) == timers  # cleared, it will not fire later
    seen = body.signals[0]
    assert seen is not None and timeout_of(seen) is None


@pytest.mark.rules("R34", "R18")
async def test_caller_first_keeps_a_tool_failure() -> None:
    h = Harness()
    body = Cooperative(raises=RuntimeError("interrupted"))
    budgeted(h, body)
    ctl, c = controller()
    task = h.start("t", signal=c)
    await body.started.wait()
    ctl.abort()
    assert (await task).json == expected("Error: interrupted")


@pytest.mark.rules("R34", "R13")
async def test_caller_abort_during_pre_execute_never_reaches_the_wrapper(
    deadlines: list[Deadline],
) -> None:
    """D5: aborted at C1, the wrapper never runs, so no budget can be reported."""
    h = Harness()
    gate = Gate("pre")
    body = Cooperative()
    budgeted(h, body)

    async def pre(view: Execution) -> Any:
        await gate.passage()
        return Allow()

    h.pre(pre)
    ctl, c = controller()
    task = h.start("t", signal=c)
    await gate.reached()
    ctl.abort()
    gate.open()
    call = await task
    assert call.json == aborted()
    assert "wrapper_enter" not in call.events()
    assert deadlines == [] and body.signals == []


@pytest.mark.rules("R34", "R17", "R35")
async def test_caller_abort_before_the_policy_delegates_gives_aborted_at_c2(
    deadlines: list[Deadline],
) -> None:
    """An outer wrapper waits; the caller aborts; the policy's deadline is born aborted with the
    caller's reason, C2 stops the body, and no budget is reported."""
    h = Harness()
    gate = Gate("outer wrapper")
    body = Cooperative()
    budgeted(h, body)

    async def outer(view: Execution, next_: Next) -> ToolResult:
        await gate.passage()
        result: ToolResult = await next_()
        return result

    h.registry.add_around(outer, prepend=True)
    ctl, c = controller()
    why = RuntimeError("user stop")
    task = h.start("t", signal=c)
    await gate.reached()
    ctl.abort(why)
    gate.open()
    call = await task
    assert call.json == aborted()
    assert body.signals == []
    assert len(deadlines) == 1
    assert deadlines[0].signal.reason is why and not deadlines[0].fired_by_own_timer


@pytest.mark.rules("R25", "R35", "R33")
async def test_pre_aborted_entry_never_reports_tool_timeout(deadlines: list[Deadline]) -> None:
    """D6: the deadline is born aborted with the caller's reason; the body's success stands."""
    h = Harness()
    body = Cooperative()
    budgeted(h, body)
    why = RuntimeError("already gone")
    call = await h.call("t", signal=AbortSignal.abort(why))
    assert call.json == ok()
    seen = body.signals[0]
    assert seen is not None and seen.reason is why
    assert not deadlines[0].fired_by_own_timer and not deadlines[0].armed


# ------------------------------------------------------------------------------------------------
# Quiescence: never race
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R33", "R27", "R34")
async def test_an_uncooperative_body_keeps_the_call_pending_past_its_budget() -> None:
    h = Harness()
    release = Gate("release")
    seen: list[AbortSignal | None] = []

    async def stubborn(arguments: Any, view: Execution) -> Any:
        seen.append(view.signal)
        await release.passage()  # ignores its signal
        return [text("done anyway")]

    budgeted(h, stubborn)
    task = h.start("t", signal=controller()[1])
    await release.reached()
    await asyncio.sleep(0.5)  # five budgets of virtual time
    signal = seen[0]
    assert signal is not None and isinstance(signal.reason, TimeoutReason)
    await until_idle()
    assert not task.done(), "the call settled before its body did: the policy raced the body"
    assert h.notified == []
    release.open()
    call = await task
    assert call.json == timed_out("100")
    assert now_ms() == pytest.approx(1500)


# ------------------------------------------------------------------------------------------------
# R33: the slot, and the timer's lifetime
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R33", "R21", "R23")
@pytest.mark.parametrize("with_caller", [True, False], ids=["caller", "no-caller"])
async def test_slot_holds_the_deadline_inside_and_is_restored_after(
    with_caller: bool, deadlines: list[Deadline]
) -> None:
    h = Harness()
    body = Cooperative(work_ms=10)
    budgeted(h, body)
    inner_saw: list[AbortSignal | None] = []

    async def inner(view: Execution, next_: Next) -> ToolResult:
        inner_saw.append(view.signal)
        result: ToolResult = await next_()
        inner_saw.append(view.signal)
        return result

    h.registry.add_around(inner)  # after the policy: inside it
    post_saw: list[AbortSignal | None] = []

    async def post(view: Execution, result: ToolResult) -> Accept:
        post_saw.append(view.signal)
        return Accept()

    h.post(post)
    given = controller()[1] if with_caller else None
    call = await h.call("t", signal=given)
    # C: the call signal following `given` (P1); without a given signal there is no C (R26)
    c = call.view.call_signal if with_caller else None
    assert call.json == ok()
    d = deadlines[0]
    assert d.signal is not c and inner_saw == [d.signal, d.signal]
    if with_caller:
        assert body.signals[0] not in (c, d.signal)  # fused F (R21)
    else:
        assert body.signals[0] is d.signal
    assert post_saw == [c]
    assert call.view.signal is c  # what observers see
    assert not d.armed


@pytest.mark.rules("R33", "R22")
async def test_no_timer_and_no_listener_survive_the_call(deadlines: list[Deadline]) -> None:
    h = Harness()
    budgeted(h, Cooperative(work_ms=5))
    _, c = controller()
    timers = len(live_timers())
    call = await h.call("t", signal=c)
    assert call.json == ok()
    assert len(live_timers()) == timers
    assert c.listener_count == 0
    assert [d.armed for d in deadlines] == [False]
    await asyncio.sleep(1)
    assert not deadlines[0].signal.aborted  # disposed, never fires late


@pytest.mark.rules("R33", "R21")
async def test_a_tool_without_budget_passes_through_untouched(deadlines: list[Deadline]) -> None:
    h = Harness()
    body = Cooperative(work_ms=1000)
    h.registry.register("free", body)
    install_timeout_policy(h.registry)
    _, c = controller()
    call = await h.call("free", signal=c)
    assert call.json == ok()
    assert body.signals == [call.view.call_signal] and deadlines == []
    assert now_ms() == pytest.approx(1000)


@pytest.mark.rules("R33")
async def test_the_budget_comes_from_the_definition_the_calling_agent_sees() -> None:
    h = Harness()
    h.registry.register("t", Cooperative(work_ms=50))
    h.registry.register("t", Cooperative(work_ms=50), agent="hasty", timeout_ms=10)
    install_timeout_policy(h.registry)
    assert (await h.call("t", signal=controller()[1], agent="hasty")).json == timed_out("10")
    assert (await h.call("t", signal=controller()[1], agent="patient")).json == ok()


@pytest.mark.rules("R33")
async def test_uninstalling_removes_the_wrapper() -> None:
    h = Harness()
    body = Cooperative(work_ms=200)
    uninstall = budgeted(h, body)
    _, c = controller()
    assert (await h.call("t", signal=c)).json == timed_out("100")
    uninstall()
    uninstall()  # idempotent
    call = await h.call("t", signal=c)
    assert call.json == ok()
    assert body.signals[-1] is call.view.call_signal  # C itself: no deadline, no fusion
    assert "wrapper_enter" not in call.events()


@pytest.mark.rules("R33", "R16")
async def test_a_failing_inner_wrapper_still_restores_the_slot_and_clears_the_timer(
    deadlines: list[Deadline],
) -> None:
    h = Harness()
    budgeted(h, Cooperative())

    async def broken(view: Execution, next_: Next) -> ToolResult:
        raise RuntimeError("wrapper bug")

    h.registry.add_around(broken)
    post_calls: list[str] = []

    async def post(view: Execution, result: ToolResult) -> Accept:
        post_calls.append(view.call_id)
        return Accept()

    h.post(post)
    _, c = controller()
    timers = len(live_timers())
    call = await h.call("t", signal=c)
    assert call.json == expected("Error: wrapper bug")  # FINAL route: post skipped
    assert post_calls == []
    assert call.view.signal is call.view.call_signal and not deadlines[0].armed
    assert len(live_timers()) == timers


# ------------------------------------------------------------------------------------------------
# Nested budgets (open point D13): classification by identity, not code
# ------------------------------------------------------------------------------------------------


def nested(h: Harness, outer_ms: float, inner_ms: float) -> tuple[list[ToolResult], Cooperative]:
    """A budgeted composite ``outer`` whose body runs a budgeted ``inner`` under its own signal."""
    inner_results: list[ToolResult] = []
    inner_body = Cooperative()

    async def outer_body(arguments: Any, view: Execution) -> Any:
        result = await h.registry.execute(
            "inner", {}, signal=view.signal, agent=view.agent, parent=view.call_id
        )
        inner_results.append(result)
        return [text("outer saw: " + result.text)]

    h.registry.register("outer", outer_body, timeout_ms=outer_ms)
    h.registry.register("inner", inner_body, timeout_ms=inner_ms)
    install_timeout_policy(h.registry)
    return inner_results, inner_body


@pytest.mark.rules("R33", "R34", "R35")
async def test_an_outer_expiry_is_not_the_nested_calls_own_timeout() -> None:
    h = Harness()
    inner_results, inner_body = nested(h, outer_ms=100, inner_ms=500)
    call = await h.call("outer", signal=controller()[1])
    assert call.json == timed_out("100")
    assert now_ms() == pytest.approx(100)
    # The inner call saw the outer expiry as its upstream's abort: ordinary cancellation.
    assert inner_results[0].to_json() == aborted()
    # ...although classification by code alone would have claimed it for the inner budget:
    seen = inner_body.signals[0]
    assert seen is not None and timeout_of(seen, "TOOL_TIMEOUT") is not None
    assert h.notified[0].result.to_json() == aborted()  # the inner call's own notification


@pytest.mark.rules("R33", "R34", "R35")
async def test_a_nested_budget_that_expires_first_is_reported_by_the_nested_call() -> None:
    h = Harness()
    inner_results, _ = nested(h, outer_ms=100, inner_ms=40)
    call = await h.call("outer", signal=controller()[1])
    assert inner_results[0].to_json() == timed_out("40")
    assert call.json == ok("outer saw: Error: tool call timed out after 40ms")
    assert now_ms() == pytest.approx(40)
