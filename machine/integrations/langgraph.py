"""LangGraph's tool calls through a ToolRegistry: ``ToolNode``'s tool-call wrapper.

``pip install 'toolcancel[langgraph]'``::

    calls = Toolcancel()                                 # a ToolRegistry of its own, or
    calls = Toolcancel(my_registry, around=my_wrapper)   # yours, and your wrapper
    node = ToolNode(tools, awrap_tool_call=calls)

:class:`Toolcancel` is an ``awrap_tool_call`` -- ``ToolNode``'s public way to intercept each
tool call it runs asynchronously -- that makes the tool call the body of a call of
:class:`~toolcancel.ToolRegistry` (:class:`~toolcancel.integrations.boundary.Boundary`), keyed by
the tool call's id.  Your own ``awrap_tool_call`` (``around``) becomes one of the registry's
around wrappers: what it awaits of ``execute`` is the registry's ``next()`` (a result as a
``ToolMessage``), what it returns the wrapper's result, so it waits, retries, answers short or
fails as the contract says a wrapper does.

Cancellation.  A graph run is cancelled by cancelling the task awaiting ``ainvoke`` (or
``astream``); ``ToolNode`` awaits its calls with ``asyncio.gather``, which hands each call that
cancellation.  That is the caller's signal: the registry aborts the call, cancels the tool and
awaits it to its end, and publishes one result -- and the cancellation goes on, since a
cancelled node writes nothing to the graph's state: there is no place there for the answer.
:meth:`Toolcancel.settled` (by tool call id) waits for the call's quiescence and returns what it
published; :attr:`Toolcancel.published` has it too.

What the node records.  A ``ToolMessage`` (or ``Command``) the registry published as the tool
made it is returned unchanged, an error message ``handle_tool_errors`` made included; an
interrupt (``GraphBubbleUp``) is raised unchanged; any other failure of the tool or your wrapper,
and every result of the registry's own (ABORTED, an unknown tool, arguments or a result that are
not JSON), is an error ``ToolMessage`` whose text is the result's -- never an exception out of
the graph (R31).  The sync path (``invoke``, ``wrap_tool_call``) is not wrapped: the registry is
asynchronous.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from langchain_core.messages import ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from ..contract.results import ToolOutput, ToolResult, text_block
from ..runtime.execution import Execution
from ..runtime.hooks import AroundHook, Next
from ..runtime.toolregistry import ToolRegistry
from .boundary import Boundary, Published

_TEXT_ONLY = (
    "A ToolMessage holds content and a status only, so an error result reaches the model and the "
    "graph's state with the contract's text and error flag but without R1's structured error (its "
    "code and name; in the revised contract its message too)."
)
LIMITS: Final[Mapping[str, str]] = {
    "R3": _TEXT_ONLY,
    "R6": _TEXT_ONLY,
    "R11": _TEXT_ONLY,
    "R16": _TEXT_ONLY,
    "R18": _TEXT_ONLY,
    "R30": _TEXT_ONLY,
    "R31": _TEXT_ONLY,
}
"""Rule id -> why LangGraph's structure keeps it broken with this wrapper (docs/REAL-WORLD.md
shows each beside the rule; the render stops if a broken rule has none, or one names a kept
rule)."""

Execute = Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]
Wrapper = Callable[[ToolCallRequest, Execute], Awaitable[ToolMessage | Command[Any]]]


class ErrorMessage(Exception):
    """The tool call ended in an error ``ToolMessage`` (``handle_tool_errors``): a failure."""

    def __init__(self, message: ToolMessage) -> None:
        super().__init__(message.text)
        self.message = message


def _blocks(content: Any) -> list[Any]:
    return [text_block(content)] if isinstance(content, str) else list(content)


def output(value: Any) -> ToolOutput | list[Any]:
    """What the registry is told the call returned: a message's content, with its artifact if
    it has one (without, no ``ToolOutput`` is made per call for nothing)."""
    if isinstance(value, ToolMessage):
        if value.status == "error":
            raise ErrorMessage(value)
        blocks = _blocks(value.content)
        return blocks if value.artifact is None else ToolOutput(blocks, meta=value.artifact)
    return []  # a Command: handed back as it is when published as it is


def as_message(result: ToolResult, call: Mapping[str, Any]) -> ToolMessage:
    """A registry's result as the ``ToolMessage`` for tool call ``call`` (its ``id`` and
    ``name``): what the node records -- and what a program whose graph run was cancelled adds to
    its conversation for the call (with :meth:`Toolcancel.settled`)."""
    if result.is_error:
        return ToolMessage(result.text, tool_call_id=call["id"], name=call["name"], status="error")
    data = result.to_data()
    return ToolMessage(data["content"], tool_call_id=call["id"], name=call["name"],
                       artifact=data.get("meta"))  # fmt: skip


def as_result(message: ToolMessage | Command[Any]) -> ToolResult:
    """A wrapper's answer as the registry's result: its content, error flag and artifact."""
    if not isinstance(message, ToolMessage):
        return ToolResult(())
    if message.status == "error":
        return ToolResult(tuple(_blocks(message.content)), is_error=True)
    return ToolResult(tuple(_blocks(message.content)), meta=message.artifact)


def answer(published: Published, request: ToolCallRequest) -> ToolMessage | Command[Any]:
    """What ``ToolNode`` gets for a call: its own message, or the registry's result as one."""
    raised = published.raised
    if published.own:
        if raised is None:
            value: ToolMessage | Command[Any] = published.value
            return value
        if isinstance(raised, GraphBubbleUp):
            raise raised
        if isinstance(raised, ErrorMessage):
            return raised.message
    return as_message(published.result, request.tool_call)


