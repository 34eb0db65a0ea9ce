"""The minimal pipeline: the contract's guarantees for one call, without the machine.

The per-call benchmark (``test_overhead.py``, ``bench/run.py``) divides the registry's cost by
two baselines: a bare ``await asyncio.create_task(body())``, which keeps no guarantee, and this
pipeline, the least plain Python that keeps the guarantees a caller relies on:

* entry is synchronous: the arguments are snapshotted (deep-frozen) and the caller's signal C is
  captured when ``execute()`` is called, before anything awaits;
* no body starts after a live cancellation: C is read after pre-execute (C1) and before the body
  together with the slot (C2);
* a wrapper can replace the slot but never detach the caller: the body's signal is C itself when
  the slot is C, else a fused signal that aborts with either (R21);
* a started body is awaited, never raced; a late success is published as ``ABORTED`` (C3, C4)
  and a failure survives;
* the call runs in a task of its own: cancelling the task that awaits it aborts the call's
  signal, the call still runs to its one result, and the ``CancelledError`` is raised after
  (Python binding P1, P2);
* exactly one frozen result, to every observer once and to the caller.

What it leaves out is what the registry adds beyond those: the path that explains a result, the
trace, ``in_flight()``, the approval seam, tool timeouts, retries' declared behaviours, the drain
warning, interrupts (P4, P7), trio, and every misuse check.  It uses the registry's signals
(:mod:`toolcancel.runtime.signals`), so both pipelines pay the same for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from functools import partial
from types import MappingProxyType
from typing import Any, NamedTuple

from toolcancel import AbortController, AbortSignal, Accept, Allow, Block, Deny

_EAGER: Any = getattr(asyncio, "eager_task_factory", None)


class Result(NamedTuple):
    """A frozen result: content blocks and an error code (``None``: a success)."""

    content: tuple[Any, ...]
    error: str | None = None


def freeze(value: Any) -> Any:
    """A deep-frozen copy of JSON-like data (mappings read-only, sequences tuples)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    raise TypeError(f"not JSON data: {type(value).__name__}")


def _aborted() -> Result:
    return Result(({"type": "text", "text": "Error: aborted"},), "ABORTED")


class View:
    """What hooks and the body see: the frozen arguments and the signal slot."""

    __slots__ = ("arguments", "signal")

    def __init__(self, arguments: Any, signal: AbortSignal) -> None:
        self.arguments = arguments
        self.signal = signal


class Pipeline:
    """Tools and hooks with the guarantees of the module docstring."""

    def __init__(self) -> None:
        self.tools: dict[str, Callable[..., Any]] = {}
        self.pre: list[Callable[..., Any]] = []
        self.around: list[Callable[..., Any]] = []
        self.post: list[Callable[..., Any]] = []
        self.observers: list[Callable[..., Any]] = []

    def register(self, name: str, body: Callable[..., Any]) -> None:
        self.tools[name] = body

    # the registry's names, so that the benchmark builds both with the same code
    def add_pre_execute(self, hook: Callable[..., Any]) -> None:
        self.pre.append(hook)

    def add_around(self, hook: Callable[..., Any]) -> None:
        self.around.append(hook)

    def add_post_execute(self, hook: Callable[..., Any]) -> None:
        self.post.append(hook)

    def add_observer(self, observer: Callable[..., Any]) -> None:
        self.observers.append(observer)

    def execute(
        self, name: str, arguments: Any, *, signal: AbortSignal
    ) -> Coroutine[Any, Any, Result]:
        """Enter the call now (snapshot, capture C); await what this returns for its result."""
        own = AbortController()  # the call's signal C: follows the caller's, and task cancellation
        follow = None
        if signal.aborted:
            own.abort(signal.reason)
        else:
            follow = partial(_follow, own)
            signal.add_listener(follow)
        view = View(freeze(arguments), own.signal)
        return self._owned(name, view, own, signal, follow)

    async def _owned(self, name: str, view: View, own: AbortController, given: AbortSignal,
                     follow: Any) -> Result:
        loop = asyncio.get_running_loop()
        call = self._run(name, view, own.signal)
        task = _EAGER(loop, call) if _EAGER is not None else loop.create_task(call)
        cancelled: asyncio.CancelledError | None = None
        while not task.done():
            waiter = loop.create_future()
            wake = partial(_wake, waiter)
            task.add_done_callback(wake)
            try:
                await waiter
            except asyncio.CancelledError as exc:  # the awaiting task: abort, run on (P1, P2)
                task.remove_done_callback(wake)
                cancelled = cancelled or exc
                own.abort("the task awaiting the call was cancelled")
        if follow is not None:
            given.remove_listener(follow)
        result: Result = task.result()
        for observer in self.observers:
            observer(view, result)
        if cancelled is not None:
            raise cancelled
        return result

    async def _run(self, name: str, view: View, caller: AbortSignal) -> Result:
        if caller.aborted:  # aborted at entry: nothing runs
            return _aborted()
        decision = await _waterfall(self.pre, (view,), _allow) if self.pre else _ALLOW
        if isinstance(decision, Deny):
            result = Result(({"type": "text", "text": decision.reason},), "DENIED")
        elif caller.aborted:  # C1
            result = _aborted()
        else:
            dispatch = partial(self._dispatch, name, view, caller)
            result = await _waterfall(self.around, (view,), dispatch) if self.around \
                else await dispatch()
        if self.post:
            decision = await _waterfall(self.post, (view, result), _accept)
            if isinstance(decision, Block):
                result = Result(freeze(decision.feedback), "BLOCKED")
            elif decision.content is not None:
                result = Result(freeze(decision.content), result.error)
        if result.error is None and caller.aborted:  # C4: a late success
            return _aborted()
        return result

    async def _dispatch(self, name: str, view: View, caller: AbortSignal) -> Result:
        slot = view.signal
        if caller.aborted or (slot is not None and slot.aborted):  # C2
            return _aborted()
        fused, links = caller, ()
        if slot is not caller and slot is not None:  # the body's signal aborts with either
            controller = AbortController()
            fused = controller.signal
            abort = partial(_fused_abort, controller)
            links = (caller, slot)
            for signal in links:
                signal.add_listener(abort)
        view.signal = fused
        try:
            value = await self.tools[name](view.arguments, view)
            result = Result(freeze(value))
        except Exception as exc:  # a failure survives
            result = Result(({"type": "text", "text": f"Error: {exc}"},), "FAILED")
        finally:
            for signal in links:
                signal.remove_listener(abort)
            view.signal = slot
        if result.error is None and caller.aborted:  # C3: a late success
            return _aborted()
        return result


def _waterfall(listeners: list[Callable[..., Any]], args: tuple[Any, ...],
               base: Callable[[], Any], i: int = 0) -> Any:
    if i == len(listeners):
        return base()
    return listeners[i](*args, partial(_waterfall, listeners, args, base, i + 1))


_ALLOW = Allow()
_ACCEPT = Accept()


async def _allow() -> Allow:
    return _ALLOW


async def _accept() -> Accept:
    return _ACCEPT


def _follow(own: AbortController, given: AbortSignal) -> None:
    own.abort(given.reason)


def _fused_abort(controller: AbortController, signal: AbortSignal) -> None:
    controller.abort(signal.reason)


def _wake(waiter: asyncio.Future[None], _: object) -> None:
    if not waiter.done():
        waiter.set_result(None)
