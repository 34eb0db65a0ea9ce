"""The path: a record's trace replayed through the contract's machine, the abort where the
environment saw it.

A registry writes ``caller_abort`` where it *noticed* the caller's abort (at its next step); a
registry that skips a recheck notices it late and its trace alone is a path the contract allows
a later abort.  An environment that aborted the caller itself knows when it did (its
``caller_aborted`` line: after ``steps`` transitions), so the record is judged with the abort
put back there: the trace checker (:mod:`toolcancel.oracle.judge.checker`) then replays the contract
events the registry took after it, and the first one no allowed state takes names the rule --
the checkpoint that had to see the abort, or the transition's own.

A call that published no result because its registry's own machine refused a step is judged by
:func:`refused_rule`: the rule of the guard every way of taking that step needs.
"""

from __future__ import annotations

import functools
import marshal
from collections.abc import Iterable
from typing import Any, Final, NamedTuple

from ...contract.errors import ContractViolation
from ...contract.loader import RevisionContract
from ...contract.trace import ENVIRONMENT
from .calls import post_runs
from .checker import Checker
from .lines import published_once, result_envelope
from .record import Failure, Record
from .registry import rule_of

STAGE_ORDER: Final = rule_of(post_runs)
"""The stage order: a step no transition takes in that state at all."""


class PathFacts(NamedTuple):
    """What the replay of a record's path found: where it left every allowed path (None: it did
    not), the rules it could have failed besides its transitions', and the outcomes the possible
    states held when post-execute's stage began and when the result was published."""

    failure: Failure | None
    rules: frozenset[str]
    entering_post: frozenset[str | None]
    published: frozenset[str | None]


_NO_PATH: Final = PathFacts(None, frozenset(), frozenset(), frozenset())


def path_facts(record: Record) -> PathFacts:
    """The replay of ``record``'s trace through the contract's machine, the caller's abort where
    the environment saw it (worked out once per record).  Only a record with the registry's trace
    (``call_entry``) is replayed."""
    found: PathFacts | None = record.derived.get("path")
    if found is None:
        found = record.derived["path"] = _replay(record)
    return found


def unreplayed(record: Record) -> Record:
    """``record``, its path never replayed: the checks that read what the contract's machine
    makes of it (:func:`path_facts`) decide nothing.  For a registry driven by another
    transition table than the contract's (``verify --spec-mutants``: the checks that read no
    table judge it)."""
    record.derived["path"] = _NO_PATH
    return record


def path_judgement(record: Record) -> tuple[Failure | None, frozenset[str]]:
    """Where the record's trace, with the environment's abort, leaves every path the contract
    allows (None: it stays on one, to publication), and the rules that replay could have failed
    besides its transitions' (:func:`transition_rules`): the stage order, how the caller's
    signal at entry is treated, what every result and notification is checked on, and the
    result checks asked of the outcome it had."""
    facts = path_facts(record)
    return facts.failure, facts.rules


def _replay(record: Record) -> PathFacts:
    if not record.trace:
        return _NO_PATH
    start = record.at("call_entry")[0]
    aborted = record.of("caller_aborted")
    lines = record.lines if start == 0 else record.lines[start:]
    steps = aborted[0]["steps"] if aborted else None
    key: bytes | None
    try:
        key = _key(lines, steps)
    except ValueError:  # some value is no plain data: replayed every time
        found, key = None, None
    else:
        found = _SEEN.get(key)  # the bytes' one hash
    if found is not None:
        return found
    verdict, asked, (post, published) = _checker(record.revision).check_record(lines, steps)
    rules = _entry_could_fail(record.revision)[lines[0]["caller"]] | asked
    if verdict.conforming:
        found = PathFacts(None, rules, post, published)
        if key is not None:
            if len(_SEEN) >= _SEEN_MAX:
                _SEEN.clear()
            _SEEN[key] = found
        return found
    at = start + (verdict.line or 1) - 1
    failure = Failure(
        verdict.rule or STAGE_ORDER,
        min(at, record.end()),
        "path",
        f"trace event {verdict.event_index} ({verdict.seen}): {verdict.explanation}",
        "a path the contract allows, to publication",
        verdict.seen,
    )
    return PathFacts(failure, rules, post, published)


_SEEN: dict[bytes, PathFacts] = {}
"""Replays that stayed on an allowed path, by what the checker read of them: a model check runs
hundreds of thousands of calls along a few thousand distinct traces."""
_SEEN_MAX: Final = 50_000


def _key(lines: list[Any], steps: int | None) -> bytes:
    """Everything the checker reads of a record: its trace lines' values and where the
    environment aborted the caller.  The lines as ``marshal`` bytes (format 2, which writes
    each value as it is, never as a reference to an earlier one): equal bytes are equal data,
    distinguished by type (``1``, ``1.0`` and ``True`` differ), and hashed once.  Verify builds
    one per schedule; written in C, it costs about two thirds of a key of tuples built in a
    comprehension.  A value that is no plain data raises ``ValueError``."""
    env = ENVIRONMENT
    return marshal.dumps((steps, [line for line in lines if line["event"] not in env]), 2)


@functools.cache
def _entry_could_fail(revision: str) -> dict[str, frozenset[str]]:
    """Per caller at entry: the rules every replayed record of ``revision`` could fail (the
    stage order, the entry's rule -- the contract's ``entry_rules`` -- each result's envelope
    and its single publication)."""
    every = {STAGE_ORDER, rule_of(result_envelope), rule_of(published_once)}
    contract = _checker(revision).table.contract
    return {
        caller: frozenset({contract.entry_rule(caller, revision), *every})
        for caller in contract.entry_rules
    }


def transition_rules(table: RevisionContract, transitions: Iterable[int]) -> frozenset[str]:
    """The rules the replay could fail on runs that took ``transitions`` (indices of
    ``table``'s): each one's own, and the precedence table's (the contract's
    ``precedence_rule``) where one cites a row."""
    rows = {t.index: t for t in table.transitions}
    out: set[str] = set()
    for i in transitions:
        t = rows[i]
        out.update(t.rules)
        if t.precedence is not None:
            out.add(table.contract.precedence_rule)
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
