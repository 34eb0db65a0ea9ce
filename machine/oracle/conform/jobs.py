"""``conform --jobs N``: N adapter processes share one run's vectors; one report comes out.

Judging costs the runner more CPU than answering costs a fast adapter, so a job is a whole
runner -- a process forked from this one, with its own adapter, judge and event loop
(:func:`toolcancel.oracle.conform._run_vectors`) -- and not only an adapter.  Every job reads
the same hello and so plans the same items in the same order (a job whose adapter's hello
differs is an error); the items are handed out a few at a time from one shared counter, so a
job that finishes early takes more, and each job returns its verdicts with their item indices.
The merged report puts them back in item order: the verdicts, families and coverage are those of
a serial run (the run's seconds are the wall time; restarts and strays are summed).

Every process is reaped on every exit.  A job is the subreaper of its adapters and stops them in
its own ``finally``.  Jobs ignore SIGINT (a terminal's Ctrl-C reaches the whole process group):
the runner alone decides, and on any exit that is not every job's answer -- an error, a job's
failure, an interrupt -- it sends each live job SIGTERM, which cancels that job's run so its
adapter is stopped as on a failure, and waits for it; a job that does not end within the reaping
bound is killed with everything below it (:func:`toolcancel.oracle.conform.reaper.kill_all`).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any, Final

from ..vectors import Vector
from ..vectors.turns import TurnVector
from . import reaper
from .adapter import REAP_TIMEOUT
from .protocol import ConformError
from .report import Report, scenario_of

CHUNK: Final = 16
"""Items a job claims at once: small, so jobs end together; a claim is one locked increment."""

_NEXT, _JUDGED, _TOTAL = 0, 1, 2  # the shared counters' slots
POLL: Final = 0.25
"""Seconds between progress reports while the jobs run."""


def available() -> int:
    """The CPUs this process may run on: ``--jobs``' default."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def useful(jobs: int, items: int) -> int:
    """How many jobs ``items`` vectors keep busy: at most one per chunk, at least one, and one
    where processes cannot be forked."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(jobs, -(-items // CHUNK)))


def run_jobs(
    jobs: int,
    run: Callable[..., Any],
    command: Sequence[str],
    vectors: Sequence[Vector],
    revision: str,
    *,
    progress: Callable[[int, int], None] | None,
    turns: Sequence[TurnVector],
    stageless: Sequence[Vector],
    **options: Any,
) -> Report:
    """Run ``run`` (:func:`toolcancel.oracle.conform._run_vectors`) in ``jobs`` forked
    processes sharing the items, and merge their reports into the one a serial run gives."""
    ctx = multiprocessing.get_context("fork")
    shared = ctx.Array("q", 3)
    procs: list[multiprocessing.process.BaseProcess] = []
    conns: list[Connection] = []
    answers: dict[int, tuple[str, Any]] = {}
    start = time.perf_counter()
    with reaper.subreaper():
        try:
            run_mark = reaper.new_mark()  # inherited by the jobs and all they start
            with _no_interrupt(), _environment(reaper.RUN_VARIABLE, run_mark):
                for k in range(jobs):  # (a Ctrl-C now would reach a job before it ignores them)
                    receive, send = ctx.Pipe(duplex=False)
                    proc = ctx.Process(
                        target=_job,
                        args=(send, shared, run, command, vectors, revision, options),
                        kwargs={"turns": turns, "stageless": stageless},
                        name=f"toolcancel-conform-{k}",
                    )
                    proc.start()
                    send.close()
                    procs.append(proc)
                    conns.append(receive)
            waiting = dict(enumerate(conns))
            while waiting:
                ready = wait(list(waiting.values()), timeout=POLL)
                for k, conn in list(waiting.items()):
                    if conn not in ready:
                        continue
                    del waiting[k]
                    try:
                        answers[k] = conn.recv()
                    except (EOFError, OSError):
                        answers[k] = ("crash", "it exited without an answer")
                    if answers[k][0] != "ok":
                        waiting.clear()  # the others are stopped below
                        break
                if progress is not None and shared[_TOTAL]:
                    progress(shared[_JUDGED], shared[_TOTAL])
        finally:
            _stop(procs)
            # what a job stopped while starting its adapter left behind (the adapter's own mark
            # never reached the job): every process of the run is found by the run's mark
            leftover = reaper.kill_marked(reaper.RUN_VARIABLE, run_mark)
            if leftover.pidfds:
                asyncio.run(reaper.await_exits(leftover, REAP_TIMEOUT))
            for conn in conns:
                conn.close()
    for k in range(jobs):
        kind, value = answers.get(k, ("crash", "it was stopped"))
        if kind == "error":
            raise ConformError(value)
        if kind != "ok":
            raise ConformError(f"conform job {k} failed: {value}")
    items = {item.id: item for family in (vectors, stageless, turns) for item in family}
    return _merged([answers[k][1] for k in range(jobs)], items, time.perf_counter() - start)


def _merged(
    parts: list[tuple[Report, list[int], dict[str, Any]]],
    items: Mapping[str, Vector | TurnVector],
    seconds: float,
) -> Report:
    """One report from every job's: the first job's plan, every verdict in item order, and the
    scenarios of the items judged (read here from ``items``, by id: a job does not send them)."""
    report, _, hello = parts[0]
    for _, _, other in parts[1:]:
        if other != hello:
            raise ConformError(
                "the adapter's hello differs from one process to the next, so --jobs cannot "
                "share its vectors; run with --jobs 1"
            )
    verdicts = sorted(
        (
            (i, judgement)
            for part, indices, _ in parts
            for i, judgement in zip(indices, part.judgements, strict=True)
        ),
        key=lambda item: item[0],
    )
    report.judgements = [j for _, j in verdicts]
    report.scenarios = {j.id: scenario_of(items[j.id]) for j in report.judgements}
    report.restarts = sum(part.restarts for part, _, _ in parts)
    report.strays = sum(part.strays for part, _, _ in parts)
    report.seen = frozenset().union(*(part.seen for part, _, _ in parts))
    report.seconds = seconds
    report.jobs = len(parts)
    return report


def _job(
    conn: Connection,
    shared: Any,
    run: Callable[..., Any],
    command: Sequence[str],
    vectors: Sequence[Vector],
    revision: str,
    options: dict[str, Any],
    **families: Any,
) -> None:
    """One job: its share of the run, then ``("ok", (report, indices, hello))`` on ``conn``,
    or ``("error", message)`` (a :class:`ConformError`), or ``("crash", what)``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    answer: tuple[str, Any]
    try:
        share = _share(shared, run, command, vectors, revision, options, families)
        with reaper.subreaper():  # what its adapters orphan is this job's to reap
            answer = ("ok", asyncio.run(share))
    except ConformError as exc:
        answer = ("error", str(exc))
    except BaseException as exc:  # said to the runner, which says it in one line
        answer = ("crash", f"{type(exc).__name__}: {exc}")
    with contextlib.suppress(OSError):
        conn.send(answer)
    conn.close()


