"""The judge's record, and how the registry's record checks are asked of it.

A record check (:mod:`toolcancel.oracle.judge.calls` and the judge's other modules) registers in
the one registry (:mod:`toolcancel.oracle.judge.registry`) from the ``record`` vantage; the
functions here ask them of a record -- the first broken rule, every broken rule, the rules that
could have failed -- reading the registry's record checks once per kind of record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ...contract.trace import FORMAT_VERSION
from .registry import RECORD, Check, generation, of, rule_of

if TYPE_CHECKING:  # the scenario harness asks the judge (Observation.problems): no import back
    from ..scenario_language import Scenario
    from ..vectors import Expectation

SLOT_WRAPPERS: Final = frozenset(
    {"replace_live", "replace_aborting", "replace_aborted", "remove", "outer_deadline"}
)
"""Wrapper behaviours that put another signal than the caller's in the slot before the body."""


# ------------------------------------------------------------------------------------------------
# The record
# ------------------------------------------------------------------------------------------------


class Record:
    """One call's lines (canonical trace format), indexed by event name.

    ``revision`` and ``caller`` (the caller signal at entry: none, live or aborted) come from the
    ``call_entry`` line when the record has one, else from what the harness ran."""

    __slots__ = ("_at", "_events", "caller", "derived", "lines", "revision")

    def __init__(self, lines: Sequence[Mapping[str, Any]], revision: str, caller: str) -> None:
        self.lines = list(lines)
        self.revision = revision
        self.caller = caller
        self.derived: dict[str, Any] = {}
        """What a judge worked out from the lines once, for every check that asks (the path
        the contract's machine replays: :func:`toolcancel.oracle.judge.path.path_facts`)."""
        at: dict[str, list[int]] = {}
        i = 0
        for line in self.lines:  # no list made per line for setdefault: verify indexes ~40
            event = line["event"]  # lines per schedule
            if event in at:
                at[event].append(i)
            else:
                at[event] = [i]
            i += 1
        self._at = at
        self._events = frozenset(at)

    def has(self, event: str) -> bool:
        return event in self._at

    def events(self) -> frozenset[str]:
        """The events the record holds."""
        return self._events

    def at(self, event: str) -> list[int]:
        """Indices of the ``event`` lines, in order."""
        return self._at.get(event, [])

    def of(self, event: str) -> list[Mapping[str, Any]]:
        return [self.lines[i] for i in self._at.get(event, ())]

    def end(self) -> int:
        return len(self.lines)

    def body_signals(self, at: str) -> list[tuple[int, Mapping[str, Any]]]:
        """``(index, line)`` of each ``body_signal`` line taken at ``start`` or ``settle``."""
        return [(i, self.lines[i]) for i in self.at("body_signal") if self.lines[i]["at"] == at]

    def starts(self) -> list[int]:
        """Where each body invocation started: ``body_start`` lines (the registry's trace), else
        the harness's ``body_signal`` lines at start."""
        found = self.at("body_start")
        return found if found else [i for i, _ in self.body_signals("start")]

    @property
    def trace(self) -> bool:
        """Whether the registry's own trace is in the record (the trace level)."""
        return self.has("call_entry")


def env_line(call: str, event: str, **fields: Any) -> dict[str, Any]:
    """An environment observation line of ``call``, in the trace format."""
    return {"trace": FORMAT_VERSION, "call": call, "event": event, **fields}


def _signal_line(call: str, at: str, signal: Mapping[str, Any]) -> dict[str, Any]:
    line = env_line(call, "body_signal", at=at, aborted=bool(signal.get("aborted")))
    if signal.get("reason") is not None:
        line["reason"] = signal["reason"]
    return line


