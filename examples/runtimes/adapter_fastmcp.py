"""FastMCP 4 (the ``fastmcp`` package, standalone) at outcome level: its ``Client`` in memory.

    toolcancel conform --revision seed --adapter python examples/runtimes/adapter_fastmcp.py

Each vector registers the scenario's tool on a fresh ``FastMCP`` server with ``@server.tool()``
(a ``ToolResult`` carries a body's ``meta`` as the result's ``_meta``, beside what FastMCP adds
there under MCP's reserved prefix, see ``adapter_mcp_sdk.RESERVED``) and calls it with FastMCP's
own ``Client`` connected to the server object -- its in-memory transport, what FastMCP's docs
recommend for testing a server.  The call the contract calls ``execute()`` is
``Client.call_tool``; the caller cancels it by cancelling its scope (``cancel: ["message"]``: the
client sends ``notifications/cancelled``).  Its result is the ``CallToolResult`` it returns
(``content``, ``isError`` its ``is_error``, ``meta`` its ``meta``).

One row per way users read a call (``raise_on_error``):

* this file: ``call_tool`` as called by default (``raise_on_error=True``): an error result is
  raised to the caller as ``ToolError``;
* ``adapter_fastmcp__no_raise.py``: ``call_tool(..., raise_on_error=False)``: the error result
  is returned.

Capabilities: ``around``, FastMCP's middleware -- each of the scenario's wrappers a
``Middleware`` whose ``on_call_tool`` does what spec/vectors/README.md says (``delegate`` awaits
``call_next(context)``, ``retry`` awaits it twice, a short answer is a ``ToolResult`` of its own),
passed to ``FastMCP(middleware=[...])`` outermost first; a middleware gets no signal to replace or
remove, so ``replace_signal`` and ``remove_signal`` are declared false.  FastMCP's per-tool
``timeout`` is not driven yet (``timeout_policy`` absent).  The tool gets no signal object;
it gets the cancellation of its task (``rt_driver.task_signal``), which ``body_signal`` declares.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any, ClassVar

import rt_driver
from adapter_mcp_sdk import tool_meta
from fastmcp import Client, FastMCP
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools import ToolResult
from mcp_types import CallToolRequestParams, TextContent


class Wrapper(Middleware):
    """Wrapper ``i`` of the scenario as FastMCP middleware (spec/vectors/README.md's table)."""

    KINDS = ("delegate", "retry", "wait_before", "wait_after", "short_success", "short_error",
             "throw_before", "throw_after")  # fmt: skip

    def __init__(self, call: rt_driver.Call, i: int, kind: str) -> None:
        if kind not in self.KINDS:
            raise rt_driver.Unsupported(f"wrapper {kind!r}: a middleware has no signal slot")
        self.call, self.i, self.kind = call, i, kind

    async def on_call_tool(
        self,
        context: MiddlewareContext[CallToolRequestParams],
        call_next: CallNext[CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        i, kind = self.i, self.kind
        if kind == "short_success":
            return ToolResult(content=[TextContent(type="text", text=f"wrapper {i} answered")])
        if kind == "short_error":
            text = f"Error: wrapper {i} refused"
            return ToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        if kind == "throw_before":
            raise RuntimeError(f"wrapper {i} failed before delegating")
        if kind == "wait_before":
            await self.call.gate(f"w{i}_before")
        got = await call_next(context)
        if kind == "retry":
            got = await call_next(context)
        if kind == "wait_after":
            await self.call.gate(f"w{i}_after")
        if kind == "throw_after":
            raise RuntimeError(f"wrapper {i} failed after delegating")
        return got


class FastMcp(rt_driver.Runtime):
    implementation = f"fastmcp {version('fastmcp')} (in-memory Client, call_tool raises on error)"
    capabilities: ClassVar[dict[str, bool]] = {  # see the docstring
        "body_signal": True,  # its task's cancellation
        "around": True,
        "replace_signal": False,
        "remove_signal": False,
    }
    cancel: ClassVar[list[str]] = ["message"]
    raise_on_error: ClassVar[bool] = True

    @asynccontextmanager
    async def open(self, call: rt_driver.Call) -> AsyncIterator[rt_driver.Execute]:
        chain = [Wrapper(call, i, kind) for i, kind in enumerate(call.scenario["wrappers"])]
        server = FastMCP("toolcancel-vectors", middleware=chain)
        if call.scenario["tool_known"]:

            @server.tool(name="tool")
            async def tool(q: Any) -> ToolResult:
                del q
                value = await call.body(rt_driver.task_signal, None)
                content = value["content"] if isinstance(value, dict) else value
                meta = value.get("meta") if isinstance(value, dict) else None
                return ToolResult(content=[TextContent(**c) for c in content], meta=meta)

        name = "tool" if call.scenario["tool_known"] else "no_such_tool"
        async with Client(server) as client:

            async def execute(args: dict[str, Any]) -> rt_driver.Outcome:
                got = await client.call_tool(name, args, raise_on_error=self.raise_on_error)
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
    logging.getLogger("fastmcp").setLevel(logging.CRITICAL)
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    rt_driver.serve(FastMcp())
