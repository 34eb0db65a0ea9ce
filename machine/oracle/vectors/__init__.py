"""Conformance vectors: the bounded model check, written down for implementations in any language.

A vector is one scenario of the closed scenario language
(:mod:`toolcancel.oracle.scenario_language`) plus
what the contract lets an implementation do with it: the canonical result JSON, the outcome kind,
how often the body starts, the contexts, the notification count, what the body's signal looked like
when it settled, and the **set of allowed paths** (sequences of contract events, caller aborts
included).  An adapter for a foreign registry interprets the scenario; ``toolcancel conform``
compares what it reports with the vector (:mod:`toolcancel.oracle.conform`).

The format is this module's: reading, validating and writing a vector, and the JSON Schema of a
line.  Where the shipped vectors come from -- the verifier's bounded space run on the reference
registry -- is :mod:`toolcancel.selfcheck.vectorgen`'s (self-verification: an implementer's run
never loads the model checker).

Theory of operation (the vectors sub-room): a line of a ``.jsonl`` file flows in as bytes and out
as a :class:`Vector` -- or as one error naming the file, the line and the field; an
:class:`~toolcancel.oracle.observation.Observation` flows in and an :class:`Expectation` out
(:func:`expectation`).  Invariants: a vector is data (reading one runs nothing); its allowed paths
are what the contract allows, every one of them, never one implementation's choice; a format
change bumps :data:`FORMAT` and keeps reading the older ones.  A contributor may add a field (with
its schema and README entry) or a scenario value; turn vectors live beside, in
:mod:`toolcancel.oracle.vectors.turns`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any, Final

from ...contract.errors import ToolcancelError
from ...contract.loader import RevisionContract, load_contract
from ..observation import Observation, classify_reason
from ..scenario_language import (
    APPROVALS,
    ARGS,
    BODIES,
    BUDGET_MS,
    CALLERS,
    GUARDS,
    OBSERVERS,
    OUTER_MS,
    POSTS,
    PRE,
    SAME_STEP,
    TIMEOUTS,
    WRAPPERS,
    Scenario,
)

FORMAT: Final = 2
"""Version of the vector format (the ``vector`` field of every line).  Version 2 added
``expected.by_retry``; a version-1 line is still read (its expectations are the default
retry behaviour's)."""

READ_FORMATS: Final = (1, 2)

REVISIONS: Final = ("seed", "revised")


SCHEMA_NAME: Final = "vector.schema.json"

GATES: Final = ("pre", "approval", "body", "post")
"""Fixed gate names; wrappers add ``w<i>_before`` and ``w<i>_after``."""

REASONS: Final = ("caller", "wrapper", "timeout", "other")
"""Whose reason a body's aborted signal carries (see :func:`classify_reason`)."""

MAX_LINE_BYTES: Final = 1 << 20
"""Longest vector line read (1 MiB, newline excluded; the longest shipped line is about 2 KB)."""
MAX_DEPTH: Final = 64
"""Deepest JSON nesting of a vector line (the shipped ones nest 7 levels)."""
MAX_VECTORS: Final = 1_000_000
"""Most lines a vectors file may have (the shipped files have about 3,700)."""


class VectorError(ToolcancelError):
    """A vector file or line does not fit the format (names the file and line)."""


def _show(value: Any) -> str:
    """A value for an error message: its repr, cut so that a message stays one short line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _count(value: Any) -> bool:
    """Whether ``value`` is a JSON integer >= 0 (a boolean is not one)."""
    return type(value) is int and value >= 0


def _vocabulary(revision: str) -> tuple[frozenset[str], frozenset[str]]:
    """The event names and outcome names a vector of ``revision`` may use."""
    return _names(load_contract().revision(revision))


@functools.cache
def _names(table: RevisionContract) -> tuple[frozenset[str], frozenset[str]]:
    """A memo of :func:`_vocabulary` per revision table (by identity: another contract loaded
    is another table): a vectors file asks it for every expectation of every line."""
    return frozenset(e.name for e in table.events), frozenset(o.name for o in table.outcomes)


# ------------------------------------------------------------------------------------------------
# What one run shows
# ------------------------------------------------------------------------------------------------


def body_signals(obs: Observation) -> list[dict[str, Any]]:
    """What the body's signal looked like when each body invocation settled, in order."""
    out: list[dict[str, Any]] = []
    for entry in obs.log:
        if entry[0] == "body_settle":
            aborted = bool(entry[1])
            out.append(
                {"aborted": aborted, "reason": classify_reason(entry[2]) if aborted else None}
            )
    return out


def post_received(obs: Observation) -> dict[str, Any] | None:
    """The result post-execute first received, as data without ``meta`` (a body's ``bad_meta``
    is not JSON; post-execute's input is judged by its content, error and contexts), or None
    when post-execute never ran."""
    for entry in obs.log:
        if entry[0] == "post_in":
            data = entry[1].to_data()
            data.pop("meta", None)
            plain: dict[str, Any] = json.loads(canonical(data))
            return plain
    return None


# ------------------------------------------------------------------------------------------------
# Vectors as data
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expectation:
    """One observable outcome the contract allows for a scenario, and the paths that lead to it."""

    result: Mapping[str, Any]
    outcome: str
    body_starts: int
    body_signals: tuple[Mapping[str, Any], ...]
    notifications: int
    paths: tuple[tuple[str, ...], ...]
    post_received: Any = ...  # the result post-execute received (None: it never ran; ...: unstated)

    @property
    def contexts(self) -> list[Any]:
        return list(self.result.get("additionalContexts", []))

    @property
    def result_json(self) -> str:
        return canonical(self.result)

    def same_observables(self, other: Expectation) -> bool:
        return (
            self.result_json == other.result_json
            and self.outcome == other.outcome
            and self.body_starts == other.body_starts
            and self.body_signals == other.body_signals
            and self.notifications == other.notifications
            and canonical(self.post_received) == canonical(other.post_received)
        )

    def to_data(self) -> dict[str, Any]:
        data = {
            "result": self.result,
            "outcome": self.outcome,
            "body_starts": self.body_starts,
            "contexts": self.contexts,
            "notifications": self.notifications,
            "body_signals": [dict(b) for b in self.body_signals],
        }
        if self.post_received is not ...:
            data["post_received"] = self.post_received
        data["paths"] = [list(p) for p in self.paths]
        return data

    @classmethod
    def from_data(cls, data: Any, where: str, revision: str = "seed") -> Expectation:
        """Validate one expectation of a vector of ``revision`` (events and outcomes must be
        the contract's: ``conform`` judges answers with them)."""
        if not isinstance(data, Mapping):
            raise VectorError(f"{where}: expected an object")
        for key in ("result", "outcome", "body_starts", "body_signals", "notifications", "paths"):
            if key not in data:
                raise VectorError(f"{where}: missing field {key!r}")
        events, outcomes = _vocabulary(revision)
        result, outcome, paths, signals = (
            data["result"],
            data["outcome"],
            data["paths"],
            data["body_signals"],
        )
        if not isinstance(result, Mapping):
            raise VectorError(f"{where}.result: expected an object, got {_show(result)}")
        if not isinstance(outcome, str) or outcome not in outcomes:
            raise VectorError(f"{where}.outcome: {_show(outcome)} is not an outcome of {revision}")
        for key in ("body_starts", "notifications"):
            if not _count(data[key]):
                got = _show(data[key])
                raise VectorError(f"{where}.{key}: expected an integer >= 0, got {got}")
        if not isinstance(signals, list) or not all(
            isinstance(b, Mapping)
            and b.keys() == _SIGNAL_KEYS
            and type(b["aborted"]) is bool
            and b["reason"] in _SIGNAL_REASONS
            for b in signals
        ):
            raise VectorError(f"{where}.body_signals: expected a list of {{aborted, reason}}")
        if not isinstance(paths, list) or not paths or not _event_lists(paths, events):
            raise VectorError(
                f"{where}.paths: expected a non-empty list of lists of {revision} event names"
            )
        contexts = result.get("additionalContexts", [])
        if not isinstance(contexts, list):
            raise VectorError(f"{where}.result.additionalContexts: expected a list")
        received = data.get("post_received", ...)
        if received is not ... and received is not None and not isinstance(received, Mapping):
            raise VectorError(f"{where}.post_received: expected a result object or null")
        exp = cls(
            result=result,
            outcome=outcome,
            body_starts=data["body_starts"],
            body_signals=tuple(signals),
            notifications=data["notifications"],
            paths=tuple(tuple(p) for p in paths),
            post_received=received,
        )
        if data.get("contexts") != exp.contexts:
            raise VectorError(f"{where}.contexts: must equal result.additionalContexts (or [])")
        return exp


_SIGNAL_KEYS: Final = frozenset({"aborted", "reason"})
_SIGNAL_REASONS: Final = (*REASONS, None)  # a tuple: a reason may be unhashable (bad input)


def _event_lists(paths: list[Any], events: frozenset[str]) -> bool:
    """Whether every item of ``paths`` is a list of names in ``events`` (a set test per path,
    not a Python test per event: a vectors file has hundreds of thousands)."""
    try:
        return all(isinstance(p, list) and events.issuperset(p) for p in paths)
    except TypeError:  # an unhashable item (an object or a list) is no event name
        return False


RetryExpectations = tuple[tuple[str, Expectation, tuple[Expectation, ...]], ...]
"""Per retry behaviour whose observables differ from the default's: its expected outcome and its
alternatives, in the contract's order of behaviours."""


@dataclass(frozen=True)
class Vector:
    """A scenario, the outcome the reference gives it, and other outcomes the contract allows.

    ``expected`` and ``alternatives`` hold under the contract's default retry behaviour (D11);
    ``by_retry`` replaces both for a behaviour under which the scenario ends otherwise (only a
    scenario whose wrapper retries has any).  An implementation is judged by the behaviour it
    declares: :meth:`for_retry`.
    """

    id: str
    revision: str
    scenario: Scenario
    expected: Expectation
    alternatives: tuple[Expectation, ...] = ()
    by_retry: RetryExpectations = ()

    def expectations(self) -> Iterator[Expectation]:
        yield self.expected
        yield from self.alternatives

    def allowed_paths(self) -> list[tuple[str, ...]]:
        return [p for e in self.expectations() for p in e.paths]

    def for_retry(self, retry: str) -> Vector:
        """This vector as an implementation with retry behaviour ``retry`` is judged by."""
        for name, expected, alternatives in self.by_retry:
            if name == retry:
                return replace(self, expected=expected, alternatives=alternatives, by_retry=())
        return replace(self, by_retry=()) if self.by_retry else self

    def expected_for(self, retry: str) -> Expectation:
        """The expected outcome under retry behaviour ``retry``."""
        return self.for_retry(retry).expected

    def to_data(self) -> dict[str, Any]:
        expected = expectation_data(self.expected, self.alternatives)
        if self.by_retry:
            expected["by_retry"] = {
                name: expectation_data(exp, alts) for name, exp, alts in self.by_retry
            }
        return {
            "vector": FORMAT,
            "id": self.id,
            "revision": self.revision,
            "scenario": scenario_data(self.scenario),
            "expected": expected,
        }

    def to_line(self) -> str:
        """One JSON line with a fixed key order (results inside are canonical)."""
        return json.dumps(self.to_data(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_data(cls, data: Any, where: str) -> Vector:
        if not isinstance(data, Mapping):
            raise VectorError(f"{where}: expected a JSON object")
        if "turn_table" in data or "turn_vector" in data:
            raise VectorError(
                f"{where}: a line of a turn vectors file; this reads call vectors (conform runs "
                "the shipped turn vectors with the shipped call vectors)"
            )
        if data.get("vector") not in READ_FORMATS or type(data.get("vector")) is not int:
            raise VectorError(
                f"{where}: vector format {_show(data.get('vector'))}, expected one of "
                f"{', '.join(map(str, READ_FORMATS))}"
            )
        vid, revision = data.get("id"), data.get("revision")
        if not isinstance(vid, str) or revision not in REVISIONS:
            raise VectorError(f"{where}: needs a string id and a revision of {REVISIONS}")
        try:
            scenario = Scenario.from_data(data.get("scenario"), f"{where}.scenario")
        except ToolcancelError as exc:
            raise VectorError(str(exc)) from None
        if scenario.revision != revision:
            raise VectorError(f"{where}: scenario.revision differs from revision")
        if scenario.cancel.startswith("step:"):
            raise VectorError(f"{where}.scenario.cancel: step:<k> is not portable")
        if scenario.cancel.startswith(f"{SAME_STEP}:"):
            raise VectorError(f"{where}.scenario.cancel: {SAME_STEP} takes no order in a vector "
                              "(which source a step runs first is the adapter's signal library's)")
        raw = data.get("expected")
        expected, alternatives = _expectations_from(raw, f"{where}.expected", revision)
        per = raw.get("by_retry", {}) if isinstance(raw, Mapping) else {}
        known = load_contract().retry_names
        if not isinstance(per, Mapping) or not all(name in known for name in per):
            raise VectorError(
                f"{where}.expected.by_retry: expected an object keyed by {', '.join(known)}"
            )
        by_retry = tuple(
            (name, *_expectations_from(per[name], f"{where}.expected.by_retry.{name}", revision))
            for name in known
            if name in per
        )
        return cls(vid, revision, scenario, expected, alternatives, by_retry)


def expectation_data(exp: Expectation, alternatives: Sequence[Expectation]) -> dict[str, Any]:
    """An expectation as data, with its ``alternatives`` if it has any."""
    data = exp.to_data()
    if alternatives:
        data["alternatives"] = [a.to_data() for a in alternatives]
    return data


def _expectations_from(
    raw: Any, where: str, revision: str
) -> tuple[Expectation, tuple[Expectation, ...]]:
    """An expectation object and its ``alternatives``."""
    expected = Expectation.from_data(raw, where, revision)
    alts = raw.get("alternatives", [])
    if not isinstance(alts, list):
        raise VectorError(f"{where}.alternatives: expected a list")
    alternatives = tuple(
        Expectation.from_data(a, f"{where}.alternatives[{i}]", revision)
        for i, a in enumerate(alts)
    )
    return expected, alternatives


def _vector_error(where: str, message: str) -> VectorError:
    return VectorError(f"{where}: {message}")


def load_vectors(path: str | Path) -> list[Vector]:
    """Parse a vectors file (``-``: stdin); a bad line raises :class:`VectorError` naming file
    and line.

    A vectors file is untrusted input: a line holds at most :data:`MAX_LINE_BYTES` bytes of
    UTF-8 JSON nesting at most :data:`MAX_DEPTH` levels, a file has at most :data:`MAX_VECTORS`
    lines and at least one vector, and no id appears twice.  It is read by the shared reader of
    :mod:`toolcancel.contract.fileio`.
    """
    from ...contract.fileio import InputError, decode_json, line_batches, open_input, source_name

    p = source_name(path)
    out: list[Vector] = []
    ids: dict[str, int] = {}
    try:
        with open_input(path) as f:
            batches = line_batches(
                f, p, max_line_bytes=MAX_LINE_BYTES, max_lines=MAX_VECTORS
            )
            for before, lines, last in batches:
                for n, line in enumerate(lines, before + 1):
                    if not line.strip():
                        continue
                    truncated = last and n == before + len(lines)
                    data = decode_json(
                        line, f"{p}:{n}", max_depth=MAX_DEPTH, truncated=truncated,
                        error=_vector_error,
                    )
                    vector = Vector.from_data(data, f"{p}:{n}")
                    if vector.id in ids:
                        raise VectorError(
                            f"{p}:{n}: vector id {_show(vector.id)} already used on line "
                            f"{ids[vector.id]}"
                        )
                    ids[vector.id] = n
                    out.append(vector)
    except InputError as exc:
        raise VectorError(str(exc)) from None
    except OSError as exc:
        raise VectorError(f"{p}: cannot read ({exc.strerror})") from None
    if not out:
        raise VectorError(f"{p}: the file holds no vectors")
    return out


def vectors_file(directory: str | Path, revision: str) -> Path:
    return Path(directory) / f"{revision}.jsonl"


def stageless_file(directory: str | Path, revision: str) -> Path:
    """The stage-less family of ``revision``: vectors kept per scenario, not per path, for a
    runtime without the pipeline's optional stages
    (:func:`toolcancel.selfcheck.vectorgen.generate_stageless`); conform adds them to a run whose
    hello lacks a capability."""
    return Path(directory) / f"stageless-{revision}.jsonl"


def shipped_dir() -> Path:
    """Where the committed vectors live: ``vectors/`` next to contract.toml (``spec/``)."""
    return Path(str(resources.files("toolcancel.spec").joinpath("vectors")))


def shipped_vectors(revision: str) -> list[Vector]:
    """The committed vectors of ``revision``."""
    return load_vectors(vectors_file(shipped_dir(), revision))


def shipped_stageless(revision: str) -> list[Vector]:
    """The committed stage-less family of ``revision`` (:func:`stageless_file`)."""
    return load_vectors(stageless_file(shipped_dir(), revision))


_SCENARIO_FIELDS: Final = tuple(f.name for f in fields(Scenario))


def scenario_data(s: Scenario) -> dict[str, Any]:
    """``s.to_data()`` without :func:`dataclasses.asdict`'s deep copy (a scenario holds only
    strings, booleans and a tuple of strings), for the thousands of messages a run sends."""
    data = {name: getattr(s, name) for name in _SCENARIO_FIELDS}
    data["wrappers"] = list(s.wrappers)
    return data


def canonical(data: Any) -> str:
    """``data`` as one line of canonical JSON (sorted keys, no spaces): what two results are
    compared by."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# ------------------------------------------------------------------------------------------------
# From a run to an expectation
# ------------------------------------------------------------------------------------------------


def expectation(
    obs: Observation,
    paths: Sequence[Sequence[str]] | None = None,
    departs_from: Sequence[str] = (),
) -> Expectation:
    """What the reference's run shows, as an expectation (its own path unless ``paths``).
    ``departs_from``: rules a deviation's model breaks on purpose (their problems are its
    behaviour, not an unclean run)."""
    problems = [(rule, why) for rule, why in obs.problems if rule not in departs_from]
    if obs.result is None or obs.error is not None or problems or not obs.path:
        raise VectorError(
            f"the reference registry did not run {obs.scenario.as_code()} cleanly: "
            f"error {obs.error!r}, problems {problems}"
        )
    final = obs.path[-1].outcome
    assert final is not None
    own = tuple(p.event for p in obs.path)
    return Expectation(
        result=json.loads(obs.result.to_json()),
        outcome=final,
        body_starts=obs.body_starts,
        body_signals=tuple(body_signals(obs)),
        notifications=len(obs.notified),
        paths=(own,) if paths is None else tuple(tuple(p) for p in paths),
        post_received=post_received(obs),
    )


def render(vectors: Iterable[Vector]) -> str:
    """The file text: one vector per line, sorted by id."""
    return "".join(v.to_line() + "\n" for v in sorted(vectors, key=lambda v: v.id))


# ------------------------------------------------------------------------------------------------
# The JSON Schema, generated from the vocabulary and the contract
# ------------------------------------------------------------------------------------------------


def schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of one vector line, built from the scenario vocabulary and the
    contract's events and outcomes, so it cannot drift from either."""
    contract = load_contract()
    events = [e.name for e in contract.events]
    outcomes = [o.name for o in contract.outcomes]
    gate = "^(pre|approval|body|post|w[0-9]+_(before|after))$"

    def enum(values: Iterable[str]) -> dict[str, Any]:
        return {"type": "string", "enum": list(values)}

    scenario = {
        "type": "object",
        "additionalProperties": False,
        "required": [
            "revision",
            "caller",
            "args",
            "agent",
            "approval_seam",
            "tool_known",
            "pre",
            "approval",
            "guard",
            "wrappers",
            "timeout",
            "body",
            "cooperative",
            "post",
            "observer",
            "cancel",
        ],
        "properties": {
            "revision": enum(REVISIONS),
            "caller": enum(c for c in CALLERS if c != "task"),  # task: verify's alone
            "args": enum(ARGS),
            "agent": {"type": "boolean"},
            "approval_seam": {"type": "boolean"},
            "tool_known": {"type": "boolean"},
            "pre": enum(PRE),
            "approval": enum(APPROVALS),
            "guard": enum(GUARDS),
            "wrappers": {
                "type": "array",
                "items": enum(WRAPPERS),
                "description": "Around-dispatch wrappers, outermost first (README: Wrappers). "
                f"outer_deadline: the environment puts in the slot deadline(<the slot's value>, "
                f"{OUTER_MS}, 'TOOL_TIMEOUT') made by the registry's own deadline function, the "
                f"one its timeout policy calls, so that it aborts with the same kind of timeout "
                f"reason as the policy's own (code TOOL_TIMEOUT, ms {OUTER_MS}); it fires first, "
                "at the body gate. Classifying it by code is the declared deviation D13.",
            },
            "timeout": {
                **enum(TIMEOUTS),
                "description": f"budget: the definition declares timeoutMs {BUDGET_MS} and the "
                "timeout policy is the innermost wrapper; timer_first: the same, and the clock "
                f"passes {BUDGET_MS} ms at the body gate.",
            },
            "body": enum(BODIES),
            "cooperative": {"type": "boolean"},
            "post": enum(POSTS),
            "observer": enum(OBSERVERS),
            "cancel": {
                "type": "string",
                "pattern": f"^(never|before_entry|after|{SAME_STEP}|gate:{gate[1:-1]})$",
                "description": f"{SAME_STEP}: only with a live caller and timeout timer_first, "
                "the caller aborts at the body gate in the same synchronous step as the clock "
                f"passes {BUDGET_MS} ms (R34: either source may be first, each order has its "
                "expectation).",
            },
        },
    }
    expectation_props: dict[str, Any] = {
        "result": {"$ref": "#/$defs/result"},
        "outcome": enum(outcomes),
        "body_starts": {"type": "integer", "minimum": 0},
        "contexts": {"type": "array"},
        "notifications": {"type": "integer", "minimum": 0},
        "body_signals": {
            "description": "Per body invocation: was the signal it received aborted when it "
            "settled, and whose reason did it carry.",
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["aborted", "reason"],
                "properties": {
                    "aborted": {"type": "boolean"},
                    "reason": {"enum": [*REASONS, None]},
                },
            },
        },
        "post_received": {
            "description": "The result post-execute received, without meta (null: post-execute "
            "did not run). Absent in vectors written before it was recorded.",
            "type": ["object", "null"],
        },
        "paths": {
            "description": "Allowed sequences of contract events, each caller_abort and "
            "fused_abort at its earliest place; a registry may notice an abort later, or not at "
            "all, while no other event's transition depends on it (README: When an abort is "
            "noticed).",
            "type": "array",
            "minItems": 1,
            "items": {"type": "array", "items": enum(events)},
        },
    }
    required = ["result", "outcome", "body_starts", "contexts", "notifications",
                "body_signals", "paths"]  # fmt: skip
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://toolcancel.dev/spec/vectors/vector.schema.json",
        "title": "toolcancel conformance vector",
        "description": "One line of spec/vectors/<revision>.jsonl. Generated by `toolcancel "
        "vectors` from the scenario vocabulary and spec/contract.toml; do not edit by hand.",
        "type": "object",
        "additionalProperties": False,
        "required": ["vector", "id", "revision", "scenario", "expected"],
        "properties": {
            "vector": {"const": FORMAT},
            "id": {"type": "string", "pattern": "^(seed|revised)-s?[0-9]{5}$"},
            "revision": enum(REVISIONS),
            "scenario": {"$ref": "#/$defs/scenario"},
            "expected": {
                "type": "object",
                "additionalProperties": False,
                "required": required,
                "properties": {
                    **expectation_props,
                    "alternatives": {"$ref": "#/$defs/alternatives"},
                    "by_retry": {
                        "description": "For a retry behaviour (D11) under which the scenario "
                        "ends otherwise than under the contract's default "
                        f"({load_contract().default_retry}): what an implementation declaring "
                        "it must do instead (the expected fields and alternatives above).",
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            name: {"$ref": "#/$defs/retry_expectation"}
                            for name in load_contract().retry_names
                        },
                    },
                },
            },
        },
        "$defs": {
            "scenario": scenario,
            "alternatives": {
                "description": "Other outcomes the contract allows (a MAY point), each with the "
                "paths that lead to it.",
                "type": "array",
                "items": {"$ref": "#/$defs/alternative"},
            },
            "retry_expectation": {
                "type": "object",
                "additionalProperties": False,
                "required": required,
                "properties": {
                    **expectation_props,
                    "alternatives": {"$ref": "#/$defs/alternatives"},
                },
            },
            "alternative": {
                "type": "object",
                "additionalProperties": False,
                "required": required,
                "properties": expectation_props,
            },
            "result": {
                "type": "object",
                "additionalProperties": False,
                "required": ["content", "isError"],
                "properties": {
                    "content": {"type": "array"},
                    "isError": {"type": "boolean"},
                    "error": {"type": "object"},
                    "additionalContexts": {"type": "array", "minItems": 1},
                    "meta": {},
                },
            },
        },
    }


def schema_text() -> str:
    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"
