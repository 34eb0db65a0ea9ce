"""One vector's tool call as a runtime adapter sees it: the body, its gates, the answer.

What an adapter's :meth:`~toolcancel.runtimes.Runtime.open` receives (:class:`Call`) and what its
``execute`` hands back (:class:`Outcome`).  The driver (:mod:`toolcancel.runtimes.driver`)
releases the gates; the adapter only puts :meth:`Call.body` where its runtime runs a tool, and
says how the body sees cancellation (a *signal reader*: :func:`task_signal`, :func:`no_signal`,
or one reading the runtime's own signal object).

The rules an adapter keeps (each is checked here or by the driver, never left to trust):

* **An answer is a result or a raise, never both** (:class:`Outcome`): ``result`` is what the
  runtime's call returned, as R1's keys; ``raised`` is the text of what it raised instead.  A
  value the runtime recorded elsewhere (a message history, a log) is not what the call returned.
* **A call that raised** is answered by the driver from the exception; an adapter that knows
  better (the runtime's own error text) sets :attr:`Call.outcome` before re-raising, with
  ``raised`` only.
* **A scenario the runtime cannot run** raises :class:`Unsupported` -- from ``open()`` or from
  ``execute()``: either way the vector is answered with a protocol ``error`` naming why, never
  scored as the runtime raising.
* **A tool deadline** (``timeout_policy``): a runtime with a per-tool timeout of its own gives
  the scenario's tool :attr:`Call.budget_s` as that timeout (the vector's ``timeoutMs``), and
  nothing else -- the driver moves the virtual clock past it where the scenario says
  (``timer_first``; ``with_deadline`` aborts the caller in that same step, first).  A runtime
  whose answer says its own timeout ended the call (its timeout message, its timeout
  exception) tells the kit with :meth:`Call.timed_out`; that, and the driver's own order of
  events, is how the body's signal gets the reason ``timeout`` (a cancelled task carries no
  reason): see :meth:`Call.reason`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias, TypeVar

import anyio

from ..contract.errors import ToolError as ContractToolError
from ..contract.results import ToolResult
from ..oracle.scenario_language import BODY_FAILURE, BODY_STRUCTURED_FAILURE, BODY_TEXT, BUDGET_MS

HOLD_S: Final = 86_400.0
"""How long an uncooperative body is held after the call was cancelled (R27: no grace period)."""
HANG: Final = "execute() never settled: it waits for something nothing will do (the loop is idle)"
"""What a call that hangs is answered with -- never the cancellation the driver ends it with."""

WRAPPERS: Final = ("delegate", "retry", "wait_before", "wait_after", "short_success",
                   "short_error", "throw_before", "throw_after")  # fmt: skip
"""The wrappers a runtime's around seam can play (spec/vectors/README.md's table) when it hands
a wrapper no signal to replace or remove (``replace_signal``/``remove_signal`` false)."""
T = TypeVar("T")

Signal: TypeAlias = dict[str, Any]
"""A body's signal as the protocol reports it: ``{"aborted": bool, "reason": str | None}``."""
SignalReader: TypeAlias = Callable[[], Signal]
"""Reads the body's signal as the runtime shows it to a tool, at the moment it is called."""


def text(t: str) -> dict[str, str]:
    """A text content block (R1)."""
    return {"type": "text", "text": t}


def no_signal() -> Signal:
    """The body's signal in a runtime that hands its body none (``body_signal`` absent)."""
    return {"aborted": False, "reason": None}


def task_signal() -> Signal:
    """The body's signal in a runtime that cancels its body's task: whether a cancellation is
    pending on it, read through public APIs only -- anyio's effective deadline (minus infinity
    inside a cancelled scope) and asyncio's ``Task.cancelling()``.  Only the caller cancels in a
    scenario without wrappers or timeouts, so the reason is the caller's."""
    task = asyncio.current_task()
    cancelled = anyio.current_effective_deadline() == -math.inf or bool(
        task is not None and task.cancelling()
    )
    return {"aborted": cancelled, "reason": "caller" if cancelled else None}


