"""One judge: what each rule observably means, written once, under its rule id.

Every judge of a call reads one **record**: the call's lines in the canonical trace format
(:mod:`toolcancel.trace`) -- the registry's own trace when the implementation writes one, and the
*environment observations* of :data:`toolcancel.trace.ENVIRONMENT` that only a harness around the
registry can see (each body's signal at start and settle, when ``execute()`` settled, what it
returned or raised, the notifications, listener counts, what post-execute received, the frozen
result and view, the approval request's signal, the slot after each ``next()``).  ``conform``
builds one from an adapter's answer (:func:`answer_record`); an adapter may write the
environment lines itself.

A **check** is one function registered under the rule id it decides (:func:`check`), declaring
the events it reads, the conformance levels at which it can fail (``trace``: the registry's trace
is in the record; ``outcome``: only what a user sees) and its antecedent.  It *could have failed*
on a record when the events it reads are there and its antecedent held (:meth:`Check.could_fail`);
that, and nothing kept by hand, is what coverage reports as checked (:func:`coverage_rows`).

The contract's transitions are checked by the trace checker (:mod:`toolcancel.checker`), which
replays the registry's trace through the machine and cites the rule the contract data gives the
transition it could not take.  The checks here decide what no transition carries: quiescence,
the body's signals, the notifications, listener leaks, the slot, what post-execute received.
Where several fail, the one whose evidence comes first in the record is the first broken rule
(:func:`first_failure`): the record departs from every allowed path there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from .contract import load_contract
from .judge_lines import TRACE_CHECKS, TRACE_RULES, published_once, result_envelope
from .judge_turns import TURN_RULES
from .results import canonical_json
from .trace import ENVIRONMENT, FORMAT_VERSION

if TYPE_CHECKING:  # the scenario harness asks the judge (Observation.problems): no import back
    from .contract import Contract
    from .scenario import Observation, Scenario
    from .vectors import Expectation

LEVELS: Final = ("trace", "outcome")
BOTH: Final = frozenset(LEVELS)
SLOT_WRAPPERS: Final = frozenset(
    {"replace_live", "replace_aborting", "replace_aborted", "remove", "outer_deadline"}
)
"""Wrapper behaviours that put another signal than the caller's in the slot before the body."""
_CANCEL_CODES: Final = ("ABORTED", "ABORTED_BEFORE_DISPATCH")


# ------------------------------------------------------------------------------------------------
# The record
# ------------------------------------------------------------------------------------------------


class Record:
    """One call's lines (canonical trace format), indexed by event name.

    ``revision`` and ``caller`` (the caller signal at entry: none, live or aborted) come from the
    ``call_entry`` line when the record has one, else from what the harness ran."""

    __slots__ = ("_at", "caller", "lines", "revision")

    def __init__(self, lines: Sequence[Mapping[str, Any]], revision: str, caller: str) -> None:
        self.lines = list(lines)
        self.revision = revision
        self.caller = caller
        self._at: dict[str, list[int]] = {}
        for i, line in enumerate(self.lines):
            self._at.setdefault(line["event"], []).append(i)

    def has(self, event: str) -> bool:
        return event in self._at

    def events(self) -> frozenset[str]:
        """The events the record holds."""
        return frozenset(self._at)

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
    """The record of an adapter's answer (protocol of ``spec/vectors/README.md``): its trace
    lines, if any, with ``settled`` put where ``execute()`` settled (``settled_at``), then what
    the environment observed, in the order it happened."""
    observed: Mapping[str, Any] = answer["observed"]
    trace: list[Mapping[str, Any]] = list(answer.get("trace") or ())
    if trace and isinstance(trace[0].get("call"), str):
        call = trace[0]["call"]  # the environment's lines are the registry's call's
    lines: list[Mapping[str, Any]] = []
    approval = observed.get("approval_signal")
    if approval is not None:
        lines.append(env_line(call, "approval_signal", signal=approval))
    if trace:
        at = observed.get("settled_at")
        if at is None:
            lines[:0] = trace
        else:
            head = trace[:at]
            started = sum(1 for x in head if x.get("event") == "body_start")
            done = sum(1 for x in head if x.get("event") == "body_settle")
            settled = env_line(call, "settled", bodies_started=started, bodies_settled=done)
            lines[:0] = [*head, settled, *trace[at:]]
        for signal in observed.get("body_signals") or ():
            lines.append(_signal_line(call, "settle", signal))
    else:
        for body in observed.get("bodies") or ():
            lines.append(_signal_line(call, "start", body["start"]))
            if body.get("settle") is not None:
                lines.append(_signal_line(call, "settle", body["settle"]))
    settled_counts = observed.get("settled")
    if not trace and settled_counts is not None:
        # what had started and settled when execute() settled: a body left running is the
        # first departure, before the steps after the body that it makes look wrong
        lines.append(env_line(call, "settled", **settled_counts))
    for same in observed.get("slot_after_next") or ():
        lines.append(env_line(call, "slot_after_next", same=bool(same)))
    if "post_received" in observed:
        received = observed["post_received"]
        extra = {} if received is None else {"result": received}
        lines.append(env_line(call, "post_received", **extra))
    result = answer.get("result")
    if result is not None:
        lines.append(env_line(call, "returned", result=result))
    elif observed.get("raised") is not None:
        lines.append(env_line(call, "raised", error=str(observed["raised"])))
    notified = env_line(call, "notified", count=observed.get("notifications", 0))
    if observed.get("notified_same") is not None:
        notified["same"] = bool(observed["notified_same"])
    lines.append(notified)
    frozen = observed.get("frozen")
    if frozen is not None:
        lines.append(env_line(call, "frozen", result=frozen["result"], view=frozen["view"]))
    listeners = observed.get("listeners")
    if listeners is not None:
        lines.append(env_line(call, "listener_count", **listeners))
    left = observed.get("listeners_left")
    if isinstance(left, dict) and _counts_left(left):
        lines.append(env_line(call, "listeners_left", **left))
    return Record(lines, revision, caller)


