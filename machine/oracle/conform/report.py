"""The verdicts of a ``toolcancel conform`` run and the report made of them.

A :class:`Judgement` per vector; the :class:`Report` counts, for every rule id, the vectors a
check of it could have failed on and that passed and the vectors that failed citing it, gives
every rule a status derived from those (:func:`toolcancel.oracle.judge.rule_status`: checked,
checked through the result only, not checked and why), groups failures into families
(:meth:`Report.families`) and keeps the vectors that deviate as declared apart from both.  It
renders as the table, ``--json`` and the ``--report`` verdict lines.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ...contract.fileio import write_text
from ..judge import CHECKED, NONE, rule_status
from ..vectors import Vector, scenario_data
from ..vectors.turns import TurnVector
from .capabilities import Capabilities
from .protocol import PROTOCOL_RULE

BROKEN: Final = "broken"
KEPT: Final = "kept"
MASKED: Final = "masked"
VACUOUS: Final = "vacuous"
NOT_JUDGED: Final = "not judged"
STATES: Final = (BROKEN, KEPT, MASKED, VACUOUS, NOT_JUDGED)
"""What a run shows of a rule (:meth:`Report.states`), strongest first: broken, kept (a vector
that could have failed it was judged by it and passed), ran but masked by an earlier failure,
kept only vacuously (no stage, or declined vectors only), not judged."""
STATE_WORDS: Final = {
    BROKEN: "BROKEN",
    KEPT: "kept",
    MASKED: "ran, masked by an earlier failure",
    VACUOUS: "kept only vacuously",
    NOT_JUDGED: "not judged",
}

FEATURE_SHARE: Final = 0.75
"""A family's shared scenario feature is shown when at most this share of the run has it."""
FEATURES: Final = 4
"""At most this many features per family (the rarest in the run first)."""


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
    broken: tuple[str, ...] = ()  # every rule its record breaks, ``rule`` first (failed)
    masked: frozenset[str] = frozenset()  # could have failed, not judged: an earlier failure
    vacuous: frozenset[str] = frozenset()  # exercised only where nothing could break it: a
    # stage the runtime lacks (its empty stage's step), or a vector the adapter declined

    @property
    def breaks(self) -> tuple[str, ...]:
        """Every rule the vector breaks, the one it is cited under first (none if it passed)."""
        if self.passed:
            return ()
        lead = self.rule or PROTOCOL_RULE
        return (lead, *(r for r in self.broken if r != lead))


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
    broken: tuple[str, ...] = ()  # every rule each of its records breaks: one cause, one family

    def line(self) -> str:
        shared = ", ".join(self.features) or "no distinctive feature"
        n = len(self.ids)
        also = [r for r in self.broken if r != self.rule]
        breaks = f"; also breaks {', '.join(also)}" if also else ""
        return (
            f"[{self.rule}] {self.step}: {n:,} vector{'s' if n != 1 else ''} ({shared}{breaks}); "
            f"e.g. {self.example}"
        )


def scenario_of(item: Vector | TurnVector) -> dict[str, Any]:
    """What the report's coverage reads of ``item`` (:attr:`Report.scenarios`)."""
    return item.turn_data() if isinstance(item, TurnVector) else scenario_data(item.scenario)