class Toolcancel:
    """``ToolNode``'s ``awrap_tool_call`` that runs each call through a registry (the module).

    ``registry``: the caller's (its hooks apply to every call), or a new one of ``revision``;
    ``around``: the node's own wrapper, added to the registry's around wrappers (outermost of
    those added so far: :meth:`~toolcancel.ToolRegistry.add_around`)."""

    def __init__(
        self,
        registry: ToolRegistry | None = None,
        *,
        revision: str = "seed",
        around: Wrapper | None = None,
    ) -> None:
        self.boundary = Boundary(registry, revision=revision, ordered=False)
        if around is not None:
            self.boundary.registry.add_around(self._wrapper(around))

    def _wrapper(self, around: Wrapper) -> AroundHook:
        """``around`` as the registry's around hook, for the calls this node makes."""
        boundary = self.boundary

        async def hook(view: Execution, nxt: Next) -> ToolResult:
            request = boundary.context(view)
            if request is None:  # a call of the registry that is not the node's
                result: ToolResult = await nxt()
                return result

            made: dict[int, tuple[ToolMessage, ToolResult]] = {}

            async def execute(req: ToolCallRequest) -> ToolMessage | Command[Any]:
                result = await nxt()
                message = as_message(result, req.tool_call)
                made[id(message)] = (message, result)
                return message

            answered = await around(request, execute)
            mine = made.get(id(answered))
            if mine is not None and mine[0] is answered:  # next()'s own message, handed on:
                kept: ToolResult = mine[1]  # the result itself, its error info kept
                return kept
            return as_result(answered)

        return hook

    @property
    def published(self) -> dict[str, Published]:
        """Tool call id -> what that call published."""
        return self.boundary.published

    async def settled(self, tool_call_id: str) -> ToolResult:
        """Wait until the call ``tool_call_id`` published (its tool stopped first) and return its
        result: for a program that cancelled the graph run while the call ran."""
        return (await self.boundary.settled(tool_call_id)).result

    async def __call__(
        self, request: ToolCallRequest, execute: Execute
    ) -> ToolMessage | Command[Any]:
        call = request.tool_call

        def run() -> Awaitable[ToolMessage | Command[Any]]:
            return execute(request)

        key = call["id"] or call["name"]
        known = request.tool is not None
        published = await self.boundary.call(call["name"], call["args"], key, run, output,
                                             known=known, context=request)  # fmt: skip
        return answer(published, request)