def _counts_left(left: Any) -> bool:
    """Whether an answer's optional ``listeners_left`` is {watched, leaks[, first]}."""
    return (
        isinstance(left, dict)
        and {"watched", "leaks"} <= left.keys() <= {"watched", "leaks", "first"}
        and all(type(left[k]) is int and left[k] >= 0 for k in ("watched", "leaks"))
        and isinstance(left.get("first", ""), str)
    )


# ------------------------------------------------------------------------------------------------
# What the contract allows the call (a vector), and what a check finds
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Want:
    """What the contract allows for the call: the vector's scenario, the expectation the answer
    is compared with, and every expectation the contract allows (MAY paths)."""

    scenario: Scenario
    expectation: Expectation
    expectations: tuple[Expectation, ...]
    post_rule: Callable[[Any], str] | None = None
    """The rule of the decision that made what post-execute must receive, given what it got
    (the contract's path replayed: conform's to give); None: R20's own."""

    @property
    def caller_aborts(self) -> bool:
        """Whether the caller's signal aborts after entry on some allowed path."""
        return any("caller_abort" in p for e in self.expectations for p in e.paths)

    def aborted_before_dispatch(self) -> bool:
        """Whether the caller aborted before the expected path's first base dispatch."""
        for name in self.expectation.paths[0]:
            if name == "caller_abort":
                return True
            if name == "base_dispatch":
                return False
        return True


@dataclass(frozen=True)
class Failure:
    """A check that failed: its rule, where in the record the evidence is, and why."""

    rule: str
    at: int  # index of the record line that shows it (the record's end: a line is missing)
    step: str
    why: str
    expected: Any = ""
    observed: Any = ""


Judge = Callable[[Record, "Want | None"], "Failure | None"]
Antecedent = Callable[[Record, "Want | None"], bool]


def _always(record: Record, want: Want | None) -> bool:
    return True


@dataclass(frozen=True)
class Check:
    """One rule's observable meaning: a function of a record (and the vector, if any)."""

    rule: str
    step: str
    judge: Judge
    reads: frozenset[str]  # events that must be in the record for it to decide anything
    levels: frozenset[str]  # conformance levels at which it can fail
    antecedent: Antecedent = _always
    when: str = ""  # the antecedent in words
    needs_vector: bool = False  # it compares with what the contract allows (a Want)
    outcome: bool = False  # ... and what it compares is part of the outcome, like the result

    @property
    def phase(self) -> str:
        """When it is asked: ``record`` (decided by the record alone), ``outcome`` (with the
        result: what the call decided) or ``vector`` (the other differences from the vector)."""
        if not self.needs_vector:
            return "record"
        return "outcome" if self.outcome else "vector"

    def could_fail(self, record: Record, want: Want | None, level: str) -> bool:
        """Whether this check could have failed on ``record``: its level, its events, the
        vector it compares with, and its antecedent."""
        if level not in self.levels or (self.needs_vector and want is None):
            return False
        return all(record.has(e) for e in self.reads) and self.antecedent(record, want)

    def __call__(self, record: Record, want: Want | None) -> Failure | None:
        if self.needs_vector and want is None:
            return None
        if not all(record.has(e) for e in self.reads):
            return None
        return self.judge(record, want)


CHECKS: Final[dict[str, list[Check]]] = {}
"""The registry: rule id -> its checks, in registration order (the contract's rule order)."""
_REGISTERED: Final[list[str]] = []
"""The rule of each registration, in order (its length keys the caches of asked checks)."""


def check(
    rule: str,
    step: str,
    *,
    reads: Sequence[str] = (),
    levels: frozenset[str] = BOTH,
    when: tuple[Antecedent, str] | None = None,
    needs_vector: bool = False,
    outcome: bool = False,
) -> Callable[[Judge], Judge]:
    """Register the decorated function as a check of ``rule``."""

    def register(fn: Judge) -> Judge:
        antecedent, words = when if when is not None else (_always, "")
        CHECKS.setdefault(rule, []).append(
            Check(
                rule, step, fn, frozenset(reads), levels, antecedent, words, needs_vector, outcome
            )
        )
        _REGISTERED.append(rule)
        return fn

    return register


