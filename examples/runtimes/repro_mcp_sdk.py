"""Minimal reproductions of what conform found in the MCP Python SDK's ``MCPServer``.

    python examples/runtimes/repro_mcp_sdk.py            # every reproduction
    python examples/runtimes/repro_mcp_sdk.py quiescence # one

Each function below is self-contained (the SDK and anyio only, no toolcancel, no network), prints
what the runtime did, and returns True when the behaviour reproduces; the script exits 1 if one
does not (the runtime changed: regenerate docs/REAL-WORLD.md).  Paste one into an issue as it is.
"""

from __future__ import annotations

import logging
import sys

import anyio
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent


async def quiescence() -> bool:
    """R27: a cancelled ``call_tool`` (in-memory ``mode="legacy"``; stdio the same) returns to its
    caller while the tool is still running (the server never says when the tool stopped: it
    answers no cancelled request).

    Kind: mapping -- MCP: "Receivers of cancellation notifications SHOULD [...] Not send a
    response for the cancelled request" (specification 2025-06-18, basic/utilities/cancellation):
    no client can wait for a cancelled tool.  The server does await it (R27 holds where it is
    kept: the adapter reads the call's end at the server); the SDK's default in-memory client,
    ``mode="auto"``, waits for the tool."""
    events: list[str] = []
    started, release = anyio.Event(), anyio.Event()
    server = MCPServer("repro")

    @server.tool()
    async def write_file() -> str:
        started.set()
        with anyio.CancelScope(shield=True):  # work that cannot stop at once (a write, a thread)
            await release.wait()
        events.append("tool: finished")
        return "written"

    async with Client(server, mode="legacy") as client, anyio.create_task_group() as group:
        with anyio.CancelScope() as call:

            async def cancel_when_started() -> None:
                await started.wait()
                call.cancel()  # the SDK's client sends notifications/cancelled

            group.start_soon(cancel_when_started)
            await client.call_tool("write_file", {})
        events.append("client: call_tool ended (cancelled)")
        release.set()
    print(" -> ".join(events))
    return events == ["client: call_tool ended (cancelled)", "tool: finished"]


async def error_text() -> bool:
    """R3/R18: a tool's exception reaches the client as a generic text, not the exception's.

    Kind: design -- ``ToolError``: "Any other exception bar ``MCPError`` (a protocol error) is
    treated as a crash: the model sees only ``Error executing tool <name>``"
    (mcp/server/mcpserver/exceptions.py); raise ``ToolError`` for a message the model reads."""
    server = MCPServer("repro")

    @server.tool()
    async def failing() -> str:
        raise RuntimeError("tool failed")

    async with Client(server, mode="legacy") as client:
        result = await client.call_tool("failing", {})
    print(f"isError={result.is_error} content={[c.model_dump()['text'] for c in result.content]}")
    return (
        result.is_error and result.content[0].model_dump()["text"] == "Error executing tool failing"
    )


async def lossy_arguments() -> bool:
    """R11: arguments that are not losslessly JSON (a set) are sent anyway, as a list.

    Kind: mapping -- the client serializes a call's arguments to JSON before the server sees
    them: a server only ever receives JSON, so the adapter declares ``raw_args`` false and
    conform sends it no such vector."""
    server = MCPServer("repro")
    seen: list[object] = []

    @server.tool()
    async def echo(q: object) -> str:
        seen.append(q)
        return "done"

    async with Client(server, mode="legacy") as client:
        result = await client.call_tool("echo", {"q": {1}})
    print(f"the tool received q={seen[0]!r}; isError={result.is_error}")
    return seen == [[1]] and not result.is_error


async def unknown_tool() -> bool:
    """R6: an unknown tool is an error result with the SDK's own text and no error code.

    Kind: design -- "The SDK raises it [``ToolError``] too, for an unknown tool name"
    (mcp/server/mcpserver/exceptions.py): an ``is_error`` result whose text the model reads; an
    MCP tool result has no error-code field."""
    server = MCPServer("repro")
    async with Client(server, mode="legacy") as client:
        result = await client.call_tool("no_such_tool", {})
    data = result.model_dump(by_alias=True, exclude_none=True)
    print(f"isError={result.is_error} content={data['content']}")
    return result.is_error and data["content"][0]["text"] == "Unknown tool: no_such_tool"


async def unserializable_meta() -> bool:
    """R31 [body=bad_meta, row=mcp_sdk]: a result whose ``_meta`` is not JSON never reaches the
    client as a result: the client's ``call_tool`` raises the server's serialization error.

    Kind: runtime -- the SDK documents that "a return value that fails output conversion"
    becomes an ``is_error`` result (``UnexpectedToolError``, mcp/server/mcpserver/exceptions.py);
    this one fails later, when the response is serialized, and reaches the client as a
    JSON-RPC error instead: the call gets no tool result at all."""
    server = MCPServer("repro")

    @server.tool()
    async def with_meta() -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text="done")], _meta={"f": len})

    async with Client(server, mode="legacy") as client:
        try:
            await client.call_tool("with_meta", {})
        except MCPError as exc:
            print(f"call_tool raised {type(exc).__name__}: {exc}")
            return "serialize" in str(exc)
    return False


