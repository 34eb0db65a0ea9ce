"""One judge: what each rule observably means, written once, under its rule id.

Every judge of a call reads one **record**: the call's lines in the canonical trace format
(:mod:`toolcancel.contract.trace`) -- the registry's own trace when the implementation writes
one, and the *environment observations* of :data:`toolcancel.contract.trace.ENVIRONMENT` that
only a harness around the registry can see (each body's signal at start and settle, when
``execute()`` settled, what it returned or raised, the notifications, listener counts, what
post-execute received, the frozen result and view, the approval request's signal, the slot
after each ``next()``, when the caller was aborted and what the tool's own deadline did).
``conform`` builds one from an adapter's answer (:func:`answer_record`); an adapter may write
the environment lines itself.

A **check** is one function registered under the rule id it decides, in the one registry
(:mod:`toolcancel.oracle.judge.registry`: one :class:`~toolcancel.oracle.judge.registry.Check`
type, one decorator :func:`~toolcancel.oracle.judge.registry.check`), with its **vantage** --
what it is handed and who asks it: ``record`` (a call's record, the vector or setup: verify's
harness, conform, the pre-policy stage's end and a registration probe's record among them),
``line`` (a trace line against the checker's ledger), ``step`` (a step of the contract's
machine in one state the call may be in, the result line's shape among them), ``result`` (a
result or post-execute's input that differs from the vector's: conform's attribution) and
``turn`` (a turn of the scheduler).  Besides its function a check carries, as data, the events
it reads, the conformance levels at which it can fail (``trace``: the registry's trace is in
the record; ``outcome``: only what a user sees), its antecedent (a predicate and its words), and
what it needs (a vector, the setup).  A record check *could have failed* on a record when the
events it reads are there and its antecedent held
(:meth:`~toolcancel.oracle.judge.registry.Check.could_fail`); that, and nothing kept by hand, is
what coverage reports as checked (:func:`rule_status`, :func:`static_status`).

The contract's transitions are checked by the trace checker
(:mod:`toolcancel.oracle.judge.checker`), which replays the registry's trace through the machine,
asking the ``step`` and ``line`` checks, and cites the rule the contract data gives the
transition it could not take.  The record checks decide what no transition carries: quiescence,
the body's signals, the notifications, listener leaks, the slot, what post-execute received.
Where several fail, the one whose evidence comes first in the record is the first broken rule
(:func:`~toolcancel.oracle.judge.record.first_failure`): the record departs from every allowed
path there.  Where conform's answer differs from the vector and no record check decides it,
the ``result`` checks, in registration order, say whether the difference is their rule's (a late
success, contexts only, a deadline first or misclassified); else the contract's transition along
the path is cited (:mod:`toolcancel.oracle.judge.attribution`).

Theory of operation (the judge sub-room): a record flows in (from a trace file, an adapter's
answer, or our harness's observation) and failures flow out, each a rule id, a why and the record
line it rests on.  ``registry`` holds every check; the modules that register them are the
vantages' -- ``calls``, ``setup``, ``stage``, ``fusion``, ``registration`` and this module
(record checks), ``lines`` (line checks), ``steps`` and ``results`` (step checks),
``differences`` (result checks), ``turns`` (turn checks); ``record`` asks the record checks of a
record, ``path`` and ``checker`` replay a trace through the contract's machine, ``attribution``
picks the rule a departure cites.  Each vantage's runner reads the registry's own index of its
checks (by what they judge, or precomputed per kind of record), so dispatch costs what a
registry per vantage cost.  Invariants: a rule's observable meaning is written once, as a check
registered under its rule id; what verify, check and conform print about coverage (the rules
exercised, the levels registered, each rule's status) is read off the registry; the registry
only grows, at import, and its order is the order checks are asked and ties broken; the judge
reads the contract and the record and imports no runtime.  A contributor may add a check (under
the rule it decides, from its vantage, with the events it reads) or sharpen one; a new rule id
starts in ``spec/contract.toml``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final

from ...contract.loader import load_contract
from ...contract.trace import ENVIRONMENT
from .calls import (
    c2_invokes_live,
    error_code,
    fused_signal,
    no_listener_left,
    post_runs,
    post_sees_the_decided_result,
    quiescent,
    relay_on_live_caller,
)
from .differences import Difference  # noqa: F401 (imported: its result checks register)
from .fusion import fusion  # noqa: F401 (imported: its checks register)
from .lines import published_once, result_envelope
from .record import (
    Failure,
    Record,
    Want,
    answer_record,
    asked,
    could_fail,
    first_failure,
)
from .registration import budget_declared_positive_and_finite  # noqa: F401 (registers)
from .registry import (
    LINE,
    RECORD,
    RESULT,
    STEP,
    TURN,
    VANTAGES,
    Antecedent,
    Check,
    by_rule,
    check,
    generation,
    of,
    rule_of,
    rules,
)
from .results import revised_error_shape
from .setup import same_text  # noqa: F401 (imported: its checks register)
from .stage import plan  # noqa: F401 (imported: its checks register)
from .turns import TURN_RULES

if TYPE_CHECKING:  # the scenario harness asks the judge (Observation.problems): no import back
    from ...contract.loader import Contract
    from ..observation import Observation

# ------------------------------------------------------------------------------------------------
# Attribution: the rules conform cites for a difference from the vector, read off the registry
# ------------------------------------------------------------------------------------------------
# conform compares an answer with what the contract allows; where no check decides a difference
# by itself (another path, another result, another input to post-execute), it cites the rule of
# the contract's transition there, or the rule of one of these registered checks.


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
ERROR_SHAPE: Final = rule_of(revised_error_shape)
"""The revised contract's error shape (``error.message``, ``error.info``), of every result."""
RESULT_ATTRIBUTED: Final = rules(RESULT, "result")
"""The rules the result comparison cites of itself, where their antecedent holds (the
``result`` checks, :mod:`toolcancel.oracle.judge.differences`): at outcome level each is decided
through the result at least."""
TRACE_RULES: Final = rules(STEP) | rules(LINE)
"""What the trace checker decides beyond the contract's data: its automaton's deaths (the step
checks' own rules) and the line checks'; what :func:`static_status` counts as decided at trace
level."""


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
    RECORD,
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
    return Failure.of(
        no_signal_keeps_listeners,
        i,
        "listeners",
        f"after the call, the {left.get('first', 'signal')}: the registry must remove every "
        f"listener it added ({left['leaks']} of {left['watched']} signal(s) keep one).",
        0,
        left["leaks"],
    )


