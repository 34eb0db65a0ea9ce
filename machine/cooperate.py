"""Helpers that make a tool body cooperative: the other half of the contract.

The registry never hard-kills a body: it tells the body through its signal and awaits it.  A
body that ignores its signal keeps its call pending (on purpose: the registry will not pretend
the work stopped).  These helpers make the cooperative way the easy way:

* :func:`aborted` -- wait until a signal aborts (for bodies that wait on something else too);
* :func:`cancellable` -- run an awaitable, and if the signal aborts first, cancel it, *await its
  cancellation to the end* (so nothing it started outlives the body), and raise
  :class:`~toolcancel.AbortError` carrying the signal's reason.  The body catches that and still
  decides what to return: a partial result, a structured error, or re-raise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from .signals import AbortError, AbortSignal

T = TypeVar("T")


async def aborted(signal: AbortSignal) -> object:
    """Wait until ``signal`` aborts; return its reason.  Returns at once if it already has."""
    if signal.aborted:
        return signal.reason
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake(_: AbortSignal) -> None:
        if not fut.done():
            fut.set_result(None)

    signal.add_listener(wake)
    try:
        await fut
    finally:
        signal.remove_listener(wake)
    return signal.reason


async def cancellable(signal: AbortSignal | None, work: Awaitable[T]) -> T:
    """Await ``work``; if ``signal`` aborts first, cancel it, wait for it to finish cancelling,
    and raise :class:`AbortError` (``.reason`` is the signal's reason).

    ``work`` always settles before this returns or raises: cancellation is requested, never
    assumed.  If ``work`` ignores the cancellation and completes anyway, its result is returned
    -- the work did happen, and pretending otherwise would hide it.
    """
    task = asyncio.ensure_future(work)
    if signal is None:
        return await task
    if signal.aborted:
        task.cancel()
    else:
        def stop(_: AbortSignal) -> None:
            task.cancel()

        signal.add_listener(stop)
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:  # the body itself is being cancelled: take work along
            task.cancel()
            await asyncio.wait([task])
            raise
        finally:
            signal.remove_listener(stop)
    try:
        return await task
    except asyncio.CancelledError:
        if not signal.aborted:
            raise  # cancelled from elsewhere: not ours to translate
        raise AbortError("the work was cancelled because its signal aborted",
                         reason=signal.reason) from None
