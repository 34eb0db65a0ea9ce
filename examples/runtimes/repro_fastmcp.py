"""Minimal reproductions of what conform found in FastMCP 4 (the standalone ``fastmcp``).

    python examples/runtimes/repro_fastmcp.py            # every reproduction
    python examples/runtimes/repro_fastmcp.py quiescence # one

Each function below is self-contained (FastMCP and anyio only, no toolcancel, no network), prints
what the runtime did, and returns True when the behaviour reproduces; the script exits 1 if one
does not (the runtime changed: regenerate docs/REAL-WORLD.md).  Paste one into an issue as it is.
"""

from __future__ import annotations

import logging
import sys

import anyio
from fastmcp import Client, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.tools import ToolResult
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent


async def quiescence() -> bool:
    """R27 [cancel=gate:body]: a cancelled ``call_tool`` returns to its caller while the tool is
    still running (MCP answers no cancelled request, so the client cannot learn when the tool
    stopped)."""
    events: list[str] = []
    started, release = anyio.Event(), anyio.Event()
    server = FastMCP("repro")

    @server.tool
    async def write_file() -> str:
        started.set()
        with anyio.CancelScope(shield=True):  # work that cannot stop at once (a write, a thread)
            await release.wait()
        events.append("tool: finished")
        return "written"

    async with Client(server) as client, anyio.create_task_group() as group:
        with anyio.CancelScope() as call:

            async def cancel_when_started() -> None:
                await started.wait()
                call.cancel()  # the client sends notifications/cancelled

            group.start_soon(cancel_when_started)
            await client.call_tool("write_file", {})
        events.append("client: call_tool ended (cancelled)")
        release.set()
    print(" -> ".join(events))
    return events == ["client: call_tool ended (cancelled)", "tool: finished"]


async def unserializable_meta() -> bool:
    """R31 [body=bad_meta]: a result whose ``_meta`` is not JSON never reaches the client as a
    result: ``call_tool`` raises the server's "Internal server error"."""
    server = FastMCP("repro")

    @server.tool
    async def with_meta() -> ToolResult:
        return ToolResult(content=[TextContent(type="text", text="done")], meta={"f": len})

    async with Client(server) as client:
        try:
            await client.call_tool("with_meta", {}, raise_on_error=False)
        except MCPError as exc:
            print(f"call_tool raised {type(exc).__name__}: {exc}")
            return str(exc) == "Internal server error"
    return False


async def error_raised() -> bool:
    """R31: by default (``raise_on_error=True``) ``call_tool`` raises ``ToolError`` for an error
    result -- a failing tool, an unknown tool: the caller gets an exception, not the result the
    server sent (documented; ``raise_on_error=False`` returns it)."""
    server = FastMCP("repro")

    @server.tool
    async def failing() -> str:
        raise RuntimeError("tool failed")

    raised = []
    async with Client(server) as client:
        for name in ("failing", "no_such_tool"):
            try:
                await client.call_tool(name, {})
            except ToolError as exc:
                raised.append(f"{name}: ToolError({exc})")
    print("; ".join(raised))
    return raised == [
        "failing: ToolError(Error calling tool 'failing': tool failed)",
        "no_such_tool: ToolError(Unknown tool: 'no_such_tool')",
    ]


async def error_text() -> bool:
    """R3/R18: a tool's exception reaches the client as "Error calling tool
    '<name>': <message>", not the contract's "Error: <message>" -- a text-only difference."""
    server = FastMCP("repro")

    @server.tool
    async def failing() -> str:
        raise RuntimeError("tool failed")

    async with Client(server) as client:
        result = await client.call_tool("failing", {}, raise_on_error=False)
    texts = [c.model_dump()["text"] for c in result.content]
    print(f"isError={result.is_error} content={texts}")
    return result.is_error and texts == ["Error calling tool 'failing': tool failed"]


async def lossy_arguments() -> bool:
    """R11: arguments that are not losslessly JSON (a set) are sent anyway, as a list."""
    server = FastMCP("repro")
    seen: list[object] = []

    @server.tool
    async def echo(q: object) -> str:
        seen.append(q)
        return "done"

    async with Client(server) as client:
        result = await client.call_tool("echo", {"q": {1}})
    print(f"the tool received q={seen[0]!r}; isError={result.is_error}")
    return seen == [[1]] and not result.is_error


async def unknown_tool() -> bool:
    """R6 [tool_known=false]: an unknown tool is an error result (right) with FastMCP's own text and
    no error code: a text-only difference."""
    server = FastMCP("repro")
    async with Client(server) as client:
        result = await client.call_tool("no_such_tool", {}, raise_on_error=False)
    texts = [c.model_dump()["text"] for c in result.content]
    print(f"isError={result.is_error} content={texts}")
    return result.is_error and texts == ["Unknown tool: 'no_such_tool'"]


REPRODUCTIONS = {
    f.__name__: f
    for f in (
        quiescence,
        unserializable_meta,
        error_raised,
        error_text,
        lossy_arguments,
        unknown_tool,
    )
}


def main(names: list[str]) -> int:
    logging.disable(logging.CRITICAL)  # the server logs each failing tool's traceback
    failed = []
    for name in names or list(REPRODUCTIONS):
        print(f"{name}: ", end="", flush=True)
        if not anyio.run(REPRODUCTIONS[name]):
            failed.append(name)
    if failed:
        print(f"did not reproduce: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
