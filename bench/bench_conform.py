"""Benchmark: vectors per second of ``toolcancel conform --self``, from one run per revision.

The issue asks for at least 1,000 vectors/s with our own adapter.  One run over every committed
vector of a revision is the measurement: it includes the adapter's start-up and hello, sending,
the adapter's work, the trace checker and the comparisons -- what a user waits for.

    python bench/bench_conform.py [--revision seed|revised|all] [--min 1000]

Prints one line per revision; exits 1 if a run falls below ``--min`` or any vector fails.
"""

from __future__ import annotations

import argparse
import sys

from toolcancel.conform import conform, self_command
from toolcancel.vectors import REVISIONS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--revision", choices=(*REVISIONS, "all"), default="all")
    parser.add_argument("--min", type=float, default=1000.0, help="vectors/s to reach")
    args = parser.parse_args()
    ok = True
    for revision in REVISIONS if args.revision == "all" else (args.revision,):
        report = conform(self_command(), revision)
        rate = len(report.judgements) / report.seconds
        ok = ok and rate >= args.min and report.failed == 0
        print(
            f"conform --self --revision {revision}: {len(report.judgements):,} vectors in "
            f"{report.seconds:.2f} s = {rate:,.0f} vectors/s "
            f"({report.passed:,} passed, {report.failed:,} failed)"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
