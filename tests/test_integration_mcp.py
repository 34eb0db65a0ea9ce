"""toolcancel.integrations.mcp: an existing MCP server's tools/call requests through a registry.

The SDK's own in-memory client calls an ``MCPServer`` (both its modes) or a low-level
``Server``; every wait is on an event.  These suites wait on the SDK's real event loop (its
client and server tasks), so they are bounded by the suite's wall-clock bound, never timed.
The user's example and page: tests/test_integration_pages.py.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

import mcp_types as types
from mcp import Client
from mcp.server import Server
from mcp.server.connection import Connection
from mcp.server.mcpserver import MCPServer
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.memory import create_client_server_memory_streams
from toolcancel import ToolRegistry
from toolcancel.integrations.mcp import ToolCalls

pytestmark = pytest.mark.timeout(120)  # a stuck SDK loop fails the test instead of hanging


class Write:
    """A tool that cannot stop half-way: cancelled, it finishes its write, then returns."""

    def __init__(self) -> None:
        self.writing = anyio.Event()
        self.told = anyio.Event()
        self.finish = anyio.Event()
        self.order: list[str] = []

    async def __call__(self, record: str) -> str:
        self.writing.set()
        try:
            await self.finish.wait()
        except anyio.get_cancelled_exc_class():
            self.told.set()
            with anyio.CancelScope(shield=True):
                await self.finish.wait()
        self.order.append("tool wrote")
        return f"saved {record}"


class Ended:
    """Outermost server middleware: notes when the server finished a tools/call request."""

    def __init__(self, order: list[str]) -> None:
        self.order = order

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        try:
            return await call_next(ctx)
        finally:
            if ctx.method == "tools/call":
                self.order.append("request ended")


def server_with(write: Write, calls: ToolCalls | None) -> MCPServer:
    server = MCPServer("records")
    server.tool(name="save")(write.__call__)
    server.middleware.append(Ended(write.order))
    if calls is not None:
        server.middleware.append(calls)
    return server


async def cancel_mid_write(client: Client, write: Write) -> list[Any]:
    """Call save, cancel the call once the tool writes, let it finish once it was told."""
    got: list[Any] = []
    async with anyio.create_task_group() as group:
        scope = anyio.CancelScope()

        async def call() -> None:
            with scope:
                got.append(await client.call_tool("save", {"record": "r"}))

        group.start_soon(call)
        await write.writing.wait()
        scope.cancel()
        await write.told.wait()
        write.finish.set()
    return got


def run(test: Any) -> None:
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    anyio.run(test)


def test_a_cancelled_request_settles_only_once_the_tool_stopped_and_publishes_aborted() -> None:
    async def main() -> None:
        write, calls = Write(), ToolCalls(ToolRegistry())
        async with Client(server_with(write, calls), mode="legacy") as client:
            got = await cancel_mid_write(client, write)
            [published] = await calls.settled()
        assert got == []  # MCP never answers a cancelled request
        assert write.order == ["tool wrote", "request ended"]
        assert published.tool == "save"
        assert published.result.error is not None and published.result.error.code == "ABORTED"

    run(main)


def test_the_default_client_gets_aborted_not_the_tools_late_success() -> None:
    async def main() -> None:
        for calls in (None, ToolCalls(ToolRegistry())):
            write = Write()
            async with Client(server_with(write, calls)) as client:  # mode="auto"
                [got] = await cancel_mid_write(client, write)
            text = got.content[0].text
            if calls is None:
                assert (text, got.is_error) == ("saved r", False)  # the SDK alone
            else:
                assert (text, got.is_error) == ("Error: tool call aborted", True)
                assert got.meta["toolcancel/error"] == {"name": "AbortError", "code": "ABORTED"}

    run(main)


def test_an_uncancelled_call_is_answered_exactly_as_without_the_integration() -> None:
    async def main() -> None:
        answers = []
        for calls in (None, ToolCalls(ToolRegistry())):
            write = Write()
            write.finish.set()
            async with Client(server_with(write, calls), mode="legacy") as client:
                answers.append(await client.call_tool("save", {"record": "r"}))
                answers.append(await client.call_tool("save", {"record": 7}))  # invalid
                assert [t.name for t in (await client.list_tools()).tools] == ["save"]
        assert answers[0] == answers[2] and answers[1] == answers[3]
        assert answers[1].is_error

    run(main)


def test_a_raise_out_of_the_sdks_handling_is_answered_with_the_registrys_error() -> None:
    async def main() -> None:
        server = MCPServer("records")

        @server.tool()
        async def odd() -> types.CallToolResult:
            return types.CallToolResult(content=[], _meta={"handle": object()})

        calls = ToolCalls(ToolRegistry())
        server.middleware.append(calls)
        async with Client(server, mode="legacy") as client:
            got = await client.call_tool("odd", {})
        assert got.is_error and got.content[0].text.startswith("Error: ")

    run(main)


def test_peer_cancel_mode_signal_reaches_the_tool_through_serve_connection() -> None:
    """The SDK's signal mode only sets the request's cancel_requested; served through
    ToolCalls.serve_connection the call's caller aborts on it and the tool is cancelled."""

    async def main() -> None:
        write, calls = Write(), ToolCalls(ToolRegistry())

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            text = await write(**(params.arguments or {}))
            return types.CallToolResult(content=[types.TextContent(text=text)])

        server = Server("records", on_call_tool=call_tool)
        server.middleware.append(calls)
        async with create_client_server_memory_streams() as (client_side, server_side):

            @asynccontextmanager
            async def transport() -> AsyncIterator[Any]:
                yield client_side

            dispatcher = JSONRPCDispatcher(*server_side, peer_cancel_mode="signal",
                                           inline_methods=frozenset({"initialize"}))  # fmt: skip
            async with server.lifespan(server) as state, anyio.create_task_group() as group:
                group.start_soon(
                    lambda: calls.serve_connection(
                        server, dispatcher, connection=Connection.for_loop(dispatcher),
                        lifespan_state=state,
                    )
                )  # fmt: skip
                async with Client(transport()) as client:
                    got = await cancel_mid_write(client, write)
                    [published] = await calls.settled()
                group.cancel_scope.cancel()
        assert got == [] and write.told.is_set()
        assert published.result.error is not None and published.result.error.code == "ABORTED"

    run(main)


