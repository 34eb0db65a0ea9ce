"""The contract file, loaded and validated.

``spec/contract.toml`` is the single source of truth: this module turns it into typed, immutable
records and refuses a file whose parts do not refer to each other consistently (an unknown state,
event, guard, outcome or rule id; a precedence row that no transition decides).  Everything else
(the pure machine, the statechart, diagrams, checker, vectors) reads a :class:`Contract`; nothing
restates the table.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Final

from .errors import ContractError
from .fileio import json_depth


@dataclass(frozen=True)
class State:
    name: str
    action: str
    wait: bool = False
    initial: bool = False
    terminal: bool = False


@dataclass(frozen=True)
class Stage:
    """A step of the pipeline in R10's order and the states it spans: the one grouping of states
    the explorer, the diagrams and the prose share (a teaching view that decides nothing).
    ``titles`` names the stage differently under a revision that changes what it does."""

    name: str
    rule: str
    states: tuple[str, ...]
    titles: Mapping[str, str] = field(default_factory=dict)

    def title(self, revision: str) -> str:
        """The stage's name under ``revision``."""
        return self.titles.get(revision, self.name)


@dataclass(frozen=True)
class Capability:
    """A stage (or power) a runtime may lack, which its hello declares: what in a scenario needs
    it (``field`` off its default or in ``values``, a cancellation at one of ``gates``, with
    ``by_path`` an allowed path leaving ``states``) -- toolcancel.oracle.conform.capabilities
    derives from
    it."""

    name: str
    doc: str
    field: str | None = None
    values: tuple[str, ...] = ()
    gates: tuple[str, ...] = ()
    states: tuple[str, ...] = ()
    by_path: bool = False
    requires: str | None = None
    optional: bool = False
    """A hello may leave it out (it declares it had it): added after hellos that list every
    other key, which stay valid."""


@dataclass(frozen=True)
class Event:
    name: str
    doc: str
    data: tuple[str, ...] = ()
    cancellation: bool = False


@dataclass(frozen=True)
class RetryBehaviour:
    """What an around wrapper's second ``next()`` does (D11); an implementation declares one."""

    name: str
    doc: str


@dataclass(frozen=True)
class Measured:
    """A count measured outside the repository: vectors a registry faithful to ``source``
    failed with the deviation undeclared, of the vector set named ``on`` (vectors are only ever
    appended, so a count of an older set is quoted with it, never as today's)."""

    source: str
    vectors: int
    on: str


MASK_FIELDS: Final = ("result", "post_received")
"""The answer fields a deviation's ``mask`` may set aside."""
MASK_KINDS: Final = ("error", "skipped")
"""What a masked field may become: an error result (for ``result``, a raised error too), or --
for ``post_received`` -- nothing, post-execute never ran; ``error:CODE`` narrows an error to one
code."""


@dataclass(frozen=True)
class Deviation:
    """A known way a real implementation departs from rules ``departs_from``, declared like a
    retry behaviour (an adapter's hello ``deviations``).  ``scope`` names the vectors it can
    touch (scenario field -> values, any matching); ``model`` is the mutant of our reference
    registry that behaves so, from which an alternative expectation is computed (or None)."""

    name: str
    departs_from: tuple[str, ...]
    revisions: frozenset[str]
    source: str
    doc: str
    scope: Mapping[str, tuple[str, ...]]
    model: str | None
    measured: tuple[Measured, ...]
    expects: str | None = None
    """How a vector's alternative expectation is made
    (:data:`toolcancel.oracle.conform.deviations.EXPECTS`); None: the deviation has a
    :attr:`mask`."""
    mask: Mapping[str, str] = field(default_factory=dict)
    """Answer field -> what the deviation may make of it (:data:`MASK_FIELDS`,
    :data:`MASK_KINDS`): the parts of an observation it may change where the sources leave its
    exact values open; every other part is judged as the contract's."""

    def touches(self, scenario: Mapping[str, Any]) -> bool:
        """Whether a vector of this scenario (its JSON data) is in the deviation's scope."""
        for key, values in self.scope.items():
            value = scenario.get(key)
            found = value if isinstance(value, list) else [value]
            if not any(v in values for v in found):
                return False
        return True


@dataclass(frozen=True)
class Guard:
    name: str
    doc: str
    rule: str


@dataclass(frozen=True)
class Outcome:
    name: str
    is_error: bool
    rule: str
    route: str = "post"
    code: str | None = None
    revisions: frozenset[str] = frozenset()
    cancellation: bool = False
    """The outcome is a cancellation: a checkpoint that reaches it publishes it over the result
    the call held (``publishes_over`` says which results)."""
    publishes_over: tuple[tuple[str, str], ...] = ()
    """A cancellation's ``(revision, what)`` pairs: over which earlier result a checkpoint that
    reaches it publishes it in that revision -- ``success`` (only failures survive it) or
    ``any`` (:data:`PUBLISHES_OVER`; the rule is the contract's ``publishes_over_rule``)."""
    authored_by: str = "registry"
    """Who writes the result: ``registry`` (it builds or normalizes it) or ``wrapper`` (an
    around wrapper's own result, passed on as is)."""


