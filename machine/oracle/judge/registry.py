"""The one check registry: every check of the judge, whatever it looks at, as one :class:`Check`.

A rule's observable meaning is a function registered once, with :func:`check`, under the rule id
it decides and its **vantage** -- what the function is handed and who asks it:

=========  ======================================================  ===========================
vantage    the function reads                                      asked by
=========  ======================================================  ===========================
record     a call's record, and the vector or setup (``Want``)     verify's harness, conform,
                                                                   ``check``'s environment
line       one call-level line of a trace, against the checker's   the trace checker
           ledger (``on``: the line's event; ``end``: the end)
step       one step of the machine in one state the call may be    the trace checker's
           in (``on``: the kind of step; ``result``: the result    automaton
           line's shape, :mod:`.results`)
result     a result, or post-execute's input, that differs from    conform's attribution
           the vector's (``on``: ``result`` or ``post``)            (:mod:`.attribution`)
turn       a turn of the scheduler                                 verify's turn runner,
                                                                   conform's turn vectors
=========  ======================================================  ===========================

The record checks of the pre-policy stage (``on``: ``pre_stage``, :mod:`.stage`) and of a
registration probe (``on``: ``registration``) are record checks: they read the record with the
call's setup.

What a check says besides its function is data on it: the events it reads (``reads``), the
conformance levels at which it can fail (``levels``), its antecedent (``when``: a predicate and
the words coverage prints), whether it needs the vector or the setup, the lines a call could have
shown instead (``allowed``, a line check), whether it reads a turn log's pairs (``paired``).
Coverage is derived from these, never kept by hand; attribution is the order and antecedents of
the ``result`` checks.

Invariants: checks register at import, in the order the check modules register (which is the
order checks are asked and ties are broken); each vantage's runner reads its own index
(:func:`on`, :func:`asked`), so dispatch costs what it did when each vantage kept its own table.
Every registration and removal (:func:`unregister`, a test's planted check) bumps
:func:`generation`, which keys every cache of the registry's contents: a removal followed by
another registration leaves the size as it was, never the generation.
A check registered under :data:`CONTRACT` (a step check) cites the rule the contract's data gives
the step concerned, so no rule id is restated for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

if TYPE_CHECKING:  # the record's types, for the record checks' methods: no import back
    from .record import Record, Want

RECORD: Final = "record"
LINE: Final = "line"
STEP: Final = "step"
RESULT: Final = "result"
TURN: Final = "turn"
VANTAGES: Final = (RECORD, LINE, STEP, RESULT, TURN)
"""The vantages a check takes, in the order of this module's table."""
LEVELS: Final = ("trace", "outcome")
BOTH: Final = frozenset(LEVELS)
CONTRACT: Final = "contract"
"""The rule of a step check that cites the rule the contract's data gives the step."""

Antecedent = Callable[..., bool]
"""Whether a check can fail at all on what it is handed (its vantage's arguments)."""
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Check:
    """One rule's observable meaning, seen from one vantage."""

    rule: str
    vantage: str
    on: str
    """What it judges within its vantage: a record check's step (the name its failure carries),
    a line check's event, a step check's kind of step, a result check's ``result`` or ``post``,
    a turn check's ``turn``."""
    judge: Callable[..., Any]
    reads: frozenset[str] = frozenset()  # record events it needs to decide anything
    levels: frozenset[str] = BOTH  # conformance levels at which it can fail
    antecedent: Antecedent | None = None  # None: it can fail wherever it is asked
    when: str = ""  # the antecedent in words
    needs_vector: bool = False  # it compares with what the contract allows (a Want)
    outcome: bool = False  # ... and what it compares is part of the outcome, like the result
    needs_setup: bool = False
    """It reads the call's setup (the scenario) and judges a run no vector lists: given a vector,
    the comparison with its expectation (the contract's own replay of that setup) judges the
    same observations, citing the decision that made them, so the check is not asked."""
    allowed: Callable[..., list[str]] | None = None  # a line check: what the call could have done
    paired: bool = False  # a turn check: it reads the log's pairs (asked only when it has one)

    @property
    def phase(self) -> str:
        """When a record check is asked: ``record`` (decided by the record alone), ``outcome``
        (with the result: what the call decided) or ``vector`` (other differences from it)."""
        if not self.needs_vector:
            return "record"
        return "outcome" if self.outcome else "vector"

    def answerable(self, want: Want | None) -> bool:
        """Whether ``want`` gives what a record check compares with: a vector, or the setup."""
        if self.needs_vector:
            return want is not None and want.expectation is not None
        if self.needs_setup:
            return want is not None and want.expectation is None
        return True

    def holds(self, *args: Any) -> bool:
        """Whether its antecedent holds on what its vantage hands it."""
        return self.antecedent is None or self.antecedent(*args)

    def could_fail(self, record: Record, want: Want | None, level: str) -> bool:
        """Whether this record check could have failed on ``record``: its level, its events, the
        vector it compares with, and its antecedent."""
        if level not in self.levels or not self.answerable(want):
            return False
        return all(record.has(e) for e in self.reads) and self.holds(record, want)