@check("R27", RECORD, "quiescence", reads=("held",))
def waits_for_held_body(record: Record, want: Want | None) -> Failure | None:
    """A body that ignores its aborted signal is awaited however long it runs on: the call
    neither settles nor moves on to another stage meanwhile (no grace period)."""
    i = record.at("held")[0]
    held = record.lines[i]
    went = held.get("went")
    if not went:
        return None
    did = "settled" if went == "settled" else f"went on to {went}"
    return Failure.of(
        waits_for_held_body,
        i,
        "quiescence",
        f"the call {did} within {held['seconds']:,} s after its body's signal aborted, while "
        "the body (which ignores its signal) was still running",
        "the call waits for its body",
        did,
    )


def environment_record(obs: Observation) -> Record:
    """The record of one run of verify's harness: the registry's trace, if it was recorded,
    then the environment's observation events."""
    return Record(obs.lines(), obs.scenario.revision, obs.scenario.entry_caller)


def environment_failures(obs: Observation) -> list[Failure]:
    """What the record-only checks find in the environment's record of one run, earliest first
    (the harness's own ``problems``)."""
    return environment_judgement(environment_record(obs), Want(obs.scenario))[0]


def environment_judgement(
    record: Record, setup: Want | None = None, *, step: str | None = None
) -> tuple[list[Failure], frozenset[str]]:
    """The checks that need no vector on a record (the judge verify asks), given the call's
    ``setup`` (a :class:`Want` without an expectation) for those that read it: what they find,
    earliest first, and the rules of those that could have failed on it.  ``step``: only the
    checks of that step (a record that is no call's, like a registration probe's, is judged by
    its own checks alone)."""
    found: list[Failure] = []
    always, checks = _applicable(record.events(), step, setup is not None)
    held: list[str] = []
    for antecedent, rule, judge in checks:
        if antecedent is not None:
            if not antecedent(record, setup):
                continue  # it could not have failed
            held.append(rule)
        failure = judge(record, setup)
        if failure is not None:
            found.append(failure)
    found.sort(key=_AT)
    return found, always.union(held)


_AT: Final = operator.attrgetter("at")


def _record_checks() -> tuple[Check, ...]:
    """The checks that decide from a record alone, at either level, once each."""
    key = generation()
    cached = _RECORD_CHECKS.get(key)
    if cached is None:
        both = asked("trace", "record") + asked("outcome", "record")
        cached = _RECORD_CHECKS[key] = tuple(dict.fromkeys(both))
    return cached


_RECORD_CHECKS: dict[int, tuple[Check, ...]] = {}


def _applicable(
    present: frozenset[str], step: str | None, setup: bool
) -> tuple[frozenset[str], tuple[tuple[Antecedent | None, str, Callable[..., Any]], ...]]:
    """The record checks whose events are all ``present`` (of ``step``, and reading the setup
    only if there is one): the rules of those that can fail wherever they are asked, and each
    check's antecedent, rule and function, in order.  Worked out once per kind of record (verify
    judges hundreds of thousands of records of a few dozen kinds, so the loop over them reads
    no attribute of a check)."""
    key = (generation(), present, step, setup)
    found = _APPLICABLE.get(key)
    if found is None:
        checks = [
            c for c in _record_checks()
            if (step is None or c.on == step)
            and c.reads <= present
            and (setup or not c.needs_setup)
        ]
        always = frozenset(c.rule for c in checks if c.antecedent is None)
        found = _APPLICABLE[key] = (always, tuple((c.antecedent, c.rule, c.judge) for c in checks))
    return found