@dataclass(frozen=True)
class Transition:
    """One row of the table.  ``id`` is its stable name, the one prose, diagrams, the explorer
    and the spec mutants cite; ``index`` is its position in the file, which orders the candidates
    and is display only (inserting a row shifts every later index, never an id)."""

    id: str
    index: int
    sources: tuple[str, ...]
    events: tuple[str, ...]
    guards: tuple[tuple[str, bool], ...]
    dest: str | None
    outcome: str | None
    depth: int
    invoke: bool
    hand_out: bool
    rules: tuple[str, ...]
    precedence: int | None
    alternative: bool
    revisions: frozenset[str]
    pairs: tuple[tuple[str, str], ...]
    """The (source, event) pairs it leaves by: what ``leaves`` declares, else every source by
    every event.  The one reading of the row -- stepping, checking, conform's capability table
    and the diagrams ask it, never ``sources`` x ``events``."""

    @property
    def guard_text(self) -> str:
        return " and ".join(("" if want else "not ") + name for name, want in self.guards)


@dataclass(frozen=True)
class PrecedenceRow:
    row: int
    situation: str
    outcome: str
    beats: str
    rules: tuple[str, ...]
    revisions: frozenset[str]


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    summary: str
    revisions: frozenset[str]


@dataclass(frozen=True)
class Contract:
    """The whole contract file.  Use :meth:`revision` for the slice one revision follows."""

    source: str
    revisions: tuple[str, ...]
    default_revision: str
    retries: tuple[RetryBehaviour, ...]
    default_retry: str
    revision_info: Mapping[str, Mapping[str, str]]
    texts: Mapping[str, str]
    states: tuple[State, ...]
    stages: tuple[Stage, ...]
    events: tuple[Event, ...]
    guards: tuple[Guard, ...]
    outcomes: tuple[Outcome, ...]
    transitions: tuple[Transition, ...]
    precedence: tuple[PrecedenceRow, ...]
    rules: tuple[Rule, ...]
    precedence_rule: str
    """The rule that states the outcome precedence table (each row names the rules it decides;
    the table as a whole is this rule's)."""
    publishes_over_rule: str
    """The rule that states what a cancellation outcome publishes over (``publishes_over``)."""
    entry_rules: Mapping[str, Mapping[str, str]]
    """The caller's signal at entry (:data:`CALLERS`) -> revision -> the rule that decides how
    the registry treats it there (:meth:`entry_rule`)."""
    deviations: tuple[Deviation, ...] = ()
    capabilities: tuple[Capability, ...] = ()
    _by_revision: dict[str, RevisionContract] = field(
        default_factory=dict, compare=False, repr=False
    )

    def revision(self, name: str | None = None) -> RevisionContract:
        """The states, transitions, rows and rules of one revision (default: the seed)."""
        name = self.default_revision if name is None else name
        if name not in self.revisions:
            raise ContractError(
                f"unknown contract revision {name!r}; choose one of {', '.join(self.revisions)}"
            )
        cached = self._by_revision.get(name)
        if cached is None:
            cached = RevisionContract(self, name)
            self._by_revision[name] = cached
        return cached

    def state(self, name: str) -> State:
        return next(s for s in self.states if s.name == name)

    def entry_rule(self, caller: str, revision: str) -> str:
        """The rule of the caller's signal at entry in ``revision``: ``caller`` is none, live or
        aborted (:data:`CALLERS`)."""
        return self.entry_rules[caller][revision]

    def deviation(self, name: str) -> Deviation:
        """The declared deviation ``name`` (KeyError when there is none)."""
        for d in self.deviations:
            if d.name == name:
                return d
        raise KeyError(name)

    @property
    def retry_names(self) -> tuple[str, ...]:
        """The declared retry behaviours, in file order (D11)."""
        return tuple(r.name for r in self.retries)

    def outcome(self, name: str) -> Outcome:
        return next(o for o in self.outcomes if o.name == name)

    def rule(self, rule_id: str) -> Rule:
        return next(r for r in self.rules if r.id == rule_id)

    def transition(self, transition_id: str) -> Transition:
        """The transition named ``transition_id`` (KeyError when there is none)."""
        for t in self.transitions:
            if t.id == transition_id:
                return t
        raise KeyError(transition_id)


