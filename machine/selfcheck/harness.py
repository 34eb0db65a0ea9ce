"""Scenarios: a small, closed language for one tool call and when it is cancelled.

A scenario fixes every hook's behaviour from a fixed vocabulary (what pre-execute decides, what
approval answers, what each around wrapper does, what the body does, what post-execute decides)
and a *cancellation point*.  Every wait is a named **gate**; gates are released one at a time in
the order the call reaches them, so a scenario runs the same way every time -- no sleeps, no
wall-clock timers (time is virtual; only the timeout policy's timer uses it -- and the hold: an
uncooperative body whose signal aborted is held a day of virtual time, :data:`HOLD_S`, and the
call must still be waiting for it, R27).

Cancellation points:

* ``never``;  ``before_entry`` (the caller signal is aborted before ``execute()``);
* ``in_entry`` -- abort while ``execute()`` snapshots the arguments (the arguments are a mapping
  whose iteration aborts the caller): entry captures the signal after the snapshot, so this is
  a pre-aborted entry (R11);
* ``after_call`` -- abort right after ``execute()`` returned, before its awaitable is awaited
  (``create_task(registry.execute(...)); caller.abort()``): the call has entered (Python binding
  P0), so this is a caller abort after entry;
* ``gate:<name>`` -- abort the caller while the call waits at that gate, then release it
  (gates: ``pre``, ``approval``, ``w<i>_before``, ``w<i>_after``, ``body``, ``post``);
* ``step:<k>`` -- abort synchronously right after the call's k-th transition (counting every
  transition except the caller aborts themselves): cancellation between any two transitions;
* ``after`` -- abort once the result is published (it must change nothing);
* ``with_deadline`` -- under ``timeout = "timer_first"``, abort at the body gate in the same
  synchronous step as the tool's deadline expires: ``with_deadline:caller`` aborts the caller
  first (its listeners run before the due timer's callback; what ``with_deadline`` alone runs),
  ``with_deadline:timer`` right after the timer's callback (CONTRACT.md R34: either is allowed).

A ``task`` caller gives up by cancelling the task awaiting the call instead (``task.cancel()``;
``after_call`` and ``gate:<name>`` only): the binding aborts the call signal when that task next
runs (P2), and the caller's await raises ``CancelledError`` once the call published its result,
which the observation keeps (``caller_cancelled``) for the judge to accept or not.

:class:`Harness` interprets a scenario against a real :class:`~toolcancel.ToolRegistry` (or any
factory that builds one, such as a deliberately broken mutant) and returns an
:class:`Observation`: what the *environment* saw -- which hooks ran with what, when the harness
aborted what, when the body started and settled, what was notified -- independently of what the
registry recorded about itself.  The model checker (:mod:`toolcancel.selfcheck.verifier`) compares
the two. The same vocabulary is what language-neutral vectors are written in.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from itertools import count, repeat
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

from ..contract.core import PathStep
from ..contract.errors import ToolcancelError
from ..contract.results import FrozenDict, ToolError, ToolOutput, ToolResult, text_block
from ..oracle.observation import CallerReason, Observation, WrapperReason
from ..oracle.scenario_language import (
    APPROVALS,
    ARGS,
    BLOCK_CONTEXT,
    BLOCK_TEXT,
    BODIES,
    BODY_FAILURE,
    BODY_STRUCTURED_FAILURE,
    BODY_TEXT,
    BUDGET_MS,
    CALLERS,
    DEFERRED,
    GUARDS,
    HOLD_S,
    OBSERVERS,
    OUTER_MS,
    POST_CONTEXT,
    POST_FAILURE,
    POSTS,
    PRE,
    REWRITTEN,
    TIMEOUTS,
    TOOL_NAME,
    WRAPPERS,
    Scenario,
    ScenarioError,
)
from ..runtime.deadline import Deadline, deadline
from ..runtime.execution import Execution
from ..runtime.hooks import (
    Accept,
    Allow,
    Approval,
    ApprovalRequest,
    Ask,
    Block,
    Deny,
    Next,
    PostDecision,
    PreDecision,
)
from ..runtime.signals import AbortController, AbortSignal
from ..runtime.timeout_policy import TOOL_TIMEOUT, install_timeout_policy
from ..runtime.virtual_time import VirtualClock, run

if TYPE_CHECKING:  # loaded only when a harness runs a call
    from ..runtime.registry import ToolRegistry



RegistryFactory: TypeAlias = "Callable[..., ToolRegistry]"


class Harness:
    """Runs one scenario against a registry built by ``factory`` and observes it."""

    def __init__(
        self,
        scenario: Scenario,
        factory: RegistryFactory | None = None,  # None: toolcancel.ToolRegistry
        clock: VirtualClock | None = None,
        retry: str | None = None,
        *,
        classify: Literal["identity", "code"] = "identity",
        trace: bool = False,
    ) -> None:
        self.s = scenario
        self.trace = trace  # record the registry's own trace in the observation (verify's)
        self.classify = classify  # how the timeout policy tells its own expiry (code: D13)
        if factory is None:  # loaded here, not with the module: see TYPE_CHECKING above
            from ..runtime.registry import ToolRegistry

            factory = ToolRegistry
        self.factory: RegistryFactory = factory
        self.clock = clock
        self.retry = retry
        self.obs = Observation(scenario, retry)
        self.waiting: dict[str, asyncio.Future[None]] = {}
        self.steps = 0  # transitions taken, caller aborts excluded
        self.caller: AbortController | None = None
        self.pre_slot: AbortSignal | None = None  # the slot as pre-execute saw it: C (R23)
        self.aborting: list[tuple[int, AbortController]] = []
        self.outer: list[tuple[int, Deadline]] = []  # outer_deadline wrappers' deadlines
        self.signals: list[tuple[str, AbortSignal]] = []
        self.task: asyncio.Task[ToolResult] | None = None
        self.body_signal: AbortSignal | None = None  # the signal the latest body run was given
        self.task_cancelled = False  # a task caller cancelled the task awaiting the call
        self.split_step = False  # with_deadline:timer's abort came after a body moved on
        self.abort_step = _abort_step(scenario.cancel)  # the transition ``step:<k>`` aborts after
        self.uninstall: Callable[[], None] = _nothing  # the timeout policy's, once installed
        self.idle: Callable[[], Awaitable[None]] = _idle  # the loop's clock's, once running

    # -- the environment's own record ----------------------------------------------------------

    def log(self, *entry: Any) -> None:
        self.obs.log.append(entry)

    def abort_caller(self) -> None:
        if self.s.caller == "task":  # the caller gives up by cancelling the awaiting task
            if self.task is not None and not self.task.done() and not self.task_cancelled:
                self.task_cancelled = True
                self.task.cancel()
                # The cancellation reaches the call only when the cancelled task next runs,
                # after what was already ready to run (a body a wrapper's abort woke goes on
                # first): logged right after that run, the abort is where a correct registry
                # sees it.  Known from the loop's order alone, not from the registry.
                asyncio.get_running_loop().call_soon(self.log_task_cancelled)
            return
        c = self.caller
        if c is not None and not c.signal.aborted:
            self.log("abort", "caller", self.steps)
            c.abort(CallerReason("the caller cancelled"))

    def abort_right_after_the_timer(self) -> None:
        """Abort the caller in the loop iteration that runs the tool's due deadline timer,
        straight after it: a callback due later than the timer but already due is queued right
        behind it, before anything the timer's abort woke can run (``with_deadline:timer``;
        a body that settled in between would fail the run, :attr:`split_step`)."""
        loop = asyncio.get_running_loop()
        settled = sum(1 for e in self.obs.log if e[0] == "body_settle")

        def abort() -> None:
            moved = sum(1 for e in self.obs.log if e[0] == "body_settle") != settled
            self.split_step = self.split_step or moved
            self.abort_caller()

        # Due after the deadline's timer (the clock went 1 ms past it), and strictly before
        # now: asyncio runs a handle only when it is due by more than the clock's resolution,
        # which a long virtual run's large float time cannot represent.
        loop.call_at(loop.time() - 0.0005, abort)

    def log_task_cancelled(self) -> None:
        self.log("abort", "caller", self.steps)

    def tap(self, view: Execution, step: PathStep) -> None:
        if step.event == "caller_abort":
            return
        self.steps += 1
        if self.steps == self.abort_step:
            self.abort_caller()

    async def gate(self, name: str, signal: AbortSignal | None = None) -> None:
        """Wait until the driver releases ``name`` (or, for a cooperative body, ``signal``
        aborts)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting[name] = fut
        self.log("gate", name)
        listener = None
        if signal is not None:

            def listener(_: AbortSignal) -> None:
                if not fut.done():
                    fut.set_result(None)

            if signal.aborted:
                listener(signal)
            else:
                signal.add_listener(listener)
        try:
            await fut
        finally:
            self.waiting.pop(name, None)
            if signal is not None and listener is not None:
                signal.remove_listener(listener)

    # -- the hooks, from the vocabulary --------------------------------------------------------

    def build(self) -> ToolRegistry:
        s = self.s
        options: dict[str, Any] = {} if self.retry is None else {"retry": self.retry}
        if self.trace:  # to a plain list's append: a sink that runs no code
            options["trace"] = self.obs.trace.append
        reg = self.factory(revision=s.revision, on_step=self.tap, **options)
        reg.add_pre_execute(self.pre_hook)
        if s.approval_seam:
            reg.set_approval(self.approval_seam)
        reg.add_guard(self.guard)
        for i, w in enumerate(s.wrappers):
            reg.add_around(self.wrapper(i, w))
        if s.timeout != "absent":
            self.uninstall = install_timeout_policy(reg, classify=self.classify)
        if s.tool_known:
            reg.register(
                TOOL_NAME, self.body, timeout_ms=None if s.timeout == "absent" else BUDGET_MS
            )
        reg.add_post_execute(self.post_hook)
        reg.add_observer(self.observe)
        if s.observer == "throws":
            reg.add_observer(_throwing_observer)
        return reg

    def watch(self, what: str, signal: AbortSignal | None) -> None:
        """Count ``signal``'s listeners after the call (R22), once per signal object."""
        if signal is not None and all(sig is not signal for _, sig in self.signals):
            self.signals.append((what, signal))

    async def pre_hook(self, view: Execution, nxt: Next) -> PreDecision:
        self.pre_slot = view.signal
        # The slot pre-execute sees is the registry's own call signal (P1), not the caller's
        # given one: the registry's relay and body watch hang on it (R22).
        self.watch("registry's call signal", view.signal)
        await self.gate("pre")
        d = self.s.pre
        self.log("pre", d)
        if d == "allow":
            return Allow()
        if d == "deny":
            return Deny("policy refused the call")
        if d == "ask":
            return Ask("needs a human")
        if d == "throw":
            raise RuntimeError("pre-execute policy failed")
        raise ToolError("policy store unavailable", code="POLICY_DOWN")

    async def approval_seam(self, request: ApprovalRequest) -> Approval:
        if self.caller is not None:
            # C itself: the signal pre-execute found in the slot (the call signal, P1), which
            # no pre-execute listener of the harness replaces.
            self.obs.approval_signal = "pre_slot" if request.signal is self.pre_slot else "other"
        await self.gate("approval")
        a = self.s.approval
        self.log("approval", a)
        if a == "throw":
            raise RuntimeError("approval channel crashed")
        return Approval(a)

    def guard(self, view: Execution) -> str | None:
        self.log("guard", self.s.guard)
        if self.s.guard == "deny":
            return "guard refused the call"
        if self.s.guard == "throw":
            raise RuntimeError("guard crashed")
        return None

    def wrapper(self, i: int, behaviour: str) -> Callable[[Execution, Next], Any]:
        async def around(view: Execution, nxt: Next) -> ToolResult:
            self.log("wrapper_in", i)
            upstream = view.signal
            mine: AbortSignal | None = upstream
            if behaviour == "wait_before":
                await self.gate(f"w{i}_before")
            if behaviour in ("replace_live", "replace_aborting"):
                ctl = AbortController()
                mine = ctl.signal
                self.signals.append((f"wrapper {i} signal", mine))
                if behaviour == "replace_aborting":
                    self.aborting.append((i, ctl))
                view.signal = mine
            elif behaviour == "outer_deadline":
                outer = deadline(upstream, OUTER_MS, TOOL_TIMEOUT)
                self.outer.append((i, outer))
                mine = outer.signal
                self.signals.append((f"wrapper {i} deadline", mine))
                view.signal = mine
            elif behaviour == "replace_aborted":
                mine = AbortSignal.abort(WrapperReason(f"wrapper {i} refused"))
                view.signal = mine
            elif behaviour == "remove":
                mine = None
                view.signal = None
            elif behaviour == "short_success":
                return ToolResult((text_block(f"wrapper {i} answered"),))
            elif behaviour == "short_error":
                return ToolResult((text_block(f"Error: wrapper {i} refused"),), is_error=True)
            elif behaviour == "throw_before":
                raise RuntimeError(f"wrapper {i} failed before delegating")
            try:
                result: ToolResult = await nxt()
                if behaviour == "retry":
                    self._check_slot(view, mine, i)
                    result = await nxt()
            finally:
                self._check_slot(view, mine, i)
                view.signal = upstream
                for j, outer in self.outer:
                    if j == i:
                        outer.dispose()
            if behaviour == "wait_after":
                await self.gate(f"w{i}_after")
            if behaviour == "throw_after":
                raise RuntimeError(f"wrapper {i} failed after delegating")
            return result

        return around

    def _check_slot(self, view: Execution, mine: AbortSignal | None, i: int) -> None:
        self.obs.slot_after_next.append(view.signal is mine)

    async def body(self, args: Any, view: Execution) -> Any:
        s = self.s
        self.obs.body_starts += 1
        self.obs.body_pending = True
        self.log("body_start", self.steps)
        signal = view.signal
        self.body_signal = signal
        self.watch("body's fused signal", signal)
        if s.body.startswith("defer_"):
            for ctx in DEFERRED:
                view.defer_context(ctx)
            self.obs.deferred += DEFERRED  # each run of a retried body defers again (D11)
        try:
            await self.gate("body", signal if s.cooperative else None)
        finally:
            self.obs.body_pending = False
            aborted = signal is not None and signal.aborted
            self.log("body_settle", aborted, signal.reason if aborted and signal else None)
        if s.body in ("success", "defer_success"):
            return [text_block(BODY_TEXT)]
        if s.body == "success_meta":
            return ToolOutput([text_block(BODY_TEXT)], meta={"rows": 3})
        if s.body == "bad_meta":
            return ToolOutput([text_block(BODY_TEXT)], meta={"handle": object()})
        if s.body == "throw_structured":
            raise ToolError(BODY_STRUCTURED_FAILURE, code="ENOSPC")
        raise RuntimeError(BODY_FAILURE)

    async def post_hook(self, view: Execution, result: ToolResult, nxt: Next) -> PostDecision:
        self.log("post_in", result)
        if self.obs.post_steps is None:
            self.obs.post_steps = self.steps
        await self.gate("post")
        p = self.s.post
        self.log("post", p)
        if p == "accept":
            return Accept()
        if p == "accept_content":
            return Accept(content=[text_block(REWRITTEN)])
        if p == "accept_contexts":
            self.obs.post_contexts = (POST_CONTEXT,)
            return Accept(contexts=[POST_CONTEXT])
        if p == "block":
            self.obs.block_contexts = (BLOCK_CONTEXT,)
            return Block([text_block(BLOCK_TEXT)], contexts=[BLOCK_CONTEXT])
        raise RuntimeError(POST_FAILURE)

    def observe(self, view: Execution, result: ToolResult) -> None:
        """The first observer, and an acting one: it finds the result already deep-frozen
        (R30) and the view frozen (R31) -- tries to change both and must be refused."""
        self.log("notify")
        self.obs.notified.append(result)
        self.obs.path = view.path
        refused = unfrozen(result) is None
        slot = view.signal
        try:
            view.signal = None
        except ToolcancelError:
            view_refused = True
        else:
            view_refused = False
            view.signal = slot
        for attempt in _MUTATIONS:
            try:
                attempt(result)
            except Exception:  # refused (or nothing there to change)
                continue
            refused = False
        if self.obs.frozen is None:
            self.obs.frozen = (refused, view_refused)

    # -- the driver ----------------------------------------------------------------------------

    async def run(self) -> Observation:
        """Run the scenario to quiescence, releasing gates one at a time."""
        # the clock the loop runs on, looked up once: ``idle()`` is the harness's every wait
        self.idle = _clock_of(asyncio.get_running_loop()).idle
        with quiet_failures():
            try:
                return await self._run()
            finally:
                # Let go of what makes a finished run a reference cycle, so it is freed by
                # reference counting rather than left for the cycle collector (a model check
                # runs them by the hundred thousand): the call's task holds the call, whose
                # hooks are this harness's methods; the timeout policy's wrapper holds the
                # registry whose hook list holds it (uninstalled: no call enters after this).
                self.task = None
                uninstall, self.uninstall = self.uninstall, _nothing
                uninstall()

    async def _run(self) -> Observation:
        s, obs = self.s, self.obs
        if s.caller != "none" and (s.caller != "task" or s.revision == "revised"):
            self.caller = AbortController()  # a task caller's is never aborted (revised: R40)
            if s.caller == "aborted":
                self.caller.abort(CallerReason("aborted before entry"))
            self.signals.append(("caller signal", self.caller.signal))
        if s.cancel == "before_entry":
            self.abort_caller()
        reg = self.build()
        args: Any = {"q": "x"} if s.args == "ok" else {"q": {1, 2}}
        if s.cancel == "in_entry":
            args = _AbortingArguments(args, self.abort_caller)
        # A seed task caller passes no signal=: the call's own signal is C (Python binding P1)
        given: dict[str, Any] = {} if s.caller == "task" and self.caller is None else {
            "signal": None if self.caller is None else self.caller.signal
        }
        call = reg.execute(
            TOOL_NAME if s.tool_known else "no_such_tool",
            args,
            call_id="c1",
            agent="agent" if s.agent else None,
            **given,
        )
        if s.cancel == "after_call" and s.caller != "task":
            self.abort_caller()
        self.task = asyncio.ensure_future(call)
        if s.cancel == "after_call" and s.caller == "task":
            self.abort_caller()  # before the task first ran the call

        def settled(_: Any) -> None:  # what had started and settled when execute() settled
            done = sum(1 for e in obs.log if e[0] == "body_settle")
            obs.settled = (obs.body_starts, done)

        self.task.add_done_callback(settled)
        while True:
            await self.idle()
            if not self.waiting:
                break
            name = next(iter(self.waiting))
            await self.at_gate(name)
            fut = self.waiting.get(name)
            if fut is not None and not fut.done():
                fut.set_result(None)
        task = self.task
        if not task.done():
            obs.hung = True
            task.cancel()
            return obs
        if task.cancelled():
            if self.task_cancelled and len(obs.notified) == 1:
                # what the call published, which its cancelled caller never sees (the judge
                # decides whether that CancelledError was the caller's to get)
                obs.result, obs.caller_cancelled = obs.notified[0], True
            else:
                obs.error = asyncio.CancelledError()
        elif task.exception() is not None:
            obs.error = task.exception()
        else:
            obs.result = task.result()
        if s.cancel == "after":
            self.abort_caller()
            await self.idle()
        obs.watched = len(self.signals)
        for what, sig in self.signals:
            if sig.listener_count:
                obs.leaked_signals.append(f"{what} keeps {sig.listener_count} listener(s)")
        return obs

    async def at_gate(self, name: str) -> None:
        s = self.s
        if name == "body":
            for i, ctl in self.aborting:
                self.log("abort", "wrapper", self.steps, i)
                ctl.abort(WrapperReason("a wrapper deadline passed"))
            live = [(i, d) for i, d in self.outer if not d.signal.aborted]
            if live:
                if self.clock is None:
                    raise ScenarioError("outer_deadline needs the harness's virtual clock")
                for i, _ in live:
                    self.log("abort", "wrapper", self.steps, i)
                self.clock.advance(OUTER_MS / 1000 + 0.001)
                await self.idle()
            if s.timeout == "timer_first":
                if self.clock is None:
                    raise ScenarioError("timeout: timer_first needs the harness's virtual clock")
                if s.same_step == "caller":  # its listeners run before the due timer's callback
                    self.abort_caller()
                self.log("timer", self.steps)
                self.clock.advance(BUDGET_MS / 1000 + 0.001)
                if s.same_step == "timer":
                    self.abort_right_after_the_timer()
                await self.idle()
                if self.split_step:
                    raise ScenarioError("with_deadline:timer: a body settled between the "
                                        "deadline and the caller's abort (not one step)")
        if s.cancel == f"gate:{name}":
            self.abort_caller()
            if s.caller == "task":
                await self.idle()  # the cancelled task runs: only then does the call learn of it
        if name == "body" and self.obs.body_pending and not s.cooperative:
            await self.idle()
            assert self.task is not None
            if self.task.done():
                pass  # settled with its body running: the settled counts show it (R27)
            elif self.body_signal is not None and self.body_signal.aborted:
                await self.hold()

    async def hold(self) -> None:
        """Hold an uncooperative body whose signal aborted for :data:`HOLD_S` virtual seconds:
        however long it runs on, the call must keep waiting for it (R27, quiescence)."""
        clock = self.clock or VirtualClock.of(asyncio.get_running_loop())
        if clock is None:
            raise ScenarioError("holding an uncooperative body needs the harness's virtual clock")
        self.log("hold", self.steps)
        clock.advance(HOLD_S)
        await self.idle()
        assert self.task is not None
        elsewhere = [g for g in self.waiting if g != "body"]
        went = "settled" if self.task.done() else f"gate {elsewhere[0]}" if elsewhere else ""
        if self.obs.held is None or not self.obs.held[1]:  # the first hold the call moved on
            self.obs.held = (int(HOLD_S), went)
        # The body goes on ignoring its signal for as long as the rest of the call moves: a
        # call that went on is driven through its other gates first, so that an adapter's
        # ``settled_at`` shows it settling before its body (the driving rule of the vectors).
        for _ in range(100):
            elsewhere = [g for g in self.waiting if g != "body"]
            if not elsewhere:
                break
            await self.at_gate(elsewhere[0])
            fut = self.waiting.get(elsewhere[0])
            if fut is not None and not fut.done():
                fut.set_result(None)
            await self.idle()


