"""Deterministic, autojumping virtual time for asyncio.

Tests and the model checker must never wait on the wall clock: a test of a
one-hour timeout should take microseconds and give the same interleaving on
every run.  This module does for asyncio what trio's ``MockClock`` with
``autojump_threshold=0`` (and aiotools' ``VirtualClock``) do:

* ``loop.time()`` returns virtual time, which only moves when the clock says
  so.  Everything in asyncio that schedules by time (``call_later``,
  ``asyncio.sleep``, ``asyncio.timeout``, ``wait_for``) goes through
  ``loop.time()``, so all of it follows the virtual clock.
* When the loop is idle (nothing ready to run, no I/O ready) and the next
  thing that can happen is a timer, virtual time jumps straight to that
  timer instead of blocking.

The rules:

1. Ready callbacks and ready I/O always run first, at the current virtual
   time: time only jumps when the loop would otherwise *block*.
2. Only positive, finite waits are jumped, and only after the real selector,
   polled with timeout 0 (or ``autojump_threshold``), reports nothing ready.
3. A wait with no timeout at all (no timers pending) still blocks in the real
   selector, so real I/O - subprocess pipes, sockets, threads finishing via
   ``call_soon_threadsafe`` - keeps working.  Note the flip side of rule 2:
   if a timer is pending, work that is in flight outside the loop (a
   subprocess, a thread) is *not* waited for; the timer fires first.  Set
   ``autojump_threshold`` to give such work some real time before jumping.

How: ``patch_loop`` replaces ``loop.time`` and the ``select`` method of the
loop's private ``_selector``, on the instances only, and restores them on
exit.  ``BaseEventLoop._run_once`` computes how long it may block from the
earliest timer and ``loop.time()``, then calls ``self._selector.select(t)``;
that call is the one place where the loop waits, so it is the one place to
intercept.  Touching a private attribute is acceptable here because the
attribute and that call have been unchanged since Python 3.4 and through
3.11+, this module is for tests only (production code uses the real clock),
and a loop without ``_selector`` (uvloop, say) is refused with a clear
``TypeError`` rather than silently running on real time.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import weakref
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

__all__ = ["VirtualClock", "run"]

T = TypeVar("T")

_ABSENT = object()

MAX_BUSY_TURNS = 10_000
"""Loop iterations with work ready that :meth:`VirtualClock.idle` waits through before it calls
the loop livelocked (something keeps scheduling work without ever waiting)."""

_CLOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, VirtualClock] = (
    weakref.WeakKeyDictionary()
)


class VirtualClock:
    """A clock that moves only when advanced, or when the loop would block.

    ``autojump_threshold`` is how many real seconds the loop may wait for
    I/O before virtual time jumps to the next timer.  The default, 0, never
    waits on the wall clock; that is what tests want.
    """

    def __init__(self, start: float = 0.0, *, autojump_threshold: float = 0.0) -> None:
        if not math.isfinite(start):
            raise ValueError(f"start must be finite, got {start!r}")
        if not math.isfinite(autojump_threshold) or autojump_threshold < 0:
            raise ValueError(
                f"autojump_threshold must be finite and >= 0: {autojump_threshold!r}"
            )
        self._now = float(start)
        self._autojump_threshold = float(autojump_threshold)
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._busy_turns = 0

    @staticmethod
    def of(loop: asyncio.AbstractEventLoop) -> VirtualClock | None:
        """The clock ``loop`` runs on (inside :meth:`patch_loop`), or None."""
        return _CLOCKS.get(loop)

    def idle(self) -> asyncio.Future[None]:
        """A future that is done the next time the loop would wait: every task is blocked (on a
        future, a gate, a timer), nothing is ready to run and no I/O is ready.  Virtual time does
        not move for it.  If the loop runs :data:`MAX_BUSY_TURNS` iterations with work ready
        before that, the future fails with ``RuntimeError`` (a livelock).

        This is what the scenario harness means by "let every task run until all are blocked";
        the loop's own wait (:meth:`patch_loop`'s hook on its selector) is the one place that
        knows, so nothing reads the loop's private ready queue.
        """
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self._idle_waiters:
            self._busy_turns = 0
        self._idle_waiters.append(future)
        return future

    def _wake_idle(self) -> None:
        waiters, self._idle_waiters = self._idle_waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

    def _livelocked(self) -> None:
        waiters, self._idle_waiters = self._idle_waiters, []
        for future in waiters:
            if not future.done():
                future.set_exception(
                    RuntimeError("the loop keeps busy without ever waiting (livelock)")
                )

    def __repr__(self) -> str:
        return f"<VirtualClock time={self._now!r}>"

    def time(self) -> float:
        """Current virtual time, in seconds (stands in for ``loop.time()``)."""
        return self._now

    def advance(self, seconds: float) -> None:
        """Move virtual time forward by ``seconds``.

        Timers that become due run on the loop's next iteration, not inside
        this call, exactly as if real time had passed.
        """
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"can only advance by a finite amount >= 0: {seconds!r}")
        self._now += seconds

    def _autojumping(self, real_select: Callable[..., Any]) -> Callable[..., Any]:
        def select(timeout: float | None = None) -> Any:
            if self._idle_waiters:
                if timeout is not None and timeout <= 0:  # work is ready: not idle yet
                    # No poll: the ready work runs first anyway, and I/O is polled before
                    # idleness is declared (below) -- a poll here would be a system call on
                    # every turn of a loop that waits for idleness (the model checker's)
                    self._busy_turns += 1
                    if self._busy_turns > MAX_BUSY_TURNS:
                        self._livelocked()
                    return []
                events = real_select(0)
                if events:
                    return events
                self._wake_idle()  # the loop would wait: every task is blocked
                return []
            if timeout is None or not math.isfinite(timeout) or timeout <= 0:
                return real_select(timeout)
            events = real_select(min(timeout, self._autojump_threshold))
            if events:
                return events
            # Idle until the next timer: jump to it instead of waiting.
            self.advance(timeout)
            return []

        return select

    @contextlib.contextmanager
    def patch_loop(
        self, loop: asyncio.AbstractEventLoop | None = None
    ) -> Iterator[None]:
        """Run ``loop`` (default: the running loop) on this clock while inside.

        Patches ``loop.time`` and ``loop._selector.select`` on the instances
        and restores them on exit, even if the loop was closed meanwhile.
        """
        if loop is None:
            loop = asyncio.get_running_loop()
        selector: Any = getattr(loop, "_selector", None)
        if selector is None or not callable(getattr(selector, "select", None)):
            raise TypeError(
                f"{type(loop).__name__} has no selector to patch; "
                "VirtualClock needs an asyncio selector-based event loop"
            )
        saved_time = vars(loop).get("time", _ABSENT)
        saved_select = vars(selector).get("select", _ABSENT)
        real_select: Callable[..., Any] = selector.select
        loop.time = self.time  # type: ignore[method-assign]
        selector.select = self._autojumping(real_select)
        saved_clock = _CLOCKS.get(loop)
        _CLOCKS[loop] = self
        try:
            yield
        finally:
            _restore(loop, "time", saved_time)
            _restore(selector, "select", saved_select)
            if saved_clock is None:
                _CLOCKS.pop(loop, None)
            else:
                _CLOCKS[loop] = saved_clock


def _restore(obj: object, name: str, saved: object) -> None:
    if saved is _ABSENT:
        with contextlib.suppress(AttributeError):
            delattr(obj, name)
    else:
        setattr(obj, name, saved)


def run(coro: Coroutine[Any, Any, T], *, clock: VirtualClock | None = None) -> T:
    """Like ``asyncio.run(coro)``, but on a fresh loop with virtual time.

    The clock stays patched while the loop shuts down, so tasks cancelled at
    exit that sleep in ``finally`` do not wait on the wall clock either.  The
    loop is closed before returning.
    """
    if clock is None:
        clock = VirtualClock()
    runner = asyncio.Runner()
    loop = runner.get_loop()
    with clock.patch_loop(loop):
        try:
            return runner.run(coro)
        finally:
            runner.close()
