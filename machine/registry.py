"""The tool registry's per-call driver (asyncio, trio, anyio): a thin driver of the call machine.

:class:`ToolRegistry` itself lives in :mod:`toolcancel.toolregistry` (plain Python, also when
this module runs compiled: a ``TOOLCANCEL_COMPILE=1`` build, ``setup.py``, :func:`compiled`) and
is imported here with every name hooks use, so ``toolcancel.registry`` still offers them all.

``await registry.execute(name, arguments, signal=...)`` runs one call through the contract's
pipeline -- pre-execute waterfall, approval, guards, around-dispatch waterfall, the body, post-
execute waterfall, materialization, one frozen notification -- and at every point where the
contract decides something, it offers an event to the call's machine -- the contract compiled
for the call's shape (:mod:`toolcancel.compiled`), which steps exactly as the pure core
(:mod:`toolcancel.core`) does -- and does what the resulting state says.  The registry
observes and performs; the contract table decides.  So the path a call records *is* the
explanation of its result.

What the registry guarantees (see CONTRACT.md for the numbered rules):

* no body starts after a live cancellation (C1, C1', C2);
* the caller's signal can never be detached by a wrapper: the body's signal is fused (R21);
* a started body is awaited to quiescence, never raced, however long it takes (R27);
* a late success becomes ABORTED, more specific failures survive (R18-R20, R39);
* exactly one frozen result is published, to observers and to the caller alike (R31).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import math
import sys
import warnings
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping, Sequence
from functools import partial
from typing import Any, Final, Protocol

from .compiled import DRAINING, MOVED, Node, initial_node
from .contract import load_contract
from .core import CallerSignal, Occurrence, PathStep
from .errors import ContractViolation, NotSerializable, RegistryUsageError, TaskCancelled
from .errors import InvalidBudget as InvalidBudget
from .execution import Execution as Execution
from .execution import drop_late_context
from .fusion import Fusion

# What hooks exchange with the registry lives in .hooks (and the view in .execution), shared by
# every build of this module (bench/untraced.py); imported here under their public names.
from .hooks import Accept as Accept
from .hooks import Allow as Allow
from .hooks import Approval as Approval
from .hooks import ApprovalRequest as ApprovalRequest
from .hooks import ApprovalSeam as ApprovalSeam
from .hooks import AroundHook as AroundHook
from .hooks import Ask as Ask
from .hooks import Block as Block
from .hooks import Deny as Deny
from .hooks import Guard as Guard
from .hooks import InFlight as InFlight
from .hooks import Next as Next
from .hooks import Observer as Observer
from .hooks import PostDecision as PostDecision
from .hooks import PostHook as PostHook
from .hooks import PreDecision as PreDecision
from .hooks import PreHook as PreHook
from .hooks import StepTap as StepTap
from .hooks import ToolBody as ToolBody
from .hooks import ToolDefinition as ToolDefinition
from .results import ErrorInfo, ToolResult, canonical_json, snapshot
from .runtime import Timer, Waiter, call_later, clock, on_trio, shielded
from .signals import AbortController, AbortError, AbortSignal
from .toolregistry import DRAIN_WARNING as DRAIN_WARNING
from .toolregistry import ToolRegistry as ToolRegistry
from .trace import FORMAT_VERSION, line_templates, runs_code

log = logging.getLogger("toolcancel.registry")


def compiled() -> bool:
    """Whether this install runs the per-call driver mypyc compiled: a ``TOOLCANCEL_COMPILE=1``
    build (``setup.py``).  Every other install -- the default, an editable one -- runs the
    source."""
    return not str(getattr(sys.modules[__name__], "__file__", "")).endswith(".py")


def _waterfall(
    listeners: Sequence[Callable[..., Awaitable[Any]]],
    args: tuple[Any, ...],
    base: Callable[[], Awaitable[Any]],
    i: int = 0,
) -> Awaitable[Any]:
    """Listeners ``i`` onwards, outermost first: each gets ``args`` and a ``next()`` running the
    rest.  Returns the outermost listener's awaitable itself (no coroutine of its own).

    ``next()`` is a ``partial`` of this function: calling it enters here directly, with no frame
    of its own, and still reads the listener list only when called, as a closure would."""
    if i == len(listeners):
        return base()
    return listeners[i](*args, partial(_waterfall, listeners, args, base, i + 1))


_CANCELLATIONS: Final = frozenset(o.name for o in load_contract().outcomes if o.cancellation)
"""The outcomes contract.toml declares ``cancellation = true``."""


class StagedCall(Protocol):
    """A call in flight, driven stage by stage: ``prepare()``, then ``dispatch()`` if it said
    so, then ``finalize()`` exactly once.  ``run()`` does all three."""

    call_id: str
    view: Execution
    state: str
    path: list[PathStep]

    async def run(self) -> ToolResult: ...
    async def prepare(self) -> bool: ...
    async def dispatch(self) -> None: ...
    async def finalize(self) -> ToolResult: ...


class _Call:
    """One call in flight: where it stands in its compiled machine, its view, its deferred
    contexts.

    Invariant: every decision below is read back from ``self.node`` -- the call's state in the
    contract compiled for its shape (:mod:`toolcancel.compiled`) -- after an ``offer``; the
    driver never decides an outcome itself.
    """

    __slots__ = (
        "abandoned",
        "agent",
        "call_id",
        "caller",
        "clock",
        "controller",
        "deferred",
        "entered",
        "given",
        "interrupt",
        "merged",
        "name",
        "node",
        "own_caller",
        "path",
        "raw_arguments",
        "registry",
        "result",
        "results",
        "state",
        "stepwise",
        "tap",
        "trace",
        "unseen_abort",
        "unwinding",
        "view",
        "watchdog",
        "wrappers",
    )

    def __init__(
        self,
        registry: ToolRegistry,
        name: str,
        arguments: Any,
        caller: AbortSignal | None,
        call_id: str,
        agent: str | None,
        parent: str | None,
        own_caller: bool = False,
    ) -> None:
        self.registry = registry
        self.results = registry._results
        self.name = name
        self.raw_arguments = arguments
        self.call_id = call_id
        self.given = caller  # the signal passed to execute(), if any; captured at entry
        self.own_caller = own_caller  # no signal passed: C is the call signal, made at entry
        # The call signal's controller: made at entry for a call with a signal (it is C), and
        # on first use for one without (most never need it).
        self.controller: AbortController | None = None
        self.caller: AbortSignal | None = None  # C: the call signal when a signal was given
        # True from the moment C aborts until the machine is offered ``caller_abort``: C is
        # aborted only through abort_call_signal(), which sets it first when C was live, so a
        # step asks one flag instead of C and the node.
        self.unseen_abort = False
        self.interrupt: BaseException | None = None  # a KeyboardInterrupt/SystemExit to re-raise
        self.abandoned = False  # True once a second interrupt abandoned the call (P7)
        self.unwinding: BaseException | None = None  # a wrapper failure already logged
        self.entered = -1.0  # loop time the call entered its state (-1: not yet, or no loop)
        self.clock: Callable[[], float]  # the event loop's, once running: set by enter()
        self.watchdog: Timer | None = None  # the drain warning, while draining
        self.agent = agent
        self.deferred: list[Any] | None = None  # made by the first defer_context()
        self.merged = False  # True once deferred contexts can no longer attach (C3)
        self.result: ToolResult = _NO_RESULT  # the result the call holds between stages
        self.wrappers = tuple(registry._around)  # the call's one list of around listeners
        self.node: Node  # set by enter(), once the caller signal is captured; offer() steps it
        self.state: str = registry._table.initial  # always self.node.state (offer() sets both)
        self.path: list[PathStep] = []  # the steps taken: the call's explanation
        self.trace = registry._trace  # the trace sink, or None (one test per emission point)
        self.tap = registry._on_step  # told every step, before the trace sink
        # Whether each step is offered on its own (no two taken as one, offer_through): when
        # code of anyone's runs between steps -- a tap, or a trace sink that is not a list's
        # append -- and could abort a signal there.
        self.stepwise = self.tap is not None
        if self.trace is not None and runs_code(self.trace):
            self.stepwise = True
        self.view = Execution(self, call_id, name, None, agent, parent, None, self.path)

    def enter(self) -> None:
        """Entry (R11), synchronous: snapshot the arguments, *then* capture the caller signal
        and abortedAtEntry, list the call as in flight and leave the ``entry`` state.

        The capture follows the snapshot (as in the original), so an abort while the arguments
        are snapshotted is a pre-aborted entry, and one after it is a caller abort after entry.
        No user code but a trace sink runs between the capture and the step out of ``entry``,
        and that step is taken without offering a caller abort first: one seen there is offered
        with the next event, after entry, as it happened after the capture.
        """
        registry = self.registry
        try:
            arguments: Any = snapshot(self.raw_arguments, "$.arguments")
            invalid: BaseException | None = None
        except (NotSerializable, RecursionError) as exc:
            arguments, invalid = None, exc
        self.view._arguments = arguments
        # The call signal (Python binding P1): follows the given signal, and aborts when the
        # task awaiting execute() is cancelled.  Captured here, out of wrappers' reach (R11).
        # The listener on the given signal is removed when the call materializes (R22).  No
        # signal given: the call signal is C, live (P1).  ``signal=None`` given: a call without
        # a caller signal (R26); its call signal (task cancellation aborts it, P2) is not the
        # contract's C: the machine sees no caller signal and the slot starts absent.
        given = self.given
        captured: CallerSignal = "none"
        if given is not None:
            own = self.controller = AbortController()  # none yet: made here, not on first use
            if given.aborted:
                captured = "aborted"
                own.abort(given.reason)
            else:
                captured = "live"
                given.add_listener(self.follow)
            self.caller = self.view._slot = own.signal
        elif self.own_caller:  # C is the call signal itself: only task cancellation aborts it
            captured = "live"
            self.controller = own = AbortController()
            self.caller = self.view._slot = own.signal
        shape = (  # a plain tuple finds the compiled Shape it equals (building one costs more)
            captured,
            self.agent is not None,
            registry._approval is not None,
            registry._retry,
            len(self.wrappers),
        )
        self.node = registry._table.compiled.get(shape) or initial_node(registry._table, shape)
        try:
            self.clock = clock()  # read by the step out of ``entry``, just below
        except RuntimeError:  # execute() called outside the loop that will await it
            self.clock = _no_loop  # until prepare() takes that loop's clock
        registry._in_flight[self] = None
        if self.trace is not None:
            self.emit(
                "call_entry",
                caller=captured,
                agent=self.agent is not None,
                approval_seam=self.node.current.approval_seam,
                revision=registry.revision,
                retry=registry._retry,
                wrappers=len(self.wrappers),
            )
        if invalid is not None:
            log.warning("call %s: arguments not serializable: %s", self.call_id, invalid)
            self.offer("args_invalid", False)
            self.result = self.results.args_error()
            return
        self.offer("args_valid", False)
        if self.state == "finalizing":  # revised: a pre-aborted entry short-circuits (R42)
            self.result = self.results.cancellation(
                self.node.outcome or "aborted_before_dispatch"
            )

    # -- the call signal and the awaiting task (Python binding) -------------------------------

    def own(self) -> AbortController:
        """The controller of the call signal (P1), made on first use."""
        controller = self.controller
        if controller is None:
            controller = self.controller = AbortController()
        return controller

    def follow(self, given: AbortSignal) -> None:
        """The given signal aborted: so does the call signal, with its reason."""
        given.remove_listener(self.follow)
        self.abort_call_signal(given.reason)

    def abort_call_signal(self, reason: object) -> None:
        """Abort the call signal (a no-op if it already is); when it is C and was live, the
        machine has a caller abort to see (``unseen_abort``) from now on."""
        own = self.own()
        if self.caller is not None and not own.signal.aborted:
            self.unseen_abort = True
        own.abort(reason)

    def detach(self) -> None:
        """Take the call signal's listener off the given signal (idempotent)."""
        if self.given is not None:
            self.given.remove_listener(self.follow)

    def task_cancelled(self, message: str | None) -> None:
        """The awaiting task was cancelled (``message``: the cancellation's, if any): abort the
        call signal, as the caller would have."""
        log.info("call %s: the task awaiting execute() was cancelled", self.call_id)
        self.abort_call_signal(TaskCancelled(self.call_id, message))
        # Without a caller signal (seed, R26) the call signal is not the contract's C: no
        # checkpoint fires, but a body or hook watching ``call_signal`` is told (P1), and a body
        # still running is watched like a draining one.
        if self.caller is None and self.state == "body":
            self.watch_draining()

    def abandon(self, interrupt: BaseException) -> None:
        """A second interrupt (P7): stop waiting for this call.  It leaves the contract: no
        result is published, and whatever still runs of it is closed, not awaited."""
        if self.abandoned:
            return
        self.abandoned = True
        self.registry._in_flight.pop(self, None)
        self.detach()
        if self.watchdog is not None:
            self.watchdog.cancel()
        log.error(
            "call %s (%s): abandoned in state %s after a second interrupt (%r); its body was "
            "not awaited to quiescence and no result was published (Python binding P7)",
            self.call_id,
            self.name,
            self.state,
            interrupt,
        )

    def status(self, now: float) -> InFlight:
        slot = self.view._slot
        own = self.controller
        aborted = (own is not None and own.signal.aborted) or (slot is not None and slot.aborted)
        seconds = now - self.entered if self.entered >= 0 else 0.0  # entered outside the loop
        return InFlight(self.call_id, self.name, self.state, seconds, aborted)

    def failed(self, exc: BaseException, where: str, level: int = logging.WARNING) -> None:
        """A hook, the approval seam, a wrapper, the body or an observer raised ``exc``.

        Every failure is logged with the call id, as a warning with its traceback (P6) -- but a
        cooperative stop, the helpers' :class:`AbortError` while the call's signal or call
        signal has aborted, is a normal outcome: one INFO line.  A ``CancelledError`` raised by
        one of them is that component's failure like any other (the task awaiting execute() was
        not cancelled: that case never reaches user code), unless it is asyncio's teardown after
        a second interrupt cancelling the call's own task (P7): then the call is abandoned and
        its pipeline unwinds as if closed.  ``KeyboardInterrupt`` and ``SystemExit`` are also
        recorded as the component's failure, so the call still publishes exactly once; then
        they are re-raised (Python binding).
        """
        if isinstance(exc, asyncio.CancelledError):
            interrupt = _interrupt_of(exc)
            if interrupt is not None:
                self.abandon(interrupt)
                raise GeneratorExit from exc  # never caught by the pipeline: it unwinds
        if isinstance(exc, (KeyboardInterrupt, SystemExit)) and self.interrupt is None:
            self.interrupt = exc
        if isinstance(exc, AbortError) and self.told_to_stop():
            log.info("call %s: %s stopped cooperatively: %s", self.call_id, where, exc)
            return
        log.log(level, "call %s: %s failed: %r", self.call_id, where, exc, exc_info=exc)

    def told_to_stop(self) -> bool:
        """Whether the call's signal (the slot: F during the body) or its call signal aborted."""
        slot, own = self.view._slot, self.controller
        return (slot is not None and slot.aborted) or (own is not None and own.signal.aborted)

    def watch_draining(self) -> None:
        delay = self.registry._drain_warning
        if delay is not None and self.watchdog is None:
            self.watchdog = call_later(delay, self.warn_draining)

    def warn_draining(self) -> None:
        log.warning(
            "call %s (%s): the body is still running %gs after its signal aborted (state %s); "
            "the registry keeps waiting for it (R27) -- make the body watch its signal",
            self.call_id,
            self.name,
            self.registry._drain_warning,
            self.state,
        )

    # -- talking to the machine -------------------------------------------------------------

    def offer(self, key: Occurrence | str, caller_first: bool = True) -> str | None:
        """Step the compiled machine on ``key`` -- an event's name, or an :class:`Occurrence`
        from a table made by :func:`_observed` -- after any caller abort not yet seen (unless
        ``caller_first`` is false), do what the step's precomputed effect says; return the
        call's outcome."""
        if caller_first and self.unseen_abort:
            self.unseen_abort = False
            self.offer("caller_abort", False)
        edge = self.node.edges.get(key) or self.node.expand(self.registry._table, key)
        _, node, record, effect, line = edge
        self.node = node
        self.state = node.state
        self.path.append(record)
        if effect:
            self.entered = self.clock()
            if effect != MOVED:  # rare: into draining, or out of the body
                if effect == DRAINING:
                    self.watch_draining()
                elif self.watchdog is not None:  # the body settled (a no-signal call's ran
                    self.watchdog.cancel()  # in ``body``)
        if self.tap is not None:
            self.tap(self.view, record)
        if self.trace is not None:
            self.emit_line(line)
        return node.outcome

    def offer_through(self, key: tuple[str, str, str], stage: str) -> str | None:
        """Offer ``key[0]`` (after any caller abort not yet seen); when that leads to state
        ``key[1]``, offer ``key[2]`` with it, as one step of the compiled graph
        (:meth:`Node.through`).  Nothing but a tap or a trace sink can run code of anyone's
        between the steps, so the caller cannot abort there unless ``stepwise``.  Returns the
        call's outcome; the caller of this method goes on from whichever state the call is in.
        ``key[1]`` is a state of ``stage``: a trace has that stage's ``stage_enter`` line
        between the two steps' lines, as when they are offered one by one."""
        if self.unseen_abort or self.stepwise:
            return self.offer(key[0])
        node = self.node
        through = node.throughs.get(key) or node.through(self.registry._table, key)
        if through is None:
            return self.offer(key[0])
        node = self.node = through.node
        self.state = node.state
        self.path += through.records
        if through.moved:
            self.entered = self.clock()
        if self.trace is not None:
            self.emit_line(through.lines[0])
            self.emit_line(_LINES["stage_enter", stage])
            self.emit_line(through.lines[1])
        return node.outcome

    def emit(self, event: str, **fields: Any) -> None:
        """Write one trace line (only called when a trace sink is set)."""
        assert self.trace is not None
        self.trace({"trace": FORMAT_VERSION, "call": self.call_id, "event": event, **fields})

    def emit_line(self, template: dict[str, Any]) -> None:
        """Write one trace line made from ``template`` (:func:`~toolcancel.trace.line_template`:
        from :data:`_LINES`, or a compiled edge's), with this call's id."""
        assert self.trace is not None
        line = template.copy()
        line["call"] = self.call_id
        self.trace(line)

    def emit_listener(self, signal: str, action: str) -> None:
        """Fusion's callback: the registry put a listener on (or took one off) C or W."""
        self.emit_line(_LINES["listener", signal, action])

    def slot_replaced(self, value: AbortSignal | None) -> None:
        """A hook set the view's signal slot to ``value`` (the trace's ``slot`` line)."""
        if self.trace is not None:
            self.emit_line(
                _LINES["slot", "remove", False]
                if value is None
                else _LINES["slot", "replace", value.aborted]
            )

    def defer(self, context: Any) -> None:
        if self.merged:
            drop_late_context(self.call_id)
            return
        if self.deferred is None:
            self.deferred = []
        self.deferred.append(context)

    # -- the pipeline ---------------------------------------------------------------------------
    #
    # A stage awaits only user code (a waterfall, the approval seam, a wrapper, the body, an
    # observer's awaitable); what the contract decides between is synchronous.  So a call
    # without pre- or post-execute hooks runs those stages without a coroutine of their own.

    async def run(self, raising: bool = True) -> ToolResult:
        """The whole pipeline.  ``raising``: re-raise an interrupt user code raised (P4) once
        the result is published; else the driver that awaits the call's task re-raises it."""
        if self.preparing():  # prepare(), one coroutine frame fewer
            pending = await self.pre_policy() if self.registry._pre else self.pre_decided(_ALLOW)
            if pending is not None:
                self.result = pending
            elif self.wrappers:
                self.result = await self.around(not self.registry._post)
            else:  # around(), one coroutine frame fewer
                self.result = self.settled(await self.base_dispatch(), not self.registry._post)
        if self.registry._post or self.registry._observers:
            return await self.finalize(raising)
        frozen = self.conclude()  # finalize(), one coroutine frame fewer
        if self.interrupt is not None and raising:
            raise self.interrupt
        return frozen

    async def prepare(self) -> bool:
        """Pre-execute, approval, guards (entry happened in ``begin()``).  True when the call
        goes on to dispatch."""
        if not self.preparing():
            return False
        pending = await self.pre_policy() if self.registry._pre else self.pre_decided(_ALLOW)
        if pending is None:
            return True
        self.result = pending
        return False

    def preparing(self) -> bool:
        """Whether pre-execute comes next (else entry ended the call); starts its stage."""
        if self.state != "pre_policy":
            if self.state != "finalizing":
                raise RegistryUsageError(
                    f"call {self.call_id}: prepare() comes once, right after begin()"
                )
            return False  # entry ended the call: invalid arguments, or a revised pre-abort
        if self.entered < 0:  # entered outside the loop: take its clock now
            self.clock = clock()
            self.entered = self.clock()
        if self.trace is not None:
            self.emit_line(_LINES["stage_enter", "pre"])
        return True

    async def dispatch(self) -> None:
        """The around waterfall, the body and checkpoint C3."""
        if self.state != "around_before":
            raise RegistryUsageError(
                f"call {self.call_id}: dispatch() is only for a call that prepare() let through"
            )
        self.result = await self.around()

    async def finalize(self, raising: bool = True) -> ToolResult:
        """Post-execute and C4 (unless the result is on the final route), then publish:
        snapshot and deep-freeze the result (R30), freeze the view, notify once (R31)."""
        if self.state in ("pre_policy", "around_before", "materialized"):
            raise RegistryUsageError(
                f"call {self.call_id}: finalize() comes once, after prepare() (and dispatch())"
            )
        if self.state == "post_policy" and self.registry._post:
            if self.trace is not None:
                self.emit_line(_LINES["stage_enter", "post"])
            self.result = await self.post_policy(self.result)
        frozen = self.conclude()
        view = self.view
        for observer in tuple(self.registry._observers):
            try:
                pending = observer(view, frozen)
                if pending is not None and inspect.isawaitable(pending):
                    await pending
            except GeneratorExit:
                raise
            except BaseException as exc:
                self.failed(exc, "a result observer", logging.ERROR)  # nowhere else to go
        if self.interrupt is not None and raising:
            raise self.interrupt
        return frozen

    def conclude(self) -> ToolResult:
        """Post-execute without hooks (accept as is) if the call is still before it, then
        publish; the observers come next."""
        if self.state == "post_policy":  # no post-execute hooks
            if self.trace is not None:
                self.emit_line(_LINES["stage_enter", "post"])
            self.result = self.post_decided(self.result, _ACCEPT)
        return self.publish(self.result)

    async def pre_policy(self) -> ToolResult | None:
        """The pre-execute waterfall (C1) and, when it asks, the approval seam (C1'); then
        :meth:`pre_decided`.  ``None`` means: go on to dispatch."""
        reason: str | None = None
        try:
            decision = await _waterfall(self.registry._pre, (self.view,), _allow)
            if isinstance(decision, Ask):
                self.offer("pre_ask")
                if self.state == "approval":
                    reason = await self.approval(decision)
        except (ContractViolation, GeneratorExit):
            raise
        except BaseException as exc:
            return self.pre_failed(exc)
        return self.pre_decided(decision, reason)

    def pre_decided(self, decision: Any, reason: str | None = None) -> ToolResult | None:
        """Offer what pre-execute decided (an ``Ask`` is offered already, and ``reason`` is the
        approval's answer if the seam was asked), then run the guards.  ``None`` means: go on
        to dispatch; else the result the call ends with."""
        r = self.results
        try:
            if isinstance(decision, Allow):
                reason = ""
                if self.registry._guards:
                    self.offer("pre_allow")
                else:  # no guard to run: the guards pass at once
                    self.offer_through(_ALLOWED_UNGUARDED, "guards")
            elif isinstance(decision, Deny):
                reason = decision.reason
                self.offer("pre_deny")
            elif isinstance(decision, Ask):
                if reason is None and self.registry._approval is None:
                    reason = decision.reason or r.text("ask_without_seam", name=self.name)
                elif reason is None:
                    reason = r.text("ask_without_agent", name=self.name)
            else:
                raise TypeError(f"pre-execute returned {decision!r}; expected Allow, Deny or Ask")
            if self.state == "guards":
                if self.trace is not None:
                    self.emit_line(_LINES["stage_enter", "guards"])
                denial = self.run_guards() if self.registry._guards else None
                if denial is None:
                    self.offer("guards_pass")
                else:
                    reason = denial
                    self.offer("guard_deny")
        except (ContractViolation, GeneratorExit):
            raise
        except BaseException as exc:
            return self.pre_failed(exc)
        if self.state == "around_before":
            return None
        if self.node.outcome == "denied":
            return r.denied(reason)
        return r.cancellation(self.node.outcome or "aborted")

    def pre_failed(self, exc: BaseException) -> ToolResult:
        """A pre-execute hook, the approval seam or a guard raised ``exc`` (R16)."""
        failure = _PRE_RAISE[self.state]
        self.failed(exc, failure.removesuffix("_raise") + " stage")
        self.offer(failure)
        if self.state == "finalizing":
            return self.results.thrown(exc)
        return self.results.cancellation(self.node.outcome or "aborted")

    async def approval(self, decision: Ask) -> str:
        """Ask the seam; offer its answer; return the denial reason it implies."""
        r, seam = self.results, self.registry._approval
        assert seam is not None and self.agent is not None
        request = ApprovalRequest(
            self.call_id,
            self.name,
            self.view.arguments,
            self.agent,
            decision.reason,
            self.view.signal,
            self.own().signal,
        )
        if self.trace is not None:
            self.emit_line(_LINES["stage_enter", "approval"])
        answer: object = await seam(request)  # what a seam returns is checked here, not typed
        if not isinstance(answer, Approval):
            raise RuntimeError(r.text("unreachable_approval", value=_describe(answer)))
        self.offer("approval_" + answer.value)
        if answer is Approval.APPROVED:
            return ""
        return r.text("approval_" + answer.value, name=self.name)

    def run_guards(self) -> str | None:
        """Global guards in registration order, then the calling agent's; first reason denies."""
        guards = self.registry._guards
        ordered = [g for a, g in guards if a is None]
        ordered += [g for a, g in guards if a is not None and a == self.agent]
        for guard in ordered:
            reason = guard(self.view)
            if reason is not None:
                return str(reason)
        return None

    async def around(self, accepting: bool = False) -> ToolResult:
        """The around waterfall and checkpoint C3.  Leaves the machine in ``post_policy``, or in
        ``finalizing`` after a wrapper failure nobody caught (R16) -- or, when ``accepting``
        (:meth:`settled`), past post-execute too."""
        if not self.wrappers:  # what the body raises, the base dispatch has caught
            return self.settled(await self.base_dispatch(), accepting)
        try:
            result = await self.wrap(0)
        except (ContractViolation, GeneratorExit):
            raise
        except BaseException as exc:
            self.merged = True
            self.offer("around_raised")
            return self.results.thrown(exc)
        return self.settled(result, accepting)

    def settled(self, result: ToolResult, accepting: bool = False) -> ToolResult:
        """The around waterfall settled with ``result``: merge the deferred contexts (D4) and
        pass checkpoint C3.

        ``accepting``: the call publishes right after this, with no post-execute hook to run
        (``run()``, not a scheduler's ``dispatch()`` whose ``finalize()`` comes later), so
        post-execute's acceptance and C4 may be passed in the same step (a through step,
        :meth:`offer_through`); whatever its outcome then says, the result already says it."""
        self.merged = True
        if self.deferred:
            result = result.with_contexts(tuple(self.deferred) + tuple(result.contexts))
        if accepting:
            outcome = self.offer_through(_SETTLED_ACCEPTED, "post")
        else:
            outcome = self.offer("around_settled")
        if outcome in _CANCELLATIONS and not result.is_error:
            return self.results.cancellation(outcome or "aborted", result.contexts)
        return result

    async def wrap(self, i: int) -> ToolResult:
        """Wrapper ``i`` of the around waterfall."""
        self.offer("wrapper_enter")
        calls = 0
        # A next() of this wrapper is running: True, or once the wrapper settled and left it
        # running, the Waiter its end sets (R27).  One variable, so one closure serves.  Typed
        # Any: next_() sees it change while it is suspended, which mypy's narrowing does not
        # know, and the compiled registry would trust that narrowing (setup.py).
        running: Any = False
        last: ToolResult | None = None

        async def next_() -> ToolResult:
            nonlocal calls, running, last
            if running:
                raise RegistryUsageError(
                    "next() was called again while the previous next() of this wrapper is "
                    "still running; await it before retrying"
                )
            if calls:
                self.offer("redelegate")
                if self.registry._retry == "reject":
                    raise RegistryUsageError(
                        "next() was called a second time; this registry rejects retries "
                        "(ToolRegistry(retry='reject')): delegate once per wrapper"
                    )
            calls += 1
            running = True
            last = None
            try:
                # The next wrapper, or past the last one the base dispatch.  Which one is next
                # depends on the retry behaviour (D11): a cursor stands after the wrappers
                # handed out so far (the machine counts them), otherwise it is ``i + 1``.
                j = self.node.current.handed if self.registry._retry == "cursor" else i + 1
                last = await (self.wrap(j) if j < len(self.wrappers) else self.base_dispatch())
                return last
            finally:
                waiter, running = running, False
                if waiter is not True:  # the wrapper settled and awaits this end
                    assert isinstance(waiter, Waiter)
                    waiter.set()

        try:
            result = await self.wrappers[i](self.view, next_)
            if running:
                await (running := self.forgotten(i))
            if result is not last:
                result = _wrapper_result(result, self.wrappers[i], i, self.registry.revision)
        except (ContractViolation, GeneratorExit):
            raise
        except BaseException as exc:
            if running:
                await (running := self.forgotten(i))
            if exc is not self.unwinding:  # logged once, by the wrapper it escaped first
                self.failed(exc, f"around-dispatch wrapper {i}")
                self.unwinding = exc
            self.offer("wrapper_raise")
            raise
        timeout = result.error is not None and result.error.code == "TOOL_TIMEOUT"
        self.offer(_WRAPPER_RETURNED[result is last, result.is_error, timeout])
        return result

    def forgotten(self, i: int) -> Waiter:
        """Wrapper ``i`` settled while a next() it started (say in a task) still runs: a body
        may be running under it, so the registry awaits it (R27) on the Waiter returned."""
        log.warning(
            "call %s: around-dispatch wrapper %d settled while its next() was still "
            "running; awaiting it (R27) -- a wrapper must await the next() it calls",
            self.call_id,
            i,
        )
        return Waiter()

    async def base_dispatch(self) -> ToolResult:
        """Checkpoint C2, then the body with the fused signal, awaited to quiescence (R17, R18)."""
        r, view = self.results, self.view
        w = view._slot
        # No wrapper changed the slot: F is C itself (R21), nothing to relay or to trace.
        fusion = None if w is self.caller and self.trace is None else Fusion(self.caller, w)
        if self.trace is not None:
            assert fusion is not None
            fusion.on_listener = self.emit_listener
            if fusion.relaying:
                self.emit_listener("caller", "add")
                self.emit_listener("slot", "add")
        tool = self.registry.definition(self.name, self.agent)
        outcome = self.offer(_BASE_DISPATCH[w is not None and w.aborted, tool is not None])
        if self.state == "around_after":  # C2 aborted, or no such tool
            if fusion is not None:
                fusion.dispose()
            if outcome == "unknown_tool":
                return r.unknown_tool(self.name)
            return r.cancellation(outcome or "aborted")
        assert tool is not None
        fused = w if fusion is None else fusion.signal
        listening = fused is not None and self.state == "body"
        if listening:
            assert fused is not None
            fused.add_listener(self.on_fused_abort)
            if fused.aborted:  # it aborted while base_dispatch was offered (a tap or trace sink)
                self.on_fused_abort(fused)
        owner = None  # set only when tracing: whose signal carries the listener just added
        if self.trace is not None:
            assert fusion is not None
            kind = fusion.plan.kind
            self.emit_line(_LINES["fused", kind, fusion.plan.born_aborted_from is not None])
            # Unless F is a relay, it *is* the caller's or the slot's signal, so the registry's
            # own listener sits on that signal, and the trace says so (R22).
            if listening and kind in ("caller", "slot"):
                owner = kind
                self.emit_listener(owner, "add")
            self.emit_line(_LINES[("body_start",)])
        view._slot = fused
        try:
            try:
                value = await tool.body(view._arguments, view)
                result, event = r.success(value), "body_ok"
            except GeneratorExit:
                raise
            except BaseException as exc:
                self.failed(exc, "the tool body")
                result, event = r.thrown(exc), "body_raise"
            if self.trace is not None:
                self.emit_line(_LINES["body_settle", "ok" if event == "body_ok" else "raise"])
        finally:
            if listening:
                assert fused is not None
                fused.remove_listener(self.on_fused_abort)
                if owner is not None:
                    self.emit_listener(owner, "remove")
            if fusion is not None:
                fusion.dispose()
            view._slot = w
        outcome = self.offer(event)
        if event == "body_ok" and outcome in _CANCELLATIONS:
            return r.cancellation(outcome or "aborted")
        return result

    def on_fused_abort(self, signal: AbortSignal) -> None:
        """The body's fused signal aborted: from now on the call is draining."""
        if self.unseen_abort:
            self.unseen_abort = False
            self.offer("caller_abort", False)
        elif self.state == "body":
            self.offer("fused_abort", False)

    async def post_policy(self, result: ToolResult) -> ToolResult:
        """The post-execute waterfall (R7, R20); then :meth:`post_decided`."""
        try:
            decision = await _waterfall(self.registry._post, (self.view, result), _accept)
            if not isinstance(decision, (Accept, Block)):
                raise TypeError(f"post-execute returned {decision!r}; expected Accept or Block")
        except (ContractViolation, GeneratorExit):
            raise
        except BaseException as exc:
            self.failed(exc, "post-execute")
            self.offer("post_raise")
            return self.results.thrown(exc)
        return self.post_decided(result, decision)

    def post_decided(self, result: ToolResult, decision: Accept | Block) -> ToolResult:
        """Offer what post-execute decided; checkpoint C4."""
        r = self.results
        if isinstance(decision, Block):
            self.offer("post_block")
            return r.blocked(decision.feedback, decision.contexts)
        if decision.content is None and not decision.contexts:
            accepted = result  # kept as is
        else:
            content = result.content if decision.content is None else tuple(decision.content)
            accepted = ToolResult(
                content,
                result.is_error,
                result.error,
                tuple(result.contexts) + tuple(decision.contexts),
                result.meta,
                result.revision,
            )
        outcome = self.offer("post_accept")
        if outcome in _CANCELLATIONS and not accepted.is_error:
            return r.cancellation(outcome or "aborted", accepted.contexts)
        return accepted

    # -- materialization and the single notification -----------------------------------------

    def publish(self, result: ToolResult) -> ToolResult:
        """Snapshot and deep-freeze the result (R30), freeze the view, stop being in flight;
        :meth:`finalize` then notifies the observers once (R31)."""
        try:
            frozen = self.results.materialize(result)
            self.offer(_PUBLISH[True])
        except (NotSerializable, RecursionError) as exc:
            self.offer(_PUBLISH[False])
            log.info("call %s: result not serializable: %s", self.call_id, exc)
            frozen = self.results.materialize(self.results.serialization_error())
        self.merged = True
        self.result = frozen
        self.view.ended(self)
        self.detach()
        self.registry._in_flight.pop(self, None)
        if self.trace is not None:
            self.emit("result", result=frozen.to_data())
            self.emit_line(_LINES[("notify",)])
        return frozen


