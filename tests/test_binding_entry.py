"""Python binding P0 and P1 (CONTRACT.md): entry happens when ``execute()`` is called, and every
call has a call signal that task cancellation aborts.

Entry (R11) is synchronous and happens in ``execute()``/``begin()`` itself, as in the original:
an abort after the call exists is an abort after entry, whatever spelling made the call, and an
abort during the argument snapshot is a pre-aborted entry.  No abort can crash a call.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from support import Gate, aborted, controller, ok, text
from toolcancel import (
    AbortController,
    Accept,
    Allow,
    Execution,
    PendingCall,
    TaskCancelled,
    ToolRegistry,
    ToolResult,
    TraceRecorder,
    check_lines,
)
from toolcancel.runtime.cooperate import cancellable

REVISED_BEFORE_DISPATCH = (
    '{"content":[{"text":"Error: tool call aborted before dispatch","type":"text"}],'
    '"error":{"info":{"code":"ABORTED_BEFORE_DISPATCH","name":"AbortError"},'
    '"message":"tool call aborted before dispatch"},"isError":true}'
)
REVISED_ABORTED = (
    '{"content":[{"text":"Error: tool call aborted","type":"text"}],'
    '"error":{"info":{"code":"ABORTED","name":"AbortError"},'
    '"message":"tool call aborted"},"isError":true}'
)


class Recorded:
    """A registry whose hooks record what ran, and a body that succeeds."""

    def __init__(self, revision: str = "seed", trace: TraceRecorder | None = None) -> None:
        self.ran: list[str] = []
        self.published: list[ToolResult] = []
        reg = self.registry = ToolRegistry(revision=revision, trace=trace)

        async def pre(view: Execution, nxt: Any) -> Any:
            self.ran.append("pre")
            return Allow()

        async def body(args: Any, view: Execution) -> Any:
            self.ran.append("body")
            return [text("done")]

        async def post(view: Execution, result: ToolResult, nxt: Any) -> Any:
            self.ran.append("post")
            return Accept()

        def observe(view: Execution, result: ToolResult) -> None:
            self.published.append(result)

        reg.add_pre_execute(pre)
        reg.register("t", body)
        reg.add_post_execute(post)
        reg.add_observer(observe)


# -- an abort right after execute(), in every spelling (D5: seen at C1) ------------------------


@pytest.mark.rules("R11", "R13", "R43")
@pytest.mark.parametrize("revision", ["seed", "revised"])
@pytest.mark.parametrize("spelling", ["create_task", "coroutine", "begin"])
async def test_an_abort_right_after_the_call_is_seen_at_c1(revision: str, spelling: str) -> None:
    rec = Recorded(revision)
    caller = AbortController()
    reg = rec.registry
    if spelling == "create_task":
        task = asyncio.get_running_loop().create_task(reg.execute("t", signal=caller.signal))
        caller.abort()
        result = await task
    elif spelling == "coroutine":
        pending = reg.execute("t", signal=caller.signal)
        caller.abort()
        result = await pending
    else:  # the staged API: an abort between begin() and prepare() used to crash the call
        staged = reg.begin("t", signal=caller.signal)
        caller.abort()
        assert not await staged.prepare()
        result = await staged.finalize()
    # The original: the body never starts; pre- and post-execute run (the post route).
    assert rec.ran == ["pre", "post"]
    assert result.to_json() == (aborted() if revision == "seed" else REVISED_BEFORE_DISPATCH)
    assert rec.published == [result]
    assert reg.in_flight() == []
    assert caller.signal.listener_count == 0


@pytest.mark.rules("R11", "R25", "R42")
@pytest.mark.parametrize("revision", ["seed", "revised"])
async def test_an_abort_during_the_argument_snapshot_is_a_pre_aborted_entry(
    revision: str,
) -> None:
    rec = Recorded(revision)
    caller = AbortController()

    class Aborting(Mapping[str, Any]):
        def __getitem__(self, key: str) -> Any:
            return {"q": 1}[key]

        def __iter__(self) -> Iterator[str]:
            caller.abort()  # while entry snapshots the arguments
            return iter(["q"])

        def __len__(self) -> int:
            return 1

    result = await rec.registry.execute("t", Aborting(), signal=caller.signal)
    if revision == "seed":  # R25: every stage runs, a success stays a success
        assert rec.ran == ["pre", "body", "post"] and result.to_json() == ok("done")
    else:  # R42: nothing runs after entry, the final route
        assert rec.ran == [] and result.to_json() == REVISED_BEFORE_DISPATCH
    assert rec.published == [result]


@pytest.mark.rules("R11")
async def test_an_abort_from_the_trace_sink_at_entry_does_not_crash_the_call() -> None:
    caller = AbortController()
    lines: list[dict[str, Any]] = []

    def sink(line: dict[str, Any]) -> None:
        lines.append(line)
        if line["event"] == "call_entry":
            caller.abort()  # after the capture, before the machine leaves entry

    reg = ToolRegistry(trace=sink)

    async def body(args: Any, view: Execution) -> Any:
        return [text("done")]

    reg.register("t", body)
    result = await reg.execute("t", signal=caller.signal)
    assert result.to_json() == aborted()  # an abort after entry, seen at C1
    events = [line["event"] for line in lines]
    assert events[:2] == ["call_entry", "args_valid"] and "caller_abort" in events
    assert "body_start" not in events
    assert all(v.conforming for v in check_lines(lines))


# -- a call that exists before it is awaited ----------------------------------------------------


async def test_a_pending_call_is_in_flight_until_awaited_and_awaits_once() -> None:
    rec = Recorded()
    pending = rec.registry.execute("t", signal=controller()[1], call_id="p1")
    assert isinstance(pending, PendingCall) and asyncio.iscoroutine(pending)
    [status] = rec.registry.in_flight()
    assert (status.call_id, status.state, status.aborted) == ("p1", "pre_policy", False)
    assert rec.ran == []  # entered, nothing of the pipeline ran yet
    assert (await pending).to_json() == ok("done")
    with pytest.raises(RuntimeError, match="twice"):
        await pending
    assert rec.registry.in_flight() == []


async def test_a_pending_call_never_awaited_warns_and_leaves_in_flight(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rec = Recorded()
    caller = AbortController()
    pending = rec.registry.execute("t", signal=caller.signal, call_id="lost")
    assert [c.call_id for c in rec.registry.in_flight()] == ["lost"]
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        del pending  # dropped without ever being awaited
        gc.collect()
    # reported once: the RuntimeWarning, as for an unawaited coroutine, and no log line besides
    assert [(w.category, str(w.message)) for w in caught] == [
        (
            RuntimeWarning,
            "call lost ('t') was entered by execute() but never awaited: nothing ran, nothing "
            "was published",
        )
    ]
    assert "never awaited" not in caplog.text
    assert rec.registry.in_flight() == [] and rec.published == [] and rec.ran == []
    assert caller.signal.listener_count == 0


async def test_closing_a_pending_call_discards_it_without_a_warning() -> None:
    rec = Recorded()
    pending = rec.registry.execute("t", signal=controller()[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pending.close()
        del pending
        gc.collect()
    assert rec.registry.in_flight() == [] and rec.published == []


# -- every call has a call signal; task cancellation reaches a call without a signal ------------


@pytest.mark.rules("R26")
async def test_task_cancellation_reaches_a_body_called_without_a_signal() -> None:
    recorder = TraceRecorder()
    reg = ToolRegistry(trace=recorder)
    published: list[ToolResult] = []
    seen: list[Any] = []
    stopped: list[bool] = []

    async def body(args: Any, call: Execution) -> Any:
        seen.append(call.signal)  # the slot: absent, there is no C (R23, R26)
        try:
            await cancellable(call, asyncio.sleep(3600))  # watches the call signal too
        finally:
            stopped.append(True)
        return [text("finished")]

    reg.register("t", body)
    reg.add_observer(lambda view, result: published.append(result))
    loop = asyncio.get_running_loop()
    begun = loop.time()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await reg.execute("t", signal=None, call_id="c1")  # explicitly none (R26)
    assert loop.time() - begun == pytest.approx(0.1)  # not the body's full hour
    assert seen == [None] and stopped == [True]
    # The body raised AbortError: R3 of it is the canonical ABORTED (the caller got TimeoutError).
    assert [r.to_json() for r in published] == [aborted()]
    # The trace: a call without a caller signal (no caller_abort), whose body raised.
    events = [line["event"] for line in recorder.lines]
    assert recorder.lines[0]["caller"] == "none" and "caller_abort" not in events
    assert "body_raise" in events
    assert all(v.conforming for v in check_lines(recorder.lines))


async def test_the_call_signal_exists_for_every_call_and_is_not_the_slot_without_c() -> None:
    reg = ToolRegistry()
    views: list[Execution] = []

    async def body(args: Any, call: Execution) -> Any:
        views.append(call)
        return [text("ok")]

    reg.register("t", body)
    await reg.execute("t", signal=None)
    given = controller()[1]
    await reg.execute("t", signal=given)
    await reg.execute("t")
    without, with_signal, left_out = views
    assert without.signal is None and not without.call_signal.aborted
    assert with_signal.frozen and with_signal.signal is with_signal.call_signal  # C (P1)
    assert left_out.signal is left_out.call_signal and not left_out.call_signal.aborted  # C too


@pytest.mark.parametrize("where", ["pre", "body"])
async def test_a_caller_who_gave_up_without_a_signal_never_sees_a_late_start_or_success(
    where: str,
) -> None:
    """No ``signal=``: the call signal is the call's own caller signal, so cancelling the
    awaiting task is a caller abort (P1, P2): nothing starts after it, nothing succeeds late."""
    recorder = TraceRecorder()
    reg = ToolRegistry(trace=recorder)
    gate = Gate(where)
    ran: list[str] = []

    async def pre(view: Execution, nxt: Any) -> Any:
        if where == "pre":
            await gate.passage()
        return await nxt()

    async def body(args: Any, call: Execution) -> Any:
        ran.append("body")
        if where == "body":
            await gate.passage()  # ignores every signal, and then succeeds
        return [text("done")]

    reg.add_pre_execute(pre)
    reg.register("t", body)
    published: list[ToolResult] = []
    reg.add_observer(lambda view, result: published.append(result))
    task = asyncio.get_running_loop().create_task(reg.execute("t", call_id="c1"))
    await gate.reached()
    task.cancel()
    await asyncio.sleep(0)
    gate.open()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [r.to_json() for r in published] == [aborted()]
    assert ran == ([] if where == "pre" else ["body"])  # C1: no body after the caller gave up
    assert recorder.lines[0]["caller"] == "live"
    assert "caller_abort" in [line["event"] for line in recorder.lines]
    assert all(v.conforming for v in check_lines(recorder.lines))


async def test_a_body_ignoring_the_call_signal_of_a_no_signal_call_keeps_its_result() -> None:
    reg = ToolRegistry()
    gate = Gate("body")
    told: list[object] = []

    async def body(args: Any, call: Execution) -> Any:
        await gate.passage()
        told.append(call.call_signal.reason)
        return [text("done")]

    reg.register("t", body)
    published: list[ToolResult] = []
    reg.add_observer(lambda view, result: published.append(result))
    task = asyncio.get_running_loop().create_task(reg.execute("t", signal=None, call_id="c1"))
    await gate.reached()
    task.cancel("stop")
    await asyncio.sleep(0)
    assert not task.done()  # still awaited to quiescence (R27)
    gate.open()
    with pytest.raises(asyncio.CancelledError):
        await task
    # R26: no checkpoint fires without C; the body was told, and its success stands.
    assert [r.to_json() for r in published] == [ok("done")]
    [reason] = told
    assert isinstance(reason, TaskCancelled) and reason.call_id == "c1"
    assert "c1" not in str(reason)


@pytest.mark.parametrize("stubborn", [True, False])
async def test_a_no_signal_body_told_by_task_cancellation_is_watched_like_a_draining_one(
    stubborn: bool, caplog: pytest.LogCaptureFixture
) -> None:
    reg = ToolRegistry()  # the default drain warning: 30 s
    gate = Gate("body")

    async def body(args: Any, call: Execution) -> Any:
        if stubborn:
            await gate.passage()  # ignores its call signal
        else:
            await cancellable(call, gate.passage())
        return [text("done")]

    reg.register("t", body)
    task = asyncio.get_running_loop().create_task(reg.execute("t", call_id="c-slow"))
    await gate.reached()
    with caplog.at_level(logging.WARNING, logger="toolcancel.runtime.registry"):
        task.cancel()
        await asyncio.sleep(31)  # virtual time
        warned = "c-slow" in caplog.text and "still running" in caplog.text
        gate.open()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(60)
    assert warned is stubborn
    assert caplog.text.count("still running") == (1 if stubborn else 0)


@pytest.mark.rules("R11", "R12")
@pytest.mark.parametrize("revision", ["seed", "revised"])
def test_verify_enumerates_an_abort_during_entry_and_one_right_after_the_call(
    revision: str,
) -> None:
    from toolcancel import load_contract
    from toolcancel.oracle.scenario_language import Scenario
    from toolcancel.selfcheck.harness import run_scenario
    from toolcancel.selfcheck.space import schedules
    from toolcancel.selfcheck.verifier import check

    table = load_contract().revision(revision)
    config = Scenario(revision=revision, pre="ask", wrappers=("wait_before",))
    kept, _ = schedules(config, run_scenario(config))
    assert kept[:2] == ["in_entry", "after_call"]
    for cancel in ("in_entry", "after_call"):
        obs = run_scenario(config.with_cancel(cancel))
        assert obs.result is not None and check(obs, table).violations == []
        code = obs.result.error.code if obs.result.error else None
        if cancel == "after_call":  # after entry: seen at C1, the body never starts
            assert obs.body_starts == 0
            assert code == ("ABORTED" if revision == "seed" else "ABORTED_BEFORE_DISPATCH")
        else:  # a pre-aborted entry: R25 runs everything (seed), R42 nothing (revised)
            assert obs.body_starts == (1 if revision == "seed" else 0)


def test_a_call_entered_outside_the_loop_runs_in_the_loop_that_awaits_it() -> None:
    rec = Recorded()
    caller = AbortController()
    pending = rec.registry.execute("t", signal=caller.signal)  # no loop is running yet

    async def main() -> ToolResult:
        [status] = rec.registry.in_flight()
        assert status.state == "pre_policy" and status.seconds >= 0
        return await pending

    assert asyncio.run(main()).to_json() == ok("done")
    assert rec.ran == ["pre", "body", "post"]


async def test_a_call_listed_before_its_first_step_has_been_in_its_state_no_time() -> None:
    """A trace sink runs between the call's listing and its first step: in_flight() asked there
    reports the call at entry, for no time, not for the loop's whole age."""
    seen: list[tuple[str, float]] = []

    def sink(line: Mapping[str, Any]) -> None:
        if line["event"] == "call_entry":
            seen.extend((s.state, s.seconds) for s in reg.in_flight())

    reg = ToolRegistry(trace=sink)

    async def body(args: Any, call: Any) -> Any:
        return [text("done")]

    reg.register("t", body)
    await asyncio.sleep(5)  # the loop's clock (virtual here) is well past 0
    await reg.execute("t", signal=controller()[1])
    assert seen == [("entry", 0.0)]
