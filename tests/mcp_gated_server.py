"""An MCP server over stdio whose one tool holds a gate the test opens: ``mcp_gated_server.py
GATE_FD [--trio] [--virtual-clock] [--mutant NAME]`` (tests/test_mcp.py runs it as a subprocess).

``--virtual-clock`` runs the server on an autojumping virtual clock (asyncio's
:class:`~toolcancel.runtime.virtual_time.VirtualClock`, trio's ``MockClock``): while the server
has nothing to do but wait, its clock jumps to its next timer, so a drain can outlast every timer
in seconds of real time; the drain's reports and the registry's drain warning are on, at their
defaults (without it, both are off).  ``--mutant NAME`` serves it with a server mutant of
:mod:`toolcancel.selfcheck.mutants` active.

``gated`` ignores its signal and returns only once a byte arrives on the pipe ``GATE_FD`` (a
stubborn body: however the call is cancelled or the server stopped, it must be awaited).  What
the server does is written to stderr, one line each, in the order it happens:

* ``body started <call id>``, ``body done <call id>``: the body's edges;
* ``draining <call id>``: the call was aborted with its body running;
* ``published <call id> <result JSON>``: an observer saw the call's result;
* ``run ended``: :func:`toolcancel.runtime.mcp.serve_stdio` returned;
* the log (``LEVEL logger: message``), at INFO and above from toolcancel.runtime.mcp, WARNING
elsewhere.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import os
import sys
from typing import Any

import anyio
from toolcancel import Execution, PathStep, ToolRegistry, ToolResult
from toolcancel.runtime.mcp import DRAIN_REPORT, serve_stdio
from toolcancel.runtime.registry import DRAIN_WARNING
from toolcancel.runtime.virtual_time import VirtualClock


def say(*words: object) -> None:
    print(*words, file=sys.stderr, flush=True)


def registry(gate: int, drain_warning: float | None = None) -> ToolRegistry:
    def step(view: Execution, step: PathStep) -> None:
        if step.dest == "draining":
            say("draining", view.call_id)

    # No drain warning on the real clock: the gate stays shut as long as a test wants, and the
    # log is asserted.
    tools = ToolRegistry(on_step=step, drain_warning=drain_warning)

    @tools.tool(description="Wait for the gate, whatever happens.")
    async def gated(arguments: Any, view: Execution) -> list[dict[str, str]]:
        say("body started", view.call_id)
        await anyio.to_thread.run_sync(os.read, gate, 1)  # a byte each: a thread each
        say("body done", view.call_id)
        return [{"type": "text", "text": "opened"}]

    def published(view: Execution, result: ToolResult) -> None:
        say("published", view.call_id, result.to_json())

    tools.add_observer(published)
    return tools


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("gate", type=int)
    parser.add_argument("--trio", action="store_true")
    parser.add_argument("--virtual-clock", action="store_true")
    parser.add_argument("--mutant")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("toolcancel.runtime.mcp").setLevel(logging.INFO)
    backend = "trio" if args.trio else "asyncio"
    options: dict[str, Any] = {}
    if args.virtual_clock and args.trio:
        import trio.testing

        options["clock"] = trio.testing.MockClock(autojump_threshold=AUTOJUMP)
    elif args.virtual_clock:
        options["loop_factory"] = _virtual_loop
    serve = functools.partial(
        serve_stdio,
        registry(args.gate, DRAIN_WARNING if args.virtual_clock else None),
        drain_report=DRAIN_REPORT if args.virtual_clock else None,
    )
    with contextlib.ExitStack() as active:
        if args.mutant is not None:
            from toolcancel.selfcheck import mutants

            found = {m.name: m for m in mutants.SERVER_MUTANTS}
            active.enter_context(found[args.mutant].active())
        anyio.run(serve, backend=backend, backend_options=options)
    say("run ended")


AUTOJUMP = 0.01
"""Real seconds the server's virtual clock waits, when idle, before jumping to its next timer:
a thread finishing (the gated body's read) gets that long to be seen first, and the clock moves
at most a hundred timers a second instead of spinning."""


def _virtual_loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    _patches.enter_context(VirtualClock(autojump_threshold=AUTOJUMP).patch_loop(loop))
    return loop


_patches = contextlib.ExitStack()  # the loop's clock, for as long as the process runs


if __name__ == "__main__":
    main()
