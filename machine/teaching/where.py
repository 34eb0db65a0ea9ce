"""``toolcancel where``: everything that concerns one rule, transition or outcome, read from the
code and the data -- never from a list kept by hand.

For a rule: its summary, the precedence rows, transitions, guards and outcomes that cite it, the
judge's checks registered under it (call, trace and turn), the mutants and spec mutants that
break it, the deviations that depart from it, the shipped vectors that end in an outcome it
decides, and every line of the tests and the prose that names it.  For a transition or an
outcome, the same kinds of places, by its id.  Changing a rule starts here
(docs/ENGINEERING.md, "Changing a rule").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ..contract.errors import ToolcancelError
from ..contract.loader import Contract

__all__ = ["PAGES", "Section", "WhereError", "where"]

PAGES = (
    "spec/CONTRACT.md", "spec/PRIMER.md", "spec/SCENARIOS.md", "spec/ORIGIN.md",
    "spec/PRECEDENCE.md", "spec/SPEC-MUTANTS.md", "spec/vectors/README.md", "README.md",
    "docs/ENGINEERING.md",
)
"""The prose searched for the subject's name (where present: a source checkout has them all)."""


class WhereError(ToolcancelError):
    """The subject is no rule id, transition id or outcome of the contract."""


@dataclass(frozen=True)
class Section:
    """One kind of place, and each place found (empty: none; the heading still shows)."""

    title: str
    lines: tuple[str, ...]


def _mentions(root: Path, patterns: tuple[str, ...], name: str) -> Iterator[str]:
    word = re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])")
    for pattern in patterns:
        for path in sorted(root.glob(pattern)):
            try:
                text = path.read_text("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            hits = [n for n, line in enumerate(text.splitlines(), 1) if word.search(line)]
            if hits:
                shown = ", ".join(map(str, hits[:12])) + (" ..." if len(hits) > 12 else "")
                yield f"{path.relative_to(root).as_posix()}: {len(hits)} line(s): {shown}"


def _anchor(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


_CHECK_WORDS: Final = {
    "record": "call check {}",
    "line": "trace check on {}",
    "step": "step check on {}",
    "result": "result check on {}",
    "turn": "turn check",
}
"""How ``where`` names a check of each vantage of the judge's registry."""


def _rule_sections(contract: Contract, rule: str) -> Iterator[Section]:
    from ..oracle.judge import VANTAGES, by_rule
    from ..selfcheck import mutants
    from ..selfcheck.specmutants import perturbations

    r = contract.rule(rule)
    assert r is not None
    yield Section(f"{rule} — {r.title}", (r.summary, "revisions: " + ", ".join(
        x for x in contract.revisions if x in r.revisions)))
    yield Section("precedence rows", tuple(
        f"{name} row {p.row}: {p.situation} -> {p.outcome}"
        for name in contract.revisions for p in contract.revision(name).precedence
        if rule in p.rules or rule == contract.precedence_rule))
    yield Section("transitions", tuple(
        f"{t.id} ({'/'.join(t.events)}{', ' + t.outcome if t.outcome else ''})"
        + ("" if len(t.revisions) == len(contract.revisions)
           else f" [{', '.join(sorted(t.revisions))}]")
        for t in contract.transitions if rule in t.rules))
    yield Section("guards and outcomes", tuple(
        [f"guard {g.name}: {g.doc}" for g in contract.guards if g.rule == rule]
        + [f"outcome {o.name}" for o in contract.outcomes if o.rule == rule]))
    yield Section("judge checks", tuple(
        f"{_CHECK_WORDS[vantage].format(c.on)}: {c.judge.__module__}.{c.judge.__qualname__}"
        for vantage in VANTAGES for c in by_rule(vantage).get(rule, ())))
    every = (*mutants.MUTANTS, *mutants.TURN_MUTANTS, *mutants.OBSERVATION_MUTANTS)
    yield Section("mutants (verify --mutants)", tuple(
        f"{m.name}: {m.what}" for m in every if m.rule == rule))
    yield Section("spec mutants (changed rows of contract.toml that break it)", tuple(
        f"{p.revision}: {p.name}" for name in contract.revisions
        for p in perturbations(name, contract) if rule in p.rules(contract)))
    yield Section("deviations departing from it", tuple(
        f"{d.name}: {d.source}" for d in contract.deviations if rule in d.departs_from))
    decided = {o.name for o in contract.outcomes if o.rule == rule} | {
        t.outcome for t in contract.transitions if rule in t.rules and t.outcome}
    yield Section("shipped vectors ending in an outcome it decides",
                  tuple(_vectors(contract, decided)))


def _vectors(contract: Contract, outcomes: set[str]) -> Iterator[str]:
    from .explain import shipped_vectors  # read once per file version

    for name in contract.revisions:
        ids = [str(v["id"]) for v in shipped_vectors(name) if v["expected"]["outcome"] in outcomes]
        if ids:
            yield f"{name}: {len(ids):,} ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''})"


def where(contract: Contract, subject: str, root: Path | None = None) -> list[Section]:
    """Every place that concerns ``subject`` (a rule id, a transition id or an outcome name);
    ``root``: a source checkout whose tests and prose are searched too."""
    rules = {r.id for r in contract.rules}
    transitions = {t.id: t for t in contract.transitions}
    outcomes = {o.name for o in contract.outcomes}
    if subject in rules:
        sections = list(_rule_sections(contract, subject))
        heading = f"### {subject} — {sections[0].title.split(' — ', 1)[1]}"
        anchor = [f"spec/CONTRACT.md#{_anchor(heading[4:])}"]
    elif subject in transitions:
        t = transitions[subject]
        sections = [
            Section(f"transition {t.id}", (
                f"{', '.join(t.sources)} --{'/'.join(t.events)}--> {t.dest or '(same state)'}",
                f"guards: {t.guard_text or '(none)'}; outcome: {t.outcome or '(kept)'}",
                f"rules: {', '.join(t.rules) or '(none)'}; precedence row: {t.precedence}",
                "revisions: " + ", ".join(x for x in contract.revisions if x in t.revisions),
                *(["alternative (a MAY point the reference does not take)"] if t.alternative
                  else []),
            )),
            Section("spec mutants that change it", tuple(_perturbed(contract, t.index))),
        ]
        anchor = []
    elif subject in outcomes:
        o = contract.outcome(subject)
        sections = [
            Section(f"outcome {subject}", (f"rule: {o.rule}",)),
            Section("transitions that set it", tuple(
                t.id for t in contract.transitions if t.outcome == subject)),
            Section("precedence rows", tuple(
                f"{name} row {p.row}: {p.situation}" for name in contract.revisions
                for p in contract.revision(name).precedence
                if p.outcome.split(" ")[0] == subject)),
            Section("shipped vectors ending in it", tuple(_vectors(contract, {subject}))),
        ]
        anchor = []
    else:
        raise WhereError(f"{subject!r} is no rule id (R1-R{len(rules)}), transition id "
                         "or outcome of spec/contract.toml")
    if root is not None:
        sections.append(Section("tests naming it", tuple(
            _mentions(root, ("tests/*.py", "model_tests/*.py"), subject))))
        sections.append(Section("prose naming it", (*anchor, *_mentions(root, PAGES, subject))))
    return sections


def _perturbed(contract: Contract, index: int) -> Iterator[str]:
    from ..selfcheck.specmutants import perturbations

    for name in contract.revisions:
        for p in perturbations(name, contract):
            if index in p.touches():
                yield f"{name}: {p.name}"
