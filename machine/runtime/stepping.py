"""A call in flight as the registry's driver keeps it: its place in its compiled machine.

What every stage of the pipeline (:mod:`toolcancel.runtime.driver`) shares: entry (R11), the call
signal and what cancelling the awaiting task does to it (Python binding P1, P2, P7), the log lines
of a failing component (P6) and of a body that does not cooperate (P5), stepping the compiled
contract (:mod:`toolcancel.contract.compiled`) and the trace lines each step writes
(:mod:`toolcancel.contract.trace`). In the compiled group (setup.py's ``COMPILED``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final

from ..contract.compiled import DRAINING, MOVED, Node, initial_node
from ..contract.core import CallerSignal, Occurrence, PathStep
from ..contract.errors import NotSerializable, TaskCancelled
from ..contract.results import ToolResult, snapshot
from ..contract.trace import FORMAT_VERSION, line_templates, runs_code
from .eventloop import Timer, clock_and_timers
from .execution import Execution, drop_late_context
from .hooks import InFlight
from .plan import CallPlan
from .signals import AbortController, AbortError, AbortSignal

# every part of the registry logs as the registry
log = logging.getLogger("toolcancel.runtime.registry")


class _Stepping:
    """One call in flight: where it stands in its compiled machine, its view, its deferred
    contexts, its call signal, and the trace lines it writes.  The pipeline's stages are the
    subclass's, :class:`toolcancel.runtime.driver._Call`.

    Invariant: ``state`` is ``node.state`` -- the call's state in the contract compiled for its
    shape (:mod:`toolcancel.contract.compiled`) -- and only :meth:`offer` (or :meth:`offer_through`)
    moves it, appending each step to ``path``.
    """

    __slots__ = (
        "abandoned",
        "agent",
        "arguments",
        "call_id",
        "call_later",
        "caller",
        "cancels",
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
        "parent",
        "path",
        "plan",
        "raw_arguments",
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
        plan: CallPlan,
        name: str,
        arguments: Any,
        caller: AbortSignal | None,
        call_id: str,
        agent: str | None,
        parent: str | None,
        own_caller: bool = False,
    ) -> None:
        self.plan = plan  # all the call reads of its registry, frozen at entry (plan.py)
        self.results = plan.results
        self.name = name
        self.raw_arguments = arguments
        self.arguments: Any = None  # their snapshot, taken at entry (R11): what the body gets
        self.parent = parent
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
        # Loop time the call entered its state (-1: not yet, or no loop): what in_flight()
        # reports time in state from.  Read only where code of someone else's -- the caller's,
        # a hook's, the body's, another task's, a tap's or a trace sink's -- can run while the
        # call is in that state, for only there can in_flight() be asked.  Not read (a clock
        # reading each, on every plain call) for the states the driver leaves synchronously
        # with none of that code run: ``materialized`` (publish() unlists the call in the same
        # step), ``around_after`` of a call without wrappers (settled() follows the body at
        # once), and ``finalizing`` reached by a through step (only settled() takes one there,
        # when publish() follows).  A tap or a trace sink that runs code (``stepwise``) runs in
        # every state: then every state is read.  tests/test_python_binding.py holds it.
        self.entered = -1.0
        self.clock: Callable[[], float]  # the event loop's, once running: set by enter()
        # that loop's timers (eventloop.timers): a step taken outside the loop sets them there
        self.call_later: Callable[[float, Callable[[], None]], Timer]
        self.watchdog: Timer | None = None  # the drain warning, while draining
        self.agent = agent
        self.deferred: list[Any] | None = None  # made by the first defer_context()
        self.merged = False  # True once deferred contexts can no longer attach (C3)
        self.result: ToolResult = _NO_RESULT  # the result the call holds between stages
        self.wrappers = plan.around  # the call's one list of around listeners
        self.node: Node  # set by enter(), once the caller signal is captured; offer() steps it
        self.state: str = plan.table.initial  # always self.node.state (offer() sets both)
        self.path: list[PathStep] = []  # the steps taken: the call's explanation
        # The cancellation outcome the last step published over the result the call held
        # (compiled.Edge.cancels), or None: the stage that took the step builds its result.
        self.cancels: str | None = None
        self.trace = plan.trace  # the trace sink, or None (one test per emission point)
        self.tap = plan.on_step  # told every step, before the trace sink
        # Whether each step is offered on its own (no two taken as one, offer_through): when
        # code of anyone's runs between steps -- a tap, or a trace sink that is not a list's
        # append -- and could abort a signal there.
        self.stepwise = self.tap is not None
        if self.trace is not None and runs_code(self.trace):
            self.stepwise = True
        # The view hooks and the body see: made at entry, with the snapshot and the slot's
        # first value, so that entry writes it once.
        self.view: Execution

    def enter(self) -> None:
        """Entry (R11), synchronous: snapshot the arguments, *then* capture the caller signal
        and abortedAtEntry, list the call as in flight and leave the ``entry`` state.

        The capture follows the snapshot (as in the original), so an abort while the arguments
        are snapshotted is a pre-aborted entry, and one after it is a caller abort after entry.
        No user code but a trace sink runs between the capture and the step out of ``entry``,
        and that step is taken without offering a caller abort first: one seen there is offered
        with the next event, after entry, as it happened after the capture.
        """
        plan = self.plan
        try:
            arguments: Any = snapshot(self.raw_arguments, "$.arguments")
            invalid: BaseException | None = None
        except (NotSerializable, RecursionError) as exc:
            arguments, invalid = None, exc
        self.arguments = arguments
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
                given.add_listener(self)  # the call is its own listener: see __call__
            self.caller = own.signal
        elif self.own_caller:  # C is the call signal itself: only task cancellation aborts it
            captured = "live"
            self.controller = own = AbortController()
            self.caller = own.signal
        self.view = Execution(
            self, self.call_id, self.name, arguments, self.agent, self.parent, self.caller,
            self.path,
        )
        # The start node of the call's shape: the plan fixes all of it but the caller signal and
        # whether an agent calls, so it keeps the nodes by those two (cheaper than a look-up of
        # the whole shape in the table's graphs, which it is filled from).
        starts = plan.starts[self.agent is not None]
        node = starts.get(captured)
        if node is None:
            shape = (
                captured,
                self.agent is not None,
                plan.approval is not None,
                plan.retry,
                len(self.wrappers),
            )
            node = starts[captured] = initial_node(plan.table, shape)
        self.node = node
        try:  # the clock is read by the step out of ``entry``, just below
            self.clock, self.call_later = clock_and_timers()
        except RuntimeError:  # execute() called outside the loop that will await it
            self.clock = _no_loop  # until prepare() takes that loop's clock and timers (none
            # is set before: the one timer a call sets, the drain warning, comes with its body)
        plan.calls.enter(self)
        if self.trace is not None:
            self.emit(
                "call_entry",
                caller=captured,
                agent=self.agent is not None,
                approval_seam=self.node.current.approval_seam,
                revision=plan.table.name,
                retry=plan.retry,
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

    def __call__(self, given: AbortSignal) -> None:
        """The call's listener on the given signal, which aborted: so does the call signal, with
        its reason.  The call itself is the listener (as a relay ``Fusion`` is): an object hashed
        by identity is found in a signal's listener table faster than a bound method made for
        each of the two operations every call with a signal does."""
        given.remove_listener(self)
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
            self.given.remove_listener(self)

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
        self.plan.calls.leave(self)
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
        slot = self.view.signal
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
        slot, own = self.view.signal, self.controller
        return (slot is not None and slot.aborted) or (own is not None and own.signal.aborted)

    def watch_draining(self) -> None:
        delay = self.plan.drain_warning
        if delay is not None and self.watchdog is None:
            self.watchdog = self.call_later(delay, self.warn_draining)

    def warn_draining(self) -> None:
        log.warning(
            "call %s (%s): the body is still running %gs after its signal aborted (state %s); "
            "the registry keeps waiting for it (R27) -- make the body watch its signal",
            self.call_id,
            self.name,
            self.plan.drain_warning,
            self.state,
        )

    # -- talking to the machine -------------------------------------------------------------

    def offer(self, key: Occurrence | str, caller_first: bool = True) -> str | None:
        """Step the compiled machine on ``key`` -- an event's name, or an :class:`Occurrence`
        from a table made by :func:`_observed` -- after any caller abort not yet seen (unless
        ``caller_first`` is false), do what the step's precomputed effect says, note in
        ``cancels`` the cancellation it publishes over the result held (if any); return the
        call's outcome."""
        if caller_first and self.unseen_abort:
            self.unseen_abort = False
            self.offer("caller_abort", False)
        node = self.node
        edge = node.edges.get(key) or node.expand(self.plan.table, key)
        _, node, record, effect, line, self.cancels = edge
        self.node = node
        state = self.state = node.state
        self.path.append(record)
        if effect:
            # the state's clock starts unless nobody can ask in_flight() in it (``entered``)
            if self.stepwise or not (
                state == "materialized" or (state == "around_after" and not self.wrappers)
            ):
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
        through = node.throughs.get(key) or node.through(self.plan.table, key)
        if through is None:
            return self.offer(key[0])
        node = self.node = through.node
        self.cancels = through.cancels
        self.state = node.state
        self.path += through.records
        if through.moved and node.state != "finalizing":  # publish() follows (``entered``)
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
        """Write one trace line made from ``template``
        (:func:`~toolcancel.contract.trace.line_template`: from :data:`_LINES`, or a compiled
        edge's), with this call's id."""
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


_NO_RESULT: Final = ToolResult(())


def _no_loop() -> float:
    """The clock of a call entered outside any event loop: ``prepare()`` replaces it."""
    return -1.0


_LINES: Final = line_templates()
"""Every trace line the registry writes outside the machine's steps but ``call_entry`` and
``result``, by event and field values (a line copies its template)."""


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
