"""The MCP Python SDK's server (``MCPServer``, FastMCP's successor in ``mcp`` 2) at outcome level.

    toolcancel conform --revision seed --adapter python examples/runtimes/adapter_mcp_sdk.py

    toolcancel conform --revision seed --adapter python \
        examples/runtimes/adapter_mcp_sdk.py --control

Each vector registers the scenario's tool on a fresh ``MCPServer`` with ``@server.tool()`` and
calls it with the SDK's own ``Client`` over in-memory streams (``mode="legacy"``: the JSON-RPC
stream loop, where the client cancels a request by sending ``notifications/cancelled``).  The
``Client``'s default, ``mode="auto"``, drives the server's modern per-request path instead, where
a cancelled ``call_tool`` waits for the tool: it is a row of its own
(``adapter_mcp_sdk__auto.py``).  Two configurations are no row, and the page says why
(``unmeasured``): stdio (the server in another process, out of reach of the driver's gates and
virtual clock) and ``peer_cancel_mode="signal"`` (a parameter of the SDK's ``JSONRPCDispatcher``
that neither ``MCPServer`` nor ``Client`` exposes).  The call the contract calls ``execute()``
is ``Client.call_tool``; the caller cancels it by cancelling its scope, and the SDK's client
sends the cancellation.  MCP never answers a request its caller cancelled, so such a call
settles, for the contract, when the
*server* is done with the request (:class:`Handled`, a server middleware): the client returning
early is the protocol's rule, not a finding.  ``--control`` puts toolcancel's own server
(``build_server``) behind the same client.

What it has (the hello's ``capabilities``): none of the contract's stages -- no pre-execute
policy, approval, guards, timeout policy, post-execute stage or observers (its request middleware
wraps every request, not one tool's dispatch; it is not driven here, so ``around`` is declared
absent) -- and a body signal in the only form a Python tool gets one: the cancellation of its
task.  The tool's ``Context`` does not show the request's cancellation (``cancel_requested``
lives on the dispatcher's context, which ``MCPServer`` does not hand a tool); what a tool does see
is its await interrupted when the client's cancellation arrives, and anyio's effective deadline
turning to minus infinity (``toolcancel.runtimes.task_signal``).  Cancellation is a protocol
message.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any, ClassVar

import anyio
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent
from toolcancel import runtimes as kit

RESERVED = "io.modelcontextprotocol/"
"""The ``_meta`` key prefix MCP reserves for the protocol itself: the SDK's modern path (and
FastMCP) put the server's name and version there in every result
(``io.modelcontextprotocol/serverInfo``).  That is the protocol's, not the tool's."""


def tool_meta(meta: dict[str, Any] | None) -> dict[str, Any]:
    """A result's ``meta`` as the contract means it: its ``_meta`` less the protocol's keys."""
    return {k: v for k, v in (meta or {}).items() if not k.startswith(RESERVED)}


class Handled:
    """Server middleware (``Server.middleware``, the SDK's public request seam) that sees when
    the server finished handling the ``tools/call`` request: what had started and settled then.

    MCP never answers a request its caller cancelled, so the client cannot see when the tool
    stopped; the server can.  The call settles, for the contract, when the server is done with
    the request -- R27 is the server's duty, and this is where it is kept or broken."""

    def __init__(self, call: kit.Call) -> None:
        self.call = call
        self.began = False
        self.done = anyio.Event()
        self.snapshot: dict[str, int] | None = None

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        return await self.around(call_next(ctx))

    async def around(self, handling: Awaitable[Any]) -> Any:
        """Await the server's handling of the ``tools/call`` request, noting when it ended."""
        self.began = True
        try:
            return await handling
        finally:
            self.snapshot = self.call.settled_now()
            self.done.set()

    async def settle(self) -> None:
        """The client's call ended in an exception: if the server has the request, the call
        ends when the server is done with it."""
        if self.began:
            with anyio.CancelScope(shield=True):
                await self.done.wait()
            assert self.snapshot is not None
            self.call.settled_at(self.snapshot)


def as_result(got: CallToolResult) -> dict[str, Any]:
    """The contract's result (R1's keys) for what ``call_tool`` returned.  MCP has no error
    field: toolcancel's server carries R1's ``error`` in ``_meta["toolcancel/error"]`` (read
    back here); another server shows none, a text-only difference.  The keys MCP reserves for
    the protocol (:data:`RESERVED`) are not the tool's meta."""
    result: dict[str, Any] = {
        "content": [
            c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in got.content
        ],
        "isError": got.is_error,
    }
    meta = tool_meta(got.meta)
    if "toolcancel/error" in meta:
        result["error"] = meta.pop("toolcancel/error")
    if meta:
        result["meta"] = meta
    return result


class McpSdk(kit.Runtime):
    mode: ClassVar[str] = "legacy"
    """The in-memory ``Client``'s ``mode``: a row each (``adapter_mcp_sdk__auto.py``)."""
    implementation = (
        f"mcp {version('mcp')} MCPServer (in-memory Client mode={mode!r}, notifications/cancelled)"
    )
    # its task's cancellation; arguments travel as JSON, which the client makes before the
    # server sees them (a set arrives as a list): no argument the server gets is a raw value
    capabilities: ClassVar[dict[str, bool]] = {"body_signal": True, "raw_args": False}
    cancel: ClassVar[list[str]] = ["message"]
    undriven: ClassVar[dict[str, str]] = {
        "around": "Server.middleware wraps every request, not one tool's dispatch; the adapter "
        "uses it to see when the server is done with a request, not as the scenario's wrappers "
        "(FastMCP's middleware, its own row, is driven)",
    }
    absent: ClassVar[dict[str, str]] = {
        "pre_policy": "MCPServer dispatches a tools/call straight to the tool; Server.middleware "
        "(see around) wraps every request, with no decision of its own for a tool call",
        "approval": "a tools/call runs without an approval step; elicitation "
        "(ServerSession.elicit) is a request the tool itself makes from its body",
        "timeout_policy": "MCPServer has no per-tool timeout; Client.call_tool's "
        "read_timeout_seconds bounds the caller's wait for the answer, not the tool",
    }
    unmeasured: ClassVar[dict[str, str]] = {
        "stdio": "the server runs in another process (stdio_client), its tool body out of "
        "reach of the driver's gates and virtual clock, which time every vector; the legacy "
        "in-memory row runs the same JSON-RPC stream loop and the same notifications/cancelled, "
        "and repro_mcp_sdk.py's R27 reproduction shows stdio doing the same",
        "peer_cancel_mode='signal'": "a parameter of the SDK's JSONRPCDispatcher only: MCPServer "
        "and Client build their dispatcher themselves and expose neither the mode nor the "
        "request's cancel_requested to a tool (its ServerRequestContext has none), so no public "
        "API reaches it",
    }

    def __init__(self, *, control: bool = False) -> None:
        self.control = control  # toolcancel's own server behind the same client
        if control:
            self.implementation = (  # type: ignore[misc]
                f"toolcancel build_server, control of {type(self).implementation}"
            )

    def integration(self, call: kit.Call) -> Any:
        """The server middleware an integration adds (``toolcancel.runtimes.integrated``): none
        here; ``adapter_mcp_sdk__integrated.py`` puts toolcancel's there.  The control (our own
        server) never asks: the mapping is the plain row's, the integration what is judged."""
        return None

    def server(self, call: kit.Call) -> Any:
        """The server the client calls: the SDK's ``MCPServer`` (with the integration's
        middleware, if any), or toolcancel's own."""
        if self.control:
            return kit.control_server(call)
        server = MCPServer("toolcancel-vectors")
        if call.scenario["tool_known"]:

            @server.tool(name="tool")
            async def tool(q: Any) -> CallToolResult:
                value = await call.body(kit.task_signal, None)
                content = value["content"] if isinstance(value, dict) else value
                meta = value.get("meta") if isinstance(value, dict) else None
                return CallToolResult(content=[TextContent(**c) for c in content], _meta=meta)

        if (glue := self.integration(call)) is not None:
            server.middleware.append(glue)
        return server

    @asynccontextmanager
    async def open(self, call: kit.Call) -> AsyncIterator[kit.Execute]:
        server = self.server(call)
        handled = Handled(call)
        server.middleware.append(handled)
        name = "tool" if call.scenario["tool_known"] else "no_such_tool"
        async with Client(server, mode=self.mode) as client:

            async def execute(args: dict[str, Any]) -> kit.Outcome:
                try:
                    got = await client.call_tool(name, args)
                except BaseException:
                    await handled.settle()
                    raise
                return kit.Outcome(result=as_result(got))

            yield execute


if __name__ == "__main__":
    # The server logs every failing tool with its traceback; the answers carry what matters.
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    kit.main(McpSdk(), McpSdk(control=True))