def _abort_step(cancel: str) -> int:
    """The ``k`` of a ``step:<k>`` cancellation point as written (``step:7``), else 0 (never:
    transitions count from 1)."""
    kind, _, k = cancel.partition(":")
    return int(k) if kind == "step" and k.isdigit() and f"step:{int(k)}" == cancel else 0


class _AbortingArguments(Mapping[str, Any]):
    """Arguments whose snapshot aborts the caller: ``abort`` runs as entry iterates them."""

    def __init__(self, data: Mapping[str, Any], abort: Callable[[], None]) -> None:
        self.data = data
        self.abort = abort

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Any:
        self.abort()
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


_REGISTRY_LOG: Final = logging.getLogger("toolcancel.runtime.registry")


class quiet_failures:  # lower case, like contextlib.suppress: used as a function
    """Silence the registry's failure log (P6) while a scenario runs: its hooks fail by design,
    and a model check runs them by the hundred thousand.  A class, not a generator-based
    context manager: every schedule enters one, and a generator costs several times more."""

    __slots__ = ("before",)

    def __enter__(self) -> None:
        self.before = _REGISTRY_LOG.disabled
        _REGISTRY_LOG.disabled = True

    def __exit__(self, *exc: object) -> None:
        _REGISTRY_LOG.disabled = self.before


