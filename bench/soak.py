"""The full soak: 10,000 concurrent calls in one loop (virtual time), nothing lost or leaked.

Run from the repository root: ``.venv/bin/python bench/soak.py [N] [SEED]``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model_tests.soak import soak


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    start = time.perf_counter()
    report = soak(n, seed)
    took = time.perf_counter() - start
    print(f"soak: {report.calls} calls, {report.finished} returned, "
          f"{report.task_cancellations} task cancellations, outcomes {report.outcomes}")
    print(f"      {report.leaked_bytes} bytes not given back, {len(report.problems)} problems, "
          f"{report.seconds_virtual:.1f}s virtual in {took:.1f}s real (warm-up + measured run)")
    for p in report.problems[:10]:
        print("      PROBLEM", p)
    return 1 if report.problems or report.leaked_bytes > 256 * 1024 else 0


if __name__ == "__main__":
    sys.exit(main())
