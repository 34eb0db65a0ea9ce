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
from typing import Any

import anyio
from fastmcp import Client, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import Middleware
from fastmcp.tools import ToolResult
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent


async def quiescence() -> bool:
    """R27 [cancel=gate:body]: a cancelled ``call_tool`` returns to its caller while the tool is
    still running (MCP answers no cancelled request, so the client cannot learn when the tool
    stopped).

    Kind: mapping -- MCP: "Receivers of cancellation notifications SHOULD [...] Not send a
    response for the cancelled request", so the client cannot see the tool stop; the adapter
    settles the call when the server is done with the request, as for the MCP SDK."""
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
    result: ``call_tool`` raises the server's "Internal server error".

    Kind: runtime -- a result that fails serialization reaches the client as a JSON-RPC
    "Internal server error", not as an error result: the call gets no tool result at all."""
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


async def middleware_exception() -> bool:
    """R31: a middleware's own exception is no error result: the request fails with a JSON-RPC
    error, and ``call_tool`` raises ``MCPError`` "Internal server error" (with
    ``raise_on_error`` either way) -- the caller gets neither the middleware's message nor a
    result.

    Kind: runtime -- a middleware's exception ends the request as a JSON-RPC "Internal server
    error": neither its message nor an error result reaches the caller."""

    class Refusing(Middleware):
        async def on_call_tool(self, context: Any, call_next: Any) -> Any:
            raise RuntimeError("middleware failed before delegating")

    server = FastMCP("repro", middleware=[Refusing()])

    @server.tool
    async def echo() -> str:
        return "done"

    async with Client(server) as client:
        try:
            await client.call_tool("echo", {}, raise_on_error=False)
        except MCPError as exc:
            print(f"call_tool raised {type(exc).__name__}: {exc}")
            return str(exc) == "Internal server error"
    return False


async def middleware_sees_tool_error_raised() -> bool:
    """R16/R17/R19: a tool's failure -- its exception, an unknown tool --
    reaches a middleware as an exception out of ``call_next``, not as an error result: a middleware
    that acts after delegating (retries, waits, checks, fails) never gets to; the tool's error ends
    the chain and becomes the call's result.

    Kind: runtime -- a tool's failure reaches a middleware as an exception out of
    ``call_next``, not as an error result, so a middleware that acts after delegating never
    gets to."""
    after: list[str] = []

    class Retrying(Middleware):
        async def on_call_tool(self, context: Any, call_next: Any) -> Any:
            await call_next(context)
            after.append("retrying")
            return await call_next(context)

    server = FastMCP("repro", middleware=[Retrying()])

    @server.tool
    async def failing() -> str:
        raise RuntimeError("tool failed")

    async with Client(server) as client:
        result = await client.call_tool("failing", {}, raise_on_error=False)
    texts = [c.model_dump()["text"] for c in result.content]
    print(f"the middleware went on after call_next: {bool(after)}; isError={result.is_error} "
          f"content={texts}")  # fmt: skip
    expected = ["Error calling tool 'failing': tool failed"]
    return not after and result.is_error and texts == expected


async def error_raised() -> bool:
    """R6/R18 [row=fastmcp]: by default (``raise_on_error=True``) ``call_tool`` raises
    ``ToolError`` for an error result -- a failing tool, an unknown tool -- carrying the result's
    first text block only: the caller gets the text, never the error's code (nor another block,
    nor ``_meta``).  The adapter reads that exception as the error result it stands for; the
    code it cannot carry fails toolcancel's own server the same way (the control).

    Kind: design -- ``Client.call_tool(..., raise_on_error: bool = True)``, "raise_on_error:
    Whether to raise ToolError on errors"; the message is ``result.content[0].text``
    (fastmcp/client/mixins/tools.py); ``raise_on_error=False`` (its own row) returns the result
    whole."""
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
    '<name>': <message>", not the contract's "Error: <message>" -- a text-only difference.

    Kind: design -- FastMCP words a tool's exception as "Error calling tool '<name>':
    <message>": the same behaviour as the contract's, other words."""
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
    """R11: arguments that are not losslessly JSON (a set) are sent anyway, as a list.

    Kind: mapping -- the client serializes a call's arguments to JSON before the server sees
    them: no MCP server can be sent a non-JSON value (the adapter declares ``raw_args`` false)."""
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
    no error code: a text-only difference.

    Kind: design -- an error result in FastMCP's own text, without a code: the same behaviour
    as the contract's, other words."""
    server = FastMCP("repro")
    async with Client(server) as client:
        result = await client.call_tool("no_such_tool", {}, raise_on_error=False)
    texts = [c.model_dump()["text"] for c in result.content]
    print(f"isError={result.is_error} content={texts}")
    return result.is_error and texts == ["Unknown tool: 'no_such_tool'"]


