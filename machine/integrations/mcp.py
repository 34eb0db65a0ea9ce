"""An existing MCP server's tools run through a :class:`~toolcancel.ToolRegistry`.

Needs the ``mcp`` extra.  For a server built on the Python SDK -- its low-level ``Server`` or
``MCPServer`` (FastMCP's successor in ``mcp`` 2), both of which have ``Server.middleware``, the
SDK's public request seam -- whose tools stay as they are.  (:mod:`toolcancel.runtime.mcp`
serves a registry's *own* tools; this puts a registry under a server's tools.)
``server.middleware.append(ToolCalls(registry))`` and every ``tools/call`` request becomes one
registry call whose body is the rest of the SDK's handling, unchanged -- argument validation,
the tool, the conversion of its result.  Then:

* **the caller's signal** is the request's cancellation (``notifications/cancelled``): in the
  SDK's default ``peer_cancel_mode="interrupt"`` the handler's scope is cancelled, which aborts
  the call; with ``peer_cancel_mode="signal"`` the SDK only sets the request's
  ``cancel_requested`` -- which a handler cannot see through its context in ``mcp`` 2.3 -- so a
  server serving that way runs its connection through :meth:`ToolCalls.serve_connection`, and
  the event aborts the call.  The tool sees it as a Python tool sees cancellation, its task
  cancelled (:func:`~toolcancel.cancellable`);
* **quiescence**: the request settles (its handler ends) only once the tool stopped -- what a
  client that waits for a cancelled request (the SDK's in-memory client) waits for;
* **a late success is ABORTED**: where the SDK hands a cancelled request's answer on, that
  answer is the published result (:func:`~toolcancel.runtime.mcp.to_call_tool_result`: the
  contract's error under ``_meta["toolcancel/error"]``), never the tool's late success.

**MCP never answers a cancelled request** (the spec: no further message for it), so a client
cannot learn when the tool stopped or what was published.  The server can: :meth:`ToolCalls.
settled` waits for every call and returns what each published (``published``, by request id),
and the registry's observers are told each result once.  Anything else -- a result not changed
by a cancellation -- goes to the client exactly as the SDK made it, but for a raise out of the
SDK's handling (a result it cannot convert), answered with the registry's error result.
:data:`LIMITS` names what the SDK's structure still breaks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, Final

import anyio
from mcp.server import Server
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.runner import ServerRunner, aclose_shielded
from mcp.shared.dispatcher import DispatchContext, Dispatcher
from mcp.types import CallToolResult
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from ..contract.results import ToolOutput
from ..runtime.mcp import to_call_tool_result
from ..runtime.signals import AbortController
from .boundary import Calls, Published

__all__ = ["LIMITS", "Published", "ToolCalls"]

_CONVERSION: Final = (
    "the SDK turns a tool's return value into its wire result inside its own handling, so a "
    "value it cannot serialize (a non-JSON _meta) reaches the registry as the SDK's raise, not "
    "as the tool's value: the call is answered with the registry's error result, in the SDK's "
    "words instead of R30's (a text-only difference)"
)
_LATE_CONVERSION: Final = (
    "the SDK turns a tool's return value into its wire result inside its own handling, so a late "
    "success it cannot serialize (a non-JSON _meta) reaches the registry as the SDK's failure, "
    "which survives the cancel, instead of the late success the contract publishes as ABORTED"
)
_FAILURE_TEXT: Final = (
    "the SDK answers a failing tool with its own error result ('Error executing tool ...') "
    "before the registry sees it, and that answer goes to the client unchanged: the SDK's "
    "words, not the contract's 'Error: <message>' (text only)"
)
LIMITS: Final[Mapping[str, str]] = {
    "R3": _FAILURE_TEXT,
    "R6": "a request names its tool, not whether the server has it (a low-level server's tools "
    "are its handler's business), so an unknown name goes on to the SDK, whose answer has its "
    "own words and no error code (text only)",
    "R18": _FAILURE_TEXT,
    "R27": _LATE_CONVERSION,
    "R28": _LATE_CONVERSION,
    "R30": _CONVERSION,
    "R31": _CONVERSION,
}
"""Rule id -> why the SDK's structure keeps that rule broken with the integration."""

CANCELLATIONS: Final = frozenset({"ABORTED", "ABORTED_BEFORE_DISPATCH"})
"""The error codes of a result a cancellation made (what replaces the SDK's own answer)."""

