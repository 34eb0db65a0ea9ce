"""Per-call cost of toolcancel.integrations.mcp against the MCP SDK's own tool call.

    python bench/integration_mcp.py [--calls N] [--rounds R] [--json]

One unit is one ``Client.call_tool`` of a one-line tool on an ``MCPServer``, through the SDK's
in-memory client in its default mode (``auto``) and in ``legacy`` mode (JSON-RPC over memory
streams): the server plain, and the same server with ``ToolCalls`` in its middleware.  Plain and
integrated alternate on one open connection each, ``--rounds`` times each of ``--calls`` calls;
the medians of CPU time per call are printed with their ratio and the difference, which is what
the integration adds to each tool call.  A benchmark, not a test: nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from typing import Any

import anyio
from mcp import Client
from mcp.server.mcpserver import MCPServer
from toolcancel import ToolRegistry
from toolcancel.integrations.mcp import ToolCalls


def server(integrated: bool) -> MCPServer:
    s = MCPServer("bench")

    @s.tool()
    async def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    if integrated:
        s.middleware.append(ToolCalls(ToolRegistry()))
    return s


async def measure(mode: str, calls: int, rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {"plain": [], "integrated": []}
    async with Client(server(False), mode=mode) as plain, Client(
        server(True), mode=mode
    ) as integrated:
        clients: dict[str, Any] = {"plain": plain, "integrated": integrated}
        for client in clients.values():  # warm: the first calls build caches and plans
            for _ in range(20):
                await client.call_tool("lookup", {"key": "k"})
        for _ in range(rounds):
            for name, client in clients.items():
                start = time.process_time()
                for _ in range(calls):
                    await client.call_tool("lookup", {"key": "k"})
                times[name].append((time.process_time() - start) / calls * 1e6)
    p, i = statistics.median(times["plain"]), statistics.median(times["integrated"])
    return {"plain_us": p, "integrated_us": i, "ratio": i / p, "added_us": i - p}


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
                  f"ratio {got['ratio']:.3f} (+{got['added_us']:.0f} µs per call)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