def unfrozen(result: ToolResult) -> str | None:
    """Where ``result`` is not deep-frozen (a mutable container, or a writable field), if
    anywhere: every container must be a tuple or a read-only mapping, all the way down.

    A frozen result -- every run's -- is walked once without keeping where each part is
    (:func:`_frozen`); only one that is not is walked again to say where."""
    if type(result) is not ToolResult:  # the slotted class itself has no __dict__
        try:
            object.__getattribute__(result, "__dict__")
        except AttributeError:
            pass
        else:
            return "the result object has a writable __dict__"
    if _frozen(result.content) and _frozen(result.contexts) and _frozen(result.meta):
        return None
    # (the container's own part, how its part is named, the part's key, the part): where a part
    # is is written out only for the failure, from the chain of containers
    parts: list[_Part] = [
        (None, "", "content", result.content),
        (None, "", "contexts", result.contexts),
        (None, "", "meta", result.meta),
    ]
    while parts:
        part = parts.pop()
        value = part[3]
        if value is None or type(value) in _SCALARS:
            continue
        if type(value) is FrozenDict or (  # the snapshot's own mapping: the common case
            not isinstance(value, tuple)
            and isinstance(value, Mapping)
            and not isinstance(value, MutableMapping)
        ):
            parts.extend(zip(repeat(part), repeat("."), value.keys(), value.values()))
        elif isinstance(value, tuple):
            parts.extend(zip(repeat(part), repeat("["), count(), value))
        else:
            return f"{_where(part)} is a {type(value).__name__}"
    return None


