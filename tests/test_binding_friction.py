"""The Python binding where a port of the original meets it: turns that obey task cancellation,
cooperation helpers that end in ABORTED, interrupts, the approval service, and the small
frictions of issue 15 (each a test)."""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import signal
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from support import Gate, aborted, controller, ok, text
from toolcancel import (
    AbortController,
    AbortError,
    Approval,
    ApprovalRequest,
    Ask,
    ErrorInfo,
    Execution,
    InvalidBudget,
    RegistryUsageError,
    TaskCancelled,
    ToolCallRequest,
    ToolRegistry,
    ToolResult,
    TurnScheduler,
)
from toolcancel.runtime.approval import ApprovalService
from toolcancel.runtime.cooperate import aborted as until_aborted
from toolcancel.runtime.cooperate import cancellable, throw_if_aborted

REVISED_ABORTED = (
    '{"content":[{"text":"Error: tool call aborted","type":"text"}],'
    '"error":{"info":{"code":"ABORTED","name":"AbortError"},'
    '"message":"tool call aborted"},"isError":true}'
)

# -- run_turn: task cancellation aborts the turn, drains, then re-raises -----------------------


@pytest.mark.rules("R36", "R37", "R27")
@pytest.mark.parametrize("how", ["cancel", "timeout"])
async def test_cancelling_run_turn_aborts_the_turn_drains_then_reraises(how: str) -> None:
    reg = ToolRegistry()
    gate = Gate("body")
    reasons: list[object] = []
    hooks_saw_cancel: list[str] = []

    async def body(args: Any, call: Execution) -> Any:
        try:
            await gate.passage()  # uncooperative: only the gate ends it
        except asyncio.CancelledError:
            hooks_saw_cancel.append(call.call_id)
            raise
        assert call.signal is not None
        reasons.append(call.signal.reason)
        return [text("done")]

    reg.register("t", body)  # not parallel-safe: one call at a time
    calls = [ToolCallRequest("c0", "t"), ToolCallRequest("c1", "t")]
    turn_signal = AbortController().signal
    loop = asyncio.get_running_loop()

    async def turn() -> Any:
        if how == "timeout":
            async with asyncio.timeout(None) as scope:
                expire = loop.create_task(expire_when_reached(scope))
                try:
                    return await TurnScheduler(reg).run_turn(calls, signal=turn_signal)
                finally:
                    await expire
        return await TurnScheduler(reg).run_turn(calls, signal=turn_signal)

    async def expire_when_reached(scope: asyncio.Timeout) -> None:
        await gate.reached()
        scope.reschedule(loop.time())

    task = loop.create_task(turn())
    await gate.reached()
    if how == "cancel":
        task.cancel("user left")
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not task.done()  # the started body is drained, never abandoned
    gate.open()
    with pytest.raises(TimeoutError if how == "timeout" else asyncio.CancelledError):
        await task
    assert hooks_saw_cancel == []
    [reason] = reasons
    assert isinstance(reason, TaskCancelled)
    assert turn_signal.listener_count == 0
    assert reg.in_flight() == []


async def test_run_turn_cancelled_still_commits_a_balanced_log() -> None:
    reg = ToolRegistry()
    gate = Gate("body")

    async def body(args: Any, call: Execution) -> Any:
        await gate.passage()
        return [text("done")]

    reg.register("t", body)
    from toolcancel import TurnLog

    log = TurnLog()
    calls = [ToolCallRequest("c0", "t"), ToolCallRequest("c1", "t")]
    task = asyncio.get_running_loop().create_task(
        TurnScheduler(reg).run_turn(calls, signal=controller()[1], log=log)
    )
    await gate.reached()
    task.cancel()
    gate.open()
    with pytest.raises(asyncio.CancelledError):
        await task
    kinds = [(e.kind, e.call_id) for e in log]
    assert kinds == [
        ("tool/call", "c0"),
        ("tool/result", "c0"),
        ("tool/call", "c1"),  # never started: the synthetic pair (R37)
        ("tool/result", "c1"),
    ]
    assert log.entries[1].payload["error"]["code"] == "ABORTED"  # the late success (R28)


