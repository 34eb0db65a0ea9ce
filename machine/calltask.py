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
from asyncio.events import _get_running_loop
from asyncio.tasks import _enter_task, _leave_task
from typing import Any

__all__ = ["CallTask"]

# asyncio's own table of each loop's current task (CPython 3.11-3.13, C and Python alike): one
# store to swap, where _enter_task/_leave_task cost two checked calls each way.  Elsewhere,
# those two are the way.
_CURRENT: dict[asyncio.AbstractEventLoop, Any] | None = getattr(
    asyncio.tasks, "_current_tasks", None
)


class CallTask:
    """What ``asyncio.current_task()`` is while a call's hooks, wrappers and body run.

    Invariants: ``fut_waiter`` is the future the pipeline waits on while it is suspended on one,
    else ``None``; ``must_cancel`` is set only when a cancellation found no future to cancel, and
    is consumed (a ``CancelledError`` thrown in) at the pipeline's next step.
    """

    __slots__ = (
        "__weakref__",
        "_cancel_message",
        "_fut_waiter",
        "_loop",
        "_must_cancel",
        "_num_cancels_requested",
        "_task",
        "call_id",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any], call_id: str):
        self._loop = loop
        self._task = task
        self.call_id = call_id
        self._fut_waiter: asyncio.Future[Any] | None = None
        self._must_cancel = False
        self._cancel_message: str | None = None
        self._num_cancels_requested = 0

    @classmethod
    def for_call(cls, call_id: str) -> CallTask | None:
        """The view for a call driven by the current task (none outside a task)."""
        loop = _get_running_loop()
        if loop is None:
            return None
        task = _CURRENT.get(loop) if _CURRENT is not None else asyncio.current_task(loop)
        return None if task is None else cls(loop, task, call_id)

    def enter(self) -> asyncio.CancelledError | None:
        """Be the current task for one step of the pipeline; the cancellation to throw in, if
        one found no future to cancel (consumed here)."""
        if _CURRENT is not None:
            _CURRENT[self._loop] = self
        else:  # pragma: no cover - a Python without the table
            _leave_task(self._loop, self._task)
            _enter_task(self._loop, self)  # type: ignore[arg-type]
        if not self._must_cancel:
            return None
        self._must_cancel = False
        message, self._cancel_message = self._cancel_message, None
        return asyncio.CancelledError() if message is None else asyncio.CancelledError(message)

    def leave(self) -> None:
        if _CURRENT is not None:
            _CURRENT[self._loop] = self._task
        else:  # pragma: no cover - a Python without the table
            _leave_task(self._loop, self)  # type: ignore[arg-type]
            _enter_task(self._loop, self._task)

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