@dataclass
class Report:
    revision: str
    implementation: str
    command: list[str]
    judgements: list[Judgement] = field(default_factory=list)
    seconds: float = 0.0
    restarts: int = 0
    jobs: int = 1  # adapter processes that ran at once, sharing the vectors (--jobs)
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
        """Vectors per declared deviations they deviate as: ``D13``, ``D13, pre-R44-error``."""
        found: collections.Counter[str] = collections.Counter()
        for j in self.judgements:
            if j.deviations:
                found[", ".join(j.deviations)] += 1
        return dict(found)

    def by_rule(self) -> dict[str, RuleTally]:
        """Per rule: the vectors it was kept on, and the failed vectors whose record breaks it
        (every rule a record breaks, not only the one it is cited under)."""
        tally: dict[str, RuleTally] = {}
        for j in self.judgements:
            if j.deviations:
                continue
            if j.passed:
                for r in j.rules - j.vacuous:
                    tally.setdefault(r, RuleTally()).passed += 1
            else:
                for r in j.breaks:
                    t = tally.setdefault(r, RuleTally())
                    t.failed += 1
                    if t.first_failure is None:
                        t.first_failure = j.id
        return dict(sorted(tally.items(), key=lambda kv: _rule_order(kv[0])))

    def states(self) -> dict[str, str]:
        """Every rule of the revision (and ``protocol`` if it failed): what this run shows of it
        (:data:`STATES`).  ``broken``: a record breaks it; ``kept``: a vector on which a check of
        it could have failed was judged by that check and kept it; ``masked``: vectors ran on
        which it could have failed, each failing first under another rule before it was
        judged; ``vacuous``: it was exercised only where nothing could break it (the empty step
        of a stage the runtime lacks, or vectors the adapter declined); ``none``: no vector of
        the run exercised it.  For call and turn vectors alike."""
        broken: set[str] = set()
        kept: set[str] = set()
        masked: set[str] = set()
        vacuous: set[str] = set()
        for j in self.judgements:
            if j.deviations:
                continue
            breaks = set(j.breaks)
            broken |= breaks
            judged = j.rules if j.passed else j.checked | j.consequence
            kept |= judged - breaks - j.masked - j.vacuous
            masked |= j.masked
            vacuous |= j.vacuous
        out = {}
        for rule in sorted({*self.titles, *broken}, key=_rule_order):
            if rule == PROTOCOL_RULE and rule not in broken:
                continue
            out[rule] = next(
                (state for state, found in zip(STATES, (broken, kept, masked, vacuous),
                                               strict=False) if rule in found),
                NOT_JUDGED,
            )  # fmt: skip
        return out

    def coverage(self) -> dict[str, tuple[str, str]]:
        """Every rule of the revision (and ``protocol`` if it failed): its status in this run --
        ``checked``, ``outcome`` (checked through the result only) or ``none`` -- and why,
        derived from what the judge's checks could have failed on
        (:func:`toolcancel.oracle.judge.rule_status`)."""
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
        """Failures grouped by cause -- the rule, the judging step and every rule the record
        breaks -- largest first, with the scenario features they share: thousands of failures
        of one mistake read as one line, and two mistakes never share one."""
        groups: dict[tuple[str, str, tuple[str, ...]], list[Judgement]] = {}
        for j in self.judgements:  # one cause a family: the rule, the step, every rule broken
            if not j.passed and not j.deviations:
                groups.setdefault((j.rule or PROTOCOL_RULE, j.step, j.breaks), []).append(j)
        share: collections.Counter[str] = collections.Counter()
        for data in self.scenarios.values():
            share.update(_features(data))
        total = max(1, len(self.scenarios))
        out = []
        for (rule, step, broken), js in groups.items():
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
                    broken,
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
                data["deviations"] = list(j.deviations)
            if j.passed:
                data["rules"] = sorted(j.rules, key=_rule_order)
            else:
                data |= {
                    "rule": j.rule or PROTOCOL_RULE,
                    "broken": list(j.breaks),
                    "step": j.step or "answer",
                    "expected": j.expected,
                    "observed": j.observed,
                    "explanation": j.explanation,
                }
            yield json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    def write_report(self, path: str | Path) -> None:
        """Write :meth:`verdict_lines` to ``path``, atomically
        (:func:`toolcancel.contract.fileio.write_text`: a failed write leaves no partial report)."""
        write_text(path, "".join(line + "\n" for line in self.verdict_lines()))
        self.report_path = str(path)

    def to_json(self) -> dict[str, Any]:
        tally = self.by_rule()
        coverage = self.coverage()
        states = self.states()
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
                    "state": states.get(r, NOT_JUDGED),
                    "broken_by": sum(
                        r in j.broken[1:] for j in self.judgements if not j.deviations
                    ),
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
                    "broken": list(f.broken),
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
                    "broken": list(j.breaks),
                    "step": j.step or "answer",
                    "expected": j.expected,
                    "observed": j.observed,
                    "explanation": j.explanation,
                }
                for j in self.judgements
                if not j.passed and not j.deviations
            ]
            data["deviated"] = [
                {"id": j.id, "deviations": list(j.deviations)}
                for j in self.judgements
                if j.deviations
            ]
        data |= {
            "restarts": self.restarts,
            "jobs": self.jobs,
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
