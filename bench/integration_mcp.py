"""Per-call cost of toolcancel.integrations.mcp against the MCP SDK's own tool call.

    python bench/integration_mcp.py [--calls N] [--rounds R] [--json]

One unit is one ``Client.call_tool`` of a one-line tool on an ``MCPServer``, through the SDK's
in-memory client in its default mode (``auto``) and in ``legacy`` mode (JSON-RPC over memory
streams): the server plain, and the same server with ``ToolCalls`` in its middleware.  Plain and
integrated alternate on one open connection each, ``--rounds`` times each of ``--calls`` calls;
the medians of CPU time per call are printed with their ratio and the difference, which is what
the integration adds to each tool call.

A third server says how much of that difference is the contract's: its middleware makes, beside
the SDK's unchanged call, one registry call whose body awaits a one-line coroutine under the
call's fused signal (``cancellable``) -- entry with its argument snapshot, the call's task of its
own, awaiting to quiescence, one frozen result published -- and nothing of the integration's.
``registry call`` is that server's cost over plain; the rest of ``added`` is the integration's
own (the record of each publication, the SDK's answer as the body's output and back).  A
benchmark, not a test: nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from contextlib import AsyncExitStack
from typing import Any

import anyio
from mcp import Client
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from toolcancel import AbortController, Execution, ToolRegistry, cancellable
from toolcancel.contract.results import text_block
from toolcancel.integrations.mcp import ToolCalls

VARIANTS = ("plain", "registry call", "integrated")


def server(variant: str) -> MCPServer:
    s = MCPServer("bench")

    @s.tool()
    async def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    if variant == "integrated":
        s.middleware.append(ToolCalls(ToolRegistry()))
    elif variant == "registry call":
        s.middleware.append(registry_call_beside())
    return s


def registry_call_beside() -> Any:
    """Middleware making one registry call (the contract alone) beside the SDK's own call."""
    registry = ToolRegistry()

    async def value() -> list[Any]:
        return [text_block("value of k")]

    async def body(arguments: Any, view: Execution) -> list[Any]:
        return await cancellable(view, value())

    registry.register("lookup", body)

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call":
            arguments = (ctx.params or {}).get("arguments")
            await registry.execute("lookup", arguments, signal=AbortController().signal)
        return await call_next(ctx)

    return middleware


async def measure(mode: str, calls: int, rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    async with AsyncExitStack() as stack:
        clients = {
            v: await stack.enter_async_context(Client(server(v), mode=mode)) for v in VARIANTS
        }
        for client in clients.values():  # warm: the first calls build caches and plans
            for _ in range(20):
                await client.call_tool("lookup", {"key": "k"})
        for _ in range(rounds):
            for name, client in clients.items():
                start = time.process_time()
                for _ in range(calls):
                    await client.call_tool("lookup", {"key": "k"})
                times[name].append((time.process_time() - start) / calls * 1e6)
    p, r, i = (statistics.median(times[v]) for v in VARIANTS)
    return {"plain_us": p, "integrated_us": i, "ratio": i / p, "added_us": i - p,
            "registry_call_us": r - p, "registry_call_ratio": r / p}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per round (default 300)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of each (default 7)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per mode")
    args = parser.parse_args()
    if args.calls < 1 or args.rounds < 1:
        parser.error("--calls and --rounds are positive numbers")
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    python = sys.version.split()[0]
    for mode in ("auto", "legacy"):
        got = anyio.run(measure, mode, args.calls, args.rounds)
        if args.json:
            print(json.dumps({"python": python, "mode": mode, **got}))
        else:
            print(f"mcp call_tool (in-memory, mode={mode!r}, Python {python}): "
                  f"plain {got['plain_us']:.0f} µs, integrated {got['integrated_us']:.0f} µs, "
                  f"ratio {got['ratio']:.3f} (+{got['added_us']:.0f} µs per call, of which "
                  f"the contract's registry call alone +{got['registry_call_us']:.0f} µs, "
                  f"ratio {got['registry_call_ratio']:.3f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