def _frozen(value: Any) -> bool:
    """Whether ``value`` is deep-frozen: what :func:`unfrozen`'s walk decides, without naming a
    place."""
    if value is None or type(value) in _SCALARS:
        return True
    if type(value) is FrozenDict or (
        not isinstance(value, tuple)
        and isinstance(value, Mapping)
        and not isinstance(value, MutableMapping)
    ):
        parts: Any = value.values()
    elif isinstance(value, tuple):
        parts = value
    else:
        return False
    for part in parts:
        if not (part is None or type(part) in _SCALARS or _frozen(part)):
            return False
    return True


_Part: TypeAlias = "tuple[_Part | None, str, Any, Any]"


def _where(part: _Part) -> str:
    """Where ``part`` is in the result: ``content[0].text``."""
    within, how, key, _ = part
    at = "" if within is None else _where(within)
    return f"{at}[{key}]" if how == "[" else f"{at}{how}{key}"


_SCALARS: Final = frozenset({str, int, float, bool})


def _poke_block(result: ToolResult) -> None:
    """it replaced the text of the first content block"""
    block = result.content[0]
    before = block["text"]
    block["text"] = "changed by an observer"
    block["text"] = before


def _poke_content(result: ToolResult) -> None:
    """it appended a content block"""
    result.content.append(text_block("added by an observer"))  # type: ignore[attr-defined]
    result.content.pop()  # type: ignore[attr-defined]


