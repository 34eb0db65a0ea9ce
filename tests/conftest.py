"""Test-suite plumbing: the ``rules`` marker, and running ``async def`` tests on virtual time.

Why a marker: every rule of the contract must be pinned by at least one test that fails when the
rule breaks.  A test names the rule ids it pins with ``@pytest.mark.rules("R13", "R28")``;
``test_rule_coverage.py`` reads those names statically and compares them with the rule ids of the
shipped contract, so a rule nobody tests (or an id nobody defined) fails the suite.

Why virtual time: the rule tests drive every race with gates (events the test sets in a chosen
order), never with real time, so they give the same interleaving on every run.  Running them on
:mod:`toolcancel.runtime.virtual_time` adds two guarantees:

* a test that deadlocks (a gate nobody opens, a call that never settles) does not hang the suite:
  the loop would block, so virtual time jumps to the watchdog below, which fails the test at once;
* :func:`support.until_idle` can wait "until every other task is blocked" exactly, because virtual
  time only moves when nothing else can run.

Why two backends: the registry and the turn scheduler run on asyncio and on trio (anyio runs
on either).  The rule tests (``test_rules_*.py``, and the scheduler's, ``test_scheduler.py``) run
on both: each of their ``async def`` tests is parametrized with a ``backend``, and on trio it runs
with trio's own autojumping clock (``MockClock``), which gives the same two guarantees, in a
nursery where :func:`support.spawn` starts tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import re
import select
import selectors
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from toolcancel.oracle.conform.reaper import subreaper
from toolcancel.runtime.virtual_time import VirtualClock

DEADLOCK_AFTER = 1_000_000.0
"""Virtual seconds after which an async test counts as deadlocked (about 11.6 virtual days: far
beyond any budget a test declares on purpose, and it costs no real time).

