"""One judge: what each rule observably means, written once, under its rule id.

Every judge of a call reads one **record**: the call's lines in the canonical trace format
(:mod:`toolcancel.contract.trace`) -- the registry's own trace when the implementation writes one,
and the
*environment observations* of :data:`toolcancel.contract.trace.ENVIRONMENT` that only a harness
around the registry can see (each body's signal at start and settle, when ``execute()`` settled,
what it returned or raised, the notifications, listener counts, what post-execute received, the
frozen result and view, the approval request's signal, the slot after each ``next()``, when the
caller was aborted and what the tool's own deadline did).  ``conform``
builds one from an adapter's answer (:func:`answer_record`); an adapter may write the
environment lines itself.

A **check** is one function registered under the rule id it decides
(:func:`toolcancel.oracle.judge.record.check`, where the record and the registry live), declaring
the events it reads, the conformance levels at which it can fail (``trace``: the registry's trace is
in the record; ``outcome``: only what a user sees) and its antecedent.  It *could have failed* on
a record when the events it reads are there and its antecedent held
(:meth:`~toolcancel.oracle.judge.record.Check.could_fail`); that, and nothing kept by hand, is what
coverage reports as checked (:func:`coverage_rows`).

The contract's transitions are checked by the trace checker
(:mod:`toolcancel.oracle.judge.checker`),
which replays the registry's trace through the machine and cites the rule the contract data gives
the transition it could not take.  The checks here decide what no transition carries: quiescence,
the body's signals, the notifications, listener leaks, the slot, what post-execute received.
Where several fail, the one whose evidence comes first in the record is the first broken rule
(:func:`~toolcancel.oracle.judge.record.first_failure`): the record departs from every allowed path
there.

Theory of operation (the judge sub-room): a record flows in (from a trace file, an adapter's
answer, or our harness's observation) and failures flow out, each a rule id, a why and the record
line it rests on.  The modules are the vantages a check takes: ``record`` (the record, the check
type and its decorator), ``calls`` (a call's environment), ``lines`` (a trace line), ``steps``
and ``results`` (a step of the machine, a result), ``turns`` (a turn), ``setup`` and ``stage``
(what the call's setup and stages said), ``fusion`` and ``registration``; ``path`` and
``checker`` replay a trace through the contract's machine.  Invariants: a rule's observable
meaning is written once, here, as a check registered under its rule id; what verify, check and
conform print about coverage is read off these checks; the judge reads the contract and the
record and imports no runtime.  A contributor may add a check (under the rule it decides, with
the events it reads) or sharpen one; a new rule id starts in ``spec/contract.toml``.
"""

from __future__ import annotations

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
from .fusion import fusion  # noqa: F401 (imported: its checks register)
from .lines import TRACE_CHECKS, TRACE_RULES, published_once, result_envelope
from .record import (
    _REGISTERED,
    CHECKS,
    ENTRY_RULES,
    Check,
    Failure,
    Record,
    Want,
    _asked,
    answer_record,
    check,
    checks,
    could_fail,
    first_failure,
)
from .registration import budget_declared_positive_and_finite  # noqa: F401 (registers)
from .setup import same_text  # noqa: F401 (imported: its checks register)
from .stage import plan  # noqa: F401 (imported: its checks register)
from .turns import TURN_RULES

if TYPE_CHECKING:  # the scenario harness asks the judge (Observation.problems): no import back
    from ...contract.loader import Contract
    from ..observation import Observation
    from ..scenario_language import Scenario

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
RESULT_ATTRIBUTED: Final = frozenset({LATE_SUCCESS, CONTEXTS, DEADLINE_FIRST, DEADLINE_IDENTITY})
"""The rules the result comparison cites of itself, where their antecedent holds (conform's
``Judge.result_attributions``): at outcome level each is decided through the result at least."""


def foreign_deadline(scenario: Scenario, wanted: Any) -> bool:
    """Whether a deadline that is not the registry's own (a wrapper's) is in the chain where the
    contract gives another result than TOOL_TIMEOUT: where a result can show that deadline
    classified by its code (:func:`misclassified_deadline`)."""
    return error_code(wanted) != "TOOL_TIMEOUT" and "outer_deadline" in scenario.wrappers


def misclassified_deadline(scenario: Scenario, got: Any, wanted: Any) -> bool:
    """Whether ``got`` is a TOOL_TIMEOUT where the contract gives another result although a
    deadline that is not the registry's own (a wrapper's) is in the chain: that deadline was
    classified by its code, not its identity (``DEADLINE_IDENTITY``)."""
    return error_code(got) == "TOOL_TIMEOUT" and foreign_deadline(scenario, wanted)


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
    rules: set[str] = set()
    for c in _applicable(record.events(), step, setup is not None):
        if not c.antecedent(record, setup):
            continue  # it could not have failed
        rules.add(c.rule)
        failure = c.judge(record, setup)
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


def _applicable(present: frozenset[str], step: str | None, setup: bool) -> tuple[Check, ...]:
    """The record checks whose events are all ``present`` (of ``step``, and reading the setup
    only if there is one), in order: worked out once per kind of record (verify judges
    thousands of records of a few dozen kinds)."""
    key = (len(_REGISTERED), present, step, setup)
    found = _APPLICABLE.get(key)
    if found is None:
        found = _APPLICABLE[key] = tuple(
            c for c in _record_checks()
            if (step is None or c.step == step)
            and c.reads <= present
            and (setup or not c.needs_setup)
        )
    return found


_APPLICABLE: dict[tuple[int, frozenset[str], str | None, bool], tuple[Check, ...]] = {}


# ------------------------------------------------------------------------------------------------
# Coverage, derived
# ------------------------------------------------------------------------------------------------


TRACE_READS: Final = {"R22": "listener", "R23": "slot"}
"""Rules the trace checker (:mod:`toolcancel.oracle.judge.checker`) decides from lines a registry's
trace
may leave out: listener lines are balanced (R22), slot lines never follow publication (R23)."""


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
    return [c for c in CHECKS.get(rule, ()) if not c.needs_setup]


def static_why(rule: str, level: str) -> str:
    """Why no check of the judge decides ``rule`` at ``level``, from what the registry holds."""
    if rule in TURN_RULES:
        return "decided by the turn vectors only (an adapter that declares turns)"
    levels = registered_levels(rule)
    if levels:
        return f"its checks read what only the {' and '.join(sorted(levels))} level reports"
    if CHECKS.get(rule):  # every check of it reads what verify set up, never a vector's answer
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
    "error_code",
    "first_failure",
    "markdown_table",
    "quiescent",
    "registered_levels",
    "relay_on_live_caller",
    "rule_status",
    "static_status",
    "static_why",
    "why_not",
]