_NO_RESULT: Final = ToolResult(())


def _no_loop() -> float:
    """The clock of a call entered outside any event loop: ``prepare()`` replaces it."""
    return -1.0


def _observed(event: str, *fields: str) -> dict[tuple[bool, ...], Occurrence]:
    """Every occurrence of ``event`` the registry can observe, by the values of ``fields``:
    built once, so that a step neither builds nor hashes a fresh one."""
    return {
        values: Occurrence(event, **dict(zip(fields, values, strict=True)))
        for values in itertools.product((False, True), repeat=len(fields))
    }


_BASE_DISPATCH: Final = _observed("base_dispatch", "slot_aborted", "tool_found")
_WRAPPER_RETURNED: Final = _observed("wrapper_returned", "passthrough", "is_error", "timeout")
_PUBLISH: Final = {ok: o for (ok,), o in _observed("publish", "serializable").items()}

_PRE_RAISE: Final = {
    "pre_policy": "pre_raise",
    "approval": "approval_raise",
    "guards": "guard_raise",
}


_ALLOWED_UNGUARDED: Final = ("pre_allow", "guards", "guards_pass")
_SETTLED_ACCEPTED: Final = ("around_settled", "post_policy", "post_accept")

_LINES: Final = line_templates()
"""Every trace line the registry writes outside the machine's steps but ``call_entry`` and
``result``, by event and field values (a line copies its template)."""

