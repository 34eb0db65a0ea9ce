"""Mutation testing of the contract itself: ``toolcancel verify --spec-mutants``.

The self-consistency checks (the path replay, the diagrams, the vectors) are all derived from
``contract.toml``, so they cannot disagree with it: a wrong row would be reproduced everywhere.
This module perturbs the transition table one row at a time -- delete a transition, change its
outcome, drop one of its guards, swap two candidates for the same (state, event) -- drives the
real registry with the perturbed table (``ToolRegistry(contract=perturbed)``) through the whole
bounded space, and judges every run with the verifier's **table-independent** checks only: the
checks on the environment's own record, written from the RFC and the rules (R27, R28, R21, R22,
R23, R29, R31, R34, the result shapes, ... -- :func:`toolcancel.selfcheck.verifier.check` with
``replay=False``).  The path replay is left out: it reads the same perturbed table.

A perturbation is

* **killed** when a table-independent check finds a violation in some run;
* **stopped** when the perturbed table has no applying candidate for an event the registry
  offers, so a call fails (``ContractViolation``), or sends the registry where its own code
  asserts it cannot be: the implementation notices, not an RFC-derived check -- reported apart,
  and counted as noticed;
* **unreached** when it touches only transitions no run takes within the bound (a wrapper's
  transitions at ``--max-wrappers 0``): it says nothing either way;
* **surviving** otherwise: the table can be changed there and no independent check would know.
  Each survivor is either an independent check still missing or a row whose change is equivalent
  at the registry boundary; ``spec/SPEC-MUTANTS.md`` accounts for every one.

The turn batches (R9, R36-R38) build their own registries and are not rerun per perturbation.
"""

from __future__ import annotations

import itertools
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from importlib import resources
from typing import Any, Final

from ..contract.errors import ContractViolation
from ..contract.loader import Contract, RevisionContract, Transition, load_contract
from ..runtime.registry import ToolRegistry
from .space import MAX_WRAPPERS, expand
from .verifier import NO_RESULT, Tally, plan, run_batch

KINDS = ("delete", "outcome", "guard", "swap")


@dataclass(frozen=True)
class Perturbation:
    """One change to the transition table of one revision."""

    revision: str
    kind: str  # one of KINDS
    index: int  # the transition changed (for a swap: the earlier of the two)
    other: int | None = None  # swap: the later transition
    guard: str | None = None  # guard: the guard dropped
    outcome: str | None = None  # outcome: the new outcome (None: the result is kept)

    @property
    def name(self) -> str:
        """The change in transition ids (the contract's, never positions), e.g. ``c2_aborted
        without fused_aborted``."""
        rows = _by_index(load_contract().revision(self.revision))
        changed = rows[self.index].id
        if self.kind == "swap":
            assert self.other is not None
            return f"swap {changed} {rows[self.other].id}"
        if self.kind == "guard":
            return f"{changed} without {self.guard}"
        if self.kind == "outcome":
            return f"{changed} outcome {self.outcome or 'kept'}"
        return f"delete {changed}"

    def touches(self) -> tuple[int, ...]:
        return (self.index,) if self.other is None else (self.index, self.other)

    def rules(self, contract: Contract | None = None) -> tuple[str, ...]:
        """The rules this change breaks, as the contract data declares them: the changed row's
        (for a swap, both rows'); for a changed outcome, also the rule of the outcome the row
        gave; for a dropped guard, the guard's own first, and then the rules of the rows the
        unguarded one now takes the event from.  A failure it causes must
        cite one of them first (tests/test_spec_mutants.py)."""
        c = contract or load_contract()
        table = c.revision(self.revision)
        rows = _by_index(table)
        found: list[str] = []
        if self.guard is not None:
            found += [g.rule for g in c.guards if g.name == self.guard]
        for i in self.touches():
            found += rows[i].rules
        taken = rows[self.index].outcome
        if self.kind == "outcome" and taken is not None:
            found.append(c.outcome(taken).rule)  # the outcome the row no longer gives
        if self.guard is not None:
            for candidates in table.candidates.values():
                if any(t.index == self.index for t in candidates):
                    found += [r for t in candidates if not t.alternative for r in t.rules]
        return tuple(dict.fromkeys(found))

    def describe(self, table: RevisionContract) -> str:
        """One line: what changed, in the table's own words."""
        t = _by_index(table)[self.index]
        row = _row(t)
        if self.kind == "delete":
            return f"delete {t.id} ({row})"
        if self.kind == "outcome":
            return f"{t.id} ({row}) gives {self.outcome or 'no new outcome (keeps the result)'}"
        if self.kind == "guard":
            return f"{t.id} ({row}) without its guard {self.guard}"
        assert self.other is not None
        u = _by_index(table)[self.other]
        return f"try {u.id} ({_row(u)}) before {t.id} ({row})"

    def apply(self, contract: Contract) -> Contract:
        """The contract with this change made (transition indices, their identity, kept)."""
        rows = list(contract.transitions)
        at = next(i for i, t in enumerate(rows) if t.index == self.index)
        t = rows[at]
        if self.kind == "delete":
            del rows[at]
        elif self.kind == "outcome":
            rows[at] = replace(t, outcome=self.outcome)
        elif self.kind == "guard":
            rows[at] = replace(t, guards=tuple(g for g in t.guards if g[0] != self.guard))
        else:
            to = next(i for i, u in enumerate(rows) if u.index == self.other)
            rows[at], rows[to] = rows[to], rows[at]
        # A row shared by both revisions changes for both; only ``self.revision`` is judged.
        return replace(contract, transitions=tuple(rows), _by_revision={})