class RevisionContract:
    """The part of the contract one revision follows, indexed for stepping."""

    def __init__(self, contract: Contract, name: str) -> None:
        self.contract = contract
        self.name = name
        self.transitions: tuple[Transition, ...] = tuple(
            t for t in contract.transitions if name in t.revisions
        )
        self.precedence: tuple[PrecedenceRow, ...] = tuple(
            p for p in contract.precedence if name in p.revisions
        )
        self.rules: tuple[Rule, ...] = tuple(r for r in contract.rules if name in r.revisions)
        self.outcomes: tuple[Outcome, ...] = tuple(
            o for o in contract.outcomes if name in o.revisions
        )
        self.texts = contract.texts
        self.states = contract.states
        self.events = contract.events
        index: dict[tuple[str, str], list[Transition]] = {}
        for t in self.transitions:
            for pair in t.pairs:
                index.setdefault(pair, []).append(t)
        self.candidates: Mapping[tuple[str, str], tuple[Transition, ...]] = {
            key: tuple(ts) for key, ts in index.items()
        }
        # what a ContractViolation lists: every miss of core.decide names them, so kept once
        self.allowed: Mapping[str, tuple[str, ...]] = {
            s.name: tuple(e.name for e in self.events if (s.name, e.name) in self.candidates)
            for s in self.states
        }
        self.initial: str = next(s.name for s in contract.states if s.initial)
        self.outcome_is_error: Mapping[str, bool] = {o.name: o.is_error for o in self.outcomes}
        # the cancellation outcomes, and over which earlier result each publishes (R28's data)
        self.cancellations: frozenset[str] = frozenset(
            o.name for o in self.outcomes if o.cancellation
        )
        self.publishes_over: Mapping[str, str] = {
            o.name: what for o in self.outcomes for rev, what in o.publishes_over if rev == name
        }
        # core.step's memo: (call state, occurrence) -> (transition, next state, path record)
        self.step_cache: dict[tuple[Any, Any], tuple[Any, ...]] = {}
        # compiled.initial_node's graphs: call shape -> initial node
        self.compiled: dict[Any, Any] = {}

    def precedence_row(self, row: int) -> PrecedenceRow:
        return next(p for p in self.precedence if p.row == row)

    def events_allowed_in(self, state: str) -> tuple[str, ...]:
        return self.allowed.get(state, ())

    def __repr__(self) -> str:
        return f"<RevisionContract {self.name}: {len(self.transitions)} transitions>"


