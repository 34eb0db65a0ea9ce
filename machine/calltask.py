"""The task a call's user code sees: its own cancellations stay its own.

On asyncio a call runs in the task that awaits ``execute()`` (no task of its own: a call costs
one task switch less, and ``KeyboardInterrupt`` from user code surfaces where the caller awaits).
But ``asyncio.timeout`` and ``TaskGroup`` *inside* a hook or body cancel ``current_task()`` to
stop their own block -- and cancelling the awaiting task is, by the binding (P2), the caller
aborting the call.  Left at that, a body's own ``asyncio.timeout(0.05)`` around a slow await
would never fire into the body: the call would be aborted instead, the body run its full time
and the caller receive a ``CancelledError`` nobody asked for.

So while the call's pipeline runs a step, :func:`asyncio.current_task` is a :class:`CallTask`:
a stand-in for the awaiting task that keeps its own cancellation book, exactly as
``asyncio.Task.cancel`` keeps it.  User code that cancels it cancels the future the pipeline
waits on (or, if none, has ``CancelledError`` thrown in at its next step): the cancellation
reaches the awaiting code like in any task, and ``asyncio.timeout``/``TaskGroup`` turn it back
into their own result with ``uncancel()``.  Cancelling the *awaiting* task is still the caller's
abort.  Everything else a task offers is the awaiting task's.
"""

from __future__ import annotations

import asyncio
from asyncio.tasks import _enter_task, _leave_task
from typing import Any

__all__ = ["CURRENT_TASKS", "CallTask", "StandIn"]


class _TaskTable:
    """asyncio's table of each loop's current task, where this Python does not expose it: the
    same two operations, through ``_enter_task``/``_leave_task``."""

    def get(self, loop: asyncio.AbstractEventLoop) -> Any:
        return asyncio.current_task(loop)

    def __setitem__(self, loop: asyncio.AbstractEventLoop, task: Any) -> None:
        _leave_task(loop, asyncio.current_task(loop))  # type: ignore[arg-type]
        _enter_task(loop, task)


_TABLE: Any = getattr(asyncio.tasks, "_current_tasks", None)
CURRENT_TASKS: Any = _TaskTable() if _TABLE is None else _TABLE
"""asyncio's own table of each loop's current task (CPython 3.11-3.13, C and Python alike).  The
driver swaps a :class:`CallTask` in and the awaiting task back with one store each way, inline
(a method call per step cost a tenth of a hook-free call)."""


class CallTask:
    """What ``asyncio.current_task()`` is while a call's hooks, wrappers and body run.

    Invariants: ``fut_waiter`` is the future the pipeline waits on while it is suspended on one,
    else ``None``; ``must_cancel`` is set only when a cancellation found no future to cancel, and
    is consumed (a ``CancelledError`` thrown in, :meth:`cancellation`) at the pipeline's next
    step.
    """

    __slots__ = (
        "__weakref__",
        "_cancel_message",
        "_fut_waiter",
        "_must_cancel",
        "_num_cancels_requested",
        "_task",
        "call_id",
    )

    def __init__(self, task: asyncio.Task[Any], call_id: str):
        self._task = task
        self.call_id = call_id
        self._fut_waiter: asyncio.Future[Any] | None = None
        self._must_cancel = False
        self._cancel_message: str | None = None
        self._num_cancels_requested = 0

    def cancellation(self) -> asyncio.CancelledError:
        """The cancellation to throw in at the next step, one that found no future to cancel
        (only asked when ``_must_cancel`` is set; consumed here)."""
        self._must_cancel = False
        message, self._cancel_message = self._cancel_message, None
        return asyncio.CancelledError() if message is None else asyncio.CancelledError(message)

    def cancel(self, msg: Any = None) -> bool:
        """Cancel what the call's user code awaits, as ``Task.cancel`` would (not the call)."""
        if self._task.done():
            return False
        self._num_cancels_requested += 1
        waiter = self._fut_waiter
        if waiter is not None and waiter.cancel(msg=msg):
            return True
        self._must_cancel = True
        self._cancel_message = msg
        return True

    def cancelling(self) -> int:
        return self._num_cancels_requested

    def uncancel(self) -> int:
        if self._num_cancels_requested > 0:
            self._num_cancels_requested -= 1
        return self._num_cancels_requested

    def get_coro(self) -> Any:
        return self._task.get_coro()

    def __getattr__(self, name: str) -> Any:  # get_name, get_loop, add_done_callback, ...
        return getattr(self._task, name)

    def __repr__(self) -> str:
        return f"<CallTask of call {self.call_id} in {self._task!r}>"


class StandIn(asyncio.Future[None]):
    """The future the awaiting task waits on instead of ``real``: done, with no value, when
    ``real`` is.  So cancelling that task cancels this one, never the hook's or body's own future
    (the registry's driver hands it to the task; a subclass of asyncio's C future, it stays out
    of the compiled registry, which could not extend that type)."""

    def __init__(self, real: asyncio.Future[Any]) -> None:
        super().__init__(loop=real.get_loop())
        self.real = real
        real.add_done_callback(self.relay)
        self._asyncio_future_blocking = True

    def relay(self, _: asyncio.Future[Any]) -> None:
        if not self.done():
            self.set_result(None)

    def release(self) -> None:
        self.real.remove_done_callback(self.relay)
