"""Benchmark of ``toolcancel verify`` against an earlier revision: is it any slower?

Not a test (timings depend on the machine); run it by hand::

    python bench/bench_verify.py --base REV [--revision seed|revised] [--bound B] [--configs N]
        [--rounds K]

What it measures: ``--configs`` configurations spread over the model checker's space at bound
``--bound`` (around wrappers per call; default 1, verify's own default is 2:
``toolcancel.selfcheck.space.configurations``), each run and checked under every cancellation
point ``verify`` keeps (:func:`toolcancel.selfcheck.verifier.run_batch`), in a fresh process per
measurement -- alternately with the package of git revision ``--base`` (exported to a temporary
directory) and with this checkout's.  Each process reports its own CPU time for the batch (which
other load on this shared machine does not change) and the schedules it ran, which must be equal.
Printed: the median CPU seconds of each and the ratio checkout / base; only that ratio means
anything.  The verifier's core alone, without start-up or enumeration: ``bench/run.py --against
REV`` compares the three commands whole.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from against import export  # the base's package, exported with git archive

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys, time
from toolcancel.selfcheck.space import configurations
from toolcancel.selfcheck.verifier import run_batch
revision, bound, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
space = list(configurations(revision, bound))
chosen = space[:: max(1, len(space) // n)][:n]
start = time.process_time()
tally = run_batch(chosen)
print(json.dumps({"cpu": time.process_time() - start, "schedules": tally.schedules,
                  "violations": tally.violation_count}))
"""


def measure(path: Path | None, revision: str, bound: int, configs: int) -> dict[str, float]:
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = str(path)
    proc = subprocess.run([sys.executable, "-c", CHILD, revision, str(bound), str(configs)],
                          env=env, capture_output=True, text=True, check=True,
                          cwd=tempfile.gettempdir())
    result: dict[str, float] = json.loads(proc.stdout.splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="git revision to compare with")
    parser.add_argument("--revision", default="seed", choices=("seed", "revised"))
    parser.add_argument("--bound", type=int, default=1, help="around wrappers per call")
    parser.add_argument("--configs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base_pkg = export(args.base, Path(tmp))
        runs: dict[str, list[dict[str, float]]] = {"base": [], "checkout": []}
        for _ in range(args.rounds):
            runs["base"].append(measure(base_pkg, args.revision, args.bound, args.configs))
            runs["checkout"].append(measure(None, args.revision, args.bound, args.configs))
    schedules = {name: {r["schedules"] for r in found} for name, found in runs.items()}
    cpu = {name: statistics.median(r["cpu"] for r in found) for name, found in runs.items()}
    print(f"{args.configs} configurations ({args.revision}, bound {args.bound}), {args.rounds} "
          f"alternating rounds; schedules base {sorted(schedules['base'])}, checkout "
          f"{sorted(schedules['checkout'])}")
    for name, found in runs.items():
        each = ", ".join(f"{r['cpu']:.2f}" for r in found)
        print(f"  {name:9} median CPU {cpu[name]:.2f} s  ({each})")
    print(f"  ratio checkout / base: {cpu['checkout'] / cpu['base']:.3f}")
    return 0 if schedules["base"] == schedules["checkout"] else 1


if __name__ == "__main__":
    sys.exit(main())