Why not more: asyncio treats a timer as due when ``when < loop.time() + clock_resolution`` (about
1e-9 s).  Past 2**22 s the spacing between adjacent floats exceeds that resolution, so a timer the
clock jumped exactly onto may never count as due, and the loop spins instead of failing."""


BACKENDS = ("asyncio", "trio")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rules(*ids): contract rule ids this test pins")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every ``async def`` rule test on each backend."""
    module = metafunc.module.__name__.rpartition(".")[2]
    rules = module.startswith("test_rules_") or module == "test_scheduler"
    if rules and inspect.iscoroutinefunction(metafunc.function):
        if "backend" not in metafunc.fixturenames:
            metafunc.fixturenames.append("backend")
        metafunc.parametrize("backend", BACKENDS)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run ``async def`` tests on a fresh event loop with an autojumping virtual clock."""
    function = pyfuncitem.obj
    if not inspect.iscoroutinefunction(function):
        return None
    arguments = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    callspec = getattr(pyfuncitem, "callspec", None)
    if callspec is not None and callspec.params.get("backend") == "trio":
        _run_on_trio(pyfuncitem.name, function, arguments)
        return True

    # Not asyncio.run (nor asyncio.timeout around the test): cancelling a task that awaits
    # execute() waits for the call to finish (the Python binding), so a call stuck at a gate
    # would hang the watchdog and the loop's shutdown too.  The test runs as a task; a test
    # that never finishes, and whatever it leaves waiting, is abandoned after the deadline.
    loop = asyncio.new_event_loop()
    with VirtualClock().patch_loop(loop):
        test: asyncio.Task[Any] | None = None

        async def watch() -> None:
            nonlocal test
            test = asyncio.ensure_future(function(**arguments))
            # The watchdog's timer is scheduled before the test's first step (tests count timers).
            await asyncio.wait({test}, timeout=DEADLOCK_AFTER)

        try:
            loop.run_until_complete(watch())
            assert test is not None
            if not test.done():
                raise AssertionError(
                    f"{pyfuncitem.name} deadlocked: nothing could run for {DEADLOCK_AFTER:g} "
                    "virtual seconds (a gate was never opened, or a call never settled)"
                )
            test.result()
        finally:
            left = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.wait(left, timeout=DEADLOCK_AFTER))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
    return True


def _run_on_trio(name: str, function: Any, arguments: dict[str, Any]) -> None:
    """Run a test on trio with an autojumping clock, in a nursery its tasks are spawned into.

    A deadlocked test fails after :data:`DEADLOCK_AFTER` virtual seconds -- unless what is stuck
    is a call's pipeline, which trio cannot abandon (it runs behind a shield until it settles):
    then the run hangs, as the asyncio runner's comment above explains it would without
    abandoning.
    """
    import trio
    import trio.testing
    from support import NURSERY

    async def main() -> None:
        with trio.move_on_after(DEADLOCK_AFTER) as watchdog:
            async with trio.open_nursery() as nursery:
                token = NURSERY.set(nursery)
                try:
                    await function(**arguments)
                finally:
                    NURSERY.reset(token)
        if watchdog.cancelled_caught:
            raise AssertionError(
                f"{name} deadlocked: nothing could run for {DEADLOCK_AFTER:g} virtual seconds "
                "(a gate was never opened, or a call never settled)"
            )

    # trio runs the tasks of each scheduling batch in a random order, on purpose; seeded, the
    # order is the same on every run (pytest-trio seeds it too, under Hypothesis).
    trio._core._run._r.seed(int(os.environ.get("TOOLCANCEL_TRIO_SEED", "0")))
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


WALL_CLOCK_BOUND = float(os.environ.get("TOOLCANCEL_WALL_CLOCK_BOUND", "300"))
"""Real seconds after which a test of the suites in :data:`BOUNDED` fails (pytest-timeout);
``TOOLCANCEL_WALL_CLOCK_BOUND`` sets it (tests/test_harness.py makes a scratch run's short).

Those suites wait on real event loops -- the MCP SDK's client and server, subprocesses, the
binding's task machinery -- where virtual time cannot tell a deadlock: a wait that can never be
woken would hang CI.  The bound is far above what any of their tests takes on a loaded machine
(the slowest, the MCP soak, takes seconds), so reaching it means a test is stuck, not slow.  A
test may declare its own ``@pytest.mark.timeout``.

The ``thread`` method: it prints every thread's stack and ends its process -- under xdist, as
scripts/test runs every pytest (``-n``), one worker, which xdist reports as that test's failure
and replaces, so the run goes on to its summary.  The ``signal`` method
raises inside the stuck loop instead, whose teardown then waits for the very calls that are stuck
(a cancelled call is awaited to quiescence), so the test would hang all the same."""

BOUNDED = (
    "test_mcp",
    "test_binding_",
    "test_python_binding",
    "test_virtual_time",
    "test_signals_wpt",
)
"""Test modules (a name, or a prefix ending in ``_``) bounded by :data:`WALL_CLOCK_BOUND`.  The
virtual-time suites are among them only as a backstop: what catches their real waits is
:func:`no_real_waits`, by structure, not by the clock."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Bound every test of :data:`BOUNDED` that has no timeout of its own."""
    for item in items:
        module = item.nodeid.partition("::")[0].rpartition("/")[2].removesuffix(".py")
        bounded = any(
            module.startswith(name) if name.endswith("_") else module == name for name in BOUNDED
        )
        if bounded and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(WALL_CLOCK_BOUND, method="thread"))


# -- processes a test starts end with it --------------------------------------------------------
#
# A test that starts processes must end them whether it passes or fails: a failing assertion
# between a Popen and its cleanup, or a broken reaper under test (conform's), would otherwise
# leave them running after the suite.  Every pytest process is the subreaper of what it starts
# (PR_SET_CHILD_SUBREAPER, toolcancel.oracle.conform.reaper.subreaper): a process that leaves its
# parent's session and outlives it -- a setsid() child, a daemon's grandchild -- is reparented to
# pytest, not to init.  So, after each test of a module that starts processes, every child of
# pytest born during the test, and everything below it, is killed and reaped (:func:`reaped`);
# and when pytest ends, so is every child it gained since it started -- the orphans of an xdist
# worker that a stuck test's bound ended before its teardown could run.

