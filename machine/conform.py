"""``toolcancel conform``: run the conformance vectors against any implementation, via an adapter.

The runner starts the adapter as a child process (an argument list, never a shell), reads its
hello -- which declares the protocol version, the conformance level (``trace`` or ``outcome``)
and the retry behaviour -- sends it the vectors of one revision as JSON Lines and judges every
answer against the vector's expectation for that retry behaviour.  At trace level:

1. the answer is a well-formed ``outcome`` for that vector (else a protocol failure);
2. ``execute()`` did not settle while a body was still running (R27, from ``settled_at``);
3. the trace passes the trace checker (:mod:`toolcancel.checker`), which cites its own rule;
4. the trace's contract events are one of the vector's allowed paths, up to when aborts are
   noticed (:meth:`Judge.noticed_late`) -- else the rule cited is that of the checkpoint that had
   to see a missing abort, or of the transition the contract takes where the trace first leaves
   the closest allowed path;
5. the result equals the expected result (canonical JSON), the body started as often as expected,
   each body's signal looked as expected when it settled (R21) and the adapter's observer was
   notified exactly as often as expected (R31), with the very result (when reported), and the
   caller's signal kept no listener (R22, when reported).

At outcome level (:meth:`Judge.judge_outcome`) there is no trace: steps 3 and 4 give way to the
body's signal at each start (checkpoint C2, R17; the seed's pre-aborted entry, R25), and R27 is
judged from what had started and settled when ``execute()`` settled.

What a rule observably means is not written here: an answer becomes one record
(:func:`toolcancel.judge.answer_record`) and the judge's registered checks decide it.  The
vector's verdict is the first broken rule: the trace checker's, then the path's, then a check
that fails on what the record alone shows, then the result difference, then the other
differences from the vector (its rule, the step, expected and observed in brief).  The report
counts, for every rule id, the vectors a check of it could have failed on and that passed, and
the vectors that failed citing it, gives every rule a status derived from those
(:func:`toolcancel.judge.rule_status`: checked, checked through the result only, not checked and
why), and groups failures into families (:meth:`Report.families`).

Robustness, not timing: the hello is awaited ``--hello-timeout`` (default 60 s: start-up on a
loaded machine is slow) and every answer ``--timeout`` (default 10 s), only so that a hung adapter
cannot hang the run.  A timeout, an exit (seen at once, even when a child of the adapter holds its
stdout) or a line that is not a valid answer fails that one vector with a clear message; the
adapter's whole session is then killed and reaped (the runner is its subreaper) and the adapter
restarted, and the run goes on with the next vector.  Vectors are sent ahead in a small window so
the adapter never waits for the runner; after a restart the unanswered ones are sent again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import itertools
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from . import reaper, turnvectors
from .capabilities import STAGE_OBSERVATIONS as _STAGE_OBSERVATIONS
from .capabilities import Capabilities, CapabilityError, needs, undeclared
from .checker import Checker
from .contract import RevisionContract, Transition, load_contract
from .core import CallState, Occurrence, choices, initial_state
from .deviations import Declared
from .deviations import problem as deviation_problem
from .errors import ToolcancelError
from .fileio import STRICT, write_text
from .judge import (
    BODY_SIGNAL,
    CALLER_LISTENERS,
    CHECKED,
    CHECKPOINT_C2,
    CHECKPOINT_C3,
    CHECKS,
    CONTEXTS,
    DEADLINE_FIRST,
    DEADLINE_IDENTITY,
    ENVELOPE,
    ERROR_SHAPE,
    LATE_SUCCESS,
    NONE,
    POST_INPUT,
    PUBLICATION,
    QUIESCENCE,
    STAGE_ORDER,
    TRACE_READS,
    Failure,
    Record,
    Want,
    answer_record,
    could_fail,
    entry_rule,
    error_code,
    first_failure,
    misclassified_deadline,
    quiescent,
    result_rules,
    rule_status,
)
from .scenario import Scenario
from .trace import ENVIRONMENT, MAX_DEPTH, TraceError, json_depth
from .turnvectors import TurnVector
from .vectors import (
    Expectation,
    Vector,
    entry_caller,
    load_vectors,
    scenario_data,
    shipped_dir,
    stageless_file,
    vectors_file,
)

PROTOCOL: Final = 2
"""The adapter protocol this runner speaks; it also accepts an adapter of :data:`PROTOCOLS`."""
PROTOCOLS: Final = (1, 2)
"""Version 2 added the hello's ``retry`` (D11) and ``level``; a version-1 adapter is judged as
declaring the contract's default retry behaviour, which is what version-1 vectors assumed, at
level ``trace``."""
LEVELS: Final = ("trace", "outcome")
"""Conformance levels a protocol-2 hello declares (default ``trace``): the full trace, or only
what a user of the registry sees."""
HELLO_TIMEOUT: Final = 60.0
"""Default seconds to wait for the hello (start-up), separate from the per-answer timeout."""
EXIT_GRACE: Final = 0.5
"""Seconds an exited adapter's last line may take to arrive before its exit counts."""
REAP_TIMEOUT: Final = 5.0
"""Seconds to wait for a killed adapter's pipes to close before closing them on our side."""
WINDOW: Final = 32
"""Vectors in flight at once: enough to keep a fast adapter busy, small enough to resend."""
LINE_LIMIT: Final = 64 << 20
"""Longest answer line read (64 MiB); a longer one is a protocol failure."""
ANSWER_DEPTH: Final = MAX_DEPTH + 2
"""Deepest JSON nesting of an answer: its trace lines (two levels down) nest at most
:data:`toolcancel.trace.MAX_DEPTH` levels themselves."""
QUOTE: Final = 200
"""How much of an unusable line an error message quotes."""
STDERR_TAIL: Final = 4096
"""How much of the adapter's stderr is kept (its last line is quoted when the adapter dies)."""
_CANCEL_GUARDS: Final = frozenset({"cancelled_after_entry", "caller_aborted", "fused_aborted"})
"""Guards that read an abort: a transition with one of them wanted true is a checkpoint."""
_CANCEL_EVENTS: Final = ("caller_abort", "fused_abort")
FEATURE_SHARE: Final = 0.75
"""A family's shared scenario feature is shown when at most this share of the run has it."""
FEATURES: Final = 4
"""At most this many features per family (the rarest in the run first)."""
PROTOCOL_RULE: Final = "protocol"
"""The pseudo rule id under which adapter failures (hang, crash, garbage, refusal) count."""


class ConformError(ToolcancelError):
    """The run cannot start or go on: a bad adapter command, no hello, an unknown revision."""


