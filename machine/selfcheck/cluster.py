"""Running the verifier's and the vector generator's jobs on a Dask distributed cluster.

``toolcancel verify --cluster ADDRESS`` and ``toolcancel vectors --cluster ADDRESS`` hand the same
jobs local runs give a process pool -- each a small, picklable description of its share of the
bounded space (:class:`toolcancel.selfcheck.verifier.Job`, a batch of scenarios) -- to a running
Dask scheduler, and read the answers back *in job order*, so every total, path, vector and the order
of the first violations are those of a one-process local run.

A worker that dies while it holds a job (killed, out of memory, its machine gone) is no
concern here: the scheduler gives the job to another worker, and since a job is a pure function
of its description, the rerun adds exactly what the lost run would have.  What would break the
promise of identical results is a worker running *other* code, so every job carries this
process's :func:`fingerprint` and a worker whose own differs refuses it, naming both.

``distributed`` is an optional dependency (the ``cluster`` extra); it is imported only here and
only when a cluster address is given.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from ..contract.errors import ToolcancelError

ENGINE = "dask.distributed"
"""What ``bench/run.py`` and reports name as the distributed engine."""

CONNECT_TIMEOUT = 10.0
"""Seconds to wait for the scheduler at the given address before giving up."""

T = TypeVar("T")
R = TypeVar("R")


class ClusterError(ToolcancelError):
    """The cluster cannot be used: ``distributed`` missing, no scheduler at the address, or a
    worker running different code (one line, naming what and where)."""


@cache
def fingerprint() -> str:
    """A digest of this installation's code and contract: two processes with the same digest
    explore the same space the same way."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent.parent  # the package: this room's parent
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    spec = resources.files("toolcancel.spec")
    for name in ("contract.toml", "scenarios.toml"):
        digest.update(name.encode() + b"\0" + spec.joinpath(name).read_bytes())
    return digest.hexdigest()[:16]


def _checked(item: T, fn: Callable[[T], R], expected: str) -> R:
    """Run on a worker: refuse a job from a client running other code, else run it."""
    mine = fingerprint()
    if mine != expected:
        raise ClusterError(
            f"a cluster worker runs other toolcancel code (fingerprint {mine}, this process "
            f"{expected}): install the same version on the workers"
        )
    return fn(item)


def quiet() -> None:
    """Keep Dask's own log lines (connection retries, a closed stream's traceback) off stderr:
    for a command, whose failure is one line, :class:`ClusterError`'s.  Dask sets its loggers'
    levels when it is imported, so it is imported first (if it is installed)."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        return
    for name in list(logging.root.manager.loggerDict):
        if name.partition(".")[0] in ("distributed", "tornado"):
            logging.getLogger(name).setLevel(logging.CRITICAL)


def connect(address: str) -> Any:
    """A ``distributed.Client`` connected to the scheduler at ``address``."""
    try:
        from distributed import Client
        from distributed.comm.addressing import get_address_host_port
    except ImportError:
        raise ClusterError(
            "--cluster needs Dask distributed: pip install './toolcancel[cluster]', where "
            "./toolcancel is your clone of toolcancel"
        ) from None
    try:  # a malformed address is refused before a client exists (one that failed lingers)
        get_address_host_port(address)
    except ValueError as exc:
        raise ClusterError(f"--cluster {address!r}: {exc}") from None
    try:
        return Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ClusterError(f"cannot reach a Dask scheduler at {address}: {reason}") from None


def map_in_order(address: str, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
    """``fn`` of every item, computed on the cluster at ``address``, yielded in item order.

    ``fn`` must be importable on the workers (a module-level function of toolcancel): it is
    pickled by reference.  Closing the iterator early cancels the jobs not yet read.
    """
    client = connect(address)  # first: it says so in one line when distributed is missing
    from distributed import KilledWorker
    from distributed.client import FutureCancelledError

    try:
        # pure=False: every run is submitted afresh (a previous client's results are not reused).
        futures = client.map(_checked, items, fn=fn, expected=fingerprint(), pure=False)
        try:
            for future in futures:
                try:
                    yield future.result()
                except KilledWorker as exc:
                    raise ClusterError(
                        f"the cluster at {address} lost every worker it gave a job to: {exc}"
                    ) from None
                except FutureCancelledError as exc:  # the scheduler was told to drop them
                    raise ClusterError(
                        f"the cluster at {address} dropped the jobs ({exc.reason})"
                    ) from None
                except OSError as exc:  # the connection to the scheduler closed
                    reason = " ".join(str(exc).split()) or type(exc).__name__
                    raise ClusterError(f"lost the cluster at {address}: {reason}") from None
        finally:
            client.cancel(futures)
    finally:
        client.close()
