"""Serve a :class:`~toolcancel.ToolRegistry`'s tools over the Model Context Protocol.

Requires the ``mcp`` extra (the official SDK and jsonschema): ``pip install './toolcancel[mcp]'``,
where ``./toolcancel`` is your clone (``[mcp,trio]`` to run on trio)::

    from .mcp import serve_stdio
    anyio.run(serve_stdio, registry)

``tools/list`` lists the registered tools (name, description, ``input_schema``); ``tools/call``
checks the arguments against the tool's ``input_schema`` (a mismatch is an error result and the
registry is never entered), then runs the call through the registry, so every call of the
contract's pipeline applies, and the registry's timeout policy is installed: a tool's
``timeout_ms`` is its budget.

Cancellation.  A client cancels a request with ``notifications/cancelled``; the SDK applies it
(its default ``"interrupt"`` mode -- the only one ``Server.run`` offers in mcp 2.3) by
cancelling the handler's cancel scope.  The registry turns that cancellation into the call's
caller aborting (CONTRACT.md, Python binding P2): no body starts after it (C1, C2), a running
body is told through its signal and awaited to quiescence however long it takes (R27), and the
call's one frozen result is published to the registry's observers (R31).  Only then does the
handler end: the request is settled, never answered (the SDK drops whatever the handler ends
with), and no progress is sent for it once it is cancelled.  Server shutdown (the client hangs
up, or a stop signal) cancels every handler the same way: the server's run returns once every
body has settled.

Stopping.  :func:`serve_stdio` stops on SIGINT or SIGTERM as on the client hanging up: no more
requests are read, every call in flight is cancelled and drained, its result published, and the
run returns (the process exits 0); that is logged as one line.  The drain has no bound of its
own: however long a body ignores its signal, the server waits for it (R27), and every
``drain_report`` seconds logs one WARNING line for each call still in flight, naming it and how
long it has been in its state.  A second signal abandons the calls still running -- the one way
out of quiescence, on request (the binding's P7) -- logging one ERROR line that names them, and
ends the process at once with status 128 + the signal's number.

Progress.  A body reports progress with :func:`report_progress` and its execution view; it goes
to the client only if the request asked for it (a progress token) and was not cancelled.
"""

from __future__ import annotations

import codecs
import itertools
import json
import logging
import math
import os
import signal
import sys
from collections.abc import Collection, Mapping
from typing import Any, Final, cast

from ..contract.results import ToolResult
from .registry import Execution, ToolDefinition, ToolRegistry
from .signals import AbortController
from .timeout_policy import install_timeout_policy

_EXTRA: Final = frozenset({"anyio", "jsonschema", "mcp", "mcp_types"})  # what the extra brings
try:
    import anyio
    import anyio.abc
    import jsonschema  # type: ignore[import-untyped]  # no stubs: only its results are used
    import mcp_types as types
    from mcp.server import Server
    from mcp.server.context import ServerRequestContext
    from mcp.server.stdio import stdio_server
except ModuleNotFoundError as missing:
    if (missing.name or "").partition(".")[0] not in _EXTRA:
        raise
    raise ModuleNotFoundError(
        f"toolcancel.runtime.mcp needs the mcp extra ({missing.name} is missing): "
        "pip install './toolcancel[mcp]', where ./toolcancel is your clone of toolcancel",
        name=missing.name,
    ) from None

__all__ = [
    "ANY_OBJECT",
    "DRAIN_REPORT",
    "STOP_SIGNALS",
    "build_server",
    "report_progress",
    "serve_stdio",
    "to_call_tool_result",
]

ANY_OBJECT: Final[Mapping[str, Any]] = {"type": "object"}
"""The input schema of a tool registered without one: any arguments object."""

STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
"""The signals :func:`serve_stdio` stops on by default (Ctrl-C, and what process managers send)."""

