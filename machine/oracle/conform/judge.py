"""Judging one adapter answer against one vector: the verdict ``toolcancel conform`` reports.

:class:`Judge` holds one revision's contract and the retry behaviour, level and capabilities the
adapter declared.  An answer becomes one record (:func:`toolcancel.oracle.judge.answer_record`) and
the one judge's registered checks decide it; this module only orders them -- the trace checker, then
the path, then what the record alone shows, then the result -- and names the rule a failure
cites (the checkpoint that had to see a missing abort, or the transition the contract takes where
the trace leaves the closest allowed path).  It also says which rules a vector exercised, so the
report can count coverage (:mod:`toolcancel.oracle.conform.report`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ...contract.trace import ENVIRONMENT
from ...contract.trace_reader import TraceError
from ..judge import quiescent
from ..judge.attribution import Attribution, answer_json, through_the_slot
from ..judge.checker import Checker
from ..judge.record import (
    Failure,
    Record,
    Want,
    answer_record,
    could_fail,
    failures,
)
from ..scenario_language import SAME_STEP, entry_caller
from ..vectors import Expectation, Vector
from ..vectors import turns as turnvectors
from ..vectors.turns import TurnVector
from .capabilities import STAGE_OBSERVATIONS, STAGE_STATES, Capabilities, undeclared
from .protocol import PROTOCOL_RULE, QUOTE, answer_problem, outcome_problem
from .report import Judgement

# ------------------------------------------------------------------------------------------------
# Judging one answer
# ------------------------------------------------------------------------------------------------


class Judge(Attribution):
    """Judges adapter answers against the vectors of one revision."""

    def __init__(
        self,
        revision: str,
        retry: str | None = None,
        level: str = "trace",
        capabilities: Capabilities | None = None,
    ) -> None:
        self.level = level
        self.capabilities = capabilities or Capabilities()
        # observations of a stage the runtime lacks are not judged (it cannot make them)
        self._unobserved = frozenset(
            e for stage, events in STAGE_OBSERVATIONS.items()
            if stage not in self.capabilities.stages for e in events
        )  # fmt: skip
        self.seen: set[str] = set()  # optional observations some answer carried (listeners)
        self.checker = Checker(revision)
        super().__init__(self.checker.table, retry)
        lacking = {
            state
            for stage, states in STAGE_STATES.items()
            if stage not in self.capabilities.stages
            for state in states
        }
        inside = {r for t in self.table.transitions if set(t.sources) <= lacking for r in t.rules}
        outside = {
            r for t in self.table.transitions if not set(t.sources) <= lacking for r in t.rules
        }
        self._stageless = frozenset(inside - outside) if lacking else frozenset()
        """Rules only transitions out of the states of stages the runtime lacks carry."""

    def fail(
        self,
        v: Vector | TurnVector,
        rule: str,
        why: str,
        *,
        step: str = "answer",
        expected: Any = "",
        observed: Any = "",
        checked: frozenset[str] = frozenset(),
        consequence: frozenset[str] = frozenset(),
        broken: Sequence[str] = (),
        masked: frozenset[str] = frozenset(),
    ) -> Judgement:
        """A failed verdict citing ``rule``; ``broken``: the other rules the record breaks;
        ``masked``: rules that could have failed on it, not judged after this failure."""
        lead = (rule, *(r for r in broken if r != rule))
        return Judgement(
            v.id,
            False,
            rule=rule,
            explanation=f"{v.id}: {why}",
            step=step,
            expected=_brief(expected),
            observed=_brief(observed),
            checked=checked,
            consequence=consequence,
            broken=tuple(dict.fromkeys(lead)),
            masked=masked - set(lead),
            vacuous=self._vacuous_in(checked | consequence) - set(lead),
        )

    def _vacuous_in(self, rules: frozenset[str]) -> frozenset[str]:
        """Of ``rules``, those only a stage the runtime lacks carries: counted exercised by
        the empty stage's step, which nothing could break."""
        return rules & self._stageless

    def declined(self, v: Vector | TurnVector, why: str) -> Judgement:
        """The verdict on a vector the adapter could not run (an ``error`` answer): a protocol
        failure, and the rules it would have exercised kept only vacuously by it."""
        rules = v.rules if isinstance(v, TurnVector) else self.static_rules(v)
        return Judgement(
            v.id, False, rule=PROTOCOL_RULE, explanation=f"{v.id}: {why}", step="adapter",
            broken=(PROTOCOL_RULE,), vacuous=frozenset(rules),
        )  # fmt: skip

    def want(self, v: Vector, exp: Expectation) -> Want:
        return Want(
            v.scenario,
            exp,
            tuple(self.expectations(v)),
            post_rule=lambda got: self.post_rule(v, exp, got),
        )

    def record(self, v: Vector, answer: Mapping[str, Any]) -> Record:
        """The answer as one record (:func:`toolcancel.oracle.judge.answer_record`)."""
        record = answer_record(answer, v.id, self.table.name, entry_caller(v.scenario))
        if self._unobserved:
            lines = [x for x in record.lines if x["event"] not in self._unobserved]
            record = Record(lines, record.revision, record.caller)
        self.seen.update(e for e in ENVIRONMENT if record.has(e))
        return record

    def contradiction(self, v: Vector, answer: Mapping[str, Any]) -> Judgement | None:
        """A protocol failure if an optional observation contradicts the vector's scenario: a
        deadline reported for a tool without a budget, or whose ``outer`` is not whether an
        ``outer_deadline`` wrapper is there; a caller abort reported where the harness aborts no
        live caller after entry."""
        s = v.scenario
        observed = answer["observed"]
        deadline, aborted = observed.get("deadline"), observed.get("caller_aborted")
        why = None
        if deadline is not None and s.timeout == "absent":
            why = "observed.deadline is given for a tool without a budget (timeout absent)"
        elif deadline is not None and deadline["outer"] != ("outer_deadline" in s.wrappers):
            why = (
                f"observed.deadline.outer is {str(deadline['outer']).lower()}, but the scenario "
                f"{'has' if 'outer_deadline' in s.wrappers else 'has no'} outer_deadline wrapper"
            )
        elif aborted is not None and not (
            s.caller == "live"
            and (s.cancel == "after" or s.cancel.startswith("gate:") or s.same_step)
        ):
            why = (
                "observed.caller_aborted is given, but the scenario aborts no live caller after "
                f"entry (cancel gate:<g>, {SAME_STEP} or after)"
            )
        return None if why is None else self.fail(v, PROTOCOL_RULE, why)

    def undeclared(self, v: Vector, answer: Mapping[str, Any]) -> Judgement | None:
        """A protocol failure if the answer shows a stage the hello did not declare at work
        (:func:`toolcancel.oracle.conform.capabilities.undeclared`)."""
        if self.capabilities.everything:  # the common case: nothing to build per vector
            return None
        why = undeclared(self.capabilities, answer, v.allowed_paths())
        if why is None:
            return None
        return self.fail(
            v, PROTOCOL_RULE, why, step="capabilities", expected="declared stages only",
            observed=why.split(",")[0],
        )  # fmt: skip

    def judge(
        self, v: Vector, answer: Mapping[str, Any], departs: frozenset[str] = frozenset()
    ) -> Judgement:
        """The verdict on an ``outcome`` answer (its envelope is already checked).  ``departs``:
        the rules a declared deviation breaks, when ``v`` is its expectation: their checks are
        not asked (the deviation's expectation decides what they would)."""
        if self.level == "outcome":
            return self.judge_outcome(v, answer, departs)
        shape = answer_problem(answer)
        if shape is not None:
            return self.fail(v, PROTOCOL_RULE, shape)
        cheat = self.contradiction(v, answer) or self.undeclared(v, answer)
        if cheat is not None:
            return cheat
        trace: list[Any] = answer["trace"]
        result = answer["result"]
        record = self.record(v, answer)
        self.seen.update(e for e in self.traced if any(x["event"] == e for x in trace))
        starts = sum(1 for line in trace if line.get("event") == "body_start")
        alone = failures(record, None, "trace", departs=departs)  # decided by the record alone
        also = [f.rule for f in alone]
        early = quiescent(record, None)
        if early is None and result is None:
            stopped = self.stopped(v, trace)
            if stopped is not None:
                return self.fail(
                    v,
                    stopped[0],
                    stopped[1],
                    step="path",
                    expected="a path the contract allows, to publication",
                    observed=" > ".join(stopped[2]) or "no contract event",
                    broken=also,
                    masked=self.static_rules(v),
                )
            early = alone[0] if alone else None
        if early is not None:
            return self.failed(v, early, broken=also, masked=self.static_rules(v))
        entry = trace[0] if trace and isinstance(trace[0], dict) else {}
        if entry.get("event") == "call_entry":
            declared = entry.get("retry", self.retry)
            if declared != self.retry:
                return self.fail(
                    v,
                    PROTOCOL_RULE,
                    f"the trace's call_entry declares retry {declared!r}, the hello {self.retry!r}",
                )
            trace = [{**entry, "retry": self.retry}, *trace[1:]]
        try:
            verdicts = self.checker.check_lines(trace, f"<{v.id}>")
        except TraceError as exc:
            return self.fail(v, PROTOCOL_RULE, f"the trace is not usable: {exc.message}")
        if len(verdicts) != 1:
            calls = ", ".join(x.call_id for x in verdicts) or "none"
            return self.fail(v, PROTOCOL_RULE, f"the trace must hold one call, it holds: {calls}")
        verdict = verdicts[0]
        if not verdict.conforming:
            exercised = self.exercised(v, trace, starts)
            return self.fail(
                v,
                verdict.rule or PROTOCOL_RULE,
                f"trace event {verdict.event_index} ({verdict.seen}): {verdict.explanation}",
                step="trace",
                expected="a trace the contract accepts",
                observed=f"event {verdict.event_index}: {verdict.seen}",
                checked=exercised,
                broken=also,
                masked=self.static_rules(v) | exercised,
            )
        named = [self.occurrence(x) for x in trace if x["event"] in self.events]
        occurrences = through_the_slot(named)
        path = tuple(o.event for o in occurrences)
        # as named too: the timer first in the caller's step lists the deadline's fused_abort
        raw = tuple(o.event for o in named)
        exps = [e for e in self.expectations(v) if path in e.paths or raw in e.paths]
        exp = _closest(exps, record, result)
        if exp is None:
            exp = self.noticed_late(v, occurrences)
        if exp is None:
            rule, why = self.diverged(v, path)
            n = sum(len(e.paths) for e in self.expectations(v))
            exercised = self.exercised(v, trace, starts)
            return self.fail(
                v,
                rule,
                why,
                step="path",
                expected=f"one of {n} allowed path(s)",
                observed=" > ".join(path),
                checked=exercised,
                broken=also,
                masked=self.static_rules(v) | exercised,
            )
        want = self.want(v, exp)
        checked = self.exercised(v, trace, starts) | could_fail(record, want, "trace")
        consequence = self.result_attributions(v, exp) - checked  # the result comparison's own
        return self._compared(v, want, record, result, "trace", checked, consequence, departs)

    def judge_turn(self, v: TurnVector, answer: Mapping[str, Any]) -> Judgement:
        """The verdict on a turn answer: the scheduler's rules, then each started call against
        what the contract gives its kind where the turn aborted
        (:mod:`toolcancel.oracle.vectors.turns`). Judged alike at both levels: a turn is observed
        from
        outside the scheduler."""
        shape = turnvectors.answer_problem(answer, len(v.turn.kinds))
        if shape is not None:
            return self.fail(v, PROTOCOL_RULE, shape)
        found = turnvectors.judge(v, answer)
        rules = turnvectors.exercised(v, answer)
        if found is None:
            return Judgement(v.id, True, rules=rules, checked=rules)
        rule, step, why = found
        hung = answer["observed"]["returned"] is None  # judged no further than that
        return self.fail(
            v,
            rule,
            why,
            step=step,
            expected="see the explanation",
            observed=why,
            checked=rules,
            broken=turnvectors.broken(v, answer),
            masked=rules if hung else frozenset(),
        )

    def judge_outcome(
        self, v: Vector, answer: Mapping[str, Any], departs: frozenset[str] = frozenset()
    ) -> Judgement:
        """The verdict on an outcome-level answer: only what a registry's user observes."""
        shape = outcome_problem(answer)
        if shape is not None:
            return self.fail(v, PROTOCOL_RULE, shape)
        cheat = self.contradiction(v, answer) or self.undeclared(v, answer)
        if cheat is not None:
            return cheat
        result = answer["result"]
        record = self.record(v, answer)
        exps = self.expectations(v)
        exp = exps[0]
        if result is not None:
            exp = _closest([e for e in exps if answer_json(result) == e.result_json], record,
                           result) or exp
        want = self.want(v, exp)
        checked = could_fail(record, want, "outcome") | self.outcome_shape(exp)
        consequence = (self.consequence_rules(v, exp) | self.result_attributions(v, exp)) - checked
        return self._compared(v, want, record, result, "outcome", checked, consequence, departs)

    def _compared(
        self,
        v: Vector,
        want: Want,
        record: Record,
        result: Mapping[str, Any] | None,
        level: str,
        checked: frozenset[str],
        consequence: frozenset[str],
        departs: frozenset[str] = frozenset(),
    ) -> Judgement:
        """The record against the judge's checks and the vector: first the broken rule a check
        decides from the record alone (the earliest in the record), then the outcome difference
        (the body's signals, what post-execute received, the result: the earliest), then what
        else differs from the vector (earliest first).  ``departs``: rules not asked
        (:meth:`judge`)."""
        broken = failures(record, want, level, phase="record", departs=departs)
        later = failures(record, want, level, phase="outcome", departs=departs)
        rest = failures(record, want, level, phase="vector", departs=departs)
        exp = want.expectation
        assert exp is not None, "conform judges against a vector's expectation"
        wrong = None  # the result's own difference: its rule, why, and every rule it breaks
        if result is not None and answer_json(result) != exp.result_json:
            wrong = self.result_rule(v, exp, result)
        others = [f.rule for f in (*broken, *later)]
        if wrong is not None:
            others += wrong[2]
        others += [f.rule for f in rest]
        if broken:
            return self.failed(v, broken[0], checked, consequence, broken=others)
        found = later[0] if later else None
        if wrong is not None and (found is None or record.at("returned")[0] < found.at):
            rule, why, _ = wrong
            return self.fail(
                v,
                rule,
                why,
                step="result",
                expected=exp.result_json,
                observed=answer_json(result),
                checked=checked,
                consequence=consequence,
                broken=others,
            )
        if found is None and rest:
            found = rest[0]
        if found is not None:
            return self.failed(v, found, checked, consequence, broken=others)
        rules = checked | consequence
        return Judgement(
            v.id, True, rules=rules, checked=checked, consequence=consequence,
            vacuous=self._vacuous_in(rules),
        )  # fmt: skip

    def failed(
        self,
        v: Vector,
        found: Failure,
        checked: frozenset[str] = frozenset(),
        consequence: frozenset[str] = frozenset(),
        *,
        broken: Sequence[str] = (),
        masked: frozenset[str] = frozenset(),
    ) -> Judgement:
        return self.fail(
            v,
            found.rule,
            found.why,
            step=found.step,
            expected=found.expected,
            observed=found.observed,
            checked=checked | {found.rule},
            consequence=consequence,
            broken=broken,
            masked=masked,
        )


def _brief(value: Any) -> str:
    """A value for a report line: text, cut at :data:`QUOTE` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= QUOTE else text[:QUOTE] + "…"



def _closest(
    exps: Sequence[Expectation], record: Record, result: Any
) -> Expectation | None:
    """Of the expectations an answer's path or result allows, the one whose result and body
    signals it shows, else the first: the steps that lead to one result may leave the body's
    signal aborted by either source (a caller aborting in the step the tool's deadline
    expires, a MAY of the contract), and each order is its own expectation."""
    if len(exps) < 2:
        return exps[0] if exps else None
    signals = [
        {"aborted": bool(x["aborted"]), "reason": x.get("reason")}
        for _, x in record.body_signals("settle")
    ]
    same = [e for e in exps if result is None or answer_json(result) == e.result_json]
    same = same or list(exps)
    return next((e for e in same if [dict(b) for b in e.body_signals] == signals), same[0])
