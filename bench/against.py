"""``verify``, ``check`` and ``conform --self``: this checkout against a git revision, one run.

"No slower than before" is a ratio, and on this shared machine a ratio means something only when
both sides are measured in the same hour.  So ``bench/run.py --against REV`` runs the three
commands as a user does (``python -m toolcancel ...``, start-up included) on both sides,
alternating ``base, checkout, checkout, base, ...`` for ``--rounds`` rounds, and prints per command
the median CPU seconds of each side and their ratio (of medians, and of minima: noise only ever
adds time).  CPU is the command's own and its children's (the adapter ``conform --self`` starts,
the worker ``verify`` starts), which other processes' load changes little; wall seconds are kept in
``--json``.

How the base runs: the package of ``REV`` (``machine/`` and ``spec/``) is exported with ``git
archive`` into a temporary directory, laid out as installed, and put first on ``PYTHONPATH``;
the processes run from that directory, so nothing of the checkout is imported.  Both sides share
this venv's dependencies and interpreter, which is what makes the ratio the code's alone (a
revision that needs other dependencies is out of reach of this comparison: give it its own venv).
Each side's summary (verify's totals, conform's counts, check's verdict line) is compared: the
same work, or the difference is printed.

The bounds are small by default (``verify --max-wrappers 0`` plus the deeper family, one worker;
``conform --self`` on the revision's shipped vectors; ``check`` on a trace of ``--events`` lines
recorded once from this checkout's registry, see ``bench_check.py``).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def export(rev: str, into: Path) -> Path:
    """The package of revision ``rev``, laid out as installed (``toolcancel``, its ``spec``):
    the directory to put on ``PYTHONPATH``."""
    archive = into / "src.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", rev, "machine", "spec"], cwd=ROOT, stdout=out,
                       check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "src", filter="data")
    pkg = into / "pkg"
    shutil.copytree(into / "src" / "machine", pkg / "toolcancel")
    shutil.copytree(into / "src" / "spec", pkg / "toolcancel" / "spec")
    return pkg


@dataclass(frozen=True)
class Command:
    """One command to compare: its arguments after ``python -m toolcancel``, and what of its
    output must be the same on both sides (the work it did, not how long it took)."""

    name: str
    args: tuple[str, ...]
    summary: Callable[[str], Any]


def _verify_summary(out: str) -> Any:
    data = json.loads(out)
    return {k: data[k] for k in ("configurations", "schedules", "turn_schedules", "violations")}


def _conform_summary(out: str) -> Any:
    data = json.loads(out)
    return {k: data[k] for k in ("vectors", "passed", "failed")}


def _last_line(out: str) -> Any:
    return out.strip().splitlines()[-1] if out.strip() else ""


def commands(revision: str, max_wrappers: int, trace: Path) -> list[Command]:
    return [
        Command(f"verify --revision {revision} --max-wrappers {max_wrappers} --workers 1",
                ("verify", "--revision", revision, "--max-wrappers", str(max_wrappers),
                 "--workers", "1", "--json"), _verify_summary),
        Command(f"check --summary ({revision} trace)",
                ("check", "--summary", "-q", str(trace)), _last_line),
        Command(f"conform --self --revision {revision}",
                ("conform", "--self", "-q", "--json", "--revision", revision), _conform_summary),
    ]  # fmt: skip


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_once(command: Command, pythonpath: Path | None, cwd: Path) -> dict[str, Any]:
    """One run of ``command``: CPU and wall seconds, exit code and summary."""
    env = {**os.environ, "TOOLCANCEL_PROGRESS": "0"}
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    cpu, wall = _children_cpu(), time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "toolcancel", *command.args], env=env, cwd=cwd,
                          capture_output=True, text=True, check=False)  # fmt: skip
    wall, cpu = time.perf_counter() - wall, _children_cpu() - cpu
    if done.returncode not in (0, 1):
        sys.exit(f"bench/run.py --against: `toolcancel {' '.join(command.args)}` "
                 f"{'(base)' if pythonpath else '(checkout)'} exited {done.returncode}:\n"
                 f"{done.stderr[-2000:]}")
    return {"cpu": cpu, "wall": wall, "exit": done.returncode,
            "summary": command.summary(done.stdout)}


def imported_from(pythonpath: Path | None, cwd: Path) -> str:
    """Where a child process on this side imports ``toolcancel`` from (printed, so a mix-up
    between the two sides shows)."""
    env = {**os.environ}
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    done = subprocess.run(
        [sys.executable, "-c", "import toolcancel, pathlib; "
         "print(pathlib.Path(toolcancel.__file__).resolve().parent)"],
        env=env, cwd=cwd, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def record_trace(revision: str, events: int, path: Path) -> tuple[int, int]:
    """A trace of at least ``events`` lines from this checkout's registry (``bench_check``)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_check

    calls = bench_check.record(revision, max(100, min(3000, events // 60)))
    return bench_check.write(calls, events, path)


def against(rev: str, *, rounds: int = 3, revision: str = "seed", max_wrappers: int = 0,
            events: int = 300_000) -> dict[str, Any]:
    """Every command on the base (``rev``) and on this checkout, ``rounds`` alternating rounds."""
    head = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="toolcancel-against-") as tmp:
        work = Path(tmp)
        base = export(rev, work)
        trace = work / "trace.jsonl"
        written, calls = record_trace(revision, events, trace)
        sides = {"base": base, "checkout": None}
        where = {side: imported_from(path, work) for side, path in sides.items()}
        if where["base"] == where["checkout"]:
            sys.exit(f"bench/run.py --against: both sides import toolcancel from {where['base']}")
        for folder in where.values():  # both sides start from bytecode, whatever the first run
            subprocess.run([sys.executable, "-m", "compileall", "-q", folder], check=True)
        rows = []
        for command in commands(revision, max_wrappers, trace):
            runs: dict[str, list[dict[str, Any]]] = {"base": [], "checkout": []}
            for r in range(rounds):
                order = ("base", "checkout") if r % 2 == 0 else ("checkout", "base")
                for side in order:
                    runs[side].append(run_once(command, sides[side], work))
            rows.append(_row(command, runs))
    return {"against": rev, "commit": head, "rounds": rounds, "revision": revision,
            "max_wrappers": max_wrappers, "trace": {"events": written, "calls": calls},
            "imported_from": where, "load_average": os.getloadavg()[0], "commands": rows}


def _row(command: Command, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    cpu = {side: [r["cpu"] for r in found] for side, found in runs.items()}
    wall = {side: [r["wall"] for r in found] for side, found in runs.items()}
    summaries = {side: [r["summary"] for r in found] for side, found in runs.items()}
    return {
        "command": command.name,
        "cpu": cpu,
        "wall": wall,
        "median_cpu": {side: statistics.median(v) for side, v in cpu.items()},
        "ratio_of_medians": statistics.median(cpu["checkout"]) / statistics.median(cpu["base"]),
        "ratio_of_minima": min(cpu["checkout"]) / min(cpu["base"]),
        "same_work": summaries["base"][0] == summaries["checkout"][0],
        "summary": {side: found[0] for side, found in summaries.items()},
        "steady": all(s == found[0] for found in summaries.values() for s in found),
    }


def print_against(out: dict[str, Any]) -> None:
    print(f"this checkout against {out['against']} ({out['commit']}): {out['rounds']} alternating "
          f"rounds, {out['revision']} contract, load average {out['load_average']:.1f} at the end")
    print(f"  base imports toolcancel from {out['imported_from']['base']} (git archive)")
    print(f"  checkout imports it from     {out['imported_from']['checkout']}")
    print(f"  check's trace: {out['trace']['events']:,} lines, {out['trace']['calls']:,} calls, "
          "recorded from this checkout")
    print(f"\n  {'command':<52}{'base CPU s':>11}{'this CPU s':>11}{'ratio':>8}{'of minima':>10}"
          f"  same work")
    for r in out["commands"]:
        m = r["median_cpu"]
        same = "yes" if r["same_work"] and r["steady"] else "NO"
        print(f"  {r['command']:<52}{m['base']:>11.2f}{m['checkout']:>11.2f}"
              f"{r['ratio_of_medians']:>8.3f}{r['ratio_of_minima']:>10.3f}  {same}")
    for r in out["commands"]:
        if not (r["same_work"] and r["steady"]):
            print(f"\n  {r['command']}: the two sides did different work:\n"
                  f"    base     {r['summary']['base']}\n    checkout {r['summary']['checkout']}")
    print("\n  CPU: the command's process and its children, median of the rounds; ratio: this "
          "checkout / base (below 1: faster)")