def checks() -> Iterator[Check]:
    """Every registered check, in registration order."""
    for found in CHECKS.values():
        yield from found


def first_failure(
    record: Record, want: Want | None, level: str, *, phase: str | None = None
) -> Failure | None:
    """The first broken rule: of the checks that can fail at ``level`` and fail, the one whose
    evidence comes earliest in the record (registration order breaks ties).  ``phase``: only
    the checks asked then (:attr:`Check.phase`)."""
    best: Failure | None = None
    for c in _asked(level, phase):
        found = c(record, want)
        if found is not None and (best is None or found.at < best.at):
            best = found
    return best


def could_fail(record: Record, want: Want | None, level: str) -> frozenset[str]:
    """The rules some check of which could have failed on ``record`` at ``level``."""
    return frozenset(c.rule for c in _asked(level, None) if c.could_fail(record, want, level))


_ASKED: dict[tuple[str, str | None, int], tuple[Check, ...]] = {}


def _asked(level: str, phase: str | None) -> tuple[Check, ...]:
    """The registered checks that can fail at ``level`` (and are asked at ``phase``), in
    registration order; cached per size of the registry (every judged answer asks this)."""
    size = sum(len(found) for found in CHECKS.values())
    key = (level, phase, size)
    found = _ASKED.get(key)
    if found is None:
        found = _ASKED[key] = tuple(
            c for c in checks() if level in c.levels and (phase is None or c.phase == phase)
        )
    return found


# ------------------------------------------------------------------------------------------------
# The checks
# ------------------------------------------------------------------------------------------------


def _signal_text(signals: Sequence[Mapping[str, Any]]) -> str:
    if not signals:
        return "(no body ran)"
    return ", ".join(
        f"aborted by {s.get('reason') or 'nobody'}" if s.get("aborted") else "live" for s in signals
    )


def _signal(line: Mapping[str, Any]) -> dict[str, Any]:
    return {"aborted": bool(line["aborted"]), "reason": line.get("reason")}


@check("R27", "quiescence", reads=("settled",))
def quiescent(record: Record, want: Want | None) -> Failure | None:
    """execute() settles only once every body it started has settled, and starts none after."""
    (i,) = record.at("settled")[:1]
    settled = record.lines[i]
    started, done = settled["bodies_started"], settled["bodies_settled"]
    if started > done:
        return Failure(
            "R27",
            i,
            "quiescence",
            f"execute() settled while {started - done} tool body invocation(s) were still "
            "running; the registry must await the body to quiescence.",
            "no body running when execute() settled",
            f"{started - done} body running",
        )
    starts = record.starts()
    if len(starts) > started:
        return Failure(
            "R27",
            starts[started],
            "quiescence",
            f"a body started after execute() settled ({len(starts)} started in all, {started} "
            "before it settled): the call must be quiescent when it settles.",
            f"{started} body start(s) in all",
            f"{len(starts)} body start(s)",
        )
    return None


@check("R27", "quiescence")
def settles(record: Record, want: Want | None) -> Failure | None:
    """execute() settles: it neither hangs nor leaves the call waiting on nothing."""
    if record.has("settled") or record.has("returned"):
        return None
    raised = record.of("raised")
    what = raised[0]["error"] if raised else "it neither returned nor raised"
    return Failure(
        "R27",
        record.end(),
        "quiescence",
        f"execute() never settled ({what}): the call neither finished nor waited at a gate.",
        "execute() settles",
        "never settled",
    )


@check("R31", "result")
def returns_a_result(record: Record, want: Want | None) -> Failure | None:
    """Every call publishes a result: execute() returns it, never raises."""
    if record.has("returned") or not record.has("settled"):
        return None  # no settle: that is settles' failure
    raised = record.of("raised")
    what = raised[0]["error"] if raised else "nothing"
    return Failure(
        "R31",
        record.at("raised")[0] if raised else record.end(),
        "result",
        f"execute() did not return a result: it raised {what}.",
        "a result",
        f"raised {what}",
    )


def _not_seed_pre_aborted(record: Record, want: Want | None) -> bool:
    return not (record.caller == "aborted" and record.revision == "seed")


@check(
    "R17",
    "body_start_signals",
    reads=("body_signal",),
    levels=frozenset({"outcome"}),
    when=(_not_seed_pre_aborted, "a body started, unless the seed's pre-aborted entry"),
)
def c2_invokes_live(record: Record, want: Want | None) -> Failure | None:
    """Checkpoint C2 invokes a body only with a live fused signal (the seed's pre-aborted entry
    aside: it disables every replacement, R25)."""
    if not _not_seed_pre_aborted(record, want):
        return None
    starts = record.body_signals("start")
    for k, (i, line) in enumerate(starts):
        if line["aborted"] or line.get("reason") is not None:
            return Failure(
                "R17",
                i,
                "body_start_signals",
                f"body invocation {k + 1} started with a signal {_signal_text([line])}; checkpoint "
                "C2 does not invoke the body once its signal is aborted.",
                "live",
                _signal_text([_signal(x) for _, x in starts]),
            )
    return None


def _seed_pre_aborted(record: Record, want: Want | None) -> bool:
    return not _not_seed_pre_aborted(record, want)