# ------------------------------------------------------------------------------------------------
# Verdicts and the report
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Judgement:
    """The verdict on one vector: passed, or the rule it fails and a sentence saying why."""

    id: str
    passed: bool
    rules: frozenset[str] = frozenset()  # rules the vector exercised (when it passed)
    rule: str | None = None
    explanation: str = ""
    step: str = ""  # the judging step that failed (answer, quiescence, trace, path, result, ...)
    expected: str = ""  # in brief, what that step wanted
    observed: str = ""  # in brief, what the answer showed
    checked: frozenset[str] = frozenset()  # rules some check of which could have failed on it
    consequence: frozenset[str] = frozenset()  # ... only through the result it decides
    deviations: tuple[str, ...] = ()  # failed, and deviates as these declared deviations do
    verified: bool = True  # ... judged against their alternative expectation (not: no model)


@dataclass
class RuleTally:
    passed: int = 0
    failed: int = 0
    first_failure: str | None = None


@dataclass(frozen=True)
class Family:
    """Failures that cite the same rule at the same judging step, and the scenario features they
    all share (values every one of them has, where the run's vectors differ)."""

    rule: str
    step: str
    ids: tuple[str, ...]
    features: tuple[str, ...]  # shared by every failure, rare in the run: "caller=aborted"
    example: str  # the first failure's explanation
    expected: str = ""  # the first failure's judging step: what the contract wanted, in brief
    observed: str = ""  # ... and what the implementation did

    def line(self) -> str:
        shared = ", ".join(self.features) or "no distinctive feature"
        n = len(self.ids)
        return (
            f"[{self.rule}] {self.step}: {n:,} vector{'s' if n != 1 else ''} ({shared}); "
            f"e.g. {self.example}"
        )


@dataclass
class Report:
    revision: str
    implementation: str
    command: list[str]
    judgements: list[Judgement] = field(default_factory=list)
    seconds: float = 0.0
    restarts: int = 0
    titles: dict[str, str] = field(default_factory=dict)
    retry: str = ""  # the retry behaviour the adapter declared (D11)
    level: str = "trace"
    protocol: int = 1
    seen: frozenset[str] = frozenset()  # optional observations some answer carried
    turns: bool = False  # the adapter's hello declared turns (the scheduler's vectors ran)
    scenarios: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> scenario data
    report_path: str | None = None  # where --report wrote the verdicts, if it did
    strays: int = 0  # processes the adapter started outside its session, killed by the runner
    declared: tuple[str, ...] = ()  # the deviations the adapter declared (and this run judged)
    capabilities: Capabilities = field(default_factory=Capabilities)  # what the hello declared
    skipped: dict[str, int] = field(default_factory=dict)  # capability -> vectors that need it
    skipped_total: int = 0  # vectors not sent: they need a stage the runtime lacks
    wanting: dict[str, dict[str, int]] = field(default_factory=dict)
    # rule -> capability -> how many vectors skipped for want of it would have exercised it

    @property
    def passed(self) -> int:
        return sum(j.passed for j in self.judgements)

    @property
    def failed(self) -> int:
        """Failures no declared deviation explains."""
        return len(self.judgements) - self.passed - self.deviated

    @property
    def deviated(self) -> int:
        """Vectors that deviate as declared: neither passed nor failed."""
        return sum(bool(j.deviations) for j in self.judgements)

    def deviation_counts(self) -> dict[str, int]:
        """Vectors per declared deviations they deviate as: ``D13``, ``D13, pre-R44-error``,
        ``E7-meta, not verified`` (no model judged it)."""
        found: collections.Counter[str] = collections.Counter()
        for j in self.judgements:
            if j.deviations:
                found[", ".join(j.deviations) + ("" if j.verified else ", not verified")] += 1
        return dict(found)

    def by_rule(self) -> dict[str, RuleTally]:
        tally: dict[str, RuleTally] = {}
        for j in self.judgements:
            if j.deviations:
                continue
            if j.passed:
                for r in j.rules:
                    tally.setdefault(r, RuleTally()).passed += 1
            else:
                t = tally.setdefault(j.rule or PROTOCOL_RULE, RuleTally())
                t.failed += 1
                if t.first_failure is None:
                    t.first_failure = j.id
        return dict(sorted(tally.items(), key=lambda kv: _rule_order(kv[0])))

    def coverage(self) -> dict[str, tuple[str, str]]:
        """Every rule of the revision (and ``protocol`` if it failed): its status in this run --
        ``checked``, ``outcome`` (checked through the result only) or ``none`` -- and why,
        derived from what the judge's checks could have failed on
        (:func:`toolcancel.judge.rule_status`)."""
        tally = self.by_rule()
        full: collections.Counter[str] = collections.Counter()
        part: collections.Counter[str] = collections.Counter()
        for j in self.judgements:
            full.update(j.checked)
            part.update(j.consequence)
        out: dict[str, tuple[str, str]] = {}
        for rule in sorted({*self.titles, *tally}, key=_rule_order):
            t = tally.get(rule, RuleTally())
            if rule == PROTOCOL_RULE:
                if t.failed:
                    out[rule] = (CHECKED, "")
                continue
            out[rule] = rule_status(
                rule, self.level, checked=full[rule], consequence=part[rule], seen=self.seen
            )
            if t.failed and out[rule][0] == NONE:  # a failure citing it is a check of it
                out[rule] = (CHECKED, "")
            if out[rule][0] == NONE and rule in self.wanting:
                out[rule] = (NONE, want_why(self.wanting[rule]))
        return out

    def unjudged(self) -> dict[str, dict[str, int]]:
        """The rules no vector of the run could fail, that a vector skipped for want of a
        capability would have exercised: rule -> those capabilities, each with how many such
        vectors lack it, most first (a rule whose checks read only what a missing stage
        observes counts the run's vectors)."""
        return {
            r: self.wanting[r]
            for r, (status, _) in self.coverage().items()
            if status == NONE and r in self.wanting
        }

    def unchecked(self) -> list[str]:
        return [r for r, (status, _) in self.coverage().items() if status == NONE]

    def families(self) -> list[Family]:
        """Failures grouped by (rule, judging step), largest first, with the scenario features
        they share: thousands of failures of one mistake read as one line."""
        groups: dict[tuple[str, str], list[Judgement]] = {}
        for j in self.judgements:
            if not j.passed and not j.deviations:
                groups.setdefault((j.rule or PROTOCOL_RULE, j.step), []).append(j)
        share: collections.Counter[str] = collections.Counter()
        for data in self.scenarios.values():
            share.update(_features(data))
        total = max(1, len(self.scenarios))
        out = []
        for (rule, step), js in groups.items():
            shared: set[str] | None = None
            for j in js:
                mine = _features(self.scenarios.get(j.id, {}))
                shared = mine if shared is None else shared & mine
            # The features that set the family apart: shared by all of it, rare in the run.
            rare = sorted(
                (f for f in shared or () if share[f] / total <= FEATURE_SHARE),
                key=lambda f: (share[f], f),
            )[:FEATURES]
            first = js[0]
            out.append(
                Family(
                    rule,
                    step,
                    tuple(j.id for j in js),
                    tuple(rare),
                    first.explanation,
                    first.expected,
                    first.observed,
                )
            )
        out.sort(key=lambda f: (-len(f.ids), _rule_order(f.rule), f.step))
        return out

    def verdict_lines(self) -> Iterator[str]:
        """One JSON line per vector, in run order: the ``--report`` file."""
        for j in self.judgements:
            verdict = "deviates" if j.deviations else "fail"
            data: dict[str, Any] = {"id": j.id, "verdict": "pass" if j.passed else verdict}
            if j.deviations:
                data |= {"deviations": list(j.deviations), "verified": j.verified}
            if j.passed:
                data["rules"] = sorted(j.rules, key=_rule_order)
            else:
                data |= {
                    "rule": j.rule or PROTOCOL_RULE,
                    "step": j.step or "answer",
                    "expected": j.expected,
                    "observed": j.observed,
                    "explanation": j.explanation,
                }
            yield json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    def write_report(self, path: str | Path) -> None:
        """Write :meth:`verdict_lines` to ``path``, atomically
        (:func:`toolcancel.fileio.write_text`: a failed write leaves no partial report)."""
        write_text(path, "".join(line + "\n" for line in self.verdict_lines()))
        self.report_path = str(path)

    def to_json(self) -> dict[str, Any]:
        tally = self.by_rule()
        coverage = self.coverage()
        data: dict[str, Any] = {
            "revision": self.revision,
            "implementation": self.implementation,
            "protocol": self.protocol,
            "level": self.level,
            "retry": self.retry,
            "turns": self.turns,
            "vectors": len(self.judgements),
            "passed": self.passed,
            "failed": self.failed,
            "deviations": {"declared": list(self.declared), "deviated": self.deviation_counts()},
            "by_rule": {
                r: {
                    "title": self.titles.get(r, ""),
                    "passed": tally.get(r, RuleTally()).passed,
                    "failed": tally.get(r, RuleTally()).failed,
                    "first_failure": tally.get(r, RuleTally()).first_failure,
                    "status": status,
                    "why": why,
                }
                for r, (status, why) in coverage.items()
            },
            "unchecked": [r for r, (status, _) in coverage.items() if status == NONE],
            "capabilities": self.capabilities.to_json() if self.capabilities.declared else None,
            "skipped": {"vectors": self.skipped_total, "by_capability": dict(self.skipped)},
            "unjudged": self.unjudged(),
            "families": [
                {
                    "rule": f.rule,
                    "step": f.step,
                    "count": len(f.ids),
                    "features": list(f.features),
                    "first": f.ids[0],
                    "title": self.titles.get(f.rule, ""),
                    "expected": f.expected,
                    "observed": f.observed,
                    "explanation": f.example,
                    "scenario": self.scenarios.get(f.ids[0]),
                }
                for f in self.families()
            ],
        }
        if self.report_path is not None:
            data["report"] = self.report_path
        else:
            data["failures"] = [
                {
                    "id": j.id,
                    "rule": j.rule,
                    "step": j.step or "answer",
                    "expected": j.expected,
                    "observed": j.observed,
                    "explanation": j.explanation,
                }
                for j in self.judgements
                if not j.passed and not j.deviations
            ]
            data["deviated"] = [
                {"id": j.id, "deviations": list(j.deviations), "verified": j.verified}
                for j in self.judgements
                if j.deviations
            ]
        data |= {
            "restarts": self.restarts,
            "seconds": round(self.seconds, 3),
            "vectors_per_second": round(len(self.judgements) / self.seconds)
            if self.seconds
            else None,
        }
        return data