STARTS_PROCESSES = re.compile(
    r"subprocess\.(?:Popen|run|call|check_call|check_output)\b|open_process\(|create_subprocess_"
    r"|conform_process\(|interrupted\(|run_cli\("
)
"""What, in a test module's source, starts a process (directly, or through tests/support.py)."""

REAP_BOUND = 60.0
"""Real seconds to wait for a SIGKILLed process to exit (one stuck in the kernel), a bound."""

_starts_processes: dict[str, bool] = {}


def _children(pid: int) -> set[int]:
    """The pids of ``pid``'s children, from each of its threads' ``children`` list (Linux)."""
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                listed = Path(f"/proc/{pid}/task/{task}/children").read_text()
                found |= {int(child) for child in listed.split()}
    return found


def _subtrees(roots: set[int]) -> set[int]:
    found, stack = set(roots), list(roots)
    while stack:
        for child in _children(stack.pop()) - found:
            found.add(child)
            stack.append(child)
    return found


def reap(children: set[int]) -> set[int]:
    """SIGKILL pytest's ``children`` and every process below them, wait (bounded) until each has
    exited, and collect the children's exit statuses, so no zombie is left; the pids killed."""
    pidfds: dict[int, int] = {}
    for _ in range(8):  # a process forked between a scan and its parent's kill: the next scan
        new = _subtrees(children) - pidfds.keys()
        if not new:
            break
        for pid in sorted(new):
            with contextlib.suppress(OSError):
                pidfds[pid] = os.pidfd_open(pid)
                signal.pidfd_send_signal(pidfds[pid], signal.SIGKILL)
    try:
        for fd in pidfds.values():  # readable once the process has exited
            waiting = select.poll()
            waiting.register(fd, select.POLLIN)
            waiting.poll(REAP_BOUND * 1000)
    finally:
        for fd in pidfds.values():
            os.close(fd)
    for pid in children:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    return set(pidfds)


@pytest.fixture(autouse=True)
def reaped(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test of a module that starts processes (:data:`STARTS_PROCESSES`), passed or
    failed, what it started is gone (:func:`reap`)."""
    path = str(request.path)
    if path not in _starts_processes:
        _starts_processes[path] = bool(STARTS_PROCESSES.search(request.path.read_text("utf-8")))
    if not _starts_processes[path]:
        yield
        return
    before = _children(os.getpid())
    try:
        yield
    finally:
        reap(_children(os.getpid()) - before)


_session: dict[str, Any] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    stack = contextlib.ExitStack()
    stack.enter_context(subreaper())
    _session.update(stack=stack, children=_children(os.getpid()))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if _session:
        reap(_children(os.getpid()) - _session["children"])
        _session.pop("stack").close()


class WallClockWait(Exception):
    """A test meant to run on virtual time was about to block its event loop on the real clock."""


@pytest.fixture
def no_real_waits(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Fail, at once, a test whose event loop is about to wait on the real clock.

    An asyncio loop waits in one place: its selector's ``select(timeout)``.  Virtual time
    (``toolcancel.runtime.virtual_time``) polls it with ``0`` and jumps the clock instead; a
    loop on the real clock, or a virtual loop with nothing left that can wake it, asks for a
    positive or unbounded wait.  Polling first and raising only when nothing is ready makes the
    check structural: a test passes or fails the same way on an idle or a loaded machine,
    however long its Hypothesis examples take (a real-time alarm fired on busy CI cores inside
    slow-but-correct tests).  A test that waits for real I/O on purpose (a thread, a
    subprocess) is marked ``real_io`` and left to :data:`WALL_CLOCK_BOUND`.
    """
    if request.node.get_closest_marker("real_io") is None:
        real_select = selectors.DefaultSelector.select

        def select(self: selectors.BaseSelector, timeout: float | None = None) -> Any:
            if timeout is not None and timeout <= 0:
                return real_select(self, timeout)
            events = real_select(self, 0)
            if events:
                return events
            raise WallClockWait(
                f"the event loop was about to wait on the real clock (select timeout={timeout!r}):"
                " run it on toolcancel.runtime.virtual_time, or mark the test real_io"
            )

        monkeypatch.setattr(selectors.DefaultSelector, "select", select)
    yield
