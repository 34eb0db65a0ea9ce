"""The MCP Python SDK's server (``MCPServer``, FastMCP's successor in ``mcp`` 2) at outcome level.

    toolcancel conform --revision seed --adapter python examples/runtimes/adapter_mcp_sdk.py

Each vector registers the scenario's tool on a fresh ``MCPServer`` with ``@server.tool()`` and
calls it with the SDK's own ``Client`` over in-memory streams (``mode="legacy"``: the JSON-RPC
stream loop, where the client cancels a request by sending ``notifications/cancelled``).  The call
the contract calls ``execute()`` is ``Client.call_tool``; the caller cancels it by cancelling
its scope, and the SDK's client sends the cancellation.

What it has (the hello's ``capabilities``): a body signal -- the tool's ``Context`` shows
``request_context.cancel_requested``, set when the client's cancellation arrives -- and nothing
else of the contract's stages: no pre-execute policy, approval, guards, timeout policy,
post-execute stage or observers.  (Its request middleware wraps every request, not one tool's
dispatch; it is not driven here, so ``around`` is declared absent.)  Cancellation is a protocol
message.  The body's signal reads ``{"aborted": true, "reason": "caller"}`` once
``cancel_requested`` is set: only the caller cancels a request.
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


class McpSdk(rt_driver.Runtime):
    implementation = f"mcp {version('mcp')} MCPServer (in-memory Client, notifications/cancelled)"
    capabilities: ClassVar[dict[str, bool]] = {}  # not one of the contract's stages (docstring)
    cancel: ClassVar[list[str]] = ["message"]

    @asynccontextmanager
    async def open(self, call: rt_driver.Call) -> AsyncIterator[rt_driver.Execute]:
        server = MCPServer("toolcancel-vectors")
        if call.scenario["tool_known"]:

            @server.tool(name="tool")
            async def tool(q: Any) -> CallToolResult:
                value = await call.body(rt_driver.no_signal, None)
                content = value["content"] if isinstance(value, dict) else value
                meta = value.get("meta") if isinstance(value, dict) else None
                return CallToolResult(content=[TextContent(**c) for c in content], _meta=meta)

        name = "tool" if call.scenario["tool_known"] else "no_such_tool"
        async with Client(server, mode="legacy") as client:

            async def execute(args: dict[str, Any]) -> rt_driver.Outcome:
                got = await client.call_tool(name, args)
                result: dict[str, Any] = {
                    "content": [
                        c.model_dump(mode="json", by_alias=True, exclude_none=True)
                        for c in got.content
                    ],
                    "isError": got.is_error,
                }
                if got.meta is not None:
                    result["meta"] = got.meta
                return rt_driver.Outcome(result=result)

            yield execute


if __name__ == "__main__":
    # The server logs every failing tool with its traceback; the answers carry what matters.
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    rt_driver.serve(McpSdk())
