"""The event loop a call runs on: asyncio's or trio's (anyio runs on one of the two).

The registry and its helpers need five things from the loop -- its clock, timers, a one-shot
wake-up to await, a shielded run for structured cancellation, and to know which loop it is.
asyncio has objects for them; trio has none of those objects.  So every module that needs one
asks here.

Detection costs one C call on asyncio (a running loop in this thread wins: that is also what
anyio's asyncio backend runs on); trio is tried only when no asyncio loop runs and trio has been
imported, so a program that never imports trio never loads it.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

log = logging.getLogger("toolcancel.runtime.eventloop")


class Timer(Protocol):
    """A scheduled callback that can be called off (idempotent)."""

    def cancel(self) -> None: ...


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The asyncio loop running in this thread, or ``None`` (public API only)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def on_trio() -> bool:
    """Whether the caller runs in a trio run (and no asyncio loop runs in this thread).  Without
    trio imported, one dict look-up."""
    trio = sys.modules.get("trio")
    if trio is None or running_loop() is not None:
        return False
    return bool(trio.lowlevel.in_trio_task())


def clock() -> Callable[[], float]:
    """The running loop's clock.  Raises ``RuntimeError`` outside any loop.

    On asyncio it is ``time.monotonic`` itself when that is all ``loop.time()`` does (one Python
    call less per state change), else the loop's own (a virtual clock, a test's).
    """
    loop = running_loop()
    if loop is not None:
        return _clock_of(loop)
    if on_trio():
        import trio

        return trio.current_time
    raise RuntimeError("no running event loop (asyncio or trio)")


def call_later(delay: float, callback: Callable[[], None]) -> Timer:
    """Run ``callback()`` after ``delay`` seconds of the running loop's clock."""
    loop = running_loop()
    if loop is not None:
        return loop.call_later(delay, callback)
    return _TrioTimer(delay, callback)


def timers() -> Callable[[float, Callable[[], None]], Timer]:
    """:func:`call_later` bound to the loop running now.  A call keeps it beside its clock: a
    signal aborted from synchronous code while its loop is not running (between two
    ``run_until_complete``, in a test world) still steps the call, and a timer that step sets
    (the drain warning) belongs on the call's loop, which :func:`call_later` could no longer
    find.  Raises ``RuntimeError`` outside any loop."""
    loop = running_loop()
    if loop is not None:
        return loop.call_later
    if on_trio():  # a trio run has no loop object to keep, and its thread runs nothing else
        return _TrioTimer
    raise RuntimeError("no running event loop (asyncio or trio)")


def clock_and_timers() -> tuple[Callable[[], float], Callable[[float, Callable[[], None]], Timer]]:
    """:func:`clock` and :func:`timers` of the loop running now, with one look-up of it (a call
    takes both as it enters).  Raises ``RuntimeError`` outside any loop."""
    try:  # running_loop() and _clock_of(), two Python calls fewer: every call enters here
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return clock(), timers()
    own = getattr(loop.time, "__func__", None)
    return time.monotonic if own is _ASYNCIO_TIME else loop.time, loop.call_later


def _clock_of(loop: asyncio.AbstractEventLoop) -> Callable[[], float]:
    """``time.monotonic`` when the loop's ``time()`` is asyncio's own (not set on the instance
    as a virtual clock sets it, nor a loop class's own), else ``loop.time``.  Asked through the
    bound method, never the loop's ``__dict__``: reading that gives the loop a real dict for
    good, and every attribute the loop reads of itself after costs more (a bare task on a loop
    whose ``__dict__`` was read once: 5.9 -> 7.1 us on 3.12, 5.9 -> 6.6 us on 3.11, no change on
    3.13; CPU medians)."""
    own = getattr(loop.time, "__func__", None)
    return time.monotonic if own is _ASYNCIO_TIME else loop.time


_ASYNCIO_TIME = asyncio.BaseEventLoop.time