@check(
    "R25",
    "body_start_signals",
    reads=("body_signal",),
    levels=frozenset({"outcome"}),
    when=(_seed_pre_aborted, "the seed's pre-aborted entry, and a body started"),
    needs_vector=True,
)
def pre_aborted_body_signal(record: Record, want: Want | None) -> Failure | None:
    """A caller aborted at entry (seed) runs every stage and hands the body its aborted signal:
    each body starts aborted exactly when it settles aborted (whose reason it carries is
    fusion's, R21)."""
    assert want is not None
    if not _seed_pre_aborted(record, want):
        return None
    starts = record.body_signals("start")
    wanted = [dict(b) for b in want.expectation.body_signals]
    got = [_signal(x) for _, x in starts]
    if len(got) != len(wanted):
        return None
    differ = [
        k for k, (x, y) in enumerate(zip(got, wanted, strict=True)) if x["aborted"] != y["aborted"]
    ]
    if not differ:
        return None
    k = differ[0]
    return Failure(
        "R25",
        starts[k][0],
        "body_start_signals",
        f"body invocation {k + 1} started with a signal {_signal_text([got[k]])}; it must start "
        f"{_signal_text([wanted[k]])} (a caller aborted at entry runs every stage and hands the "
        "body its aborted signal).",
        _signal_text(wanted),
        _signal_text(got),
    )


@check("R18", "body_starts", needs_vector=True)
def body_starts(record: Record, want: Want | None) -> Failure | None:
    """The body is invoked exactly as often as the contract's path invokes it (one per dispatch
    the contract lets through; a late start is R28's)."""
    assert want is not None
    exp = want.expectation
    starts = record.starts()
    settles = record.body_signals("settle")
    if len(starts) == exp.body_starts and len(settles) == len(starts):
        return None
    late = len(starts) > exp.body_starts and want.aborted_before_dispatch()
    rule = "R28" if late else "R18"
    at = starts[exp.body_starts] if len(starts) > exp.body_starts else record.end()
    seen = "by the trace" if record.trace else "by the adapter's report"
    return Failure(
        rule,
        at,
        "body_starts",
        f"the body started {len(starts)} time(s) {seen} and {len(settles)} by the adapter's "
        f"observation; the contract starts it {exp.body_starts} time(s) here.",
        exp.body_starts,
        len(starts),
    )


@check("R21", "body_signals", reads=("body_signal",), needs_vector=True)
def fused_signal(record: Record, want: Want | None) -> Failure | None:
    """The body's fused signal aborts when the caller's or the slot's does, with the first
    source's reason (what it showed when the body settled)."""
    assert want is not None
    settles = record.body_signals("settle")
    got = [_signal(x) for _, x in settles]
    wanted = [dict(b) for b in want.expectation.body_signals]
    if got == wanted or len(got) != len(wanted):
        return None  # a count that differs is body_starts'
    k = next(k for k, (x, y) in enumerate(zip(got, wanted, strict=True)) if x != y)
    return Failure(
        "R21",
        settles[k][0],
        "body_signals",
        f"when the body settled its signal was {_signal_text(got)}; the fused signal must be "
        f"{_signal_text(wanted)} (it aborts when the caller or the slot's signal does, with the "
        "first source's reason).",
        _signal_text(wanted),
        _signal_text(got),
    )


@check("R31", "notifications", reads=("notified",))
def notified_once(record: Record, want: Want | None) -> Failure | None:
    """Observers are notified exactly once per call (as often as the contract notifies)."""
    expected = 1 if want is None else want.expectation.notifications
    i = record.at("notified")[0]
    count = record.lines[i]["count"]
    if count == expected:
        return None
    return Failure(
        "R31",
        i,
        "notifications",
        f"observers were notified {count} time(s); the contract notifies exactly "
        f"{expected} time(s).",
        expected,
        count,
    )


@check("R31", "notified_same", reads=("notified",))
def notified_same(record: Record, want: Want | None) -> Failure | None:
    """Observers get the very object execute() returns."""
    i = record.at("notified")[0]
    if record.lines[i].get("same") is not False:
        return None
    return Failure(
        "R31",
        i,
        "notified_same",
        "an observer was notified with another object than the one execute() returned; the "
        "contract notifies the very result it returns.",
        "the returned object",
        "another object",
    )


@check("R30", "frozen", reads=("frozen",))
def result_frozen(record: Record, want: Want | None) -> Failure | None:
    """The published result is deep-frozen before any observer sees it."""
    i = record.at("frozen")[0]
    if record.lines[i]["result"]:
        return None
    return Failure(
        "R30",
        i,
        "frozen",
        "an observer could write into the published result; it must be deep-frozen "
        "(snapshotted and frozen exactly once, before any observer sees it).",
        "a deep-frozen result",
        "a result that accepted a write",
    )


@check("R31", "frozen", reads=("frozen",))
def view_frozen(record: Record, want: Want | None) -> Failure | None:
    """The execution view is frozen immediately before observers are notified."""
    i = record.at("frozen")[0]
    if record.lines[i]["view"]:
        return None
    return Failure(
        "R31",
        i,
        "frozen",
        "an observer could write the execution view's signal slot; the registry must freeze "
        "the view immediately before notifying.",
        "a frozen view",
        "a slot that accepted a write",
    )


