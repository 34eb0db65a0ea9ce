"""toolcancel.integrations.pydantic_ai: pydantic-ai's tool calls through a ToolRegistry.

The unit tests drive an ``Agent`` over ``FunctionModel`` (offline) with tools that wait on
events, on the suite's virtual clock.  The user's example and page:
tests/test_integration_pages.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="pip install -e '.[pydantic-ai]'")

from pydantic_ai import (
    Agent,
    CancellationToken,
    ModelRetry,
    RunCancelled,
    ToolReturn,
    capture_run_messages,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from toolcancel import Deny, ToolRegistry
from toolcancel.integrations.pydantic_ai import Toolcancel


def seen(messages: list[ModelMessage]) -> list[ToolReturnPart | RetryPromptPart]:
    """What the history holds for the tool calls (returns and retry prompts)."""
    return [p for m in messages if isinstance(m, ModelRequest) for p in m.parts
            if isinstance(p, ToolReturnPart | RetryPromptPart)]  # fmt: skip


def agent_calling(tool: str = "tool", args: dict[str, Any] | None = None) -> Agent[None, str]:
    """An agent whose model calls ``tool`` once (id ``c1``), then answers with what it read."""

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        del info
        parts = seen(messages)
        if not parts:
            return ModelResponse(parts=[ToolCallPart(tool, args or {}, tool_call_id="c1")])
        last = parts[-1]
        text = last.content if isinstance(last, ToolReturnPart) else last.model_response()
        return ModelResponse(parts=[TextPart(f"read {text!r}")])

    return Agent(FunctionModel(model))


async def cancelled_once(agent: Agent[None, str], calls: Toolcancel, ready: asyncio.Event) -> None:
    """Run ``agent`` through ``calls``, cancel the run's task once ``ready`` is set, and see the
    cancellation come back to the caller (after the registry published: the binding's P2)."""
    run = asyncio.create_task(agent.run("go", capabilities=[calls]))
    await ready.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run


async def test_a_late_success_is_recorded_as_aborted_and_the_run_is_quiescent() -> None:
    agent = agent_calling()
    started, ended = asyncio.Event(), []

    @agent.tool_plain(name="tool")
    async def slow() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass  # a write half-done cannot stop: it returns anyway
        ended.append(True)
        return "late"

    calls = Toolcancel()
    with capture_run_messages() as messages:
        await cancelled_once(agent, calls, started)
    assert ended == [True]  # quiescent before the run ended
    (part,) = seen(messages)
    assert isinstance(part, ToolReturnPart)
    assert (part.content, part.outcome) == ("Error: tool call aborted", "failed")
    result = await calls.settled("c1")
    assert result.to_data()["error"] == {"code": "ABORTED", "name": "AbortError"}


async def test_the_runs_own_token_cancels_the_same_way() -> None:
    agent = agent_calling()
    started = asyncio.Event()

    @agent.tool_plain(name="tool")
    async def slow() -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    calls, token = Toolcancel(revision="revised"), CancellationToken()
    with capture_run_messages() as messages:
        run = asyncio.create_task(agent.run("go", capabilities=[calls], cancellation_token=token))
        await started.wait()
        token.cancel()
        with pytest.raises(RunCancelled):
            await run
    (part,) = seen(messages)
    assert isinstance(part, ToolReturnPart) and part.outcome == "failed"
    result = await calls.settled("c1")
    assert result.to_data()["error"]["info"] == {"code": "ABORTED", "name": "AbortError"}


async def test_a_tool_failure_is_a_failed_return_the_model_reads_not_a_raise() -> None:
    agent = agent_calling()

    @agent.tool_plain(name="tool")
    async def broken() -> str:
        raise RuntimeError("disk full")

    out = await agent.run("go", capabilities=[Toolcancel()])
    assert out.output == "read 'Error: disk full'"


async def test_a_tool_that_fails_when_cancelled_keeps_its_failure_not_aborted() -> None:
    """The registry awaits the tool's own outcome: a failure raised as the tool stops after
    the run's cancellation survives (R19), in the history and in what the call published."""
    agent = agent_calling()
    started = asyncio.Event()

    @agent.tool_plain(name="tool")
    async def flushing() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RuntimeError("disk full") from None  # its clean-up failed
        return "never"

    calls = Toolcancel(revision="revised")
    with capture_run_messages() as messages:
        await cancelled_once(agent, calls, started)
    (part,) = seen(messages)
    assert isinstance(part, ToolReturnPart)
    assert (part.content, part.outcome) == ("Error: disk full", "failed")
    assert (await calls.settled("c1")).to_data()["error"] == {"message": "disk full"}


async def test_a_success_and_pydantic_ais_own_answers_pass_unchanged() -> None:
    agent = agent_calling()

    @agent.tool_plain(name="tool", retries=0)
    async def fine() -> ToolReturn:
        return ToolReturn(return_value={"rooms": 3}, metadata={"source": "db"})

    calls = Toolcancel()
    with capture_run_messages() as messages:
        await agent.run("go", capabilities=[calls])
    (part,) = seen(messages)
    assert isinstance(part, ToolReturnPart)
    assert (part.content, part.metadata) == ({"rooms": 3}, {"source": "db"})
    assert part.outcome == "success"
    assert calls.published["c1"].own

    retrying = agent_calling()

    @retrying.tool_plain(name="tool", retries=1)
    async def retry() -> str:
        raise ModelRetry("ask again")

    with capture_run_messages() as messages:
        await retrying.run("go", capabilities=[Toolcancel()])
    (prompt,) = seen(messages)  # pydantic-ai's own retry prompt, as without the integration
    assert isinstance(prompt, ToolReturnPart)
    assert (prompt.content, prompt.outcome) == ("ask again", "retried")


async def test_the_callers_registry_and_its_hooks_decide() -> None:
    registry = ToolRegistry()

    async def deny(view: Any, nxt: Any) -> Deny:
        del nxt
        return Deny(f"no {view.name} today")

    registry.add_pre_execute(deny)
    agent = agent_calling()
    ran = []

    @agent.tool_plain(name="tool")
    async def body() -> str:
        ran.append(True)
        return "done"

    out = await agent.run("go", capabilities=[Toolcancel(registry)])
    assert ran == [] and out.output.startswith("read 'Error: ") and "no tool today" in out.output


async def test_another_capabilitys_tool_hook_runs_inside_the_registry_call() -> None:
    """Toolcancel is the outermost capability, listed last or not: a ``tool_execute`` hook of the
    agent's own that waits after the tool is cancelled with the call, and what the history keeps
    is ABORTED, never the hook's late success."""
    from pydantic_ai.capabilities import Hooks

    waiting = asyncio.Event()

    async def after(ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:
        value = await handler(args)
        waiting.set()
        await asyncio.Event().wait()  # cancelled with the registry call's body
        return value

    agent = agent_calling()
    agent = Agent(agent.model, capabilities=[Hooks(tool_execute=after)])

    @agent.tool_plain(name="tool")
    async def quick() -> str:
        return "done"

    calls = Toolcancel()
    with capture_run_messages() as messages:
        await cancelled_once(agent, calls, waiting)
    (part,) = seen(messages)
    assert (part.content, part.outcome) == ("Error: tool call aborted", "failed")
