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

Capabilities: ``around``, ``ToolNode``'s ``awrap_tool_call`` -- a scenario's wrappers composed
into the one wrapper the node takes, outermost first, each as spec/vectors/README.md says
(``delegate`` awaits ``execute(request)``, ``retry`` awaits it twice, a short answer is a
``ToolMessage`` of the wrapper's own); the wrapper gets no signal to replace or remove, so
``replace_signal`` and ``remove_signal`` are declared false.  No other stage: ``ToolNode`` has no
pre- or post-execute policy, approval or timeout of its own.  The tool gets no cancellation
signal object; like every Python body it gets the cancellation of its task
(``toolcancel.runtimes.task_signal``), which is what ``body_signal`` declares.
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
    """Wrapper ``i`` of the scenario (``kit.Call.wrap``, spec/vectors/README.md's table); a short
    answer is a ``ToolMessage`` of its own."""
    if kind not in kit.WRAPPERS:
        raise kit.Unsupported(f"wrapper {kind!r}: a ToolNode wrapper has no signal slot")

    async def wrap(request: ToolCallRequest, execute: Execute) -> ToolMessage | Command[Any]:
        def answer(text: str, is_error: bool) -> ToolMessage:
            status = "error" if is_error else "success"
            return ToolMessage(content=text, tool_call_id=request.tool_call["id"], status=status)

        return await call.wrap(i, kind, lambda: execute(request), answer)

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


class LangGraph(kit.Runtime):
    implementation = (
        f"langgraph {version('langgraph')} ToolNode"
        f" (langgraph-prebuilt {version('langgraph-prebuilt')}, task cancel)"
    )
    capabilities: ClassVar[dict[str, bool]] = {  # see the docstring
        "body_signal": True,
        "around": True,
        "replace_signal": False,
        "remove_signal": False,
    }
    cancel: ClassVar[list[str]] = ["task"]
    undriven: ClassVar[dict[str, str]] = {
        "approval": "interrupt() (langgraph.types): a human-in-the-loop pause raises "
        "GraphInterrupt, ends the invocation, and a later one resumes with Command(resume=...) "
        "and re-executes the node -- no wait in the call a caller's signal could cancel",
    }
    absent: ClassVar[dict[str, str]] = {
        "pre_policy": "ToolNode has no allow/deny decision before a tool: awrap_tool_call "
        "(driven as around) may answer with a ToolMessage of its own instead of calling the "
        "handler, which is the around stage's short answer",
        "replace_signal": "no signal slot: awrap_tool_call gets the ToolCallRequest and the "
        "handler; a tool's one cancellation is its task's",
        "remove_signal": "no signal slot (see replace_signal)",
        "timeout_policy": "ToolNode has no per-tool timeout (a graph's step_timeout bounds a "
        "whole superstep, not one tool's call)",
    }
    handle_tool_errors: ClassVar[bool | None] = None
    """``ToolNode(handle_tool_errors=...)``: ``None`` leaves its default (a row each,
    ``adapter_langgraph__handle_tool_errors.py``)."""

    def integration(self, call: kit.Call, wrapper: Wrapper | None) -> Any:
        """The node's ``awrap_tool_call`` given its own ``wrapper`` (the scenario's): that one
        here; ``adapter_langgraph__integrated.py`` puts toolcancel's there, ``wrapper`` inside
        it (``toolcancel.runtimes.integrated``)."""
        return wrapper

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
        wrapper = self.integration(call, around(call) if call.scenario["wrappers"] else None)
        if wrapper is not None:
            options["awrap_tool_call"] = wrapper
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

        yield execute


if __name__ == "__main__":
    kit.main(LangGraph(), kit.RegistryControl(LangGraph))
