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

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ...contract.core import CallState, Occurrence, choices, initial_state
from ...contract.loader import RevisionContract, Transition
from ...contract.trace import ENVIRONMENT
from ...contract.trace_reader import TraceError
from ..judge import (
    BODY_SIGNAL,
    CALLER_LISTENERS,
    CHECKPOINT_C2,
    CHECKPOINT_C3,
    CONTEXTS,
    DEADLINE_FIRST,
    DEADLINE_IDENTITY,
    ENVELOPE,
    ERROR_SHAPE,
    LATE_SUCCESS,
    POST_INPUT,
    PUBLICATION,
    QUIESCENCE,
    STAGE_ORDER,
    TRACE_READS,
    entry_rule,
    error_code,
    foreign_deadline,
    misclassified_deadline,
    quiescent,
    result_rules,
)
from ..judge.checker import Checker
from ..judge.record import (
    Failure,
    Record,
    Want,
    answer_record,
    could_fail,
    failures,
)
from ..scenario_language import Scenario
from ..vectors import Expectation, Vector, entry_caller
from ..vectors import turns as turnvectors
from ..vectors.turns import TurnVector
from .capabilities import STAGE_OBSERVATIONS, STAGE_STATES, Capabilities, undeclared
from .protocol import PROTOCOL_RULE, QUOTE, answer_problem, outcome_problem
from .report import Judgement

_CANCEL_GUARDS: Final = frozenset({"cancelled_after_entry", "caller_aborted", "fused_aborted"})
"""Guards that read an abort: a transition with one of them wanted true is a checkpoint."""
_CANCEL_EVENTS: Final = ("caller_abort", "fused_abort")

# ------------------------------------------------------------------------------------------------
# Judging one answer
# ------------------------------------------------------------------------------------------------