_ALLOW: Final = Allow()
_ACCEPT: Final = Accept()


async def _allow() -> Allow:
    return _ALLOW


async def _accept() -> Accept:
    return _ACCEPT


def _wrapper_result(value: Any, wrapper: Any, i: int, revision: str) -> ToolResult:
    """What around-dispatch wrapper ``i`` returned, as the result it authored (R16).

    A wrapper may return a :class:`ToolResult` or, as wrappers of the original return object
    literals, a mapping with the result's JSON fields (``content``, ``isError``, ``error``,
    ``additionalContexts``, ``meta``).  Anything else is refused with a ``TypeError`` naming the
    wrapper (an around failure, R16).  Revised: an ``error`` without a message gets R44's, the
    result's text without ``Error: ``.
    """
    if isinstance(value, ToolResult):
        result = value
    elif isinstance(value, Mapping):
        result = _result_from_data(value, _name_of(wrapper, i))
    else:
        raise TypeError(
            f"around-dispatch wrapper {_name_of(wrapper, i)} returned {type(value).__name__}; "
            "expected a ToolResult or a mapping with its fields (content, isError, ...)"
        )
    e = result.error
    if revision == "revised" and e is not None and not e.message:
        message = result.text.removeprefix("Error: ")
        result = ToolResult(
            result.content,
            result.is_error,
            ErrorInfo(e.name, e.code, message),
            result.contexts,
            result.meta,
            result.revision,
        )
    return result


