"""toolcancel.runtime.mcp end to end, with the SDK's real client, on asyncio and on trio.

In memory, over both of the SDK's in-process paths: ``legacy`` (the JSON-RPC stream loop; a
client cancel is a ``notifications/cancelled`` the server applies by cancelling the handler's
scope, and the client stops waiting at once) and ``auto`` (the 2026 per-request path, where the
cancel is the client's scope reaching the handler).  Over stdio, the example server runs as a
subprocess.

Everything is ordered by events: a body or hook marks where it is, the test waits for that, then
cancels; the registry's step tap tells when a call drains; observers tell when a call published.
Nothing sleeps.  When the server must *not* do something yet (settle a cancelled request, end its
run), the test waits until every task is blocked (``anyio.wait_all_tasks_blocked``), looks, and
only then opens the body's gate: the held-out kind of server that lets go early, a mutant kept
here (``SERVERS``), must fail those tests.  Subprocess tests bound every wait (``BOUND``) and
fail when it passes: a stuck server fails the test instead of hanging it.
"""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import math
import os
import random
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.abc import ByteReceiveStream, Process
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types.version import LATEST_HANDSHAKE_VERSION
from toolcancel import Allow, Execution, PathStep, ToolRegistry, ToolResult, __version__
from toolcancel.runtime.cooperate import aborted
from toolcancel.runtime.mcp import (
    DRAIN_REPORT,
    build_server,
    report_progress,
    serve_stdio,
    to_call_tool_result,
)
from toolcancel.runtime.registry import DRAIN_WARNING

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("asyncio", "trio")
MODES = ("legacy", "auto")
ABORTED = {
    "content": [{"type": "text", "text": "Error: tool call aborted"}],
    "isError": True,
    "error": {"name": "AbortError", "code": "ABORTED"},
}