@check("R24", "approval_signal", reads=("approval_signal",))
def approval_signal(record: Record, want: Want | None) -> Failure | None:
    """The approval seam receives the slot's signal as pre-execute left it."""
    i = record.at("approval_signal")[0]
    if record.lines[i]["signal"] == "pre_slot":
        return None
    return Failure(
        "R24",
        i,
        "approval_signal",
        "the approval seam received another signal than the one pre-execute found in the slot; "
        "it must receive the slot's signal as it is when approval is asked (C itself, by "
        "identity, unless a pre-execute listener changed the slot).",
        "pre_slot",
        "other",
    )


@check("R23", "slot_after_next", reads=("slot_after_next",))
def slot_restored(record: Record, want: Want | None) -> Failure | None:
    """After next() settles, a wrapper finds in the slot the signal it handed on."""
    for k, i in enumerate(record.at("slot_after_next")):
        if not record.lines[i]["same"]:
            return Failure(
                "R23",
                i,
                "slot_after_next",
                f"after next() number {k + 1} settled, its wrapper found another signal in the "
                "slot than the one it handed on; after the body the slot holds what the wrappers "
                "left (W), and each inner wrapper restores what it found.",
                "the slot as the wrapper left it",
                f"another signal after next() {k + 1}",
            )
    return None


def _post_failure(record: Record, want: Want | None) -> tuple[int, Any, Any] | None:
    """Where what post-execute received differs from every allowed expectation's, if it does."""
    assert want is not None
    exp = want.expectation
    if exp.post_received is ...:
        return None
    i = record.at("post_received")[0]
    got = record.lines[i].get("result")
    if got == exp.post_received:  # the common case: equal data, no canonical text needed
        return None
    mine = canonical_json(got)
    if mine == canonical_json(exp.post_received):
        return None
    result = exp.result_json
    for e in want.expectations:  # a MAY path to the same result may hand it another one
        if e.post_received is not ... and e.result_json == result:
            if canonical_json(e.post_received) == mine:
                return None
    return i, got, exp.post_received


def _received(why: str, rule: str, found: tuple[int, Any, Any]) -> Failure:
    i, got, want = found
    return Failure(
        rule,
        i,
        "post_received",
        f"post-execute received {canonical_json(got)}; the contract hands it "
        f"{canonical_json(want)} here{why}",
        canonical_json(want),
        canonical_json(got),
    )


def _stated(record: Record, want: Want | None) -> bool:
    return want is not None and want.expectation.post_received is not ...


@check(
    "R10",
    "post_received",
    reads=("post_received",),
    when=(_stated, "the vector states what post-execute receives"),
    needs_vector=True,
    outcome=True,
)
def post_runs(record: Record, want: Want | None) -> Failure | None:
    """Post-execute runs exactly where the contract's stage order runs it."""
    found = _post_failure(record, want)
    if found is None or (found[1] is not None and found[2] is not None):
        return None
    return _received(".", "R10", found)


def _received_something(record: Record, want: Want | None) -> bool:
    return want is not None and want.expectation.post_received not in (None, ...)


@check(
    "R20",
    "post_received",
    reads=("post_received",),
    when=(_received_something, "post-execute runs"),
    needs_vector=True,
    outcome=True,
)
def post_sees_the_decided_result(record: Record, want: Want | None) -> Failure | None:
    """Post-execute receives every post-route result as the call decided it: the around
    chain's, replaced by checkpoint C3 when a late success meets a cancelled caller.  A wrong
    one cites the rule of the decision that made it (:attr:`Want.post_rule`)."""
    assert want is not None
    found = _post_failure(record, want)
    if found is None or found[1] is None or found[2] is None:
        return None
    rule = want.post_rule(found[1]) if want.post_rule is not None else "R20"
    return _received(".", rule, found)


def relay_on_live_caller(s: Scenario, body_starts: int, caller_aborts: bool) -> bool:
    """Whether a listener the registry leaves on the caller's signal would show in listener
    counts after the call: the caller is live at entry and never aborts (its abort consumes a
    once-listener before anything counts it), and the registry put one there -- a relay of the
    caller's and another signal, built for a body while a wrapper or the timeout policy had put
    that other signal in the slot.  ``toolcancel vectors`` keeps such runs for it (R22)."""
    if s.caller != "live" or s.cancel != "never" or caller_aborts:
        return False
    return body_starts > 0 and (s.timeout != "absent" or bool(SLOT_WRAPPERS & set(s.wrappers)))


def _leak_visible(record: Record, want: Want | None) -> bool:
    if record.caller != "live" or want is None:
        return False
    return relay_on_live_caller(want.scenario, want.expectation.body_starts, want.caller_aborts)