async def _share(
    shared: Any,
    run: Callable[..., Any],
    command: Sequence[str],
    vectors: Sequence[Vector],
    revision: str,
    options: dict[str, Any],
    families: dict[str, Any],
) -> tuple[Report, list[int], dict[str, Any]]:
    """The job's run, cancelled (its adapter stopped as on any failure) by the runner's
    SIGTERM; the first SIGTERM only, so a second cannot cut the stopping short."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def cancel() -> None:
        loop.remove_signal_handler(signal.SIGTERM)
        task.cancel()

    loop.add_signal_handler(signal.SIGTERM, cancel)
    lock = shared.get_lock()

    def claim(total: int) -> Sequence[int]:
        with lock:
            shared[_TOTAL] = total
            first = shared[_NEXT]
            shared[_NEXT] = min(total, first + CHUNK)
        return range(first, min(total, first + CHUNK))

    def judged(done: int, total: int) -> None:
        with lock:
            shared[_JUDGED] += 1

    indices: list[int] = []
    hello: dict[str, Any] = {}
    report: Report = await run(
        command,
        vectors,
        revision,
        claim=claim,
        indices=indices,
        hello=hello,
        progress=judged,
        **options,
        **families,
    )
    report.scenarios = {}  # the runner has the items: not sending them halves what is pickled
    return report, indices, hello


@contextlib.contextmanager
def _environment(variable: str, value: str) -> Iterator[None]:
    """``variable=value`` in this process's environment while the jobs are forked (they keep
    it), as it was afterwards."""
    was = os.environ.get(variable)
    os.environ[variable] = value
    try:
        yield
    finally:
        if was is None:
            del os.environ[variable]
        else:
            os.environ[variable] = was


@contextlib.contextmanager
def _no_interrupt() -> Iterator[None]:
    """SIGINT held off while jobs are forked (in the main thread; elsewhere it cannot be)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    was = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, was)


def _stop(procs: list[multiprocessing.process.BaseProcess]) -> None:
    """SIGTERM every live job, wait for it to stop its adapter and exit, and kill what does not
    within the bound together with everything below it; every job is reaped."""
    for proc in procs:
        if proc.is_alive():
            with contextlib.suppress(OSError):
                os.kill(proc.pid or 0, signal.SIGTERM)
    deadline = time.monotonic() + 4 * REAP_TIMEOUT
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive() and proc.pid is not None:
            sweep = reaper.kill_all(proc.pid, reaper.new_mark())
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGKILL)
            asyncio.run(reaper.await_exits(sweep, REAP_TIMEOUT))
        proc.join()