def want_why(capabilities: Mapping[str, int]) -> str:
    """Why a rule was not judged: the capabilities the runtime lacks that its vectors need."""
    return (
        "NOT JUDGED for want of a capability: the vectors that decide it need "
        + " or ".join(capabilities)
        + ", which the adapter's hello does not declare"
    )


def _features(scenario: Mapping[str, Any]) -> set[str]:
    """A scenario's features for families: ``field=value``, and ``x in wrappers`` for each
    wrapper behaviour (a list's members, not the list, are what failures share)."""
    out = set()
    for k, x in scenario.items():
        if isinstance(x, list):
            out |= {f"{m} in {k}" for m in x}
            if not x:
                out.add(f"no {k}")
        else:
            out.add(f"{k}={str(x).lower() if isinstance(x, bool) else x}")
    return out


def _rule_order(rule: str) -> tuple[int, int, str]:
    if rule.startswith("R") and rule[1:].isdigit():
        return (0, int(rule[1:]), rule)
    return (1, 0, rule)


# ------------------------------------------------------------------------------------------------
# Judging one answer
# ------------------------------------------------------------------------------------------------


def quote(text: str | bytes) -> str:
    """A line for an error message: decoded, stripped, cut at :data:`QUOTE` characters."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.rstrip("\r\n")
    return repr(text if len(text) <= QUOTE else text[:QUOTE] + "…")


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
            e for stage, events in _STAGE_OBSERVATIONS.items()
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
    ) -> Judgement:
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
        )

    def want(self, v: Vector, exp: Expectation) -> Want:
        return Want(
            v.scenario,
            exp,
            tuple(self.expectations(v)),
            post_rule=lambda got: self.post_rule(v, exp, got),
        )

    def record(self, v: Vector, answer: Mapping[str, Any]) -> Record:
        """The answer as one record (:func:`toolcancel.judge.answer_record`)."""
        record = answer_record(answer, v.id, self.table.name, entry_caller(v.scenario))
        if self._unobserved:
            lines = [x for x in record.lines if x["event"] not in self._unobserved]
            record = Record(lines, record.revision, record.caller)
        self.seen.update(e for e in ENVIRONMENT if record.has(e))
        return record

    def undeclared(self, v: Vector, answer: Mapping[str, Any]) -> Judgement | None:
        """A protocol failure if the answer shows a stage the hello did not declare at work
        (:func:`toolcancel.capabilities.undeclared`)."""
        if self.capabilities.everything:  # the common case: nothing to build per vector
            return None
        why = undeclared(self.capabilities, answer, v.allowed_paths())
        if why is None:
            return None
        return self.fail(
            v, PROTOCOL_RULE, why, step="capabilities", expected="declared stages only",
            observed=why.split(",")[0],
        )  # fmt: skip

    def judge(self, v: Vector, answer: Mapping[str, Any]) -> Judgement:
        """The verdict on an ``outcome`` answer (its envelope is already checked)."""
        if self.level == "outcome":
            return self.judge_outcome(v, answer)
        shape = _answer_problem(answer)
        if shape is not None:
            return self.fail(v, PROTOCOL_RULE, shape)
        cheat = self.undeclared(v, answer)
        if cheat is not None:
            return cheat
        trace: list[Any] = answer["trace"]
        result = answer["result"]
        record = self.record(v, answer)
        self.seen.update(e for e in TRACE_READS.values() if any(x["event"] == e for x in trace))
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
                )
            early = first_failure(record, None, "trace")
        if early is not None:
            return self.failed(v, early)
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
        starts = sum(1 for line in trace if line.get("event") == "body_start")
        if not verdict.conforming:
            return self.fail(
                v,
                verdict.rule or PROTOCOL_RULE,
                f"trace event {verdict.event_index} ({verdict.seen}): {verdict.explanation}",
                step="trace",
                expected="a trace the contract accepts",
                observed=f"event {verdict.event_index}: {verdict.seen}",
                checked=self.exercised(v, trace, starts),
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
            return self.fail(
                v,
                rule,
                why,
                step="path",
                expected=f"one of {n} allowed path(s)",
                observed=" > ".join(path),
                checked=self.exercised(v, trace, starts),
            )
        want = self.want(v, exp)
        checked = self.exercised(v, trace, starts) | could_fail(record, want, "trace")
        return self._compared(v, want, record, result, "trace", checked, frozenset())

    def judge_turn(self, v: TurnVector, answer: Mapping[str, Any]) -> Judgement:
        """The verdict on a turn answer: the scheduler's rules, then each started call against
        what the contract gives its kind where the turn aborted (:mod:`toolcancel.turnvectors`).
        Judged alike at both levels: a turn is observed from outside the scheduler."""
        shape = turnvectors.answer_problem(answer, len(v.turn.kinds))
        if shape is not None:
            return self.fail(v, PROTOCOL_RULE, shape)
        found = turnvectors.judge(v, answer)
        if found is None:
            return Judgement(v.id, True, rules=turnvectors.RULES, checked=turnvectors.RULES)
        rule, step, why = found
        return self.fail(
            v,
            rule,
            why,
            step=step,
            expected="see the explanation",
            observed=why,
            checked=turnvectors.RULES,
        )

    def judge_outcome(self, v: Vector, answer: Mapping[str, Any]) -> Judgement:
        """The verdict on an outcome-level answer: only what a registry's user observes."""
        shape = _outcome_problem(answer)
        if shape is not None:
            return self.fail(v, PROTOCOL_RULE, shape)
        cheat = self.undeclared(v, answer)
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
        consequence = self.consequence_rules(v, exp) - checked
        return self._compared(v, want, record, result, "outcome", checked, consequence)

    def _compared(
        self,
        v: Vector,
        want: Want,
        record: Record,
        result: Mapping[str, Any] | None,
        level: str,
        checked: frozenset[str],
        consequence: frozenset[str],
    ) -> Judgement:
        """The record against the judge's checks and the vector: first the broken rule a check
        decides from the record alone (the earliest in the record), then the outcome difference
        (what post-execute received, the result: the earliest), then what else differs from
        the vector (earliest first)."""
        found = first_failure(record, want, level, phase="record")
        if found is not None:
            return self.failed(v, found, checked, consequence)
        exp = want.expectation
        found = first_failure(record, want, level, phase="outcome")
        if result is not None and _canonical(result) != exp.result_json:
            if found is None or record.at("returned")[0] < found.at:
                rule, why = self.result_rule(v, exp, result)
                return self.fail(
                    v,
                    rule,
                    why,
                    step="result",
                    expected=exp.result_json,
                    observed=_canonical(result),
                    checked=checked,
                    consequence=consequence,
                )
        if found is None:
            found = first_failure(record, want, level, phase="vector")
        if found is not None:
            return self.failed(v, found, checked, consequence)
        rules = checked | consequence
        return Judgement(v.id, True, rules=rules, checked=checked, consequence=consequence)

    def failed(
        self,
        v: Vector,
        found: Failure,
        checked: frozenset[str] = frozenset(),
        consequence: frozenset[str] = frozenset(),
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
        )

    # -- allowed paths, up to when an abort is noticed ----------------------------------------

    def choices(self, state: CallState, occ: Occurrence) -> list[tuple[Transition, CallState]]:
        """:func:`toolcancel.core.choices`, memoized: vectors revisit the same few states."""
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
    ) -> tuple[str, str]:
        """The rule a wrong result breaks, as the model checker attributes the same mistake."""
        want, got = exp.result, result
        why = f"the result is {_canonical(got)}; the contract's is {exp.result_json}"
        if got.get("isError") is False and exp.outcome in self.cancellations:
            return LATE_SUCCESS, f"{why} -- a success after the caller cancelled before C4."
        rest_w = {k: x for k, x in want.items() if k != "additionalContexts"}
        rest_g = {k: x for k, x in got.items() if k != "additionalContexts"}
        if misclassified_deadline(v.scenario, got, want):
            return DEADLINE_IDENTITY, f"{why} -- a wrapper's deadline classified by its code."
        if _canonical(rest_w) == _canonical(rest_g):
            return CONTEXTS, (
                f"{why} -- only the contexts differ (kept, ordered and dropped per {CONTEXTS})."
            )
        if v.scenario.timeout == "timer_first" and exp.outcome == "tool_timeout":
            return DEADLINE_FIRST, f"{why} -- the deadline fired first: the result is TOOL_TIMEOUT."
        path = exp.paths[0]
        taken = self.transitions(v, path, exp.outcome) or []
        k = self.could_have_decided(taken, path, got)
        if k is not None:
            t = taken[k]
            rule = next((r for r in t.rules if r not in self.shape_rules), t.rules[0])
            return rule, (
                f"{why} (at {path[k]} the contract took {', '.join(t.rules)}; the result is "
                "what another decision there gives)."
            )
        i = next((i for i in reversed(range(len(taken))) if taken[i].outcome is not None), None)
        if i is None:
            return self.table.contract.outcome(exp.outcome).rule, f"{why}."
        t = taken[i]
        rule = next((r for r in t.rules if r not in self.shape_rules), t.rules[0])
        return rule, f"{why} (outcome {exp.outcome}, decided at {path[i]}: {', '.join(t.rules)})."

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
                u is not t and u.outcome in outcomes and path[k] in u.events
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


