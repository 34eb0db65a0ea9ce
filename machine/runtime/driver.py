"""The tool registry's per-call driver: the pipeline a call runs, a thin driver of the call machine.

In the compiled group (setup.py's ``COMPILED`` states what that asks of it).

At every point where the contract decides something, a stage offers an event to the call's
machine and does what the resulting state says: the registry observes and performs, the contract
table decides (the whole pipeline and what it guarantees: :mod:`toolcancel.runtime.registry`).
"""

from __future__ import annotations

import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any, Final, Protocol

from ..contract.core import Occurrence, PathStep
from ..contract.errors import ContractViolation, NotSerializable, RegistryUsageError
from ..contract.results import ErrorInfo, ToolResult, canonical_json, snapshot
from .eventloop import Waiter, clock_and_timers
from .execution import Execution
from .fusion import Fusion
from .hooks import Accept, Allow, Approval, ApprovalRequest, Ask, Block, Deny
from .signals import AbortSignal
from .stepping import _LINES, _Stepping, log


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


class _Call(_Stepping):
    """One call in flight, with the stages of its pipeline.

    Invariant: every decision below is read back from ``self.node`` -- the call's state in the
    contract compiled for its shape (:mod:`toolcancel.contract.compiled`) -- after an ``offer``; the
    driver never decides an outcome itself.  Where a checkpoint publishes a cancellation over the
    result the call holds (C3, C4, a late success: ``self.cancels`` after the step), which results
    it replaces is the table's (``publishes_over`` in contract.toml), never a test here.  What of
    the registry a stage reads is the call's plan (:mod:`toolcancel.runtime.plan`), frozen at
    entry.
    """

    __slots__ = ()

    # -- the pipeline ---------------------------------------------------------------------------
    #
    # A stage awaits only user code (a waterfall, the approval seam, a wrapper, the body, an
    # observer's awaitable); what the contract decides between is synchronous.  So a call
    # without pre- or post-execute hooks runs those stages without a coroutine of their own.

    async def run(self, raising: bool = True) -> ToolResult:
        """The whole pipeline.  ``raising``: re-raise an interrupt user code raised (P4) once
        the result is published; else the driver that awaits the call's task re-raises it."""
        plan = self.plan
        if self.preparing():  # prepare(), one coroutine frame fewer
            pending = await self.pre_policy() if plan.pre else self.pre_decided(_ALLOW)
            if pending is not None:
                self.result = pending
            elif self.wrappers:
                self.result = await self.around(not plan.post)
            else:  # around(), one coroutine frame fewer
                self.result = self.settled(await self.base_dispatch(), not plan.post)
        if plan.post or plan.observers:
            return await self.finalize(raising)
        # finalize(), one coroutine frame fewer; conclude() only if post-execute is still ahead
        frozen = self.conclude() if self.state == "post_policy" else self.publish(self.result)
        if self.interrupt is not None and raising:
            raise self.interrupt
        return frozen

    async def prepare(self) -> bool:
        """Pre-execute, approval, guards (entry happened in ``begin()``).  True when the call
        goes on to dispatch."""
        if not self.preparing():
            return False
        pending = await self.pre_policy() if self.plan.pre else self.pre_decided(_ALLOW)
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
        if self.entered < 0:  # entered outside the loop: take its clock and timers now
            self.clock, self.call_later = clock_and_timers()
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
        if self.state == "post_policy" and self.plan.post:
            if self.trace is not None:
                self.emit_line(_LINES["stage_enter", "post"])
            self.result = await self.post_policy(self.result)
        frozen = self.conclude()
        view = self.view
        for observer in self.plan.observers:
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
            decision = await _waterfall(self.plan.pre, (self.view,), _allow)
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
                if self.plan.guards:
                    self.offer("pre_allow")
                else:  # no guard to run: the guards pass at once
                    self.offer_through(_ALLOWED_UNGUARDED, "guards")
            elif isinstance(decision, Deny):
                reason = decision.reason
                self.offer("pre_deny")
            elif isinstance(decision, Ask):
                if reason is None and self.plan.approval is None:
                    reason = decision.reason or r.text("ask_without_seam", name=self.name)
                elif reason is None:
                    reason = r.text("ask_without_agent", name=self.name)
            else:
                raise TypeError(f"pre-execute returned {decision!r}; expected Allow, Deny or Ask")
            if self.state == "guards":
                if self.trace is not None:
                    self.emit_line(_LINES["stage_enter", "guards"])
                denial = self.run_guards() if self.plan.guards else None
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
        r, seam = self.results, self.plan.approval
        assert seam is not None and self.agent is not None
        request = ApprovalRequest(
            self.call_id,
            self.name,
            self.arguments,
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
        guards = self.plan.guards
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
            # Caught for good: forget it, or its traceback's frames would hold this call in a
            # reference cycle freed only by the cycle collector.
            self.unwinding = None
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
            self.offer_through(_SETTLED_ACCEPTED, "post")
        else:
            self.offer("around_settled")
        if self.cancels is not None:  # C3 (or C4) published a cancellation over it
            return self.results.cancellation(self.cancels, result.contexts)
        return result

    async def wrap(self, i: int) -> ToolResult:
        """Wrapper ``i`` of the around waterfall."""
        self.offer("wrapper_enter")
        calls = 0
        # A next() of this wrapper is running: True, or once the wrapper settled and left it
        # running, the Waiter its end sets (R27).  One variable, so one closure serves.  Typed
        # Any: next_() sees it change while it is suspended (setup.py's COMPILED says why).
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
                if self.plan.retry == "reject":
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
                j = self.node.current.handed if self.plan.retry == "cursor" else i + 1
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
                result = _wrapper_result(result, self.wrappers[i], i, self.plan.table.name)
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
        """Checkpoint C2, then the body with the fused signal, awaited to quiescence (R17, R18).

        The fused signal F is handed to the body as a value: the view's slot holds it while the
        body runs and holds the wrapper's W again after it (R18.5), both by ``Execution.hold``."""
        r, view = self.results, self.view
        w = view.signal
        # No wrapper changed the slot: F is C itself (R21), nothing to relay or to trace.
        fusion = None if w is self.caller and self.trace is None else Fusion(self.caller, w)
        if self.trace is not None:
            assert fusion is not None
            fusion.on_listener = self.emit_listener
            if fusion.relaying:
                self.emit_listener("caller", "add")
                self.emit_listener("slot", "add")
        tool = self.plan.definition(self.name, self.agent)
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
        watch = self.on_fused_abort  # one bound method made, for the add and the remove
        if listening:
            assert fused is not None
            fused.add_listener(watch)
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
        if fused is not w:  # else the slot holds F already
            view.hold(fused)
        try:
            try:
                value = await tool.body(self.arguments, view)
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
                fused.remove_listener(watch)
                if owner is not None:
                    self.emit_listener(owner, "remove")
            if fusion is not None:
                fusion.dispose()
            if fused is not w:
                view.hold(w)
        self.offer(event)
        if self.cancels is not None:  # a late success (R18)
            return r.cancellation(self.cancels)
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
            decision = await _waterfall(self.plan.post, (self.view, result), _accept)
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
        self.offer("post_accept")
        if self.cancels is not None:  # C4 published a cancellation over it
            return r.cancellation(self.cancels, accepted.contexts)
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
        if self.given is not None:  # detach(), without a Python call
            self.given.remove_listener(self)
        self.plan.calls.pop(self, None)  # leave(self), without a Python call
        if self.trace is not None:
            self.emit("result", result=frozen.to_data())
            self.emit_line(_LINES[("notify",)])
        return frozen


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
