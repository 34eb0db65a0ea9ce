"""One registry at a runtime's tool boundary: each tool call the runtime makes, a registry call.

The base of every integration (pydantic-ai, LangGraph, the OpenAI Agents SDK, MCP).  The runtime
hands its tool call -- the code it would have run, as an awaitable factory ``run`` -- to
:meth:`Boundary.enter`, which makes it the body of a call of the :class:`~toolcancel.ToolRegistry`,
awaited in the runtime's own task: the body runs ``run()`` under :func:`~toolcancel.cancellable`,
so the call's signal cancels the runtime's tool call and waits for it to finish, and the
registry publishes exactly one result.  The cancellation of the runtime's task is the call's
caller aborting (the registry's binding, P2): the call is still awaited to its result, then
the cancellation is handed back -- with the result, which a re-raise alone cannot carry -- for
the integration to re-raise or, where the runtime has a place for a cancelled call's answer, to
answer with.  :class:`Published` then says what the runtime gets back: the runtime's own value
or exception when the registry published exactly what the body produced (a success left alone,
a failure that survived), else the registry's result (a late success replaced by ABORTED, a
body that never started, a result that could not be published) in the runtime's own shape.

Nothing here runs per call that the contract does not ask for: no task of its own (the
registry's binding already runs the call in one), one caller signal (the runtime's cancellation,
:meth:`Boundary.abort`), one observer that records the publication, and a waiter only for a
program that asks to wait (:meth:`Boundary.settled`, :meth:`Boundary.settled_all`).

Boundaries may share a registry (the OpenAI Agents SDK's integration makes one per run, and
one registry may serve many runs): the registry holds one body per tool name and tells its
observers every publication, so the body and the observer are the registry's (:class:`_Index`,
one per registry), and each call is routed to the boundary it entered through.

Invariants: a call is in :attr:`Boundary.published` (by the runtime's call id) and, for an
``ordered`` boundary, :attr:`Boundary.in_order` from its publication on, which is after its body
settled (R27);
``_running`` holds exactly the calls entered here that have not published, each with its caller
controller, and the registry's index holds them too, by the same registry call id; after
:meth:`Boundary.abort` a call enters with its caller signal aborted, so no body starts.  It
imports no runtime.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..contract.results import ToolOutput, ToolResult
from ..runtime.cooperate import cancellable
from ..runtime.execution import Execution
from ..runtime.signals import AbortController, AbortError
from ..runtime.toolregistry import ToolRegistry

Run = Callable[[], Awaitable[Any]]
"""The runtime's own tool call, not yet started: what the registry's body awaits."""
Output = Callable[[Any], ToolOutput | list[Any]]
"""What the registry is told the runtime's tool call returned (content blocks and meta); raises
for a value that is the tool's failure (an error message the runtime made of an exception)."""
Watch = Callable[[AbortController], Awaitable[None]]
"""Runs beside the call until it publishes: a way for the runtime's own cancellation flag to
abort the call's caller signal."""