def test_the_content_the_registry_is_told_is_the_sdks_own_dump_of_it() -> None:
    """The fast path through the SDK's CallToolResult (its content alone, converted) tells the
    registry what the full model_dump did, for every kind of content block; an error result is
    still the body's failure, and _meta still goes with the content."""
    from toolcancel.contract.results import ToolOutput
    from toolcancel.integrations.mcp import _ErrorResult, _output

    notes = types.Annotations(audience=["user"], priority=0.5)
    blocks: list[Any] = [
        types.TextContent(type="text", text="t", annotations=notes, _meta={"k": [1, None]}),
        types.ImageContent(type="image", data="aGk=", mimeType="image/png"),
        types.AudioContent(type="audio", data="aGk=", mimeType="audio/wav"),
        types.ResourceLink(type="resource_link", name="r", uri="file:///r", size=3),
        types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
            uri="file:///x", text="x", mimeType="text/plain")),
    ]  # fmt: skip

    def dumped(result: types.CallToolResult) -> Any:
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)["content"]

    plain = types.CallToolResult(content=blocks, structuredContent={"result": "t"})
    assert _output(plain) == dumped(plain)
    meta = types.CallToolResult(content=blocks[:1], _meta={"m": 1})
    assert _output(meta) == ToolOutput(dumped(meta), meta={"m": 1})
    failed = types.CallToolResult(content=[types.TextContent(type="text", text="no")], isError=True)
    with pytest.raises(_ErrorResult, match="no"):
        _output(failed)
