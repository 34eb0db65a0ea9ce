"""The cooperation helpers: a body that uses them stops when told and leaves nothing behind."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import pytest
from toolcancel import AbortController, AbortError, Execution, ToolRegistry
from toolcancel.runtime.cooperate import aborted, cancellable, throw_if_aborted
from toolcancel.runtime.virtual_time import run


def test_aborted_returns_the_reason_once_the_signal_aborts() -> None:
    async def main() -> object:
        ctl = AbortController()
        waiter = asyncio.ensure_future(aborted(ctl.signal))
        await asyncio.sleep(0)
        assert not waiter.done() and ctl.signal.listener_count == 1
        ctl.abort("stop")
        reason = await waiter
        assert ctl.signal.listener_count == 0
        return reason

    assert run(main()) == "stop"


def test_aborted_returns_at_once_for_an_aborted_signal() -> None:
    async def main() -> object:
        ctl = AbortController()
        ctl.abort("already")
        return await aborted(ctl.signal)

    assert run(main()) == "already"


def test_cancellable_returns_the_work_result_when_nothing_aborts() -> None:
    async def main() -> int:
        ctl = AbortController()

        async def work() -> int:
            await asyncio.sleep(5)  # virtual time
            return 42

        result = await cancellable(ctl.signal, work())
        assert ctl.signal.listener_count == 0
        return result

    assert run(main()) == 42


@pytest.mark.skipif(
    not hasattr(asyncio, "eager_task_factory"), reason="eager tasks are public from 3.12"
)
def test_cancellable_work_that_never_suspends_costs_no_turn_of_the_loop() -> None:
    """Where asyncio starts a task eagerly, work that finishes in its first step is done before
    cancellable returns to the loop: a callback scheduled before it has not run yet."""

    async def main() -> list[str]:
        seen: list[str] = []
        asyncio.get_running_loop().call_soon(seen.append, "a turn of the loop")

        async def work() -> str:
            return "done"

        seen.append(await cancellable(AbortController().signal, work()))
        return list(seen)  # (the callback runs once main returns)

    assert run(main()) == ["done"]


def test_cancellable_work_that_aborts_its_signal_in_its_first_step_is_cancelled() -> None:
    """An abort the work's first step makes (eager or not) is seen: the work is cancelled at its
    next await and cancellable raises AbortError, as for any abort."""
    stopped: list[str] = []

    async def main() -> None:
        ctl = AbortController()

        async def work() -> str:
            ctl.abort("from inside")
            try:
                await asyncio.sleep(5)  # virtual time
            except asyncio.CancelledError:
                stopped.append("cancelled")
                raise
            return "too late"

        with pytest.raises(AbortError) as caught:
            await cancellable(ctl.signal, work())
        assert caught.value.reason == "from inside" and ctl.signal.listener_count == 0

    run(main())
    assert stopped == ["cancelled"]


def test_cancellable_cancels_the_work_awaits_its_cleanup_then_raises_abort_error() -> None:
    cleaned: list[str] = []

    async def main() -> None:
        ctl = AbortController()
        gate = asyncio.Event()

        async def work() -> int:
            try:
                gate.set()
                await asyncio.sleep(3600)
                return 1
            finally:
                await asyncio.sleep(1)  # cleanup that takes time must finish first
                cleaned.append("done")

        async def abort_when_started() -> None:
            await gate.wait()
            ctl.abort("caller left")

        aborter = asyncio.ensure_future(abort_when_started())
        with pytest.raises(AbortError) as info:
            await cancellable(ctl.signal, work())
        await aborter
        assert info.value.reason == "caller left"
        assert cleaned == ["done"]  # awaited to quiescence before raising
        assert ctl.signal.listener_count == 0

    run(main())


def test_a_body_using_cancellable_turns_cancellation_into_its_own_partial_result() -> None:
    async def main() -> str:
        reg = ToolRegistry()
        started = asyncio.Event()

        async def body(args: object, call: object) -> list[dict[str, str]]:
            async def fetch() -> str:
                started.set()
                await asyncio.sleep(3600)
                return "all rows"

            try:
                rows = await cancellable(call.signal, fetch())  # type: ignore[attr-defined]
            except AbortError:
                rows = "some rows"
            return [{"type": "text", "text": rows}]

        reg.register("t", body)
        ctl = AbortController()
        task = asyncio.ensure_future(reg.execute("t", {}, signal=ctl.signal))
        await started.wait()
        ctl.abort()
        return (await task).to_json()

    # The body's own success after the abort is still a late success: ABORTED (R18).
    assert run(main()) == (
        '{"content":[{"text":"Error: tool call aborted","type":"text"}],'
        '"error":{"code":"ABORTED","name":"AbortError"},"isError":true}'
    )


@pytest.mark.parametrize("helper", ["aborted", "throw_if_aborted", "cancellable"])
def test_the_helpers_refuse_none_and_say_what_to_pass(helper: str) -> None:
    """``call.signal`` is None in a call made with ``signal=None``: watching it would watch
    nothing (``aborted`` would wait forever), so the helpers refuse it and name the call."""

    async def use() -> None:
        if helper == "aborted":
            await aborted(None)  # type: ignore[arg-type]
        elif helper == "throw_if_aborted":
            throw_if_aborted(None)  # type: ignore[arg-type]
        else:
            await cancellable(None, asyncio.sleep(0))  # type: ignore[arg-type]

    with pytest.raises(TypeError, match=r"pass the call itself, e\.g\. aborted\(call\)"):
        asyncio.run(use())


def test_a_cooperative_abort_is_one_info_line_and_a_real_failure_a_warning_with_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reg = ToolRegistry()

    @reg.tool("cooperates")
    async def cooperates(args: Any, call: Execution) -> Any:
        return await cancellable(call, asyncio.sleep(3600))

    @reg.tool("fails")
    async def fails(args: Any, call: Execution) -> Any:
        raise ValueError("disk full")

    async def main() -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0):
                await reg.execute("cooperates", call_id="c1")
        await reg.execute("fails", call_id="c2")

    with caplog.at_level(logging.DEBUG, logger="toolcancel.runtime.registry"):
        asyncio.run(main())
    [stopped] = [r for r in caplog.records if r.getMessage().startswith("call c1: the tool body")]
    assert stopped.levelno == logging.INFO and stopped.exc_info is None
    assert stopped.getMessage() == "call c1: the tool body stopped cooperatively: tool call aborted"
    [failed] = [r for r in caplog.records if r.getMessage().startswith("call c2:")]
    assert failed.levelno == logging.WARNING and failed.exc_info is not None