_SIGNAL_KEYS: Final = frozenset({"aborted", "reason"})
_REASONS: Final = (None, "caller", "wrapper", "timeout", "other")


def _is_signal(b: Any) -> bool:
    return (
        isinstance(b, dict)
        and b.keys() == _SIGNAL_KEYS
        and isinstance(b["aborted"], bool)
        and b["reason"] in _REASONS
    )


def _is_count(n: Any) -> bool:
    return type(n) is int and n >= 0


def _common_problem(answer: Mapping[str, Any]) -> str | None:
    """What is wrong with the fields both levels share: result, notifications, raised and the
    optional notified_same and listeners."""
    result = answer.get("result", ...)
    if result is ... or (result is not None and not isinstance(result, dict)):
        return "the answer's result must be a result object (or null if execute() raised)"
    observed = answer.get("observed")
    if not isinstance(observed, dict):
        return "the answer needs an observed object"
    if not _is_count(observed.get("notifications")):
        return "observed.notifications must be a non-negative integer"
    raised = observed.get("raised", ...)
    if raised is ... or (raised is not None and not isinstance(raised, str)):
        return "observed.raised must be a string or null"
    if type(observed.get("notified_same", True)) is not bool:
        return "observed.notified_same must be true or false"
    listeners = observed.get("listeners")
    if listeners is not None and not (
        isinstance(listeners, dict)
        and listeners.keys() == {"before", "after"}
        and all(_is_count(n) for n in listeners.values())
    ):
        return "observed.listeners must be {before, after} counts (or absent)"
    left = observed.get("listeners_left")
    if left is not None and not (
        isinstance(left, dict)
        and {"watched", "leaks"} <= left.keys() <= {"watched", "leaks", "first"}
        and all(_is_count(left[k]) for k in ("watched", "leaks"))
        and isinstance(left.get("first", ""), str)
    ):
        return "observed.listeners_left must be {watched, leaks[, first]} (or absent)"
    frozen = observed.get("frozen")
    if frozen is not None and not (
        isinstance(frozen, dict)
        and frozen.keys() == {"result", "view"}
        and all(type(x) is bool for x in frozen.values())
    ):
        return "observed.frozen must be {result, view} booleans (or absent)"
    if observed.get("approval_signal") not in (None, "pre_slot", "other"):
        return "observed.approval_signal must be pre_slot or other (or absent)"
    after = observed.get("slot_after_next")
    if after is not None and not (isinstance(after, list) and all(type(x) is bool for x in after)):
        return "observed.slot_after_next must be a list of booleans (or absent)"
    if "post_received" in observed and not (
        observed["post_received"] is None or isinstance(observed["post_received"], dict)
    ):
        return "observed.post_received must be a result object or null (or absent)"
    return None


