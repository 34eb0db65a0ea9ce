"""Serve a :class:`~toolcancel.ToolRegistry`'s tools over the Model Context Protocol.

Requires the ``mcp`` extra (the official SDK, ``pip install toolcancel[mcp]``)::

    from toolcancel.mcp import serve_stdio
    anyio.run(serve_stdio, registry)

``tools/list`` lists the registered tools (name, description, ``input_schema``); ``tools/call``
runs the call through the registry, so every call of the contract's pipeline applies, and the
registry's timeout policy is installed: a tool's ``timeout_ms`` is its budget.

Cancellation.  A client cancels a request with ``notifications/cancelled``; the SDK applies it
(its default ``"interrupt"`` mode -- the only one ``Server.run`` offers in mcp 2.3) by
cancelling the handler's cancel scope.  The registry turns that cancellation into the call's
caller aborting (CONTRACT.md, Python binding P2): no body starts after it (C1, C2), a running
body is told through its signal and awaited to quiescence however long it takes (R27), and the
call's one frozen result is published to the registry's observers (R31).  The request itself is
never answered -- the SDK drops whatever the handler ends with -- and no progress is sent for it
once it is cancelled.  Server shutdown (the client hangs up) cancels every handler the same way:
the server's run returns once every body has settled.

Progress.  A body reports progress with :func:`report_progress` and its execution view; it goes
to the client only if the request asked for it (a progress token) and was not cancelled.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any, Final

import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from .registry import Execution, ToolDefinition, ToolRegistry
from .results import ToolResult
from .signals import AbortController
from .timeout_policy import install_timeout_policy

__all__ = ["ANY_OBJECT", "build_server", "report_progress", "serve_stdio", "to_call_tool_result"]

ANY_OBJECT: Final[Mapping[str, Any]] = {"type": "object"}
"""The input schema of a tool registered without one: any arguments object."""

_ERROR_META: Final = "toolcancel/error"
_CONTEXTS_META: Final = "toolcancel/additionalContexts"
_META: Final = "toolcancel/meta"

_requests: dict[object, ServerRequestContext[Any, Any]] = {}
"""The MCP request of each call being served, by its execution view's token."""
_ids = itertools.count(1)


def build_server(
    registry: ToolRegistry,
    *,
    name: str = "toolcancel",
    version: str = "",
    agent: str | None = None,
    instructions: str | None = None,
) -> Server[Any]:
    """An MCP server whose tools are ``registry``'s, as seen by ``agent``.

    Installs the registry's timeout policy (one server per registry: installing it twice would
    wrap every call in two deadlines).
    """
    install_timeout_policy(registry)

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_tool(d) for d in registry.definitions(agent)])

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        caller = AbortController()  # aborted only through the request's cancellation (P2)
        pending = registry.execute(
            params.name,
            {} if params.arguments is None else params.arguments,
            signal=caller.signal,
            call_id=f"mcp-{next(_ids)}-{ctx.request_id}",
            agent=agent,
        )
        token = pending.view.token
        _requests[token] = ctx
        try:
            result = await pending
        finally:
            del _requests[token]
        return to_call_tool_result(result)

    return Server(
        name,
        version=version,
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(registry: ToolRegistry, **options: Any) -> None:
    """Serve ``registry``'s tools on this process's stdin and stdout until the client leaves.

    ``options`` are :func:`build_server`'s.  Run it with ``anyio.run`` (asyncio or trio).
    """
    server = build_server(registry, **options)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def report_progress(
    view: Execution, progress: float, total: float | None = None, message: str | None = None
) -> None:
    """Send a progress notification for the MCP request ``view``'s call serves.

    Nothing is sent when the client asked for no progress, when the call is not served over MCP
    (the registry is also called directly), or once the call's signal has aborted: a cancelled
    request gets no further messages.
    """
    ctx = _requests.get(view.token)
    if ctx is None or view.call_signal.aborted:
        return
    await ctx.session.report_progress(progress, total, message)


def to_call_tool_result(result: ToolResult) -> types.CallToolResult:
    """The MCP ``CallToolResult`` of a frozen result: its content and ``isError`` as they are
    (the envelope is MCP's); an object ``meta`` is ``_meta``; the contract's ``error`` and
    ``additionalContexts``, and a ``meta`` that is not an object, which MCP has no field for, go
    under ``_meta`` (``toolcancel/error``, ``toolcancel/additionalContexts``, ``toolcancel/meta``).
    """
    data = result.to_data()
    own = data.get("meta")
    meta: dict[str, Any] = dict(own) if isinstance(own, dict) else {}
    if own is not None and not isinstance(own, dict):  # MCP's _meta is an object
        meta[_META] = own
    if data.get("error") is not None:
        meta[_ERROR_META] = data["error"]
    if data.get("additionalContexts"):
        meta[_CONTEXTS_META] = data["additionalContexts"]
    wire: dict[str, Any] = {"content": data["content"], "isError": data["isError"]}
    if meta:
        wire["_meta"] = meta
    return types.CallToolResult.model_validate(wire)


def _tool(definition: ToolDefinition) -> types.Tool:
    schema = ANY_OBJECT if definition.input_schema is None else definition.input_schema
    return types.Tool.model_validate(
        {
            "name": definition.name,
            "description": definition.description or None,
            "inputSchema": dict(schema),
        }
    )