def _strs(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ContractError(f"{where}: expected a string or a list of strings, got {_show(value)}")


_KIND_NAMES = {str: "a string", list: "an array", dict: "a table", int: "an integer",
               bool: "a boolean"}  # fmt: skip


def _show(value: Any) -> str:
    """A value for an error message: its repr, cut so that a message stays one short line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kinds(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(_KIND_NAMES.get(k, k.__name__) for k in kinds)


def _is(value: Any, kind: type | tuple[type, ...]) -> bool:
    """``isinstance``, except that a boolean is not an integer (TOML keeps them apart)."""
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        return False
    return isinstance(value, kind)


def _need(entry: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in entry:
        raise ContractError(f"{where}: missing key {key!r}")
    value = entry[key]
    if not _is(value, kind):
        raise ContractError(f"{where}: {key!r} must be {_kinds(kind)}, got {_show(value)}")
    return value


def _titles(value: Mapping[str, Any], revisions: frozenset[str], where: str) -> dict[str, str]:
    """A stage's ``titles``: a string for each revision named, and only listed revisions."""
    for revision, title in value.items():
        if revision not in revisions:
            raise ContractError(f"{where}: titles names unknown revision {_show(revision)}")
        if not isinstance(title, str):
            raise ContractError(f"{where}: titles.{revision} must be a string, got {_show(title)}")
    return dict(value)


PUBLISHES_OVER: Final = ("success", "any")
"""What a cancellation outcome may publish over: only a success, or any result."""


def _publishes_over(
    entry: Mapping[str, Any], revisions: frozenset[str], where: str
) -> tuple[tuple[str, str], ...]:
    """An outcome's ``publishes_over``: one of :data:`PUBLISHES_OVER`, or a table giving one per
    revision (every revision the outcome belongs to, and only those)."""
    value = _opt(entry, "publishes_over", (str, dict), None, where)
    if value is None:
        return ()
    own = revisions if "revisions" not in entry else frozenset(_strs(entry["revisions"], where))
    by_revision = {r: value for r in own} if isinstance(value, str) else dict(value)
    if set(by_revision) != own:
        raise ContractError(
            f"{where}: publishes_over names {', '.join(sorted(by_revision)) or 'no revision'}; "
            f"it needs exactly the outcome's revisions ({', '.join(sorted(own))})"
        )
    for revision, what in by_revision.items():
        if what not in PUBLISHES_OVER:
            raise ContractError(
                f"{where}: publishes_over{'' if isinstance(value, str) else '.' + revision} "
                f"must be {' or '.join(map(repr, PUBLISHES_OVER))}, got {_show(what)}"
            )
    return tuple(sorted(by_revision.items()))


def _opt(
    entry: Mapping[str, Any], key: str, kind: type | tuple[type, ...], default: Any, where: str
) -> Any:
    """An optional key: absent gives ``default``; present must be of ``kind``."""
    if key not in entry:
        return default
    return _need(entry, key, kind, where)


class _Read(dict[str, Any]):
    """A table that remembers which keys the loader looked at: a key it never looked at is
    unknown (a typo, or a field this loader does not implement), and refused."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.seen: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.seen.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.seen.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.seen.add(key)
        return super().__contains__(key)


_FREE_FORM: Final = frozenset({"texts", "revision"})
"""Top-level tables whose keys are names chosen by the contract (texts, revisions)."""


def _tracked(data: Mapping[str, Any]) -> _Read:
    """``data`` with its top level, its [contract] table and every [[array]] entry tracked."""
    out = _Read(data)
    for key, value in data.items():
        if key in _FREE_FORM:
            continue
        if isinstance(value, dict):
            dict.__setitem__(out, key, _Read(value))
        elif isinstance(value, list):
            dict.__setitem__(out, key, [_Read(v) if isinstance(v, dict) else v for v in value])
    return out


def _refuse_unknown_keys(data: _Read, source: str) -> None:
    def check(table: _Read, where: str) -> None:
        unknown = [k for k in table if k not in table.seen]
        if unknown:
            raise ContractError(
                f"{where}: unknown key {_show(unknown[0])} (this loader reads "
                f"{', '.join(sorted(table.seen))})"
            )

    check(data, source)
    for key, value in dict.items(data):
        if isinstance(value, _Read):
            check(value, f"{source} [{key}]")
        elif isinstance(value, list):
            for i, entry in enumerate(value):
                if isinstance(entry, _Read):
                    check(entry, f"{source} {key} #{i + 1}")


def parse_contract(data: Mapping[str, Any], source: str) -> Contract:
    """Build a :class:`Contract` from parsed TOML, checking every cross-reference and refusing
    keys the loader does not read."""
    data = _tracked(data)
    head = _need(data, "contract", dict, source)
    _opt(head, "name", str, None, f"{source} [contract]")  # documentation, but typed
    _opt(head, "format", int, None, f"{source} [contract]")
    revisions = _strs(_need(head, "revisions", list, f"{source} [contract]"), source)
    all_revs = frozenset(revisions)

    def revs(entry: Mapping[str, Any], where: str) -> frozenset[str]:
        if "revisions" not in entry:
            return all_revs
        named = frozenset(_strs(entry["revisions"], where))
        unknown = named - all_revs
        if unknown:
            raise ContractError(f"{where}: unknown revision(s) {sorted(unknown)}")
        return named

    def entries(key: str) -> list[Mapping[str, Any]]:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise ContractError(f"{source}: [[{key}]] must be an array of tables")
        return value

    states = tuple(
        State(
            name=_need(e, "name", str, f"{source} state #{i + 1}"),
            action=_need(e, "action", str, f"{source} state #{i + 1}"),
            wait=_opt(e, "wait", bool, False, f"{source} state #{i + 1}"),
            initial=_opt(e, "initial", bool, False, f"{source} state #{i + 1}"),
            terminal=_opt(e, "terminal", bool, False, f"{source} state #{i + 1}"),
        )
        for i, e in enumerate(entries("state"))
    )
    stages = tuple(
        Stage(
            name=_need(e, "name", str, f"{source} stage #{i + 1}"),
            rule=_need(e, "rule", str, f"{source} stage #{i + 1}"),
            states=_strs(_need(e, "states", list, f"{source} stage #{i + 1}"),
                         f"{source} stage #{i + 1}"),
            titles=_titles(_opt(e, "titles", dict, {}, f"{source} stage #{i + 1}"),
                           all_revs, f"{source} stage #{i + 1}"),
        )
        for i, e in enumerate(entries("stage"))
    )
    capabilities = tuple(
        Capability(
            name=_need(e, "name", str, f"{source} capability #{i + 1}"),
            doc=_need(e, "doc", str, f"{source} capability #{i + 1}"),
            field=_opt(e, "field", str, None, f"{source} capability #{i + 1}"),
            values=_strs(e.get("values", []), f"{source} capability #{i + 1}"),
            gates=_strs(e.get("gates", []), f"{source} capability #{i + 1}"),
            states=_strs(e.get("states", []), f"{source} capability #{i + 1}"),
            by_path=_opt(e, "by_path", bool, False, f"{source} capability #{i + 1}"),
            requires=_opt(e, "requires", str, None, f"{source} capability #{i + 1}"),
            optional=_opt(e, "optional", bool, False, f"{source} capability #{i + 1}"),
        )
        for i, e in enumerate(entries("capability"))
    )
    events = tuple(
        Event(
            name=_need(e, "name", str, f"{source} event #{i + 1}"),
            doc=_need(e, "doc", str, f"{source} event #{i + 1}"),
            data=_strs(e.get("data", []), f"{source} event #{i + 1}"),
            cancellation=_opt(e, "cancellation", bool, False, f"{source} event #{i + 1}"),
        )
        for i, e in enumerate(entries("event"))
    )
    retries = tuple(
        RetryBehaviour(
            name=_need(e, "name", str, f"{source} retry #{i + 1}"),
            doc=_need(e, "doc", str, f"{source} retry #{i + 1}"),
        )
        for i, e in enumerate(entries("retry"))
    )
    deviations = []
    for i, e in enumerate(entries("deviation")):
        where = f"{source} deviation #{i + 1}"
        scope = _opt(e, "scope", dict, {}, where)
        mask = _opt(e, "mask", dict, {}, where)
        measured = _opt(e, "measured", list, [], where)
        if not all(isinstance(m, dict) for m in measured):
            raise ContractError(f"{where}: measured must be an array of tables")
        deviations.append(
            Deviation(
                name=_need(e, "name", str, where),
                departs_from=_strs(_need(e, "departs_from", list, where), where),
                revisions=revs(e, where),
                source=_need(e, "source", str, where),
                doc=_need(e, "doc", str, where),
                scope={k: _strs(_need(scope, k, list, where), where) for k in scope},
                model=_opt(e, "model", str, None, where),
                expects=_opt(e, "expects", str, None, where),
                mask={k: _need(mask, k, str, f"{where} mask") for k in mask},
                measured=tuple(
                    Measured(
                        _need(m, "source", str, where),
                        _need(m, "vectors", int, where),
                        _need(m, "on", str, where),
                    )
                    for m in measured
                ),
            )
        )
    guards = tuple(
        Guard(
            name=_need(e, "name", str, f"{source} guard #{i + 1}"),
            doc=_need(e, "doc", str, f"{source} guard #{i + 1}"),
            rule=_need(e, "rule", str, f"{source} guard #{i + 1}"),
        )
        for i, e in enumerate(entries("guard"))
    )
    outcomes = tuple(
        Outcome(
            name=_need(e, "name", str, f"{source} outcome #{i + 1}"),
            is_error=_need(e, "is_error", bool, f"{source} outcome #{i + 1}"),
            rule=_need(e, "rule", str, f"{source} outcome #{i + 1}"),
            route=_opt(e, "route", str, "post", f"{source} outcome #{i + 1}"),
            code=_opt(e, "code", str, None, f"{source} outcome #{i + 1}"),
            revisions=revs(e, f"{source} outcome #{i + 1}"),
            cancellation=_opt(e, "cancellation", bool, False, f"{source} outcome #{i + 1}"),
            authored_by=_opt(e, "authored_by", str, "registry", f"{source} outcome #{i + 1}"),
            publishes_over=_publishes_over(e, all_revs, f"{source} outcome #{i + 1}"),
        )
        for i, e in enumerate(entries("outcome"))
    )
    rules = tuple(
        Rule(
            id=_need(e, "id", str, f"{source} rule #{i + 1}"),
            title=_need(e, "title", str, f"{source} rule #{i + 1}"),
            summary=_need(e, "summary", str, f"{source} rule #{i + 1}"),
            revisions=revs(e, f"{source} rule #{i + 1}"),
        )
        for i, e in enumerate(entries("rule"))
    )
    precedence = tuple(
        PrecedenceRow(
            row=_need(e, "row", int, f"{source} precedence #{i + 1}"),
            situation=_need(e, "situation", str, f"{source} precedence #{i + 1}"),
            outcome=_need(e, "outcome", str, f"{source} precedence #{i + 1}"),
            beats=_need(e, "beats", str, f"{source} precedence #{i + 1}"),
            rules=_strs(e.get("rules", []), f"{source} precedence #{i + 1}"),
            revisions=revs(e, f"{source} precedence #{i + 1}"),
        )
        for i, e in enumerate(entries("precedence"))
    )
    transitions = []
    for i, e in enumerate(entries("transition")):
        where = f"{source} transition #{i + 1}"
        guard_list = []
        for g in _strs(e.get("guards", []), where):
            guard_list.append((g[1:], False) if g.startswith("!") else (g, True))
        depth = _opt(e, "depth", int, 0, where)
        if depth not in (-1, 0, 1):
            raise ContractError(f"{where}: depth must be -1, 0 or 1, got {depth!r}")
        tid = _transition_id(_need(e, "id", str, where), where)
        froms = _strs(_need(e, "source", list, where), where)
        bys = _strs(_need(e, "event", (str, list), where), where)
        transitions.append(
            Transition(
                id=tid,
                index=i,
                sources=froms,
                events=bys,
                guards=tuple(guard_list),
                dest=_opt(e, "dest", str, None, where),
                outcome=_opt(e, "outcome", str, None, where),
                depth=depth,
                invoke=_opt(e, "invoke", bool, False, where),
                hand_out=_opt(e, "hand_out", bool, False, where),
                rules=_strs(_need(e, "rules", list, where), where),
                precedence=_opt(e, "precedence", int, None, where),
                alternative=_opt(e, "alternative", bool, False, where),
                revisions=revs(e, where),
                pairs=_pairs(e, froms, bys, f"{source} transition {tid}"),
            )
        )
    texts = _need(data, "texts", dict, source)
    for key, text in texts.items():
        if not isinstance(text, str):
            raise ContractError(f"{source} [texts]: {key!r} must be a string, got {_show(text)}")
    revision_info = _need(data, "revision", dict, source)
    for name, info in revision_info.items():
        where = f"{source} [revision.{name}]"
        if not isinstance(info, dict):
            raise ContractError(f"{where}: must be a table, got {_show(info)}")
        for key, text in info.items():
            if not isinstance(text, str):
                raise ContractError(f"{where}: {key!r} must be a string, got {_show(text)}")
    contract = Contract(
        source=source,
        revisions=revisions,
        default_revision=_need(head, "default_revision", str, f"{source} [contract]"),
        retries=retries,
        default_retry=_need(head, "default_retry", str, f"{source} [contract]"),
        revision_info=revision_info,
        texts=texts,
        states=states,
        stages=stages,
        events=events,
        guards=guards,
        outcomes=outcomes,
        transitions=tuple(transitions),
        precedence=precedence,
        rules=rules,
        precedence_rule=_need(head, "precedence_rule", str, f"{source} [contract]"),
        publishes_over_rule=_need(head, "publishes_over_rule", str, f"{source} [contract]"),
        entry_rules=_entry_rules(head, revisions, f"{source} [contract]"),
        deviations=tuple(deviations),
        capabilities=capabilities,
    )
    _check_references(contract)
    _refuse_unknown_keys(data, source)
    return contract


def _check_publishes_over(c: Contract) -> None:
    """Every cancellation outcome says what it publishes over, and only they do; and the rows
    agree with it: a row that publishes a cancellation over ``success`` only keeps every failure
    (``!result_is_error`` where it reads the result at all), one over ``any`` does not."""
    for o in c.outcomes:
        if o.cancellation != bool(o.publishes_over):
            raise ContractError(
                f"{c.source}: outcome {o.name!r}: "
                + (
                    "a cancellation says what it publishes over (publishes_over = "
                    f"{' or '.join(map(repr, PUBLISHES_OVER))})"
                    if o.cancellation
                    else "publishes_over is for cancellation outcomes only"
                )
            )
    over = {(o.name, rev): what for o in c.outcomes for rev, what in o.publishes_over}
    for t in c.transitions:
        guards = dict(t.guards)
        if t.outcome is None or "result_is_error" not in guards:
            continue
        for rev in sorted(t.revisions):
            what = over.get((t.outcome, rev))
            keeps_failures = guards["result_is_error"] is False
            if what is not None and keeps_failures != (what == "success"):
                raise ContractError(
                    f"{c.source}: transition {t.id!r} ({rev}) publishes {t.outcome!r}, which "
                    f"publishes over {what!r}: "
                    + (
                        "drop its '!result_is_error' guard"
                        if what == "any"
                        else "it must keep every failure (guard '!result_is_error')"
                    )
                )


_TRANSITION_ID = re.compile(r"[a-z][a-z0-9_]*")
_POSITIONAL = re.compile(r"t[0-9]+")


def _pairs(
    entry: Mapping[str, Any], sources: tuple[str, ...], events: tuple[str, ...], where: str
) -> tuple[tuple[str, str], ...]:
    """A transition's (source, event) pairs: its ``leaves`` table (source -> the event or events
    that leave it), which names every source and every event and nothing else; without one,
    every event leaves every source."""
    leaves = _opt(entry, "leaves", dict, None, where)
    if leaves is None:
        return tuple((s, e) for s in sources for e in events)
    if set(leaves) != set(sources):
        raise ContractError(
            f"{where}: leaves names {', '.join(map(repr, leaves)) or 'no source'}; it needs "
            f"exactly the transition's sources ({', '.join(map(repr, sources))})"
        )
    pairs = []
    for s in sources:
        for e in _strs(leaves[s], f"{where}: leaves.{s}"):
            if e not in events:
                raise ContractError(
                    f"{where}: leaves.{s} names event {e!r}, which the transition does not list "
                    f"({', '.join(map(repr, events))})"
                )
            pairs.append((s, e))
    unused = [e for e in events if all(e != x for _, x in pairs)]
    if unused:
        raise ContractError(f"{where}: leaves gives event {unused[0]!r} no source")
    return tuple(dict.fromkeys(pairs))


CALLERS: Final = ("none", "live", "aborted")
"""The states of the caller's signal when a call enters: none given, live, already aborted."""