def answer_record(answer: Mapping[str, Any], call: str, revision: str, caller: str) -> Record:
    """The record of an adapter's answer (protocol of ``spec/vectors/README.md``, its shape
    already accepted by :mod:`toolcancel.oracle.conform.protocol`): its trace lines, if it is a
    trace-level answer, with ``settled`` put where ``execute()`` settled (``settled_at``), then
    what the environment observed, in the order it happened."""
    observed: Mapping[str, Any] = answer["observed"]
    traced = answer.get("trace") is not None
    trace: list[Mapping[str, Any]] = list(answer.get("trace") or ())
    if trace and isinstance(trace[0].get("call"), str):
        call = trace[0]["call"]  # the environment's lines are the registry's call's
    lines: list[Mapping[str, Any]] = []
    approval = observed.get("approval_signal")
    if approval is not None:
        lines.append(env_line(call, "approval_signal", signal=approval))
    if observed.get("caller_aborted") is not None:
        lines.append(env_line(call, "caller_aborted", **observed["caller_aborted"]))
    if traced:
        inserts: list[tuple[int, Mapping[str, Any]]] = []  # (trace lines before it, line)
        held = observed.get("held")
        if held is not None:
            inserts.append((observed["held_at"], env_line(call, "held", **held)))
        at = observed.get("settled_at")
        if at is not None:
            head = trace[:at]
            started = sum(1 for x in head if x.get("event") == "body_start")
            done = sum(1 for x in head if x.get("event") == "body_settle")
            seen = observed.get("settled")  # the environment's own counts, if it gave them
            if seen is not None:
                # a body still ran if either witness saw it run: the registry's trace may claim
                # a body_settle when it stops waiting; the environment sees the body itself
                started = max(started, seen["bodies_started"])
                done = min(done, seen["bodies_settled"])
            inserts.append(
                (at, env_line(call, "settled", bodies_started=started, bodies_settled=done))
            )
        merged: list[Mapping[str, Any]] = []
        k = 0
        for pos, line in sorted(inserts, key=lambda x: x[0]):  # stable: a hold before a settle
            merged += trace[k:pos]
            merged.append(line)
            k = pos
        lines[:0] = [*merged, *trace[k:]]
        for signal in observed["body_signals"]:
            lines.append(_signal_line(call, "settle", signal))
    else:
        for body in observed["bodies"]:
            lines.append(_signal_line(call, "start", body["start"]))
            if body["settle"] is not None:
                lines.append(_signal_line(call, "settle", body["settle"]))
        if observed["settled"] is not None:
            # what had started and settled when execute() settled: a body left running is the
            # first departure, before the steps after the body that it makes look wrong
            lines.append(env_line(call, "settled", **observed["settled"]))
    for same in observed.get("slot_after_next") or ():
        lines.append(env_line(call, "slot_after_next", same=same))
    if "post_received" in observed:
        received = observed["post_received"]
        extra = {} if received is None else {"result": received}
        lines.append(env_line(call, "post_received", **extra))
    result = answer.get("result")
    if result is not None:
        lines.append(env_line(call, "returned", result=result))
        if observed.get("caller_cancelled"):  # the caller got CancelledError instead
            lines.append(env_line(call, "caller_cancelled"))
    elif observed.get("raised") is not None:  # with caller_cancelled: the caller's own
        extra = {"cancellation": True} if observed.get("caller_cancelled") else {}
        lines.append(env_line(call, "raised", error=observed["raised"], **extra))
    notified = env_line(call, "notified", count=observed["notifications"])
    if observed.get("notified_same") is not None:
        notified["same"] = observed["notified_same"]
    lines.append(notified)
    frozen = observed.get("frozen")
    if frozen is not None:
        lines.append(env_line(call, "frozen", result=frozen["result"], view=frozen["view"]))
    if observed.get("deadline") is not None:
        lines.append(env_line(call, "deadline", **observed["deadline"]))
    listeners = observed.get("listeners")
    if listeners is not None:
        lines.append(env_line(call, "listener_count", **listeners))
    left = observed.get("listeners_left")
    if left is not None:
        lines.append(env_line(call, "listeners_left", **left))
    return Record(lines, revision, caller)


# ------------------------------------------------------------------------------------------------
# What the contract allows the call (a vector), and what a check finds
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Want:
    """What the contract allows for the call: the vector's scenario, the expectation the answer
    is compared with, and every expectation the contract allows (MAY paths)."""

    scenario: Scenario
    expectation: Expectation | None = None
    """None: the call's setup alone, no vector (verify judges runs it made itself)."""
    expectations: tuple[Expectation, ...] = ()
    post_rule: Callable[[Any], str] | None = None
    """The rule of the decision that made what post-execute must receive, given what it got
    (the contract's path replayed: conform's to give); None: R20's own."""

    @property
    def vector(self) -> bool:
        """Whether there is an expectation to compare with (a vector), not only the setup."""
        return self.expectation is not None

    @property
    def caller_aborts(self) -> bool:
        """Whether the caller's signal aborts after entry on some allowed path."""
        return any("caller_abort" in p for e in self.expectations for p in e.paths)

    def aborted_before_dispatch(self) -> bool:
        """Whether the caller aborted before the expected path's first base dispatch: at
        entry, or by a ``caller_abort`` before it.  A path that never dispatches and never
        aborts (invalid arguments, a denial) is not one: a body started there is an extra start
        (R18), not a late one."""
        assert self.expectation is not None
        s = self.scenario
        for name in self.expectation.paths[0]:
            if name == "caller_abort":
                return True
            if name == "base_dispatch":
                return False
        return s.caller == "aborted" or s.cancel == "before_entry" or self.caller_aborts


