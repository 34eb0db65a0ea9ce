"""How a call runs in the task that awaits it: the asyncio and trio binding of the driver.

:meth:`ToolRegistry.execute` returns a :class:`PendingCall`: a call that has entered, as a
coroutine.  Awaited on asyncio, the call's pipeline runs in a task of its own (eager from 3.12)
and the awaiting task only waits for it (:func:`drain`), so that cancelling the awaiting task
never reaches user code: it aborts the call signal, and the call runs on to its one published
result (Python binding P1, P2); a second interrupt abandons the call (P7).  On trio the call runs
behind a shield whose cancellation is the caller's abort
(:func:`toolcancel.runtime.eventloop.shielded`). In the compiled group (setup.py's ``COMPILED``).
"""

from __future__ import annotations

import asyncio
import math
import sys
import warnings
from collections.abc import Callable, Coroutine, Generator
from functools import partial
from typing import Any, Final

from ..contract.results import ToolResult
from .driver import _Call
from .eventloop import on_trio, shielded
from .execution import Execution
from .owning import owned, wake
from .stepping import _interrupt_of, log

_EAGER_START: Final = sys.version_info >= (3, 12)
"""Whether ``asyncio.Task`` takes ``eager_start`` (public since 3.12, as ``Task(coro, *, loop,
name, context, eager_start)``).  Asked of the class directly, not through
``asyncio.eager_task_factory``, whose Python frame only passes ``eager_start=True`` on."""
_TASK: Final[Any] = asyncio.Task  # Any: the signature checked here is the oldest Python's


async def _guarded(
    call: _Call,
    cancelled: asyncio.CancelledError | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
) -> ToolResult:
    """Run ``call`` in a task of its own and await it here, so that cancelling the awaiting task
    never reaches user code, which sees a real task of its own (P2).

    The awaiting task's cancellation is turned into the caller aborting
    (:meth:`_Call.task_cancelled`); the call runs on to its one published result -- repeated
    cancellations only wait again (R27) -- and the first ``CancelledError`` is raised at the end,
    the task's cancellation count left as ``cancel()`` made it.  ``cancelled`` is a cancellation
    that arrived before the task first ran the call; ``loop``, the running loop if the caller
    has it (else it is asked here).  An interrupt recorded by the call (P4) is
    raised here, after publication.  A cancellation during an interrupt abandons the call (P7).
    """
    # The call's own task: started eagerly where asyncio offers it (3.12+), so a call whose user
    # code never suspends runs to its end right here, with no turn of the loop.  Before 3.12 it is
    # scheduled, and the awaiting task waits on ``ended``, a future its coroutine sets as it
    # ends: that wakes it a turn sooner than the task's done callback.  ``pipeline`` is what the
    # task runs: only _abandon() closes it.
    if cancelled is not None:  # it reached the awaiting task before it first ran the call
        call.task_cancelled(_message_of(cancelled))
    if loop is None:  # no loop: asyncio's own RuntimeError, as for any coroutine
        loop = asyncio.get_running_loop()
    pipeline = call.run(False)
    ended: asyncio.Future[None] | None = None
    if _EAGER_START:
        task = _TASK(owned(call, pipeline, None), loop=loop, name=call.call_id, eager_start=True)
    else:
        ended = loop.create_future()
        task = loop.create_task(owned(call, pipeline, ended), name=call.call_id)
    if not task.done():
        abandon = partial(_abandon, call, task, pipeline)
        caught = await drain(task, call.task_cancelled, abandon, ended)
        cancelled = cancelled or caught
    if task.cancelled() and call.state == "materialized":
        result = call.result  # the call's own task cancelled itself after publishing
    else:
        result = task.result()
    if call.interrupt is not None:
        raise call.interrupt
    if cancelled is not None:
        raise cancelled
    return result


async def drain(
    task: asyncio.Task[Any],
    on_cancel: Callable[[str | None], None],
    on_interrupt: Callable[[BaseException], None],
    ended: asyncio.Future[None] | None = None,
) -> asyncio.CancelledError | None:
    """Wait until ``task`` is done, whatever happens to the task awaiting this: cancelling it
    never reaches ``task`` (public asyncio only: it waits on a future of its own; first on
    ``ended``, if given, which ``task`` sets as its coroutine ends).

    The first cancellation calls ``on_cancel`` with its message and is returned at the end
    (re-raising it is the caller's business); later ones only wait again.  A cancellation while
    an interrupt propagates (P7) calls ``on_interrupt`` and is raised at once.  Under a cancelled
    anyio cancel scope, which would cancel this task again at every turn of the loop, the rest
    of the wait runs behind anyio's public shield.
    """
    cancelled: asyncio.CancelledError | None = None
    shield: Any = None
    try:
        while not task.done():
            waker: Callable[[object], None] | None = None
            if ended is None or ended.done():
                ended = task.get_loop().create_future()
                waker = partial(wake, ended)
                task.add_done_callback(waker)
            try:
                await ended
            except asyncio.CancelledError as exc:
                if waker is not None:
                    task.remove_done_callback(waker)
                interrupt = _interrupt_of(exc)
                if interrupt is not None:
                    if not task.done():
                        on_interrupt(interrupt)
                    raise
                if cancelled is None:
                    cancelled = exc
                    on_cancel(_message_of(exc))
                    if shield is None and _anyio_scope_cancelled():
                        shield = sys.modules["anyio"].CancelScope(shield=True)
                        shield.__enter__()
    finally:
        if shield is not None:
            shield.__exit__(None, None, None)
    return cancelled