@check(
    "R22",
    "listeners",
    reads=("listener_count",),
    levels=frozenset({"outcome"}),
    when=(_leak_visible, "a relay was built on a caller that stays live"),
)
def no_listener_left(record: Record, want: Want | None) -> Failure | None:
    """The registry removes every listener it added to the caller's signal."""
    i = record.at("listener_count")[0]
    counts = record.lines[i]
    if counts["after"] == counts["before"]:
        return None
    return Failure(
        "R22",
        i,
        "listeners",
        f"the caller's signal had {counts['before']} listener(s) before execute() and "
        f"{counts['after']} after it settled; the registry must remove every listener it added.",
        counts["before"],
        counts["after"],
    )


def error_code(result: Any) -> Any:
    """The code of a result's error (the revised contract's ``error.info``), if any."""
    error = result.get("error") if isinstance(result, dict) else None
    if not isinstance(error, dict):
        return None
    info = error.get("info")
    return (info if isinstance(info, dict) else error).get("code")


# ------------------------------------------------------------------------------------------------
# Attribution: the rules conform cites for a difference from the vector, named once
# ------------------------------------------------------------------------------------------------
# conform compares an answer with what the contract allows; where no check above decides a
# difference by itself (another path, another result, another input to post-execute), it cites
# the rule of the contract's transition there, or one of these.  Each is the rule of a check
# registered above where one exists, so a rule id is written in this module only.


def rule_of(fn: Callable[..., Any]) -> str:
    """The rule the registered check (or trace check) ``fn`` decides."""
    for c in checks():
        if c.judge is fn:
            return c.rule
    for found in TRACE_CHECKS.values():
        for t in found:
            if t.judge is fn:
                return t.rule
    raise LookupError(f"{getattr(fn, '__name__', fn)!r} is not a registered check")


ENVELOPE: Final = rule_of(result_envelope)
"""The result's envelope: every result is checked on it."""
PUBLICATION: Final = rule_of(published_once)
"""Exactly one result, then one notification: every call is checked on it."""
STAGE_ORDER: Final = rule_of(post_runs)
"""The contract's stage order: a step the contract has nowhere, or after the whole path."""
QUIESCENCE: Final = rule_of(quiescent)
"""Every body started is settled before the call moves on: checked wherever a body started."""
BODY_SIGNAL: Final = rule_of(fused_signal)
"""Which signal, aborted by whom, each body got: checked wherever a body started."""
CHECKPOINT_C2: Final = rule_of(c2_invokes_live)
"""A body starts only on a live signal."""
CALLER_LISTENERS: Final = rule_of(no_listener_left)
"""No listener left on the caller's signal: decidable where a caller is."""
POST_INPUT: Final = rule_of(post_sees_the_decided_result)
"""Post-execute receives the result as the call decided it."""
ERROR_SHAPE: Final = "R44"
"""The revised contract's error shape (``error.message``, ``error.info``), of every result."""
LATE_SUCCESS: Final = "R28"
"""No late start, no late success: a success published after the caller cancelled before C4
(listed with the transitions of every cancellation, so a transition's other rule comes first)."""
CONTEXTS: Final = "R29"
"""What ``additionalContexts`` keeps, orders and drops: a result that differs only there."""
DEADLINE_FIRST: Final = "R34"
"""The deadline fired first: the around chain's result is TOOL_TIMEOUT."""
CHECKPOINT_C3: Final = "R19"
"""Checkpoint C3 replaces a late success by ABORTED before post-execute."""


DEADLINE_IDENTITY: Final = "R35"
"""A deadline is classified by its identity: only the registry's own is its TOOL_TIMEOUT."""


def misclassified_deadline(scenario: Scenario, got: Any, wanted: Any) -> bool:
    """Whether ``got`` is a TOOL_TIMEOUT where the contract gives another result although a
    deadline that is not the registry's own (a wrapper's) is in the chain: that deadline was
    classified by its code, not its identity (``DEADLINE_IDENTITY``)."""
    return (
        error_code(got) == "TOOL_TIMEOUT"
        and error_code(wanted) != "TOOL_TIMEOUT"
        and "outer_deadline" in scenario.wrappers
    )


def result_rules(rule_ids: Iterable[str]) -> frozenset[str]:
    """Of the rules the result comparison decides in full besides each outcome's own (the
    envelope, the revised error shape), those of a revision whose rules are ``rule_ids``."""
    return RESULT_RULES & frozenset(rule_ids)


# ------------------------------------------------------------------------------------------------
# Environment checks: what verify's harness (and an adapter that can) sees beyond the trace
# ------------------------------------------------------------------------------------------------


def _watched(record: Record, want: Want | None) -> bool:
    return bool(record.of("listeners_left")[0]["watched"])


@check(
    "R22",
    "listeners",
    reads=("listeners_left",),
    when=(_watched, "the environment counted listeners on a signal it handed or got"),
)
def no_signal_keeps_listeners(record: Record, want: Want | None) -> Failure | None:
    """The registry removes every listener it added, from every signal it was handed or handed
    out (a wrapper's own, the view's slot, the body's fused signal), not only the caller's."""
    i = record.at("listeners_left")[0]
    left = record.lines[i]
    if not left["leaks"]:
        return None
    return Failure(
        "R22",
        i,
        "listeners",
        f"after the call, the {left.get('first', 'signal')}: the registry must remove every "
        f"listener it added ({left['leaks']} of {left['watched']} signal(s) keep one).",
        0,
        left["leaks"],
    )