async def test_the_scheduler_runs_tools_one_at_a_time_unless_declared_parallel_safe() -> None:
    reg = ToolRegistry()
    active = 0
    most: dict[str, int] = {}

    async def body(args: Any, call: Execution) -> Any:
        nonlocal active
        active += 1
        most[call.name] = max(most.get(call.name, 0), active)
        await asyncio.sleep(1)
        active -= 1
        return [text("ok")]

    reg.register("serial", body)
    reg.register("parallel", body, parallel_safe=True)
    signal = controller()[1]
    scheduler = TurnScheduler(reg)
    await scheduler.run_turn([ToolCallRequest(f"s{i}", "serial") for i in range(3)], signal=signal)
    await scheduler.run_turn(
        [ToolCallRequest(f"p{i}", "parallel") for i in range(3)], signal=signal
    )
    assert most == {"serial": 1, "parallel": 3}
    assert ToolCallRequest("x", "serial").exclusive is None  # follows the tool by default


# -- the cooperation helpers end in ABORTED ------------------------------------------------------


def _body_using(helper: str) -> Any:
    async def body(args: Any, call: Execution) -> Any:
        if helper == "cancellable":
            await cancellable(call, asyncio.sleep(3600))
        elif helper == "aborted":
            await until_aborted(call)
            throw_if_aborted(call)
        else:  # throw_if_aborted after some work that ignored the signal
            await asyncio.sleep(5)
            throw_if_aborted(call)
        return [text("finished")]

    return body


@pytest.mark.rules("R3", "R4")
@pytest.mark.parametrize("revision", ["seed", "revised"])
@pytest.mark.parametrize("helper", ["cancellable", "aborted", "throw_if_aborted"])
@pytest.mark.parametrize("source", ["caller", "task"])
async def test_the_documented_cooperative_patterns_end_in_aborted(
    revision: str, helper: str, source: str
) -> None:
    reg = ToolRegistry(revision=revision)
    started = asyncio.Event()
    body = _body_using(helper)

    async def tool(args: Any, call: Execution) -> Any:
        started.set()
        return await body(args, call)

    reg.register("t", tool)
    published: list[ToolResult] = []
    reg.add_observer(lambda view, result: published.append(result))
    caller = AbortController()
    task = asyncio.get_running_loop().create_task(
        reg.execute("t", signal=caller.signal, call_id="c-secret")
    )
    await started.wait()
    if source == "caller":
        caller.abort()
    else:
        task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        assert source == "task"
    [result] = published
    assert result.to_json() == (aborted() if revision == "seed" else REVISED_ABORTED)
    assert "c-secret" not in result.to_json()


async def test_raising_the_reason_itself_still_carries_the_aborted_code() -> None:
    # signal.throw_if_aborted() raises the reason; a TaskCancelled reason is a structured
    # error with code ABORTED whose text does not leak the call id.
    reg = ToolRegistry()
    started = asyncio.Event()

    async def body(args: Any, call: Execution) -> Any:
        started.set()
        await until_aborted(call)
        assert call.signal is not None
        call.signal.throw_if_aborted()
        return [text("unreachable")]

    reg.register("t", body)
    published: list[ToolResult] = []
    reg.add_observer(lambda view, result: published.append(result))
    task = asyncio.get_running_loop().create_task(
        reg.execute("t", signal=controller()[1], call_id="c-42")
    )
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [result] = published
    assert result.error == ErrorInfo("TaskCancelled", "ABORTED")
    assert "c-42" not in result.text


async def test_a_body_that_raises_something_else_keeps_its_failure() -> None:
    # R3/R19: more specific failures survive; only a success becomes ABORTED.
    reg = ToolRegistry()
    started = asyncio.Event()

    async def body(args: Any, call: Execution) -> Any:
        started.set()
        try:
            await cancellable(call, asyncio.sleep(3600))
        except AbortError:
            raise RuntimeError("upload left half a file") from None
        return [text("done")]

    reg.register("t", body)
    caller = AbortController()
    task = asyncio.get_running_loop().create_task(reg.execute("t", signal=caller.signal))
    await started.wait()
    caller.abort()
    result = await task
    assert result.text == "Error: upload left half a file" and result.error is None


# -- interrupts: asyncio.Runner's convention ---------------------------------------------------