def _by_index(table: RevisionContract) -> dict[int, Transition]:
    return {t.index: t for t in table.transitions}


def _row(t: Transition) -> str:
    guard = f" if {t.guard_text}" if t.guards else ""
    dest = t.dest or "same state"
    outcome = f", outcome {t.outcome}" if t.outcome else ""
    return f"{'|'.join(t.events)} in {'|'.join(t.sources)}{guard} -> {dest}{outcome}"


def perturbations(revision: str = "seed", contract: Contract | None = None) -> list[Perturbation]:
    """Every single-row perturbation of ``revision``'s table, in file order.

    Alternatives (MAY rows the reference never picks) are not perturbed: the registry never takes
    them, so any change to them is equivalent by construction.  An outcome is changed two ways:
    dropped (the call keeps its result), and flipped -- a cancellation outcome to ``denied``, any
    other to ``aborted``."""
    c = contract or load_contract()
    table = c.revision(revision)
    out: list[Perturbation] = []
    rows = [t for t in table.transitions if not t.alternative]
    for t in rows:
        out.append(Perturbation(revision, "delete", t.index))
        if t.outcome is not None:
            flipped = "denied" if c.outcome(t.outcome).cancellation else "aborted"
            out.append(Perturbation(revision, "outcome", t.index, outcome=None))
            out.append(Perturbation(revision, "outcome", t.index, outcome=flipped))
        for name, _ in t.guards:
            out.append(Perturbation(revision, "guard", t.index, guard=name))
    pairs: set[tuple[int, int]] = set()
    for candidates in table.candidates.values():
        chosen = [t.index for t in candidates if not t.alternative]
        pairs.update(itertools.pairwise(chosen))
    out += [Perturbation(revision, "swap", a, other=b) for a, b in sorted(pairs)]
    return out


def row_flips(rule: str, contract: Contract | None = None) -> list[Perturbation]:
    """The perturbations that flip what a transition carrying ``rule`` decides, both revisions,
    in file order: the row's outcome flipped where it gives one (:func:`perturbations`' flip),
    and the row deleted.  A rule no (non-alternative) row carries has none: the table cannot
    change it, and its tests are held by the record checks and the rule suites alone."""
    c = contract or load_contract()
    found: list[Perturbation] = []
    for revision in c.revisions:
        for p in perturbations(revision, c):
            row = _by_index(c.revision(revision))[p.index]
            flips = (p.kind == "outcome" and p.outcome is not None) or p.kind == "delete"
            if flips and rule in row.rules and p not in found:
                found.append(p)
    return found


def _specific(c: Contract, p: Perturbation) -> tuple[bool, bool, int]:
    row = _by_index(c.revision(p.revision))[p.index]
    return p.kind != "outcome", row.outcome is None, len(row.rules)


EXPLAINED: Final = "SPEC-MUTANTS.md"
"""Where the survivors of ``--max-wrappers 0`` are explained, one table row each (the package's
``spec`` folder)."""