@check("R27", "quiescence", reads=("held",))
def waits_for_held_body(record: Record, want: Want | None) -> Failure | None:
    """A body that ignores its aborted signal is awaited however long it runs on: the call
    neither settles nor moves on to another stage meanwhile (no grace period)."""
    i = record.at("held")[0]
    held = record.lines[i]
    went = held.get("went")
    if not went:
        return None
    did = "settled" if went == "settled" else f"went on to {went}"
    return Failure(
        "R27",
        i,
        "quiescence",
        f"the call {did} within {held['seconds']:,} s after its body's signal aborted, while "
        "the body (which ignores its signal) was still running",
        "the call waits for its body",
        did,
    )


def environment_record(obs: Observation) -> Record:
    """The record of one run of verify's harness: its environment observation events."""
    return Record(obs.lines(), obs.scenario.revision, obs.scenario.caller)


def environment_failures(obs: Observation) -> list[Failure]:
    """What the record-only checks find in the environment's record of one run, earliest first
    (the harness's own ``problems``)."""
    return environment_judgement(environment_record(obs))[0]


def environment_judgement(record: Record) -> tuple[list[Failure], frozenset[str]]:
    """The record-only checks on an environment's record (the judge verify asks): what they
    find, earliest first, and the rules of those that could have failed on it."""
    found: list[Failure] = []
    rules: set[str] = set()
    present = record.events()
    for c in _record_checks():
        if not c.reads <= present:
            continue
        if c.antecedent(record, None):
            rules.add(c.rule)
        failure = c.judge(record, None)
        if failure is not None:
            found.append(failure)
    found.sort(key=lambda f: f.at)
    return found, frozenset(rules)


def _record_checks() -> tuple[Check, ...]:
    """The checks that decide from a record alone, at either level, once each."""
    key = len(_REGISTERED)
    cached = _RECORD_CHECKS.get(key)
    if cached is None:
        both = _asked("trace", "record") + _asked("outcome", "record")
        cached = _RECORD_CHECKS[key] = tuple(dict.fromkeys(both))
    return cached


_RECORD_CHECKS: dict[int, tuple[Check, ...]] = {}


# ------------------------------------------------------------------------------------------------
# Coverage, derived
# ------------------------------------------------------------------------------------------------


ENTRY_RULES: Final = {"none": "R26", "live": "R12", "aborted": "R25"}
"""The rule that decides how the registry treats the caller's signal at entry, per its state
(the revised contract's aborted entry is R42's: :func:`entry_rule`)."""
TRACE_READS: Final = {"R22": "listener", "R23": "slot"}
"""Rules the trace checker (:mod:`toolcancel.checker`) decides from lines a registry's trace may
leave out: listener lines are balanced (R22), slot lines never follow publication (R23)."""


def entry_rule(caller: str, revised: bool) -> str:
    """The rule of the caller's signal at entry (none, live or aborted)."""
    rule = ENTRY_RULES[caller]
    return "R42" if revised and rule == "R25" else rule


CHECKED: Final = "checked"
OUTCOME: Final = "outcome"
NONE: Final = "none"
CONSEQUENCE_WHY: Final = (
    "checked through the result: a wrong decision shows as another result, not the steps that "
    "made it"
)
NOT_EXERCISED: Final = "no vector of this run exercised it"
TURNS_WHY: Final = (
    "THE SCHEDULER WAS NOT RUN: the adapter's hello does not declare turns, so no turn vector "
    "was sent"
)


def rule_status(
    rule: str, level: str, *, checked: int, consequence: int, seen: frozenset[str]
) -> tuple[str, str]:
    """A rule's status in a run and why: ``checked`` when a check of it could have failed on
    some record, ``outcome`` when only the result comparison could, else ``none`` and why
    (the run's ``seen`` events and ``turns`` say which optional observations it had)."""
    if checked:
        return CHECKED, ""
    if consequence:
        return OUTCOME, CONSEQUENCE_WHY
    if rule in TURN_RULES and not CHECKS.get(rule):
        return NONE, TURNS_WHY if "turns" not in seen else NOT_EXERCISED
    optional = TRACE_READS.get(rule)
    if level == "trace" and optional is not None and optional not in seen:
        return NONE, f"the adapter wrote no {optional} lines (optional)"
    why = why_not(rule, level, seen)
    if why:
        return NONE, why
    if level not in registered_levels(rule):
        carried, shapes = contract_rules(load_contract())
        if rule in carried | shapes or (level == "trace" and rule in TRACE_RULES):
            return NONE, NOT_EXERCISED  # decided here, by a transition or the trace checker
        return NONE, static_why(rule, level)
    return NONE, "no vector of this run could fail it"


