"""Reaping what an adapter started: no process of it outlives ``toolcancel conform``.

An adapter is a program of someone else's, and it may start processes: a runtime's workers, a
child that calls ``setsid()``, a daemon that double-forks.  The runner owns every one of them,
so when it stops an adapter it kills and reaps all of them, not only the adapter.

Which processes belong to an adapter (Linux, from ``/proc``):

* its session: the adapter is started as the leader of a session of its own, so its pid is its
  session id and its process group id, whatever its children do with process groups;
* its descendants, by parent pid, whatever session they moved to;
* every process carrying the runner's *mark*: an environment variable, unique per start, that
  the adapter's environment holds and every process it starts inherits.  It finds a daemon's
  grandchild whose parent already exited, wherever it was reparented.

While the runner runs it is the *subreaper* of its descendants (``PR_SET_CHILD_SUBREAPER``): an
orphan is reparented to it, not to init, so it can collect the orphan's exit status -- an init
in a container may never do that, leaving zombies.

Killing is deterministic: each process is opened as a pidfd (Linux 5.3) *before* it is signalled
(so a reused pid is never hit), and its exit is awaited on that pidfd, never with sleeps.  Where
pidfds or ``/proc`` are missing, only the adapter's process group is killed (``killpg``), and
children that left it are the adapter's own business: the documented fallback.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final

MARK_VARIABLE: Final = "TOOLCANCEL_CONFORM_MARK"
"""The environment variable that marks an adapter's processes (its value is unique per start)."""

SWEEPS: Final = 8
"""Most rounds of find-and-kill: a process forked between a scan and its parent's kill is found
by the next scan; SIGKILL stops a forker at once, so two rounds are the norm."""

_PR_SET_CHILD_SUBREAPER: Final = 36
_PR_GET_CHILD_SUBREAPER: Final = 37


def new_mark() -> str:
    """A fresh mark for one adapter start."""
    return f"{os.getpid()}-{secrets.token_hex(8)}"


@dataclass(frozen=True)
class _Proc:
    pid: int
    ppid: int
    session: int


def _processes() -> list[_Proc]:
    """Every process ``/proc`` shows (none where there is no ``/proc``)."""
    found = []
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:  # gone meanwhile
                continue
            fields = stat[stat.rindex(b")") + 2 :].split()  # state ppid pgrp session ...
            found.append(_Proc(int(name), int(fields[1]), int(fields[3])))
    return found


def _marked(pid: int, mark: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return mark in f.read().split(b"\0")
    except OSError:  # gone, or not ours to read
        return False


RUN_VARIABLE: Final = "TOOLCANCEL_CONFORM_RUN"
"""The environment variable that marks every process of one ``conform --jobs`` run: its jobs,
their adapters and whatever those start.  A job stopped while it was still starting its adapter
never learned that adapter's own mark; the run's finds what it started all the same."""


def kill_marked(variable: str, mark: str) -> Sweep:
    """SIGKILL every process (but this one) whose environment holds ``variable=mark``, until a
    scan finds no new one; the sweep to await with :func:`await_exits`."""
    tag = f"{variable}={mark}".encode()
    return _kill_until_none_left(
        Sweep(),
        lambda: {p.pid for p in _processes() if p.pid != os.getpid() and _marked(p.pid, tag)},
        stray=lambda pid: True,
    )


def members(leader: int, mark: str, *, reaped: bool = False) -> set[int]:
    """The pids of what adapter ``leader`` started (see the module's docstring), itself
    excluded; zombies included.  Once the adapter is ``reaped`` its pid may belong to another
    process, so its descendants are not walked (its session id stays reserved while in use)."""
    procs = _processes()
    children: dict[int, list[int]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p.pid)
    found = {p.pid for p in procs if p.session == leader}
    stack = [] if reaped else [leader]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    tag = f"{MARK_VARIABLE}={mark}".encode()
    found |= {p.pid for p in procs if p.pid not in found and _marked(p.pid, tag)}
    found.discard(leader)
    found.discard(os.getpid())
    return found


@dataclass
class Sweep:
    """The processes one stop killed: ``pidfds`` to await their exit (the adapter's own under
    ``leader_fd``: its owner reaps it), ``strays`` those that had left the adapter's session."""

    leader_fd: int | None = None
    pidfds: dict[int, int] = field(default_factory=dict)
    strays: set[int] = field(default_factory=set)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):  # gone (or not a process), or no pidfds here
        return None


def kill_all(leader: int, mark: str, *, reaped: bool = False) -> Sweep:
    """SIGKILL adapter ``leader``'s process group and every process :func:`members` finds,
    until a scan finds no new one.  ``reaped``: the adapter's exit status was already
    collected, so its pid means nothing any more but as a session id in use."""
    sweep = Sweep(leader_fd=None if reaped else _pidfd(leader))
    session = {p.pid for p in _processes() if p.session == leader}
    if session or not reaped:  # a group id in use is never handed to another process
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader, signal.SIGKILL)
    return _kill_until_none_left(
        sweep, lambda: members(leader, mark, reaped=reaped), stray=lambda pid: pid not in session
    )


def _kill_until_none_left(
    sweep: Sweep, find: Callable[[], set[int]], *, stray: Callable[[int], bool]
) -> Sweep:
    """SIGKILL what ``find`` finds, again until a scan finds nothing new (a process may fork
    while we kill its parent), keeping each one's pidfd in ``sweep`` to await its exit."""
    for _ in range(SWEEPS):
        new = find() - sweep.pidfds.keys()
        if not new:
            break
        for pid in sorted(new):
            fd = _pidfd(pid)
            if fd is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                continue
            sweep.pidfds[pid] = fd
            if stray(pid):
                sweep.strays.add(pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
    return sweep


async def await_exits(sweep: Sweep, timeout: float) -> None:
    """Wait until the adapter and every process of ``sweep`` have exited (a pidfd is readable
    then; at most ``timeout`` seconds, for a process stuck in the kernel), then collect those
    that were orphaned to us, so none stays behind as a zombie.  The adapter itself is left to
    its owner, which reaps it."""
    loop = asyncio.get_running_loop()
    fds = [*sweep.pidfds.values(), *([] if sweep.leader_fd is None else [sweep.leader_fd])]
    waits: list[asyncio.Future[None]] = []
    for fd in fds:
        exited: asyncio.Future[None] = loop.create_future()
        loop.add_reader(fd, _settle, exited)
        waits.append(exited)
    try:
        if waits:
            await asyncio.wait(waits, timeout=timeout)
    finally:
        for fd in fds:
            loop.remove_reader(fd)
            os.close(fd)
    for pid in sweep.pidfds:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def _settle(exited: asyncio.Future[None]) -> None:
    if not exited.done():
        exited.set_result(None)


@contextlib.contextmanager
def subreaper() -> Iterator[None]:
    """While inside, processes orphaned below us are reparented to us rather than to init
    (Linux ``PR_SET_CHILD_SUBREAPER``; elsewhere nothing), so :func:`await_exits` can collect a
    forking adapter's children."""
    prctl = None
    if sys.platform == "linux":
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            prctl = ctypes.CDLL(None, use_errno=True).prctl
    was = None
    if prctl is not None:
        flag = ctypes.c_int(0)
        if prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0:
            was = flag.value
            prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        yield
    finally:
        if prctl is not None and was is not None:
            prctl(_PR_SET_CHILD_SUBREAPER, was, 0, 0, 0)