def _outcome_problem(answer: Mapping[str, Any]) -> str | None:
    """What is wrong with the shape of an outcome-level answer, or None."""
    problem = _common_problem(answer)
    if problem is not None:
        return problem
    observed = answer["observed"]
    if "notified_same" not in observed:
        return "observed.notified_same is required at outcome level"
    bodies = observed.get("bodies")
    if not isinstance(bodies, list) or not all(
        isinstance(b, dict)
        and b.keys() == {"start", "settle"}
        and _is_signal(b["start"])
        and (b["settle"] is None or _is_signal(b["settle"]))
        for b in bodies
    ):
        return (
            "observed.bodies must be a list of {start, settle} signal observations (settle "
            "null for a body that never settled)"
        )
    settled = observed.get("settled", ...)
    if settled is ... or (
        settled is not None
        and not (
            isinstance(settled, dict)
            and settled.keys() == {"bodies_started", "bodies_settled"}
            and all(_is_count(n) for n in settled.values())
            and settled["bodies_settled"] <= settled["bodies_started"] <= len(bodies)
        )
    ):
        return (
            "observed.settled must be {bodies_started, bodies_settled} when execute() settled "
            "(or null if it never did)"
        )
    observed.setdefault("listeners", None)
    return None


def _answer_problem(answer: Mapping[str, Any]) -> str | None:
    trace, observed = answer.get("trace"), answer.get("observed")
    if not isinstance(trace, list) or not all(isinstance(x, dict) for x in trace):
        return "the answer's trace must be a list of trace-line objects"
    if not all(isinstance(x.get("event"), str) for x in trace):
        return "every trace line needs a string event"
    problem = _common_problem(answer)
    if problem is not None:
        return problem
    assert isinstance(observed, dict)
    sigs, at = observed.get("body_signals"), observed.get("settled_at", ...)
    if not isinstance(sigs, list) or not all(_is_signal(b) for b in sigs):
        return "observed.body_signals must be a list of {aborted, reason} objects"
    if at is ... or (at is not None and (type(at) is not int or not 0 <= at <= len(trace))):
        return "observed.settled_at must be a trace length (or null if execute() never settled)"
    return None


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


class AdapterDied(Exception):
    """The adapter hung, exited, or wrote a line that is not an answer (message says which)."""


