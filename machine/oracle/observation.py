"""What the environment saw of one scenario's run: the record a harness hands the judge.

An :class:`Observation` is data -- the hooks that ran and with what, when each source was aborted,
when bodies started and settled, what was notified -- written by whatever ran the scenario (our
harness, :mod:`toolcancel.selfcheck.harness`, or an adapter's answer read back) and read by the
judge (:func:`toolcancel.oracle.judge.environment_failures`) and the vectors' expectations
(:func:`toolcancel.oracle.vectors.expectation`).  Abort reasons are classified in words every
language can produce (:func:`classify_reason`).  Nothing here runs a call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..contract.core import PathStep
from ..contract.errors import TaskCancelled
from ..contract.results import ToolResult
from ..contract.trace import FORMAT_VERSION
from .scenario_language import Scenario


class CallerReason(Exception):
    """The reason the harness aborts the caller with (identity is checked, R21)."""


class WrapperReason(Exception):
    """The reason a wrapper-supplied signal aborts with."""


def classify_reason(reason: Any) -> str:
    """Whose abort reason ``reason`` is, in words every language can produce.

    ``caller``: the reason the harness aborted the caller with; ``wrapper``: a wrapper-supplied
    signal's; ``timeout``: the timeout policy's deadline (code ``TOOL_TIMEOUT``); ``other``:
    anything else -- which is a fusion bug (R21 says F carries the first source's reason).
    """
    if isinstance(reason, (CallerReason, TaskCancelled)):  # the caller's abort, or its task's
        return "caller"
    if isinstance(reason, WrapperReason):
        return "wrapper"
    if getattr(reason, "code", None) == "TOOL_TIMEOUT":
        return "timeout"
    return "other"


_NO_CALLER_ABORT = frozenset({"before_entry", "in_entry", "never"})
"""Cancellation points at which the harness never aborts a live caller after entry."""


@dataclass
class Observation:
    """What the environment saw of one run, in the order it happened.

    ``log`` entries are tuples whose first item says what happened:
    ``("gate", name)``, ``("abort", source, steps_taken[, wrapper_index])``, ``("body_start",)``,
    ``("body_settle", signal_aborted, reason)``, ``("pre", decision)``, ``("post_in", json)``,
    ``("post", decision)``, ``("timer", steps_taken)``, ``("notify",)``,
    ``("wrapper_in", i)``, ``("hold", steps_taken)`` (a day passes).
    """

    scenario: Scenario
    retry: str | None = None  # the registry's retry behaviour (D11); None: its default
    around: int | None = None  # around wrappers the registry has, if not the scenario's count
    result: ToolResult | None = None
    error: BaseException | None = None
    path: tuple[PathStep, ...] = ()
    log: list[tuple[Any, ...]] = field(default_factory=list)
    notified: list[ToolResult] = field(default_factory=list)
    body_starts: int = 0
    body_pending: bool = False
    deferred: tuple[Any, ...] = ()
    post_contexts: tuple[Any, ...] = ()
    block_contexts: tuple[Any, ...] = ()
    caller_listeners_after: int = 0
    leaked_signals: list[str] = field(default_factory=list)
    post_steps: int | None = None  # transitions taken when post-execute was first called
    settled: tuple[int, int] | None = None  # bodies started and settled when execute() settled
    hung: bool = False  # the call neither finished nor waited at a gate
    watched: int = 0  # signals handed to or got from the registry, whose listeners are counted
    approval_signal: str | None = None  # pre_slot: the seam got the slot pre-execute saw (R24)
    slot_after_next: list[bool] = field(default_factory=list)  # each wrapper's slot after next()
    frozen: tuple[bool, bool] | None = None  # the first observer's writes refused: result, view
    held: tuple[int, str] | None = None  # an ignored abort held this long; what the call did
    # A task caller's await raised CancelledError after the call published its one result, the
    # result in ``result`` (as the observers got it: the caller never sees it)
    caller_cancelled: bool = False
    trace: list[dict[str, Any]] = field(default_factory=list)  # the registry's own trace lines

    @property
    def problems(self) -> list[tuple[str, str]]:
        """The contract breaches the environment saw directly (rule id, explanation): what the
        judge's checks find in the environment's own record of the run (:func:`record`)."""
        from .judge import environment_failures

        running = self.settled is None and not self.hung  # not settled yet: not a hang either
        found = environment_failures(self)
        return [(f.rule, f.why) for f in found if not (running and f.step == "quiescence")]

    def lines(self, call: str = "c1") -> list[dict[str, Any]]:
        """The environment's record of the run: its observation events in the canonical trace
        format (:data:`toolcancel.contract.trace.ENVIRONMENT`), in the order the harness saw
        them."""

        v = FORMAT_VERSION  # each line a dict display: verify builds ~15 per schedule
        s = self.scenario
        out = list(self.trace)
        aborts = []
        settled = 0
        # one walk of the log gathers what the lines below need (verify writes them for every
        # schedule): the first caller abort after entry, the bodies that started at a later
        # step, where post-execute first ran and what it first received, the kinds seen
        watched = s.caller in ("live", "task") and s.cancel not in _NO_CALLER_ABORT
        caller: dict[str, Any] | None = None
        post_in: Any = None
        post_seen = received_seen = False
        kinds: set[str] = set()
        for entry in self.log:  # what each body's signal showed when it settled, in order
            kind = entry[0]
            kinds.add(kind)
            if kind == "body_settle":
                settled += 1
                signal = {"trace": v, "call": call, "event": "body_signal", "at": "settle",
                          "aborted": bool(entry[1])}  # fmt: skip
                if entry[1]:
                    signal["reason"] = classify_reason(entry[2])
                out.append(signal)
            elif kind == "abort" or kind == "timer":  # the sources the harness aborted, in order
                source = "budget" if kind == "timer" else entry[1]
                aborted = {"trace": v, "call": call, "event": "signal_aborted", "source": source}
                if source == "wrapper":
                    aborted["wrapper"] = entry[3]
                aborted["bodies_settled"] = settled
                aborts.append(aborted)
                if source == "caller" and watched and caller is None:
                    # when the harness aborted a live caller after entry: the transitions
                    # taken, the body starts at a later step, whether post-execute was to come
                    caller = {"steps": entry[2], "bodies_after": 0, "before_post": not post_seen}
            elif kind == "body_start":
                if caller is not None and caller["steps"] < entry[1]:
                    caller["bodies_after"] += 1
            elif kind == "post":
                post_seen = True
            elif kind == "post_in" and not received_seen:
                post_in, received_seen = entry[1], True
        out += aborts
        if self.approval_signal is not None:
            out.append({"trace": v, "call": call, "event": "approval_signal",
                        "signal": self.approval_signal})  # fmt: skip
        if caller is not None:
            out.append({"trace": v, "call": call, "event": "caller_aborted", **caller})
        out += [{"trace": v, "call": call, "event": "slot_after_next", "same": same}
                for same in self.slot_after_next]  # fmt: skip
        if self.held is not None:
            seconds, went = self.held
            held = {"trace": v, "call": call, "event": "held", "seconds": seconds}
            if went:
                held["went"] = went
            out.append(held)
        if self.settled is not None:
            started, done = self.settled
            out.append({"trace": v, "call": call, "event": "settled", "bodies_started": started,
                        "bodies_settled": done})  # fmt: skip
        received = {"trace": v, "call": call, "event": "post_received"}
        if post_in is not None:
            received["result"] = post_in.to_data()
        out.append(received)
        if self.result is not None:
            out.append({"trace": v, "call": call, "event": "returned",
                        "result": self.result.to_data()})  # fmt: skip
            if self.caller_cancelled:
                out.append({"trace": v, "call": call, "event": "caller_cancelled"})
        elif self.error is not None:
            out.append({"trace": v, "call": call, "event": "raised",
                        "error": f"{type(self.error).__name__}: {self.error}"})  # fmt: skip
        same = all(r is self.result for r in self.notified)
        out.append({"trace": v, "call": call, "event": "notified", "count": len(self.notified),
                    "same": same})  # fmt: skip
        if self.frozen is not None:
            out.append({"trace": v, "call": call, "event": "frozen", "result": self.frozen[0],
                        "view": self.frozen[1]})  # fmt: skip
        if s.timeout == "budget":
            outer = "outer_deadline" in s.wrappers
            expired = "timer" in kinds or ("hold" in kinds and not outer)
            out.append({"trace": v, "call": call, "event": "deadline", "expired": expired,
                        "outer": outer})  # fmt: skip
        left = {"trace": v, "call": call, "event": "listeners_left", "watched": self.watched,
                "leaks": len(self.leaked_signals)}  # fmt: skip
        if self.leaked_signals:
            left["first"] = self.leaked_signals[0]
        out.append(left)
        return out

    def first(self, kind: str) -> int | None:
        """Index in ``log`` of the first entry of ``kind``."""
        return next((i for i, e in enumerate(self.log) if e[0] == kind), None)
