"""An existing MCP server (the Python SDK's ``MCPServer``) whose client cancels a tool call
while the tool is writing.

    python examples/integrations/mcp_server.py

Needs ``toolcancel[mcp]``.  The tool ``save`` writes a record and cannot stop half-way:
cancelled, it finishes its write first.  The SDK's in-memory client cancels the call in each of
its modes, plain, then with the server's tool calls run through a ``ToolRegistry``
(``toolcancel.integrations.mcp``, one line of server middleware): what the client got, and what
the server knows.  Deterministic: the tool and the client wait on events, never on the clock.
"""

from __future__ import annotations

import logging

import anyio
from mcp import Client
from mcp.server.mcpserver import MCPServer
from toolcancel import ToolRegistry
from toolcancel.integrations.mcp import ToolCalls


def existing_server(events: dict[str, anyio.Event]) -> MCPServer:
    """The server as the program already had it."""
    server = MCPServer("records")

    @server.tool()
    async def save(record: str) -> str:
        """Save a record (a write that cannot stop half-way)."""
        events["writing"].set()
        try:
            await events["finish"].wait()
        except anyio.get_cancelled_exc_class():
            events["told"].set()
            with anyio.CancelScope(shield=True):
                await events["finish"].wait()
        events["wrote"].set()
        return f"saved {record}"

    return server


async def cancel_mid_write(mode: str, integrated: bool) -> None:
    events = {k: anyio.Event() for k in ("writing", "told", "finish", "wrote")}
    server = existing_server(events)
    calls = ToolCalls(ToolRegistry())
    if integrated:
        server.middleware.append(calls)  # the integration: every tools/call through the registry
    got: list[str] = []
    async with Client(server, mode=mode) as client, anyio.create_task_group() as group:

        async def call() -> None:
            with anyio.CancelScope() as scope:
                scopes.append(scope)
                result = await client.call_tool("save", {"record": "invoice-7"})
                got.append(" ".join(c.text for c in result.content))
            if scope.cancelled_caught:
                got.append("nothing (the request was cancelled)")

        scopes: list[anyio.CancelScope] = []
        group.start_soon(call)
        await events["writing"].wait()
        scopes[0].cancel()  # the client gives up: notifications/cancelled
        await events["told"].wait() if mode == "legacy" or integrated else None
        events["finish"].set()
    await events["wrote"].wait()
    print(f"  the client got: {got[0]}; the tool was told: {events['told'].is_set()}")
    if integrated:
        for p in await calls.settled():
            print(f"  the server published for request {p.call_id}: {p.result.text!r}")


async def main() -> None:
    # MCPServer sends every logger's INFO lines to stderr: the SDK's own about the cancelled
    # requests, and the registry's ("the task awaiting execute() was cancelled") for each call.
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    logging.getLogger("toolcancel").setLevel(logging.WARNING)
    for mode in ("auto", "legacy"):
        for integrated in (False, True):
            print(f"client mode {mode!r}, {'with the integration' if integrated else 'plain'}:")
            await cancel_mid_write(mode, integrated)


if __name__ == "__main__":
    anyio.run(main)
