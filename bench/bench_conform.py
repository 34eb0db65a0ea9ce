"""Benchmark: vectors per second of ``toolcancel conform``, ours and the JS example side by side.

The issue asks for at least 1,000 vectors/s with our own adapter and through the JavaScript
example's adapter.  One run over every committed vector of a revision is the measurement: it
includes the adapter's start-up and hello, sending, the adapter's work, the judging (the trace
checker at trace level) and the comparisons -- what a user waits for.  All adapters run in the
same invocation, one after the other, so their figures come from the same machine state.

    python bench/bench_conform.py [--revision seed|revised|all] [--min 1000]
                                  [--adapters self,self-outcome,js-trace,js-outcome]

Prints one line per (adapter, revision); exits 1 if a run falls below ``--min`` or any vector
fails.  The JS adapters need ``node`` (Node >= 20) and are skipped, saying so, without it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from toolcancel.oracle.conform import conform, self_command
from toolcancel.oracle.vectors import REVISIONS

JS = Path(__file__).resolve().parent.parent / "examples" / "js"
ADAPTERS = {
    "self": lambda: self_command(),
    "self-outcome": lambda: self_command(level="outcome"),
    "js-trace": lambda: ["node", str(JS / "adapter-trace.js")],
    "js-outcome": lambda: ["node", str(JS / "adapter-outcome.js")],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--revision", choices=(*REVISIONS, "all"), default="all")
    parser.add_argument("--min", type=float, default=1000.0, help="vectors/s to reach")
    parser.add_argument("--adapters", default=",".join(ADAPTERS), help="comma-separated")
    args = parser.parse_args()
    names = [n for n in args.adapters.split(",") if n]
    unknown = [n for n in names if n not in ADAPTERS]
    if unknown:
        parser.error(f"unknown adapter(s) {', '.join(unknown)}; known: {', '.join(ADAPTERS)}")
    ok = True
    for name in names:
        if name.startswith("js-") and shutil.which("node") is None:
            print(f"{name}: SKIPPED -- node is not installed (the JS example needs Node >= 20)")
            continue
        for revision in REVISIONS if args.revision == "all" else (args.revision,):
            report = conform(ADAPTERS[name](), revision)
            rate = len(report.judgements) / report.seconds
            ok = ok and rate >= args.min and report.failed == 0
            print(
                f"{name:<13} {revision:<8} {report.level:<8} {len(report.judgements):>6,} vectors "
                f"in {report.seconds:5.2f} s = {rate:>6,.0f} vectors/s "
                f"({report.passed:,} passed, {report.failed:,} failed)"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