DRAIN_REPORT: Final = 30.0
"""Default of ``serve_stdio(drain_report=...)``: seconds between the lines naming each call still
draining after a stop signal (the registry's own drain warning, ``DRAIN_WARNING``, is once)."""

_ERROR_META: Final = "toolcancel/error"
_CONTEXTS_META: Final = "toolcancel/additionalContexts"
_META: Final = "toolcancel/meta"

log = logging.getLogger(__name__)

_requests: dict[object, ServerRequestContext[Any, Any]] = {}
"""The MCP request of each call being served, by its execution view's token."""
_ids = itertools.count(1)


def _package_version() -> str:
    """The server's version when none is given: the installed distribution's (read here, not
    through the command line's helper: a server an embedder builds imports no CLI)."""
    from importlib import metadata

    try:
        return metadata.version("toolcancel")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def build_server(
    registry: ToolRegistry,
    *,
    name: str = "toolcancel",
    version: str | None = None,
    agent: str | None = None,
    instructions: str | None = None,
) -> Server[Any]:
    """An MCP server whose tools are ``registry``'s, as seen by ``agent``.

    ``version`` is the ``serverInfo.version`` clients are shown: toolcancel's own by default.
    Installs the registry's timeout policy (one server per registry: installing it twice would
    wrap every call in two deadlines).
    """
    for definition in registry.definitions(agent):
        refused = _schema_refusal(definition)
        if refused is not None:
            raise ValueError(refused)
    install_timeout_policy(registry)
    validators: dict[str, tuple[Mapping[str, Any], Any]] = {}  # tool -> (its schema, a validator)
    left_out: set[tuple[str, int]] = set()  # tools listed without, each logged once

    def invalid(name: str, arguments: Mapping[str, Any]) -> str | None:
        """Why ``arguments`` do not fit tool ``name``'s ``input_schema``, if they do not."""
        definition = registry.definition(name, agent)
        if definition is None or definition.input_schema is None:
            return None  # an unknown tool is the registry's to answer
        schema = definition.input_schema
        known = validators.get(name)
        if known is None or known[0] is not schema:
            refused = _schema_refusal(definition)
            if refused is not None:
                return refused
            known = validators[name] = (schema, jsonschema.validators.validator_for(schema)(schema))
        error = jsonschema.exceptions.best_match(known[1].iter_errors(arguments))
        if error is None:
            return None
        return f"invalid arguments for tool {name!r} at {error.json_path}: {error.message}"

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = []
        for definition in registry.definitions(agent):
            refused = _schema_refusal(definition)
            if refused is None:
                tools.append(_tool(definition))
            elif (definition.name, id(definition)) not in left_out:  # registered after the build
                left_out.add((definition.name, id(definition)))
                log.warning("tools/list leaves out %s", refused)
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = {} if params.arguments is None else params.arguments
        why = invalid(params.name, arguments)
        if why is not None:  # before the registry: no call is entered, nothing is published
            return types.CallToolResult(content=[types.TextContent(text=why)], is_error=True)
        caller = AbortController()  # aborted only through the request's cancellation (P2)
        pending = registry.execute(
            params.name,
            arguments,
            signal=caller.signal,
            call_id=f"mcp-{next(_ids)}-{ctx.request_id}",
            agent=agent,
        )
        token = pending.view.token
        _requests[token] = ctx
        try:
            result = await pending
        finally:
            del _requests[token]
        return to_call_tool_result(result)

    return Server(
        name,
        version=_package_version() if version is None else version,
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(
    registry: ToolRegistry,
    *,
    stop_signals: Collection[signal.Signals] = STOP_SIGNALS,
    drain_report: float | None = DRAIN_REPORT,
    **options: Any,
) -> None:
    """Serve ``registry``'s tools on this process's stdin and stdout until the client leaves or
    one of ``stop_signals`` arrives (the module's "Stopping"; ``()``: no signal handling, as
    outside the main thread, where signals cannot be received).

    ``drain_report`` is how many seconds apart, once a stop signal came, the calls still
    draining are logged, one line each (``None``: never).  It only reports: the drain itself
    waits for as long as the bodies run.

    ``options`` are :func:`build_server`'s.  Run it with ``anyio.run`` (asyncio or trio).
    While it serves, fd 0 points at the null device (a body or a child reading stdin cannot eat
    the client's messages) and fd 1 at stderr (the SDK's own guard for stdout).
    """
    if drain_report is not None and not (
        isinstance(drain_report, (int, float))
        and not isinstance(drain_report, bool)
        and 0 < drain_report < math.inf
    ):
        raise ValueError(
            f"drain_report is a positive number of seconds (or None), not {drain_report!r}"
        )
    server = build_server(registry, **options)
    with _Stdin() as stdin:
        # The SDK's own reader blocks a worker thread in readline(), which no cancellation
        # reaches: stopping would wait for the client's next line.  _Stdin reads only what is
        # ready, so a stop ends it at once; to the SDK it is the async file of lines it takes.
        async with stdio_server(stdin=cast("anyio.AsyncFile[str]", stdin)) as (read, write):
            async with anyio.create_task_group() as group:
                if stop_signals:
                    await group.start(_stop_on, stop_signals, registry, stdin, drain_report)
                await server.run(read, write, server.create_initialization_options())
                group.cancel_scope.cancel()


async def _stop_on(
    signals: Collection[signal.Signals],
    registry: ToolRegistry,
    stdin: _Stdin,
    drain_report: float | None,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """The first of ``signals`` ends stdin, as a client hanging up would (the server drains and
    its run returns) and starts the drain's reports; a second one abandons whatever still runs
    and ends the process.  Cancelled when the run returns: every call has settled."""
    with anyio.open_signal_receiver(*signals) as received:
        task_status.started()
        first: str | None = None
        async with anyio.create_task_group() as reports:
            async for number in received:
                name = signal.Signals(number).name
                calls = ", ".join(
                    f"{c.call_id} ({c.name}, {c.state})" for c in registry.in_flight()
                )
                if first is None:
                    first = name
                    log.warning(
                        "%s: taking no more requests; draining the calls in flight (%s); a "
                        "second signal abandons them",
                        name,
                        calls or "none",
                    )
                    stdin.close()
                    if drain_report is not None:
                        reports.start_soon(_report_draining, registry, name, drain_report)
                    continue
                log.error(
                    "%s after %s: abandoned the calls still in flight, not drained and their "
                    "results not published: %s",
                    name,
                    first,
                    calls or "none",
                )
                logging.shutdown()  # flushes the log's handlers: nothing else runs after this
                sys.stdout.flush()
                os._exit(128 + number)


async def _report_draining(registry: ToolRegistry, stop: str, every: float) -> None:
    """Every ``every`` seconds, one WARNING line per call still in flight after the stop signal
    ``stop``: the drain waits however long that is (no timer ends it), and says what for."""
    while True:
        await anyio.sleep(every)
        for call in registry.in_flight():
            log.warning(
                "%s: still draining call %s (%s, %s for %.0fs); a second signal abandons it",
                stop,
                call.call_id,
                call.name,
                call.state,
                call.seconds,
            )


class _Stdin:
    """The client's lines from stdin, read only when some are ready (polled, not read by a
    blocked thread), so that :meth:`close` ends them at once.  Entered, it moves the client's
    pipe off fd 0 to a private descriptor and points fd 0 at the null device; left, it puts the
    pipe back.  A regular file (stdin redirected from one), which cannot be polled and never
    blocks, is read in a worker thread."""

    def __init__(self) -> None:
        self._fd = -1
        self._pollable = True
        self._closed = False
        self._reading: anyio.CancelScope | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._text = ""

    def __enter__(self) -> _Stdin:
        self._fd = os.dup(0)
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)
        return self

    def __exit__(self, *exc: object) -> None:
        os.dup2(self._fd, 0)
        os.close(self._fd)

    def close(self) -> None:
        """End the lines now: the one being waited for, if any, is not read."""
        self._closed = True
        if self._reading is not None:
            self._reading.cancel()

    def __aiter__(self) -> _Stdin:
        return self

    async def __anext__(self) -> str:
        while "\n" not in self._text:
            chunk = await self._read()
            if not chunk:  # end of file, or closed
                tail, self._text = self._text + self._decoder.decode(b"", final=True), ""
                if tail and not self._closed:
                    return tail
                raise StopAsyncIteration
            self._text += self._decoder.decode(chunk)
        line, _, self._text = self._text.partition("\n")
        return line + "\n"

    async def _read(self) -> bytes:
        with anyio.CancelScope() as self._reading:
            if self._closed:
                return b""
            if self._pollable:
                try:
                    await anyio.wait_readable(self._fd)
                except OSError:  # epoll refuses a regular file (or the null device)
                    self._pollable = False
                else:
                    return os.read(self._fd, 65536)
            return await anyio.to_thread.run_sync(os.read, self._fd, 65536)
        return b""  # closed while waiting


async def report_progress(
    view: Execution, progress: float, total: float | None = None, message: str | None = None
) -> None:
    """Send a progress notification for the MCP request ``view``'s call serves.

    Nothing is sent when the client asked for no progress, when the call is not served over MCP
    (the registry is also called directly), or once the call's signal has aborted: a cancelled
    request gets no further messages.
    """
    ctx = _requests.get(view.token)
    if ctx is None or view.call_signal.aborted:
        return
    await ctx.session.report_progress(progress, total, message)


def to_call_tool_result(result: ToolResult) -> types.CallToolResult:
    """The MCP ``CallToolResult`` of a frozen result: its content and ``isError`` as they are
    (the envelope is MCP's); an object ``meta`` is ``_meta``; the contract's ``error`` and
    ``additionalContexts``, and a ``meta`` that is not an object, which MCP has no field for, go
    under ``_meta`` (``toolcancel/error``, ``toolcancel/additionalContexts``, ``toolcancel/meta``).
    """
    data = result.to_data()
    own = data.get("meta")
    meta: dict[str, Any] = dict(own) if isinstance(own, dict) else {}
    if own is not None and not isinstance(own, dict):  # MCP's _meta is an object
        meta[_META] = own
    if data.get("error") is not None:
        meta[_ERROR_META] = data["error"]
    if data.get("additionalContexts"):
        meta[_CONTEXTS_META] = data["additionalContexts"]
    wire: dict[str, Any] = {"content": data["content"], "isError": data["isError"]}
    if meta:
        wire["_meta"] = meta
    return types.CallToolResult.model_validate(wire)


def _schema_refusal(definition: ToolDefinition) -> str | None:
    """Why MCP cannot list ``definition``'s tool, if it cannot: its ``input_schema`` is not a JSON
    Schema, or its top level is not an object schema (``"type": "object"``, which MCP's
    ``Tool.inputSchema`` requires).  One line naming the tool."""
    schema = definition.input_schema
    if schema is None:
        return None
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as bad:
        return (
            f"tool {definition.name!r}: its input_schema is not a JSON Schema: "
            f"{' '.join(bad.message.split())}"
        )
    if schema.get("type") != "object":
        return (
            f"tool {definition.name!r}: MCP needs an object schema at the top of its input_schema "
            f'("type": "object"), not "type": {json.dumps(schema.get("type"))}'
        )
    return None


def _tool(definition: ToolDefinition) -> types.Tool:
    schema = ANY_OBJECT if definition.input_schema is None else definition.input_schema
    return types.Tool.model_validate(
        {
            "name": definition.name,
            "description": definition.description or None,
            "inputSchema": dict(schema),
        }
    )
