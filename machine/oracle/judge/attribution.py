"""Which rule, and why: attribution as the judge's, not a driver's.

conform replays a vector's allowed paths through the contract's machine (:class:`Attribution`)
and, where an answer departs from them, asks here which rule the departure cites: the
checkpoint that had to see a missing abort, the transition the contract takes where the trace
leaves the closest allowed path, the decision a wrong result or a wrong input to post-execute
comes from, and the rules an answer was checked on (coverage).  Every rule it names is the
registry's (:mod:`toolcancel.oracle.judge`: a check's rule, or the rule the contract's data gives
a transition or an outcome); conform's judge names none of its own
(``tests/test_conform_judge_rules.py`` holds it).

Invariants: what a rule means stays in its check; this module only picks which of the
registry's rules a departure cites, the same way the model checker attributes the same mistake.
A contributor changing an attribution changes it here, with the judge's mutants test
(``tests/test_judge_mutants.py``) as the measure.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ...contract.core import CallState, Occurrence, choices, initial_state
from ...contract.loader import RevisionContract, Transition
from ..scenario_language import Scenario, entry_caller
from . import (
    BODY_SIGNAL,
    CALLER_LISTENERS,
    CHECKPOINT_C2,
    ENVELOPE,
    POST_INPUT,
    PUBLICATION,
    QUIESCENCE,
    STAGE_ORDER,
    TRACE_READS,
    error_code,
    result_rules,
)
from .differences import Difference
from .registry import RESULT, Check, on

if TYPE_CHECKING:  # vectors read the judge: the judge reads them only as types
    from ..vectors import Expectation, Vector

_CANCEL_GUARDS: Final = frozenset({"cancelled_after_entry", "caller_aborted", "fused_aborted"})
"""Guards that read an abort: a transition with one of them wanted true is a checkpoint."""
_CANCEL_EVENTS: Final = ("caller_abort", "fused_abort")
_DIFFERENCES: Final = on(RESULT)
"""The result checks (:mod:`toolcancel.oracle.judge.differences`) by what they compare: the
``result`` and what post-execute received (``post``), in the order they are asked."""


class Attribution:
    """The contract's replay of one revision for a vector, and the rule each departure from its
    allowed paths cites.  Memoized per instance: vectors revisit the same few states."""

    def __init__(self, table: RevisionContract, retry: str | None = None) -> None:
        self.table = table
        self.retry = retry or table.contract.default_retry
        self.events = frozenset(e.name for e in table.events)
        self.data = {e.name: e.data for e in table.events}
        self.shape_rules = frozenset(o.rule for o in table.outcomes)
        self.outcome_rule = {o.name: o.rule for o in table.outcomes}
        self.titles = {r.id: r.title for r in table.rules}
        self.result_rules = result_rules(self.titles)
        self.traced = frozenset(TRACE_READS.values())
        """The optional environment events a trace may carry (listeners): noted where seen."""
        self._rules: dict[tuple[Any, ...], frozenset[str]] = {}
        self._choices: dict[tuple[CallState, Occurrence], list[tuple[Transition, CallState]]] = {}
        self._each: dict[str, tuple[Occurrence, ...]] = {}
        self.cancellations = frozenset(
            o.name for o in table.outcomes if o.code in ("ABORTED", "ABORTED_BEFORE_DISPATCH")
        )

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
        path = tuple(o.event for o in through_the_slot(occs))
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
        late = self.table.contract.publishes_over_rule  # listed with every cancellation's rows
        rule = next((r for r in t.rules if r != late), t.rules[0])
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
        and every rule it breaks: the first ``result`` check that finds the difference its own
        (:mod:`toolcancel.oracle.judge.differences`), else the contract's decision it departs
        from (and that decision's rules)."""
        got = result
        why = f"the result is {answer_json(got)}; the contract's is {exp.result_json}"
        own = _first(_DIFFERENCES["result"], self.difference(v, exp, exp.result, got))
        if own is not None:
            return own[0].rule, f"{why} -- {own[1]}", ()
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

    def difference(self, v: Vector, exp: Expectation, wanted: Any, got: Any = None) -> Difference:
        """What the result checks are handed: ``got`` where the contract gives ``wanted``."""
        return Difference(v.scenario, exp.outcome, exp.outcome in self.cancellations, wanted, got)

    def result_attributions(self, v: Vector, exp: Expectation) -> frozenset[str]:
        """The rules the result comparison cites of itself for ``v`` (:meth:`result_rule`): those
        of the ``result`` checks whose antecedent holds.  So coverage counts them where a wrong
        result could cite them."""
        d = self.difference(v, exp, exp.result)
        return frozenset(c.rule for c in _DIFFERENCES["result"] if c.holds(d))

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
        """The rule a wrong input to post-execute breaks: the first ``post`` result check that
        finds the difference its own (:mod:`toolcancel.oracle.judge.differences`: only its
        contexts differ, another result of the decided kind, a wrapper's deadline taken for the
        registry's, the deadline first, a late success C3 had to replace); else the rule of the
        transition that decided what post-execute had to receive (C1's for a denial, R13)."""
        own = _first(_DIFFERENCES["post"], self.difference(v, exp, exp.post_received, got))
        if own is not None:
            return own[0].rule
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
        entry = self.table.contract.entry_rule(entry_caller(s), self.table.name)
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
        return self.table.contract.entry_rule(entry_caller(v.scenario), self.table.name)

    def consequence_rules(self, v: Vector, exp: Expectation) -> frozenset[str]:
        """The rules the outcome level decides through the result alone: a wrong decision at a
        transition along the expected path (its rules), a wrong stage order, entry or shape of
        the outcome shows as another result, not as the steps that made it."""
        return self._path_rules(v, exp) | {STAGE_ORDER, self._entry_rule(v)}

    def outcome_shape(self, exp: Expectation) -> frozenset[str]:
        """The rules the result comparison decides in full: the envelope (R1), the outcome's
        own shape and, in the revised contract, the error shape (R44)."""
        return self.result_rules | {self.outcome_rule[exp.outcome]}


def _first(checks: list[Check], d: Difference) -> tuple[Check, str] | None:
    """The first of ``checks`` whose antecedent holds and that finds ``d`` its own, and why."""
    for c in checks:
        if c.holds(d):
            why = c.judge(d)
            if why is not None:
                return c, why
    return None


def answer_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _common(a: Sequence[str], b: Sequence[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def through_the_slot(occs: list[Occurrence]) -> list[Occurrence]:
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