async def auto_late_success() -> bool:
    """R28 [row=mcp_sdk__auto]: with the default ``mode="auto"``, a ``call_tool`` cancelled while
    the tool finishes work that cannot stop half-way waits for it -- and then returns the tool's
    late success as an ordinary result: the caller that cancelled is handed a success.

    Kind: runtime -- MCP: "Receivers of cancellation notifications SHOULD [...] Not send a
    response for the cancelled request"; in ``mode="legacy"`` the same call raises the caller's
    cancellation (``quiescence``), so the default mode alone hands a cancelled caller a
    success."""
    started, release = anyio.Event(), anyio.Event()
    server = MCPServer("repro")
    got: list[str] = []

    @server.tool()
    async def write_file() -> str:
        started.set()
        with anyio.CancelScope(shield=True):  # work that cannot stop at once (a write)
            await release.wait()
        return "written"

    async with Client(server) as client, anyio.create_task_group() as group:
        with anyio.CancelScope() as call:

            async def cancel_then_release() -> None:
                await started.wait()
                call.cancel()
                await anyio.wait_all_tasks_blocked()
                release.set()

            group.start_soon(cancel_then_release)
            result = await client.call_tool("write_file", {})
            got.append(f"isError={result.is_error} {result.content[0].model_dump()['text']}")
    print(f"call_tool returned after the cancel: {got}")
    return got == ["isError=False written"]


async def auto_unserializable_meta() -> bool:
    """R31 [body=bad_meta, row=mcp_sdk__auto]: with the default ``mode="auto"``, a result whose
    ``_meta`` is not JSON makes ``call_tool`` raise "Internal server error".

    Kind: runtime -- as ``unserializable_meta``: the SDK documents that "a return value that
    fails output conversion" becomes an ``is_error`` result; this one reaches the client as a
    JSON-RPC error instead, in either mode."""
    server = MCPServer("repro")

    @server.tool()
    async def with_meta() -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text="done")], _meta={"f": len})

    async with Client(server) as client:
        try:
            await client.call_tool("with_meta", {})
        except MCPError as exc:
            print(f"call_tool raised {type(exc).__name__}: {exc}")
            return str(exc) == "Internal server error"
    return False


async def meta_fails_inside_the_handling() -> bool:
    """R31 [body=bad_meta]: the SDK serializes a tool's result inside its own handling of the
    request: a non-JSON ``_meta`` fails there, so server middleware around the handling gets the
    SDK's raise, never the tool's value (rows with toolcancel's integration, which answers it
    with its own error result in the SDK's words).

    Kind: design -- ``Server.middleware`` wraps the request's handling, which "already produced
    the wire dict" (mcp/server/runner.py, ``_on_request``): a middleware sees the serialized
    result or the raise of serializing it."""
    server = MCPServer("repro")
    seen: list[str] = []

    async def middleware(ctx: object, call_next: object) -> object:
        try:
            return await call_next(ctx)  # type: ignore[operator]
        except Exception as exc:
            seen.append(type(exc).__name__)
            raise

    @server.tool()
    async def with_meta() -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text="done")], _meta={"f": len})

    server.middleware.append(middleware)
    async with Client(server, mode="legacy") as client:
        try:
            await client.call_tool("with_meta", {})
        except MCPError:
            pass
    print(f"the middleware saw: {seen}")
    return bool(seen)


async def stopped_tool_leaves_by_cancellation() -> bool:
    """R15/R19 [cancel=gate:body]: a tool whose request the client cancels is stopped by the
    cancellation of its scope -- the only way the SDK tells it -- and one that stops leaves with
    that cancellation: a failure it was about to report after stopping never happens unless it
    catches the cancellation and raises its own error.

    Kind: mapping -- rows with toolcancel's integration, whose default client hands a cancelled
    call's answer on: the conformance adapter's cooperative body stops on its task's
    cancellation by letting it out, so its scenario's failure after the stop never happens and
    the call is published ABORTED; the control's body, told through a signal, does fail after
    stopping.  Not the SDK's defect."""
    server = MCPServer("repro")
    started, seen = anyio.Event(), []

    @server.tool()
    async def wait_then_fail() -> str:
        started.set()
        try:
            await anyio.Event().wait()
        except BaseException as exc:
            seen.append(type(exc).__name__)
            raise
        raise RuntimeError("never reached")

    async with Client(server, mode="legacy") as client, anyio.create_task_group() as group:

        async def call() -> None:
            await client.call_tool("wait_then_fail", {})

        group.start_soon(call)
        await started.wait()
        group.cancel_scope.cancel()
    with anyio.fail_after(5):
        while not seen:
            await anyio.sleep(0)
    print(f"the tool left with: {seen}")
    return seen == ["CancelledError"]


REPRODUCTIONS = {
    f.__name__: f
    for f in (
        quiescence,
        error_text,
        lossy_arguments,
        unknown_tool,
        unserializable_meta,
        auto_late_success,
        auto_unserializable_meta,
        meta_fails_inside_the_handling,
        stopped_tool_leaves_by_cancellation,
    )
}


if __name__ == "__main__":
    logging.disable(logging.CRITICAL)  # the server logs each failing tool's traceback
    from toolcancel.runtimes import reproduce  # only the runner: each pastes without it

    sys.exit(reproduce(REPRODUCTIONS))