def call_at(when: float, callback: Callable[[], None]) -> Timer:
    """Run ``callback()`` when the running loop's clock reaches ``when``."""
    loop = running_loop()
    if loop is not None:
        return loop.call_at(when, callback)
    import trio

    return _TrioTimer(when - trio.current_time(), callback)


class _TrioTimer:
    """A timer on trio: a system task sleeping in its own cancel scope.

    A system task, not a task of some nursery: a timer belongs to the run, like asyncio's, and
    outlives the task that set it (a deadline set in a wrapper fires while the body runs).
    """

    __slots__ = ("_callback", "_scope")

    def __init__(self, delay: float, callback: Callable[[], None]) -> None:
        import trio

        self._callback: Callable[[], None] | None = callback
        self._scope = trio.CancelScope()
        trio.lowlevel.spawn_system_task(self._run, max(delay, 0.0), name="toolcancel timer")

    async def _run(self, delay: float) -> None:
        import trio

        with self._scope:
            await trio.sleep(delay)
            callback, self._callback = self._callback, None
            if callback is not None:
                try:
                    callback()
                except Exception:  # as asyncio's loop does: a failing callback is logged
                    log.exception("toolcancel timer callback %r failed", callback)

    def cancel(self) -> None:
        self._callback = None
        self._scope.cancel()


class Waiter:
    """A one-shot wake-up carrying a value: set it once (from a callback), await it.

    An ``asyncio.Future`` on asyncio, a ``trio.Event`` and a slot on trio.  Setting it twice
    keeps the first value.
    """

    __slots__ = ("_event", "_future", "_value")

    def __init__(self) -> None:
        loop = running_loop()
        self._future: asyncio.Future[Any] | None = None
        self._event: Any = None
        self._value: Any = None
        if loop is not None:
            self._future = loop.create_future()
        else:
            import trio

            self._event = trio.Event()

    def done(self) -> bool:
        if self._future is not None:
            return self._future.done()
        return bool(self._event.is_set())

    def set(self, value: Any = None) -> None:
        if self.done():
            return
        if self._future is not None:
            self._future.set_result(value)
        else:
            self._value = value
            self._event.set()

    def result(self) -> Any:
        """The value it was set with (``None`` until it is set)."""
        if self._future is not None:
            return self._future.result() if self._future.done() else None
        return self._value

    def __await__(self) -> Generator[Any, None, Any]:
        if self._future is not None:
            return (yield from self._future.__await__())
        yield from self._event.wait().__await__()
        return self._value


async def shielded(work: Callable[[], Awaitable[T]], on_cancel: Callable[[str | None], None]) -> T:
    """Run ``work()`` on trio so that cancelling the awaiting task never reaches it; ``on_cancel``
    hears of it instead.

    There, cancellation is a state of a scope, not an exception thrown once: every checkpoint in
    a cancelled scope raises again.  So ``work`` runs behind a shield, and a watcher task,
    outside it, waits for ``work`` and is the one the cancellation reaches: it calls
    ``on_cancel(None)`` (there is no message), once.  ``work`` goes on to its end -- its own
    cancel scopes, inside the shield, work as anywhere -- and then the cancellation is raised
    again by a checkpoint (the scope is still cancelled).  (On asyncio, anyio's cancel scopes
    included, the registry's ``drain`` does this with a task of the call's own.)
    """
    import trio

    settled = trio.Event()
    cancelled = False

    async def watch() -> None:
        nonlocal cancelled
        try:
            await settled.wait()
        except trio.Cancelled:
            if not settled.is_set():
                cancelled = True
                on_cancel(None)

    failure: BaseException | None = None
    result: T | None = None
    async with trio.open_nursery() as group:
        group.start_soon(watch)
        with trio.CancelScope(shield=True):
            try:
                result = await work()
            except BaseException as exc:  # raised outside the group: not in an ExceptionGroup
                failure = exc
            finally:
                settled.set()
    if failure is not None:
        raise failure
    if cancelled:
        await trio.lowlevel.checkpoint_if_cancelled()
    return result  # type: ignore[return-value]