_RESULT_FIELDS: Final = frozenset({"content", "isError", "error", "additionalContexts", "meta"})


def _result_from_data(data: Mapping[Any, Any], who: str) -> ToolResult:
    """A result from its JSON fields (either revision's ``error`` shape), or a ``TypeError``."""

    def refuse(why: str) -> TypeError:
        return TypeError(f"around-dispatch wrapper {who} returned a mapping that {why}")

    unknown = set(data) - _RESULT_FIELDS
    if unknown:
        raise refuse(f"has unknown fields {sorted(map(str, unknown))}")
    content = data.get("content")
    if not isinstance(content, (list, tuple)):
        raise refuse("has no content list")
    is_error = data.get("isError", False)
    if not isinstance(is_error, bool):
        raise refuse("has a non-boolean isError")
    error = None
    raw = data.get("error")
    if raw is not None:
        if not isinstance(raw, Mapping):
            raise refuse("has an error that is not a mapping")
        info = raw.get("info", raw)
        if not isinstance(info, Mapping):
            raise refuse("has an error.info that is not a mapping")
        name, code, message = info.get("name"), info.get("code"), raw.get("message")
        if not all(v is None or isinstance(v, str) for v in (name, code, message)):
            raise refuse("has error fields that are not strings")
        error = ErrorInfo(name, code, message)
    contexts = data.get("additionalContexts", ())
    if not isinstance(contexts, (list, tuple)):
        raise refuse("has additionalContexts that are not a list")
    return ToolResult(tuple(content), is_error, error, tuple(contexts), data.get("meta"))