def text(s: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": s}]


class Rig:
    """A registry with recording observers and a step tap, and its MCP server."""

    def __init__(self) -> None:
        self.registry = ToolRegistry(on_step=self.step)
        self.published: dict[str, list[ToolResult]] = {}
        self.entered: set[str] = set()
        self.draining: dict[str, anyio.Event] = {}
        self.done: dict[str, anyio.Event] = {}
        self.registry.add_observer(self.observe)
        self.server = build_server(self.registry)

    def step(self, view: Execution, step: PathStep) -> None:
        self.entered.add(view.call_id)
        if step.dest == "draining":
            self.event(self.draining, view.name).set()

    def observe(self, view: Execution, result: ToolResult) -> None:
        self.published.setdefault(view.call_id, []).append(result)
        self.event(self.done, view.name).set()

    @staticmethod
    def event(table: dict[str, anyio.Event], key: str) -> anyio.Event:
        if key not in table:
            table[key] = anyio.Event()
        return table[key]


def wire(result: Any) -> dict[str, Any]:
    """A CallToolResult as JSON, without what the SDK stamps on it (``_meta`` of its own)."""
    data: dict[str, Any] = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    meta = {k: v for k, v in data.pop("_meta", {}).items() if k.startswith("toolcancel/")}
    return data | ({"_meta": meta} if meta else {})


def run(backend: str, test: Any, *args: Any) -> None:
    anyio.run(test, *args, backend=backend)


def other_tasks() -> list[str]:
    """Every task of the run but the current one and those it runs inside (nothing of the
    server may be left behind): asyncio's tasks, or trio's tree of tasks (its own system task
    that runs callbacks from other threads excepted)."""
    try:
        current = asyncio.current_task()
    except RuntimeError:
        current = None
    if current is not None:
        return [repr(t) for t in asyncio.all_tasks() if t is not current]
    import trio

    me = trio.lowlevel.current_task()
    left: list[str] = []
    stack = [trio.lowlevel.current_root_task()]
    while stack:
        task = stack.pop()
        for nursery in task.child_nurseries:
            for child in nursery.child_tasks:
                stack.append(child)
                idle = not child.child_nurseries and "run_sync_soon" not in child.name
                if child is not me and idle:
                    left.append(child.name)
    return left


async def cancelled_when(event: anyio.Event, work: Any) -> bool:
    """Run ``work()`` in a cancel scope that is cancelled once ``event`` is set; True if it was."""
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:

            async def cancel() -> None:
                await event.wait()
                scope.cancel()

            group.start_soon(cancel)
            await work()
            group.cancel_scope.cancel()
    return scope.cancelled_caught


CancelOne = Callable[..., Awaitable[ToolResult]]


@pytest.fixture
def cancel_one(mode: str) -> CancelOne:
    """How the cancel tests call: ``await cancel_one(rig, reached, name, beside=None)`` calls
    tool ``name`` over the in-memory client (``mode``), cancels the request once ``reached`` is
    set, waits until the call published, and returns its one result -- one call published once,
    nothing left in flight.  ``beside`` runs next to the call, in the client's block."""

    async def cancel(
        rig: Rig, reached: anyio.Event, name: str, beside: Callable[[], Any] | None = None
    ) -> ToolResult:
        async with Client(rig.server, mode=mode) as client, anyio.create_task_group() as group:
            if beside is not None:
                group.start_soon(beside)
            assert await cancelled_when(reached, lambda: client.call_tool(name, {}))
            await rig.event(rig.done, name).wait()
        [[result]] = rig.published.values()
        assert rig.registry.in_flight() == []
        return result

    return cancel


SERVERS = ("quiescent", "settles_early")
"""The server under test: toolcancel's, and the mutant the quiescence tests must kill."""


def settles_early(server: Any, group: anyio.abc.TaskGroup) -> None:
    """The mutant: the held-out kind of server that runs each call in a task of its own and stops
    waiting when the request is cancelled, so it settles the request -- and ends its run --
    while a body that ignores its signal still runs."""

    async def detach(ctx: Any, call_next: Any) -> Any:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        done, box = anyio.Event(), []
        group.start_soon(lambda: _into(box, done, call_next(ctx)))
        await done.wait()  # the one line that matters: this wait, not the call, is cancelled
        return box[0]

    server.middleware.append(detach)


async def _into(box: list[Any], done: anyio.Event, work: Any) -> None:
    box.append(await work)
    done.set()


def record_settling(server: Any, log: list[str]) -> None:
    """Log ``settled`` when the server lets go of a ``tools/call`` request (its handler chain
    ended, answered or not), through the SDK's public middleware list."""

    async def observe(ctx: Any, call_next: Any) -> Any:
        try:
            return await call_next(ctx)
        finally:
            if ctx.method == "tools/call":
                log.append("settled")

    server.middleware.append(observe)


def run_server_kind(server: str, backend: str, test: Any) -> None:
    """Run ``test``; with the mutant, it must fail, on the order it asserts."""
    if server == "quiescent":
        run(backend, test)
    else:
        with pytest.raises(AssertionError, match=r"before its body|before every body"):
            run(backend, test)


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancelled_request_settles_only_after_its_body(
    backend: str, mode: str, server: str
) -> None:
    async def main() -> None:
        rig = Rig()
        started, release = anyio.Event(), anyio.Event()
        log: list[str] = []

        async def stubborn(arguments: Any, view: Execution) -> list[dict[str, str]]:
            started.set()
            await release.wait()  # ignores its signal
            log.append("body done")
            return text("done anyway")

        rig.registry.register("stubborn", stubborn)
        record_settling(rig.server, log)
        async with anyio.create_task_group() as outer:
            if server == "settles_early":
                settles_early(rig.server, outer)
            async with Client(rig.server, mode=mode) as client:
                request = anyio.CancelScope()

                async def call() -> None:
                    with request:
                        await client.call_tool("stubborn", {})

                async with anyio.create_task_group() as calls:
                    calls.start_soon(call)
                    await started.wait()
                    request.cancel()  # the client cancels the request
                    await anyio.wait_all_tasks_blocked()  # the server did all it would do
                    seen = (list(log), [i.state for i in rig.registry.in_flight()])
                    log.append("released")
                    release.set()
            log.append("run ended")
        assert seen == ([], ["draining"]), "a cancelled request settled before its body"
        assert log == ["released", "body done", "settled", "run ended"]
        [[result]] = rig.published.values()
        assert result.to_data() == ABORTED

    run_server_kind(server, backend, main)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_tools_are_listed_and_called_with_progress(backend: str, mode: str) -> None:
    async def main() -> None:
        rig = Rig()

        async def echo(arguments: Any, view: Execution) -> list[dict[str, str]]:
            await report_progress(view, 1, 2, "half way")
            return text(arguments["text"])

        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        rig.registry.register("echo", echo, description="Echo.", input_schema=schema)
        rig.registry.register("bare", echo)
        progress: list[tuple[float, float | None, str | None]] = []

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            progress.append((p, total, message))

        async with Client(rig.server, mode=mode) as client:
            tools = (await client.list_tools()).tools
            assert [(t.name, t.description, t.input_schema) for t in tools] == [
                ("echo", "Echo.", schema),
                ("bare", None, {"type": "object"}),
            ]
            result = await client.call_tool("echo", {"text": "hi"}, progress_callback=on_progress)
            unknown = await client.call_tool("nope", {})
        assert result.model_dump(by_alias=True, exclude_none=True)["content"] == text("hi")
        assert result.is_error is False
        assert progress == [(1, 2, "half way")]
        assert unknown.is_error is True
        [[published], [missing]] = rig.published.values()
        assert wire(to_call_tool_result(published)) == wire(result)
        assert wire(to_call_tool_result(missing)) == wire(unknown)
        assert rig.registry.in_flight() == []

    run(backend, main)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancel_mid_body_drains_a_cooperative_body(
    backend: str, mode: str, cancel_one: CancelOne
) -> None:
    async def main() -> None:
        rig = Rig()
        started = anyio.Event()
        stopped: list[object] = []

        async def polite(arguments: Any, view: Execution) -> list[dict[str, str]]:
            started.set()
            stopped.append(await aborted(view))
            return text("partial")

        rig.registry.register("polite", polite)
        result = await cancel_one(rig, started, "polite")
        assert len(stopped) == 1
        assert result.to_data() == ABORTED  # a success after the abort is ABORTED (R18)

    run(backend, main)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancel_mid_body_waits_for_an_uncooperative_body(
    backend: str, mode: str, cancel_one: CancelOne
) -> None:
    async def main() -> None:
        rig = Rig()
        started, release = anyio.Event(), anyio.Event()
        log: list[str] = []

        async def stubborn(arguments: Any, view: Execution) -> list[dict[str, str]]:
            started.set()
            await release.wait()  # ignores its signal
            log.append("body done")
            return text("done anyway")

        rig.registry.register("stubborn", stubborn)

        async def release_when_draining() -> None:
            await rig.event(rig.draining, "stubborn").wait()
            [state] = [i.state for i in rig.registry.in_flight()]
            assert state == "draining" and rig.published == {}
            log.append("released")
            release.set()

        result = await cancel_one(rig, started, "stubborn", beside=release_when_draining)
        assert log == ["released", "body done"]
        assert result.to_data() == ABORTED

    run(backend, main)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancel_before_dispatch_starts_no_body(
    backend: str, mode: str, cancel_one: CancelOne
) -> None:
    async def main() -> None:
        rig = Rig()
        in_pre = anyio.Event()
        bodies: list[str] = []

        async def body(arguments: Any, view: Execution) -> list[dict[str, str]]:
            bodies.append("started")
            return text("ran")

        async def hold(view: Execution, next_: Any) -> Allow:
            in_pre.set()
            await aborted(view)  # pre-execute waits until the request is cancelled
            return Allow()

        rig.registry.register("t", body)
        rig.registry.add_pre_execute(hold)
        result = await cancel_one(rig, in_pre, "t")
        assert bodies == []
        assert result.to_data() == ABORTED

    run(backend, main)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_cancel_racing_completion_publishes_exactly_one_result(backend: str, mode: str) -> None:
    async def main() -> None:
        rig = Rig()
        started, release = anyio.Event(), anyio.Event()

        async def quick(arguments: Any, view: Execution) -> list[dict[str, str]]:
            started.set()
            await release.wait()
            return text("finished")

        rig.registry.register("t", quick)
        answers: list[Any] = []

        async def call() -> None:
            answers.append(await client.call_tool("t", {}))

        async with Client(rig.server, mode=mode) as client:
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(call)
                    await started.wait()
                    release.set()  # the body completes ...
                    scope.cancel()  # ... as the request is cancelled: no checkpoint between
            await rig.event(rig.done, "t").wait()
        [[result]] = rig.published.values()
        assert result.to_data() in (ABORTED, {"content": text("finished"), "isError": False})
        assert [wire(a) for a in answers] in ([], [wire(to_call_tool_result(result))])
        assert rig.registry.in_flight() == []

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_thousand_calls_with_random_cancels_lose_nothing(backend: str) -> None:
    """1,000 concurrent calls over JSON-RPC, a seeded third of them cancelled in their body and
    a third cancelled as they are sent (before or after they reach the registry: a race)."""
    rng = random.Random(17)
    plans = [rng.choice(("complete", "cancel_body", "cancel_sent")) for _ in range(1000)]

    async def main() -> None:
        rig = Rig()
        started = [anyio.Event() for _ in plans]
        stopped: Counter[str] = Counter()

        async def body(arguments: Any, view: Execution) -> list[dict[str, str]]:
            i = arguments["i"]
            started[i].set()
            if plans[i] == "cancel_body":
                await aborted(view)
                stopped["aborted"] += 1
            return text(str(i))

        rig.registry.register("t", body)
        answered: dict[int, Any] = {}
        published: dict[int, ToolResult] = {}
        rig.registry.add_observer(lambda v, result: published.setdefault(v.arguments["i"], result))

        async def one(i: int) -> None:
            async def call() -> None:
                answered[i] = await client.call_tool("t", {"i": i})

            if plans[i] == "complete":
                await call()
            elif plans[i] == "cancel_body":
                await cancelled_when(started[i], call)
            else:
                with anyio.CancelScope() as scope:
                    scope.cancel()
                    await call()

        async with Client(rig.server, mode="legacy") as client:
            async with anyio.create_task_group() as group:
                for i in range(len(plans)):
                    group.start_soon(one, i)
        # Nothing is waited for here: the server's run has ended, so every call it entered has
        # settled and published.  (Waiting inside the block for the cancelled calls to publish
        # hung under load: the SDK gives a client's notifications/cancelled 5 wall-clock seconds
        # to be written, then drops it, and a body waiting for an abort nobody sent never ends
        # before the server shuts down.)
        counts = Counter(len(results) for results in rig.published.values())
        assert counts == Counter({1: len(rig.entered)}), "every entered call publishes once"
        assert set(rig.published) == rig.entered
        for i, plan in enumerate(plans):
            if plan == "complete":
                assert wire(answered[i]) == wire(to_call_tool_result(published[i]))
                assert answered[i].is_error is False
            elif plan == "cancel_body":
                assert i not in answered and published[i].to_data() == ABORTED
            else:
                assert i not in answered  # never answered, whether or not it entered
        assert stopped["aborted"] == plans.count("cancel_body")
        assert rig.registry.in_flight() == []
        assert other_tasks() == []

    run(backend, main)


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_server_run_ends_only_after_every_body_settled(
    backend: str, mode: str, server: str
) -> None:
    """The client leaves with a cooperative and a stubborn call in flight: the server's run
    (the in-memory client's block) ends only once both bodies settled and both published."""

    async def main() -> None:
        rig = Rig()
        started = {name: anyio.Event() for name in ("polite", "stubborn")}
        release = anyio.Event()
        log: list[str] = []

        async def polite(arguments: Any, view: Execution) -> list[dict[str, str]]:
            started["polite"].set()
            await aborted(view)
            return text("stopped")

        async def stubborn(arguments: Any, view: Execution) -> list[dict[str, str]]:
            started["stubborn"].set()
            await release.wait()
            log.append("body done")
            return text("done anyway")

        rig.registry.register("polite", polite)
        rig.registry.register("stubborn", stubborn)
        seen: list[Any] = []

        async def release_when_all_blocked() -> None:
            await anyio.wait_all_tasks_blocked()  # the server did all it would do
            seen.append([i.state for i in rig.registry.in_flight()])
            log.append("released")
            release.set()

        async with anyio.create_task_group() as outer:
            if server == "settles_early":
                settles_early(rig.server, outer)
            async with Client(rig.server, mode=mode) as client:
                async with anyio.create_task_group() as calls:
                    for name in started:
                        calls.start_soon(client.call_tool, name, {})
                    for event in started.values():
                        await event.wait()
                    outer.start_soon(release_when_all_blocked)
                    calls.cancel_scope.cancel()  # the client leaves with both calls in flight
            log.append("run ended")
            published = {view: len(results) for view, results in rig.published.items()}
            order = list(log)
            release.set()  # the mutant left its bodies running: let them end
            outer.cancel_scope.cancel()
        assert order == ["released", "body done", "run ended"], "run ended before every body"
        assert seen == [["draining"]]
        assert sorted(published.values()) == [1, 1]
        assert [r[0].to_data() for r in rig.published.values()] == [ABORTED, ABORTED]
        assert rig.registry.in_flight() == []

    run_server_kind(server, backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_example_server_over_stdio(backend: str, tmp_path: Path) -> None:
    """The example as a subprocess: a call, and a cancel of a cooperative body mid-way; the
    server publishes both results (to its stderr log) and exits when the client leaves."""
    args = [str(ROOT / "examples" / "mcp_server.py")] + (["--trio"] if backend == "trio" else [])
    errors = tmp_path / "stderr.txt"

    async def main() -> None:
        params = StdioServerParameters(command=sys.executable, args=args)
        started = anyio.Event()

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            started.set()

        with errors.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                names = [t.name for t in (await client.list_tools()).tools]
                assert names == ["echo", "wait", "stubborn"]
                echoed = await client.call_tool("echo", {"text": "hi"})
                assert echoed.model_dump(by_alias=True)["content"][0]["text"] == "hi"
                assert await cancelled_when(
                    started, lambda: client.call_tool("wait", {}, progress_callback=on_progress)
                )

    anyio.run(main, backend=backend)
    published = [
        json.loads(line.split(" ", 2)[2])
        for line in errors.read_text().splitlines()
        if line.startswith("published ")
    ]
    assert published == [{"content": text("hi"), "isError": False}, ABORTED]


def test_the_contract_fields_mcp_has_no_place_for_ride_in_meta() -> None:
    aborted_result = ToolRegistry().results.cancellation("aborted", ({"note": "n"},))
    assert wire(to_call_tool_result(aborted_result)) == {
        "content": ABORTED["content"],
        "isError": True,
        "resultType": "complete",
        "_meta": {
            "toolcancel/error": ABORTED["error"],
            "toolcancel/additionalContexts": [{"note": "n"}],
        },
    }
    listed = ToolResult(({"type": "text", "text": "x"},), meta=[1, 2])
    assert wire(to_call_tool_result(listed))["_meta"] == {"toolcancel/meta": [1, 2]}
    mapped = ToolResult(({"type": "text", "text": "x"},), meta={"k": "v"})
    assert to_call_tool_result(mapped).meta == {"k": "v"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_arguments_are_checked_against_the_input_schema_before_the_registry(backend: str) -> None:
    async def main() -> None:
        rig = Rig()
        bodies: list[Any] = []

        async def echo(arguments: Any, view: Execution) -> list[dict[str, str]]:
            bodies.append(arguments)
            return text(arguments["text"])

        schema = {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        }
        rig.registry.register("echo", echo, input_schema=schema)
        rig.registry.register("broken", echo, input_schema={"type": "object", "required": "text"})
        async with Client(rig.server) as client:
            missing = await client.call_tool("echo", {})
            wrong = await client.call_tool("echo", {"text": 3})
            broken = await client.call_tool("broken", {"text": "x"})
            fine = await client.call_tool("echo", {"text": "hi"})
        assert wire(missing) == {
            "content": text(
                "invalid arguments for tool 'echo' at $: 'text' is a required property"
            ),
            "isError": True,
            "resultType": "complete",
        }
        assert wire(wrong)["content"] == text(
            "invalid arguments for tool 'echo' at $.text: 3 is not of type 'string'"
        )
        [line] = [c["text"] for c in wire(broken)["content"]]
        assert line.startswith("tool 'broken': its input_schema is not a JSON Schema: ")
        assert "\n" not in line and broken.is_error
        assert wire(fine)["content"] == text("hi")
        assert bodies == [{"text": "hi"}]  # no body started, and the registry never entered:
        assert len(rig.entered) == len(rig.published) == 1  # nothing published for them

    run(backend, main)


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        (
            {"type": "array"},
            'MCP needs an object schema at the top of its input_schema ("type": '
            '"object"), not "type": "array"',
        ),
        (
            {"properties": {}},
            'MCP needs an object schema at the top of its input_schema ("type": '
            '"object"), not "type": null',
        ),
        ({"type": "object", "required": "text"}, "its input_schema is not a JSON Schema: "),
    ],
)
def test_a_schema_mcp_cannot_list_is_refused_when_the_server_is_built(
    schema: dict[str, Any], why: str
) -> None:
    registry = ToolRegistry()
    registry.register("fine", echo_body, input_schema={"type": "object"})
    registry.register("odd", echo_body, input_schema=schema)
    with pytest.raises(ValueError) as refused:
        build_server(registry)
    [line] = str(refused.value).splitlines()
    assert line.startswith(f"tool 'odd': {why}"), line


@pytest.mark.parametrize("backend", BACKENDS)
def test_tools_list_works_whatever_a_later_tool_s_schema_is(
    backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        rig = Rig()  # built first: the tools come after, where build_server cannot see them
        rig.registry.register("fine", echo_body, input_schema={"type": "object"})
        rig.registry.register("odd", echo_body, input_schema={"type": "array"})
        with caplog.at_level(logging.WARNING, logger="toolcancel.runtime.mcp"):
            async with Client(rig.server) as client:
                first = [t.name for t in (await client.list_tools()).tools]
                again = [t.name for t in (await client.list_tools()).tools]
                odd = await client.call_tool("odd", {"text": "x"})
                fine = await client.call_tool("fine", {"text": "hi"})
        assert first == again == ["fine"]
        assert [r.getMessage() for r in caplog.records] == [
            "tools/list leaves out tool 'odd': MCP needs an object schema at the top of its "
            'input_schema ("type": "object"), not "type": "array"'
        ]
        assert odd.is_error and wire(odd)["content"][0]["text"].startswith("tool 'odd': MCP needs")
        assert wire(fine)["content"] == text("hi")
        assert len(rig.published) == 1  # the refused call never entered the registry

    run(backend, main)


async def echo_body(arguments: Any, view: Execution) -> list[dict[str, str]]:
    return text(arguments["text"])


def test_server_info_names_the_package_version() -> None:
    async def main() -> None:
        async with Client(build_server(ToolRegistry())) as client:
            assert client.server_info is not None
            assert (client.server_info.name, client.server_info.version) == (
                "toolcancel",
                __version__,
            )

    run("asyncio", main)


def test_without_the_extra_the_import_fails_in_one_line_naming_it() -> None:
    """The SDK hidden (``sys.modules[name] = None`` makes its import fail as if absent)."""
    for hidden in ("mcp", "mcp_types", "jsonschema"):
        code = (
            f"import sys; sys.modules[{hidden!r}] = None\n"
            "try:\n    import toolcancel.runtime.mcp\n"
            "except ModuleNotFoundError as e:\n    print(e.name, str(e), sep='|')"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
        )
        name, message = out.stdout.rstrip("\n").split("|")
        assert name.partition(".")[0] == hidden and "\n" not in message
        assert "pip install './toolcancel[mcp]'" in message, message


BOUND = 120.0
"""Real seconds any one wait on a subprocess may take before the test fails (the server is
stuck): far above what it takes on a loaded machine."""

LOG_LEVELS = ("DEBUG ", "INFO ", "WARNING ", "ERROR ", "CRITICAL ")


class Served:
    """tests/mcp_gated_server.py as a subprocess, spoken to in raw JSON-RPC lines, so that what
    goes on the wire is seen exactly.  Its stdout messages and stderr lines are kept in order;
    :meth:`until` waits (bounded) for a condition on them."""

    def __init__(self, process: Process, gate: int) -> None:
        self.process = process
        self.gate = gate
        self.messages: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.ended = 0  # how many of stdout and stderr reached their end
        self.changed = anyio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    async def collect(self, stream: ByteReceiveStream | None, into: Callable[[str], None]) -> None:
        assert stream is not None
        lines = BufferedByteReceiveStream(stream)
        while True:
            try:
                line = await lines.receive_until(b"\n", 1 << 20)
            except (anyio.IncompleteRead, anyio.EndOfStream):
                break
            into(line.decode())
            self.changed.set()
            self.changed = anyio.Event()
        self.ended += 1
        self.changed.set()

    async def until(self, what: str, ready: Callable[[], bool]) -> None:
        with anyio.move_on_after(BOUND) as bound:
            while not ready():
                await self.changed.wait()
        assert not bound.cancelled_caught, f"no {what} within {BOUND:g} s: {self.errors[-40:]}"

    def said(self, prefix: str) -> list[str]:
        return [line for line in self.errors if line.startswith(prefix)]

    def log(self) -> list[str]:
        return [line for line in self.errors if line.startswith(LOG_LEVELS)]

    def answered(self) -> set[Any]:
        return {m["id"] for m in self.messages if "id" in m}

    async def exit(self) -> int:
        with anyio.move_on_after(BOUND) as bound:
            code = await self.process.wait()
        assert not bound.cancelled_caught, f"the server did not exit within {BOUND:g} s"
        await self.until("end of its output", lambda: self.ended == 2)  # every line read
        return code

    def open_gate(self, bodies: int = 1) -> None:
        os.write(self.gate, b"x" * bodies)

    async def call(self, id_: int) -> str:
        """Start a ``gated`` call as request ``id_``; its call id once its body runs."""
        before = len(self.said("body started"))
        await self.send({"id": id_, "method": "tools/call", "params": {"name": "gated"}})
        await self.until("body start", lambda: len(self.said("body started")) > before)
        return self.said("body started")[-1].rsplit(" ", 1)[1]


@asynccontextmanager
async def served(backend: str, *options: str) -> AsyncIterator[Served]:
    """The gated server (given ``options`` of its own), initialized; killed on the way out if it
    is still running."""
    gate, opener = os.pipe()
    args = [sys.executable, str(ROOT / "tests" / "mcp_gated_server.py"), str(gate), *options]
    process = await anyio.open_process(
        args + (["--trio"] if backend == "trio" else []), pass_fds=(gate,), start_new_session=True
    )
    os.close(gate)
    server = Served(process, opener)
    try:
        async with anyio.create_task_group() as readers:
            readers.start_soon(
                server.collect, process.stdout, lambda s: server.messages.append(json.loads(s))
            )
            readers.start_soon(
                server.collect, process.stderr, lambda s: server.errors.append(s.rstrip("\n"))
            )
            hello = {"name": "test", "version": "0"}
            await server.send(
                {
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": LATEST_HANDSHAKE_VERSION,
                        "capabilities": {},
                        "clientInfo": hello,
                    },
                }
            )
            await server.until("initialize answer", lambda: 1 in server.answered())
            assert server.messages[0]["result"]["serverInfo"]["version"] == __version__
            await server.send({"method": "notifications/initialized"})
            yield server
    finally:
        if process.returncode is None:
            process.kill()
        os.close(opener)
        await process.aclose()


def published_by_call(server: Served) -> dict[str, list[Any]]:
    table: dict[str, list[Any]] = {}
    for line in server.said("published "):
        _, call_id, result = line.split(" ", 2)
        table.setdefault(call_id, []).append(json.loads(result))
    return table


STOPS = (signal.SIGINT, signal.SIGTERM)


@pytest.mark.parametrize("stop", STOPS, ids=lambda s: s.name)
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stop_signal_drains_publishes_once_and_exits_0(
    backend: str, stop: signal.Signals
) -> None:
    """Two stubborn bodies in flight, one of them cancelled by the client: the signal stops the
    server taking requests; it drains both, publishes each once, answers nothing for the
    cancelled one, logs one line and exits 0 -- and not before the bodies end."""

    async def main() -> None:
        async with served(backend) as server:
            cancelled = await server.call(2)
            await server.send({"method": "notifications/cancelled", "params": {"requestId": 2}})
            await server.until("drain", lambda: server.said(f"draining {cancelled}") != [])
            running = await server.call(3)
            server.process.send_signal(stop)
            await server.until("stop line", lambda: server.log() != [])
            await server.until("drain", lambda: server.said(f"draining {running}") != [])
            await server.send({"id": 4, "method": "tools/call", "params": {"name": "gated"}})
            assert server.process.returncode is None and server.said("published") == []
            assert server.said("run ended") == []
            server.open_gate(2)
            code = await server.exit()
            errors = list(server.errors)
            answered = server.answered()
        assert code == 0, errors
        [line] = [e for e in errors if e.startswith(LOG_LEVELS)]
        assert line.startswith(
            f"WARNING toolcancel.runtime.mcp: {stop.name}: taking no more requests"
        )
        assert cancelled in line and running in line
        assert published_by_call(server) == {cancelled: [ABORTED], running: [ABORTED]}
        assert len(server.said("body started")) == 2  # request 4 was never taken
        assert 2 not in answered and 4 not in answered  # cancelled, and never read
        done = max(errors.index(e) for e in errors if e.startswith(("body done", "published")))
        assert errors.index("run ended") > done == len(errors) - 2
        assert not any("Traceback" in e for e in errors), errors

    anyio.run(main, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_second_signal_abandons_in_one_error_line(backend: str) -> None:
    async def main() -> None:
        async with served(backend) as server:
            call = await server.call(2)
            server.process.send_signal(signal.SIGTERM)
            await server.until("stop line", lambda: server.log() != [])
            await server.until("drain", lambda: server.said(f"draining {call}") != [])
            server.process.send_signal(signal.SIGINT)
            code = await server.exit()
            errors = list(server.errors)
        assert code == 128 + signal.SIGINT, errors
        warning, error = [e for e in errors if e.startswith(LOG_LEVELS)]
        assert warning.startswith("WARNING toolcancel.runtime.mcp: SIGTERM: ")
        assert error.startswith("ERROR toolcancel.runtime.mcp: SIGINT after SIGTERM: abandoned ")
        assert f"{call} (gated, draining)" in error
        assert server.said("published") == server.said("run ended") == []
        assert not any("Traceback" in e for e in errors), errors

    anyio.run(main, backend=backend)


def machine_timers() -> dict[str, float]:
    """Every timer and timeout ``machine/`` declares, by where: a constant named for one
    (``*TIMEOUT*``, ``*WARNING``, ``*GRACE*``, ``*POLL*``, ``*REPORT*``, ``*_S``, ``*CAP*``), a
    parameter default named ``*timeout*``, a literal passed as ``timeout=``.  Not a limit on
    what a user may ask for (``MAX_*``) nor a hold (``HOLD*``, a test harness's own gate)."""
    named = re.compile(r"^(?!MAX_|HOLD).*(TIMEOUT|WARNING$|GRACE|POLL|REPORT|_S$|CAP)")
    found: dict[str, float] = {}

    def number(node: ast.AST | None) -> float | None:
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return float(node.value)
        return None

    for path in sorted((ROOT / "machine").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                value = number(node.value)
                for target in targets:
                    if value is not None and isinstance(target, ast.Name):
                        if named.search(target.id):
                            found[f"{where} {target.id}"] = value
            elif isinstance(node, ast.arguments):
                params = [*node.posonlyargs, *node.args]
                defaulted = params[len(params) - len(node.defaults) :]
                pairs = [*zip(defaulted, node.defaults, strict=True)]
                pairs += [*zip(node.kwonlyargs, node.kw_defaults, strict=True)]
                for param, default in pairs:
                    value = number(default)
                    if value is not None and "timeout" in param.arg:
                        found[f"{where} {param.arg}"] = value
            elif isinstance(node, ast.keyword) and node.arg == "timeout":
                value = number(node.value)
                if value is not None:
                    found[f"{where} timeout="] = value
    return found


REPORT = re.compile(r"WARNING toolcancel\.runtime\.mcp: SIGTERM: still draining call (\S+) "
                    r"\(gated, (\w+) for (\d+)s\); a second signal abandons it")  # fmt: skip


async def hold_past_every_timer(backend: str, *options: str) -> None:
    """A stubborn body draining after SIGTERM, on the server's virtual clock, held until the
    drain's own reports say it has drained twice as long as the longest timer in
    ``machine/`` -- and only then released: the server must still be there, must publish the
    body's result, and must exit 0 after that.  Raises AssertionError where it does not."""
    timers = machine_timers()
    longest = max(timers.values())
    held = 2 * longest

    def drained() -> float:
        reports = (REPORT.fullmatch(e) for e in server.errors)
        return max((float(m[3]) for m in reports if m and m[2] == "draining"), default=0)

    async with served(backend, "--virtual-clock", *options) as server:
        call = await server.call(2)
        server.process.send_signal(signal.SIGTERM)
        await server.until("drain", lambda: server.said(f"draining {call}") != [])
        await server.until(
            f"a report of {held:g} s drained", lambda: drained() >= held or server.ended == 2
        )
        early = server.ended != 0 or server.said("published") != []
        reported = len(server.errors)
        if not early:
            server.open_gate()
        code = await server.exit()
        errors = list(server.errors)
    assert not early, (
        f"the server ended (status {code}) before its body was released, its drain reported "
        f"up to {drained():g} s (the longest timer in machine/ is {longest:g} s): {errors[-5:]}"
    )
    assert code == 0, errors
    assert published_by_call(server) == {call: [ABORTED]}
    reports = [m for e in errors if (m := REPORT.fullmatch(e))]
    assert reports and {m[1] for m in reports} == {call}  # one line per call, naming it
    seconds = [int(m[3]) for m in reports if m[2] == "draining"]
    assert seconds == sorted(set(seconds)), seconds  # one line a report
    done = errors.index(f"body done {call}")
    assert reported <= done < errors.index(next(e for e in errors if e.startswith("published")))
    assert errors[-1] == "run ended" and not any("Traceback" in e for e in errors), errors
    other = [e for e in server.log() if not REPORT.fullmatch(e)]
    assert len(other) == 2, other  # the stop line, and the registry's one drain warning
    assert other[0].startswith("WARNING toolcancel.runtime.mcp: SIGTERM: taking no more")
    assert f"call {call} (gated): the body is still running {DRAIN_WARNING:g}s" in other[1]


@pytest.mark.rules("R27")
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stop_signal_drains_past_every_timer_and_publishes_after_release(backend: str) -> None:
    anyio.run(hold_past_every_timer, backend, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_server_whose_drain_gives_up_fails_the_held_drain(backend: str) -> None:
    """The shipped mutant ``capped_drain`` (its reports real, its drain capped) fails the test
    above: it ends before the body is released, its result never published."""
    from toolcancel.selfcheck.mutants import DRAIN_CAP_S

    with pytest.raises(AssertionError, match="before its body was released") as failed:
        anyio.run(hold_past_every_timer, backend, "--mutant", "capped_drain", backend=backend)
    assert "(status 0)" in str(failed.value) and DRAIN_CAP_S < DRAIN_REPORT


def test_every_timer_in_machine_is_found_by_the_held_drain() -> None:
    """What "longer than any timer" is measured against: the scan sees the timers we know of,
    and the registry's drain warning and the server's report interval among them."""
    from toolcancel.oracle.conform.adapter import HELLO_TIMEOUT, REAP_TIMEOUT
    from toolcancel.selfcheck.mutants import DRAIN_CAP_S, GRACE_S

    values = set(machine_timers().values())
    known = {DRAIN_WARNING, DRAIN_REPORT, HELLO_TIMEOUT, REAP_TIMEOUT, GRACE_S, DRAIN_CAP_S}
    assert known <= values, known - values


@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, "30", True])
def test_a_bad_drain_report_is_refused_before_serving(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"^drain_report is a positive number of seconds"):
        anyio.run(partial(serve_stdio, ToolRegistry(), drain_report=bad))


@pytest.mark.parametrize("backend", BACKENDS)
def test_over_stdio_a_client_hanging_up_ends_the_run_only_after_the_body(backend: str) -> None:
    async def main() -> None:
        async with served(backend) as server:
            call = await server.call(2)
            assert server.process.stdin is not None
            await server.process.stdin.aclose()  # the client hangs up with the call in flight
            await server.until("drain", lambda: server.said(f"draining {call}") != [])
            assert server.process.returncode is None and server.said("run ended") == []
            server.open_gate()
            code = await server.exit()
            errors = list(server.errors)
        assert code == 0 and server.log() == [], errors
        order = [
            e.split(" ")[0] + (" " + e.split(" ")[1] if e.startswith("body") else "")
            for e in errors
        ]
        assert order == ["body started", "draining", "body done", "published", "run"], errors
        assert published_by_call(server) == {call: [ABORTED]}

    anyio.run(main, backend=backend)


def test_the_example_without_the_extra_says_so_in_one_line() -> None:
    example = ROOT / "examples" / "mcp_server.py"
    code = (
        "import runpy, sys; sys.modules['mcp'] = None\n"
        f"sys.argv = [{str(example)!r}]; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith("mcp_server.py: toolcancel.runtime.mcp needs the mcp extra ")
    assert out.stderr.count("\n") == 1, out.stderr