_APPLICABLE: dict[
    tuple[int, frozenset[str], str | None, bool],
    tuple[frozenset[str], tuple[tuple[Antecedent | None, str, Callable[..., Any]], ...]],
] = {}


# ------------------------------------------------------------------------------------------------
# Coverage, derived
# ------------------------------------------------------------------------------------------------


OPTIONAL_LINES: Final = ("listener", "slot")
"""Call-level lines a registry's trace may leave out (the trace format's optional lines)."""
TRACE_READS: Final = {c.rule: c.on for c in of(LINE) if c.on in OPTIONAL_LINES}
"""Rules the trace checker (:mod:`toolcancel.oracle.judge.checker`) decides from lines a
registry's trace may leave out (the line checks on them): listener lines are balanced, slot
lines never follow publication."""


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
    if rule in TURN_RULES and not by_rule(RECORD).get(rule):
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
    found = [c for c in _conform_checks(rule) if level in c.levels]
    if not found:
        return ""
    if all(not c.reads <= seen for c in found):
        missing = sorted({e for c in found for e in c.reads if e not in seen})
        return f"the adapter reported no {', '.join(missing)} observations (optional)"
    words = "; ".join(dict.fromkeys(c.when for c in found if c.when))
    return f"no vector of this run met its antecedent ({words})" if words else ""


def registered_levels(rule: str) -> frozenset[str]:
    """The levels at which some registered check of ``rule`` can fail."""
    return frozenset(lv for c in _conform_checks(rule) for lv in c.levels)


def _conform_checks(rule: str) -> list[Check]:
    """The checks of ``rule`` an answer to a vector is asked (those that read the setup judge
    runs no vector lists: :attr:`Check.needs_setup`)."""
    return [c for c in by_rule(RECORD).get(rule, ()) if not c.needs_setup]


def static_why(rule: str, level: str) -> str:
    """Why no check of the judge decides ``rule`` at ``level``, from what the registry holds."""
    if rule in TURN_RULES:
        return "decided by the turn vectors only (an adapter that declares turns)"
    levels = registered_levels(rule)
    if levels:
        return f"its checks read what only the {' and '.join(sorted(levels))} level reports"
    if by_rule(RECORD).get(rule):  # every check of it reads what verify set up, no answer
        return VERIFY_ONLY
    return "no check of the judge reads it and no transition carries it"


VERIFY_ONLY: Final = (
    "decided by `toolcancel verify` only: its checks read what verify sets up and observes "
    "itself (the registry probed before any call), which no vector asks of an adapter"
)


_WORDS: Final = {CHECKED: "checked", OUTCOME: "outcome level only", NONE: "not checked"}
RESULT_RULES: Final = frozenset({ENVELOPE, ERROR_SHAPE})
"""Besides each outcome's own rule, what the result comparison decides in full: the envelope and
the revised error shape."""


def contract_rules(contract: Contract) -> tuple[frozenset[str], frozenset[str]]:
    """The rules the contract's data carries: (guards', transitions' and the caller's entry
    rules; the outcomes' shape rules and what the result comparison decides in full)."""
    carried: set[str] = {g.rule for g in contract.guards}
    carried |= {r for by_revision in contract.entry_rules.values() for r in by_revision.values()}
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
    found = _conform_checks(rule)
    # a check that needs an optional observation decides in full only where an answer has it:
    # a rule the result shows anyway stays "through the result" beside it
    plain = {lv for c in found if not c.reads & _OPTIONAL for lv in c.levels}
    outcome = NONE
    through = carried | RESULT_ATTRIBUTED  # what a wrong result shows, at least
    if "outcome" in plain or rule in shapes or ("outcome" in levels and rule not in through):
        outcome = CHECKED
    elif rule in through:
        outcome = OUTCOME
    whys = []
    if outcome == OUTCOME:
        whys.append(CONSEQUENCE_WHY)
    if trace == CHECKED and outcome == NONE:
        whys.append("only the trace checker decides it, from the registry's own trace")
    elif NONE in (trace, outcome):
        whys.append(static_why(rule, "trace"))
    optional = sorted({e for c in found for e in c.reads if e in _OPTIONAL})
    if any(not c.reads & _OPTIONAL for c in found):
        optional = []  # a check of it reads only what every answer carries
    if rule in TRACE_READS:
        optional.insert(0, TRACE_READS[rule] + " lines")
    if optional:
        needs = f"needs {' / '.join(optional)} (optional)"
        whys.append(f"{needs} to decide it in full" if outcome == OUTCOME else
                    f"{needs}, else not checked")
    conditions = [c.when for c in found if c.when and "outcome" in c.levels]
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
    "LINE",
    "RECORD",
    "RESULT",
    "STEP",
    "TURN",
    "VANTAGES",
    "Check",
    "Failure",
    "Record",
    "Want",
    "answer_record",
    "by_rule",
    "check",
    "could_fail",
    "environment_failures",
    "environment_judgement",
    "environment_record",
    "error_code",
    "first_failure",
    "markdown_table",
    "quiescent",
    "registered_levels",
    "relay_on_live_caller",
    "rule_of",
    "rule_status",
    "static_status",
    "static_why",
    "why_not",
]