CHECKS: Final[list[Check]] = []
"""The registry: every check, in registration order."""
_RULE_OF: Final[dict[Callable[..., Any], str]] = {}
"""A registered function -> the rule of its first check (:func:`rule_of`)."""
_BY_RULE: Final[dict[str, dict[str, list[Check]]]] = {v: {} for v in VANTAGES}
"""Per vantage: rule id -> its checks, rules in the order their first check registered."""
_ON: Final[dict[str, dict[str, list[Check]]]] = {v: {} for v in VANTAGES}
"""Per vantage: what a check judges (:attr:`Check.on`) -> its checks, in registration order."""


def check(
    rule: str,
    vantage: str,
    on: str,
    *,
    reads: Sequence[str] = (),
    levels: frozenset[str] = BOTH,
    when: tuple[Antecedent, str] | None = None,
    needs_vector: bool = False,
    outcome: bool = False,
    needs_setup: bool = False,
    allowed: Callable[..., list[str]] | None = None,
    paired: bool = False,
) -> Callable[[F], F]:
    """Register the decorated function as a check of ``rule`` from ``vantage`` on ``on``."""
    if vantage not in _ON:
        raise ValueError(f"vantage {vantage!r} is not one of {', '.join(VANTAGES)}")

    def register(fn: F) -> F:
        antecedent, words = when if when is not None else (None, "")
        found = Check(
            rule, vantage, on, fn, frozenset(reads), levels, antecedent, words, needs_vector,
            outcome, needs_setup, allowed, paired,
        )  # fmt: skip
        global _generation
        CHECKS.append(found)
        _RULE_OF.setdefault(fn, rule)
        _BY_RULE[vantage].setdefault(rule, []).append(found)
        _ON[vantage].setdefault(on, []).append(found)
        _generation += 1
        return fn

    return register


def unregister(fn: Callable[..., Any]) -> Check:
    """Take the check of ``fn`` out of the registry and its indexes (a test's planted check;
    the judge itself never removes one), leaving every other check where it was."""
    global _generation
    found = next((c for c in CHECKS if c.judge is fn), None)
    if found is None:
        raise LookupError(f"{getattr(fn, '__name__', fn)!r} is not a registered check")
    CHECKS.remove(found)
    _RULE_OF.pop(fn)
    again = next((c for c in CHECKS if c.judge is fn), None)  # registered twice: the next one
    if again is not None:
        _RULE_OF[fn] = again.rule
    for index, key in ((_BY_RULE, found.rule), (_ON, found.on)):
        kept = [c for c in index[found.vantage][key] if c is not found]
        if kept:
            index[found.vantage][key][:] = kept
        else:
            del index[found.vantage][key]
    _generation += 1
    return found


def on(vantage: str) -> dict[str, list[Check]]:
    """The checks of ``vantage`` by what they judge (the live index its runner reads)."""
    return _ON[vantage]


def by_rule(vantage: str) -> dict[str, list[Check]]:
    """The checks of ``vantage`` by rule id (the live index)."""
    return _BY_RULE[vantage]


def of(vantage: str) -> tuple[Check, ...]:
    """Every check of ``vantage``, grouped by rule (rules in the order they first registered):
    the order its runner asks them, and breaks ties in."""
    key = (_generation, vantage)
    found = _OF.get(key)
    if found is None:
        found = _OF[key] = tuple(c for cs in _BY_RULE[vantage].values() for c in cs)
    return found


_OF: dict[tuple[int, str], tuple[Check, ...]] = {}
_generation = 0


def generation() -> int:
    """How many times the registry has changed (a registration or a removal): what keys the
    runners' caches of asked checks, so a cache never outlives the checks it was made of."""
    return _generation


def rules(vantage: str | None = None, on: str | None = None) -> frozenset[str]:
    """The rule ids the checks (of ``vantage``, judging ``on``) cite by themselves (not
    :data:`CONTRACT`, whose checks cite the contract's rule)."""
    return frozenset(
        c.rule
        for c in CHECKS
        if (vantage is None or c.vantage == vantage) and (on is None or c.on == on)
    ) - {CONTRACT}


def rule_of(fn: Callable[..., Any]) -> str:
    """The rule the registered check ``fn`` decides (the first it registered under): what its
    failures cite (:meth:`~toolcancel.oracle.judge.record.Failure.of`)."""
    found = _RULE_OF.get(fn)
    if found is None:
        raise LookupError(f"{getattr(fn, '__name__', fn)!r} is not a registered check")
    return found

