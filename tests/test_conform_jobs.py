"""``conform --jobs N``: several adapter processes, one report, nothing left running.

Why these tests exist:

* Jobs share the vectors in chunks claimed as they go, so which job judged which vector changes
  from run to run; the report must not.  The ``--report`` file of ``--jobs 2`` is byte for byte
  that of ``--jobs 1``, on a run with failures (families) and turn vectors, and the summary
  differs only in how many processes ran and how long it took.
* Every process is reaped on every exit: an interrupt while one job's adapter hangs must stop
  both jobs, both adapters and what the adapters forked, and say "interrupted" in one line.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import MISBEHAVING_ADAPTER, run_cli, shipped_vectors, write_sample
from toolcancel.oracle.conform.jobs import CHUNK, useful
from toolcancel.oracle.vectors import shipped_dir
from toolcancel.oracle.vectors import turns as turnvectors

VARIES = ("jobs", "seconds", "vectors_per_second", "report")  # what may differ between the runs


def test_jobs_are_capped_by_the_chunks_the_vectors_make() -> None:
    assert useful(8, 1) == 1
    assert useful(8, CHUNK + 1) == 2
    assert useful(2, 10 * CHUNK) == 2


def test_two_jobs_write_the_report_one_job_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = [v.id for v in shipped_vectors("seed")[::90]]  # every shape family, ~105 vectors
    turns = turnvectors.load_turn_vectors(turnvectors.turn_file(shipped_dir(), "seed"))
    only = [*calls, *(t.id for t in turns[::100])]
    adapter = [sys.executable, "-m", "toolcancel.selfcheck.adapter", "--mutant", "races_body"]
    out = {}
    for jobs in (1, 2):
        report = tmp_path / f"report-{jobs}.jsonl"
        args = ["--only", *only, "--json", "--report", str(report), "--jobs", str(jobs)]
        code, data, err = run_cli([*args, "--adapter", *adapter], capsys)
        assert (code, err, data["jobs"]) == (1, "", jobs)  # the mutant fails some vectors
        out[jobs] = data
    assert out[1]["failed"] and out[1]["families"] and out[1]["turns"]
    assert (tmp_path / "report-1.jsonl").read_bytes() == (tmp_path / "report-2.jsonl").read_bytes()
    for key in VARIES:
        del out[1][key], out[2][key]
    assert out[1] == out[2]


def test_the_table_says_how_many_processes_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_sample(tmp_path, shipped_vectors("seed")[: 2 * CHUNK])
    code, out, _ = run_cli(["--vectors", str(path), "--jobs", "2", "-q", "--self"], capsys)
    assert code == 0
    assert "2 adapter processes at once" in out


def test_jobs_below_one_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["--jobs", "0", "--self"], capsys)
    assert (code, err) == (
        2,
        "toolcancel conform: --jobs must be at least 1 (see toolcancel conform --help)\n",
    )


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc; forks the jobs")
def test_an_interrupt_stops_and_reaps_every_job_and_adapter(tmp_path: Path) -> None:
    sample = shipped_vectors("seed")[: 4 * CHUNK]
    path = write_sample(tmp_path, sample)
    pids = tmp_path / "pids"
    os.mkfifo(pids)
    gate = os.open(pids, os.O_RDWR)  # read and write: the adapters' closes never end the read
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolcancel.cli.main", "conform", "--vectors", str(path), "-q",
         "--jobs", "2", "--timeout", "3600", "--adapter", sys.executable, MISBEHAVING_ADAPTER,
         "fork_hang", sample[-1].id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "FORKED_PIDS": str(pids)},
    )  # fmt: skip
    try:
        forked = b""
        while forked.count(b"\n") < 2:  # each job's adapter has forked its sleeper
            ready, _, _ = select.select([gate], [], [], 300)  # a bound, not a budget
            assert ready, "the adapters did not start"
            forked += os.read(gate, 4096)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=300)  # a bound: a runner that waits forever fails
    finally:
        proc.kill()
        proc.wait()
        os.close(gate)
    assert (proc.returncode, err) == (130, "toolcancel conform: interrupted\n")
    sleepers = [int(x) for x in forked.split()]
    assert [pid for pid in sleepers if _running(pid)] == []


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs.  A sleeper that died after conform's last sweep is left, a
    zombie, to the nearest subreaper above conform -- pytest (tests/conftest.py), once init --
    which collects it here."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    if state != "Z":
        return True
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    return False


def test_json_output_counts_the_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_sample(tmp_path, shipped_vectors("revised")[: CHUNK + 1])
    code, data, _ = run_cli(
        ["--revision", "revised", "--vectors", str(path), "--json", "--jobs", "4", "--self"], capsys
    )
    assert (code, data["vectors"], data["passed"], data["jobs"]) == (0, CHUNK + 1, CHUNK + 1, 2)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_callers_frozen_objects_stay_frozen(jobs: int) -> None:
    """conform keeps the loaded vectors out of the collector for its run (gc.freeze) and lets
    them go after it; an embedding program that froze its own objects first keeps them frozen
    (gc.unfreeze is all or nothing), and one that froze nothing gets its collector back."""
    from toolcancel.oracle.conform import conform, self_command

    only = [v.id for v in shipped_vectors("seed")[:40]]
    assert gc.get_freeze_count() == 0
    assert conform(self_command(), "seed", only=only, jobs=jobs).failed == 0
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert conform(self_command(), "seed", only=only, jobs=jobs).failed == 0
        # still frozen (objects of the caller's that died meanwhile leave the count)
        assert gc.get_freeze_count() > frozen // 2
    finally:
        gc.unfreeze()
