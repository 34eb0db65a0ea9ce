"""The one integration base, without any runtime: a runtime's tool call made a registry call.

Every integration (pydantic-ai, LangGraph, the OpenAI Agents SDK, MCP) rests on
``toolcancel.integrations.boundary``; these hold what they all rely on: the call is awaited in
the runtime's own task, a cancellation of that task comes back with the published result (never
a late success), waiting for every call and giving them all up work, and ``own`` is right.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Coroutine
from typing import Any

import pytest
from toolcancel import Allow, Execution, ToolRegistry
from toolcancel.contract.results import ToolOutput, text_block
from toolcancel.integrations.boundary import Boundary, Calls, context_of
from toolcancel.runtime.hooks import Next, PreDecision

BOUND = 5.0  # seconds: a test that would wait for ever fails instead


def output(value: str) -> ToolOutput:
    return ToolOutput([text_block(value)])


def run(main: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(main, BOUND))


def test_a_returned_call_is_published_as_the_runtimes_own_in_its_own_task() -> None:
    async def main() -> None:
        boundary = Boundary()
        tasks: list[asyncio.Task[object] | None] = []

        async def tool() -> str:
            tasks.append(asyncio.current_task())
            return "value"

        published, cancelled = await boundary.enter("lookup", {"k": 1}, "c1", tool, output)
        assert cancelled is None and published.returned and published.value == "value"
        assert published.own and published.result.text == "value"
        assert published.call_id == "c1" and published.tool == "lookup"
        assert boundary.published["c1"] is published and boundary.in_order == [published]
        assert tasks[0] is not asyncio.current_task()  # the body ran in a task of its own

    run(main())


def test_a_cancelled_runtime_task_gets_the_published_aborted_never_the_late_success() -> None:
    async def main() -> None:
        boundary = Boundary()
        started, told, finish = asyncio.Event(), asyncio.Event(), asyncio.Event()
        stopped: list[str] = []

        async def tool() -> str:
            started.set()
            try:
                await finish.wait()
            except asyncio.CancelledError:
                stopped.append("told")
                told.set()
                await finish.wait()  # finishes its write first: quiescence is awaited
                stopped.append("stopped")
                return "late success"
            return "never"

        runtime = asyncio.ensure_future(boundary.enter("save", None, "c1", tool, output))
        await started.wait()
        runtime.cancel()
        await told.wait()
        assert not runtime.done() and stopped == ["told"]
        waiting = asyncio.ensure_future(boundary.settled_all())
        finish.set()
        published, cancelled = await runtime
        assert isinstance(cancelled, asyncio.CancelledError) and stopped == ["told", "stopped"]
        assert published.result.error is not None and published.result.error.code == "ABORTED"
        assert not published.own  # the late success was not what the registry published
        assert await waiting == [published]

    run(main())


def test_call_raises_the_cancellation_once_published_and_settled_has_the_result() -> None:
    async def main() -> None:
        boundary = Boundary()
        started = asyncio.Event()

        async def tool() -> str:
            started.set()
            await asyncio.Event().wait()
            return "never"

        runtime = asyncio.ensure_future(boundary.call("save", None, "c1", tool, output))
        await started.wait()
        runtime.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runtime
        result = (await boundary.settled("c1")).result
        assert result.error is not None and result.error.code == "ABORTED"

    run(main())


def test_a_tools_failure_that_survives_is_its_own_and_abort_stops_every_call() -> None:
    async def main() -> None:
        calls = Calls(ToolRegistry())
        boundary = calls.boundary

        async def failing() -> str:
            raise ValueError("disk full")

        failed, _ = await boundary.enter("save", None, "c1", failing, output)
        assert failed.raised is not None and failed.own and failed.result.is_error

        started = asyncio.Event()

        async def waiting() -> str:
            started.set()
            await asyncio.Event().wait()
            return "never"

        runtime = asyncio.ensure_future(boundary.enter("wait", None, "c2", waiting, output))
        await started.wait()
        calls.abort()
        published, cancelled = await runtime
        assert cancelled is None and published.result.error is not None
        assert published.result.error.code == "ABORTED"
        late, _ = await boundary.enter("wait", None, "c3", waiting, output)  # enters aborted
        assert late.result.error is not None and not late.returned and not late.raised
        assert [p.call_id for p in await calls.settled()] == ["c1", "c2", "c3"]
        assert calls.result_of("c2") is published.result

    run(main())


def test_boundaries_sharing_a_registry_each_keep_their_own_calls() -> None:
    """One registry may serve many boundaries (the OpenAI Agents SDK's integration makes one per
    run): the registry's one body runs each call's own tool, each boundary records and gives up
    only its own calls, and a hook installed once per registry reads every call's context."""

    async def main() -> None:
        registry = ToolRegistry()
        first, second = Boundary(registry), Boundary(registry)
        context = context_of(registry)
        seen: list[Any] = []

        async def policy(view: Execution, nxt: Next) -> PreDecision:
            seen.append(context(view))
            return Allow()

        registry.add_pre_execute(policy)
        started = asyncio.Event()

        async def waiting() -> str:
            started.set()
            await asyncio.Event().wait()
            return "never"

        async def tool() -> str:
            return "value"

        held = asyncio.ensure_future(
            first.enter("save", None, "c1", waiting, output, context="first's")
        )
        await started.wait()
        done, _ = await second.enter("save", None, "c1", tool, output, context="second's")
        assert done.own and done.value == "value"
        assert second.in_order == [done] and first.in_order == []
        second.abort()  # its own calls only: the first boundary's call runs on
        assert [call.aborted for call in registry.in_flight()] == [False]
        first.abort()
        aborted, cancelled = await held
        assert cancelled is None and aborted.result.error is not None
        assert aborted.result.error.code == "ABORTED"
        assert first.in_order == [aborted] and second.in_order == [done]
        assert seen == ["first's", "second's"]

    run(main())


def test_a_boundary_over_a_long_lived_registry_is_freed_with_its_run() -> None:
    """A program makes a boundary per run over one registry: once the run is over the registry
    holds nothing of it (each used to add an observer the registry kept for ever, so every call
    of every later run told all of them)."""

    async def main() -> None:
        registry = ToolRegistry()

        async def tool() -> str:
            return "value"

        for _ in range(3):
            boundary = Boundary(registry)
            published, _ = await boundary.enter("lookup", None, "c1", tool, output)
            assert published.own
            gone = weakref.ref(boundary)
            del boundary
            assert gone() is None  # freed by its reference count: nothing else holds it

    run(main())


def test_a_boundary_read_by_id_keeps_no_second_record() -> None:
    """pydantic-ai's and LangGraph's programs read calls by id and clear ``published`` to forget
    them: with ``ordered=False`` nothing else keeps a call's publication (nor the tool's value
    in it)."""

    class Value:
        def __str__(self) -> str:
            return "value"

    async def main() -> None:
        boundary = Boundary(ordered=False)

        async def tool() -> Value:
            return Value()

        published, _ = await boundary.enter("lookup", None, "c1", tool, lambda v: output(str(v)))
        assert boundary.published == {"c1": published} and boundary.in_order == []
        assert (await boundary.settled("c1")) is published
        gone = weakref.ref(published.value)
        boundary.published.clear()
        del published
        assert gone() is None

    run(main())
