"""The tool registry's public face: tools, hooks, ``execute()`` and ``begin()``.

Outside the compiled group (setup.py's ``COMPILED`` says why).  Each call is a
:class:`toolcancel.runtime.driver._Call`, run in the task that awaits it by a
:class:`toolcancel.runtime.binding.PendingCall`; what it reads of the registry is the
:class:`~toolcancel.runtime.plan.CallPlan` the registry hands it at entry, made again only after
a registration changed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ..contract.core import revision_table
from ..contract.errors import InvalidBudget, RegistryUsageError
from ..contract.loader import Contract, RevisionContract
from ..contract.results import Results
from ..contract.trace import TraceSink, line_sink
from .binding import PendingCall
from .driver import _Call
from .eventloop import clock
from .execution import CALL_IDS
from .hooks import (
    ApprovalSeam,
    AroundHook,
    Guard,
    InFlight,
    Observer,
    PostHook,
    PreHook,
    StepTap,
    ToolBody,
    ToolDefinition,
)
from .plan import CallPlan, CallsInFlight
from .signals import AbortSignal

if TYPE_CHECKING:
    from .driver import StagedCall

DRAIN_WARNING: Final = 30.0
"""Default of ``ToolRegistry(drain_warning=...)``: seconds a body may run on after its signal
aborted before the registry logs it as not cooperating (P5)."""


def _visible(
    tools: Mapping[tuple[str, str | None], ToolDefinition], name: str, agent: str | None
) -> ToolDefinition | None:
    """The definition of ``name`` visible to ``agent`` in ``tools``: its own first, then the
    global one."""
    if agent is not None:
        found = tools.get((name, agent))
        if found is not None:
            return found
    return tools.get((name, None))


class _Own:
    """The default of ``execute(signal=...)``/``begin(signal=...)``: no signal given, so the call
    gets a caller signal of its own (Python binding P1)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<a caller signal of the call's own>"


OWN: Final = _Own()