_DISPATCH: ContextVar[DispatchContext[Any]] = ContextVar("toolcancel_mcp_dispatch")
"""The request's dispatch context (its ``cancel_requested``), where
:meth:`ToolCalls.serve_connection` serves the connection."""


class _ErrorResult(Exception):
    """The SDK answered the request with an error result: the body failed (R3)."""


def _output(answer: Any) -> ToolOutput | list[Any]:
    """What the registry is told the SDK's handling answered: its content and ``_meta``; an
    error result is the body's failure (R3).

    The SDK's own ``CallToolResult`` without ``_meta`` (what a tool's return becomes) gives its
    content blocks alone, converted as ``model_dump`` converts them: its other fields (the
    structured content, a second copy of the result) are never dumped."""
    if type(answer) is CallToolResult and answer.meta is None:
        content = to_jsonable_python(answer.content, by_alias=True, exclude_none=True)
        wire = {"content": content, "isError": answer.is_error}
    elif isinstance(answer, BaseModel):
        wire = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
    else:
        wire = dict(answer or {})
    content = wire.get("content", [])
    if wire.get("isError"):
        text = " ".join(c.get("text", "") for c in content if isinstance(c, dict))
        raise _ErrorResult(text)
    meta = wire.get("_meta")
    return content if meta is None else ToolOutput(content, meta=meta)


async def _watch(requested: anyio.Event, caller: AbortController) -> None:
    """``peer_cancel_mode="signal"``: the request's ``cancel_requested`` aborts its call."""
    await requested.wait()
    caller.abort()


class ToolCalls(Calls):
    """Server middleware running every ``tools/call`` request through ``registry`` (the tools
    are registered in it by name as they are first called: give it a registry of its own, with
    whatever hooks you want around the tools).

    ``published`` holds what each call published, in order (:class:`Published`, its
    ``call_id`` the request id); :meth:`result_of`, :meth:`abort` and :meth:`settled` are
    :class:`~toolcancel.integrations.boundary.Calls`'."""

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        params = ctx.params or {}
        name = params.get("name")
        if ctx.method != "tools/call" or not isinstance(name, str):
            return await call_next(ctx)  # not a tool call (or one the SDK itself refuses)
        dispatch = _DISPATCH.get(None)
        watch = None
        if dispatch is not None:
            requested = dispatch.cancel_requested
            watch = lambda caller: _watch(requested, caller)  # noqa: E731
        key, arguments = str(ctx.request_id), params.get("arguments")
        published, cancelled = await self.boundary.enter(
            name, arguments, key, lambda: call_next(ctx), _output, watch=watch
        )
        if cancelled is not None and anyio.current_effective_deadline() != -math.inf:
            raise cancelled  # a bare task cancellation: not ours to absorb
        # Done, or cancelled through the request's anyio scope, which cancels again at the next
        # checkpoint: the answer is handed over and the SDK decides whether it goes out --
        # never over JSON-RPC (MCP answers no cancelled request), to the in-memory client's
        # modern path yes.
        return self._answer(published)

    @staticmethod
    def _answer(published: Published) -> HandlerResult:
        """What the SDK hands on: its own answer unless a cancellation changed the result, else
        the published result -- which is also the answer where the SDK's handling raised (a
        result it could not convert): every call is answered with a result (R31)."""
        result = published.result
        cancelled = result.error is not None and result.error.code in CANCELLATIONS
        if published.returned and not cancelled:
            answer: HandlerResult = published.value
            return answer
        return to_call_tool_result(result)

    async def serve_connection(
        self,
        server: Server[Any],
        dispatcher: Dispatcher[Any],
        *,
        connection: Connection,
        lifespan_state: Any,
    ) -> None:
        """``mcp.server.runner.serve_connection`` with each request's dispatch context in
        reach of this middleware: for a dispatcher made with ``peer_cancel_mode="signal"``,
        whose cancellation only sets the request's ``cancel_requested``."""
        runner = ServerRunner(server, connection, lifespan_state)

        async def on_request(
            dctx: DispatchContext[Any], method: str, params: Mapping[str, Any] | None
        ) -> dict[str, Any]:
            token = _DISPATCH.set(dctx)
            try:
                return await runner.on_request(dctx, method, params)
            finally:
                _DISPATCH.reset(token)

        try:
            await dispatcher.run(on_request, runner.on_notify)
        finally:
            await aclose_shielded(connection)
