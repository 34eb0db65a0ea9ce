"""Per-call CPU time of each benchmark shape, rounds interleaved: ``python bench/per_call.py``.

Run with each venv's interpreter (``bench/run.py`` does, for every tested Python and build); it
prints one JSON object, per shape the minimum, median and maximum microseconds of process CPU
time per call over the rounds.  A round runs one batch of every shape, the shapes in a rotating
order, so a burst of load from another process falls on every shape of the round alike and the
ratios of one run stay steady; shapes measured one after another (pytest-benchmark's way) let a
burst land on one shape's rounds only and move its ratio by 3-5 % on a shared machine.

The shapes: a bare ``await asyncio.create_task(body())`` (the unit of every ratio); the registry
plain and with one hook of each kind (``test_overhead.plain`` / ``hooked``); the same two shapes
through ``minimal.py`` (the contract's guarantees without the machine); and the hooked registry
with a trace recorder.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

import minimal  # bench/ is the script's folder, first on the path
from test_overhead import body, hooked, plain
from toolcancel import AbortController
from toolcancel.contract.trace import TraceRecorder

BATCH = 2000
ROUNDS = 15
WARM_UP = 2

Batch = Callable[[], Coroutine[Any, Any, None]]


def _bare() -> Batch:
    async def batch() -> None:
        for _ in range(BATCH):
            await asyncio.create_task(body({}, None))

    return batch


def _calls(reg: Any, before: Callable[[], None] = lambda: None) -> Batch:
    signal = AbortController().signal

    async def batch() -> None:
        before()
        for _ in range(BATCH):
            await reg.execute("t", {"q": 1}, signal=signal)

    return batch


def shapes() -> dict[str, Batch]:
    """Every shape's batch, by the name ``bench/run.py`` reads."""
    recorder = TraceRecorder()
    return {
        "bare_task": _bare(),
        "registry_plain": _calls(plain()),
        "registry_hooked": _calls(hooked()),
        "minimal_plain": _calls(plain(minimal.Pipeline)),
        "minimal_hooked": _calls(hooked(minimal.Pipeline)),
        "registry_hooked_traced": _calls(hooked(trace=recorder), recorder.clear),
    }


def measure(rounds: int) -> dict[str, dict[str, float]]:
    """Microseconds of CPU per call, per shape: min / median / max over ``rounds`` interleaved
    rounds, after :data:`WARM_UP` rounds that are not counted."""
    batches = shapes()
    names = list(batches)
    times: dict[str, list[float]] = {name: [] for name in names}
    loop = asyncio.new_event_loop()
    try:
        for rnd in range(WARM_UP + rounds):
            k = rnd % len(names)
            for name in names[k:] + names[:k]:  # each shape leads a round in turn
                start = time.process_time()
                loop.run_until_complete(batches[name]())
                if rnd >= WARM_UP:
                    times[name].append((time.process_time() - start) / BATCH * 1e6)
    finally:
        loop.close()
    return {name: {"min_us": min(t), "median_us": statistics.median(t), "max_us": max(t),
                   "rounds": len(t)} for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"default {ROUNDS}")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    json.dump(measure(args.rounds), sys.stdout)
    print()


if __name__ == "__main__":
    main()