class Unsupported(Exception):
    """A scenario this runtime cannot run: the vector is answered with a protocol ``error``.

    Raise it from ``open()`` or from ``execute()``; the driver answers both the same way, so a
    refusal is never scored as the runtime raising."""


class ToolError(ContractToolError):
    """The scenario's structured error (``throw_structured``): a message and a code.

    It is the registry's own structured failure (``toolcancel.ToolError``), so a registry an
    integration puts in the runtime's path keeps its code (R3's ``error``) as the contract's
    result does: a structured throw the registry saw as a plain exception would lose it, and
    the row would be charged with a loss that is the mapping's."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message, code=code)


@dataclass(frozen=True)
class Outcome:
    """What a runtime's call ended with: the contract's result (R1's keys only) or what it raised.

    ``cancelled`` says the raise is the caller's own cancellation coming back to it (the
    answer's ``observed.caller_cancelled``): a task the caller cancelled re-raising
    ``CancelledError`` (the Python binding's P2: after the call published its result), a cancel
    scope the caller cancelled, an MCP request the caller cancelled (never answered).  The
    driver sets it; an adapter never needs to."""

    result: dict[str, Any] | None = None
    raised: str | None = None
    cancelled: bool = False

    def __post_init__(self) -> None:
        if (self.result is None) == (self.raised is None):
            raise ValueError(
                "an Outcome has exactly one of result (the call returned) and raised (it "
                f"raised); got result={self.result!r}, raised={self.raised!r}"
            )
        if self.cancelled and self.raised is None:
            raise ValueError("Outcome(cancelled=True) needs raised: the cancellation came back")


Execute: TypeAlias = Callable[[dict[str, Any]], Awaitable[Outcome]]
"""The one tool call through the runtime's public API: the arguments in, its outcome out."""


@dataclass
class Body:
    """One body invocation: its signal when it started and when it stopped waiting;
    ``untold``: read by :func:`task_signal`, which cannot tell whose abort it was (the answer
    gives :meth:`Call.reason` for it)."""

    start: Signal
    settle: Signal | None = None
    untold: bool = False

    def seen(self, call: Call) -> dict[str, Signal | None]:
        """``observed.bodies``' entry: an aborted settle the reader could not attribute carries
        :meth:`Call.reason`."""
        settle = self.settle
        if self.untold and settle is not None and settle["aborted"]:
            settle = {**settle, "reason": call.reason()}
        return {"start": self.start, "settle": settle}


@dataclass
class Call:
    """Everything one vector's call shares between the driver and the runtime's adapter.

    Invariants: ``gates`` holds the gates waiting now (the driver releases them one at a time);
    ``bodies`` grows by one per body invocation; ``outcome``, set by an adapter, wins over the
    driver's reading of an exception; ``settled``, set by :meth:`settled_at`, wins over the
    driver's count when ``execute`` ends; ``aborters``, grown by :meth:`on_abort`, are fired
    once, in order, when the caller aborts (only for a runtime whose ``cancel`` is
    ``["signal"]``); ``first_abort`` is who aborted the call first, as the driver did it
    (``"caller"``, or ``"timeout"`` once it moved the clock past the tool's budget), set once;
    ``expired`` whether the clock passed the budget while the call ran (``observed.deadline``);
    ``timer_claimed``, set by :meth:`timed_out`, whether the runtime said its own timeout ended
    the call."""

    scenario: dict[str, Any]
    revision: str = "seed"
    gates: dict[str, anyio.Event] = field(default_factory=dict)
    bodies: list[Body] = field(default_factory=list)
    caller_aborted: bool = False
    outcome: Outcome | None = None
    settled: dict[str, int] | None = None
    aborters: list[Callable[[], None]] = field(default_factory=list)
    first_abort: str | None = None
    expired: bool = False
    timer_claimed: bool = False

    @property
    def budget_s(self) -> float | None:
        """The scenario tool's budget in seconds (its ``timeoutMs``), or None when it declares
        none: what an adapter gives its runtime's own per-tool timeout (``timeout_policy``)."""
        return None if self.scenario["timeout"] == "absent" else BUDGET_MS / 1000

    def timed_out(self) -> None:
        """The runtime said its own tool timeout ended this call (its timeout message or
        exception reached the adapter): where the caller aborted in the very step the deadline
        expired (``with_deadline``), this is what tells the two orders apart (:meth:`reason`)."""
        self.timer_claimed = True

    def reason(self) -> str:
        """Whose abort a body's aborted signal carries, for a runtime that hands its body no
        reason (a cancelled task, a cancel scope): the deadline's (``timeout``) where the driver
        moved the clock past the budget before the caller aborted, or in the same step where
        the runtime claimed the timeout (:meth:`timed_out`); else the caller's."""
        same_step = self.scenario["cancel"] == "with_deadline"
        timer = self.first_abort == "timeout" or (same_step and self.timer_claimed)
        return "timeout" if timer else "caller"

    def settled_now(self) -> dict[str, int]:
        """What had started and settled so far (``observed.settled``)."""
        return {
            "bodies_started": len(self.bodies),
            "bodies_settled": sum(b.settle is not None for b in self.bodies),
        }

    def on_abort(self, fire: Callable[[], None]) -> None:
        """The runtime's own cancellation API is the caller's signal (``cancel = ["signal"]``):
        ``fire`` -- a token's ``cancel``, a run's ``cancel(mode)`` -- is called when the caller
        aborts, and at once if it already has, as a caller hands over an already-cancelled
        token.  Call it in ``open()`` or ``execute()`` before the call can wait; a runtime
        declaring ``signal`` that registers nothing is never cancelled (the driver says so)."""
        self.aborters.append(fire)
        if self.caller_aborted:
            fire()

    def settled_at(self, snapshot: dict[str, int]) -> None:
        """The call settled earlier than ``execute`` returned: when ``snapshot`` was taken (an
        agent loop's tool call settles when its result reaches the model, not when the run ends)."""
        self.settled = snapshot

    def answered(
        self, execute: Execute, published: Callable[[], Awaitable[ToolResult | dict[str, Any]]]
    ) -> Execute:
        """``execute``, answered after the caller cancelled it with what the call published.

        For a runtime that ends the call at once when its caller cancels (the cancellation
        comes back) while an integration (:mod:`toolcancel.integrations`) gives the program a
        way to wait for the call's quiescence and its published result: ``published()`` is
        that wait.  Only the caller's own cancellation (after it aborted) is answered so; any
        other -- the driver ending a call that hangs -- comes back as it is."""

        async def answered(args: dict[str, Any]) -> Outcome:
            try:
                return await execute(args)
            except asyncio.CancelledError:
                if not self.caller_aborted:
                    raise
                result = await published()
                return Outcome(result=result if isinstance(result, dict) else result.to_data())

        return answered

    async def gate(self, name: str, stop: anyio.Event | None = None) -> None:
        """Wait at gate ``name`` until the driver releases it (or, if given, ``stop`` is set)."""
        released = self.gates[name] = anyio.Event()
        try:
            if stop is None:
                await released.wait()
                return
            async with anyio.create_task_group() as group:

                async def first(event: anyio.Event) -> None:
                    await event.wait()
                    group.cancel_scope.cancel()

                group.start_soon(first, released)
                group.start_soon(first, stop)
        finally:
            if self.gates.get(name) is released:
                del self.gates[name]

    async def held(self, name: str) -> None:
        """Wait at gate ``name`` ignoring every cancellation until the driver releases it: an
        anyio cancel scope's (the shield) and a native ``Task.cancel()``, which no anyio shield
        stops and the body therefore catches -- work that cannot stop half-way, then goes on."""
        released = self.gates[name] = anyio.Event()
        try:
            with anyio.CancelScope(shield=True):
                while not released.is_set():
                    try:
                        await released.wait()
                    except asyncio.CancelledError:
                        continue  # ignored, as a write half-done cannot stop
        finally:
            if self.gates.get(name) is released:
                del self.gates[name]

    async def wrap(
        self, i: int, kind: str, delegate: Callable[[], Awaitable[T]],
        answer: Callable[[str, bool], T],
    ) -> T:  # fmt: skip
        """Wrapper ``i`` of the scenario, of kind ``kind`` (:data:`WRAPPERS`, README's wrapper
        table), around ``delegate`` -- the runtime's own "call the next one" (``call_next``,
        a handler, ``execute(request)``): it waits at gates ``w<i>_before``/``w<i>_after``,
        delegates once or twice, fails, or answers short with ``answer(text, is_error)``, a
        result made the runtime's way.  Written once, so every adapter's wrapper and the
        control's play the table the same; refuse a kind outside :data:`WRAPPERS` (or one the
        runtime cannot answer) when the wrapper is built, before the call runs."""
        if kind not in WRAPPERS:
            raise Unsupported(f"wrapper {kind!r}: no signal slot to play it on")
        if kind == "short_success":
            return answer(f"wrapper {i} answered", False)
        if kind == "short_error":
            return answer(f"Error: wrapper {i} refused", True)
        if kind == "throw_before":
            raise RuntimeError(f"wrapper {i} failed before delegating")
        if kind == "wait_before":
            await self.gate(f"w{i}_before")
        got = await delegate()
        if kind == "retry":
            got = await delegate()
        if kind == "wait_after":
            await self.gate(f"w{i}_after")
        if kind == "throw_after":
            raise RuntimeError(f"wrapper {i} failed after delegating")
        return got

    async def body(self, signal: SignalReader, stop: anyio.Event | None) -> Any:
        """The scenario's tool body.  ``signal()`` reads the body's signal as the runtime shows it
        (``{"aborted", "reason"}``); ``stop`` is the runtime's cancellation flag, if it has one
        (a cooperative body stops waiting when it is set).  Returns the body's value in the
        scenario language (a list of content blocks, or a dict with ``content`` and ``meta``);
        raises as the scenario says."""
        s = self.scenario
        record = Body(start=signal(), untold=signal is task_signal)
        self.bodies.append(record)
        try:
            if s["cooperative"]:
                await self.gate("body", stop)
            else:
                await self.held("body")
        except asyncio.CancelledError:
            # A runtime whose only signal is the cancellation of the body's task (no ``stop``)
            # stops a cooperative body's await; the body then settles as the scenario says
            # (spec/vectors/README.md, ``cooperative``): a failing one raises its failure, as
            # a Python tool whose clean-up fails does, so the failure is the runtime's to keep
            # or lose; a succeeding one ends cancelled -- its late success is ABORTED either way
            # (R18), and returning it would swallow the runtime's cancellation.
            if not self._failing:
                raise
            self._fail()
        finally:
            record.settle = signal()
        if self._failing:
            self._fail()
        if s["body"] == "success_meta":
            return {"content": [text(BODY_TEXT)], "meta": {"rows": 3}}
        if s["body"] == "bad_meta":
            return {"content": [text(BODY_TEXT)], "meta": {"handle": lambda: 0}}
        return [text(BODY_TEXT)]

    @property
    def _failing(self) -> bool:
        """Whether the scenario's body fails (``throw``, ``throw_structured``, ``defer_throw``)."""
        body: str = self.scenario["body"]
        return body == "throw_structured" or body.endswith("throw")

    def _fail(self) -> None:
        """Raise the scenario's body failure (``throw_structured``'s, or the others')."""
        if self.scenario["body"] == "throw_structured":
            raise ToolError(BODY_STRUCTURED_FAILURE, "ENOSPC")
        raise RuntimeError(BODY_FAILURE)
