"""Per-call cost of toolcancel.integrations.openai_agents against the SDK's own tool call.

    python bench/integration_openai_agents.py [--calls N] [--rounds R] [--json]

One unit is one run of an agent whose ``ScriptedModel`` calls one function tool once and then
answers: the SDK's plain tool call, and the same run with its tools through a ``ToolRegistry``
(a ``ToolCalls`` per run, as a program makes one, its agent cloned and the run awaited through
``ToolCalls.run``).  Plain and integrated alternate, ``--rounds`` times each of ``--calls``
runs, on one event loop; the medians of CPU time per run are printed with their ratio and the
difference, which is what the integration adds to each tool call.  A benchmark, not a test:
nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time

from agents import Agent, RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from toolcancel import ToolRegistry
from toolcancel.integrations.openai_agents import ToolCalls

CONFIG = RunConfig(tracing_disabled=True)


@function_tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def agent() -> Agent:
    model = ScriptedModel(
        [[function_call("lookup", {"key": "k"}, call_id="c1")], [assistant_message("done")]]
    )
    return Agent(name="a", model=model, tools=[lookup])


async def plain(n: int) -> None:
    for _ in range(n):
        await Runner.run(agent(), "go", run_config=CONFIG)


async def integrated(n: int, registry: ToolRegistry) -> None:
    for _ in range(n):
        calls = ToolCalls(registry)
        await calls.run(Runner.run(calls.agent(agent()), "go", run_config=CONFIG))


async def measure(calls: int, rounds: int) -> dict[str, float]:
    registry = ToolRegistry()
    await plain(20)  # warm both paths: imports, caches, the registry's first plan
    await integrated(20, registry)
    times: dict[str, list[float]] = {"plain": [], "integrated": []}
    for _ in range(rounds):
        for name in ("plain", "integrated"):
            start = time.process_time()
            await (plain(calls) if name == "plain" else integrated(calls, registry))
            times[name].append((time.process_time() - start) / calls * 1e6)
    p, i = statistics.median(times["plain"]), statistics.median(times["integrated"])
    return {"plain_us": p, "integrated_us": i, "ratio": i / p, "added_us": i - p}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="runs per round (default 200)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of each (default 7)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.calls < 1 or args.rounds < 1:
        parser.error("--calls and --rounds are positive numbers")
    got = asyncio.run(measure(args.calls, args.rounds))
    if args.json:
        print(json.dumps({"python": sys.version.split()[0], **got}))
    else:
        print(f"openai-agents tool call (one run, Python {sys.version.split()[0]}): "
              f"plain {got['plain_us']:.0f} µs, integrated {got['integrated_us']:.0f} µs, "
              f"ratio {got['ratio']:.3f} (+{got['added_us']:.0f} µs per call)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