def test_a_cancellation_during_an_interrupt_abandons_the_call_and_logs_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # What asyncio.run() does after a second Ctrl-C: the KeyboardInterrupt propagates, and its
    # teardown cancels the remaining tasks and runs the loop *while handling* that interrupt.
    loop = asyncio.new_event_loop()
    try:
        reg = ToolRegistry()
        reached = loop.create_future()

        async def stubborn(args: Any, call: Execution) -> Any:
            reached.set_result(None)
            await loop.create_future()  # ignores its signal, never ends
            return [text("done")]

        reg.register("t", stubborn)
        published: list[ToolResult] = []
        reg.add_observer(lambda view, result: published.append(result))
        task = loop.create_task(reg.execute("t", signal=controller()[1], call_id="c7"))
        loop.run_until_complete(reached)
        task.cancel()  # the first interrupt (asyncio.Runner cancels the main task): abort, drain
        loop.run_until_complete(asyncio.sleep(0))

        async def states() -> list[str]:
            return [c.state for c in reg.in_flight()]

        assert loop.run_until_complete(states()) == ["draining"]
        with caplog.at_level(logging.ERROR, logger="toolcancel.runtime.registry"):
            try:
                raise KeyboardInterrupt  # the second interrupt
            except KeyboardInterrupt:
                task.cancel()
                loop.run_until_complete(asyncio.wait([task]))
        assert task.cancelled()
        assert loop.run_until_complete(states()) == [] and published == []
        assert "c7" in caplog.text and "abandoned" in caplog.text
    finally:
        loop.close()


RUNNER_SCRIPT = textwrap.dedent(
    """
    import asyncio, logging, signal
    from toolcancel import AbortController, ToolRegistry

    # Ctrl-C as a terminal delivers it.  A process started in the background by a shell without
    # job control (as CI may start the suite) inherits SIGINT *ignored*; Python then installs
    # no handler, asyncio.run() none either, and the interrupts below would never arrive.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    logging.basicConfig(level=logging.ERROR, format="%(message)s")
    registry = ToolRegistry()
    ran = []

    def ctrl_c():
        signal.raise_signal(signal.SIGINT)

    @registry.tool("stubborn")
    async def stubborn(args, call):
        ran.append("started")
        loop = asyncio.get_running_loop()
        loop.call_soon(ctrl_c)                    # the first Ctrl-C, while the body runs
        while True:                               # ignores its signal
            await asyncio.sleep(0.01)
            if registry.in_flight()[0].state == "draining" and len(ran) == 1:
                ran.append("draining")
                loop.call_soon(ctrl_c)            # the second Ctrl-C

    async def main():
        await registry.execute("stubborn", signal=AbortController().signal, call_id="c1")

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        print("interrupted", ran)
    """
)


