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
  raised to the caller as ``ToolError``, whose message is the result's first text block; the
  adapter reads it back as that error result (``isError`` true, the text as its one block) --
  the exception *is* the error result to a user of this call, but it cannot carry the error's
  code, which fails toolcancel's own server the same way (the control: the mapping's limit);
* ``adapter_fastmcp__no_raise.py``: ``call_tool(..., raise_on_error=False)``: the error result
  is returned.

Capabilities: ``around``, FastMCP's middleware -- each of the scenario's wrappers a
``Middleware`` whose ``on_call_tool`` does what spec/vectors/README.md says (``delegate`` awaits
``call_next(context)``, ``retry`` awaits it twice, a short answer is a ``ToolResult`` of its own),
passed to ``FastMCP(middleware=[...])`` outermost first; a middleware gets no signal to replace or
remove, so ``replace_signal`` and ``remove_signal`` are declared false.  ``timeout_policy``:
FastMCP's per-tool ``timeout`` (``@server.tool(timeout=...)``) is the scenario's budget
(``kit.Call.budget_s``); the server runs the tool under ``anyio.fail_after`` (the loop's clock,
so the driver's virtual one) and, past it, answers the request with the JSON-RPC error
``-32000`` "Tool 'tool' execution timed out after 0.1s", which the client reads as an error
result; the adapter tells the kit (``kit.Call.timed_out``).  The tool gets no signal object;
it gets the cancellation of its task (``toolcancel.runtimes.task_signal``), which
``body_signal`` declares.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any, ClassVar

import anyio
from adapter_mcp_sdk import Handled, as_result
from fastmcp import Client, FastMCP
from fastmcp.client.transports import ClientTransport
from fastmcp.client.transports.base import SessionKwargs, TransportOptions
from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools import ToolResult
from mcp import ClientSession
from mcp.server import Server
from mcp.shared.memory import create_client_server_memory_streams
from mcp_types import CallToolRequestParams, TextContent
from toolcancel import runtimes as kit
from typing_extensions import Unpack

TIMED_OUT = "execution timed out after"
"""What FastMCP's error for a tool past its ``timeout`` says (``MCPError(-32000, "Tool '...'
execution timed out after ...s")``)."""


class Settles(Middleware):
    """The outermost middleware: when the server is done with a ``tools/call`` request
    (``adapter_mcp_sdk.Handled``) -- MCP never answers a request its caller cancelled."""

    def __init__(self, handled: Handled) -> None:
        self.handled = handled

    async def on_call_tool(
        self,
        context: MiddlewareContext[CallToolRequestParams],
        call_next: CallNext[CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        got: ToolResult = await self.handled.around(call_next(context))
        return got


class InMemory(ClientTransport):
    """FastMCP's ``Client`` connected in memory to a low-level MCP ``Server`` -- toolcancel's
    ``build_server``, for the control -- as its own in-memory transport connects a ``FastMCP``:
    the server's ``run`` on one end of a stream pair, a ``ClientSession`` on the other."""

    def __init__(self, server: Server[Any]) -> None:
        self.server = server

    @asynccontextmanager
    async def connect_session(
        self,
        *,
        transport_options: TransportOptions | None = None,
        **session_kwargs: Unpack[SessionKwargs],
    ) -> AsyncIterator[ClientSession]:
        options = transport_options or TransportOptions()
        async with create_client_server_memory_streams() as (client, server):
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: self.server.run(
                    server[0], server[1], self.server.create_initialization_options()))  # fmt: skip
                try:
                    async with options.session_class(
                        read_stream=client[0], write_stream=client[1], **session_kwargs
                    ) as session:
                        yield session
                finally:
                    group.cancel_scope.cancel()


class Wrapper(Middleware):
    """Wrapper ``i`` of the scenario as FastMCP middleware (spec/vectors/README.md's table)."""

    def __init__(self, call: kit.Call, i: int, kind: str) -> None:
        if kind not in kit.WRAPPERS:
            raise kit.Unsupported(f"wrapper {kind!r}: a middleware has no signal slot")
        self.call, self.i, self.kind = call, i, kind

    async def on_call_tool(
        self,
        context: MiddlewareContext[CallToolRequestParams],
        call_next: CallNext[CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        def answer(text: str, is_error: bool) -> ToolResult:
            return ToolResult(content=[TextContent(type="text", text=text)], is_error=is_error)

        return await self.call.wrap(self.i, self.kind, lambda: call_next(context), answer)


class FastMcp(kit.Runtime):
    implementation = f"fastmcp {version('fastmcp')} (in-memory Client, call_tool raises on error)"
    capabilities: ClassVar[dict[str, bool]] = {  # see the docstring
        "body_signal": True,  # its task's cancellation
        "raw_args": False,  # the client sends JSON: a set arrives as a list
        "around": True,
        "replace_signal": False,
        "remove_signal": False,
        "timeout_policy": True,
    }
    cancel: ClassVar[list[str]] = ["message"]
    absent: ClassVar[dict[str, str]] = {
        "pre_policy": "middleware is FastMCP's one stage around a call (driven as around): "
        "on_call_tool may answer before call_next, which is the around stage's short answer, "
        "not a pre-execute decision",
        "approval": "a tools/call runs without an approval step; elicitation (Context.elicit) "
        "is a request the tool itself makes from its body",
        "replace_signal": "no signal slot: a middleware gets the MiddlewareContext and "
        "call_next; a tool's one cancellation is its request's task's",
        "remove_signal": "no signal slot (see replace_signal)",
    }
    raise_on_error: ClassVar[bool] = True

    def __init__(self, *, control: bool = False) -> None:
        self.control = control  # toolcancel's own server behind the same client
        if control:
            self.implementation = (  # type: ignore[misc]
                f"toolcancel build_server, control of {type(self).implementation}"
            )

    def server(self, call: kit.Call, handled: Handled) -> Any:
        """What the client connects to: a ``FastMCP`` server with the scenario's wrappers as
        middleware, or (``control``) toolcancel's server, the wrappers its registry's own."""
        if self.control:
            ours = kit.control_server(call, self.capabilities)
            ours.middleware.append(handled)
            return InMemory(ours)
        chain = [Wrapper(call, i, kind) for i, kind in enumerate(call.scenario["wrappers"])]
        server = FastMCP("toolcancel-vectors", middleware=[Settles(handled), *chain])
        if call.scenario["tool_known"]:

            @server.tool(name="tool", timeout=call.budget_s)
            async def tool(q: Any) -> ToolResult:
                del q
                value = await call.body(kit.task_signal, None)
                content = value["content"] if isinstance(value, dict) else value
                meta = value.get("meta") if isinstance(value, dict) else None
                return ToolResult(content=[TextContent(**c) for c in content], meta=meta)

        return server

    @asynccontextmanager
    async def open(self, call: kit.Call) -> AsyncIterator[kit.Execute]:
        handled = Handled(call)
        server = self.server(call, handled)
        name = "tool" if call.scenario["tool_known"] else "no_such_tool"
        async with Client(server) as client:

            async def execute(args: dict[str, Any]) -> kit.Outcome:
                try:
                    got = await client.call_tool(name, args, raise_on_error=self.raise_on_error)
                except ToolError as exc:  # raise_on_error: the error result, raised
                    await handled.settle()
                    result = {"content": [kit.text(str(exc))], "isError": True}
                except BaseException:
                    await handled.settle()
                    raise
                else:
                    result = as_result(got)  # type: ignore[arg-type]
                if result["isError"] and any(TIMED_OUT in c.get("text", "") for c in
                                             result["content"]):  # fmt: skip
                    call.timed_out()  # the tool's own timeout's error (FunctionTool.run)
                return kit.Outcome(result=result)

            yield execute


if __name__ == "__main__":
    # The server logs every failing tool with its traceback; the answers carry what matters.
    logging.getLogger("fastmcp").setLevel(logging.CRITICAL)
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    kit.main(FastMcp(), FastMcp(control=True))
