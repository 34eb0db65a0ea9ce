"""Throughput of ``toolcancel check`` (events/s) and ``toolcancel conform --self`` (vectors/s).

pytest-benchmark, driven by ``bench/run.py``: each round is one whole run, as a user waits for
it.  The check reads a trace recorded from the reference registry over the model checker's
configuration space (see ``bench_check.py``: the real mix of paths, aborts, wrappers and
results); conform runs every committed vector of a revision against our own adapter (start-up,
hello, the adapter's work, the trace checker and the comparisons included).  The asserts check
results, never timings.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import bench_check
import pytest
from toolcancel.oracle.conform import conform, self_command
from toolcancel.oracle.judge.checker import Checker
from toolcancel.oracle.vectors import REVISIONS

CHECK_EVENTS = int(os.environ.get("TOOLCANCEL_BENCH_CHECK_EVENTS", "600000"))
CHECK_CALLS = int(os.environ.get("TOOLCANCEL_BENCH_CHECK_CALLS", "6000"))
ROUNDS = int(os.environ.get("TOOLCANCEL_BENCH_ROUNDS", "5"))


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, int]:
    calls = bench_check.record("seed", CHECK_CALLS)
    path = tmp_path_factory.mktemp("check") / "bench.jsonl"
    events, n_calls = bench_check.write(calls, CHECK_EVENTS, path)
    return path, events, n_calls


@pytest.mark.benchmark(group="throughput")
def test_check_events(benchmark: Any, trace_file: tuple[Path, int, int]) -> None:
    path, events, n_calls = trace_file
    checker = Checker("seed")
    benchmark.extra_info.update(items=events, unit="events", calls=n_calls)
    verdicts = benchmark.pedantic(checker.check_file, args=(path,), rounds=ROUNDS,
                                  warmup_rounds=1)
    assert len(verdicts) == n_calls and all(v.conforming for v in verdicts)


@pytest.mark.benchmark(group="throughput")
@pytest.mark.parametrize("revision", REVISIONS)
def test_conform_self(benchmark: Any, revision: str) -> None:
    reports: list[Any] = []

    def once() -> None:
        reports.append(conform(self_command(), revision))

    benchmark.pedantic(once, rounds=ROUNDS, warmup_rounds=0)
    benchmark.extra_info.update(items=len(reports[-1].judgements), unit="vectors")
    assert all(r.failed == 0 and r.judgements for r in reports)
