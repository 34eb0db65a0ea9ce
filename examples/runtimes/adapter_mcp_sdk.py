"""The MCP Python SDK's server (``MCPServer``, FastMCP's successor in ``mcp`` 2) at outcome level.

    toolcancel conform --revision seed --adapter python examples/runtimes/adapter_mcp_sdk.py

Each vector registers the scenario's tool on a fresh ``MCPServer`` with ``@server.tool()`` and
calls it with the SDK's own ``Client`` over in-memory streams (``mode="legacy"``: the JSON-RPC
stream loop, where the client cancels a request by sending ``notifications/cancelled``).  The
``Client``'s default, ``mode="auto"``, drives the server's modern per-request path instead, where
a cancelled ``call_tool`` waits for the tool: it is a row of its own
(``adapter_mcp_sdk__auto.py``).  Over stdio the server runs in another process, out of reach of
the driver's gates and virtual clock: no row (not measured here).
The server's ``peer_cancel_mode="signal"`` (the request's ``cancel_requested`` set, the handler
left running) is a parameter of the SDK's ``JSONRPCDispatcher`` that neither ``MCPServer`` nor
``Client`` exposes: no row.  The call
the contract calls ``execute()`` is ``Client.call_tool``; the caller cancels it by cancelling
its scope, and the SDK's client sends the cancellation.

What it has (the hello's ``capabilities``): none of the contract's stages -- no pre-execute
policy, approval, guards, timeout policy, post-execute stage or observers (its request middleware
wraps every request, not one tool's dispatch; it is not driven here, so ``around`` is declared
absent) -- and a body signal in the only form a Python tool gets one: the cancellation of its
task.  The tool's ``Context`` does not show the request's cancellation (``cancel_requested``
lives on the dispatcher's context, which ``MCPServer`` does not hand a tool); what a tool does see
is its await interrupted when the client's cancellation arrives, and anyio's effective deadline
turning to minus infinity (``rt_driver.task_signal``).  Cancellation is a protocol message.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any, ClassVar

import rt_driver
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent

RESERVED = "io.modelcontextprotocol/"
"""The ``_meta`` key prefix MCP reserves for the protocol itself: the SDK's modern path (and
FastMCP) put the server's name and version there in every result
(``io.modelcontextprotocol/serverInfo``).  That is the protocol's, not the tool's."""


def tool_meta(meta: dict[str, Any] | None) -> dict[str, Any]:
    """A result's ``meta`` as the contract means it: its ``_meta`` less the protocol's keys."""
    return {k: v for k, v in (meta or {}).items() if not k.startswith(RESERVED)}


class McpSdk(rt_driver.Runtime):
    implementation = (
        f"mcp {version('mcp')} MCPServer (in-memory Client mode='legacy', notifications/cancelled)"
    )
    capabilities: ClassVar[dict[str, bool]] = {"body_signal": True}  # its task's cancellation
    cancel: ClassVar[list[str]] = ["message"]
    mode: ClassVar[str] = "legacy"
    """The in-memory ``Client``'s ``mode``: a row each (``adapter_mcp_sdk__auto.py``)."""

    @asynccontextmanager
    async def open(self, call: rt_driver.Call) -> AsyncIterator[rt_driver.Execute]:
        server = MCPServer("toolcancel-vectors")
        if call.scenario["tool_known"]:

            @server.tool(name="tool")
            async def tool(q: Any) -> CallToolResult:
                value = await call.body(rt_driver.task_signal, None)
                content = value["content"] if isinstance(value, dict) else value
                meta = value.get("meta") if isinstance(value, dict) else None
                return CallToolResult(content=[TextContent(**c) for c in content], _meta=meta)

        name = "tool" if call.scenario["tool_known"] else "no_such_tool"
        async with Client(server, mode=self.mode) as client:

            async def execute(args: dict[str, Any]) -> rt_driver.Outcome:
                got = await client.call_tool(name, args)
                result: dict[str, Any] = {
                    "content": [
                        c.model_dump(mode="json", by_alias=True, exclude_none=True)
                        for c in got.content
                    ],
                    "isError": got.is_error,
                }
                meta = tool_meta(got.meta)
                if meta:
                    result["meta"] = meta
                return rt_driver.Outcome(result=result)

            yield execute


if __name__ == "__main__":
    # The server logs every failing tool with its traceback; the answers carry what matters.
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    rt_driver.serve(McpSdk())
