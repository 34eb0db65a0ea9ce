"""Benchmark of ``toolcancel check``: how many trace events a second it reads and checks.

Not a test (timings depend on the machine); run it by hand::

    python bench/bench_check.py [--revision seed|revised] [--calls N] [--events M] [--keep PATH]

What it measures: the trace is *recorded* from the reference registry -- ``--calls`` distinct
calls spread over the model checker's configuration space (``toolcancel.selfcheck.verifier.
configurations``), each run by the scenario harness with a gate-based cancellation point, so the
mix of paths, aborts, wrappers and results is the real one.  The recorded calls are then written
under fresh call ids, interleaved eight at a time like concurrent calls, until the file holds at
least ``--events`` lines.  One run of ``Checker.check_file`` (read, validate, replay, verdicts)
is timed and reported as events per second (wall clock, and per CPU-second of this process, which
other load on the machine does not change); the read and check phases are timed once more on
their own, for the profile.  The target is at least 200,000 events/s.
"""

from __future__ import annotations

import argparse
import functools
import gc
import sys
import tempfile
import time
from itertools import cycle
from pathlib import Path
from typing import Any

from toolcancel.contract.trace import TraceRecorder, encode_line
from toolcancel.contract.trace_reader import read_traces
from toolcancel.oracle.judge.checker import Checker
from toolcancel.oracle.scenario_language import Scenario
from toolcancel.runtime.registry import ToolRegistry
from toolcancel.runtime.virtual_time import VirtualClock, run
from toolcancel.selfcheck.harness import Harness
from toolcancel.selfcheck.space import configurations

CANCELS = (
    "never",
    "gate:pre",
    "gate:body",
    "gate:approval",
    "gate:w0_before",
    "gate:post",
    "gate:w0_after",
    "after",
)


def record(revision: str, calls: int) -> list[list[str]]:
    """``calls`` recorded calls (each a list of encoded lines), spread over the space."""
    space = list(configurations(revision))
    stride = max(1, len(space) // calls)
    chosen: list[Scenario] = []
    cancels = cycle(CANCELS)
    for config in space[::stride][:calls]:
        cancel = next(cancels) if config.caller == "live" else "never"
        chosen.append(config.with_cancel(cancel))
    recorder = TraceRecorder()
    factory = functools.partial(ToolRegistry, trace=recorder)
    out: list[list[str]] = []

    async def go(clock: VirtualClock) -> None:
        for scenario in chosen:
            start = len(recorder.lines)
            await Harness(scenario, factory, clock).run()
            out.append([encode_line(ln) for ln in recorder.lines[start:]])

    clock = VirtualClock()
    run(go(clock), clock=clock)
    return out


def write(calls: list[list[str]], events: int, path: Path) -> tuple[int, int]:
    """Write copies of the calls under fresh ids, eight interleaved at a time."""
    written = n_calls = 0
    with path.open("w", encoding="utf-8") as f:
        copy = 0
        while written < events:
            for g in range(0, len(calls), 8):
                group = []
                for k, lines in enumerate(calls[g : g + 8]):
                    fresh = f'"call":"r{copy}-{g + k}"'
                    group.append([ln.replace('"call":"c1"', fresh, 1) for ln in lines])
                n_calls += len(group)
                for i in range(max(map(len, group))):
                    for lines in group:
                        if i < len(lines):
                            f.write(lines[i] + "\n")
                            written += 1
            copy += 1
    return written, n_calls


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--revision", default="seed", choices=("seed", "revised"))
    p.add_argument("--calls", type=int, default=6000, help="distinct recorded calls")
    p.add_argument("--events", type=int, default=1_500_000, help="lines in the trace, at least")
    p.add_argument("--keep", type=Path, help="write the trace here and keep it")
    args = p.parse_args(argv)

    t0 = time.perf_counter()
    calls = record(args.revision, args.calls)
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "bench.jsonl"
        events, n_calls = write(calls, args.events, path)
        size = path.stat().st_size
        print(
            f"recorded {len(calls):,} distinct calls in {t1 - t0:.1f}s; trace: {events:,} events, "
            f"{n_calls:,} calls, {size / 1e6:.0f} MB ({args.revision})"
        )
        checker = Checker(args.revision)
        start, cpu = time.perf_counter(), time.process_time()
        verdicts = checker.check_file(path)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        bad = sum(not v.conforming for v in verdicts)
        print(
            f"check: {events / seconds:,.0f} events/s ({seconds:.2f}s for {events:,} events; "
            f"{len(verdicts):,} calls, {bad} violations)"
        )
        # On a shared machine the wall clock also counts other processes' time slices.
        print(f"  {events / cpu:,.0f} events per CPU-second of this process")
        start = time.perf_counter()
        traces: Any = read_traces(path)
        read_s = time.perf_counter() - start
        gc.disable()  # as check_file does: see toolcancel.contract.trace_reader.read_traces
        start = time.perf_counter()
        checker.check_traces(traces, str(path))
        check_s = time.perf_counter() - start
        gc.enable()
        print(
            f"  of which read+validate {events / read_s:,.0f} events/s, "
            f"replay+verdicts {events / check_s:,.0f} events/s"
        )
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