def _anyio_scope_cancelled() -> bool:
    """Whether the current task sits in a cancelled anyio cancel scope (anyio's public
    ``current_effective_deadline()`` is minus infinity there).  Only asked once a cancellation
    arrived, and only when anyio is loaded."""
    anyio = sys.modules.get("anyio")
    return anyio is not None and anyio.current_effective_deadline() == -math.inf


def _abandon(
    call: _Call,
    task: asyncio.Task[Any],
    pipeline: Coroutine[Any, Any, ToolResult],
    interrupt: BaseException,
) -> None:
    """A second interrupt (P7): abandon ``call`` and close its task's pipeline, not awaited."""
    call.abandon(interrupt)
    try:
        pipeline.close()
    except RuntimeError as closing:  # a body that ignores GeneratorExit too
        log.error("call %s: closing the abandoned call: %r", call.call_id, closing)
    task.cancel()  # its pipeline is closed: the task ends cancelled (owning), nothing more runs


def _message_of(cancelled: asyncio.CancelledError) -> str | None:
    return cancelled.args[0] if cancelled.args else None


def _structured(call: _Call) -> Generator[Any, None, ToolResult]:
    """Run ``call`` on trio: behind a shield, the scope's cancellation being the caller's abort
    (:func:`toolcancel.runtime.eventloop.shielded`)."""
    return shielded(call.run, call.task_cancelled).__await__()


class PendingCall(Coroutine[Any, Any, ToolResult]):
    """What :meth:`ToolRegistry.execute` returns: a call that has *entered*, as a coroutine.

    ``await`` it, or hand it to ``asyncio.create_task``/``TaskGroup.create_task``/``wait_for``:
    the pipeline (pre-execute onwards) runs in the task that first awaits it.  Until then the
    call is listed by :meth:`ToolRegistry.in_flight` (state ``pre_policy``), and a caller abort
    is seen at C1.  A task cancelled before it first ran the call cancels the call like any
    task cancellation (P2): it still publishes its one result.

    A pending call that is garbage-collected or closed without ever being awaited leaves the
    contract: no hook runs and nothing is published.  It is dropped from ``in_flight()`` and,
    unless it was closed explicitly, a ``RuntimeWarning`` names it, as for an unawaited
    coroutine.
    """

    __slots__ = ("_call", "_closed", "_driver")

    def __init__(self, call: _Call) -> None:
        self._call = call
        self._driver: Generator[Any, None, ToolResult] | None = None
        self._closed = False

    @property
    def call_id(self) -> str:
        return self._call.call_id

    @property
    def view(self) -> Execution:
        """The call's execution view (its ``state``, ``path``, ``call_signal``)."""
        return self._call.view

    @property
    def __name__(self) -> str:  # what asyncio shows for a task running this call
        return f"ToolRegistry.execute:{self._call.call_id}"

    def _start(
        self, cancelled: asyncio.CancelledError | None = None
    ) -> Generator[Any, None, ToolResult]:
        if self._driver is not None or self._closed:
            raise RuntimeError(
                f"call {self._call.call_id}: cannot await a call twice, or after close()"
            )
        try:  # the asyncio loop awaiting the call, if any: it wins over trio (on_trio())
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None and cancelled is None and on_trio():
            self._driver = driver = _structured(self._call)
        else:
            self._driver = driver = _guarded(self._call, cancelled, loop).__await__()
        return driver

    def __await__(self) -> Generator[Any, None, ToolResult]:
        return self._start()

    def send(self, value: Any) -> Any:
        driver = self._driver
        if driver is None:
            driver = self._start()
        return driver.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        driver = self._driver
        if driver is None:
            exc = typ if isinstance(typ, BaseException) else (typ() if val is None else val)
            if isinstance(exc, asyncio.CancelledError):  # the task was cancelled before it ran
                return self._start(exc).send(None)
            self._drop()
            raise exc
        if val is None and tb is None:
            return driver.throw(typ)
        return driver.throw(typ, val, tb)  # pragma: no cover - the deprecated signature

    def close(self) -> None:
        if self._driver is None:
            if not self._closed:
                self._closed = True
                self._drop()
            return
        self._driver.close()

    def _drop(self, logged: bool = True) -> None:
        call = self._call
        calls = call.plan.calls
        if call.state != "materialized" and call in calls:
            calls.leave(call)
            call.detach()
            if logged:  # else the RuntimeWarning of __del__ is its one report
                log.warning(
                    "call %s (%s) entered but was never awaited: nothing ran, nothing was "
                    "published",
                    call.call_id,
                    call.name,
                )

    def __del__(self) -> None:
        if self._driver is None and not self._closed:
            call = self._call
            warnings.warn(
                f"call {call.call_id} ({call.name!r}) was entered by execute() but never awaited: "
                "nothing ran, nothing was published",
                RuntimeWarning,
                stacklevel=2,
                source=self,
            )
            self._drop(logged=False)

    def __repr__(self) -> str:
        return f"<PendingCall {self._call.call_id} {self._call.name!r} in {self._call.state}>"
