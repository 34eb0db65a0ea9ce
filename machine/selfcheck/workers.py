"""Local worker processes for the self-checks (verify, the spec mutants, the vectors' generator):
a ``fork`` pool whose workers leave SIGINT to the parent.

Ctrl-C reaches the terminal's whole foreground process group.  A worker that took it would raise
``KeyboardInterrupt`` in the middle of a schedule -- the binding's second-interrupt path, asyncio's
teardown, multiprocessing's "Process ForkPoolWorker" traceback: a hundred lines per run.  So a
worker ignores it; the parent alone is interrupted, its ``with`` block terminates the pool (SIGTERM,
which ends a worker without a word), and the command line prints its one line, status 130.
"""

from __future__ import annotations

import multiprocessing
import signal
from multiprocessing.pool import Pool


def _leave_sigint_to_the_parent() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # one that arrived since the fork is dropped
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def pool(workers: int) -> Pool:
    """A pool of ``workers`` forked processes that ignore SIGINT (use it as a context manager:
    leaving the block, however, terminates them).

    SIGINT is blocked while the pool starts, so a worker is never interrupted between its fork
    and its initializer, nor one the pool's own thread forks later; the parent then gets a
    Ctrl-C that came meanwhile as soon as it unblocks it."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return multiprocessing.get_context("fork").Pool(workers, _leave_sigint_to_the_parent)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