_CELL = re.compile(r"(?:\\\||[^|])+")


def explained_survivors(text: str | None = None) -> dict[tuple[str, str], str]:
    """The survivors :data:`EXPLAINED` accounts for: ``(revision, what)`` (what: the
    perturbation's :meth:`Perturbation.describe`) to the group whose paragraph explains it."""
    if text is None:
        text = resources.files("toolcancel.spec").joinpath(EXPLAINED).read_text("utf-8")
    found: dict[tuple[str, str], str] = {}
    for line in text.splitlines():
        cells = [c.strip().replace("\\|", "|") for c in _CELL.findall(line.strip().strip("|"))]
        if line.startswith("| ") and len(cells) == 3 and cells[1] in ("seed", "revised"):
            found[(cells[1], cells[2])] = cells[0]
    return found


def row_flip(rule: str, contract: Contract | None = None,
             explained: Mapping[tuple[str, str], str] | None = None) -> Perturbation | None:
    """The mutant a test naming ``rule`` must fail (tests/test_rule_rows.py): of
    :func:`row_flips`, an outcome flipped before a row deleted (all of R14's flips are
    labels the registry does not read), on a row carrying the fewest
    rules (the row most the rule's own), the first that is not an explained survivor (one
    equivalent at the registry boundary cannot fail a test that drives the registry)."""
    c = contract or load_contract()
    known = explained_survivors() if explained is None else explained
    for p in sorted(row_flips(rule, c), key=lambda p: _specific(c, p)):
        if (p.revision, p.describe(c.revision(p.revision))) not in known:
            return p
    return None


@dataclass
class Verdict:
    perturbation: Perturbation
    status: str  # killed | stopped | unreached | surviving | crashed
    rule: str | None = None
    explanation: str = ""
    schedules: int = 0
    seconds: float = 0.0


def judge(p: Perturbation, max_wrappers: int = 1, contract: Contract | None = None) -> Verdict:
    """Run the bounded space against the registry driven by ``p``'s table, table-independent
    checks only, stopping at the first violation.  A perturbed table makes signal listeners fail
    by the thousand (logged by design, P6): the log is silenced meanwhile."""
    logging.disable(logging.CRITICAL)
    try:
        return _judge(p, max_wrappers, contract)
    finally:
        logging.disable(logging.NOTSET)


_REFUSED = ("the registry's machine refused", "ContractViolation", "raised AssertionError")
"""How a call the registry itself refused to take further reads: its machine found no applying
candidate (a ContractViolation), or its code an impossible state (an assertion)."""


def _judge(p: Perturbation, max_wrappers: int, contract: Contract | None) -> Verdict:
    start = time.perf_counter()
    c = contract or load_contract()
    perturbed = p.apply(c)
    factory = partial(ToolRegistry, contract=perturbed)
    taken: set[int] = set()
    total = Tally()
    for job in plan(p.revision, max_wrappers, turns=False):
        try:
            tally = run_batch([s for g in job.groups for s in expand(g)], factory, replay=False)
        except ContractViolation as exc:  # raised where the harness calls the registry itself
            v = Verdict(p, "stopped", NO_RESULT, f"the registry raised {exc!r}", total.schedules)
            v.seconds = time.perf_counter() - start
            return v
        except Exception as exc:  # the harness or a check could not cope: not a finding
            v = Verdict(p, "crashed", None, f"{type(exc).__name__}: {exc}", total.schedules)
            v.seconds = time.perf_counter() - start
            return v
        total.merge(tally)
        taken |= tally.transitions
        if tally.violations:
            break
    v = Verdict(p, "surviving", schedules=total.schedules)
    first = total.violations[0] if total.violations else None
    if first is not None:
        stopped = first.rule == NO_RESULT and any(w in first.explanation for w in _REFUSED)
        v.status = "stopped" if stopped else "killed"
        v.rule, v.explanation = first.rule, first.explanation
    elif not (set(p.touches()) & taken) and p.kind != "delete":
        v.status = "unreached"
    elif p.kind == "delete" and not _reached_unperturbed(p, max_wrappers):
        v.status = "unreached"
    v.seconds = time.perf_counter() - start
    return v


