"""The registry calls one integration object started: each published result kept, even for a
caller that gave up, and a way to wait for all of them.

A runtime cancels a tool by cancelling the task running it, and then may or may not wait (an
MCP server's request settles when its handler ends; an OpenAI Agents SDK run ends at once and
detaches the tool).  The registry's binding turns such a cancellation into the call's caller
aborting and re-raises it only after publishing (Python binding P2) -- but a re-raise carries no
result.  Here the call runs in a task of its own whose result is the published one; the task
awaiting it turns a cancellation into its caller signal aborting, keeps waiting (quiescence),
records what was published, and only then re-raises.  :meth:`Calls.settled` waits for the calls
whose runtime stopped waiting.  Every integration module builds on it; it imports no runtime.
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..contract.results import ToolResult
from ..runtime.signals import AbortController
from ..runtime.toolregistry import ToolRegistry


@dataclass(frozen=True)
class Published:
    """One call's published result: the runtime's id for the call, the tool, the frozen result."""

    call_id: str
    tool: str
    result: ToolResult


def _anyio_shield() -> Any:
    """Under a cancelled anyio cancel scope, which cancels the waiting task again at every turn
    of the loop, a shield for the rest of the wait (anyio's public ``CancelScope``); else None."""
    anyio = sys.modules.get("anyio")
    if anyio is None or anyio.current_effective_deadline() != -math.inf:
        return None
    return anyio.CancelScope(shield=True)


class Calls:
    """The calls made through ``registry`` by one integration object (one run, one server).

    Invariants: ``published`` holds, in publication order, every call entered here that has
    published; ``_running`` the tasks of those that have not; ``_callers`` the caller signal of
    each; after :meth:`abort` (``_aborted``) a call enters with its caller signal aborted, so
    no body starts."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry
        self.published: list[Published] = []
        self._running: set[asyncio.Task[ToolResult]] = set()
        self._callers: set[AbortController] = set()
        self._aborted = False

    def abort(self) -> None:
        """The caller of every call gives up: each call in flight aborts, and one entering later
        enters aborted (its body never starts)."""
        self._aborted = True
        for caller in list(self._callers):
            caller.abort()

    def result_of(self, call_id: str) -> ToolResult | None:
        """The latest result published for the runtime's call ``call_id``, if any."""
        return next((p.result for p in reversed(self.published) if p.call_id == call_id), None)

    async def settled(self) -> list[Published]:
        """Wait until every call entered here has published -- however the runtime ended:
        a cancelled run may have left its tools running -- and return what each published, in
        order.  A further cancellation of the waiting task only waits again; the first is
        raised after."""
        cancelled: asyncio.CancelledError | None = None
        while self._running:
            try:
                await asyncio.wait(set(self._running))
            except asyncio.CancelledError as exc:
                cancelled = cancelled or exc
        if cancelled is not None:
            raise cancelled
        return list(self.published)

    async def enter(
        self,
        name: str,
        arguments: Any,
        call_id: str,
        setup: Callable[[], Any] | None = None,
        watch: Callable[[AbortController], Awaitable[None]] | None = None,
    ) -> tuple[ToolResult, asyncio.CancelledError | None]:
        """Run one registry call of tool ``name`` in a task of its own and await its published
        result, which is recorded before this returns.  A cancellation of the awaiting task --
        the runtime cancelling its tool -- aborts the call's caller signal; the call is still
        awaited to its result, and the cancellation is handed back (the caller re-raises it or,
        where the runtime has a place for a cancelled call's answer, answers).

        ``setup`` runs just before the call's task is made (a context variable set there is
        the body's: a task copies its creator's context) and its return is undone after
        (``reset``).  ``watch``, if given, runs beside the call until it publishes: a way for
        the runtime's own cancellation flag to abort the caller signal."""
        controller = AbortController()
        if self._aborted:
            controller.abort()
        undo = setup() if setup is not None else None
        try:
            task = asyncio.ensure_future(
                self.registry.execute(name, arguments, signal=controller.signal)
            )
        finally:
            if undo is not None:
                undo()
        self._running.add(task)
        self._callers.add(controller)
        watcher = asyncio.ensure_future(watch(controller)) if watch is not None else None
        cancelled: asyncio.CancelledError | None = None
        shield: Any = None
        try:
            while not task.done():
                try:
                    await asyncio.wait((task,))
                except asyncio.CancelledError as exc:
                    if cancelled is None:
                        cancelled = exc
                        controller.abort()
                        shield = _anyio_shield()
                        if shield is not None:
                            shield.__enter__()
        finally:
            if shield is not None:
                shield.__exit__(None, None, None)
            if watcher is not None:
                watcher.cancel()
            if task.done():
                self._running.discard(task)
                self._callers.discard(controller)
                if not task.cancelled() and task.exception() is None:
                    self.published.append(Published(call_id, name, task.result()))
        return task.result(), cancelled