@dataclass(frozen=True)
class Failure:
    """A check that failed: its rule, where in the record the evidence is, and why."""

    rule: str
    at: int  # index of the record line that shows it (the record's end: a line is missing)
    step: str
    why: str
    expected: Any = ""
    observed: Any = ""

    @classmethod
    def of(
        cls,
        check: Callable[..., Any],
        at: int,
        step: str,
        why: str,
        expected: Any = "",
        observed: Any = "",
    ) -> Failure:
        """A failure citing the rule the registered ``check`` decides -- the check's own, or
        another's it names as the one that decides the case -- so a check body writes no rule
        id: its registration does (:func:`~toolcancel.oracle.judge.registry.rule_of`)."""
        return cls(rule_of(check), at, step, why, expected, observed)


def first_failure(
    record: Record,
    want: Want | None,
    level: str,
    *,
    phase: str | None = None,
    departs: frozenset[str] = frozenset(),
) -> Failure | None:
    """The first broken rule: of the checks that can fail at ``level`` and fail, the one whose
    evidence comes earliest in the record (registration order breaks ties).  ``phase``: only
    the checks asked then (:attr:`Check.phase`); ``departs``: rules not asked, those a declared
    deviation breaks on purpose (its own expectation is what the answer is compared with)."""
    best: Failure | None = None
    for c in _reading(level, phase, record.events()):
        if c.rule in departs or not c.answerable(want):
            continue
        found = c.judge(record, want)
        if found is not None and (best is None or found.at < best.at):
            best = found
    return best


def failures(
    record: Record,
    want: Want | None,
    level: str,
    *,
    phase: str | None = None,
    departs: frozenset[str] = frozenset(),
) -> list[Failure]:
    """Every broken rule's earliest failure, earliest evidence first (registration order
    breaks ties): what :func:`first_failure` leads with, and every other rule the record breaks."""
    found: dict[str, Failure] = {}
    for c in _reading(level, phase, record.events()):
        if c.rule in departs or not c.answerable(want):
            continue
        failure = c.judge(record, want)
        if failure is not None and (c.rule not in found or failure.at < found[c.rule].at):
            found[c.rule] = failure
    return sorted(found.values(), key=lambda f: f.at)


def could_fail(record: Record, want: Want | None, level: str) -> frozenset[str]:
    """The rules some check of which could have failed on ``record`` at ``level``."""
    return frozenset(
        c.rule
        for c in _reading(level, None, record.events())
        if c.answerable(want) and c.holds(record, want)
    )


_READING: dict[tuple[str, str | None, int, frozenset[str]], tuple[Check, ...]] = {}


def _reading(level: str, phase: str | None, present: frozenset[str]) -> tuple[Check, ...]:
    """:func:`asked`, of those whose events are all ``present``: worked out once per kind of
    record (conform judges thousands of answers of a few dozen kinds)."""
    key = (level, phase, generation(), present)
    found = _READING.get(key)
    if found is None:
        found = _READING[key] = tuple(c for c in asked(level, phase) if c.reads <= present)
    return found


_ASKED: dict[tuple[str, str | None, int], tuple[Check, ...]] = {}


def asked(level: str, phase: str | None) -> tuple[Check, ...]:
    """The registry's record checks that can fail at ``level`` (and are asked at ``phase``), in
    the registry's order; cached per generation of the registry (every judged answer asks this)."""
    key = (level, phase, generation())
    found = _ASKED.get(key)
    if found is None:
        found = _ASKED[key] = tuple(
            c for c in of(RECORD) if level in c.levels and (phase is None or c.phase == phase)
        )
    return found