def why_not(rule: str, level: str, seen: frozenset[str]) -> str:
    """Why no check of ``rule`` at ``level`` could fail in a run whose records held the events
    ``seen``: an optional observation never reported, or an antecedent that never held."""
    found = [c for c in CHECKS.get(rule, ()) if level in c.levels]
    if not found:
        return ""
    if all(not c.reads <= seen for c in found):
        missing = sorted({e for c in found for e in c.reads if e not in seen})
        return f"the adapter reported no {', '.join(missing)} observations (optional)"
    words = "; ".join(dict.fromkeys(c.when for c in found if c.when))
    return f"no vector of this run met its antecedent ({words})" if words else ""


def registered_levels(rule: str) -> frozenset[str]:
    """The levels at which some registered check of ``rule`` can fail."""
    return frozenset(lv for c in CHECKS.get(rule, ()) for lv in c.levels)


def static_why(rule: str, level: str) -> str:
    """Why no check of the judge decides ``rule`` at ``level``, from what the registry holds."""
    if rule in TURN_RULES:
        return "decided by the turn vectors only (an adapter that declares turns)"
    levels = registered_levels(rule)
    if levels:
        return f"its checks read what only the {' and '.join(sorted(levels))} level reports"
    return "no check of the judge reads it and no transition carries it"


_WORDS: Final = {CHECKED: "checked", OUTCOME: "outcome level only", NONE: "not checked"}
RESULT_RULES: Final = frozenset({ENVELOPE, ERROR_SHAPE})
"""Besides each outcome's own rule, what the result comparison decides in full: the envelope and
the revised error shape."""


def contract_rules(contract: Contract) -> tuple[frozenset[str], frozenset[str]]:
    """The rules the contract's data carries: (guards', transitions' and the caller's entry
    rules; the outcomes' shape rules and what the result comparison decides in full)."""
    carried: set[str] = {g.rule for g in contract.guards} | set(ENTRY_RULES.values())
    shapes: set[str] = set(RESULT_RULES)
    for name in contract.revisions:
        table = contract.revision(name)
        carried |= {r for t in table.transitions for r in t.rules}
        shapes |= {o.rule for o in table.outcomes}
    return frozenset(carried), frozenset(shapes)


def static_status(rule: str, contract: Contract) -> tuple[str, str, str]:
    """What the judge can decide of ``rule`` at each level, from the registry and the contract
    alone: (trace status, outcome status, why not fully).  At trace level the trace checker
    replays every transition, guard and outcome shape and its own trace rules
    (:data:`TRACE_RULES`); at outcome level the registry's outcome checks and
    the result comparison decide a rule in full, a transition's decision shows through the
    result it leads to."""

    carried, shapes = contract_rules(contract)
    levels = registered_levels(rule)
    if rule in TURN_RULES - carried - shapes - TRACE_RULES:
        why = "needs an adapter that runs turns (optional: `turns` in its hello), else not checked"
        return CHECKED, CHECKED, why
    trace = CHECKED if rule in carried | shapes | TRACE_RULES or "trace" in levels else NONE
    outcome = NONE
    if "outcome" in levels or rule in shapes:
        outcome = CHECKED
    elif rule in carried:
        outcome = OUTCOME
    whys = []
    if outcome == OUTCOME:
        whys.append(CONSEQUENCE_WHY)
    if trace == CHECKED and outcome == NONE:
        whys.append("only the trace checker decides it, from the registry's own trace")
    elif NONE in (trace, outcome):
        whys.append(static_why(rule, "trace"))
    found = CHECKS.get(rule, ())
    optional = sorted({e for c in found for e in c.reads if e in _OPTIONAL})
    if any(not c.reads & _OPTIONAL for c in found):
        optional = []  # a check of it reads only what every answer carries
    if rule in TRACE_READS:
        optional.insert(0, TRACE_READS[rule] + " lines")
    if optional:
        whys.append(f"needs {' / '.join(optional)} (optional), else not checked")
    conditions = [c.when for c in CHECKS.get(rule, ()) if c.when and "outcome" in c.levels]
    if outcome == CHECKED and conditions:
        whys.append("at outcome level only where " + "; ".join(dict.fromkeys(conditions)))
    return trace, outcome, "; ".join(whys)


_OPTIONAL: Final = ENVIRONMENT - {"body_signal", "settled", "returned", "raised", "notified"}
"""Environment observations the adapter protocol leaves optional (the others every answer
carries: its body signals, when it settled, its result or error, its notifications)."""


def markdown_table(contract: Contract) -> str:
    """The per-rule table of ``spec/vectors/README.md`` (tested to be the README's own)."""
    lines = [
        "| rule | title | trace level | outcome level | why not (fully) checked |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in contract.rules:
        trace, outcome, why = static_status(r.id, contract)
        lines.append(f"| {r.id} | {r.title} | {_WORDS[trace]} | {_WORDS[outcome]} | {why} |")
    return "\n".join(lines)


__all__ = [
    "CHECKS",
    "Check",
    "Failure",
    "Record",
    "Want",
    "answer_record",
    "check",
    "checks",
    "could_fail",
    "entry_rule",
    "environment_failures",
    "environment_judgement",
    "environment_record",
    "first_failure",
    "markdown_table",
    "registered_levels",
    "relay_on_live_caller",
    "rule_status",
    "static_status",
    "static_why",
    "why_not",
]
