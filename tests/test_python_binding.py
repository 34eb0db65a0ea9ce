"""The Python binding (CONTRACT.md, "Python binding"): task cancellation is the caller aborting.

Cancelling the task that awaits ``execute()`` -- directly, through ``asyncio.timeout`` or through
a failing ``TaskGroup`` sibling -- must abort the call signal, still await a started body to
quiescence, publish exactly one result, and only then re-raise ``CancelledError`` with the
task's cancellation count untouched.  Every wait of a call is tried.  Also here: ``CancelledError``
and interrupts raised by user code, the call signal (P1), ``in_flight()`` and the drain watchdog.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import pytest
from support import Gate, aborted, controller, expected, ok, text
from toolcancel import (
    AbortSignal,
    Accept,
    Allow,
    Approval,
    ApprovalRequest,
    Ask,
    Execution,
    TaskCancelled,
    ToolRegistry,
    ToolResult,
)

WAITS = ("pre", "approval", "wrapper_before", "body", "wrapper_after", "post", "observer")
"""Every point where a call can wait on user code, in pipeline order."""


@dataclass
class Rig:
    """A registry whose every hook stops at a gate named after its wait, and records what ran."""

    stop_at: str
    revision: str = "seed"
    registry: ToolRegistry = field(init=False)
    gate: Gate = field(init=False)
    ran: list[str] = field(default_factory=list)
    published: list[ToolResult] = field(default_factory=list)
    body_signal: AbortSignal | None = None
    body_settled_aborted: bool | None = None
    body_settled_before_publish: bool = False

    def __post_init__(self) -> None:
        self.gate = Gate(self.stop_at)
        reg = self.registry = ToolRegistry(revision=self.revision)

        async def wait(where: str) -> None:
            self.ran.append(where)
            if where == self.stop_at:
                await self.gate.passage()

        async def pre(view: Execution, nxt: Any) -> Any:
            await wait("pre")
            return Ask("needs a human")

        async def seam(request: ApprovalRequest) -> Approval:
            await wait("approval")
            return Approval.APPROVED

        async def wrapper(view: Execution, nxt: Any) -> ToolResult:
            await wait("wrapper_before")
            result: ToolResult = await nxt()
            await wait("wrapper_after")
            return result

        async def body(args: Any, view: Execution) -> Any:
            self.body_signal = view.signal
            self.ran.append("body_start")
            await wait("body")  # uncooperative: only the gate ends it
            self.body_settled_aborted = view.signal is not None and view.signal.aborted
            self.ran.append("body_settle")
            return [text("done")]

        async def post(view: Execution, result: ToolResult, nxt: Any) -> Any:
            await wait("post")
            return Accept()

        async def observer(view: Execution, result: ToolResult) -> None:
            self.body_settled_before_publish = "body_settle" in self.ran
            self.published.append(result)
            await wait("observer")

        reg.add_pre_execute(pre)
        reg.set_approval(seam)
        reg.add_around(wrapper)
        reg.register("t", body)
        reg.add_post_execute(post)
        reg.add_observer(observer)

    def start(self, signal: AbortSignal | None) -> asyncio.Task[ToolResult]:
        return asyncio.get_running_loop().create_task(
            self.registry.execute("t", {"q": 1}, signal=signal, call_id="c1", agent="agent")
        )


# What the one published result is when the task is cancelled at each wait (seed): before the
# body, C1/C2 turn the call into ABORTED without starting the body; during the body the late
# success becomes ABORTED (R28); after it, C3/C4 still see the abort; at the observer the result
# was already published as the success.
SEED_RESULT = {
    "pre": aborted(),
    "approval": aborted(),
    "wrapper_before": aborted(),
    "body": aborted(),
    "wrapper_after": aborted(),
    "post": aborted(),
    "observer": ok("done"),
}


@pytest.mark.rules("R27", "R31")
@pytest.mark.parametrize("where", WAITS)
async def test_cancelling_the_awaiting_task_at_every_wait(where: str) -> None:
    rig = Rig(where)
    c, signal = controller()
    task = rig.start(signal)
    await rig.gate.reached()
    assert task.cancel("shutting down")
    for _ in range(5):  # the call is parked at the gate: the task does not finish, however long
        await asyncio.sleep(0)
    assert not task.done(), "the call was abandoned at the first cancellation"
    assert task.cancel()  # a second cancellation while draining changes nothing
    await asyncio.sleep(0)
    assert not task.done()
    rig.gate.open()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert len(rig.published) == 1, "exactly one result is published"
    assert rig.published[0].to_json() == SEED_RESULT[where]
    if where in ("pre", "approval", "wrapper_before"):
        assert "body_start" not in rig.ran  # no body starts after a live cancellation
    if "body_start" in rig.ran:
        assert rig.body_settled_before_publish  # drained to quiescence before the result
    if where == "body":
        assert rig.body_settled_aborted is True  # the body was told, through its signal
        assert rig.body_signal is not None
        assert isinstance(rig.body_signal.reason, TaskCancelled)
        assert "shutting down" in str(rig.body_signal.reason)
    assert not c.signal.aborted, "the caller's own signal belongs to the caller"
    assert c.signal.listener_count == 0, "the caller's signal keeps no listener (R22)"


@pytest.mark.parametrize("where", WAITS)
async def test_the_caller_aborting_after_the_task_was_cancelled_is_one_caller_abort(
    where: str,
) -> None:
    """Task cancellation aborted the call signal C first; the caller's own abort afterwards finds
    C aborted already: the machine sees one caller abort, and the call ends as for the first."""
    rig = Rig(where)
    c, signal = controller()
    paths: list[list[str]] = []
    rig.registry.add_observer(lambda view, result: paths.append([s.event for s in view.path]))
    task = rig.start(signal)
    await rig.gate.reached()
    task.cancel()
    await asyncio.sleep(0)
    c.abort("the caller too")
    rig.gate.open()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [r.to_json() for r in rig.published] == [SEED_RESULT[where]]
    assert paths[0].count("caller_abort") == (0 if where == "observer" else 1), paths[0]
    if where == "body":
        assert rig.body_signal is not None and isinstance(rig.body_signal.reason, TaskCancelled)


@pytest.mark.parametrize("where", WAITS)
async def test_asyncio_timeout_still_raises_timeout_error(where: str) -> None:
    rig = Rig(where)
    _, signal = controller()
    loop = asyncio.get_running_loop()

    async def caller() -> None:
        async with asyncio.timeout(None) as scope:
            work = rig.registry.execute("t", {}, signal=signal, call_id="c1", agent="agent")
            expire = loop.create_task(expire_when_reached(scope))
            try:
                await work
            finally:
                await expire

    async def expire_when_reached(scope: asyncio.Timeout) -> None:
        await rig.gate.reached()
        scope.reschedule(loop.time())  # the deadline passes now
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        parked = len(rig.published)  # 0, or 1 when parked in the observer
        rig.gate.open()
        assert parked == (1 if where == "observer" else 0)  # cancelled, still not finished

    with pytest.raises(TimeoutError):
        await caller()
    assert len(rig.published) == 1
    assert rig.published[0].to_json() == SEED_RESULT[where]
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0  # the timeout uncancelled its own


async def test_a_failing_task_group_sibling_cancels_the_call_cooperatively() -> None:
    rig = Rig("body")
    _, signal = controller()

    async def sibling() -> None:
        await rig.gate.reached()
        raise ValueError("sibling failed")

    async def release() -> None:
        while rig.body_signal is None or not rig.body_signal.aborted:
            await asyncio.sleep(0)
        rig.gate.open()

    opener = asyncio.get_running_loop().create_task(release())
    with pytest.raises(ExceptionGroup) as caught:
        async with asyncio.TaskGroup() as group:
            group.create_task(
                rig.registry.execute("t", {}, signal=signal, call_id="c1", agent="agent")
            )
            group.create_task(sibling())
    await opener
    assert [type(e) for e in caught.value.exceptions] == [ValueError]
    assert rig.published[0].to_json() == aborted()
    assert rig.body_settled_aborted is True


@pytest.mark.rules("R26")
async def test_without_a_signal_task_cancellation_tells_only_the_call_signal() -> None:
    rig = Rig("body")
    task = rig.start(None)
    await rig.gate.reached()
    task.cancel()
    await asyncio.sleep(0)
    assert rig.body_signal is None and not task.done()
    rig.gate.open()
    with pytest.raises(asyncio.CancelledError):
        await task
    # R26: only a wrapper's signal can cause ABORTED; a body ignoring its call signal (P1) ran to
    # its own result (tests/test_binding_entry.py has one that watches it).
    assert [r.to_json() for r in rig.published] == [ok("done")]


@pytest.mark.parametrize("revision", ["seed", "revised"])
async def test_a_task_cancelled_before_it_first_ran_the_call_still_publishes_it(
    revision: str,
) -> None:
    # execute() entered the call when it was called (P0): a cancellation delivered before the
    # task's first step is a caller abort after entry, like any other (P2).
    rig = Rig("pre", revision)
    _, signal = controller()
    task = rig.start(signal)
    assert [c.state for c in rig.registry.in_flight()] == ["pre_policy"]
    task.cancel()
    await rig.gate.reached()
    rig.gate.open()
    with pytest.raises(asyncio.CancelledError):
        await task
    code = "ABORTED" if revision == "seed" else "ABORTED_BEFORE_DISPATCH"
    assert [r.error.code if r.error else None for r in rig.published] == [code]
    assert "body_start" not in rig.ran and "post" in rig.ran  # seen at C1: the post route
    assert rig.registry.in_flight() == []


async def test_user_code_runs_in_a_real_task_of_its_own() -> None:
    reg = ToolRegistry()
    seen: list[asyncio.Task[Any] | None] = []
    gate = Gate()

    async def pre(view: Execution, nxt: Any) -> Any:
        seen.append(asyncio.current_task())
        return Allow()

    async def body(args: Any, view: Execution) -> Any:
        await gate.passage()
        seen.append(asyncio.current_task())
        return [text("ok")]

    reg.add_pre_execute(pre)
    reg.register("t", body)
    tasks_before = len(asyncio.all_tasks())
    call = asyncio.get_running_loop().create_task(reg.execute("t", signal=controller()[1]))
    await gate.reached()
    assert len(asyncio.all_tasks()) == tasks_before + 2  # the awaiting task, and the call's
    gate.open()
    assert (await call).to_json() == ok()
    # current_task() inside is a real asyncio.Task, the call's, the same for every step
    assert all(isinstance(t, asyncio.Task) for t in seen) and seen[0] is seen[1]
    assert seen[0] is not call and seen[0].done()  # type: ignore[union-attr]


# -- user code's own cancellations: asyncio.timeout, TaskGroup, cancelling itself ----------------


def _timing_out_body(reg: ToolRegistry, gate: Gate, log: list[str]) -> None:
    async def body(args: Any, view: Execution) -> Any:
        try:
            async with asyncio.timeout(0):  # expires at the next turn of the loop
                await gate.passage()
        except TimeoutError:
            log.append("timed out")
            return [text("gave up waiting")]
        return [text("gate opened")]

    reg.register("t", body)


async def test_a_bodys_own_asyncio_timeout_fires_into_the_body_not_the_call() -> None:
    reg, gate, log = ToolRegistry(), Gate(), []
    _timing_out_body(reg, gate, log)
    result = await reg.execute("t", signal=controller()[1], call_id="own-timeout")
    assert log == ["timed out"] and not gate.passed
    assert result.to_json() == ok("gave up waiting")  # the caller asked nothing: not ABORTED
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_bodys_own_timeout_inside_a_caller_timeout_is_told_apart() -> None:
    reg = ToolRegistry()
    inner_fired: list[str] = []
    gate = Gate()

    async def body(args: Any, view: Execution) -> Any:
        try:
            async with asyncio.timeout(3600):  # the body's own, far away
                await gate.passage()
        except TimeoutError:
            inner_fired.append("inner")
        return [text("late")]

    reg.register("t", body)
    published: list[str] = []
    reg.add_observer(lambda view, result: published.append(result.to_json()))
    task = asyncio.get_running_loop().create_task(reg.execute("t", signal=controller()[1]))
    await gate.reached()
    task.cancel()  # the caller's own cancellation: the call is aborted, the body drains
    await asyncio.sleep(0)
    gate.open()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The caller's cancellation never reached the body (it waited at its gate until opened, its
    # own timeout untouched): its late success became ABORTED, the caller's cancellation.
    assert gate.passed and inner_fired == []
    assert published == [aborted()]


async def test_a_task_group_in_a_body_cancels_its_own_block() -> None:
    reg = ToolRegistry()
    gate = Gate()

    async def fails() -> None:
        raise ValueError("one child failed")

    async def body(args: Any, view: Execution) -> Any:
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(gate.passage())
                group.create_task(fails())
        except ExceptionGroup as group_failed:
            return [text(f"the group stopped: {group_failed.exceptions[0]}")]
        return [text("unreachable")]

    reg.register("t", body)
    result = await reg.execute("t", signal=controller()[1])
    assert result.to_json() == ok("the group stopped: one child failed") and not gate.passed


async def test_a_body_cancelling_itself_fails_like_any_cancelled_error() -> None:
    reg = ToolRegistry()

    async def body(args: Any, view: Execution) -> Any:
        asyncio.current_task().cancel()  # type: ignore[union-attr]
        await asyncio.sleep(0)
        return [text("unreachable")]

    reg.register("t", body)
    result = await reg.execute("t", signal=controller()[1])
    assert result.to_json() == thrown("")  # the body's failure (no message), not ABORTED


async def test_a_nested_call_under_a_bodys_own_timeout_is_aborted_as_its_caller() -> None:
    reg = ToolRegistry()
    gate = Gate()

    async def slow(args: Any, view: Execution) -> Any:
        await gate.passage()
        return [text("slow done")]

    async def outer(args: Any, view: Execution) -> Any:
        try:
            async with asyncio.timeout(0):
                await reg.execute("slow", signal=view.signal, call_id="nested")
        except TimeoutError:
            return [text("nested timed out")]
        return [text("unreachable")]

    reg.register("slow", slow)
    reg.register("outer", outer)
    published: list[tuple[str, Any]] = []
    reg.add_observer(lambda view, result: published.append((view.call_id, result.to_json())))
    task = asyncio.get_running_loop().create_task(reg.execute("outer", signal=controller()[1]))
    await gate.reached()
    await asyncio.sleep(0)
    gate.open()  # the nested body drains: its call is aborted (P2), then the timeout fires
    assert (await task).to_json() == ok("nested timed out")
    assert published[0][0] == "nested" and published[0][1] == aborted()


# -- user code raising CancelledError, KeyboardInterrupt, SystemExit ---------------------------


def thrown(message: str) -> str:
    return expected(f"Error: {message}")


@pytest.mark.rules("R3")
async def test_a_body_raising_cancelled_error_is_the_bodys_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reg = ToolRegistry()

    async def body(args: Any, view: Execution) -> Any:
        await asyncio.sleep(0)
        raise asyncio.CancelledError("gave up")

    reg.register("t", body)
    with caplog.at_level(logging.INFO, logger="toolcancel.runtime.registry"):
        result = await reg.execute("t", signal=controller()[1], call_id="c-77")
    assert result.to_json() == thrown("gave up")
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0  # the caller was not cancelled
    assert any("c-77" in r.getMessage() and "CancelledError" in r.getMessage()
               for r in caplog.records)


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("suspends", [False, True])
def test_an_interrupt_publishes_once_then_propagates(
    interrupt: type[BaseException], suspends: bool
) -> None:
    """Run on a plain loop: an interrupt escaping a task stops the loop, as asyncio intends."""
    reg = ToolRegistry()
    published: list[str] = []
    post_ran: list[bool] = []

    async def body(args: Any, view: Execution) -> Any:
        if suspends:
            await asyncio.sleep(0)
        raise interrupt("stop")

    async def post(view: Execution, result: ToolResult, nxt: Any) -> Any:
        post_ran.append(True)
        return Accept()

    reg.register("t", body)
    reg.add_post_execute(post)
    reg.add_observer(lambda view, result: published.append(result.to_json()))
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(interrupt):
            loop.run_until_complete(reg.execute("t", signal=controller()[1]))
        assert published == [thrown("stop")] and post_ran == [True]
    finally:
        for task in asyncio.all_tasks(loop):
            task.cancel()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()


# -- the call signal (P1) -----------------------------------------------------------------------


@pytest.mark.rules("R21", "R22", "R24")
async def test_the_call_signal_follows_the_callers_signal() -> None:
    c, signal = controller()
    reg = ToolRegistry()
    seen: dict[str, Any] = {}
    gate = Gate()

    async def pre(view: Execution, nxt: Any) -> Any:
        seen["pre"] = view.signal
        return Allow()

    async def body(args: Any, view: Execution) -> Any:
        seen["body"] = view.signal
        seen["call"] = view.call_signal
        await gate.passage()
        return [text("ok")]

    reg.add_pre_execute(pre)
    reg.register("t", body)
    task = asyncio.get_running_loop().create_task(reg.execute("t", signal=signal))
    await gate.reached()
    k = seen["call"]
    assert seen["pre"] is k and seen["body"] is k  # one call signal, C, everywhere
    assert k is not signal and not k.aborted
    assert signal.listener_count == 1  # the call signal's follower
    reason = RuntimeError("user pressed stop")
    c.abort(reason)
    assert k.aborted and k.reason is reason  # synchronously, with the caller's reason
    gate.open()
    assert (await task).to_json() == aborted()
    assert signal.listener_count == 0


# -- in_flight() and the drain watchdog (P5) ----------------------------------------------------


async def test_in_flight_lists_calls_until_they_materialize() -> None:
    rigs = {where: Rig(where) for where in ("pre", "approval", "body")}
    controllers = {}
    tasks = {}
    for where, rig in rigs.items():
        controllers[where], signal = controller()
        tasks[where] = rig.start(signal)
        await rig.gate.reached()
    await asyncio.sleep(5)  # virtual seconds
    controllers["body"].abort()
    listed = {w: rig.registry.in_flight() for w, rig in rigs.items()}
    assert {w: [(f.call_id, f.name, f.state) for f in v] for w, v in listed.items()} == {
        "pre": [("c1", "t", "pre_policy")],
        "approval": [("c1", "t", "approval")],
        "body": [("c1", "t", "draining")],
    }
    assert listed["pre"][0].seconds == pytest.approx(5.0)
    assert listed["body"][0].seconds == 0.0 and listed["body"][0].aborted
    assert not listed["pre"][0].aborted
    for where, rig in rigs.items():
        rig.gate.open()
        await tasks[where]
        assert rig.registry.in_flight() == []


def _time_in_state(reg: ToolRegistry) -> list[tuple[str, float]]:
    return [(s.state, s.seconds) for s in reg.in_flight()]


async def test_in_flight_times_every_state_someone_else_can_ask_in() -> None:
    """The call's clock is not read for the states the driver leaves synchronously; in every
    state where code of someone else's runs -- the scheduler's between stages, a wrapper's after
    its next(), a tap's or a trace sink's at each step -- the time is the time since it entered."""
    reg = ToolRegistry()
    asked: list[list[tuple[str, float]]] = []

    async def body(args: Any, view: Execution) -> Any:
        await asyncio.sleep(5)
        return [text("ok")]

    reg.register("t", body)
    staged = reg.begin("t", signal=controller()[1])
    await asyncio.sleep(1)
    assert _time_in_state(reg) == [("pre_policy", 1.0)]
    assert await staged.prepare()
    await asyncio.sleep(3)
    assert _time_in_state(reg) == [("around_before", 3.0)]  # the scheduler's, between stages
    await staged.dispatch()
    await asyncio.sleep(4)
    assert _time_in_state(reg) == [("post_policy", 4.0)]
    await staged.finalize()

    async def wrapper(view: Execution, next_: Any) -> Any:
        result = await next_()
        await asyncio.sleep(2)
        asked.append(_time_in_state(reg))  # after a 5 s body: 2 s in around_after
        return result

    reg.add_around(wrapper)
    await reg.execute("t", signal=controller()[1])
    assert asked == [[("around_after", 2.0)]]


@pytest.mark.parametrize("observer", ["tap", "trace sink"])
async def test_in_flight_asked_at_each_step_by_a_tap_or_a_trace_sink(observer: str) -> None:
    """A tap or a trace sink runs at every step, also into the states the driver leaves at once
    (``around_after`` without wrappers, ``finalizing``, ``materialized``): each sees the state
    just entered, for no time, not for the 5 s the body took."""
    seen: list[tuple[str, float]] = []

    def ask(*_: Any) -> None:
        seen.extend(_time_in_state(reg))

    reg = ToolRegistry(on_step=ask) if observer == "tap" else ToolRegistry(trace=ask)

    async def body(args: Any, view: Execution) -> Any:
        await asyncio.sleep(5)
        return [text("ok")]

    reg.register("t", body)
    await reg.execute("t", signal=controller()[1])
    states = [state for state, _ in seen]
    after_body = seen[len(states) - states[::-1].index("body") :]
    assert {state for state, _ in after_body} >= {"around_after", "finalizing", "materialized"}
    assert all(seconds == 0.0 for _, seconds in after_body), after_body


async def test_the_drain_watchdog_warns_once_and_never_abandons(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reg = ToolRegistry(drain_warning=2.0)
    gate = Gate()

    async def stubborn(args: Any, view: Execution) -> Any:
        await gate.passage()  # ignores its signal
        return [text("late")]

    reg.register("t", stubborn)
    c, signal = controller()
    task = asyncio.get_running_loop().create_task(reg.execute("t", signal=signal, call_id="c-9"))
    await gate.reached()
    with caplog.at_level(logging.WARNING, logger="toolcancel.runtime.registry"):
        await asyncio.sleep(10)  # long before any abort: not draining, no warning
        assert caplog.records == []
        c.abort()
        await asyncio.sleep(1.5)
        assert caplog.records == []
        await asyncio.sleep(1)
        assert [r.getMessage() for r in caplog.records] == [
            "call c-9 (t): the body is still running 2s after its signal aborted (state "
            "draining); the registry keeps waiting for it (R27) -- make the body watch its signal"
        ]
        await asyncio.sleep(100)
        assert len(caplog.records) == 1 and not task.done()  # once, and still waiting
        gate.open()
        assert (await task).to_json() == aborted()
    assert len(caplog.records) == 1


async def test_a_body_that_cooperates_in_time_is_not_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reg = ToolRegistry(drain_warning=2.0)

    async def prompt(args: Any, view: Execution) -> Any:
        from toolcancel.runtime.cooperate import aborted as wait_aborted

        assert view.signal is not None
        await wait_aborted(view.signal)
        await asyncio.sleep(1)  # cleanup takes a second: within the threshold
        return [text("stopped")]

    reg.register("t", prompt)
    c, signal = controller()
    task = asyncio.get_running_loop().create_task(reg.execute("t", signal=signal))
    await asyncio.sleep(0)
    c.abort()
    with caplog.at_level(logging.WARNING, logger="toolcancel.runtime.registry"):
        assert (await task).to_json() == aborted()
        await asyncio.sleep(10)
    assert caplog.records == []


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "2"])
def test_drain_warning_must_be_a_number_of_seconds(bad: Any) -> None:
    from toolcancel import RegistryUsageError

    with pytest.raises(RegistryUsageError, match="drain_warning"):
        ToolRegistry(drain_warning=bad)


def test_a_signal_aborted_while_its_loop_is_not_running_still_steps_the_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Synchronous code between two runs of the loop (a test world, a REPL driving a loop by
    hand) aborts the caller while the body runs: the call steps into draining on the loop it
    runs on -- its drain warning is that loop's timer -- and its trace says so; no listener
    fails, and the late success is published as ABORTED."""
    loop = asyncio.new_event_loop()
    try:
        lines: list[dict[str, Any]] = []
        reg = ToolRegistry(drain_warning=0.0, trace=lines.append)
        started, release = asyncio.Event(), asyncio.Event()

        async def stubborn(args: Any, view: Execution) -> Any:
            started.set()
            await release.wait()  # ignores its signal
            return [text("late")]

        reg.register("t", stubborn)
        c, signal = controller()
        with caplog.at_level(logging.WARNING):
            task = loop.create_task(reg.execute("t", signal=signal, call_id="c-1"))
            loop.run_until_complete(started.wait())
            c.abort()  # no loop runs now
            assert lines[-1]["event"] == "caller_abort"  # into draining, now
            loop.run_until_complete(asyncio.sleep(0))  # the drain warning: the call's loop's
            assert [r.getMessage().split(":")[0] for r in caplog.records] == ["call c-1 (t)"]
            release.set()
            assert loop.run_until_complete(task).to_json() == aborted()
    finally:
        loop.close()
