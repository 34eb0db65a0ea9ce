# The mutants patch the interpreted driver (typed Any) and return what it returns.
# mypy: disable-error-code="no-any-return"
"""Deliberately broken registries: proof that the checks bite.

Each mutant breaks exactly one guarantee of the contract by patching one piece of the real
implementation for as long as its context manager is active, and names the rule it breaks.
``toolcancel verify --mutants`` and the Hypothesis suite must kill every one of them: a check that
never fails against a broken registry proves nothing about a correct one.

``TURN_MUTANTS`` break the turn scheduler (killed by verify's turn batches and conform's turn
vectors) and ``OBSERVATION_MUTANTS`` break what only the adapter protocol's optional
observations show (killed by conform; verify reaches two of them).  They are kept apart because
the Hypothesis suite and ``verify --mutants`` judge single calls through the registry's record,
which cannot see them.  ``python -m toolcancel.selfcheck.adapter --mutant NAME`` serves any of the
three.

They ship in the self-verification room, so ``verify --mutants`` imports them like any
other module (the Hypothesis suite in model_tests/ imports them from here).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final
from unittest import mock

from ..contract.results import Results, ToolResult, thaw
from ..runtime import driver as driver_module
from ..runtime import fusion as fusion_module
from ..runtime import registry as registry_module
from ..runtime import scheduler as scheduler_module
from ..runtime import timeout_policy as timeout_module
from ..runtime.deadline import deadline
from ..runtime.signals import AbortController, AbortSignal

# The mutants patch the per-call driver's source as it runs: the default (pure) build, which
# CrossHair and the suite run too.  A compiled class refuses to be patched, so a
# TOOLCANCEL_COMPILE=1 install is refused here, in one line.
if registry_module.compiled():
    raise ImportError(
        "the mutants patch the registry's source: run them with the default (pure) build "
        "(pip install -e .), not a TOOLCANCEL_COMPILE=1 install"
    )


class ToolRegistry(registry_module.ToolRegistry):
    """The registry every mutant patches and checks (a subclass: patching its ``definition``
    leaves the package's class alone)."""


Factory = Callable[..., Any]


@dataclass(frozen=True)
class Mutant:
    name: str
    rule: str
    what: str
    patch: Callable[[], contextlib.AbstractContextManager[None]]
    revisions: tuple[str, ...] = ("seed", "revised")
    """The revisions where the broken guarantee exists at all (verify --mutants skips others)."""
    retry: str | None = None
    """The retry behaviour (D11) the broken guarantee belongs to, if only one: a test that
    serves the mutant through a registry must declare it (None: the registry's default)."""

    cancel: str = "signal"
    """How the caller must give up for the broken guarantee to show: ``task`` -- cancelling the
    task awaiting the call -- for a test that serves the mutant through our adapter
    (``--cancel task``); verify's space has both callers."""

    def rule_in(self, revision: str) -> str:
        """The rule the mutant breaks in ``revision`` (:data:`REVISED_RULE`)."""
        return REVISED_RULE.get(self.rule, self.rule) if revision == "revised" else self.rule

    @contextlib.contextmanager
    def active(self) -> Iterator[Factory]:
        """Patch the implementation; yield the registry factory to check."""
        with self.patch():
            yield ToolRegistry


REVISED_RULE: Final = {"R13": "R43"}
"""Where the revised contract restates a rule a mutant breaks: checkpoint C1 (R13, seed only)
is R43's order there."""

_Call: Any = driver_module._Call


@contextlib.contextmanager
def _races_body() -> Iterator[None]:
    """Reports the call as soon as the body's signal aborts, leaving the body running."""
    real = _Call.base_dispatch

    async def racing(self: Any) -> ToolResult:
        import asyncio

        task = asyncio.ensure_future(real(self))
        loop = asyncio.get_running_loop()
        lost: asyncio.Future[None] = loop.create_future()

        def on_abort(_: AbortSignal) -> None:
            if not lost.done():
                lost.set_result(None)

        signal = self.caller
        if signal is None:
            return await task
        signal.add_listener(on_abort)
        try:
            await asyncio.wait([task, lost], return_when=asyncio.FIRST_COMPLETED)
        finally:
            signal.remove_listener(on_abort)
        if task.done():
            return task.result()
        return self.results.aborted()  # the body is abandoned, still running

    with mock.patch.object(_Call, "base_dispatch", racing):
        yield


GRACE_S = 300.0
"""How long :func:`_abandons_after_grace` waits for a draining body before giving up on it."""


@contextlib.contextmanager
def _abandons_after_grace() -> Iterator[None]:
    """Waits for a body only ``GRACE_S`` seconds after its (fused) signal aborted, then stops
    waiting, leaves it running and goes on as if it had failed: ABORTED is published while the
    body still runs.  The "grace period" R27 forbids: the registry awaits the body, however long
    it ignores its signal."""
    import asyncio

    real_definition = ToolRegistry.definition

    def graced(body: Any) -> Any:
        async def run(args: Any, view: Any) -> Any:
            loop = asyncio.get_running_loop()
            task = asyncio.ensure_future(body(args, view))
            signal = view.signal
            if signal is None:
                return await task
            given_up: asyncio.Future[None] = loop.create_future()
            timers: list[asyncio.TimerHandle] = []

            def give_up() -> None:
                if not given_up.done():
                    given_up.set_result(None)

            def on_abort(_: AbortSignal) -> None:
                timers.append(loop.call_later(GRACE_S, give_up))

            if signal.aborted:
                on_abort(signal)
            else:
                signal.add_listener(on_abort)
            try:
                await asyncio.wait([task, given_up], return_when=asyncio.FIRST_COMPLETED)
            finally:
                signal.remove_listener(on_abort)
                for timer in timers:
                    timer.cancel()
            if task.done():
                return task.result()
            task.add_done_callback(lambda t: t.cancelled() or t.exception())  # nobody awaits it
            raise TimeoutError(f"the body ignored its aborted signal for {GRACE_S:g} s")

        return run

    def definition(self: Any, name: str, agent: str | None = None) -> Any:
        found = real_definition(self, name, agent)
        return None if found is None else dataclasses.replace(found, body=graced(found.body))

    with mock.patch.object(ToolRegistry, "definition", definition):
        yield


@contextlib.contextmanager
def _skips_sync(events: frozenset[str]) -> Iterator[None]:
    real = _Call.offer

    def offer(self: Any, key: Any, caller_first: bool = True) -> Any:
        if (key if isinstance(key, str) else key.event) in events:
            return real(self, key, False)
        return real(self, key, caller_first)

    with mock.patch.object(_Call, "offer", offer):
        yield


def _no_recheck_after_pre() -> contextlib.AbstractContextManager[None]:
    """Does not look at the caller signal when pre-execute and approval settle (C1)."""
    return _skips_sync(frozenset({"pre_allow", "pre_deny", "pre_ask", "approval_approved",
                                  "approval_rejected", "approval_cancelled",
                                  "approval_unavailable", "guards_pass"}))


def _no_recheck_before_body() -> contextlib.AbstractContextManager[None]:
    """Dispatches the body without looking at the caller signal first (C2)."""
    return _skips_sync(frozenset({"wrapper_enter", "base_dispatch"}))


@contextlib.contextmanager
def _keeps_late_success(only: Callable[[Any], bool] = lambda call: True) -> Iterator[None]:
    """Keeps a success that settles after the caller aborted (ignores C3 and C4), in the calls
    ``only`` picks."""
    real = _Call.offer

    def offer(self: Any, key: Any, caller_first: bool = True) -> Any:
        outcome = real(self, key, caller_first)
        event = key if isinstance(key, str) else key.event
        if (
            event in ("around_settled", "post_accept", "body_ok")
            and self.cancels == "aborted"
            and only(self)
        ):
            self.cancels = None  # the stage keeps the result it holds
        return outcome

    with mock.patch.object(_Call, "offer", offer):
        yield


def _keeps_late_success_without_signal() -> contextlib.AbstractContextManager[None]:
    """Keeps a late success only in a call made without ``signal=``: its own call signal is C,
    which only cancelling the awaiting task aborts (Python binding P1, P2)."""
    return _keeps_late_success(lambda call: call.own_caller)


@contextlib.contextmanager
def _ignores_task_cancellation() -> Iterator[None]:
    """Cancelling the task awaiting the call no longer aborts it (P2): the call runs on as if
    its caller were still there, and its success reaches a caller who gave up."""

    def task_cancelled(self: Any, message: str | None) -> None:
        return None

    with mock.patch.object(_Call, "task_cancelled", task_cancelled):
        yield


@contextlib.contextmanager
def _drops_tool_timeout() -> Iterator[None]:
    """The timeout wrapper never reports its own deadline (TOOL_TIMEOUT is lost)."""

    def blind_deadline(*args: Any, **kwargs: Any) -> Any:
        return _Blind(deadline(*args, **kwargs))

    with mock.patch.object(timeout_module, "deadline", blind_deadline):
        yield


class _Blind:
    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    @property
    def fired_by_own_timer(self) -> bool:
        return False


@contextlib.contextmanager
def _wrong_reason_source() -> Iterator[None]:
    """The fused signal aborts with the caller's reason whichever source fired."""

    def relay(self: Any, source: AbortSignal) -> None:
        caller = self._sources[0] if self._sources else source
        self.dispose()
        self.signal._signal_abort(caller.reason if caller.aborted else "aborted")

    with mock.patch.object(fusion_module.Fusion, "__call__", relay):
        yield


@contextlib.contextmanager
def _leaks_fused_listeners() -> Iterator[None]:
    """Never removes the relay's listeners from the caller and wrapper signals."""
    with mock.patch.object(fusion_module.Fusion, "dispose", lambda self: None):
        yield


@contextlib.contextmanager
def _notifies_twice() -> Iterator[None]:
    """Publishes the result to observers twice."""
    real = _Call.publish

    def publish(self: Any, result: ToolResult) -> ToolResult:
        frozen = real(self, result)
        for observer in self.plan.observers:
            observer(self.view, frozen)
        return frozen

    with mock.patch.object(_Call, "publish", publish):
        yield


@contextlib.contextmanager
def _classifies_timeout_by_code() -> Iterator[None]:
    """The timeout wrapper classifies by code, as the original did (D13): any TOOL_TIMEOUT-coded
    reason on its deadline counts as its own expiry, so a nested budgeted call reports an
    enclosing call's expired deadline as its own budget."""

    def by_code_deadline(*args: Any, **kwargs: Any) -> Any:
        return _ByCode(deadline(*args, **kwargs))

    with mock.patch.object(timeout_module, "deadline", by_code_deadline):
        yield


class _ByCode(_Blind):
    @property
    def fired_by_own_timer(self) -> bool:
        signal = self._real.signal
        return bool(signal.aborted and getattr(signal.reason, "code", None) == self._real.code)


@contextlib.contextmanager
def _detaches_caller() -> Iterator[None]:
    """Hands the body the wrapper's signal alone when a wrapper replaced the slot."""
    real_init = fusion_module.Fusion.__init__

    def init(self: Any, caller: AbortSignal | None, slot: AbortSignal | None) -> None:
        real_init(self, None if slot is not None else caller, slot)

    with mock.patch.object(fusion_module.Fusion, "__init__", init):
        yield


@contextlib.contextmanager
def _loses_contexts_on_abort() -> Iterator[None]:
    """Drops the deferred contexts when ABORTED replaces a success."""
    real = Results.cancellation

    def cancellation(self: Any, outcome: str, contexts: Any = ()) -> ToolResult:
        return real(self, outcome, ())

    with mock.patch.object(Results, "cancellation", cancellation):
        yield


_Turn: Any = scheduler_module._Turn


@contextlib.contextmanager
def _forgets_turn_contexts() -> Iterator[None]:
    """Commits each result but never accepts its contexts into the turn's log."""

    async def commit(self: Any, call: Any) -> None:
        result = await call.finalize()
        self.log.append("tool/result", call.call_id, scheduler_module.result_payload(result))

    with mock.patch.object(_Turn, "commit", commit):
        yield


@contextlib.contextmanager
def _post_sees_late_success() -> Iterator[None]:
    """Offers the right events but hands post-execute the body's own late success where the
    contract says ABORTED because a wrapper's signal aborted the body (the caller did not: a
    caller abort it gets right); then it gives the caller the ABORTED the machine's outcome
    still says, so the published result is right and only what post-execute received is
    wrong."""
    real_definition = ToolRegistry.definition
    real_post = _Call.post_policy
    late: dict[int, Any] = {}

    def definition(self: Any, name: str, agent: str | None = None) -> Any:
        found = real_definition(self, name, agent)
        if found is None:
            return None
        body = found.body

        async def remembering(args: Any, view: Any) -> Any:
            value = await body(args, view)
            late[id(view._call)] = value
            return value

        return dataclasses.replace(found, body=remembering)

    async def post_policy(self: Any, result: ToolResult) -> ToolResult:
        value = late.pop(id(self), None)
        caller_aborted = self.caller is not None and self.caller.aborted
        if value is not None and not caller_aborted and (
            result.error is not None and result.error.code == "ABORTED"
        ):
            result = self.results.success(value).with_contexts(result.contexts)
            decided = await real_post(self, result)
            outcome = self.node.outcome
            if not decided.is_error and outcome in self.plan.table.cancellations:
                return self.results.cancellation(outcome, decided.contexts)
            return decided
        return await real_post(self, result)

    with (
        mock.patch.object(ToolRegistry, "definition", definition),
        mock.patch.object(_Call, "post_policy", post_policy),
    ):
        yield


@contextlib.contextmanager
def _skips_with_aborted() -> Iterator[None]:
    """Gives a never-started call the registry's ABORTED instead of the synthetic R9 result."""
    real = _Turn.run

    async def run(self: Any) -> None:
        results = self.registry.results
        with mock.patch.object(type(results), "skipped", lambda r: r.aborted()):
            await real(self)

    with mock.patch.object(_Turn, "run", run):
        yield


@contextlib.contextmanager
def _prefers_caller_reason() -> Iterator[None]:
    """When the caller and the slot are both aborted as the body starts (a pre-aborted entry
    under a wrapper's aborted signal), the fused signal carries the caller's reason."""
    real = fusion_module.plan_fusion

    def plan(c: bool, w: bool, same: bool, c_dead: bool, w_dead: bool) -> Any:
        found = real(c, w, same, c_dead, w_dead)
        if found.born_aborted_from == "slot" and c and c_dead:
            return fusion_module.FusionPlan(found.kind, "caller")
        return found

    with mock.patch.object(fusion_module, "plan_fusion", plan):
        yield


@contextlib.contextmanager
def _keeps_fused_watch() -> Iterator[None]:
    """Never takes its draining watch off the body's signal when that signal is the registry's
    own call signal (a call whose slot no wrapper replaced): the listener stays after the call
    on a signal the caller never sees."""
    real = AbortSignal.remove_listener

    def remove_listener(self: AbortSignal, listener: Any) -> None:
        call = getattr(listener, "__self__", None)
        watch = getattr(listener, "__name__", None) == "on_fused_abort"
        if not (watch and self is getattr(call, "caller", None)):
            real(self, listener)

    with mock.patch.object(AbortSignal, "remove_listener", remove_listener):
        yield


@contextlib.contextmanager
def _publishes_mutable_result() -> Iterator[None]:
    """Snapshots the result losslessly but publishes plain lists and dicts: it serializes like a
    frozen one, and any observer can change what the caller then reads."""
    real = Results.materialize

    def materialize(self: Any, result: ToolResult) -> ToolResult:
        frozen = real(self, result)
        return dataclasses.replace(frozen, content=thaw(frozen.content))

    with mock.patch.object(Results, "materialize", materialize):
        yield


@contextlib.contextmanager
def _view_writable_by_observers() -> Iterator[None]:
    """Freezes the execution view's slot only in name: an observer can still replace it."""
    real: Any = registry_module.Execution.signal  # a property: the typeshed overloads hide fset

    def setter(self: Any, value: AbortSignal | None) -> None:
        if self._frozen:
            self._slot = value
        else:
            real.fset(self, value)

    with mock.patch.object(
        registry_module.Execution, "signal", property(real.fget, setter, real.fdel)
    ):
        yield


@contextlib.contextmanager
def _cursor_skips_last() -> Iterator[None]:
    """Under the ``cursor`` retry behaviour (D11), a retried ``next()`` whose cursor stands at the
    last wrapper hands out the base dispatch instead: one wrapper too early.  The cursor stands
    there only after an inner wrapper short-circuited with exactly one wrapper after it, so it
    takes three around wrappers -- a retry, a short-circuit, one more (a scenario wrapper or the
    timeout policy) -- to see; the default bound of two scenario wrappers never builds one that
    reaches the base."""
    real = _Call.wrap

    async def wrap(self: Any, i: int) -> ToolResult:
        handing = self.node.current.handing  # a retried next() has not handed anything out yet
        if handing and self.plan.retry == "cursor" and i == len(self.wrappers) - 1:
            return await self.base_dispatch()
        return await real(self, i)

    with mock.patch.object(_Call, "wrap", wrap):
        yield


MUTANTS: tuple[Mutant, ...] = (
    Mutant("races_body", "R27", "races the body instead of awaiting it", _races_body),
    Mutant("abandons_after_grace", "R27",
           f"abandons a body ignoring its aborted signal after {GRACE_S:g} s",
           _abandons_after_grace),
    Mutant("no_recheck_after_pre", "R13", "skips the recheck after pre-policy",
           _no_recheck_after_pre),
    Mutant("no_recheck_before_body", "R17", "skips the recheck before the body",
           _no_recheck_before_body),
    Mutant("keeps_late_success", "R28", "keeps a late success", _keeps_late_success),
    Mutant("drops_tool_timeout", "R34", "drops TOOL_TIMEOUT", _drops_tool_timeout),
    Mutant("wrong_reason_source", "R21", "takes the abort reason from the wrong source",
           _wrong_reason_source),
    Mutant("leaks_fused_listeners", "R22", "forgets to remove the fused signal's listeners",
           _leaks_fused_listeners),
    Mutant("notifies_twice", "R31", "notifies observers twice", _notifies_twice),
    Mutant("detaches_caller", "R21", "lets a wrapper detach the caller signal",
           _detaches_caller),
    Mutant("loses_contexts_on_abort", "R29", "loses deferred contexts on ABORTED",
           _loses_contexts_on_abort),
    Mutant("classifies_timeout_by_code", "R35",
           "reports an outer same-coded deadline as its own TOOL_TIMEOUT",
           _classifies_timeout_by_code),
    Mutant("post_sees_late_success", "R4", "hands post-execute a late success, not ABORTED",
           _post_sees_late_success),
    Mutant("prefers_caller_reason", "R21",
           "gives a pre-aborted body the caller's reason over an aborted slot's",
           _prefers_caller_reason, revisions=("seed",)),  # revised: no body after that (R42)
    Mutant("keeps_fused_watch", "R22", "leaves its body watch on its own call signal",
           _keeps_fused_watch),
    Mutant("publishes_mutable_result", "R30", "publishes a result that is not deep-frozen",
           _publishes_mutable_result),
    Mutant("view_writable_by_observers", "R31", "lets an observer replace the view's slot",
           _view_writable_by_observers),
    Mutant("cursor_skips_last", "R16",
           "under cursor, a retried next() hands out the base one wrapper too early",
           _cursor_skips_last, retry="cursor"),
    Mutant("ignores_task_cancellation", "R13",
           "cancelling the task awaiting the call does not abort it",
           _ignores_task_cancellation, cancel="task"),
    Mutant("keeps_late_success_without_signal", "R28",
           "keeps a late success in a call made without signal=",
           _keeps_late_success_without_signal, revisions=("seed",),  # revised: R40 refuses one
           cancel="task"),
)


TURN_MUTANTS: tuple[Mutant, ...] = (
    # Broken schedulers (R36-R38, R9): killed by the turn batches of ``toolcancel verify`` and by
    # conform's turn vectors (tests/test_turn_vectors.py), not by one call's checks.
    Mutant("forgets_turn_contexts", "R38", "never logs a committed result's contexts",
           _forgets_turn_contexts),
    Mutant("skips_with_aborted", "R9", "gives never-started calls the registry's ABORTED",
           _skips_with_aborted),
)


@contextlib.contextmanager
def _approval_gets_a_copy() -> Iterator[None]:
    """Hands the approval seam a fresh signal instead of the slot's (C) one."""
    real: Any = vars(driver_module)["ApprovalRequest"]  # the name the driver calls, patched there

    def request(*args: Any) -> Any:
        *head, signal, own = args
        return real(*head, None if signal is None else AbortController().signal, own)

    with mock.patch.object(driver_module, "ApprovalRequest", request):
        yield


@contextlib.contextmanager
def _late_success_reaches_post() -> Iterator[None]:
    """Hands post-execute the body's late success instead of C3's ABORTED, then gives the caller
    the ABORTED the machine still says, so the result, the path and the trace's events look
    right."""
    real_success, real_post = Results.success, _Call.post_policy
    last: dict[int, ToolResult] = {}

    def success(self: Any, value: Any) -> ToolResult:
        result = real_success(self, value)
        last[id(self)] = result
        return result

    async def post_policy(self: Any, result: ToolResult) -> ToolResult:
        late = last.pop(id(self.results), None)
        code = None if result.error is None else result.error.code
        if late is not None and code in ("ABORTED", "ABORTED_BEFORE_DISPATCH"):
            decided = await real_post(self, dataclasses.replace(late, contexts=result.contexts))
            # the driver publishes what a step decides, and C4 decides nothing after C3's
            # transition: give the caller the cancellation the machine's outcome still says
            outcome = self.node.outcome
            if not decided.is_error and outcome in self.plan.table.cancellations:
                return self.results.cancellation(outcome, decided.contexts)
            return decided
        return await real_post(self, result)

    with mock.patch.object(Results, "success", success), mock.patch.object(
        _Call, "post_policy", post_policy
    ):
        yield


OBSERVATION_MUTANTS: tuple[Mutant, ...] = (
    # Broken registries only the protocol's optional observations show:
    # caught by conform at both levels (tests/test_conform_observations.py).
    Mutant("mutable_result", "R30", "publishes a result an observer can write into",
           _publishes_mutable_result),  # the same break; conform sees it, verify does too
    Mutant("unfrozen_view", "R31", "leaves the view's slot writable after publication",
           _view_writable_by_observers),
    Mutant("approval_gets_a_copy", "R24", "hands the approval seam another signal than C",
           _approval_gets_a_copy),
    Mutant("late_success_reaches_post", "R19",
           "hands post-execute the late success C3 must replace (C4 still publishes ABORTED)",
           _late_success_reaches_post),
)

DRAIN_CAP_S = 10.0
"""How long :func:`_capped_drain`'s server drains after a stop signal before it gives up."""


@contextlib.contextmanager
def _capped_drain() -> Iterator[None]:
    """The MCP server's stop drains ``DRAIN_CAP_S`` seconds, then exits 0 with the bodies still
    running, their results never published: the hidden bound R27 forbids (the drain lasts as
    long as the bodies run; only a second signal abandons them).  Its drain reports are the
    real ones until then, so only the bound tells it apart."""
    import os
    import sys

    import anyio

    from ..runtime import mcp as mcp_module

    real = mcp_module._report_draining

    async def capped(*args: Any) -> None:
        with anyio.move_on_after(DRAIN_CAP_S):
            await real(*args)
        sys.stderr.flush()
        os._exit(0)

    with mock.patch.object(mcp_module, "_report_draining", capped):
        yield


SERVER_MUTANTS: tuple[Mutant, ...] = (
    # Broken servers (toolcancel.runtime.mcp): killed by tests/test_mcp.py's stop-signal tests,
    # which run the server as a process; no single call's record shows them.
    Mutant("capped_drain", "R27",
           f"stops draining {DRAIN_CAP_S:g} s after a stop signal and exits 0 unpublished",
           _capped_drain),
)

BLIND_TO_PROTOCOL: dict[str, str] = {
    # mutant: why conform's per-rule mutant tests (tests/test_conform.py) leave it out.  verify
    # sees each on the environment's own record.
    "keeps_fused_watch": "a listener left on the registry's own call signal: no answer shows it",
    "post_sees_late_success": "conform fails it through post_received, citing the checkpoints "
    "(R17-R19, R28) that decide what post-execute must receive, not R4",
}
"""The mutants conform cannot see yet, and what an answer would need to show them."""
