"""The per-call cost of an integration against its runtime's own tool call.

Shared by ``bench/integration_<runtime>.py``: each hands :func:`compare` two coroutines that make
the same ``calls`` tool calls through the runtime, plain and with the integration.  Rounds
alternate the two (so load on the machine falls on both alike); each round times ``runs`` runs
in CPU time of this process; the median round gives microseconds per tool call.  Prints one line
per variant and the ratio (the goal: at most 1.25 on the fastest supported Python).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

Run = Callable[[], Awaitable[None]]


def compare(
    name: str, plain: Run, integrated: Run, calls: int, argv: list[str] | None = None
) -> float:
    """Time ``plain`` and ``integrated`` (each makes ``calls`` tool calls); print and return the
    ratio of integrated to plain microseconds per call."""
    parser = argparse.ArgumentParser(description=f"per-call cost of the {name} integration")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds (median kept)")
    parser.add_argument("--runs", type=int, default=20, help="runs per round and variant")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.runs < 1:
        parser.error("--rounds and --runs must be at least 1")

    async def rounds() -> tuple[list[float], list[float]]:
        for run in (plain, integrated):  # warm both up: imports, caches, first-call costs
            await run()
        per_call: tuple[list[float], list[float]] = ([], [])
        for _ in range(args.rounds):
            for i, run in enumerate((plain, integrated)):
                gc.collect()
                start = time.process_time()
                for _ in range(args.runs):
                    await run()
                per_call[i].append((time.process_time() - start) / (args.runs * calls) * 1e6)
        return per_call

    plain_us, integrated_us = (statistics.median(t) for t in asyncio.run(rounds()))
    ratio = integrated_us / plain_us
    version = ".".join(map(str, sys.version_info[:3]))
    print(f"{name} plain tool call: {plain_us:.1f} us (Python {version})")
    print(f"{name} with toolcancel: {integrated_us:.1f} us")
    print(f"{name} ratio: {ratio:.3f} (goal <= 1.25)")
    return ratio
