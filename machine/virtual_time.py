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
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

__all__ = ["VirtualClock", "run"]

T = TypeVar("T")

_ABSENT = object()


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
        try:
            yield
        finally:
            _restore(loop, "time", saved_time)
            _restore(selector, "select", saved_select)


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
