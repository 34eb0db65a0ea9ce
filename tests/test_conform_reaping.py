"""``toolcancel conform`` reaps everything its adapter started, and its run reports what ran.

Why these tests exist:

* An adapter is someone else's program.  One whose children leave its process group and session
  (a ``setsid()`` child, a double-forked daemon) used to leave them running after ``conform``
  exited, and asyncio printed "Event loop is closed" tracebacks for the transports nobody had
  closed.  Now every such process is gone *when conform returns* -- conform waited on each pid,
  so the test reads ``/proc`` once, with no sleep, on a machine however loaded -- and conform
  says so in one line.
* Where there is no ``/proc`` nor pidfds, the adapter's process group is still killed.
* ``--vectors FILE`` runs call vectors only: the report must not claim the scheduler's (turn)
  vectors ran because the adapter's hello offers them.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import conform_process, run_cli, shipped_vectors, write_sample
from toolcancel.oracle.conform import reaper


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc; pidfds and subreapers")
def test_processes_that_left_the_adapters_session_are_killed_and_reaped(tmp_path: Path) -> None:
    sample = shipped_vectors("seed")[:6]
    bad = sample[2].id  # the adapter crashes there: two starts, two sets of escaped processes
    pids = tmp_path / "pids"
    path = write_sample(tmp_path, sample)
    proc = conform_process(path, "escape", bad, pids)
    # One line about it, and no traceback ("Exception ignored ... Event loop is closed").
    assert (proc.returncode, proc.stderr) == (
        1,
        "toolcancel conform: note: the adapter started 4 processes that left its session; "
        "killed and reaped\n",
    )
    data = json.loads(proc.stdout)
    assert (data["passed"], data["restarts"]) == (5, 1)
    escaped = [int(x) for x in pids.read_text(encoding="utf-8").split()]
    assert len(escaped) == 4  # a setsid() sleeper and a daemon's grandchild, per start
    assert [pid for pid in escaped if os.path.exists(f"/proc/{pid}")] == []  # nor zombies


def test_a_vectors_file_without_turn_vectors_reports_no_turns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_sample(tmp_path, shipped_vectors("seed")[:3])
    code, data, _ = run_cli(["--vectors", str(path), "--json", "--self"], capsys)
    assert (code, data["vectors"], data["turns"]) == (0, 3, False)


def test_without_proc_and_pidfds_the_adapters_group_is_still_killed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Elsewhere than Linux: no /proc to scan, no pidfds to wait on.  The runner falls back to
    # killing the adapter's process group, and awaiting nothing returns at once.
    monkeypatch.setattr(reaper, "_processes", list)
    monkeypatch.delattr(os, "pidfd_open", raising=False)
    leader = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)"], start_new_session=True
    )
    try:
        sweep = reaper.kill_all(leader.pid, reaper.new_mark())
        assert (sweep.leader_fd, sweep.pidfds, sweep.strays) == (None, {}, set())
        asyncio.run(reaper.await_exits(sweep, timeout=1.0))
        assert leader.wait(timeout=60) == -signal.SIGKILL  # a bound, not a budget
    finally:
        leader.kill()
        leader.wait()