def _name_of(wrapper: Any, i: int) -> str:
    name = getattr(wrapper, "__qualname__", None) or type(wrapper).__name__
    return f"{i} ({name})"


def _describe(value: Any) -> str:
    """JSON text of an unexpected value when it has one, else its repr."""
    try:
        return canonical_json(snapshot(value))
    except NotSerializable:
        return repr(value)


def _own_task(
    call: _Call, cancelled: asyncio.CancelledError | None = None
) -> tuple[asyncio.Task[Any], asyncio.Future[None] | None]:
    """Start ``call``'s pipeline in a task of its own: eagerly where asyncio offers it (3.12+),
    so a call whose user code never suspends runs to its end right here, with no turn of the
    loop.  Before 3.12 the task is scheduled, and also returned is a future its pipeline sets
    as it ends: awaited, it wakes the awaiting task a turn sooner than the task's done callback.
    ``cancelled`` is a cancellation that reached the awaiting task before it first ran the
    call: the call starts aborted (P2)."""
    if cancelled is not None:
        call.task_cancelled(_message_of(cancelled))
    loop = asyncio.get_running_loop()
    if _EAGER is not None:
        return _EAGER(loop, call.run(False), name=call.call_id), None
    ended: asyncio.Future[None] = loop.create_future()
    return loop.create_task(_waking(call, ended), name=call.call_id), ended


