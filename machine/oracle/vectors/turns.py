"""Turn vectors: the agent-loop scheduler's rules (R36-R38, R9), for any implementation.

A call vector (:mod:`toolcancel.oracle.vectors`) is one registry call; the scheduler sits above that
boundary.  A turn vector is one batch of model calls run under one turn signal
(:class:`toolcancel.oracle.turn_language.Turn`: the calls' kinds, the gate at which the turn
aborts, the
order gates are released in).  An adapter that declares ``turns`` in its hello runs it through
its own scheduler and reports what the environment saw: the hooks', bodies' and observer's
events in order, the turn's log, and when ``run_turn`` returned (``spec/vectors/README.md``,
turns).  ``toolcancel conform`` judges that in two steps:

1. :func:`toolcancel.oracle.judge.turns.turn_problems` -- the rules as CONTRACT.md states them, read
from
   the events and the log, the same function ``toolcancel verify`` checks the reference with.
   It does not assume the reference's grouping (a MAY): one call at a time passes as well.
2. Each started call against what the contract gives a call of its kind when the turn aborted at
   its *phase* (the last event of its own before the abort: ``pre``, ``body_start``, ...; ``never``
   without an abort): its own events and its published result; where they differ, the call's
   record (:func:`toolcancel.oracle.judge.turns.turn_call_record`) asked the call checks names the
   rule, else the scheduler's checks and the contract's outcomes do.  The table is the reference's,
   gathered over every turn of the revision (:func:`generate`); a phase the reference never
   reaches (a scheduler that groups otherwise may) is judged by step 1 alone.

Vectors are kept one per distinct (batch, event sequence, log) of the reference, in enumeration
order, so ``toolcancel vectors --check`` compares bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ...contract.errors import ToolcancelError
from ...contract.loader import load_contract
from ...contract.results import canonical_json
from ..judge.calls import error_code, no_late_start_or_success
from ..judge.turns import (
    SKIPPED_RULE,
    TURN_HOOKS,
    TURN_RULES,
    TURN_STARTS,
    TurnRecord,
    turn_call_record,
    turn_problems,
)
from ..turn_language import KIND_OUTCOMES, KINDS, RELEASES, Turn

OWN_EVENTS: Final = ("pre", "pre_done", "body_start", "body_settle", "post", "post_done", "notify")
"""What an adapter records of each call, in the order one call can show them."""
EVENTS: Final = ("abort", *OWN_EVENTS)
LOG_KINDS: Final = ("tool/call", "tool/result", "context")
RULES: Final = TURN_RULES
"""The rules every turn vector exercises."""
NEVER: Final = "never"
MAX_BYTES: Final = 64 << 20
"""The largest turn vectors file read (they are a few megabytes)."""


class TurnVectorError(ToolcancelError):
    """A turn vectors file that cannot be used (naming file and line)."""


def turn_file(directory: str | Path, revision: str) -> Path:
    return Path(directory) / f"turns-{revision}.jsonl"


def own_events(call: str, events: Sequence[Mapping[str, Any]]) -> list[str]:
    return [e["event"] for e in events if e.get("call") == call]


def phase_of(call: str, events: Sequence[Mapping[str, Any]]) -> str:
    """Where ``call`` was when the turn aborted: its last own event before the abort (``none``
    if it had none yet), or ``never`` when the turn did not abort."""
    last = "none"
    for e in events:
        if e["event"] == "abort":
            return last
        if e.get("call") == call:
            last = e["event"]
    return NEVER


def _variant(call: str, events: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """A started call's own events and the result it was notified with (None: not notified
    exactly once, which step 1 reports)."""
    results = [e["result"] for e in events if e.get("call") == call and e["event"] == "notify"]
    if len(results) != 1:
        return None
    return {"events": own_events(call, events), "result": results[0]}


@dataclass(frozen=True)
class TurnTable:
    """The first line of a turn vectors file: the revision's synthetic result (R9) and, per
    call id and kind, phase -> the (events, result) variants the contract gives such a call
    when the turn aborted there (a body's text names its call).  One table serves every vector
    of the file."""

    revision: str
    skipped: Mapping[str, Any]
    calls: Mapping[str, Mapping[str, Mapping[str, tuple[Mapping[str, Any], ...]]]]

    def allowed(self, call: str, kind: str, phase: str) -> tuple[Mapping[str, Any], ...] | None:
        return self.calls.get(call, {}).get(kind, {}).get(phase)

    def to_line(self) -> str:
        data = {
            "turn_table": 1,
            "revision": self.revision,
            "skipped": self.skipped,
            "calls": {
                call: {
                    kind: {phase: [dict(v) for v in vs] for phase, vs in phases.items()}
                    for kind, phases in kinds.items()
                }
                for call, kinds in self.calls.items()
            },
        }
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_data(cls, data: Any, where: str) -> TurnTable:
        if not isinstance(data, Mapping) or data.get("turn_table") != 1:
            raise TurnVectorError(f"{where}: the first line must be the turn table (turn_table: 1)")
        revision, skipped, calls = data.get("revision"), data.get("skipped"), data.get("calls")
        if revision not in ("seed", "revised") or not isinstance(skipped, Mapping):
            raise TurnVectorError(f"{where}: needs a revision and the skipped result")
        if not isinstance(calls, Mapping) or not all(
            isinstance(kinds, Mapping)
            and all(
                k in KINDS
                and isinstance(phases, Mapping)
                and all(
                    isinstance(vs, list)
                    and all(
                        isinstance(v, Mapping) and v.keys() == {"events", "result"} for v in vs
                    )
                    for vs in phases.values()
                )
                for k, phases in kinds.items()
            )
            for kinds in calls.values()
        ):
            raise TurnVectorError(
                f"{where}.calls: call -> kind -> phase -> [{{events, result}}]"
            )
        table = {
            c: {k: {p: tuple(vs) for p, vs in phases.items()} for k, phases in kinds.items()}
            for c, kinds in calls.items()
        }
        return cls(revision, skipped, table)


@dataclass(frozen=True)
class TurnVector:
    """A turn of a revision, judged with its file's :class:`TurnTable`."""

    id: str
    revision: str
    turn: Turn
    table: TurnTable

    @property
    def rules(self) -> frozenset[str]:
        return RULES

    def turn_data(self) -> dict[str, Any]:
        return {"calls": list(self.turn.kinds), "abort": self.turn.abort,
                "release": self.turn.release}  # fmt: skip

    def to_line(self) -> str:
        data = {"turn_vector": 1, "id": self.id, "revision": self.revision,
                "turn": self.turn_data()}  # fmt: skip
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    def message(self, protocol: int) -> bytes:
        msg = {"protocol": protocol, "type": "turn", "id": self.id, "revision": self.revision,
               "turn": self.turn_data()}  # fmt: skip
        return (json.dumps(msg, separators=(",", ":")) + "\n").encode()

    @classmethod
    def from_data(cls, data: Any, where: str, table: TurnTable) -> TurnVector:
        if not isinstance(data, Mapping) or data.get("turn_vector") != 1:
            raise TurnVectorError(f"{where}: expected a turn vector object (turn_vector: 1)")
        vid, revision = data.get("id"), data.get("revision")
        if not isinstance(vid, str) or revision != table.revision:
            raise TurnVectorError(f"{where}: needs a string id and the table's revision")
        return cls(vid, revision, parse_turn(data.get("turn"), revision, f"{where}.turn"), table)


def parse_turn(data: Any, revision: str, where: str) -> Turn:
    """A turn of the message/vector form ``{calls, abort, release}`` (error naming ``where``)."""
    if not isinstance(data, Mapping) or data.keys() != {"calls", "abort", "release"}:
        raise TurnVectorError(f"{where}: expected {{calls, abort, release}}")
    kinds, abort, release = data["calls"], data["abort"], data["release"]
    if not isinstance(kinds, list) or not kinds or not all(k in KINDS for k in kinds):
        raise TurnVectorError(f"{where}.calls: a non-empty list of {', '.join(KINDS)}")
    gates = {f"gate:{i}:{g}" for i in range(len(kinds)) for g in ("pre", "body", "post")}
    if abort not in {"never", "before_turn", *gates}:
        raise TurnVectorError(f"{where}.abort: never, before_turn or gate:<i>:<pre|body|post>")
    if release not in RELEASES:
        raise TurnVectorError(f"{where}.release: one of {', '.join(RELEASES)}")
    return Turn(revision, tuple(kinds), abort, release)


def render(vectors: Sequence[TurnVector]) -> str:
    """The file text: the table, then one vector per line."""
    return "".join(line + "\n" for line in (vectors[0].table.to_line(), *map(_line, vectors)))


def _line(v: TurnVector) -> str:
    return v.to_line()


def load_turn_vectors(path: str | Path) -> list[TurnVector]:
    """The turn vectors of a file (``TurnVectorError`` naming the line that is wrong)."""
    from ...contract.fileio import InputError, decode_json, read_bytes, utf8_text

    try:
        text = utf8_text(read_bytes(path, MAX_BYTES, "turn vectors file"), str(path))
    except InputError as exc:
        raise TurnVectorError(str(exc)) from None
    out: list[TurnVector] = []
    table: TurnTable | None = None
    ids: set[str] = set()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        data = decode_json(line, f"{path}:{n}", max_depth=64, error=_error)
        if table is None:
            table = TurnTable.from_data(data, f"{path}:{n}")
            continue
        vector = TurnVector.from_data(data, f"{path}:{n}", table)
        if vector.id in ids:
            raise TurnVectorError(f"{path}:{n}: vector id {vector.id!r} used twice")
        ids.add(vector.id)
        out.append(vector)
    if not out:
        raise TurnVectorError(f"{path}: the file holds no turn vectors")
    return out


def _error(where: str, message: str) -> TurnVectorError:
    return TurnVectorError(f"{where}: {message}")


# ------------------------------------------------------------------------------------------------
# Judging an answer
# ------------------------------------------------------------------------------------------------


def answer_problem(answer: Mapping[str, Any], n: int) -> str | None:
    """What is wrong with the shape of a turn answer for a batch of ``n`` calls, or None."""
    ids = {f"c{i}" for i in range(n)}
    log, observed = answer.get("log"), answer.get("observed")
    if not isinstance(log, list) or not all(
        isinstance(e, dict)
        and e.keys() == {"kind", "callId", "payload"}
        and e["kind"] in LOG_KINDS
        and isinstance(e["callId"], str)
        for e in log
    ):
        return "the answer's log must be a list of {kind, callId, payload} entries"
    if not isinstance(observed, dict):
        return "the answer needs an observed object"
    events = observed.get("events")
    if not isinstance(events, list) or not all(_is_event(e, ids) for e in events):
        return (
            "observed.events must be a list of {event, call} objects (event one of "
            f"{', '.join(EVENTS)}; abort without call; notify with the result object)"
        )
    returned = observed.get("returned", ...)
    if returned is ... or (
        returned is not None and (type(returned) is not int or not 0 <= returned <= len(events))
    ):
        return "observed.returned must be an event count (or null if run_turn never returned)"
    return None


def _is_event(e: Any, ids: set[str]) -> bool:
    if not isinstance(e, dict) or e.get("event") not in EVENTS:
        return False
    if e["event"] == "abort":
        return e.keys() == {"event"}
    if e["event"] == "notify":
        return e.keys() == {"event", "call", "result"} and isinstance(e["result"], dict)
    return e.keys() == {"event", "call"} and e["call"] in ids


def _record(v: TurnVector, answer: Mapping[str, Any]) -> TurnRecord:
    observed = answer["observed"]
    return TurnRecord(
        len(v.turn.kinds), observed["events"], answer["log"], observed["returned"],
        v.table.skipped,
    )  # fmt: skip


def exercised(v: TurnVector, answer: Mapping[str, Any]) -> frozenset[str]:
    """The turn rules a well-formed ``answer`` could have failed: every one, but R9 only where
    a call never started (its synthetic result is then what R9 judges)."""
    started = _record(v, answer).first()
    never = any(f"c{i}" not in started for i in range(len(v.turn.kinds)))
    return RULES if never else RULES - {SKIPPED_RULE}


def broken(v: TurnVector, answer: Mapping[str, Any]) -> tuple[str, ...]:
    """Every rule the turn's own checks find broken in ``answer``, in the order they show."""
    return tuple(dict.fromkeys(rule for rule, _ in turn_problems(_record(v, answer))))


def judge(v: TurnVector, answer: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """The first problem of a well-formed answer: (rule, step, explanation), or None.  Each
    started call is a record of the call checks (:func:`toolcancel.oracle.judge.turns.
    turn_call_record`): a body started or a success published after the turn signal, its caller
    signal, aborted is the late-start check's; another path is the scheduler's (where it ran
    post-execute: its hooks' rule; else what it started after the abort), another result the
    rule of the outcome the contract gives."""
    events = answer["observed"]["events"]
    found = turn_problems(_record(v, answer))
    if found:
        return found[0][0], "turn", found[0][1]
    for i, kind in enumerate(v.turn.kinds):
        call = f"c{i}"
        phase = phase_of(call, events)
        allowed = v.table.allowed(call, kind, phase)
        variant = _variant(call, events)
        if allowed is None or variant is None:
            continue  # a phase the reference never reaches: the rules above judged it
        record = turn_call_record(call, events, v.revision)
        late = no_late_start_or_success(record, None) if record.has("caller_aborted") else None
        seen, paths = variant["events"], [list(a["events"]) for a in allowed]
        where = f"{call} ({kind}, turn aborted at its {phase})"
        if any(seen == p for p in paths):
            if any(canonical_json(variant["result"]) == canonical_json(a["result"])
                   for a in allowed):  # fmt: skip
                continue
            want = " or ".join(canonical_json(a["result"]) for a in allowed)
            return late.rule if late else _outcome_rule(v.revision, kind, allowed), "turn_result", (
                f"{where} published {canonical_json(variant['result'])}; the contract gives {want}"
                + ("" if phase == NEVER else " (the turn signal is its caller signal)")
            )
        rule = TURN_STARTS
        if late is not None:
            rule = late.rule
        elif ("post" in seen) != any("post" in w for w in paths):
            rule = TURN_HOOKS
        return rule, "turn_calls", (
            f"{where} went through {seen}; the contract takes it through "
            f"{' or '.join(map(str, paths))}"
        )
    return None


def _outcome_rule(revision: str, kind: str, allowed: Sequence[Mapping[str, Any]]) -> str:
    """The rule of the outcome the contract gives a call of ``kind`` whose allowed results are
    ``allowed``: the cancellation's, by its code, where they carry one; else the kind's own."""
    outcomes = load_contract().revision(revision).outcomes
    by_code = {o.code: o.rule for o in outcomes if o.code}
    for a in allowed:
        code = error_code(a["result"])
        if code in by_code:
            return by_code[code]
    return next(o.rule for o in outcomes if o.name == KIND_OUTCOMES[kind])