def _poke_field(result: ToolResult) -> None:
    """it flipped isError"""
    before = result.is_error
    setattr(result, "is_error", not before)  # noqa: B010 (a frozen field: must raise)
    setattr(result, "is_error", before)  # noqa: B010


_MUTATIONS: Final = (_poke_block, _poke_content, _poke_field)
"""What an acting observer tries on the result it was handed: each must fail.  One that does not
is reported and undone at once, so the rest of the record (and an adapter's answer built from
it) still shows what the registry published, and the failure cites R30, not its consequences."""


def _nothing() -> None:
    pass


def _throwing_observer(view: Execution, result: ToolResult) -> None:
    raise RuntimeError("observer crashed")


async def _idle() -> None:
    """Let every task run until all are blocked (on a gate, or done).

    The virtual clock the harness runs on knows that moment: it is when the loop would wait
    (:meth:`VirtualClock.idle`).  A deterministic condition instead of "wait a bit", read through
    the clock rather than the loop's private ready queue.
    """
    await _clock_of(asyncio.get_running_loop()).idle()


def _clock_of(loop: asyncio.AbstractEventLoop) -> VirtualClock:
    """The virtual clock ``loop`` runs on (the harness waits for its idle moments)."""
    clock = VirtualClock.of(loop)
    if clock is None:
        raise ScenarioError(
            "the scenario harness runs on virtual time (toolcancel.runtime.virtual_time)"
        )
    return clock