async def late_failure_past_timeout() -> bool:
    """R34 [timeout=timer_first, cooperative=false, body=throw]: a tool that outlasts its
    ``timeout`` finishing work that cannot stop half-way, then fails, is answered with its own
    failure, not the timeout -- while a late success past the same deadline is refused as a
    timeout.

    Kind: runtime -- ``FunctionTool`` rejects a result that outlasted the deadline ("Reject
    their result if execution outlasted the deadline", fastmcp/tools/function_tool.py) but lets
    an exception raised after it through: the deadline is checked for one outcome, not the
    other."""
    server = FastMCP("repro")

    async def outlast(fail: bool) -> str:
        with anyio.CancelScope(shield=True):  # the write cannot stop half-way
            await anyio.sleep(0.05)
        if fail:
            raise RuntimeError("tool failed")
        return "written"

    @server.tool(timeout=0.01)
    async def write_ok() -> str:
        return await outlast(False)

    @server.tool(timeout=0.01)
    async def write_fails() -> str:
        return await outlast(True)

    texts = []
    async with Client(server) as client:
        for name in ("write_ok", "write_fails"):
            result = await client.call_tool(name, {}, raise_on_error=False)
            texts.append(result.content[0].model_dump()["text"])
    print(f"late success: {texts[0]!r}; late failure: {texts[1]!r}")
    return texts == [
        "Error calling tool 'write_ok': Tool 'write_ok' execution timed out after 0.01s",
        "Error calling tool 'write_fails': tool failed",
    ]


async def tool_timeout_error() -> bool:
    """R34 [timeout=timer_first]: a tool past its ``timeout`` is answered with FastMCP's own
    error, "Error calling tool '<name>': Tool '<name>' execution timed out after <t>s" (a
    JSON-RPC error ``-32000`` the client turns into an error result), not the contract's
    ``TOOL_TIMEOUT`` -- and a middleware around the tool gets it as an exception out of
    ``call_next`` (see ``middleware_sees_tool_error_raised``).

    Kind: design -- ``FunctionTool.run`` raises ``MCPError(code=-32000, message=f"Tool
    '{self.name}' execution timed out after {self.timeout}s")`` (fastmcp/tools/function_tool.py):
    a timeout is an error in FastMCP's words, without the contract's code."""
    server = FastMCP("repro")

    @server.tool(timeout=0.01)
    async def lookup() -> str:
        await anyio.sleep(10)
        return "found"

    async with Client(server) as client:
        result = await client.call_tool("lookup", {}, raise_on_error=False)
    text = result.content[0].model_dump()["text"]
    print(f"isError={result.is_error} content={text!r}")
    return result.is_error and text == (
        "Error calling tool 'lookup': Tool 'lookup' execution timed out after 0.01s"
    )


REPRODUCTIONS = {
    f.__name__: f
    for f in (
        quiescence,
        unserializable_meta,
        middleware_exception,
        middleware_sees_tool_error_raised,
        error_raised,
        error_text,
        lossy_arguments,
        unknown_tool,
        late_failure_past_timeout,
        tool_timeout_error,
    )
}


if __name__ == "__main__":
    logging.disable(logging.CRITICAL)  # the server logs each failing tool's traceback
    from toolcancel.runtimes import reproduce  # only the runner: each pastes without it

    sys.exit(reproduce(REPRODUCTIONS))