class Published:
    """What one call published, and what the runtime's tool call itself did (read-only).

    ``call_id`` is the runtime's id for the call, ``tool`` its name, ``result`` the frozen
    result.  ``returned``: the runtime's tool call returned ``value``; ``raised``: its failure
    (what it raised, or what ``output`` made of its value).  :attr:`own` says whether that is
    what the registry published.

    One is made per call, so it is a slotted class with read-only properties rather than a
    frozen dataclass, whose ``__init__`` (``object.__setattr__`` per field) took 2.9 us of
    each call on 3.13; this one takes 0.7 us."""

    __slots__ = ("_call_id", "_out", "_raised", "_result", "_returned", "_thrown", "_tool",
                 "_value")  # fmt: skip

    def __init__(
        self,
        call_id: str,
        tool: str,
        result: ToolResult,
        returned: bool = False,
        value: Any = None,
        raised: BaseException | None = None,
        out: Any = None,
        thrown: Callable[[BaseException], ToolResult] | None = None,
    ) -> None:
        self._call_id = call_id
        self._tool = tool
        self._result = result
        self._returned = returned
        self._value = value
        self._raised = raised
        self._out = out  # what the registry was told the body returned (``output``'s answer)
        self._thrown = thrown  # how the registry makes a result of a failure (results.thrown)

    @property
    def call_id(self) -> str:
        """The runtime's id for the call."""
        return self._call_id

    @property
    def tool(self) -> str:
        """The tool's name."""
        return self._tool

    @property
    def result(self) -> ToolResult:
        """The frozen result the registry published."""
        return self._result

    @property
    def returned(self) -> bool:
        """Whether the runtime's tool call returned (its value is :attr:`value`)."""
        return self._returned

    @property
    def value(self) -> Any:
        """What the runtime's tool call returned, if it did."""
        return self._value

    @property
    def raised(self) -> BaseException | None:
        """The runtime's tool call's failure: what it raised, or what ``output`` made of its
        value."""
        return self._raised

    @property
    def own(self) -> bool:
        """Whether the registry published exactly what the body produced: then ``value`` (a
        return) or ``raised`` (a failure that survived) is the runtime's own object, to hand
        back unchanged; otherwise the integration answers with ``result``.  Worked out when
        asked (an integration that never asks pays nothing for it)."""
        result = self._result
        if self._returned and self._raised is None and not result.is_error:  # untouched?
            out = self._out
            content, meta = (out.content, out.meta) if isinstance(out, ToolOutput) else (out, None)
            return tuple(result.content) == tuple(content) and result.meta == meta
        if self._raised is not None and result.is_error and self._thrown is not None:
            made = self._thrown(self._raised)  # the body's failure survived?
            return made.content == result.content and made.error == result.error
        return False

    def __repr__(self) -> str:
        return (f"Published(call_id={self._call_id!r}, tool={self._tool!r}, "
                f"result={self._result!r}, returned={self._returned!r}, value={self._value!r}, "
                f"raised={self._raised!r})")  # fmt: skip


def _unchanged(value: Any) -> Any:
    return value


@dataclass(slots=True)
class _Running:
    boundary: Boundary
    key: str
    name: str
    run: Run | None
    output: Output
    context: Any
    caller: AbortController
    value: Any = None
    out: Any = None
    returned: bool = False
    raised: BaseException | None = None
    published: Published | None = None


class _Index:
    """The calls running through every boundary over one registry, by the registry's call id;
    the body registered for their tools and the observer told of their publications.  It holds
    no registry and no boundary but a running call's (the registry holds it)."""

    __slots__ = ("running",)

    def __init__(self) -> None:
        self.running: dict[str, _Running] = {}

    def context(self, view: Execution) -> Any:
        running = self.running.get(view.call_id)
        return None if running is None else running.context

    def observe(self, view: Execution, result: ToolResult) -> None:
        """The registry published a result: hand it to the boundary of the call, if ours."""
        running = self.running.pop(view.call_id, None)
        if running is not None:
            running.boundary._publish(view.call_id, running, result)

    async def body(self, arguments: Any, view: Execution) -> Any:
        """Every tool's registry body: the runtime's tool call, awaited under the call's signal
        (:func:`~toolcancel.cancellable`); what it did is kept for :class:`Published`."""
        del arguments  # the runtime's call holds its own (validated) arguments
        running = self.running[view.call_id]
        assert running.run is not None  # registered only for a call with its run
        running.value, running.out, running.returned, running.raised = None, None, False, None
        try:
            value = await cancellable(view, running.run())
        except AbortError:  # the signal stopped it: not the tool's own failure
            raise
        except Exception as exc:  # the tool's own failure
            running.raised = exc
            raise
        running.value, running.returned = value, True
        try:
            running.out = running.output(value)
        except Exception as exc:  # a value that is the tool's failure (an error message)
            running.raised = exc
            raise
        return running.out


_INDEXES: weakref.WeakKeyDictionary[ToolRegistry, _Index] = weakref.WeakKeyDictionary()


def _index(registry: ToolRegistry) -> _Index:
    """``registry``'s index, made (and its observer added) by the first boundary over it."""
    index = _INDEXES.get(registry)
    if index is None:
        index = _INDEXES[registry] = _Index()
        registry.add_observer(index.observe)
    return index


def context_of(registry: ToolRegistry) -> Callable[[Execution], Any]:
    """:meth:`Boundary.context` for every boundary over ``registry``: for a hook installed once
    per registry and shared by its boundaries, which must hold none of them (a run's)."""
    return _index(registry).context