async def _waking(call: _Call, ended: asyncio.Future[None]) -> ToolResult:
    """``call``'s pipeline, setting ``ended`` as it ends however it ends."""
    try:
        return await call.run(False)
    finally:
        _wake(ended, None)


_EAGER: Final[Any] = getattr(asyncio, "eager_task_factory", None)
"""``asyncio.eager_task_factory`` (public since 3.12), or ``None`` before it."""


async def _guarded(call: _Call, cancelled: asyncio.CancelledError | None = None) -> ToolResult:
    """Run ``call`` in a task of its own and await it here, so that cancelling the awaiting task
    never reaches user code, which sees a real task of its own (P2).

    The awaiting task's cancellation is turned into the caller aborting
    (:meth:`_Call.task_cancelled`); the call runs on to its one published result -- repeated
    cancellations only wait again (R27) -- and the first ``CancelledError`` is raised at the end,
    the task's cancellation count left as ``cancel()`` made it.  ``cancelled`` is a cancellation
    that arrived before the task first ran the call.  An interrupt recorded by the call (P4) is
    raised here, after publication.  A cancellation during an interrupt abandons the call (P7).
    """
    task, ended = _own_task(call, cancelled)
    if not task.done():
        caught = await drain(task, call.task_cancelled, partial(_abandon, call, task), ended)
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
            wake: Callable[[object], None] | None = None
            if ended is None or ended.done():
                ended = task.get_loop().create_future()
                wake = partial(_wake, ended)
                task.add_done_callback(wake)
            try:
                await ended
            except asyncio.CancelledError as exc:
                if wake is not None:
                    task.remove_done_callback(wake)
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