class ToolRegistry:
    """Tools, hooks, and ``execute()`` under the cooperative, quiescent cancellation contract.

    ``revision`` chooses the contract revision (``"seed"`` or ``"revised"``).  ``on_step``, if
    given, is called synchronously after every transition any call takes, with the call's view
    and the step; tracers and the model checker use it (it costs one test when absent).

    ``trace``, if given, is called synchronously with every line of the canonical trace of every
    call (a fresh dict per line, :mod:`toolcancel.contract.trace`): the contract events the call's
    machine takes, and the observation events at the code points they describe.  Off, it costs one
    attribute test per emission point.  :class:`toolcancel.contract.trace.TraceRecorder` collects
    lines.

    ``drain_warning`` is a number of seconds (default :data:`DRAIN_WARNING`, ``None`` turns it
    off): a call whose body is still running that long after its signal aborted is logged once,
    as a warning naming the call and its state.  The registry keeps waiting -- it reports a body
    that does not cooperate, it never abandons it (only a second interrupt does, P7).

    ``retry`` is what an around wrapper's second ``next()`` does (CONTRACT.md D11): ``"reenter"``
    (the default: the rest of the chain runs again, every inner wrapper included), ``"cursor"``
    (the original's: the next listener not yet handed out, else the base dispatch) or
    ``"reject"`` (``next()`` raises :class:`RegistryUsageError`).

    A call's hooks, guards, observers and approval seam are those registered when it entered: a
    change while it runs applies to the calls that enter after it.  Tools are looked up when the
    call reaches its body.
    """

    def __init__(
        self,
        *,
        revision: str | None = None,
        contract: Contract | None = None,
        on_step: StepTap | None = None,
        trace: TraceSink | None = None,
        drain_warning: float | None = DRAIN_WARNING,
        retry: str | None = None,
    ) -> None:
        if drain_warning is not None and not (
            isinstance(drain_warning, (int, float)) and 0 <= drain_warning < math.inf
        ):
            raise RegistryUsageError(
                f"drain_warning is a number of seconds (or None), not {drain_warning!r}"
            )
        self._table: RevisionContract = revision_table(revision, contract)
        behaviours = self._table.contract.retry_names
        self._retry: str = self._table.contract.default_retry if retry is None else retry
        if self._retry not in behaviours:
            raise RegistryUsageError(
                f"retry must be one of {', '.join(map(repr, behaviours))}, not {retry!r}"
            )
        self._drain_warning = drain_warning
        info = self._table.contract.revision_info[self._table.name]
        self._signal_required = info.get("caller_signal") == "required"  # R40
        self._calls = CallsInFlight()  # between entry and publication
        self._on_step = on_step
        self._trace = None if trace is None else line_sink(trace)
        self._results = Results(self._table)
        self._tools: dict[tuple[str, str | None], ToolDefinition] = {}
        self._pre: list[PreHook] = []
        self._around: list[AroundHook] = []
        self._post: list[PostHook] = []
        self._guards: list[tuple[str | None, Guard]] = []
        self._observers: list[Observer] = []
        self._approval: ApprovalSeam | None = None
        self._plan: CallPlan | None = None  # the plan calls enter under; None after a change

    @property
    def revision(self) -> str:
        return self._table.name

    @property
    def retry(self) -> str:
        """The declared retry behaviour of around wrappers' ``next()`` (D11)."""
        return self._retry

    def in_flight(self) -> list[InFlight]:
        """Every call that has entered and not yet materialized, oldest first.

        Non-quiescence made visible: a call stuck in ``draining`` is a body ignoring its signal.
        """
        now = clock()()
        return [call.status(now) for call in self._calls]

    @property
    def contract(self) -> RevisionContract:
        return self._table

    @property
    def results(self) -> Results:
        """The result builders of this registry's revision (exact contract texts)."""
        return self._results

    # -- registration ------------------------------------------------------------------------

    def register(
        self,
        name: str,
        body: ToolBody,
        *,
        timeout_ms: float | None = None,
        agent: str | None = None,
        description: str = "",
        parallel_safe: bool = False,
        input_schema: Mapping[str, Any] | None = None,
    ) -> ToolDefinition:
        """Register a tool body, visible to every agent, or only to ``agent``.

        A declared ``timeout_ms`` must be a positive finite number of milliseconds (R32): a
        number that is not raises :class:`InvalidBudget` (a ``ValueError``, and the ``TypeError``
        R32 asks for), anything else ``TypeError``.
        ``parallel_safe=True`` lets a :class:`~toolcancel.TurnScheduler` overlap its calls.
        """
        if timeout_ms is not None:
            if isinstance(timeout_ms, bool):
                raise InvalidBudget(
                    f'tool "{name}" timeout_ms must be a positive finite number '
                    f"(milliseconds), not {timeout_ms!r}"
                )
            if not isinstance(timeout_ms, (int, float)):
                raise TypeError(
                    f"tool {name!r}: timeout_ms must be a number of milliseconds or None, "
                    f"not {type(timeout_ms).__name__}"
                )
            if not math.isfinite(timeout_ms) or timeout_ms <= 0:
                raise InvalidBudget(
                    f'tool "{name}" timeout_ms must be a positive finite number '
                    f"(milliseconds), not {timeout_ms!r}"
                )
        if not callable(body):
            raise TypeError(f"tool {name!r}: the body must be an async callable")
        if input_schema is not None and not isinstance(input_schema, Mapping):
            raise TypeError(
                f"tool {name!r}: input_schema must be a JSON Schema object (a mapping), "
                f"not {type(input_schema).__name__}"
            )
        definition = ToolDefinition(
            name, body, timeout_ms, agent, description, bool(parallel_safe), input_schema
        )
        self._tools[(name, agent)] = definition
        return definition

    def tool(
        self,
        name: str | None = None,
        *,
        timeout_ms: float | None = None,
        agent: str | None = None,
        description: str = "",
        parallel_safe: bool = False,
        input_schema: Mapping[str, Any] | None = None,
    ) -> Callable[[ToolBody], ToolBody]:
        """Decorator form of :meth:`register` (the same options; the name defaults to the
        function's)."""

        def decorate(body: ToolBody) -> ToolBody:
            self.register(
                name or body.__name__,
                body,
                timeout_ms=timeout_ms,
                agent=agent,
                description=description,
                parallel_safe=parallel_safe,
                input_schema=input_schema,
            )
            return body

        return decorate

    def unregister(self, name: str, *, agent: str | None = None) -> None:
        self._tools.pop((name, agent), None)

    def definitions(self, agent: str | None = None) -> list[ToolDefinition]:
        """Every tool ``agent`` can call (its own hide global ones of the same name), in
        registration order."""
        names = dict.fromkeys(n for n, owner in self._tools if owner is None or owner == agent)
        return [d for n in names if (d := self.definition(n, agent)) is not None]

    def definition(self, name: str, agent: str | None = None) -> ToolDefinition | None:
        """The definition visible to ``agent`` (its own first, then the global one)."""
        return _visible(self._tools, name, agent)

    def add_pre_execute(self, hook: PreHook, *, prepend: bool = False) -> Callable[[], None]:
        """Add ``async pre(call, next) -> Allow() | Deny(reason) | Ask(reason=None)`` to the
        pre-execute waterfall (R10): hooks run in registration order (``prepend``: first), each
        deciding itself or returning ``await next()``, the later hooks' decision (``Allow()``
        after the last).  ``Ask`` goes to the approval seam, which needs a call with an agent
        (``execute(..., agent=...)``); without one it is a denial (R5).  Returns a function that
        removes the hook."""
        return self._add(self._pre, hook, prepend)

    def add_around(self, hook: AroundHook, *, prepend: bool = False) -> Callable[[], None]:
        """Add ``async around(call, next) -> ToolResult`` around the body (R16): ``await next()``
        runs the inner wrappers and the body and returns their normalized result; a wrapper may
        return its own result instead (a short-circuit), call ``next()`` again (a retry, D11),
        or replace ``call.signal`` for what it wraps (a deadline).  A raise is a FINAL error.
        The first registered is outermost (``prepend``: the new outermost).  Returns a function
        that removes the hook."""
        return self._add(self._around, hook, prepend)

    def add_post_execute(self, hook: PostHook, *, prepend: bool = False) -> Callable[[], None]:
        """Add ``async post(call, result, next) -> Accept(...) | Block(feedback)`` to the
        post-execute waterfall (R7, R20): it sees every post-route result, denials and ABORTED
        included, and decides itself or returns ``await next()`` (``Accept()`` after the last).
        A raise is a FINAL error.  Returns a function that removes the hook."""
        return self._add(self._post, hook, prepend)

    def add_guard(self, guard: Guard, *, agent: str | None = None) -> Callable[[], None]:
        """Add ``guard(call) -> str | None``, synchronous, run only once pre-execute and any
        approval allowed the call (R15): a string denies with that reason, ``None`` passes.
        Global guards run first, in registration order, then those of the call's ``agent``.
        Returns a function that removes the guard."""
        return self._add(self._guards, (agent, guard), False)

    def add_observer(self, observer: Observer) -> Callable[[], None]:
        """Add ``observer(call, result)`` (plain or ``async``): called exactly once per call,
        after materialization, with the frozen result ``execute()`` returns (R31).  It cannot
        change the result; a failure is logged and contained.  Returns a function that removes
        the observer."""
        return self._add(self._observers, observer, False)

    def set_approval(self, seam: ApprovalSeam | None) -> None:
        """Mount (or with ``None`` unmount) the approval seam that answers ``Ask``."""
        self._approval = seam
        self._plan = None

    # -- execution ---------------------------------------------------------------------------

    def execute(
        self,
        name: str,
        arguments: Any = None,
        *,
        signal: AbortSignal | _Own | None = OWN,
        call_id: str | None = None,
        agent: str | None = None,
        parent: str | None = None,
    ) -> PendingCall:
        """Enter one tool call now; await what this returns for its frozen result.

        Entry (CONTRACT.md R11, Python binding P0) happens here, synchronously, as in the
        original: the arguments are snapshotted, the caller signal is captured and the call is
        listed in :meth:`in_flight`.  So ``task = create_task(registry.execute(...));
        caller.abort()`` aborts a call that has entered: it is seen at C1.  The returned
        :class:`PendingCall` is a coroutine (``await`` it, or hand it to ``create_task``);
        pre-execute, the body and the rest run when it is first awaited.

        If the task awaiting it is cancelled, the call's signal aborts (the reason is a
        :class:`~toolcancel.TaskCancelled`), the call runs on to its one published result -- a
        started body is still awaited -- and only then is ``CancelledError`` re-raised.

        ``signal``: the caller's signal.  Left out, the call gets a caller signal of its own
        (seed; the revised contract requires yours, R40), which only task cancellation aborts:
        giving up on the call is then a caller abort like any other, so no body starts after it
        and a late success is published as ABORTED.  ``signal=None`` explicitly asks for a call
        without a caller signal (R26): task cancellation then tells only ``call.call_signal``.
        """
        return PendingCall(self._enter(name, arguments, signal, call_id, agent, parent))

    def begin(
        self,
        name: str,
        arguments: Any = None,
        *,
        signal: AbortSignal | _Own | None = OWN,
        call_id: str | None = None,
        agent: str | None = None,
        parent: str | None = None,
    ) -> StagedCall:
        """A call split into the scheduler's three stages (prepare, dispatch, finalize).

        Entry happens here, synchronously, exactly as in :meth:`execute` (which is
        ``begin(...)`` awaited through ``run()``).  A turn scheduler uses the stages to run pre-
        and post-execute one call at a time in model order while bodies overlap.  A begun call
        is listed in :meth:`in_flight` until ``finalize()`` publishes it: drive it to the end.
        """
        return self._enter(name, arguments, signal, call_id, agent, parent)

    def _enter(
        self,
        name: str,
        arguments: Any,
        signal: AbortSignal | _Own | None,
        call_id: str | None,
        agent: str | None,
        parent: str | None,
    ) -> _Call:
        own = signal is OWN
        if own:
            signal = None
        elif signal is not None and not isinstance(signal, AbortSignal):
            raise RegistryUsageError(f"signal must be an AbortSignal, not {type(signal).__name__}")
        if signal is None and self._signal_required:
            raise RegistryUsageError(
                f"the {self.revision} contract requires a caller signal (R40): pass "
                "signal=AbortController().signal if the call is never cancelled"
            )
        call = _Call(
            self._plan or self._new_plan(),
            name,
            {} if arguments is None else arguments,
            signal,
            call_id or f"call-{next(CALL_IDS)}",
            agent,
            parent,
            own,
        )
        call.enter()
        return call

    def _new_plan(self) -> CallPlan:
        """The plan calls enter under until the next change of registration (plan.py)."""
        self._plan = CallPlan(
            self._table,
            self._results,
            tuple(self._pre),
            tuple(self._around),
            tuple(self._post),
            tuple(self._guards),
            tuple(self._observers),
            self._approval,
            self._retry,
            self._trace,
            self._on_step,
            self._drain_warning,
            self._lookup(),
            self._calls,
            ({}, {}),
        )
        return self._plan

    def _lookup(self) -> Callable[[str, str | None], ToolDefinition | None]:
        """The plan's live tool lookup: this registry's own ``definition`` when a subclass
        overrides it, else the same lookup over the tools table.  The plan is the registry's,
        so a bound method there would make every registry a reference cycle, freed only by the
        cycle collector (the model checker builds one per schedule)."""
        if type(self).definition is not _DEFINITION:  # a subclass's, or patched
            return self.definition
        return functools.partial(_visible, self._tools)

    def _add(self, items: list[Any], item: Any, prepend: bool) -> Callable[[], None]:
        """Add ``item`` to ``items`` (a hook list); return the function that removes it.  Either
        way the calls that enter next get a new plan."""
        if prepend:
            items.insert(0, item)
        else:
            items.append(item)
        self._plan = None

        def remove() -> None:
            if item in items:
                items.remove(item)
                self._plan = None

        return remove


_DEFINITION: Final = ToolRegistry.definition
"""The lookup as written here: a registry whose class's ``definition`` is another is asked
through it."""