def _entry_rules(
    head: Mapping[str, Any], revisions: tuple[str, ...], where: str
) -> dict[str, dict[str, str]]:
    """``entry_rules``: per caller state at entry (every one of :data:`CALLERS`, no other), a
    rule id, or a table giving one per revision (every revision)."""
    value = _need(head, "entry_rules", dict, where)
    if sorted(value) != sorted(CALLERS):
        raise ContractError(
            f"{where}: entry_rules names {', '.join(map(repr, value)) or 'nothing'}; it needs "
            f"exactly the caller's states at entry ({', '.join(map(repr, CALLERS))})"
        )
    out: dict[str, dict[str, str]] = {}
    for caller in CALLERS:
        rule = value[caller]
        by_revision = dict.fromkeys(revisions, rule) if isinstance(rule, str) else rule
        if not isinstance(by_revision, dict) or sorted(by_revision) != sorted(revisions):
            raise ContractError(
                f"{where}: entry_rules.{caller} must be a rule id or a table of one per "
                f"revision ({', '.join(revisions)}), got {_show(rule)}"
            )
        for revision, got in by_revision.items():
            if not isinstance(got, str):
                raise ContractError(
                    f"{where}: entry_rules.{caller}.{revision} must be a rule id, got {_show(got)}"
                )
        out[caller] = dict(by_revision)
    return out


