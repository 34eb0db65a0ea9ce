"""One registry at a runtime's tool boundary: the runtime's own tool call as a registry call.

What every integration shares.  The runtime hands its tool call -- the code it would have run,
as an awaitable factory -- to :meth:`Boundary.call`, which makes it the body of a call of the
:class:`~toolcancel.ToolRegistry`: the body runs under :func:`~toolcancel.cancellable`, so the
call's signal (which the cancellation of the task awaiting the call aborts, P2) cancels the
runtime's tool call and waits for it to finish; the registry publishes exactly one result.
:class:`Published` then says what the runtime gets back: the runtime's own value or exception
when the registry published exactly what the body produced (a success left alone, a failure
that survived), else the registry's result (a late success replaced by ABORTED, a body that
never started, a result that could not be published) for the integration to put in the
runtime's own shape.

Invariants: a call is in :attr:`Boundary.published` from its publication on, keyed by the
runtime's call id; :meth:`Boundary.settled` returns once that call published -- which is after
its body settled (R27) -- so a program whose runtime ended the run at once can wait for the
call's quiescence and read what it published.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..contract.results import ToolOutput, ToolResult
from ..runtime.cooperate import cancellable
from ..runtime.execution import Execution
from ..runtime.signals import AbortController
from ..runtime.toolregistry import ToolRegistry

Run = Callable[[], Awaitable[Any]]
"""The runtime's own tool call, not yet started: what the registry's body awaits."""
Output = Callable[[Any], ToolOutput | list[Any]]
"""What the registry is told the runtime's tool call returned (content blocks and meta); raises
for a value that is the tool's failure (an error message the runtime made of an exception)."""


@dataclass(frozen=True, slots=True)
class Published:
    """What one call published, and what the runtime's tool call itself did.

    ``own`` is true when the registry published exactly what the body produced: then ``value``
    (a return) or ``raised`` (a failure that survived) is the runtime's own object, handed back
    unchanged; otherwise the integration answers with ``result``."""

    result: ToolResult
    own: bool
    value: Any = None
    raised: BaseException | None = None


@dataclass(slots=True)
class _Running:
    run: Run
    output: Output
    context: Any = None
    value: Any = None
    out: Any = None  # what the registry was told the body returned
    returned: bool = False
    raised: BaseException | None = None


class Boundary:
    """A :class:`~toolcancel.ToolRegistry` at one runtime's tool boundary.

    ``registry``: the caller's (its hooks, wrappers and observers apply to every tool call the
    runtime makes; the boundary registers one body per tool name the runtime calls, so the
    registry must hold no tool of those names), or a new one of the ``revision``.
    """

    def __init__(self, registry: ToolRegistry | None = None, *, revision: str = "seed") -> None:
        self.registry = registry if registry is not None else ToolRegistry(revision=revision)
        self.published: dict[str, Published] = {}
        """The runtime's call id -> what that call published (kept until :meth:`forget`)."""
        self._running: dict[str, _Running] = {}  # the registry's call id -> the runtime's call
        self._done: dict[str, asyncio.Future[Published]] = {}  # the runtime's call id -> ...
        self._last: dict[str, ToolResult] = {}  # the registry's call id -> its result (P2)
        self.registry.add_observer(self._observe)

    async def call(
        self,
        name: str,
        arguments: Any,
        key: str,
        run: Run,
        output: Output,
        *,
        known: bool = True,
        context: Any = None,
    ) -> Published:
        """Make the runtime's tool call ``run`` (a call of tool ``name`` with ``arguments``,
        which the runtime calls ``key``) a call of the registry, and return what it published.
        A tool the runtime does not know (``known`` false) is not registered: the registry
        answers it as an unknown tool (R6) unless it holds one of that name.  ``context`` is
        what the registry's hooks of this integration read of the call (:meth:`context`).

        If the task awaiting this is cancelled, the call's signal aborts, ``run`` is cancelled
        and awaited to its end, the result is published -- and then ``CancelledError`` is
        raised, as the binding does (P2): :attr:`published` and :meth:`settled` have the result.
        """
        registry = self.registry
        if known and registry.definition(name) is None:
            registry.register(name, self._body)
        done = self._done.get(key)
        if done is None or done.done():
            done = self._done[key] = asyncio.get_running_loop().create_future()
        pending = registry.execute(name, arguments, signal=AbortController().signal)
        running = self._running[pending.call_id] = _Running(run, output, context)
        try:
            result = await pending
        except asyncio.CancelledError:  # published first (P2): the observer kept it
            kept = self._last.pop(pending.call_id, None)
            if kept is not None:  # (nothing if a second interrupt abandoned the call, P7)
                self._publish(key, done, running, kept)
            raise
        finally:
            del self._running[pending.call_id]
            self._last.pop(pending.call_id, None)
        return self._publish(key, done, running, result)

    def context(self, view: Execution) -> Any:
        """The ``context`` the runtime's call behind ``view`` was made with (``None`` for a call
        of the registry that no runtime made through this boundary)."""
        running = self._running.get(view.call_id)
        return None if running is None else running.context

    def _observe(self, view: Execution, result: ToolResult) -> None:
        if view.call_id in self._running:
            self._last[view.call_id] = result

    def _publish(
        self, key: str, done: asyncio.Future[Published], running: _Running, result: ToolResult
    ) -> Published:
        if running.returned and not result.is_error:  # the body's own success, untouched?
            out = running.out
            content, meta = (out.content, out.meta) if isinstance(out, ToolOutput) else (out, None)
            own = tuple(result.content) == tuple(content) and result.meta == meta
        elif running.raised is not None and result.is_error:  # the body's failure survived?
            made = self.registry.results.thrown(running.raised)
            own = made.content == result.content and made.error == result.error
        else:
            own = False
        published = Published(result, own, running.value, running.raised)
        self.published[key] = published
        if not done.done():
            done.set_result(published)
        self._done.pop(key, None)  # its waiters hold it; settled() reads published from now on
        return published

    async def _body(self, arguments: Any, view: Execution) -> Any:
        del arguments  # the runtime's call holds its own (validated) arguments
        running = self._running[view.call_id]
        running.returned, running.raised = False, None

        async def run() -> Any:
            try:
                return await running.run()
            except Exception as exc:  # the tool's own failure (never the abort's AbortError)
                running.raised = exc
                raise

        value = await cancellable(view, run())
        try:
            out = running.output(value)
        except Exception as exc:  # a value that is the tool's failure (an error message)
            running.value, running.raised = value, exc
            raise
        running.value, running.out, running.returned = value, out, True
        return out

    async def settled(self, key: str) -> Published:
        """Wait until the runtime's call ``key`` has published (its body settled first) and
        return what it published: for a program whose runtime ended the run before its tool
        call stopped, or that wants the call's result after cancelling the run."""
        found = self.published.get(key)
        if found is not None:
            return found
        done = self._done.get(key)
        if done is None:
            done = self._done[key] = asyncio.get_running_loop().create_future()
        return await asyncio.shield(done)

    def forget(self, key: str) -> None:
        """Drop what the runtime's call ``key`` published (a long-lived boundary's bookkeeping)."""
        self.published.pop(key, None)
        self._done.pop(key, None)