class Judge:
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
        self._rules: dict[tuple[Any, ...], frozenset[str]] = {}
        self.checker = Checker(revision)
        self.retry = retry or self.checker.table.contract.default_retry
        self.table: RevisionContract = self.checker.table
        self.events = frozenset(e.name for e in self.table.events)
        self.data = {e.name: e.data for e in self.table.events}
        self.shape_rules = frozenset(o.rule for o in self.table.outcomes)
        self.outcome_rule = {o.name: o.rule for o in self.table.outcomes}
        self.titles = {r.id: r.title for r in self.table.rules}
        self.revised = ERROR_SHAPE in self.titles
        self.result_rules = result_rules(self.titles)
        self._choices: dict[tuple[CallState, Occurrence], list[tuple[Transition, CallState]]] = {}
        self._each: dict[str, tuple[Occurrence, ...]] = {}
        self.cancellations = frozenset(
            o.name for o in self.table.outcomes if o.code in ("ABORTED", "ABORTED_BEFORE_DISPATCH")
        )
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

    def start(self, s: Scenario) -> CallState:
        """The machine state a registry with the declared retry behaviour enters ``s`` in."""
        return initial_state(
            self.table,
            entry_caller(s),
            has_agent=s.agent,
            approval_seam=s.approval_seam,
            retry=self.retry,
            wrappers=s.around_count,
        )

    def expectations(self, v: Vector) -> list[Expectation]:
        """What the contract allows for ``v``: its expectation and alternatives (``run_vectors``
        has already taken each vector's expectation for the declared retry behaviour)."""
        return list(v.expectations())

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
            s.caller == "live" and (s.cancel == "after" or s.cancel.startswith("gate:"))
        ):
            why = (
                "observed.caller_aborted is given, but the scenario aborts no live caller after "
                "entry (cancel gate:<g> or after)"
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
        self.seen.update(e for e in TRACE_READS.values() if any(x["event"] == e for x in trace))
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
        occurrences = _through_the_slot(
            [self.occurrence(x) for x in trace if x["event"] in self.events]
        )
        path = tuple(o.event for o in occurrences)
        exp = next((e for e in self.expectations(v) if path in e.paths), None)
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
            exp = next((e for e in exps if _canonical(result) == e.result_json), exp)
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
        if result is not None and _canonical(result) != exp.result_json:
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
                observed=_canonical(result),
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

    # -- allowed paths, up to when an abort is noticed ----------------------------------------

    def choices(self, state: CallState, occ: Occurrence) -> list[tuple[Transition, CallState]]:
        """:func:`toolcancel.contract.core.choices`, memoized: vectors revisit the same few
        states."""
        key = (state, occ)
        found = self._choices.get(key)
        if found is None:
            found = self._choices[key] = choices(self.table, state, occ)
        return found

    def occurrence(self, line: Mapping[str, Any]) -> Occurrence:
        name = line["event"]
        return Occurrence(name, **{f: line[f] for f in self.data[name] if f in line})

    def noticed_late(self, v: Vector, trace: Sequence[Occurrence]) -> Expectation | None:
        """The expectation whose listed path ``trace`` equals up to when aborts were noticed.

        A listed path puts ``caller_abort`` and ``fused_abort`` where the reference registry saw
        them: as early as possible.  A registry may see an abort later (when it next reads the
        signal), or never, as long as every other event still takes the very same transition --
        then nothing it decided depended on the abort yet, and its observables are the same.  It
        may not see one before it happened, nor see one that did not.
        """
        rest = [o for o in trace if o.event not in _CANCEL_EVENTS]
        names = tuple(o.event for o in rest)
        for exp in self.expectations(v):
            for listed in exp.paths:
                if tuple(e for e in listed if e not in _CANCEL_EVENTS) != names:
                    continue
                if not _not_earlier(listed, [o.event for o in trace]):
                    continue
                data = iter(rest)
                occs = [Occurrence(e) if e in _CANCEL_EVENTS else next(data) for e in listed]
                mine = self._decisions(v, trace)
                if mine & self._decisions(v, occs):
                    return exp
        return None

    def _decisions(self, v: Vector, occs: Sequence[Occurrence]) -> set[tuple[int, ...]]:
        """For each way the machine can take ``occs`` to publication: the transitions of the
        events other than aborts."""
        s = v.scenario
        start = self.start(s)
        branches: list[tuple[CallState, tuple[int, ...]]] = [(start, ())]
        for o in occs:
            cancel = o.event in _CANCEL_EVENTS
            branches = [
                (after, taken if cancel else (*taken, t.index))
                for state, taken in branches
                for t, after in self.choices(state, o)
            ]
        return {taken for state, taken in branches if state.state == "materialized"}

    # -- which rule, and why -----------------------------------------------------------------

    def stopped(
        self, v: Vector, trace: Sequence[Mapping[str, Any]]
    ) -> tuple[str, str, tuple[str, ...]] | None:
        """Where a call that returned no result left every allowed path, when its trace stops
        on one: the step the contract takes next is where the record departs (its rule, as
        :meth:`diverged` gives it), before the missing result that follows from it.  None when
        the trace is not a proper beginning of an allowed path (the checker decides it)."""
        try:
            occs = [self.occurrence(x) for x in trace if x["event"] in self.events]
        except (KeyError, TypeError):  # not a usable trace: the checker says why
            return None
        path = tuple(o.event for o in _through_the_slot(occs))
        if not any(
            len(p) > len(path) and p[: len(path)] == path
            for e in self.expectations(v)
            for p in e.paths
        ):
            return None
        rule, why = self.diverged(v, path)
        return rule, f"execute() returned no result; {why}", path

    def diverged(self, v: Vector, path: tuple[str, ...]) -> tuple[str, str]:
        """The rule of the step where ``path`` first leaves the closest allowed path.

        When the trace lacks a caller abort the contract has there, the rule is that of the
        checkpoint that had to read the abort: the next transition guarded by the caller's (or
        the fused signal's) abort.  Otherwise it is the rule of the contract's transition there.
        """
        exp, best = max(
            ((e, p) for e in self.expectations(v) for p in e.paths),
            key=lambda ep: _common(ep[1], path),
        )
        k = _common(best, path)
        seen = path[k] if k < len(path) else "the end of the trace"
        if k == len(best):
            return (
                STAGE_ORDER,
                f"after {' > '.join(best)} (the contract's whole path for this scenario) the "
                f"trace goes on with {seen}.",
            )
        taken = self.transitions(v, best, exp.outcome)
        m = k
        missing = ""
        if best[k] == "caller_abort" and seen != "caller_abort":
            missing = " (the caller's abort is not seen there)"
            m = next(
                (
                    i
                    for i in range(k + 1, len(best))
                    if taken and any(g in _CANCEL_GUARDS and want for g, want in taken[i].guards)
                ),
                min(k + 1, len(best) - 1),
            )
        if taken is None:
            why = f"at contract event {k} the trace has {seen}, the contract {best[k]}."
            return STAGE_ORDER, why
        t = taken[m]
        rule = next((r for r in t.rules if r != LATE_SUCCESS), t.rules[0])
        return (
            rule,
            f"at contract event {k} the trace has {seen} where the contract has {best[k]}"
            f"{missing}: the contract takes {best[m]} to {t.dest or 'the same state'}"
            f"{' with outcome ' + t.outcome if t.outcome else ''} ({', '.join(t.rules)})."
            f" Allowed path: {' > '.join(best)}.",
        )

    def transitions(self, v: Vector, path: Sequence[str], outcome: str) -> list[Transition] | None:
        """The transitions the contract takes along ``path``, found by replaying the event names
        (every data value tried) and keeping a replay that ends published with ``outcome``."""
        s = v.scenario
        start = self.start(s)
        Step = tuple[CallState | None, Transition | None]
        layers: list[dict[CallState, Step]] = [{start: (None, None)}]
        for name in path:
            nxt: dict[CallState, Step] = {}
            for state in layers[-1]:
                for occ in self._occurrences(name):
                    for t, after in self.choices(state, occ):
                        nxt.setdefault(after, (state, t))
            layers.append(nxt)
        ends = [st for st in layers[-1] if st.state == "materialized"]
        ends.sort(key=lambda st: st.outcome != outcome)
        if not ends:
            return None
        out: list[Transition] = []
        at: CallState | None = ends[0]
        for i in range(len(path), 0, -1):
            assert at is not None
            at, took = layers[i][at]
            assert took is not None
            out.append(took)
        return out[::-1]

    def _occurrences(self, name: str) -> tuple[Occurrence, ...]:
        """Every occurrence of event ``name``, each data value tried (memoized)."""
        found = self._each.get(name)
        if found is None:
            fields = self.data.get(name, ())
            found = self._each[name] = tuple(
                Occurrence(name, **dict(zip(fields, values, strict=True)))
                for values in itertools.product((False, True), repeat=len(fields))
            )
        return found

    def result_rule(
        self, v: Vector, exp: Expectation, result: Mapping[str, Any]
    ) -> tuple[str, str, tuple[str, ...]]:
        """The rule a wrong result breaks, as the model checker attributes the same mistake, why,
        and every rule it breaks: those of the contract's decision it departs from."""
        want, got = exp.result, result
        why = f"the result is {_canonical(got)}; the contract's is {exp.result_json}"
        can = self.result_attributions(v, exp)
        if LATE_SUCCESS in can and got.get("isError") is False:
            return LATE_SUCCESS, f"{why} -- a success after the caller cancelled before C4.", ()
        rest_w = {k: x for k, x in want.items() if k != "additionalContexts"}
        rest_g = {k: x for k, x in got.items() if k != "additionalContexts"}
        if misclassified_deadline(v.scenario, got, want):
            return DEADLINE_IDENTITY, f"{why} -- a wrapper's deadline classified by its code.", ()
        if _canonical(rest_w) == _canonical(rest_g):
            return (
                CONTEXTS,
                (f"{why} -- only the contexts differ (kept, ordered and dropped per {CONTEXTS})."),
                (),
            )
        if DEADLINE_FIRST in can:
            first = f"{why} -- the deadline fired first: the result is TOOL_TIMEOUT."
            return DEADLINE_FIRST, first, ()
        path = exp.paths[0]
        taken = self.transitions(v, path, exp.outcome) or []
        k = self.could_have_decided(taken, path, got)
        if k is not None:
            t = taken[k]
            rule = next((r for r in t.rules if r not in self.shape_rules), t.rules[0])
            return (
                rule,
                (
                    f"{why} (at {path[k]} the contract took {', '.join(t.rules)}; the result is "
                    "what another decision there gives)."
                ),
                t.rules,
            )
        i = next((i for i in reversed(range(len(taken))) if taken[i].outcome is not None), None)
        if i is None:
            return self.table.contract.outcome(exp.outcome).rule, f"{why}.", ()
        t = taken[i]
        rule = next((r for r in t.rules if r not in self.shape_rules), t.rules[0])
        decided = f"{why} (outcome {exp.outcome}, decided at {path[i]}: {', '.join(t.rules)})."
        return rule, decided, t.rules

    def result_attributions(self, v: Vector, exp: Expectation) -> frozenset[str]:
        """The rules the result comparison cites of itself for ``v`` (:meth:`result_rule`), where
        their antecedent holds: a success where the contract cancels (R28's late success), a
        TOOL_TIMEOUT where a wrapper's deadline is in the chain and the contract gives another
        result (R35), a result that differs only in its contexts (always), the deadline that
        fired first (R34).  So coverage counts them where a wrong result could cite them."""
        out = {CONTEXTS}
        if exp.outcome in self.cancellations:
            out.add(LATE_SUCCESS)
        if foreign_deadline(v.scenario, exp.result):
            out.add(DEADLINE_IDENTITY)
        if v.scenario.timeout == "timer_first" and exp.outcome == "tool_timeout":
            out.add(DEADLINE_FIRST)
        return frozenset(out)

    def could_have_decided(
        self, taken: Sequence[Transition], path: Sequence[str], got: Any
    ) -> int | None:
        """The first step of the expected path where another transition of the same event, from
        the same state, decides the outcome whose code ``got`` carries: where the record departs
        from the allowed path (the decision taken there is the broken one).  None when ``got``
        carries no code, or no such step is on the path."""
        code = error_code(got)
        if code is None:
            return None
        outcomes = {o.name for o in self.table.outcomes if o.code == code}
        for k, t in enumerate(taken):
            if t.outcome in outcomes:
                return None  # the contract decided that very outcome here: not a departure
            if any(
                u is not t
                and u.outcome in outcomes
                and path[k] in u.events
                and set(u.sources) & set(t.sources)
                for u in self.table.transitions
            ):
                return k
        return None

    def post_rule(self, v: Vector, exp: Expectation, got: Any) -> str:
        """The rule a wrong input to post-execute breaks.  Of the kind the contract decided (an
        error with the same code, or a success), it is what post-execute was handed (R20), or
        its contexts (R29); of another kind, the rule of the transition that decided what
        post-execute had to receive (the deadline's TOOL_TIMEOUT, R34; checkpoint C3's ABORTED
        for a late success, R19; C1's for a denial, R13)."""
        want = exp.post_received
        if isinstance(got, dict) and isinstance(want, dict):
            rest_w = {k: x for k, x in want.items() if k != "additionalContexts"}
            rest_g = {k: x for k, x in got.items() if k != "additionalContexts"}
            if _canonical(rest_w) == _canonical(rest_g):
                return CONTEXTS  # only the contexts differ (kept, ordered and dropped)
            if (got.get("isError"), error_code(got)) == (want.get("isError"), error_code(want)):
                return POST_INPUT
        if misclassified_deadline(v.scenario, got, want):
            return DEADLINE_IDENTITY  # a wrapper's deadline classified as the registry's own
        if v.scenario.timeout == "timer_first" and error_code(want) == "TOOL_TIMEOUT":
            return DEADLINE_FIRST  # the deadline fired first: the around chain's is TOOL_TIMEOUT
        late = isinstance(got, dict) and got.get("isError") is False
        if late and error_code(want) in ("ABORTED", "ABORTED_BEFORE_DISPATCH"):
            return CHECKPOINT_C3  # checkpoint C3 replaces a late success before post-execute
        path = exp.paths[0]
        taken = self.transitions(v, path, exp.outcome) or []
        k = next((k for k, t in enumerate(taken) if t.dest == "post_policy"), len(taken) - 1)
        i = self.could_have_decided(taken[: k + 1], path, got) if isinstance(got, dict) else None
        if i is None:
            i = next((i for i in reversed(range(k + 1)) if taken[i].outcome is not None), None)
        if i is None:
            return POST_INPUT
        t = taken[i]
        return next((r for r in t.rules if r not in self.shape_rules), t.rules[0])

    def exercised(
        self, v: Vector, trace: Sequence[Mapping[str, Any]], starts: int
    ) -> frozenset[str]:
        """Rule ids of the transitions the trace took, plus the trace rules it was checked on."""
        s = v.scenario
        branches: list[tuple[CallState, frozenset[str]]] = [
            (
                self.start(s),
                frozenset({PUBLICATION}),
            )
        ]
        for line in trace:
            name = line["event"]
            if name not in self.events:
                continue
            occ = Occurrence(name, **{f: line[f] for f in self.data[name] if f in line})
            branches = [
                (after, rules.union(t.rules))
                for state, rules in branches
                for t, after in self.choices(state, occ)
            ]
        rules = branches[0][1] if branches else frozenset()
        # What else was checked: the envelope and stage order (the checker), the entry case, the
        # result's shape (compared with the outcome's), and what the trace and body showed.
        entry = entry_rule(entry_caller(s), self.revised)
        extra = {STAGE_ORDER, entry, self.outcome_rule[self.expectations(v)[0].outcome]}
        extra |= self.result_rules  # the envelope and the error shape of every result it saw
        if starts:
            extra |= {BODY_SIGNAL, QUIESCENCE}
        for rule, event in TRACE_READS.items():
            if any(line["event"] == event for line in trace):
                extra.add(rule)
        return rules | extra

    def static_rules(self, v: Vector) -> frozenset[str]:
        """The rules ``v`` exercises by its expectation alone (for ``--only RULE``): those of the
        transitions along its first path and what every answer is checked on."""
        exp = self.expectations(v)[0]
        rules = set(self._path_rules(v, exp)) | {ENVELOPE, STAGE_ORDER, PUBLICATION}
        rules |= {self._entry_rule(v), self.outcome_rule[exp.outcome]}
        if exp.body_starts:
            rules |= {CHECKPOINT_C2, BODY_SIGNAL, QUIESCENCE}
            if v.scenario.caller != "none":
                rules.add(CALLER_LISTENERS)
        rules |= self.result_rules
        return frozenset(rules)

    def _path_rules(self, v: Vector, exp: Expectation) -> frozenset[str]:
        s = v.scenario
        key = (entry_caller(s), s.agent, s.approval_seam, s.around_count, exp.paths[0], exp.outcome)
        rules = self._rules.get(key)
        if rules is None:
            taken = self.transitions(v, exp.paths[0], exp.outcome) or []
            rules = self._rules[key] = frozenset(r for t in taken for r in t.rules)
        return rules

    def _entry_rule(self, v: Vector) -> str:
        return entry_rule(entry_caller(v.scenario), self.revised)

    def consequence_rules(self, v: Vector, exp: Expectation) -> frozenset[str]:
        """The rules the outcome level decides through the result alone: a wrong decision at a
        transition along the expected path (its rules), a wrong stage order, entry or shape of
        the outcome shows as another result, not as the steps that made it."""
        return self._path_rules(v, exp) | {STAGE_ORDER, self._entry_rule(v)}

    def outcome_shape(self, exp: Expectation) -> frozenset[str]:
        """The rules the result comparison decides in full: the envelope (R1), the outcome's
        own shape and, in the revised contract, the error shape (R44)."""
        return self.result_rules | {self.outcome_rule[exp.outcome]}


def _brief(value: Any) -> str:
    """A value for a report line: text, cut at :data:`QUOTE` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= QUOTE else text[:QUOTE] + "…"


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _common(a: Sequence[str], b: Sequence[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _through_the_slot(occs: list[Occurrence]) -> list[Occurrence]:
    """The trace's contract events, each ``fused_abort`` that is at once followed by a
    ``caller_abort`` read as that caller abort.

    When the slot holds a signal derived from the caller's (the timeout policy's deadline), the
    caller's abort reaches the body's fused signal through the slot first, in the same
    synchronous step: a registry may well name it ``fused_abort`` and then record the caller's.
    Both take the body to draining, so the two namings decide the same; the listed paths name it
    as the reference does (``caller_abort``), and which reason the body saw is judged by R21."""
    out: list[Occurrence] = []
    for i, o in enumerate(occs):
        if o.event == "fused_abort" and i + 1 < len(occs) and occs[i + 1].event == "caller_abort":
            continue
        out.append(o)
    return out


def _not_earlier(listed: Sequence[str], seen: Sequence[str]) -> bool:
    """Whether each abort in ``seen`` comes no earlier (counted in other events before it) than
    the abort of the same kind, in the same order, in ``listed``; none may be extra."""
    for kind in _CANCEL_EVENTS:
        want = [
            sum(e not in _CANCEL_EVENTS for e in listed[:i])
            for i, e in enumerate(listed)
            if e == kind
        ]
        got = [
            sum(e not in _CANCEL_EVENTS for e in seen[:i]) for i, e in enumerate(seen) if e == kind
        ]
        if len(got) > len(want) or any(g < w for g, w in zip(got, want, strict=False)):
            return False
    return True