def run_scenario(
    scenario: Scenario, factory: RegistryFactory | None = None, *, retry: str | None = None
) -> Observation:
    """Run one scenario on a fresh event loop with virtual time (``retry``: the registry's
    retry behaviour, D11; default: the registry's own), recording the registry's trace."""
    clock = VirtualClock()
    return run(Harness(scenario, factory, clock, retry, trace=True).run(), clock=clock)


__all__ = [  # the language is re-exported: a scenario is read from either module
    "APPROVALS",
    "ARGS",
    "BLOCK_CONTEXT",
    "BLOCK_TEXT",
    "BODIES",
    "BODY_FAILURE",
    "BODY_STRUCTURED_FAILURE",
    "BODY_TEXT",
    "BUDGET_MS",
    "CALLERS",
    "DEFERRED",
    "GUARDS",
    "HOLD_S",
    "OBSERVERS",
    "OUTER_MS",
    "POSTS",
    "POST_CONTEXT",
    "POST_FAILURE",
    "PRE",
    "REWRITTEN",
    "TIMEOUTS",
    "TOOL_NAME",
    "WRAPPERS",
    "CallerReason",
    "Harness",
    "Observation",
    "RegistryFactory",
    "Scenario",
    "ScenarioError",
    "WrapperReason",
    "quiet_failures",
    "run_scenario",
    "unfrozen",
]
