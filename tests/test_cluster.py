"""verify and vectors on a Dask distributed cluster give what a local run gives.

One local cluster on loopback (two worker processes, one thread each) serves the module.  The
bounds are small: the point is that the engine changes nothing, not the space.  The lost-worker
test is gated, not timed: the job that is to be lost announces itself (a cluster-wide event) and
then waits on a gate that never opens; the test kills that worker's process as soon as the
announcement arrives, and the scheduler must give the job to another worker.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import cloudpickle
import pytest
from distributed import Client, Event, LocalCluster, Variable
from test_verify_cli import interrupted, tc
from toolcancel.oracle.vectors import render
from toolcancel.runtime.registry import ToolRegistry
from toolcancel.selfcheck import cluster as cluster_module
from toolcancel.selfcheck import space, verifier
from toolcancel.selfcheck.cluster import ClusterError, map_in_order
from toolcancel.selfcheck.vectorgen import generate
from toolcancel.selfcheck.verifier import Tally, plan, run_jobs, verify

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the gated job runs on workers


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address=None,
    ) as local:  # fmt: skip
        yield local.scheduler_address


def _same(a: Tally, b: Tally) -> None:
    assert (a.configurations, a.schedules, a.pruned, a.violation_count) == (
        b.configurations, b.schedules, b.pruned, b.violation_count,
    )  # fmt: skip
    assert a.paths == b.paths and a.transitions == b.transitions and a.rules == b.rules
    assert (a.turn_batches, a.turn_schedules, a.by_retry) == (
        b.turn_batches, b.turn_schedules, b.by_retry,
    )  # fmt: skip
    assert [(v.rule, v.explanation) for v in a.violations] == [
        (v.rule, v.explanation) for v in b.violations
    ]


def test_verify_on_the_cluster_equals_a_local_run(address: str) -> None:
    local = verify("seed", workers=1, max_wrappers=0, max_calls=1, deep=False)
    remote = verify("seed", cluster=address, max_wrappers=0, max_calls=1, deep=False)
    _same(remote.tally, local.tally)
    assert remote.tally.schedules > 1000 and remote.engine == f"dask.distributed at {address}"


def test_the_deeper_familys_jobs_come_back_from_the_cluster_tagged(address: str) -> None:
    """What the engine does to the deeper family (:func:`space.deep_stacks`): its jobs travel
    and come back tagged, so verify counts them in ``deeper`` as a local run does; verify's
    merging after ``run_jobs`` is the same code for both engines.  A few of the family's jobs
    stand for all of them (the whole family is ~52,000 schedules a run: scripts/test's verify
    steps run it locally)."""
    family = [job for job in plan("seed", 0, 1, turns=False, deep=True) if job.deep][:4]
    assert len(family) == 4
    remote, local = Tally(), Tally()
    for tally in run_jobs(family, cluster=address):
        assert tally.deep
        remote.merge(tally)
    for tally in run_jobs(family, workers=1):
        local.merge(tally)
    _same(remote, local)
    assert remote.configurations > 0


def test_vectors_on_the_cluster_equal_a_local_run(address: str) -> None:
    configs = list(space.configurations("revised", max_wrappers=0))[::7]
    local = generate("revised", configs=configs, workers=1)
    remote = generate("revised", configs=configs, cluster=address)
    assert render(remote) == render(local) and len(local) > 20


def _gated(item: tuple[verifier.Job, str]) -> Tally:
    """Run a job; the first attempt at the job named ``victim`` announces itself and hangs."""
    job, victim = item
    if victim and not Event(f"{victim}-taken").is_set():
        Variable(f"{victim}-pid").set(os.getpid())
        Event(f"{victim}-taken").set()
        Event(f"{victim}-never").wait()  # until this process is killed
    return verifier._worker((job, ToolRegistry))


def test_a_worker_killed_holding_a_job_has_it_rerun_with_the_same_totals(address: str) -> None:
    jobs = plan("seed", 0, 1)
    victim = f"victim-{uuid.uuid4().hex}"
    items = [(job, victim if i == 2 else "") for i, job in enumerate(jobs)]
    killed: list[int] = []

    def kill_when_taken() -> None:
        with Client(address, set_as_default=False) as client:
            Event(f"{victim}-taken", client=client).wait()
            try:
                pid = Variable(f"{victim}-pid", client=client).get()
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            finally:
                if not killed:  # open the gate: the run ends, and the test fails below
                    Event(f"{victim}-never", client=client).set()

    killer = threading.Thread(target=kill_when_taken)
    killer.start()
    remote = Tally()
    for tally in map_in_order(address, _gated, items):
        remote.merge(tally)
    killer.join()
    assert killed and killed[0] != os.getpid()
    local = Tally()
    for tally in run_jobs(jobs, workers=1):
        local.merge(tally)
    _same(remote, local)


def test_a_worker_running_other_code_refuses_the_job(
    address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster_module, "fingerprint", lambda: "not-this-code")
    with pytest.raises(ClusterError, match="other toolcancel code"):
        list(map_in_order(address, len, ["ab"]))


def test_the_cli_gives_the_local_json_on_the_cluster(address: str) -> None:
    runs: list[dict[str, Any]] = []
    for where in (["--workers", "1"], ["--cluster", address]):
        proc = tc(
            "verify", "--max-wrappers", "0", "--max-calls", "1", "--no-deep", "--json", "-q", *where
        )  # the bounded space: the deeper family on the cluster is the test above
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout))
    assert runs[1]["engine"] == f"dask.distributed at {address}"
    for data in runs:
        for key in ("seconds", "workers", "engine"):
            data.pop(key)
    assert runs[0] == runs[1]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["verify", "--cluster", "nonsense://x"], "unknown address scheme"),
        (["verify", "--cluster", "localhost"], "missing port number"),
        (["vectors", "--check", "--cluster", "tcp://h"], "missing port number"),
        (["verify", "--mutants", "--cluster", "tcp://127.0.0.1:8786"], "--cluster runs"),
    ],
)
def test_a_bad_cluster_address_is_one_line_and_exit_2(args: list[str], says: str) -> None:
    proc = tc(*args)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert says in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.timeout(300, method="signal")  # raises in a stuck readline: `finally` still reaps
def test_ctrl_c_during_a_verify_on_the_cluster_is_one_line_and_status_130(address: str) -> None:
    """As a local run's (tests/test_verify_cli.py): SIGINT to the run's process group mid-run is
    one line and status 130 -- the client cancels its jobs and closes, and neither Dask's client
    nor its loop thread says a word -- and the cluster is left serving: a run after it equals a
    local run."""
    assert interrupted("--cluster", address) == (130, "toolcancel verify: interrupted\n", "")
    local = verify("seed", workers=1, max_wrappers=0, max_calls=1, deep=False)
    remote = verify("seed", cluster=address, max_wrappers=0, max_calls=1, deep=False)
    _same(remote.tally, local.tally)
