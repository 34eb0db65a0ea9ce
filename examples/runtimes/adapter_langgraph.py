"""LangGraph's prebuilt ``ToolNode`` at outcome level: one tool call from an ``AIMessage``.

    toolcancel conform --revision seed --adapter python examples/runtimes/adapter_langgraph.py

Each vector builds a one-node graph (``START -> tools -> END`` over ``MessagesState``) whose node
is a ``ToolNode`` over the scenario's tool (a LangChain ``StructuredTool`` made from an async
function, ``response_format="content_and_artifact"`` so a body's ``meta`` travels as the
message's artifact), and awaits the compiled graph's ``ainvoke`` with one ``AIMessage`` whose
tool call asks for ``tool`` (or ``no_such_tool``) with the scenario's arguments -- what a graph's
tools node does with a model's turn; no model is needed.  The call the contract calls
``execute()`` is that ``ainvoke``; its result is the ``ToolMessage`` the node added (``content``
as content blocks, ``isError`` its ``status == "error"``, ``meta`` its artifact).  The caller
cancels by cancelling the task awaiting it (``cancel: ["task"]``).

Error handling, a row each: ``handle_tool_errors`` at its default here (a tool's own exception
leaves ``ainvoke``; only invalid arguments become an error ``ToolMessage``), ``True`` in
``adapter_langgraph__handle_tool_errors.py`` (every tool exception becomes one).

Capabilities: none of the contract's stages is declared.  ``ToolNode`` has one around seam
(``awrap_tool_call``); this adapter does not drive it, so it declares ``around`` absent and
conform sends it only plain tool calls.  The tool gets no cancellation signal object; like every
Python body it gets the cancellation of its task (``rt_driver.task_signal``), which is what
``body_signal`` declares.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any, ClassVar

import rt_driver
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode


def as_result(message: ToolMessage) -> dict[str, Any]:
    """The contract's result (R1's keys) for the ``ToolMessage`` the node returned."""
    content = message.content
    blocks = [rt_driver.text(content)] if isinstance(content, str) else content
    result: dict[str, Any] = {"content": blocks, "isError": message.status == "error"}
    if message.artifact is not None:
        result["meta"] = message.artifact
    return result


class LangGraph(rt_driver.Runtime):
    implementation = (
        f"langgraph {version('langgraph')} ToolNode"
        f" (langgraph-prebuilt {version('langgraph-prebuilt')}, task cancel)"
    )
    capabilities: ClassVar[dict[str, bool]] = {"body_signal": True}  # see the docstring
    cancel: ClassVar[list[str]] = ["task"]
    handle_tool_errors: ClassVar[bool | None] = None
    """``ToolNode(handle_tool_errors=...)``: ``None`` leaves its default (a row each,
    ``adapter_langgraph__handle_tool_errors.py``)."""

    @asynccontextmanager
    async def open(self, call: rt_driver.Call) -> AsyncIterator[rt_driver.Execute]:
        async def body(q: Any) -> tuple[Any, Any]:
            del q
            value = await call.body(rt_driver.task_signal, None)
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
        node = (
            ToolNode([tool])
            if self.handle_tool_errors is None
            else ToolNode([tool], handle_tool_errors=self.handle_tool_errors)
        )
        graph.add_node("tools", node)
        graph.add_edge(START, "tools")
        graph.add_edge("tools", END)
        app = graph.compile()
        name = "tool" if call.scenario["tool_known"] else "no_such_tool"

        async def execute(args: dict[str, Any]) -> rt_driver.Outcome:
            turn = AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "c1"}])
            out = await app.ainvoke({"messages": [turn]})
            message = out["messages"][-1]
            return rt_driver.Outcome(result=as_result(message))

        yield execute


if __name__ == "__main__":
    rt_driver.serve(LangGraph())
