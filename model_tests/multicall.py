"""Several calls in flight on shared registries, driven one deterministic step at a time.

The scenario harness (:mod:`toolcancel.selfcheck.harness`) runs *one* call and releases its gates in
the order the call reaches them.  Hypothesis' stateful tests need the opposite: a driver that keeps
many calls open at once and lets the test choose, step by step, which gate opens, whose caller
aborts, which wrapper-supplied signal aborts and when virtual time passes.  That is this module.

How it stays faithful to the harness (and so to the model checker):

* Every call gets its own :class:`~toolcancel.selfcheck.harness.Harness`, whose hook methods *are*
the scenario vocabulary.  A registry's hooks are thin dispatchers that find the call's harness by
  ``call_id``, so calls sharing a registry share its hook chain but not their behaviours.  What a
  harness records (gates, decisions, body start and settle, notifications, R23/R24/R27 problems)
  is what the harness records when the model checker runs it.
* The registry's ``on_step`` tap counts each call's transitions exactly as ``Harness.tap`` does,
  so an abort logged as ``("abort", "caller", k)`` means "after the k-th transition", and the
  model checker's replay can put it back in the same place.
* :meth:`World.observation` turns a finished call into an
:class:`~toolcancel.oracle.observation.Observation`
  so that :func:`toolcancel.selfcheck.verifier.check` and its parts judge it: one definition of the
  checks.

What the harness never does, and this driver adds: aborts and timer fires land *between* other
calls' steps, in any state a call can wait in, and in the synchronous states too (an abort armed
to land right after the call's next transition into a chosen state: the harness's ``step:k``,
named by where it lands).

Time: one :class:`~toolcancel.runtime.virtual_time.VirtualClock` patched onto one event loop for the
whole run.  Nothing ever blocks (every step ends with :func:`~toolcancel.selfcheck.harness._idle`,
which returns as soon as all tasks wait), so virtual time moves only when
:meth:`World.advance_clock` says so.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Final

from toolcancel import ToolRegistry
from toolcancel.contract.core import PathStep
from toolcancel.contract.errors import RegistryUsageError
from toolcancel.contract.loader import RevisionContract, load_contract
from toolcancel.contract.results import ToolResult
from toolcancel.oracle.observation import CallerReason, Observation, WrapperReason
from toolcancel.oracle.scenario_language import BUDGET_MS, Scenario
from toolcancel.runtime.registry import Approval, ApprovalRequest, Execution, Next
from toolcancel.runtime.signals import AbortController, AbortSignal
from toolcancel.runtime.timeout_policy import install_timeout_policy
from toolcancel.runtime.virtual_time import VirtualClock
from toolcancel.selfcheck.harness import Harness, _idle

Factory = Callable[..., ToolRegistry]

TOOL_NAMES: Final = {"plain": "tool", "budgeted": "budgeted_tool", "missing": "no_such_tool"}
"""What a call may ask for: a tool without a budget, one with ``BUDGET_MS``, or an unknown name."""

MAX_REGISTRIES: Final = 3
MAX_IN_FLIGHT: Final = 3

# ------------------------------------------------------------------------------------------------
# The coverage matrix: which (state, cancellation source) pairs a run can land in
# ------------------------------------------------------------------------------------------------


def matrix_cells() -> frozenset[tuple[str, str]]:
    """Every (non-terminal state of the contract, cancellation source) pair that can happen.

    * **caller**: every non-terminal state.  ``entry`` means the caller aborted before the call
      began (captured as aborted at entry, R25/R42); the synchronous states ``guards`` and
      ``finalizing`` are reached by an abort armed to land right after a transition.
    * **wrapper**: a wrapper-supplied signal matters only while the wrapper that put it in the
      slot is running, i.e. from ``around_before`` to its return: the states of the around
      dispatch stage (``draining`` among them).  Aborts of a signal whose wrapper has returned
      are still performed (they must change nothing, R22) but are not cells.
    * **timer**: the timeout policy is the innermost wrapper (as the scenario language installs
      it).  Its deadline is armed when it delegates, and base dispatch follows synchronously; it
      is disposed when the body settles, and the wrapper returns synchronously.  So a timer can
      only land while the body runs or drains.
    """
    contract = load_contract()
    states = [s for s in contract.states if not s.terminal]
    dispatching = next(set(st.states) for st in contract.stages if "body" in st.states)
    cells = {(s.name, "caller") for s in states}
    cells |= {(name, "wrapper") for name in dispatching}
    cells |= {("body", "timer"), ("draining", "timer")}
    return frozenset(cells)


MATRIX: Final = matrix_cells()

# ------------------------------------------------------------------------------------------------
# Per-registry and per-call records
# ------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class RegistrySetup:
    """One registry and the registry-wide choices every call on it shares."""

    name: str
    revision: str
    approval_seam: bool
    wrappers: tuple[str, ...]
    timeout_policy: bool
    observer: str
    registry: ToolRegistry

    @property
    def table(self) -> RevisionContract:
        return self.registry.contract


@dataclass(eq=False)
class ModelDeadline:
    """What the environment knows of the timeout policy's deadline for the running invocation:
    when it is due, and the signal it was derived from (an upstream abort disposes it)."""

    due: float
    upstream: AbortSignal | None
    born_aborted: bool
    fired: bool = False

    def armed(self) -> bool:
        upstream_aborted = self.upstream is not None and self.upstream.aborted
        return not (self.fired or self.born_aborted or upstream_aborted)


@dataclass(eq=False)
class CallRun:
    """One call: its harness (the environment's record), its task, and what the tap tracks."""

    call_id: str
    setup: RegistrySetup
    harness: Harness
    tool: str
    task: asyncio.Task[ToolResult]
    pre_aborted: bool = False
    view: Execution | None = None
    depth: int = 0
    # For each wrapper index: how many of its controllers existed when its current invocation
    # began (None: not running).  Index len(wrappers) is the timeout policy.
    running: list[int | None] = field(default_factory=list)
    deadline: ModelDeadline | None = None
    arms: list[tuple[str, str]] = field(default_factory=list)  # (state, source)
    wrapper_aborts: list[tuple[int, AbortController]] = field(default_factory=list)
    first_body_controllers: frozenset[int] | None = None
    checked: set[str] = field(default_factory=set)
    final: Observation | None = None

    @property
    def done(self) -> bool:
        return self.task.done()

    @property
    def state(self) -> str:
        """The call's machine state (``entry`` before its first transition)."""
        return "entry" if self.view is None else self.view.state

    def controllers(self, index: int) -> list[AbortController]:
        return [c for i, c in self.harness.aborting if i == index]

    def active_controller(self, index: int) -> AbortController | None:
        """The signal controller of the *running* invocation of wrapper ``index``, if any."""
        began = self.running[index] if index < len(self.running) else None
        mine = self.controllers(index)
        if began is None or len(mine) <= began:
            return None
        return mine[-1]

    def active_controllers(self) -> frozenset[int]:
        found = (self.active_controller(i) for i in range(len(self.setup.wrappers)))
        return frozenset(id(c) for c in found if c is not None)

    def __repr__(self) -> str:
        return f"<call {self.call_id} on {self.setup.name} in {self.state}>"


# ------------------------------------------------------------------------------------------------
# The world: one loop, one clock, a few registries, many calls
# ------------------------------------------------------------------------------------------------


class World:
    """The environment a stateful test drives.  Every public method runs the loop until every
    task waits again, so after each call the world is quiescent and can be inspected."""

    def __init__(self, factory: Factory = ToolRegistry) -> None:
        self.factory = factory
        self.clock = VirtualClock()
        self.loop = asyncio.new_event_loop()
        self._patch: contextlib.ExitStack = contextlib.ExitStack()
        self._patch.enter_context(self.clock.patch_loop(self.loop))
        self.registries: list[RegistrySetup] = []
        self.calls: dict[str, CallRun] = {}
        self.refused: list[str] = []
        self.cells: set[tuple[str, str]] = set()
        self.tap_errors: list[Exception] = []

    # -- plumbing ---------------------------------------------------------------------------

    def settle(self) -> None:
        """Run every ready task until all of them wait (on a gate) or are done."""
        self.loop.run_until_complete(_idle())

    def close(self) -> None:
        """Open every gate so that every call finishes, cancel whatever still waits, close the
        loop and unpatch the clock.

        Cancelling a call's task alone would not end it: a cancelled call still awaits the
        hook or body it is in (R27, Python binding), and those wait on the world's gates."""
        try:
            self.drain()
            pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                self.loop.run_until_complete(_idle())
            # Every call's failure is retrieved here, not left to the garbage collector: a
            # task collected with its exception unread logs a traceback at whatever moment the
            # collector runs, and on Python 3.11.7 that formatting re-enters ``ast.parse`` and
            # breaks a parse already under way (CPython gh-106905) -- Hypothesis parses source
            # while it sets up the next run, so a mutant's crashed call crashed the next test.
            made = [run.task for run in self.calls.values() if run.task is not None]
            for task in {*pending, *made}:
                if task.done() and not task.cancelled():
                    task.exception()  # the failure the run reported (or a cancelled call's)
        finally:
            self.loop.close()
            self._patch.close()

    def run_of(self, view: Execution) -> CallRun:
        return self.calls[view.call_id]

    def hit(self, run: CallRun, source: str, state: str | None = None) -> None:
        state = run.state if state is None else state
        if state != "materialized":
            self.cells.add((state, source))

    # -- registries ---------------------------------------------------------------------------

    def new_registry(
        self,
        revision: str,
        approval_seam: bool,
        wrappers: tuple[str, ...],
        timeout_policy: bool,
        observer: str,
    ) -> RegistrySetup:
        """A registry whose hooks dispatch to the calling call's harness."""
        reg = self.factory(revision=revision, on_step=self._tap, trace=self._trace)
        reg.add_pre_execute(lambda view, nxt: self.run_of(view).harness.pre_hook(view, nxt))
        if approval_seam:
            reg.set_approval(self._approval)
        reg.add_guard(lambda view: self.run_of(view).harness.guard(view))
        for i, behaviour in enumerate(wrappers):
            reg.add_around(self._wrapper(i, behaviour))
        if timeout_policy:
            install_timeout_policy(reg)  # innermost, as the scenario harness installs it
        for kind in ("plain", "budgeted"):
            reg.register(
                TOOL_NAMES[kind],
                self._body,
                timeout_ms=BUDGET_MS if kind == "budgeted" else None,
            )
        reg.add_post_execute(
            lambda view, result, nxt: self.run_of(view).harness.post_hook(view, result, nxt)
        )
        reg.add_observer(lambda view, result: self.run_of(view).harness.observe(view, result))
        if observer == "throws":
            reg.add_observer(_throwing_observer)
        setup = RegistrySetup(
            f"r{len(self.registries) + 1}",
            revision,
            approval_seam,
            tuple(wrappers),
            timeout_policy,
            observer,
            reg,
        )
        self.registries.append(setup)
        return setup

    async def _approval(self, request: ApprovalRequest) -> Approval:
        return await self.calls[request.call_id].harness.approval_seam(request)

    def _wrapper(self, i: int, behaviour: str) -> Callable[[Execution, Next], Any]:
        def around(view: Execution, nxt: Next) -> Any:
            return self.run_of(view).harness.wrapper(i, behaviour)(view, nxt)

        return around

    async def _body(self, args: Any, view: Execution) -> Any:
        return await self.run_of(view).harness.body(args, view)

    # -- calls --------------------------------------------------------------------------------

    def can_start(self) -> bool:
        return sum(1 for r in self.calls.values() if not r.done) < MAX_IN_FLIGHT

    def start(
        self,
        setup: RegistrySetup,
        *,
        caller: str,
        args: str,
        agent: bool,
        pre: str,
        approval: str,
        guard: str,
        tool: str,
        body: str,
        cooperative: bool,
        post: str,
    ) -> CallRun | None:
        """Start one call on ``setup``'s registry; None when the registry refused it.

        ``caller="aborted"`` aborts the caller just before the call is handed to ``execute()``,
        which enters it at once (Python binding P0): a pre-aborted entry.  (An abort after
        ``execute()`` returned is an abort after entry, one the tap arms like any other.)  A
        revised registry must refuse a call without a caller signal (R40) before entry: its
        ``execute()`` raises; the environment checks that here.
        """
        call_id = f"c{len(self.calls) + len(self.refused) + 1}"
        if caller == "none" and setup.revision == "revised":
            self.refused.append(call_id)
            try:
                refused = setup.registry.execute(TOOL_NAMES[tool], {"q": "x"}, call_id=call_id)
            except RegistryUsageError:
                return None
            refused.close()
            raise AssertionError(
                f"R40: the revised registry {setup.name} entered call {call_id} without a "
                "caller signal instead of refusing it"
            )
        scenario = Scenario(
            revision=setup.revision,
            caller=caller,
            args=args,
            agent=agent,
            approval_seam=setup.approval_seam,
            tool_known=tool != "missing",
            pre=pre,
            approval=approval,
            guard=guard,
            wrappers=setup.wrappers,
            timeout="budget" if setup.timeout_policy and tool == "budgeted" else "absent",
            body=body,
            cooperative=cooperative,
            post=post,
            observer=setup.observer,
        )
        harness = Harness(scenario, self.factory, self.clock)
        # the timeout policy wraps every tool of the setup, budgeted or not
        harness.obs.around = len(setup.wrappers) + setup.timeout_policy
        if caller != "none":
            harness.caller = AbortController()
            harness.signals.append(("caller signal", harness.caller.signal))
        call_args: Any = {"q": "x"} if args == "ok" else {"q": {1, 2}}
        # Registered before execute() enters the call, so the tap sees its first transition.
        run = CallRun(call_id, setup, harness, tool, None)  # type: ignore[arg-type]
        run.running = [None] * (len(setup.wrappers) + 1)
        self.calls[call_id] = run
        if caller == "aborted":
            assert harness.caller is not None
            self.hit(run, "caller", "entry")
            run.pre_aborted = True
            harness.caller.abort(CallerReason("aborted before entry"))
        task = self.loop.create_task(
            setup.registry.execute(
                TOOL_NAMES[tool],
                call_args,
                signal=None if harness.caller is None else harness.caller.signal,
                call_id=call_id,
                agent="agent" if agent else None,
            )
        )
        run.task = harness.task = task
        self.settle()
        return run

    def release(self, run: CallRun) -> bool:
        """Open the gate the call waits at, if any (a call is one task: at most one gate)."""
        for fut in list(run.harness.waiting.values()):
            if not fut.done():
                fut.set_result(None)
                self.settle()
                return True
        return False

    def abort_caller(self, run: CallRun) -> None:
        c = run.harness.caller
        if c is None or c.signal.aborted:
            return
        self.hit(run, "caller")
        run.harness.abort_caller()
        self.settle()

    def abort_wrapper_signal(self, run: CallRun) -> None:
        """Abort the most recently made, still live signal of a ``replace_aborting`` wrapper."""
        if self._abort_wrapper(run):
            self.settle()

    def _abort_wrapper(self, run: CallRun) -> bool:
        live = [(i, c) for i, c in run.harness.aborting if not c.signal.aborted]
        if not live:
            return False
        i, ctl = live[-1]
        if ctl is run.active_controller(i):
            self.hit(run, "wrapper")
        run.wrapper_aborts.append((len(run.harness.obs.log), ctl))
        run.harness.log("abort", "wrapper", run.harness.steps, i)
        ctl.abort(WrapperReason("a wrapper deadline passed"))
        return True

    def abort_on_entering(self, run: CallRun, source: str, state: str) -> None:
        """Arm an abort that lands synchronously right after the call's next transition into
        ``state`` (self-transitions and caller aborts included), like the harness's
        ``step:k`` but named by where it lands.  It waits for a transition into ``state`` at which
        its source can abort (a live caller; a running ``replace_aborting`` wrapper), and never
        lands if the call does not get there."""
        if not run.done:
            run.arms.append((state, source))

    def waiting(self) -> bool:
        """Whether some call waits at a gate (else releasing and aborting change nothing)."""
        return any(r.harness.waiting for r in self.calls.values())

    def deadline_armed(self) -> bool:
        return any(r.deadline is not None and r.deadline.armed() for r in self.calls.values())

    def advance_clock(self, ms: int) -> None:
        """Let ``ms`` virtual milliseconds pass; every deadline due by then fires.

        The loop is quiescent here, so the timer callbacks are the first thing to run: each lands
        in the state its call is in now.
        """
        now = self.clock.time() + ms / 1000
        for run in self.calls.values():
            d = run.deadline
            if d is not None and d.armed() and d.due < now:
                d.fired = True
                self.hit(run, "timer")
                run.harness.log("timer", run.harness.steps)
        self.clock.advance(ms / 1000)
        self.settle()

    def finish(self, run: CallRun) -> None:
        """Open the call's gates one after another until it is done (or waits no more)."""
        for _ in range(100):
            if run.done or not self.release(run):
                return

    def drain(self) -> None:
        """Open every gate, again and again, until no call waits any more."""
        for _ in range(100):
            waiting = [r for r in self.calls.values() if r.harness.waiting]
            if not waiting:
                return
            for run in waiting:
                for fut in list(run.harness.waiting.values()):
                    if not fut.done():
                        fut.set_result(None)
            self.settle()

    # -- the tap: the environment's count of each call's transitions ---------------------------

    def _trace(self, line: dict[str, Any]) -> None:
        """The registry's trace line to its call's observation: each call's record is the
        registry's own trace of it, then what its harness saw (what verify judges)."""
        run = self.calls.get(line["call"])
        if run is not None:
            run.harness.obs.trace.append(line)

    def _tap(self, view: Execution, step: PathStep) -> None:
        """Count the call's transitions, track its wrappers and deadline, fire armed aborts.

        A failure in here is the test's own, not the registry's: it is kept for the test to
        raise rather than thrown into the registry, which would blame the registry for it.
        """
        try:
            self._track(view, step)
        except Exception as exc:
            self.tap_errors.append(exc)

    def _track(self, view: Execution, step: PathStep) -> None:
        run = self.calls.get(view.call_id)
        if run is None:
            return
        run.view = view
        if step.event != "caller_abort":
            self._count(run, view, step)
        for arm in [a for a in run.arms if a[0] == step.dest]:
            if self._abort_armed(run, arm[1]):
                run.arms.remove(arm)

    def _abort_armed(self, run: CallRun, source: str) -> bool:
        """Land an armed abort if its source can abort now (else it stays armed)."""
        if source == "caller":
            c = run.harness.caller
            if c is None or c.signal.aborted:
                return False
            self.hit(run, "caller")
            run.harness.abort_caller()
            return True
        if not any(
            (ctl := run.active_controller(i)) is not None and not ctl.signal.aborted
            for i in range(len(run.setup.wrappers))
        ):
            return False
        return self._abort_wrapper(run)

    def _count(self, run: CallRun, view: Execution, step: PathStep) -> None:
        run.harness.steps += 1
        t = run.setup.table.contract.transitions[step.transition]
        if t.depth > 0:
            self._enter(run, view)
        elif t.depth < 0:
            run.depth = max(0, run.depth - 1)
            if run.depth < len(run.running):
                run.running[run.depth] = None
                if run.depth == len(run.setup.wrappers):
                    run.deadline = None
        if t.invoke and run.first_body_controllers is None:
            run.first_body_controllers = run.active_controllers()

    def _enter(self, run: CallRun, view: Execution) -> None:
        i = run.depth
        run.depth += 1
        if i >= len(run.running):
            return
        run.running[i] = len(run.controllers(i))
        if i == len(run.setup.wrappers) and run.tool == "budgeted":
            # The timeout policy is about to derive its deadline from the slot as it is now.
            upstream = view.signal
            run.deadline = ModelDeadline(
                self.clock.time() + BUDGET_MS / 1000,
                upstream,
                born_aborted=upstream is not None and upstream.aborted,
            )

    # -- observations -------------------------------------------------------------------------

    def observation(self, run: CallRun) -> Observation:
        """The finished call as the model checker's :class:`Observation` of it.

        The scenario is completed with what the environment did: ``caller="aborted"`` when the
        caller aborted before entry, ``cancel="step:k"`` when it aborted after the k-th
        transition, ``timeout="timer_first"`` when the deadline fired while the (only) body run
        was in progress.  Wrapper aborts that cannot feed the first body run (made before it, by
        an invocation that never reached the body) are relabelled so the fused-signal check
        does not count them as that body's sources.
        """
        obs = run.harness.obs
        log = list(obs.log)
        first_body = run.first_body_controllers or frozenset()
        for index, ctl in run.wrapper_aborts:
            if id(ctl) not in first_body:
                log[index] = ("abort_elsewhere", *log[index][1:])
        s = obs.scenario
        caller = "aborted" if run.pre_aborted else s.caller
        at = next((e[2] for e in log if e[0] == "abort" and e[1] == "caller"), None)
        cancel = "never" if caller != "live" or at is None else f"step:{max(at, 1)}"
        timeout = s.timeout
        settle = next((i for i, e in enumerate(log) if e[0] == "body_settle"), len(log))
        timed = any(e[0] == "timer" for e in log[:settle])
        if timeout == "budget" and timed and obs.body_starts == 1 and "retry" not in s.wrappers:
            timeout = "timer_first"
        result: ToolResult | None = None
        error: BaseException | None = None
        if run.task.cancelled():
            error = asyncio.CancelledError()
        elif run.task.exception() is not None:
            error = run.task.exception()
        else:
            result = run.task.result()
        return replace(
            obs,
            scenario=replace(s, caller=caller, cancel=cancel, timeout=timeout),
            result=result,
            error=error,
            path=run.view.path if run.view is not None else (),
            log=log,
            leaked_signals=self.leaks(run),
        )

    def leaks(self, run: CallRun) -> list[str]:
        """The signals the test made for ``run`` that still have listeners."""
        return [
            f"{what} keeps {sig.listener_count} listener(s)"
            for what, sig in run.harness.signals
            if sig.listener_count
        ]


def _throwing_observer(view: Execution, result: ToolResult) -> None:
    raise RuntimeError("observer crashed")