def _transition_id(name: str, where: str) -> str:
    """A transition id is a lower-case identifier that does not look like a position (``t23``),
    so no text can confuse a stable name with a row number that shifts."""
    if not _TRANSITION_ID.fullmatch(name) or _POSITIONAL.fullmatch(name):
        raise ContractError(
            f"{where}: id {name!r} must be a lower-case name such as 'c2_aborted' "
            "(letters, digits, underscores; not a position like 't23')"
        )
    return name


def _check_references(c: Contract) -> None:
    def unique(kind: str, names: list[str]) -> set[str]:
        seen: set[str] = set()
        for n in names:
            if n in seen:
                raise ContractError(f"{c.source}: {kind} {n!r} is defined twice")
            seen.add(n)
        return seen

    states = unique("state", [s.name for s in c.states])
    unique("transition id", [t.id for t in c.transitions])
    events = unique("event", [e.name for e in c.events])
    guards = unique("guard", [g.name for g in c.guards])
    outcomes = unique("outcome", [o.name for o in c.outcomes])
    rules = unique("rule", [r.id for r in c.rules])
    if c.precedence_rule not in rules:
        raise ContractError(f"{c.source}: precedence_rule {c.precedence_rule!r} is not a rule")
    if c.publishes_over_rule not in rules:
        raise ContractError(
            f"{c.source}: publishes_over_rule {c.publishes_over_rule!r} is not a rule"
        )
    _check_publishes_over(c)
    if c.default_revision not in c.revisions:
        raise ContractError(f"{c.source}: default_revision {c.default_revision!r} is not listed")
    unique("deviation", [d.name for d in c.deviations])
    for d in c.deviations:
        for rule in d.departs_from:
            if rule not in rules:
                raise ContractError(
                    f"{c.source}: deviation {d.name!r} departs from unknown rule {rule!r}"
                )
        if (d.expects is None) == (not d.mask):
            raise ContractError(
                f"{c.source}: deviation {d.name!r} needs exactly one of expects and mask (what "
                "a vector it touches is judged against)"
            )
        for key, kind in d.mask.items():
            code = kind.removeprefix("error:")
            if key not in MASK_FIELDS or not (kind in MASK_KINDS or (code != kind and code)):
                raise ContractError(
                    f"{c.source}: deviation {d.name!r} masks {key!r} as {kind!r}; a mask maps "
                    f"{' or '.join(MASK_FIELDS)} to {', '.join(MASK_KINDS)} or error:CODE"
                )
    retries = unique("retry behaviour", [r.name for r in c.retries])
    if c.default_retry not in retries:
        raise ContractError(f"{c.source}: default_retry {c.default_retry!r} is not a [[retry]]")
    if set(c.revision_info) != set(c.revisions):
        raise ContractError(f"{c.source}: [revision.*] tables must match the listed revisions")
    if sum(s.initial for s in c.states) != 1:
        raise ContractError(f"{c.source}: exactly one state must be initial")
    staged: dict[str, str] = {}
    for stage in c.stages:
        where = f"{c.source}: stage {stage.name!r}"
        if stage.rule not in rules:
            raise ContractError(f"{where} cites unknown rule {stage.rule!r}")
        for name in stage.states:
            if name not in states:
                raise ContractError(f"{where} holds unknown state {name!r}")
            if name in staged:
                raise ContractError(
                    f"{c.source}: state {name!r} is in stages {staged[name]!r} and {stage.name!r}"
                )
            staged[name] = stage.name
    able = unique("capability", [k.name for k in c.capabilities])
    for k in c.capabilities:
        where = f"{c.source}: capability {k.name!r}"
        if k.requires is not None and k.requires not in able:
            raise ContractError(f"{where} requires unknown capability {k.requires!r}")
        unknown_states = [s for s in k.states if s not in states]
        if unknown_states:
            raise ContractError(f"{where} names unknown state {unknown_states[0]!r}")
        if k.values and k.field is None:
            raise ContractError(f"{where} has values but no field")
    unstaged = [s.name for s in c.states if s.name not in staged]
    if c.stages and unstaged:
        raise ContractError(f"{c.source}: no [[stage]] holds state(s) {', '.join(unstaged)}")
    for caller, by_revision in c.entry_rules.items():
        for revision, rule in by_revision.items():
            if rule not in rules:
                raise ContractError(
                    f"{c.source}: entry_rules.{caller} cites unknown rule {rule!r} ({revision})"
                )
    for g in c.guards:
        if g.rule not in rules:
            raise ContractError(f"{c.source}: guard {g.name!r} cites unknown rule {g.rule!r}")
    for o in c.outcomes:
        if o.rule not in rules:
            raise ContractError(f"{c.source}: outcome {o.name!r} cites unknown rule {o.rule!r}")
        if o.route not in ("post", "final"):
            raise ContractError(f"{c.source}: outcome {o.name!r} has route {o.route!r}")
        if o.authored_by not in ("registry", "wrapper"):
            raise ContractError(
                f"{c.source}: outcome {o.name!r} has authored_by {o.authored_by!r}; "
                "choose registry or wrapper"
            )
    rows = {(p.row, r) for p in c.precedence for r in p.revisions}
    for p in c.precedence:
        for r in p.rules:
            if r not in rules:
                raise ContractError(f"{c.source}: precedence row {p.row} cites unknown rule {r!r}")
    for t in c.transitions:
        arrow = f"{'/'.join(t.sources)} --{'/'.join(t.events)}-->"
        where = f"{c.source}: transition {t.id} ({arrow})"
        for source in t.sources:
            if source not in states:
                raise ContractError(f"{where}: unknown source state {source!r}")
        if t.dest is not None and t.dest not in states:
            raise ContractError(f"{where}: unknown destination state {t.dest!r}")
        for e in t.events:
            if e not in events:
                raise ContractError(f"{where}: unknown event {e!r}")
        for guard, _ in t.guards:
            if guard not in guards:
                raise ContractError(f"{where}: unknown guard {guard!r}")
        if t.outcome is not None and t.outcome not in outcomes:
            raise ContractError(f"{where}: unknown outcome {t.outcome!r}")
        for r in t.rules:
            if r not in rules:
                raise ContractError(f"{where}: unknown rule {r!r}")
        if t.precedence is not None:
            for rev in t.revisions:
                if (t.precedence, rev) not in rows:
                    raise ContractError(
                        f"{where}: cites precedence row {t.precedence}, which revision "
                        f"{rev!r} does not have"
                    )
        if t.outcome is not None and t.revisions - c.outcome(t.outcome).revisions:
            raise ContractError(
                f"{where}: outcome {t.outcome!r} does not exist in all its revisions"
            )
    for p in c.precedence:
        for rev in p.revisions:
            if not any(t.precedence == p.row and rev in t.revisions for t in c.transitions):
                raise ContractError(
                    f"{c.source}: precedence row {p.row} ({rev}) is decided by no transition"
                )