@pytest.mark.slow
def test_a_second_ctrl_c_gets_out_of_asyncio_run() -> None:
    done = subprocess.run(
        [sys.executable, "-c", RUNNER_SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        # the worst case, always: started with SIGINT ignored, like a background job's child
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert done.stdout.strip() == "interrupted ['started', 'draining']", done.stderr
    # the one ERROR line, and nothing else: not asyncio's "unhandled exception during
    # asyncio.run() shutdown" for the call's own task, nor the garbage collector's reports
    [line] = done.stderr.splitlines()
    assert line.startswith("call c1 (stubborn): abandoned in state draining"), done.stderr


TRIO_RUNNER_SCRIPT = textwrap.dedent(
    """
    import logging, signal
    import anyio, trio
    from toolcancel import AbortController, ToolRegistry

    signal.signal(signal.SIGINT, signal.default_int_handler)  # as RUNNER_SCRIPT says
    logging.basicConfig(level=logging.ERROR, format="%(message)s")
    registry = ToolRegistry()
    ran = []

    def ctrl_c():
        signal.raise_signal(signal.SIGINT)

    @registry.tool("stubborn")
    async def stubborn(args, call):
        ran.append("started")
        token = trio.lowlevel.current_trio_token()
        token.run_sync_soon(ctrl_c)  # two Ctrl-Cs while the body runs, delivered as a terminal's
        token.run_sync_soon(ctrl_c)  # are: outside user code, to the run
        while True:                  # ignores its signal
            await trio.sleep(0)

    registry.add_observer(lambda view, result: ran.append(("published", result.is_error)))

    async def main():
        try:
            await registry.execute("stubborn", signal=AbortController().signal, call_id="c1")
        finally:
            ran.append(("in flight", len(registry.in_flight())))

    try:
        anyio.run(main, backend="trio")
    except KeyboardInterrupt:
        print("interrupted", ran)
    """
)


@pytest.mark.slow
def test_two_ctrl_cs_on_trio_end_a_stubborn_body_at_its_checkpoint_and_say_nothing() -> None:
    """On trio an interrupt is not P7's (asyncio's alone): trio raises it at the main task's next
    checkpoint, which is the running body's, so it is the body's failure (P4).  The call runs on
    to its one published result, ``KeyboardInterrupt`` leaves the run (trio keeps one pending,
    the second Ctrl-C adds nothing), nothing is left in flight, and nothing is printed at ERROR:
    no traceback from toolcancel's tasks, nothing from the garbage collector."""
    done = subprocess.run(
        [sys.executable, "-c", TRIO_RUNNER_SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # as the asyncio test
    )
    assert (done.stdout, done.stderr) == (
        "interrupted ['started', ('published', True), ('in flight', 0)]\n",
        "",
    )


LOOP_CLOSED_SCRIPT = textwrap.dedent(
    """
    import asyncio, gc, logging
    from toolcancel import AbortController, ToolRegistry

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    registry = ToolRegistry()
    loop = asyncio.new_event_loop()
    started = loop.create_future()

    @registry.tool("stubborn")
    async def stubborn(args, call):
        started.set_result(None)
        await loop.create_future()                # never ends

    task = loop.create_task(registry.execute("stubborn", signal=AbortController().signal,
                                             call_id="c1"))
    loop.run_until_complete(started)
    loop.close()                                  # with the call still running
    del task
    gc.collect()
    print("closed")
    """
)


@pytest.mark.slow
def test_a_loop_closed_with_a_call_running_is_one_warning_line() -> None:
    done = subprocess.run(
        [sys.executable, "-c", LOOP_CLOSED_SCRIPT], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "closed", done.stderr
    # asyncio's own report of each task left pending in a closed loop (the program's and the
    # call's: "Task was destroyed but it is pending!" and the task) is asyncio's to make; of
    # toolcancel's, one WARNING line, and no "Exception ignored" traceback from the GC
    lines = done.stderr.splitlines()
    ours = [
        line
        for line in lines
        if line != "ERROR Task was destroyed but it is pending!" and not line.startswith("task: ")
    ]
    assert ours == [
        "WARNING call c1 (stubborn): its event loop was closed in state body: the call was not "
        "awaited to quiescence and no result was published"
    ], done.stderr
    assert len(lines) - len(ours) <= 4, done.stderr


def test_the_drain_warning_is_on_by_default() -> None:
    assert ToolRegistry()._drain_warning == 30.0
    assert ToolRegistry(drain_warning=None)._drain_warning is None


# -- the approval service ------------------------------------------------------------------------


def _asking(service: ApprovalService) -> ToolRegistry:
    reg = ToolRegistry()

    async def pre(view: Execution, nxt: Any) -> Any:
        return Ask("needs a human")

    async def body(args: Any, call: Execution) -> Any:
        return [text("done")]

    reg.add_pre_execute(pre)
    reg.set_approval(service)
    reg.register("t", body)
    return reg


async def _until_asked(service: ApprovalService) -> None:
    """Let the loop turn until the service holds a question (a few turns: the call's own task
    starts on the next one before 3.12)."""
    for _ in range(8):
        if service.pending():
            return
        await asyncio.sleep(0)
    raise AssertionError("the approval service was never asked")


async def test_the_approval_service_answers_what_it_is_told() -> None:
    asked: list[ApprovalRequest] = []
    requested = asyncio.Event()

    def on_request(request: ApprovalRequest) -> None:
        asked.append(request)
        requested.set()

    service = ApprovalService(on_request=on_request)
    reg = _asking(service)
    task = asyncio.get_running_loop().create_task(
        reg.execute("t", signal=controller()[1], call_id="a1", agent="agent")
    )
    await requested.wait()
    assert [r.call_id for r in service.pending()] == ["a1"] and asked[0].reason == "needs a human"
    assert service.answer("a1", True)
    assert (await task).to_json() == ok("done")
    assert [(e.call_id, e.what) for e in service.audit] == [("a1", "asked"), ("a1", "approved")]


@pytest.mark.rules("R24")
async def test_the_approval_service_answers_cancelled_on_abort_and_ignores_a_late_answer() -> None:
    service = ApprovalService()
    reg = _asking(service)
    caller = AbortController()
    task = asyncio.get_running_loop().create_task(
        reg.execute("t", signal=caller.signal, call_id="a2", agent="agent")
    )
    await _until_asked(service)
    caller.abort()  # the question is answered `cancelled` at once
    result = await task
    assert result.to_json() == aborted()  # C1 (seed): cancellation beats the approval outcome
    assert not service.answer("a2", Approval.APPROVED)  # the late click is ignored
    assert [(e.call_id, e.what) for e in service.audit] == [
        ("a2", "asked"),
        ("a2", "cancelled"),
        ("a2", "ignored"),
    ]
    assert caller.signal.listener_count == 0 and service.pending() == ()


async def test_the_approval_service_hears_task_cancellation_without_a_caller_signal() -> None:
    service = ApprovalService()
    reg = _asking(service)
    task = asyncio.get_running_loop().create_task(reg.execute("t", call_id="a3", agent="agent"))
    await _until_asked(service)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [e.what for e in service.audit] == ["asked", "cancelled"]


async def test_closing_the_approval_service_answers_unavailable() -> None:
    service = ApprovalService()
    reg = _asking(service)
    task = asyncio.get_running_loop().create_task(
        reg.execute("t", signal=controller()[1], call_id="a4", agent="agent")
    )
    await _until_asked(service)
    assert service.close() == 1
    assert (await task).is_error
    assert service.audit[-1].what == "unavailable"


# -- small frictions -----------------------------------------------------------------------------


@pytest.mark.rules("R16")
@pytest.mark.parametrize("revision", ["seed", "revised"])
async def test_a_wrapper_may_return_a_result_mapping_like_the_originals_object_literals(
    revision: str,
) -> None:
    reg = ToolRegistry(revision=revision)
    posted: list[str] = []

    async def wrapper(view: Execution, nxt: Any) -> Any:
        await nxt()
        return {
            "content": [text("Error: quota exceeded")],
            "isError": True,
            "error": {"name": "QuotaError", "code": "QUOTA"},
            "additionalContexts": [{"type": "note", "text": "from the wrapper"}],
        }

    async def body(args: Any, call: Execution) -> Any:
        return [text("done")]

    async def post(view: Execution, result: ToolResult, nxt: Any) -> Any:
        posted.append(result.text)
        return await nxt()

    reg.add_around(wrapper)
    reg.register("t", body)
    reg.add_post_execute(post)
    result = await reg.execute("t", signal=controller()[1])
    assert posted == ["Error: quota exceeded"]  # the post route: post-execute ran
    data = result.to_data()
    assert data["additionalContexts"] == [{"type": "note", "text": "from the wrapper"}]
    if revision == "seed":
        assert data["error"] == {"name": "QuotaError", "code": "QUOTA"}
    else:  # R44: the message is the text without "Error: ", never ""
        assert data["error"] == {
            "message": "quota exceeded",
            "info": {"name": "QuotaError", "code": "QUOTA"},
        }


async def test_a_wrapper_returning_something_else_is_refused_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reg = ToolRegistry()

    async def sloppy_wrapper(view: Execution, nxt: Any) -> Any:
        await nxt()
        return {"text": "done"}

    async def body(args: Any, call: Execution) -> Any:
        return [text("done")]

    reg.add_around(sloppy_wrapper)
    reg.register("t", body)
    with caplog.at_level(logging.WARNING, logger="toolcancel.runtime.registry"):
        result = await reg.execute("t", signal=controller()[1])
    assert result.is_error and "sloppy_wrapper" in result.text
    assert "sloppy_wrapper" in caplog.text


async def test_a_revised_wrapper_error_without_a_message_gets_r44s() -> None:
    reg = ToolRegistry(revision="revised")

    async def wrapper(view: Execution, nxt: Any) -> Any:
        return ToolResult((text("Error: no quota"),), True, ErrorInfo("QuotaError", "QUOTA"))

    async def body(args: Any, call: Execution) -> Any:
        return [text("done")]

    reg.add_around(wrapper)
    reg.register("t", body)
    result = await reg.execute("t", signal=controller()[1])
    assert result.to_data()["error"]["message"] == "no quota"


async def test_the_view_says_whether_it_is_frozen() -> None:
    reg = ToolRegistry()
    seen: list[bool] = []
    views: list[Execution] = []

    async def body(args: Any, call: Execution) -> Any:
        seen.append(call.frozen)
        views.append(call)
        return [text("ok")]

    reg.register("t", body)
    reg.add_observer(lambda view, result: seen.append(view.frozen))
    await reg.execute("t", signal=controller()[1])
    assert seen == [False, True]
    with pytest.raises(AttributeError):
        views[0].frozen = False  # type: ignore[misc]  # read-only


@pytest.mark.parametrize("given", [True, False], ids=["with a signal", "without"])
async def test_a_finished_call_is_freed_at_once_and_its_view_still_answers(
    given: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A published call and its view hold no reference cycle: dropping the pending call frees
    both without the garbage collector. A view a hook kept still answers after the call."""
    import gc

    reg = ToolRegistry()
    views: list[Execution] = []

    async def body(args: Any, call: Execution) -> Any:
        if args.get("keep"):
            views.append(call)
        return [text("ok")]

    reg.register("t", body)
    signal = controller()[1] if given else None
    gc.collect()
    gc.disable()
    try:
        await reg.execute("t", {"keep": False}, signal=signal)
        gc.set_debug(gc.DEBUG_SAVEALL)  # what only the collector would free is kept here
        gc.collect()
        left = [type(o).__name__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert "_Call" not in left and "Execution" not in left  # freed by reference counting

    pending = reg.execute("t", {"keep": True}, signal=signal)
    await pending
    (view,) = views
    assert view.call_signal is pending.view.call_signal and not view.call_signal.aborted
    del pending
    assert view.state == "materialized" and view.frozen
    assert [step.event for step in view.path][-1] == "publish"
    view.defer_context(text("late"))
    assert "context deferred after dispatch settled is dropped (D4)" in caplog.text
    with pytest.raises(RegistryUsageError):
        view.signal = None


@pytest.mark.parametrize("what", ["a body raising", "a wrong return type"])
async def test_body_failures_are_logged_as_warnings(
    what: str, caplog: pytest.LogCaptureFixture
) -> None:
    reg = ToolRegistry()

    async def body(args: Any, call: Execution) -> Any:
        if what == "a body raising":
            raise RuntimeError("boom")
        return "not a list"

    reg.register("t", body)
    with caplog.at_level(logging.WARNING, logger="toolcancel.runtime.registry"):
        result = await reg.execute("t", signal=controller()[1], call_id="c9")
    assert result.is_error
    [record] = [r for r in caplog.records if "c9" in r.getMessage()]
    assert record.levelno == logging.WARNING


@pytest.mark.rules("R32")
def test_a_bad_budget_is_a_value_error_with_the_python_name() -> None:
    reg = ToolRegistry()

    async def body(args: Any, call: Execution) -> Any:
        return []

    with pytest.raises(ValueError, match='tool "t" timeout_ms must be') as info:
        reg.register("t", body, timeout_ms=-1)
    assert isinstance(info.value, InvalidBudget) and isinstance(info.value, TypeError)
    with pytest.raises(TypeError, match="timeout_ms must be a number"):
        reg.register("t", body, timeout_ms="10")  # type: ignore[arg-type]


def test_the_tool_decorator_declares_its_options() -> None:
    params = inspect.signature(ToolRegistry.tool).parameters
    assert list(params) == [
        "self",
        "name",
        "timeout_ms",
        "agent",
        "description",
        "parallel_safe",
        "input_schema",
    ]
    reg = ToolRegistry()
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}

    @reg.tool(timeout_ms=50, parallel_safe=True, input_schema=schema)
    async def fetch(args: Any, call: Execution) -> Any:
        return []

    definition = reg.definition("fetch")
    assert definition is not None and definition.timeout_ms == 50 and definition.parallel_safe
    assert definition.input_schema == schema
    with pytest.raises(TypeError, match="input_schema"):
        reg.register("bad", fetch, input_schema="{}")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        reg.tool(timeout=5)  # type: ignore[call-arg]


def test_definitions_are_what_an_agent_can_call_in_registration_order() -> None:
    reg = ToolRegistry()

    async def body(args: Any, call: Execution) -> Any:
        return []

    reg.register("a", body)
    reg.register("b", body, agent="x", description="x's own b")
    reg.register("b", body, description="the global b")
    reg.register("c", body, agent="y")
    described = {agent: [(d.name, d.description) for d in reg.definitions(agent)] for agent in "xz"}
    assert described["z"] == [("a", ""), ("b", "the global b")]  # an agent with no tools of its own
    assert described["x"] == [("a", ""), ("b", "x's own b")]
    assert [d.name for d in reg.definitions("y")] == ["a", "b", "c"]


def test_revised_calls_still_need_a_signal() -> None:
    with pytest.raises(RegistryUsageError):
        ToolRegistry(revision="revised").execute("t")


USER_PROGRAM = textwrap.dedent(
    """
    import asyncio
    from typing import Any

    from toolcancel import AbortController, Execution, ToolRegistry, ToolResult
    from toolcancel.runtime.cooperate import cancellable

    registry = ToolRegistry()

    @registry.tool("search", timeout_ms=500, parallel_safe=True)
    async def search(args: Any, call: Execution) -> list[dict[str, str]]:
        hits: str = await cancellable(call, asyncio.sleep(1, "hits"))
        return [{"type": "text", "text": hits}]

    async def main() -> ToolResult:
        return await registry.execute("search", {"q": "x"}, signal=AbortController().signal)
    """
)


@pytest.mark.slow
def test_mypy_strict_finds_toolcancel_for_a_user_program(tmp_path: Any) -> None:
    good = tmp_path / "good.py"
    good.write_text(USER_PROGRAM, "utf-8")
    bad = tmp_path / "bad.py"  # a misspelt decorator option is a type error, not **options
    bad.write_text(USER_PROGRAM.replace("parallel_safe=True", "paralel_safe=True"), "utf-8")
    command = [sys.executable, "-m", "mypy", "--strict", "--no-incremental"]
    ran = subprocess.run([*command, "good.py"], cwd=tmp_path, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    ran = subprocess.run([*command, "bad.py"], cwd=tmp_path, capture_output=True, text=True)
    assert ran.returncode == 1 and 'Unexpected keyword argument "paralel_safe"' in ran.stdout


def test_a_turn_cancelled_during_an_interrupt_is_abandoned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop = asyncio.new_event_loop()
    try:
        reg = ToolRegistry()
        reached = loop.create_future()

        async def stubborn(args: Any, call: Execution) -> Any:
            if not reached.done():
                reached.set_result(None)
            try:
                await loop.create_future()  # never ends on its own
            except asyncio.CancelledError:  # asyncio.run's teardown cancels every task
                pass
            return [text("done")]

        reg.register("t", stubborn)
        turn = loop.create_task(
            TurnScheduler(reg).run_turn([ToolCallRequest("c0", "t")], signal=controller()[1])
        )
        loop.run_until_complete(reached)
        turn.cancel()  # the first interrupt: the turn is aborted and drains
        loop.run_until_complete(asyncio.sleep(0))
        assert not turn.done()
        with caplog.at_level(logging.ERROR, logger="toolcancel.runtime.scheduler"):
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt:
                for task in asyncio.all_tasks(loop):  # what asyncio.run's teardown does
                    task.cancel()
                loop.run_until_complete(asyncio.wait([turn]))
        assert turn.cancelled() and "turn abandoned" in caplog.text
        left = [t for t in asyncio.all_tasks(loop) if not t.done()]
        if left:
            loop.run_until_complete(asyncio.wait(left))
    finally:
        loop.close()
