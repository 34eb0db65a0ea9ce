"""Every benchmark, one command: ``.venv/bin/python bench/run.py [--json] [--verifier]``.

Prints per-call figures (min / median / max over repeated rounds, from pytest-benchmark) and
the ratios the performance issue sets targets for, all measured in the same run: the machine is
noisy, so only ratios within one run mean anything.  Memory per in-flight call is measured with
tracemalloc; ``--verifier`` adds the model checker's scaling (slow: minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"plain": 2.0, "hooked": 4.0, "traced_vs_hooked": 2.0}


def call_overhead() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--benchmark-only",
             f"--benchmark-json={out}", str(ROOT / "bench" / "test_overhead.py")],
            capture_output=True, text=True, cwd=ROOT,
        )
        if proc.returncode:
            sys.exit(f"bench/run.py: the call benchmarks failed:\n{proc.stdout[-2000:]}")
        data = json.loads(out.read_text())
    figures = {}
    for b in data["benchmarks"]:
        n = b["extra_info"]["batch"]
        s = b["stats"]
        figures[b["name"].removeprefix("test_")] = {
            "min_us": s["min"] / n * 1e6, "median_us": s["median"] / n * 1e6,
            "max_us": s["max"] / n * 1e6,
        }
    base = figures["bare_task"]["median_us"]
    ratios = {
        "plain": figures["registry_plain"]["median_us"] / base,
        "hooked": figures["registry_hooked"]["median_us"] / base,
        "traced_vs_hooked": figures["registry_hooked_traced"]["median_us"]
        / figures["registry_hooked"]["median_us"],
    }
    return {"per_call": figures, "ratios": ratios}


def in_flight_memory(n: int = 20_000) -> dict[str, Any]:
    """Bytes held per call while n calls wait in their bodies (arguments and results tiny)."""
    sys.path.insert(0, str(ROOT))
    from toolcancel import AbortController, ToolRegistry

    async def main() -> int:
        gate = asyncio.Event()
        reg = ToolRegistry()

        async def body(args: Any, call: Any) -> list[Any]:
            await gate.wait()
            return []

        reg.register("t", body)
        signal = AbortController().signal
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        tasks = [asyncio.ensure_future(reg.execute("t", {}, signal=signal)) for _ in range(n)]
        for _ in range(5):
            await asyncio.sleep(0)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
        gate.set()
        await asyncio.gather(*tasks)
        return held

    tracemalloc.start()
    try:
        held = asyncio.run(main())
    finally:
        tracemalloc.stop()
    per_call = held / n
    return {"calls": n, "bytes_per_call": per_call,
            "mib_for_100k": per_call * 100_000 / 2**20}


def verifier_scaling() -> dict[str, Any]:
    from toolcancel.verifier import verify

    rows = []
    for wrappers in (0, 1, 2):
        for workers in (1, 2):
            start = time.perf_counter()
            report = verify("seed", workers=workers, max_wrappers=wrappers)
            took = time.perf_counter() - start
            rows.append({"max_wrappers": wrappers, "workers": workers,
                         "configurations": report.tally.configurations,
                         "schedules": report.tally.schedules, "pruned": report.tally.pruned,
                         "seconds": took, "schedules_per_s": report.tally.schedules / took})
    return {"rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--verifier", action="store_true", help="also measure verify's scaling")
    args = parser.parse_args()
    out: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "python": sys.version.split()[0]}
    out["call"] = call_overhead()
    out["memory"] = in_flight_memory()
    if args.verifier:
        out["verifier"] = verifier_scaling()
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"toolcancel benchmarks, {out['date']}, Python {out['python']}")
    print(f"  {'per call':<26}{'min us':>9}{'median us':>11}{'max us':>9}")
    for name, f in out["call"]["per_call"].items():
        print(f"  {name:<26}{f['min_us']:>9.1f}{f['median_us']:>11.1f}{f['max_us']:>9.1f}")
    print("  ratios (medians, same run)      measured   target")
    for name, value in out["call"]["ratios"].items():
        mark = "met" if value <= TARGETS[name] else "NOT met"
        print(f"  {name:<32}{value:>8.2f}x {TARGETS[name]:>6.1f}x  {mark}")
    m = out["memory"]
    print(f"  in-flight call: {m['bytes_per_call']:.0f} bytes; 100,000 in flight: "
          f"{m['mib_for_100k']:.0f} MiB (targets 4096 bytes, 500 MiB)")
    for row in out.get("verifier", {}).get("rows", []):
        print(f"  verify wrappers<={row['max_wrappers']} workers={row['workers']}: "
              f"{row['schedules']:,} schedules in {row['seconds']:.1f}s "
              f"({row['schedules_per_s']:,.0f}/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
