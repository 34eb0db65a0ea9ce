"""An MCP server over stdio whose one tool holds a gate the test opens: ``mcp_gated_server.py
GATE_FD [--trio]`` (tests/test_mcp.py runs it as a subprocess).

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

import logging
import os
import sys
from typing import Any

import anyio
from toolcancel import Execution, PathStep, ToolRegistry, ToolResult
from toolcancel.runtime.mcp import serve_stdio


def say(*words: object) -> None:
    print(*words, file=sys.stderr, flush=True)


def registry(gate: int) -> ToolRegistry:
    def step(view: Execution, step: PathStep) -> None:
        if step.dest == "draining":
            say("draining", view.call_id)

    # No drain warning: the gate stays shut as long as a test wants, and the log is asserted.
    tools = ToolRegistry(on_step=step, drain_warning=None)

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
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("toolcancel.runtime.mcp").setLevel(logging.INFO)
    backend = "trio" if "--trio" in sys.argv[2:] else "asyncio"
    anyio.run(serve_stdio, registry(int(sys.argv[1])), backend=backend)
    say("run ended")


if __name__ == "__main__":
    main()