def _wake(waiter: asyncio.Future[None], _: object) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _anyio_scope_cancelled() -> bool:
    """Whether the current task sits in a cancelled anyio cancel scope (anyio's public
    ``current_effective_deadline()`` is minus infinity there).  Only asked once a cancellation
    arrived, and only when anyio is loaded."""
    anyio = sys.modules.get("anyio")
    return anyio is not None and anyio.current_effective_deadline() == -math.inf


def _abandon(call: _Call, task: asyncio.Task[Any], interrupt: BaseException) -> None:
    """A second interrupt (P7): abandon ``call`` and close its task's pipeline, not awaited."""
    call.abandon(interrupt)
    coro: Any = task.get_coro()  # None only for a task already done (3.12+)
    try:
        if coro is not None:
            coro.close()
    except RuntimeError as closing:  # a body that ignores GeneratorExit too
        log.error("call %s: closing the abandoned call: %r", call.call_id, closing)
    task.cancel()  # its coroutine is closed: the task ends cancelled, nothing more runs


def _message_of(cancelled: asyncio.CancelledError) -> str | None:
    return cancelled.args[0] if cancelled.args else None


def _structured(call: _Call) -> Generator[Any, None, ToolResult]:
    """Run ``call`` on trio: behind a shield, the scope's cancellation being the caller's abort
    (:func:`toolcancel.runtime.shielded`)."""
    return shielded(call.run, call.task_cancelled).__await__()


