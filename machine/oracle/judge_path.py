"""The path: a record's trace replayed through the contract's machine, the abort where the
environment saw it.

A registry writes ``caller_abort`` where it *noticed* the caller's abort (at its next step); a
registry that skips a recheck notices it late and its trace alone is a path the contract allows
a later abort.  An environment that aborted the caller itself knows when it did (its
``caller_aborted`` line: after ``steps`` transitions), so the record is judged with the abort
put back there: the trace checker (:mod:`toolcancel.oracle.checker`) then replays the contract
events the registry took after it, and the first one no allowed state takes names the rule --
the checkpoint that had to see the abort, or the transition's own.

A call that published no result because its registry's own machine refused a step is judged by
:func:`refused_rule`: the rule of the guard every way of taking that step needs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from ..contract.errors import ContractViolation
from ..contract.loader import RevisionContract
from .checker import Checker
from .judge import ENTRY_RULES
from .judge_record import Failure, Record

STAGE_ORDER: Final = "R10"
"""The stage order: a step no transition takes in that state at all."""
PRECEDENCE: Final = "R39"
"""The outcome precedence table: decides where a transition cites one of its rows."""


def path_failure(record: Record) -> Failure | None:
    """Where the record's trace, with the environment's abort, leaves every path the contract
    allows (None: it stays on one, to publication).  Only a record with the registry's trace
    (``call_entry``) is judged."""
    if not record.trace:
        return None
    start = record.at("call_entry")[0]
    aborted = record.of("caller_aborted")
    lines = record.lines if start == 0 else record.lines[start:]
    verdict = _checker(record.revision).check_record(
        lines, aborted[0]["steps"] if aborted else None
    )
    if verdict.conforming:
        return None
    at = start + (verdict.line or 1) - 1
    return Failure(
        verdict.rule or STAGE_ORDER,
        min(at, record.end()),
        "path",
        f"trace event {verdict.event_index} ({verdict.seen}): {verdict.explanation}",
        "a path the contract allows, to publication",
        verdict.seen,
    )


def path_could_fail(record: Record) -> frozenset[str]:
    """The rules :func:`path_failure` could have failed on ``record`` besides its transitions'
    (:func:`transition_rules`): the stage order, and how the caller's signal at entry is
    treated."""
    if not record.trace:
        return frozenset()
    return _ENTRY_COULD_FAIL[record.of("call_entry")[0]["caller"]]


_ENTRY_COULD_FAIL: Final = {
    caller: frozenset({STAGE_ORDER, rule}) for caller, rule in ENTRY_RULES.items()
}


def transition_rules(table: RevisionContract, transitions: Iterable[int]) -> frozenset[str]:
    """The rules the replay could fail on runs that took ``transitions`` (indices of
    ``table``'s): each one's own, and the precedence table's where one cites a row."""
    rows = {t.index: t for t in table.transitions}
    out: set[str] = set()
    for i in transitions:
        t = rows[i]
        out.update(t.rules)
        if t.precedence is not None:
            out.add(PRECEDENCE)
    return frozenset(out)


def refused_rule(table: RevisionContract, refused: ContractViolation) -> str:
    """The rule a registry breaks when the contract's machine refuses its step.  The event is one
    the state offers only under guards, so the step came without a guard that every way of taking
    it needs: that guard's rule (the cursor that hands out the base dispatch while a listener is
    left breaks ``listeners_done``).  Without such a guard, the first rule of the first way; an
    event no transition takes there at all breaks the stage order."""
    ways = [
        t for t in table.transitions if refused.state in t.sources and refused.event in t.events
    ]
    if not ways:
        return STAGE_ORDER
    common = set(ways[0].guards).intersection(*(t.guards for t in ways[1:]))
    rules = {g.name: g.rule for g in table.contract.guards}
    needed = [rules[name] for name, holds in ways[0].guards if (name, holds) in common]
    return needed[0] if needed else (ways[0].rules or (STAGE_ORDER,))[0]


_CHECKERS: dict[str, Checker] = {}


def _checker(revision: str) -> Checker:
    found = _CHECKERS.get(revision)
    if found is None:
        found = _CHECKERS[revision] = Checker(revision)
    return found