class Adapter:
    """One running adapter process and its hello."""

    def __init__(
        self, command: Sequence[str], timeout: float, hello_timeout: float = HELLO_TIMEOUT
    ) -> None:
        self.exited: asyncio.Future[Any] = asyncio.Future()  # replaced at each start
        self.command = list(command)
        self.timeout = timeout
        self.hello_timeout = hello_timeout
        self.proc: asyncio.subprocess.Process | None = None
        self.hello: dict[str, Any] = {}
        self.stderr_tail = b""
        self._stderr_task: asyncio.Task[None] | None = None
        self._transport: asyncio.SubprocessTransport | None = None
        self._mark = ""  # marks every process of the current start (toolcancel.reaper)
        self.strays = 0  # processes that had left the adapter's session, killed at its stops

    @property
    def protocol(self) -> int:
        """The protocol version the adapter's hello declared (every message carries it)."""
        return int(self.hello.get("protocol", PROTOCOL))

    @property
    def level(self) -> str:
        """``trace`` or ``outcome``: what the adapter's answers carry (protocol 1: ``trace``)."""
        return str(self.hello.get("level", "trace"))

    @property
    def turns(self) -> bool:
        """Whether the adapter's hello declared ``turns`` (or the capability ``turns``): it runs
        turn vectors through its scheduler (optional; without it R9 and R36-R38 are reported not
        checked)."""
        caps = self.capabilities
        return "turns" in caps.stages if caps.declared else self.hello.get("turns") is True

    @property
    def capabilities(self) -> Capabilities:
        """The stages the adapter's runtime has and how its caller cancels (hello
        ``capabilities``, protocol 2; absent: everything)."""
        if self.protocol == 1:
            return Capabilities()
        return Capabilities.from_hello(self.hello.get("capabilities"))

    @property
    def deviations(self) -> tuple[str, ...]:
        """The deviations the adapter's hello declared (spec/contract.toml ``[[deviation]]``;
        none: judged exactly by the contract)."""
        return tuple(self.hello.get("deviations", ()))

    @property
    def retry(self) -> str:
        """The retry behaviour the adapter declared (protocol 1: the contract's default)."""
        return str(self.hello.get("retry", load_contract().default_retry))

    async def start(self) -> None:
        """Start the adapter (an argument list: no shell ever sees it) and read its hello.

        The hello is awaited ``hello_timeout`` seconds, not the per-answer ``timeout``: starting
        a runtime and importing a registry takes much longer than answering one vector, above
        all on a loaded machine.

        Its stderr is read by the runner, never passed through (an adapter that floods it, or
        prints a traceback, must not break the runner's one-line error promise); the last line
        is quoted when the adapter dies.
        """
        self.stderr_tail = b""
        loop = asyncio.get_running_loop()
        self.exited = loop.create_future()
        exited = self.exited
        self._mark = reaper.new_mark()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _Protocol(exited, loop),
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                env={**os.environ, reaper.MARK_VARIABLE: self._mark},
            )
            self._transport = transport
            self.proc = asyncio.subprocess.Process(transport, protocol, loop)
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in an argument
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            name = quote(self.command[0])
            raise ConformError(f"cannot start the adapter {name}: {why}") from None
        assert self.proc.stderr is not None
        self._stderr_task = asyncio.ensure_future(self._read_stderr(self.proc.stderr))
        try:
            line = await self.readline("the hello", self.hello_timeout)
        except AdapterDied as exc:
            await self.stop()
            raise ConformError(f"the adapter sent no hello: {exc}") from None
        try:
            hello = json.loads(line)
        except (ValueError, RecursionError):
            hello = None
        if not (
            isinstance(hello, dict)
            and hello.get("type") == "hello"
            and isinstance(hello.get("revisions"), list)
        ):
            await self.stop()
            raise ConformError(f"the adapter's first line is not a hello: {quote(line)}")
        problem = _hello_problem(hello)
        if problem is not None:
            await self.stop()
            raise ConformError(problem)
        self.hello = hello

    async def _read_stderr(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(1 << 16):
            self.stderr_tail = (self.stderr_tail + chunk)[-STDERR_TAIL:]

    async def _stderr_hint(self) -> str:
        """``; its stderr ends with: '...'`` once the adapter's stderr is closed, or nothing."""
        task = self._stderr_task
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=1.0)
        lines = [ln for ln in self.stderr_tail.splitlines() if ln.strip()]
        return f"; its stderr ends with: {quote(lines[-1])}" if lines else ""

    async def readline(self, what: str, timeout: float | None = None) -> bytes:
        """The adapter's next line, or :class:`AdapterDied` naming what went wrong.

        Waits for the line or the adapter's own exit, whichever comes first: a child the
        adapter forked may hold its stdout open long after the adapter died, so end of file
        alone would only come with the timeout.
        """
        assert self.proc is not None and self.proc.stdout is not None
        limit = self.timeout if timeout is None else timeout
        read: asyncio.Future[Any] = asyncio.ensure_future(self.proc.stdout.readline())
        try:
            done, _ = await asyncio.wait(
                {read, self.exited}, timeout=limit, return_when=asyncio.FIRST_COMPLETED
            )
            if read not in done and self.exited.done():  # its last words may still be in flight
                done, _ = await asyncio.wait({read}, timeout=EXIT_GRACE)
            if read in done:
                line: bytes = read.result()
            elif self.exited.done():
                line = b""
            else:
                raise AdapterDied(f"no answer for {what} within {limit:g} s (the adapter hangs?)")
        except (ValueError, asyncio.LimitOverrunError):
            raise AdapterDied(f"the answer for {what} is longer than {LINE_LIMIT} bytes") from None
        finally:
            if not read.done():
                read.cancel()
        if not line:
            code = await self._exit_code()
            raise AdapterDied(
                f"the adapter exited{'' if code is None else f' with code {code}'} "
                f"before answering {what}{await self._stderr_hint()}"
            )
        return line

    async def _exit_code(self) -> int | None:
        """The adapter's exit status, polled for up to a second: not ``wait()``, which (3.11)
        waits for the pipes too, and a child of the adapter may hold them."""
        assert self.proc is not None
        for _ in range(100):
            if self.proc.returncode is not None:
                break
            await asyncio.sleep(0.01)
        return self.proc.returncode

    def send(self, data: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        if not self.proc.stdin.is_closing():
            self.proc.stdin.write(data)

    async def drain(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        with contextlib.suppress(ConnectionError):
            await self.proc.stdin.drain()

    async def stop(self, *, graceful: bool = False) -> None:
        """Close stdin, let the adapter exit (if ``graceful``), then kill every process it
        started -- its session, its descendants, and what carries its mark, wherever it moved
        (:mod:`toolcancel.reaper`) -- await their exits, reap them, and close the transport.

        Everything is closed before this returns, so nothing is left for the garbage collector
        to close after the event loop has closed (asyncio's "Event loop is closed" tracebacks).
        """
        proc, transport = self.proc, self._transport
        if proc is None:
            return
        self.proc = self._transport = None
        if proc.stdin is not None:
            with contextlib.suppress(ConnectionError):
                proc.stdin.close()
        if graceful and proc.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.exited), self.timeout)
        sweep = reaper.kill_all(proc.pid, self._mark, reaped=proc.returncode is not None)
        self.strays += len(sweep.strays)
        await reaper.await_exits(sweep, REAP_TIMEOUT)
        # asyncio (3.11) reports the exit only once every pipe reached EOF, and a stdout paused
        # on an over-long line never does unless someone reads it: read what is left.
        if proc.stdout is not None:
            with contextlib.suppress(TimeoutError, ValueError, ConnectionError):
                await asyncio.wait_for(_discard(proc.stdout), REAP_TIMEOUT)
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), REAP_TIMEOUT)
        except TimeoutError:  # a process we could not kill holds a pipe: stop listening to it
            pass
        assert transport is not None
        transport.close()  # the pipes too; the process is dead, so nothing is signalled
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), REAP_TIMEOUT)
        task, self._stderr_task = self._stderr_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _hello_problem(hello: Mapping[str, Any]) -> str | None:
    """Why a hello cannot be used, or None.  Protocol 1 means level ``trace`` and the contract's
    default retry behaviour; protocol 2 declares its retry behaviour, and may declare its level
    (default ``trace``)."""
    version = hello.get("protocol")
    if version not in PROTOCOLS or type(version) is not int:
        return (
            f"the adapter speaks protocol {version!r}; this runner speaks "
            f"{' and '.join(map(str, PROTOCOLS))}"
        )
    if version == 1:
        return None
    behaviours = load_contract().retry_names
    if hello.get("retry") not in behaviours:
        return (
            f"the adapter's hello declares retry {hello.get('retry')!r}; a protocol-2 hello "
            f"declares how next() retries: one of {', '.join(behaviours)} (README: D11)"
        )
    if hello.get("level", "trace") not in LEVELS:
        return (
            f"the adapter's hello declares level {hello.get('level')!r}; a protocol-2 hello "
            f"declares one of {', '.join(LEVELS)} (or none: trace)"
        )
    if type(hello.get("turns", False)) is not bool:
        return f"the adapter's hello declares turns {hello.get('turns')!r}; true, false or absent"
    try:
        caps = Capabilities.from_hello(hello.get("capabilities"))
    except CapabilityError as exc:
        return str(exc)
    if caps.declared and "turns" in hello and hello["turns"] != ("turns" in caps.stages):
        return (
            f"the adapter's hello declares turns {hello['turns']!r} and capabilities.turns "
            f"{'turns' in caps.stages!r}; they must agree (or give only capabilities)"
        )
    return deviation_problem(hello.get("deviations", []))


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's stream protocol, plus a future set when the process itself exits (3.11's
    ``Process.wait()`` also waits for the pipes, which a forked child may hold)."""

    def __init__(self, exited: asyncio.Future[Any], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=LINE_LIMIT, loop=loop)
        self._exited = exited

    def process_exited(self) -> None:
        super().process_exited()
        if not self._exited.done():
            self._exited.set_result(None)


async def _discard(stream: asyncio.StreamReader) -> None:
    while await stream.read(1 << 16):
        pass


async def run_vectors(
    command: Sequence[str],
    vectors: Sequence[Vector],
    revision: str,
    *,
    timeout: float = 10.0,
    window: int = WINDOW,
    hello_timeout: float = HELLO_TIMEOUT,
    progress: Callable[[int, int], None] | None = None,
    turns: Sequence[TurnVector] = (),
    stageless: Sequence[Vector] = (),
) -> Report:
    """Send every vector to the adapter, judge every answer; restart the adapter as needed.
    ``progress(judged, total)`` is called after each answer.  The turn vectors ``turns`` are
    sent after the call vectors, if the adapter's hello declares ``turns``; the ``stageless``
    family is added to the call vectors if its hello lacks a capability.

    Runs as the subreaper of the adapters it starts, so that what they leave behind is killed
    and reaped, never orphaned (:meth:`Adapter.stop`)."""
    with reaper.subreaper():
        return await _run_vectors(
            command,
            vectors,
            revision,
            timeout=timeout,
            window=window,
            hello_timeout=hello_timeout,
            progress=progress,
            turns=turns,
            stageless=stageless,
        )


async def _run_vectors(
    command: Sequence[str],
    vectors: Sequence[Vector],
    revision: str,
    *,
    timeout: float,
    window: int,
    hello_timeout: float,
    progress: Callable[[int, int], None] | None,
    turns: Sequence[TurnVector] = (),
    stageless: Sequence[Vector] = (),
) -> Report:
    adapter = Adapter(command, timeout, hello_timeout)
    await adapter.start()
    caps = adapter.capabilities
    if caps.declared and not caps.everything:  # one vector per scenario, not per path
        vectors = [*vectors, *stageless]
    judge = Judge(revision, adapter.retry, adapter.level, caps)
    items: list[Vector | TurnVector] = []
    skipped: list[tuple[Vector, frozenset[str]]] = []
    for vector in vectors:
        mine = vector.for_retry(adapter.retry)
        lacks = caps.lacks(needs(mine, judge.table)) if caps.declared else frozenset()
        if lacks:
            skipped.append((mine, lacks))
        else:
            items.append(mine)
    if adapter.turns:
        items += turns
    revisions = adapter.hello.get("revisions", [])
    if revision not in revisions:
        await adapter.stop()
        raise ConformError(
            f"the adapter does not implement the {revision} contract (its hello lists "
            f"{', '.join(map(str, revisions)) or 'no revision'})"
        )
    report = Report(revision, str(adapter.hello.get("implementation", "?")), list(command))
    report.level, report.retry, report.protocol = adapter.level, adapter.retry, adapter.protocol
    declared = Declared(adapter.deviations, revision, adapter.retry)
    report.declared = tuple(d.name for d in declared.deviations)
    if declared:  # their models run once, off the loop, before the first answer is judged
        await asyncio.to_thread(declared.prepare, [v for v in items if isinstance(v, Vector)])
    ran_turns = adapter.turns and bool(turns)  # declared, and the run has turn vectors
    report.turns = ran_turns
    report.capabilities = caps
    unsent = 0 if adapter.turns or not caps.declared else len(turns)
    wants = collections.Counter(c for _, lacks in skipped for c in lacks)
    if unsent:  # turn vectors not sent for want of turns (an older hello: the table says so)
        wants["turns"] = unsent
    report.skipped_total = len(skipped) + unsent
    report.skipped = dict(sorted(wants.items(), key=lambda kv: (-kv[1], kv[0])))
    report.wanting = _wanting(judge, skipped, len(items), unsent)
    report.scenarios = {
        v.id: v.turn_data() if isinstance(v, TurnVector) else scenario_data(v.scenario)
        for v in items
    }
    report.titles = {**judge.titles, PROTOCOL_RULE: "adapter failures (hang, crash, garbage)"}
    start = time.perf_counter()
    lines = [
        v.message(adapter.protocol)
        if isinstance(v, TurnVector)
        else _vector_message(v, adapter.protocol)
        for v in items
    ]
    todo = collections.deque(range(len(items)))
    pending: collections.deque[int] = collections.deque()
    try:
        while todo or pending:
            if todo and len(pending) <= window // 2:  # top up in one write, not one per vector
                batch = []
                while todo and len(pending) < window:
                    i = todo.popleft()
                    batch.append(lines[i])
                    pending.append(i)
                adapter.send(b"".join(batch))
                await adapter.drain()
            i = pending[0]
            v = items[i]
            try:
                line = await adapter.readline(f"vector {v.id}")
                answer = _parse_answer(line, v.id, adapter.protocol)
            except AdapterDied as exc:
                pending.popleft()
                report.judgements.append(
                    Judgement(
                        v.id,
                        False,
                        rule=PROTOCOL_RULE,
                        explanation=f"{v.id}: {exc}",
                        step="adapter",
                    )
                )
                todo.extendleft(reversed(pending))
                pending.clear()
                await adapter.stop()
                report.restarts += 1
                try:
                    await adapter.start()
                except ConformError as exc2:
                    for j in todo:
                        report.judgements.append(
                            Judgement(
                                items[j].id,
                                False,
                                rule=PROTOCOL_RULE,
                                explanation=f"{items[j].id}: the adapter could not be "
                                f"restarted: {exc2}",
                                step="adapter",
                            )
                        )
                    todo.clear()
                continue
            pending.popleft()
            if answer.get("type") == "error":
                report.judgements.append(
                    Judgement(
                        v.id,
                        False,
                        rule=PROTOCOL_RULE,
                        explanation=f"{v.id}: the adapter could not run it: "
                        f"{str(answer.get('message'))[:QUOTE]}",
                        step="adapter",
                    )
                )
                continue
            report.judgements.append(
                judge.judge_turn(v, answer)
                if isinstance(v, TurnVector)
                else _judged(judge, declared, v, answer)
            )
            if progress is not None:
                progress(len(report.judgements), len(items))
    finally:
        await adapter.stop(graceful=True)
    report.seconds = time.perf_counter() - start
    report.strays = adapter.strays
    # "turns" seen: the scheduler could be judged (the hello declares turns), whether or not this
    # run's vectors held any turn vector -- the coverage table says which of the two it was
    report.seen = frozenset(judge.seen | ({"turns"} if adapter.turns else set()))
    return report


def _judged(judge: Judge, declared: Declared, v: Vector, answer: Mapping[str, Any]) -> Judgement:
    """The verdict on ``v``: the contract's; when that fails and the adapter declared
    deviations touching ``v``, whether it deviates as declared (:meth:`Declared.rejudge`)."""
    verdict = judge.judge(v, answer)
    if verdict.passed or not declared or verdict.rule == PROTOCOL_RULE:
        return verdict
    found = declared.rejudge(v, answer, lambda alt, ans: judge.judge(alt, ans).passed)
    if found is None:
        return verdict
    return dataclasses.replace(verdict, deviations=found.names, verified=found.verified)

def _wanting(
    judge: Judge, skipped: Sequence[tuple[Vector, frozenset[str]]], ran: int, unsent: int
) -> dict[str, dict[str, int]]:
    """Rule -> capability -> how many vectors exercising the rule (its expected behaviour's
    rules, :meth:`Judge.static_rules`) were skipped for want of it, most first; the rules whose
    every check reads what only a missing stage observes, with the ``ran`` vectors of the run;
    the turn rules with the ``unsent`` turn vectors, for want of ``turns``."""
    out: dict[str, collections.Counter[str]] = {}
    for v, missing in skipped:
        for rule in judge.static_rules(v):
            out.setdefault(rule, collections.Counter()).update(missing)
    caps = judge.capabilities
    if caps.declared and unsent:
        for rule in turnvectors.RULES:
            out.setdefault(rule, collections.Counter())["turns"] += unsent
    for rule, found in CHECKS.items():  # every check reads what a lacking stage cannot show
        asked = [c for c in found if judge.level in c.levels]
        blind = [
            {st for st, events in _STAGE_OBSERVATIONS.items() if c.reads & set(events)}
            - caps.stages
            for c in asked
        ]
        if asked and all(blind):
            for stage in set().union(*blind):
                out.setdefault(rule, collections.Counter())[stage] += ran
    return {
        r: dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))) for r, c in out.items() if c
    }


def _vector_message(v: Vector, protocol: int = PROTOCOL) -> bytes:
    msg = {
        "protocol": protocol,
        "type": "vector",
        "id": v.id,
        "revision": v.revision,
        "scenario": scenario_data(v.scenario),
    }
    return (json.dumps(msg, separators=(",", ":")) + "\n").encode()


def _parse_answer(line: bytes, vid: str, protocol: int = PROTOCOL) -> dict[str, Any]:
    try:  # the shared strict reader: no NaN, no key twice in one object
        answer = STRICT.decode(line.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise AdapterDied(f"the answer is not JSON: {quote(line)}") from None
    if json_depth(answer) > ANSWER_DEPTH:
        raise AdapterDied(f"the answer nests deeper than {ANSWER_DEPTH} levels")
    if not isinstance(answer, dict):
        raise AdapterDied(f"the answer is not a JSON object: {quote(line)}")
    if answer.get("protocol") != protocol:
        raise AdapterDied(
            f"the answer has protocol {answer.get('protocol')!r}, not {protocol}: {quote(line)}"
        )
    if answer.get("type") not in ("outcome", "error"):
        raise AdapterDied(f"the answer's type is not outcome or error: {quote(line)}")
    if answer.get("id") != vid:
        raise AdapterDied(f"expected the answer for {vid}, got id {answer.get('id')!r}")
    return answer


def select(
    vectors: Sequence[Vector],
    only: Sequence[str],
    revision: str,
    turns: Sequence[TurnVector] = (),
) -> tuple[list[Vector], list[TurnVector]]:
    """The call and turn vectors ``--only`` names: a vector id picks that vector, a rule id
    every vector whose expected behaviour exercises the rule (the transitions of its paths, the
    result's rule and what every answer is checked on; a turn vector's rules are R9 and
    R36-R38).  An id or rule that selects nothing is an error."""
    ids = {v.id for v in vectors} | {t.id for t in turns}
    judge = Judge(revision)
    wanted: set[str] = set()
    for item in only:
        if item in ids:
            wanted.add(item)
            continue
        if item not in judge.titles:
            raise ConformError(f"--only {item}: neither a vector id of the run nor a rule id")
        picked = {v.id for v in vectors if item in judge.static_rules(v)}
        picked |= {t.id for t in turns if item in t.rules}
        if not picked:
            raise ConformError(f"--only {item}: no vector of the run exercises {item}")
        wanted |= picked
    return [v for v in vectors if v.id in wanted], [t for t in turns if t.id in wanted]


def conform(
    command: Sequence[str],
    revision: str,
    *,
    vectors_path: str | Path | None = None,
    timeout: float = 10.0,
    hello_timeout: float = HELLO_TIMEOUT,
    only: Sequence[str] = (),
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """Run the vectors of ``revision`` (the committed ones, call and turn vectors and the
    stage-less family for a hello that lacks a capability, unless ``vectors_path`` names a call
    vectors file), or only those ``only`` selects (:func:`select`)."""
    path = Path(vectors_path) if vectors_path else vectors_file(shipped_dir(), revision)
    vectors = load_vectors(path)
    wrong = [v.id for v in vectors if v.revision != revision]
    if wrong:
        raise ConformError(f"{path}: vector {wrong[0]} is of another revision than {revision}")
    turns: list[TurnVector] = []
    stageless: list[Vector] = []
    if not vectors_path:
        turns = turnvectors.load_turn_vectors(turnvectors.turn_file(shipped_dir(), revision))
        stageless = load_vectors(stageless_file(shipped_dir(), revision))
    if only:
        picked, turns = select([*vectors, *stageless], only, revision, turns)
        family = {v.id for v in stageless}
        vectors = [v for v in picked if v.id not in family]
        stageless = [v for v in picked if v.id in family]
    return asyncio.run(
        run_vectors(
            command,
            vectors,
            revision,
            timeout=timeout,
            hello_timeout=hello_timeout,
            progress=progress,
            turns=turns,
            stageless=stageless,
        )
    )


def self_command(retry: str | None = None, level: str = "trace") -> list[str]:
    """The command of our own adapter (``--self``), running retry behaviour ``retry`` (default:
    the contract's), at conformance level ``level``."""
    command = [sys.executable, "-m", "toolcancel.adapter", *(("--retry", retry) if retry else ())]
    return command if level == "trace" else [*command, "--level", level]
