"""The per-call cost of an integration against its runtime's own tool call.

Shared by ``bench/integration_<runtime>.py``: each hands :func:`compare` two coroutines that make
the same ``calls`` tool calls through the runtime, plain and with the integration, and may hand a
third (``beside``): the runtime's own extension point with nothing of toolcancel in it, whose
ratio says how much of the integration's cost is the runtime's price for using that point.
Rounds alternate the variants (so load on the machine falls on all alike); each round times
``runs`` runs in CPU time of this process; the median round gives microseconds per tool call.
Prints one line per variant and the ratio (the goal: at most 1.25 on the fastest supported
Python).
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
    name: str,
    plain: Run,
    integrated: Run,
    calls: int,
    argv: list[str] | None = None,
    beside: tuple[str, Run] | None = None,
) -> float:
    """Time ``plain`` and ``integrated`` (each makes ``calls`` tool calls), and ``beside``'s run
    (a label and a run) if given; print and return the ratio of integrated to plain
    microseconds per call."""
    parser = argparse.ArgumentParser(description=f"per-call cost of the {name} integration")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds (median kept)")
    parser.add_argument("--runs", type=int, default=20, help="runs per round and variant")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.runs < 1:
        parser.error("--rounds and --runs must be at least 1")

    variants = (plain, integrated) if beside is None else (plain, integrated, beside[1])

    async def rounds() -> list[list[float]]:
        for run in variants:  # warm each up: imports, caches, first-call costs
            await run()
        per_call: list[list[float]] = [[] for _ in variants]
        for _ in range(args.rounds):
            for i, run in enumerate(variants):
                gc.collect()
                start = time.process_time()
                for _ in range(args.runs):
                    await run()
                per_call[i].append((time.process_time() - start) / (args.runs * calls) * 1e6)
        return per_call

    plain_us, integrated_us, *rest = (statistics.median(t) for t in asyncio.run(rounds()))
    ratio = integrated_us / plain_us
    version = ".".join(map(str, sys.version_info[:3]))
    print(f"{name} plain tool call: {plain_us:.1f} us (Python {version})")
    print(f"{name} with toolcancel: {integrated_us:.1f} us")
    print(f"{name} ratio: {ratio:.3f} (goal <= 1.25)")
    if beside is not None:
        print(f"{name} {beside[0]} alone (no toolcancel): {rest[0]:.1f} us, "
              f"ratio {rest[0] / plain_us:.3f}")  # fmt: skip
    return ratio