def _interrupt_of(exc: BaseException) -> BaseException | None:
    """The ``KeyboardInterrupt`` or ``SystemExit`` propagating while ``exc`` was raised, if any:
    the context of the cancellation asyncio's teardown sends after a second interrupt."""
    seen = 0
    context = exc.__context__
    while context is not None and seen < 32:
        if isinstance(context, (KeyboardInterrupt, SystemExit)):
            return context
        context = context.__context__
        seen += 1
    return None


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
        if cancelled is None and on_trio():
            self._driver = driver = _structured(self._call)
        else:
            self._driver = driver = _guarded(self._call, cancelled).__await__()
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

    def _drop(self) -> None:
        call = self._call
        if call.state != "materialized" and call in call.registry._in_flight:
            call.registry._in_flight.pop(call, None)
            call.detach()
            log.warning(
                "call %s (%s) entered but was never awaited: nothing ran, nothing was published",
                call.call_id,
                call.name,
            )

    def __del__(self) -> None:
        if self._driver is None and not self._closed:
            call = self._call
            warnings.warn(
                f"call {call.call_id} ({call.name!r}) was entered by execute() but never awaited",
                RuntimeWarning,
                stacklevel=2,
                source=self,
            )
            self._drop()

    def __repr__(self) -> str:
        return f"<PendingCall {self._call.call_id} {self._call.name!r} in {self._call.state}>"
