"""toolcancel.integrations.langgraph: ``ToolNode``'s tool calls through a ToolRegistry.

The unit tests run a one-node graph (START -> tools -> END) with tools that wait on events, on
the suite's virtual clock.  The user's example and page: tests/test_integration_pages.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="pip install -e '.[langgraph]'")

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from toolcancel.integrations.langgraph import Toolcancel


def app(body: Any, **options: Any) -> Any:
    """A graph whose tools node holds ``body`` as tool ``tool``."""
    tool = StructuredTool.from_function(coroutine=body, name="tool", description="the tool")
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode([tool], **options))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    return builder.compile()


def turn(name: str = "tool") -> dict[str, Any]:
    return {"messages": [AIMessage("", tool_calls=[{"name": name, "args": {}, "id": "c1"}])]}


async def answer(graph: Any, name: str = "tool") -> ToolMessage:
    out = await graph.ainvoke(turn(name))
    message: ToolMessage = out["messages"][-1]
    return message


async def test_a_cancelled_run_publishes_aborted_once_the_tool_stopped() -> None:
    started, ended = asyncio.Event(), []

    async def slow() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass  # a write half-done cannot stop: it returns anyway
        ended.append(True)
        return "late"

    calls = Toolcancel()
    run = asyncio.create_task(app(slow, awrap_tool_call=calls).ainvoke(turn()))
    await started.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert ended == [True]
    result = await calls.settled("c1")
    assert result.to_data()["error"] == {"code": "ABORTED", "name": "AbortError"}
    assert not calls.published["c1"].own


async def test_a_tool_failure_is_an_error_message_not_a_raise() -> None:
    async def broken() -> str:
        raise RuntimeError("disk full")

    message = await answer(app(broken, awrap_tool_call=Toolcancel()))
    assert (message.content, message.status) == ("Error: disk full", "error")


async def test_a_success_and_handle_tool_errors_messages_pass_unchanged() -> None:
    async def fine() -> str:
        return "done"

    calls = Toolcancel()
    message = await answer(app(fine, awrap_tool_call=calls))
    assert (message.content, message.status) == ("done", "success")
    assert calls.published["c1"].value is message

    async def broken() -> str:
        raise RuntimeError("disk full")

    handled = await answer(app(broken, awrap_tool_call=Toolcancel(), handle_tool_errors=True))
    assert handled.status == "error" and "Please fix your mistakes" in handled.text


async def test_an_unknown_tool_is_the_registrys_unknown_tool() -> None:
    async def fine() -> str:
        return "done"

    message = await answer(app(fine, awrap_tool_call=Toolcancel()), name="nope")
    assert (message.content, message.status) == ('Error: unknown tool "nope"', "error")


async def test_the_nodes_own_wrapper_is_one_of_the_registrys_wrappers() -> None:
    calls_seen: list[str] = []

    async def fine() -> str:
        calls_seen.append("body")
        return "done"

    async def retry_once(request: Any, execute: Any) -> Any:
        first = await execute(request)
        calls_seen.append(f"first {first.status}")
        return await execute(request)

    calls = Toolcancel(around=retry_once)
    message = await answer(app(fine, awrap_tool_call=calls))
    assert message.content == "done" and calls_seen == ["body", "first success", "body"]

    async def short(request: Any, execute: Any) -> ToolMessage:
        del execute
        return ToolMessage("Error: not now", tool_call_id=request.tool_call["id"], status="error")

    refused = await answer(app(fine, awrap_tool_call=Toolcancel(around=short)))
    assert (refused.content, refused.status) == ("Error: not now", "error")