MAX_CONTRACT_BYTES: Final = 4 << 20
"""Largest contract file read (4 MiB; the shipped one is about 36 KB)."""
MAX_CONTRACT_DEPTH: Final = 16
"""Deepest nesting of tables and arrays a contract file may have (the real one nests 3 deep)."""


def load_contract_file(path: str | Path) -> Contract:
    """Load and validate a contract file from a path (used to check edited copies).

    An untrusted file: at most :data:`MAX_CONTRACT_BYTES` bytes of UTF-8 TOML nesting at most
    :data:`MAX_CONTRACT_DEPTH` levels; anything else is a :class:`ContractError` naming the file
    (and the line, where there is one).
    """
    p = Path(path)
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_CONTRACT_BYTES + 1)
    except OSError as exc:
        raise ContractError(f"{p}: cannot read the contract file ({exc.strerror})") from None
    if len(raw) > MAX_CONTRACT_BYTES:
        raise ContractError(f"{p}: larger than {MAX_CONTRACT_BYTES:,} bytes; not a contract file")
    raw = raw.removeprefix(b"\xef\xbb\xbf")  # a byte-order mark is not TOML, but harmless
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ContractError(f"{p}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ContractError(f"{p}: not valid TOML ({exc})") from None
    except ValueError as exc:  # an integer longer than Python converts
        if "integer string conversion" not in str(exc):
            raise
        raise ContractError(f"{p}: not valid TOML (a number with more than 4,300 digits)") from None
    except RecursionError:
        raise ContractError(f"{p}: TOML nested deeper than {MAX_CONTRACT_DEPTH} levels") from None
    if json_depth(data, MAX_CONTRACT_DEPTH) > MAX_CONTRACT_DEPTH:  # TOML nests as JSON does
        raise ContractError(f"{p}: TOML nested deeper than {MAX_CONTRACT_DEPTH} levels")
    return parse_contract(data, str(p))


@cache
def load_contract() -> Contract:
    """The contract shipped with this package (``toolcancel/spec/contract.toml``)."""
    text = resources.files("toolcancel.spec").joinpath("contract.toml").read_text("utf-8")
    return parse_contract(tomllib.loads(text), "spec/contract.toml")
