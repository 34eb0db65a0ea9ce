"""Helpers that make a tool body cooperative: the other half of the contract.

The registry never hard-kills a body: it tells the body through its signal and awaits it.  A
body that ignores its signal keeps its call pending (on purpose: the registry will not pretend
the work stopped).  These helpers make the cooperative way the easy way.

Each takes what to watch: an :class:`~toolcancel.AbortSignal` or -- recommended -- the call's
execution view itself (``None`` is refused with a ``TypeError``: it would watch nothing).  Given
the view, a helper watches the view's ``signal`` (the fused signal F during the body: the
caller's abort and every wrapper deadline) *and* its ``call_signal``, which every call has and
which task cancellation aborts even for a call made with ``signal=None`` (CONTRACT.md, Python
binding P1).

* :func:`aborted` -- wait until it aborts (for bodies that wait on something else too);
* :func:`throw_if_aborted` -- raise :class:`~toolcancel.AbortError` if it has aborted;
* :func:`cancellable` -- run an awaitable, and if it aborts first, cancel the awaitable, *await
  its cancellation to the end* (so nothing it started outlives the body), and raise
  :class:`~toolcancel.AbortError`.

The :class:`~toolcancel.AbortError` they raise says ``tool call aborted``, carries the code
``ABORTED`` and keeps the signal's reason in ``.reason``.  A body that lets it propagate publishes
exactly the contract's canonical ABORTED result (R3 applied to it gives R4's shape), whoever
aborted.  A body that catches it may still decide: return a partial result (a success after an
abort becomes ABORTED anyway unless the entry was pre-aborted, R18) or raise something more
specific (an error the body raises is kept: R3, R19 -- more specific failures survive).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from .eventloop import Waiter, on_trio
from .signals import AbortError, AbortSignal

if TYPE_CHECKING:
    from .registry import Execution

__all__ = ["MESSAGE", "aborted", "cancellable", "signals_of", "throw_if_aborted"]

T = TypeVar("T")

MESSAGE = "tool call aborted"
"""The message of the :class:`AbortError` the helpers raise (R4's text without ``Error: ``)."""

def signals_of(watched: AbortSignal | Execution) -> tuple[AbortSignal, ...]:
    """The signals a helper watches: the signal itself, or the view's slot and call signal.

    ``None`` is refused: nothing to watch would make :func:`aborted` wait forever, silently.
    It is what ``call.signal`` is in a call made with ``signal=None`` (R26) or after a wrapper
    removed the slot: pass the call itself, which always has its call signal.
    """
    if isinstance(watched, AbortSignal):
        return (watched,)
    if watched is None:
        raise TypeError(
            "nothing to watch (None): pass the call itself, e.g. aborted(call), which watches "
            "its signal and its call signal; call.signal is None in a call made with "
            "signal=None or whose wrapper removed the signal"
        )
    slot, own = watched.signal, watched.call_signal
    if slot is None or slot is own:
        return (own,)
    return (slot, own)


def _first_reason(signals: tuple[AbortSignal, ...]) -> tuple[bool, object]:
    for s in signals:
        if s.aborted:
            return True, s.reason
    return False, None


def throw_if_aborted(watched: AbortSignal | Execution) -> None:
    """Raise :class:`AbortError` (``tool call aborted``, code ``ABORTED``) if it has aborted.

    Unlike ``AbortSignal.throw_if_aborted()``, which raises the reason itself (whatever it is),
    this always raises the one error the registry publishes as the canonical ABORTED; the reason
    is kept in ``.reason``.
    """
    done, reason = _first_reason(signals_of(watched))
    if done:
        raise AbortError(MESSAGE, reason=reason)


async def aborted(watched: AbortSignal | Execution) -> object:
    """Wait until it aborts; return the reason.  Returns at once if it already has."""
    signals = signals_of(watched)
    done, reason = _first_reason(signals)
    if done:
        return reason
    fut = Waiter()

    def wake(signal: AbortSignal) -> None:
        fut.set(signal.reason)

    for s in signals:
        s.add_listener(wake)
    try:
        return await fut
    finally:
        for s in signals:
            s.remove_listener(wake)


async def cancellable(watched: AbortSignal | Execution, work: Awaitable[T]) -> T:
    """Await ``work``; if ``watched`` aborts first, cancel it, wait for it to finish cancelling,
    and raise :class:`AbortError` (``tool call aborted``; ``.reason`` is the signal's reason).

    ``work`` always settles before this returns or raises: cancellation is requested, never
    assumed.  If ``work`` ignores the cancellation and completes anyway, its result is returned
    -- the work did happen, and pretending otherwise would hide it.
    """
    try:
        signals = signals_of(watched)
    except TypeError:
        if inspect.iscoroutine(work):  # refused before it started: not left unawaited
            work.close()
        raise
    if on_trio():
        return await _cancellable_trio(signals, work)
    task = asyncio.ensure_future(work) if _first_reason(signals)[0] else _start(work)
    if _first_reason(signals)[0]:  # aborted before it started, or in its (eager) first step
        task.cancel()
    elif not task.done():  # (started eagerly, ``work`` may have finished in its first step)

        def stop(_: AbortSignal) -> None:
            task.cancel()

        for s in signals:
            s.add_listener(stop)
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:  # the body itself is being cancelled: take work along
            task.cancel()
            await asyncio.wait([task])
            raise
        finally:
            for s in signals:
                s.remove_listener(stop)
    try:
        return await task
    except asyncio.CancelledError:
        done, reason = _first_reason(signals)
        if not done:
            raise  # cancelled from elsewhere: not ours to translate
        raise AbortError(MESSAGE, reason=reason) from None


def _start(work: Awaitable[T]) -> asyncio.Future[T]:
    """``work`` in a task of its own, started eagerly where asyncio offers it (3.12+): work that
    finishes without suspending is done here, and the body goes on without a turn of the loop."""
    if _EAGER is not None and inspect.iscoroutine(work):
        task: asyncio.Future[T] = _EAGER(asyncio.get_running_loop(), work)
        return task
    return asyncio.ensure_future(work)


_EAGER: Final[Any] = getattr(asyncio, "eager_task_factory", None)
"""``asyncio.eager_task_factory`` (public since 3.12), or ``None`` before it."""


async def _cancellable_trio(signals: tuple[AbortSignal, ...], work: Awaitable[T]) -> T:
    """:func:`cancellable` on trio: ``work`` runs in this task under a cancel scope the signals
    cancel; trio's scope waits for it to unwind, and a cancellation from an enclosing scope
    reaches it as it reaches the body."""
    import trio

    scope = trio.CancelScope()

    def stop(_: AbortSignal) -> None:
        scope.cancel()

    if _first_reason(signals)[0]:
        scope.cancel()
    for s in signals:
        s.add_listener(stop)
    try:
        with scope:
            return await work
    finally:
        for s in signals:
            s.remove_listener(stop)
    # Only the signals cancel ``scope``: reached when it caught their cancellation.
    raise AbortError(MESSAGE, reason=_first_reason(signals)[1])
