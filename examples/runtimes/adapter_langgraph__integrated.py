"""LangGraph's ``ToolNode`` with ``toolcancel.integrations.langgraph``: adapter_langgraph.py plus
the lines marked ``# integration``.

    toolcancel conform --revision seed --adapter python \\
        examples/runtimes/adapter_langgraph__integrated.py

The node's ``awrap_tool_call`` is the integration's ``Toolcancel`` (the scenario's wrappers, if
any, inside it), so the tool call is a call of toolcancel's ``ToolRegistry``: the caller
cancelling the task that awaits ``ainvoke`` aborts the call, the tool is cancelled and awaited,
one result is published.  The cancelled graph run writes no ``ToolMessage``; the caller waits
for the call's published result (``Toolcancel.settled``) and that is its answer.  Deleting the
``# integration`` lines leaves adapter_langgraph.py's row (tests/test_integrations.py plants that
stub and sees the row fail).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any, ClassVar

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command
from toolcancel import runtimes as kit
from toolcancel.integrations.langgraph import Toolcancel  # integration


def as_result(message: ToolMessage) -> dict[str, Any]:
    """The contract's result (R1's keys) for the ``ToolMessage`` the node returned."""
    content = message.content
    blocks = [kit.text(content)] if isinstance(content, str) else content
    result: dict[str, Any] = {"content": blocks, "isError": message.status == "error"}
    if message.artifact is not None:
        result["meta"] = message.artifact
    return result


Execute = Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]
Wrapper = Callable[[ToolCallRequest, Execute], Awaitable[ToolMessage | Command[Any]]]


def wrapper(call: kit.Call, i: int, kind: str) -> Wrapper:
    """Wrapper ``i`` of the scenario, as spec/vectors/README.md's wrapper table says."""

    def answer(request: ToolCallRequest, text: str, status: Any) -> ToolMessage:
        return ToolMessage(content=text, tool_call_id=request.tool_call["id"], status=status)

    async def wrap(request: ToolCallRequest, execute: Execute) -> ToolMessage | Command[Any]:
        if kind == "short_success":
            return answer(request, f"wrapper {i} answered", "success")
        if kind == "short_error":
            return answer(request, f"Error: wrapper {i} refused", "error")
        if kind == "throw_before":
            raise RuntimeError(f"wrapper {i} failed before delegating")
        if kind == "wait_before":
            await call.gate(f"w{i}_before")
        got = await execute(request)
        if kind == "retry":
            got = await execute(request)
        if kind == "wait_after":
            await call.gate(f"w{i}_after")
        if kind == "throw_after":
            raise RuntimeError(f"wrapper {i} failed after delegating")
        return got

    if kind not in ("delegate", "retry", "wait_before", "wait_after", "short_success",
                    "short_error", "throw_before", "throw_after"):  # fmt: skip
        raise kit.Unsupported(f"wrapper {kind!r}: a ToolNode wrapper has no signal slot")
    return wrap


def around(call: kit.Call) -> Wrapper:
    """The scenario's wrappers as ``ToolNode``'s one ``awrap_tool_call``, outermost first."""
    chain = [wrapper(call, i, kind) for i, kind in enumerate(call.scenario["wrappers"])]

    async def composed(request: ToolCallRequest, execute: Execute) -> ToolMessage | Command[Any]:
        inner = execute
        for wrap in reversed(chain):
            inner = functools.partial(wrap, execute=inner)
        return await inner(request)

    return composed


class LangGraphIntegrated(kit.Runtime):
    implementation = (
        f"langgraph {version('langgraph')} ToolNode"
        f" (langgraph-prebuilt {version('langgraph-prebuilt')}, task cancel)"
    )
    implementation += " with toolcancel.integrations.langgraph"  # integration
    answered = True  # integration
    capabilities: ClassVar[dict[str, bool]] = {  # see the docstring
        "body_signal": True,
        "around": True,
        "replace_signal": False,
        "remove_signal": False,
    }
    cancel: ClassVar[list[str]] = ["task"]
    handle_tool_errors: ClassVar[bool | None] = None
    """``ToolNode(handle_tool_errors=...)``: ``None`` leaves its default (a row each,
    ``adapter_langgraph__handle_tool_errors.py``)."""

    @asynccontextmanager
    async def open(self, call: kit.Call) -> AsyncIterator[kit.Execute]:
        async def body(q: Any) -> tuple[Any, Any]:
            del q
            value = await call.body(kit.task_signal, None)
            if isinstance(value, dict):
                return value["content"], value["meta"]
            return value, None

        tool = StructuredTool.from_function(
            coroutine=body,
            name="tool",
            description="the scenario's tool",
            response_format="content_and_artifact",
        )
        graph = StateGraph(MessagesState)
        options: dict[str, Any] = {}
        if self.handle_tool_errors is not None:
            options["handle_tool_errors"] = self.handle_tool_errors
        if call.scenario["wrappers"]:
            options["awrap_tool_call"] = around(call)
        wrapped = options.get("awrap_tool_call")  # integration
        calls = Toolcancel(revision=call.revision, around=wrapped)  # integration
        options["awrap_tool_call"] = calls  # integration
        node = ToolNode([tool], **options)
        graph.add_node("tools", node)
        graph.add_edge(START, "tools")
        graph.add_edge("tools", END)
        app = graph.compile()
        name = "tool" if call.scenario["tool_known"] else "no_such_tool"

        async def execute(args: dict[str, Any]) -> kit.Outcome:
            turn = AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "c1"}])
            out = await app.ainvoke({"messages": [turn]})
            message = out["messages"][-1]
            return kit.Outcome(result=as_result(message))

        execute = call.answered(execute, lambda: calls.settled("c1"))  # integration
        yield execute


if __name__ == "__main__":
    kit.main(LangGraphIntegrated(), kit.RegistryControl(LangGraphIntegrated))
