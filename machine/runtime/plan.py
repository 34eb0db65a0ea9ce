"""A call's plan: everything of its registry a call reads, taken once at entry and frozen.

:class:`ToolRegistry` (:mod:`toolcancel.runtime.toolregistry`) owns the mutable things -- the hook
lists, the approval seam, the tools -- and hands each call a :class:`CallPlan` as it enters.  The
call (:mod:`toolcancel.runtime.stepping`, :mod:`toolcancel.runtime.driver`,
:mod:`toolcancel.runtime.binding`) reads that plan and nothing else of the registry, so:

* a hook added or removed while a call runs changes the calls that enter after it, never one in
  flight (a call's stages all see the registration it entered under);
* the call never reaches into the registry's private state, and the registry's types are not the
  call's: the registry imports the call, never the reverse;
* a plan is shared by every call that enters under the same registration: the registry makes a new
  one only after a change, so entry costs one attribute read.

Two things stay live, each behind one name: the tools (``definition``: the registry's public
lookup, asked at base dispatch, so a tool registered after entry is found there), and the calls in
flight (``calls``: :class:`CallsInFlight`, which the call enters at entry and leaves as it
publishes or is abandoned).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from ..contract.compiled import Node
from ..contract.loader import RevisionContract
from ..contract.results import Results
from ..contract.trace import TraceSink
from .hooks import (
    ApprovalSeam,
    AroundHook,
    Guard,
    Observer,
    PostHook,
    PreHook,
    StepTap,
    ToolDefinition,
)


class CallsInFlight:
    """The calls between entry and publication, oldest first (``ToolRegistry.in_flight()``).

    Invariant: a call is listed from its entry until it publishes its result, is abandoned (P7)
    or is dropped unawaited; :meth:`leave` is idempotent, so each of those ways out may call it.
    """

    __slots__ = ("_calls", "enter", "pop")

    def __init__(self) -> None:
        self._calls: dict[Any, None] = {}  # a dict: insertion order is entry order
        # List ``call`` (idempotent): the dict's own method, so entry pays no Python call.
        self.enter: Callable[[Any], object] = self._calls.setdefault
        # ``pop(call, None)`` is :meth:`leave` as the dict's own method, for publication, which
        # every call passes (no C callable pops with a default from one argument).
        self.pop: Callable[[Any, None], object] = self._calls.pop

    def leave(self, call: Any) -> None:
        self._calls.pop(call, None)

    def __contains__(self, call: object) -> bool:
        return call in self._calls

    def __iter__(self) -> Iterator[Any]:
        return iter(tuple(self._calls))

    def __len__(self) -> int:
        return len(self._calls)


class CallPlan(NamedTuple):
    """What a call reads of its registry, frozen at entry (the module docstring says why)."""

    table: RevisionContract
    """The contract revision the call's machine steps (:mod:`toolcancel.contract.compiled`)."""
    results: Results
    """The revision's result builders (its exact texts)."""
    pre: tuple[PreHook, ...]
    around: tuple[AroundHook, ...]
    post: tuple[PostHook, ...]
    guards: tuple[tuple[str | None, Guard], ...]
    """Each guard with the agent it is scoped to (``None``: every agent)."""
    observers: tuple[Observer, ...]
    approval: ApprovalSeam | None
    retry: str
    """The declared retry behaviour of a wrapper's second ``next()`` (D11)."""
    trace: TraceSink | None
    on_step: StepTap | None
    drain_warning: float | None
    """Seconds a body may drain before it is logged as not cooperating (P5); ``None``: never."""
    definition: Callable[[str, str | None], ToolDefinition | None]
    """The tool a name resolves to for an agent, asked at base dispatch (live)."""
    calls: CallsInFlight
    """The registry's calls in flight (live)."""
    starts: tuple[dict[str, Node], dict[str, Node]]
    """The start node of each call shape the plan leaves open, filled as calls enter: by whether
    an agent calls, then by the caller signal captured (:mod:`toolcancel.contract.compiled`)."""