class Boundary:
    """A :class:`~toolcancel.ToolRegistry` at one runtime's tool boundary (one run, one node,
    one server: whatever one integration object serves).

    ``registry``: the caller's (its hooks, wrappers and observers apply to every tool call the
    runtime makes; the boundary registers one body per tool name the runtime calls, so the
    registry must hold no tool of those names), or a new one of the ``revision``.  ``ordered``:
    keep :attr:`in_order` too, for a face that lists the calls (:class:`Calls`); a boundary
    whose program reads its calls by id (pydantic-ai's, LangGraph's) keeps no second record of
    each call, which clearing :attr:`published` would leave behind.
    """

    def __init__(
        self, registry: ToolRegistry | None = None, *, revision: str = "seed", ordered: bool = True
    ) -> None:
        self.registry = registry if registry is not None else ToolRegistry(revision=revision)
        self.published: dict[str, Published] = {}
        """The runtime's call id -> what that call published last (kept until :meth:`forget`)."""
        self.in_order: list[Published] = []
        """What every call published, in publication order (kept until :meth:`forget`; always
        empty for a boundary made with ``ordered=False``)."""
        self._ordered = ordered
        self._running: dict[str, _Running] = {}  # the registry's call id -> the runtime's call
        self._waiting: dict[str, asyncio.Future[Published]] = {}  # settled(key) before it published
        self._idle: asyncio.Future[None] | None = None  # settled_all() while calls run
        self._aborted = False
        self._index = _index(self.registry)
        self._thrown = self.registry.results.thrown  # for Published.own

    def register(self, name: str, **definition: Any) -> None:
        """Register tool ``name`` in the registry with this boundary's body and ``definition``
        (:meth:`~toolcancel.ToolRegistry.register`'s keywords), for an integration that knows
        a tool's description or budget before its first call; :meth:`enter` registers the rest."""
        self.registry.register(name, self._index.body, **definition)

    async def enter(
        self,
        name: str,
        arguments: Any,
        key: str,
        run: Run | None = None,
        output: Output = _unchanged,
        *,
        known: bool = True,
        context: Any = None,
        watch: Watch | None = None,
    ) -> tuple[Published, asyncio.CancelledError | None]:
        """Make the runtime's tool call ``run`` (a call of tool ``name`` with ``arguments``,
        which the runtime calls ``key``) a call of the registry; return what it published and
        the cancellation of the awaiting task, if one came.

        A tool the runtime does not know (``known`` false), or a call without ``run``, is not
        registered: the registry answers it with its own body of that name, if it holds one,
        else as an unknown tool (R6).  ``context`` is what the registry's hooks of this
        integration read of the call (:meth:`context`); ``watch`` is a :data:`Watch`.  A
        cancellation of the awaiting task aborts the call's caller; the call is awaited to its
        result all the same.  A second interrupt abandons the call unpublished (P7): that is
        raised."""
        registry = self.registry
        index = self._index
        if run is not None and known and registry.definition(name) is None:
            registry.register(name, index.body)
        caller = AbortController()
        if self._aborted:
            caller.abort()
        pending = registry.execute(name, arguments, signal=caller.signal)
        call_id = pending.call_id
        running = _Running(self, key, name, run, output, context, caller)
        self._running[call_id] = index.running[call_id] = running
        watcher: asyncio.Future[None] | None = None
        cancelled: asyncio.CancelledError | None = None
        try:
            if watch is not None:
                watcher = asyncio.ensure_future(watch(caller))
            await pending
        except asyncio.CancelledError as exc:  # published first (P2), unless abandoned (P7)
            if running.published is None:
                raise
            cancelled = exc
        finally:
            if watcher is not None:
                watcher.cancel()
            if self._running.pop(call_id, None) is not None:
                index.running.pop(call_id, None)
                self._wake_idle()  # never published (abandoned): not waited for any more
        published = running.published
        assert published is not None  # every publication is observed (R31)
        return published, cancelled

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
        """:meth:`enter`, raising the awaiting task's cancellation -- once the call published,
        as the binding does (P2): :attr:`published` and :meth:`settled` have the result."""
        published, cancelled = await self.enter(
            name, arguments, key, run, output, known=known, context=context
        )
        if cancelled is not None:
            raise cancelled
        return published

    def context(self, view: Execution) -> Any:
        """The ``context`` the runtime's call behind ``view`` was made with (``None`` for a call
        of the registry that no runtime made through a boundary; a call through another boundary
        over the same registry answers with its own: :func:`context_of`)."""
        return self._index.context(view)

    def abort(self) -> None:
        """The caller of every call gives up: each call in flight aborts, and one entering later
        enters aborted (its body never starts)."""
        self._aborted = True
        for running in list(self._running.values()):
            running.caller.abort()

    def result_of(self, key: str) -> ToolResult | None:
        """The latest result published for the runtime's call ``key``, if any."""
        found = self.published.get(key)
        return None if found is None else found.result

    def _publish(self, call_id: str, running: _Running, result: ToolResult) -> None:
        """The registry published ``result`` for a call entered here: record it."""
        del self._running[call_id]
        key = running.key
        published = running.published = Published(
            key, running.name, result, running.returned, running.value, running.raised,
            running.out, self._thrown,
        )  # fmt: skip
        self.published[key] = published
        if self._ordered:
            self.in_order.append(published)
        if self._waiting:
            waiter = self._waiting.pop(key, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(published)
        if self._idle is not None:
            self._wake_idle()

    def _wake_idle(self) -> None:
        if not self._running and self._idle is not None and not self._idle.done():
            self._idle.set_result(None)

    async def settled(self, key: str) -> Published:
        """Wait until the runtime's call ``key`` has published (its body settled first) and
        return what it published: for a program whose runtime ended the run before its tool
        call stopped, or that wants the call's result after cancelling the run."""
        found = self.published.get(key)
        if found is not None:
            return found
        waiter = self._waiting.get(key)
        if waiter is None:
            waiter = self._waiting[key] = asyncio.get_running_loop().create_future()
        return await asyncio.shield(waiter)

    async def settled_all(self) -> list[Published]:
        """Wait until every call entered here has published -- however the runtime ended: a
        cancelled run may have left its tools running -- and return what each published, in
        order (:attr:`in_order`).  A further cancellation of the waiting task only waits again;
        the first is raised after."""
        cancelled: asyncio.CancelledError | None = None
        while self._running:
            if self._idle is None or self._idle.done():
                self._idle = asyncio.get_running_loop().create_future()
            try:
                await asyncio.shield(self._idle)
            except asyncio.CancelledError as exc:
                cancelled = cancelled or exc
        if cancelled is not None:
            raise cancelled
        return list(self.in_order)

    def forget(self, key: str) -> None:
        """Drop what the runtime's call ``key`` published (a long-lived boundary's bookkeeping)."""
        if self.published.pop(key, None) is not None:
            self.in_order = [p for p in self.in_order if p.call_id != key]
        self._waiting.pop(key, None)


class Calls:
    """The calls one integration object (one run, one server) makes through ``registry``, in
    order: the face of a :class:`Boundary` that the OpenAI Agents SDK's and MCP's integrations
    show their users.

    ``published`` holds what each call published, in publication order (:class:`Published`,
    its ``call_id`` the runtime's); :meth:`result_of` the latest for a call id; :meth:`abort`
    gives up every call; :meth:`settled` waits for all of them."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.boundary = Boundary(registry)
        self.registry = registry

    @property
    def published(self) -> list[Published]:
        """What every call published, in publication order."""
        return self.boundary.in_order

    def abort(self) -> None:
        """The caller of every call gives up: each call in flight aborts, and one entering later
        enters aborted (its body never starts)."""
        self.boundary.abort()

    def result_of(self, call_id: str) -> ToolResult | None:
        """The latest result published for the runtime's call ``call_id``, if any."""
        return self.boundary.result_of(call_id)

    async def settled(self) -> list[Published]:
        """:meth:`Boundary.settled_all`: every call entered here published, in order."""
        return await self.boundary.settled_all()

    async def enter(
        self,
        name: str,
        arguments: Any,
        call_id: str,
    ) -> tuple[ToolResult, asyncio.CancelledError | None]:
        """One registry call of tool ``name`` without a runtime's call to run (the registry
        answers with its own body of that name, or as an unknown tool):
        :meth:`Boundary.enter`'s result and the awaiting task's cancellation, if one came."""
        published, cancelled = await self.boundary.enter(name, arguments, call_id)
        return published.result, cancelled