_REACHED: dict[tuple[str, int], frozenset[int]] = {}


def _reached_unperturbed(p: Perturbation, max_wrappers: int) -> bool:
    """Whether the intact registry takes the deleted transition within the bound."""
    key = (p.revision, max_wrappers)
    if key not in _REACHED:
        taken: set[int] = set()
        for job in plan(p.revision, max_wrappers, turns=False):
            taken |= run_batch([s for g in job.groups for s in expand(g)]).transitions
        _REACHED[key] = frozenset(taken)
    return p.index in _REACHED[key]


def _judge_task(task: tuple[Perturbation, int]) -> Verdict:
    return judge(*task)


def run_all(
    revisions: Sequence[str] = ("seed", "revised"),
    *,
    max_wrappers: int = MAX_WRAPPERS,
    workers: int = 1,
    only: Callable[[Perturbation], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Verdict]:
    """Judge every perturbation of ``revisions`` (those ``only`` keeps), ``workers`` processes
    side by side (one perturbation each at a time), in the order of :func:`perturbations`."""
    todo = [p for r in revisions for p in perturbations(r) if only is None or only(p)]
    tasks = [(p, max_wrappers) for p in todo]
    verdicts: dict[Perturbation, Verdict] = {}
    results: Iterator[Verdict]
    if workers <= 1:
        results = map(_judge_task, tasks)
        for i, v in enumerate(results, 1):
            verdicts[v.perturbation] = v
            if progress:
                progress(i, len(tasks))
    else:
        from .workers import pool as worker_pool

        with worker_pool(workers) as pool:
            for i, v in enumerate(pool.imap_unordered(_judge_task, tasks, chunksize=1), 1):
                verdicts[v.perturbation] = v
                if progress:
                    progress(i, len(tasks))
    return [verdicts[p] for p in todo]


@dataclass
class Summary:
    verdicts: list[Verdict]
    seconds: float
    max_wrappers: int
    counts: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        revisions = {v.perturbation.revision for v in self.verdicts}
        tables = {r: load_contract().revision(r) for r in revisions}
        return {
            "max_wrappers": self.max_wrappers,
            "seconds": round(self.seconds, 1),
            "total": len(self.verdicts),
            "counts": self.counts,
            "killed_under_a_declared_rule": sum(
                v.status == "killed" and v.rule in v.perturbation.rules() for v in self.verdicts
            ),
            "perturbations": [
                {
                    "revision": v.perturbation.revision,
                    "name": v.perturbation.name,
                    "what": v.perturbation.describe(tables[v.perturbation.revision]),
                    "status": v.status,
                    "rule": v.rule,
                    "declared": list(v.perturbation.rules()),
                    "explanation": v.explanation,
                    "schedules": v.schedules,
                }
                for v in self.verdicts
            ],
        }


def unexplained(summary: Summary) -> tuple[list[str], list[str]]:
    """The survivors :data:`EXPLAINED` does not account for, and (at bound 0, the table's, for
    each revision judged) the perturbations it explains that no longer survive: both must be
    empty -- a survivor is killed or explained, and an explanation is of a survivor."""
    known = explained_survivors()
    revisions = {v.perturbation.revision for v in summary.verdicts}
    tables = {r: load_contract().revision(r) for r in revisions}
    surviving = {
        (v.perturbation.revision, v.perturbation.describe(tables[v.perturbation.revision]))
        for v in summary.verdicts
        if v.status == "surviving"
    }
    missing = [f"{r} {what}" for r, what in sorted(surviving - known.keys())]
    stale: list[str] = []
    if summary.max_wrappers == 0:
        stale = [f"{r} {what}" for r, what in sorted(known.keys() - surviving) if r in revisions]
    return missing, stale


def summarize(verdicts: list[Verdict], seconds: float, max_wrappers: int) -> Summary:
    counts = {k: sum(v.status == k for v in verdicts) for k in
              ("killed", "stopped", "unreached", "surviving", "crashed")}
    return Summary(verdicts, seconds, max_wrappers, counts)


__all__ = [
    "Perturbation",
    "Summary",
    "Verdict",
    "explained_survivors",
    "judge",
    "perturbations",
    "row_flip",
    "row_flips",
    "run_all",
    "summarize",
    "unexplained",
]
