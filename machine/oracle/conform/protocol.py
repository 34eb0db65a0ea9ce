"""The adapter protocol's messages, as ``toolcancel conform`` reads and writes them.

What travels between the runner and an adapter (JSON Lines, documented field by field in
``spec/vectors/README.md``): the hello (:func:`hello_problem`), one vector message per vector
(:func:`vector_message`), one answer per vector (:func:`parse_answer`, then
:func:`answer_problem` or :func:`outcome_problem` for its fields, by level).  Each problem is
one sentence for a protocol failure; nothing here runs a process or judges a rule.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from ...contract.errors import ToolcancelError
from ...contract.fileio import STRICT, json_depth
from ...contract.loader import load_contract
from ...contract.trace import MAX_DEPTH
from ..vectors import Vector, scenario_data
from .capabilities import Capabilities, CapabilityError
from .deviations import problem as deviation_problem

PROTOCOL: Final = 2
"""The adapter protocol this runner speaks; it also accepts an adapter of :data:`PROTOCOLS`."""
PROTOCOLS: Final = (1, 2)
"""Version 2 added the hello's ``retry`` (D11) and ``level``; a version-1 adapter is judged as
declaring the contract's default retry behaviour, which is what version-1 vectors assumed, at
level ``trace``."""
LEVELS: Final = ("trace", "outcome")
"""Conformance levels a protocol-2 hello declares (default ``trace``): the full trace, or only
what a user of the registry sees."""

ANSWER_DEPTH: Final = MAX_DEPTH + 2
"""Deepest JSON nesting of an answer: its trace lines (two levels down) nest at most
:data:`toolcancel.contract.trace.MAX_DEPTH` levels themselves."""
QUOTE: Final = 200
"""How much of an unusable line an error message quotes."""

PROTOCOL_RULE: Final = "protocol"
"""The pseudo rule id under which adapter failures (hang, crash, garbage, refusal) count."""


class ConformError(ToolcancelError):
    """The run cannot start or go on: a bad adapter command, no hello, an unknown revision."""


def quote(text: str | bytes) -> str:
    """A line for an error message: decoded, stripped, cut at :data:`QUOTE` characters."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.rstrip("\r\n")
    return repr(text if len(text) <= QUOTE else text[:QUOTE] + "…")


_SIGNAL_KEYS: Final = frozenset({"aborted", "reason"})
_REASONS: Final = (None, "caller", "wrapper", "timeout", "other")


def _is_signal(b: Any) -> bool:
    """Whether ``b`` is a signal observation: ``{aborted, reason}``, a reason exactly when it
    aborted (a live signal has none; an aborted one always has one, ``other`` if unknown)."""
    return (
        isinstance(b, dict)
        and b.keys() == _SIGNAL_KEYS
        and isinstance(b["aborted"], bool)
        and b["reason"] in _REASONS
        and (b["reason"] is None) is not b["aborted"]
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
    aborted = observed.get("caller_aborted")
    if aborted is not None and not (
        isinstance(aborted, dict)
        and aborted.keys() == {"bodies_after", "before_post"}
        and _is_count(aborted["bodies_after"])
        and type(aborted["before_post"]) is bool
    ):
        return (
            "observed.caller_aborted must be {bodies_after: count, before_post: bool} (or absent)"
        )
    if type(observed.get("caller_cancelled", False)) is not bool:
        return "observed.caller_cancelled must be true or false (or absent)"
    deadline = observed.get("deadline")
    if deadline is not None and not (
        isinstance(deadline, dict)
        and deadline.keys() == {"expired", "outer"}
        and all(type(x) is bool for x in deadline.values())
    ):
        return "observed.deadline must be {expired, outer} booleans (or absent)"
    return _contradiction(answer)


def _contradiction(answer: Mapping[str, Any]) -> str | None:
    """Which field of a well-shaped answer contradicts another, or None: each is a value no
    registry can make, so a verdict built on it would judge what did not happen."""
    observed = answer["observed"]
    if answer["result"] is not None and observed["raised"] is not None:
        return (
            "observed.raised is given with a result: execute() either returned (raised null) "
            "or raised (result null), never both"
        )
    if observed.get("caller_cancelled") and answer["result"] is None and observed["raised"] is None:
        return (
            "observed.caller_cancelled is true with neither a result nor a raise: it says the "
            "caller's own cancellation came back to it, after the result in `result` (what the "
            "observers got) or as what execute() raised (`raised`)"
        )
    if observed["notifications"] == 0 and observed.get("notified_same") is False:
        return (
            "observed.notified_same is false with no notification: it is true when there was none"
        )
    if observed["notifications"] == 0 and observed.get("frozen") is not None:
        return (
            "observed.frozen is given with no notification: an observer's first notification "
            "reports it"
        )
    left = observed.get("listeners_left")
    if left is not None and left["leaks"] > left["watched"]:
        return (
            "observed.listeners_left.leaks exceeds watched: only watched signals can keep a "
            "listener"
        )
    if left is not None and "first" in left and left["leaks"] == 0:
        return (
            "observed.listeners_left.first is given with no leak: it names the first of the leaks"
        )
    return None


def _settling(answer: Mapping[str, Any], settled: bool, field: str) -> str | None:
    """Whether ``execute()`` settling (``settled``, from ``field``) agrees with the answer's
    result and raised: it settled exactly when it returned a result or raised."""
    ended = answer["result"] is not None or answer["observed"]["raised"] is not None
    if settled and not ended:
        return (
            f"{field} says execute() settled, yet the answer has neither a result nor raised "
            "(null both only when it never settled)"
        )
    if ended and not settled:
        return (
            f"{field} is null (execute() never settled), yet the answer has a "
            f"{'result' if answer['result'] is not None else 'raised error'}"
        )
    return None


def outcome_problem(answer: Mapping[str, Any]) -> str | None:
    """What is wrong with the shape of an outcome-level answer, or None."""
    if "trace" in answer:
        return "an outcome-level answer carries no trace (the hello declared level outcome)"
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
        and not (_is_settled(settled) and settled["bodies_started"] <= len(bodies))
    ):
        return (
            "observed.settled must be {bodies_started, bodies_settled} when execute() settled "
            "(or null if it never did)"
        )
    problem = _settling(answer, settled is not None, "observed.settled")
    if problem is not None:
        return problem
    if settled is not None and settled["bodies_settled"] > sum(
        b["settle"] is not None for b in bodies
    ):
        return (
            "observed.settled.bodies_settled exceeds the bodies with a settle in observed.bodies: "
            "a body that settled before execute() did has its settle observation"
        )
    aborted = observed.get("caller_aborted")
    if aborted is not None and aborted["bodies_after"] > len(bodies):
        return "observed.caller_aborted.bodies_after exceeds the bodies in observed.bodies"
    observed.setdefault("listeners", None)
    return None


def answer_problem(answer: Mapping[str, Any]) -> str | None:
    """What is wrong with the shape of a trace-level answer, or None."""
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
    if at is ... or (at is not None and not _is_length(at, trace)):
        return "observed.settled_at must be a trace length (or null if execute() never settled)"
    settled = observed.get("settled")
    if settled is not None and not _is_settled(settled):
        return (
            "observed.settled must be {bodies_started, bodies_settled} counts, no more settled "
            "than started (or absent)"
        )
    if settled is not None and at is None:
        return "observed.settled is given but observed.settled_at is null: execute() never settled"
    problem = _settling(answer, at is not None, "observed.settled_at")
    if problem is not None:
        return problem
    held, held_at = observed.get("held"), observed.get("held_at")
    if (held is None) != (held_at is None):
        return "observed.held and observed.held_at come together (or both absent)"
    if held is not None and not (
        isinstance(held, dict)
        and {"seconds"} <= held.keys() <= {"seconds", "went"}
        and _is_count(held["seconds"])
        and isinstance(held.get("went", ""), str)
    ):
        return "observed.held must be {seconds[, went]}: a count of seconds, went a string"
    if held_at is not None and not _is_length(held_at, trace):
        return "observed.held_at must be a trace length: the lines written when the hold began"
    return None


def _is_length(n: Any, trace: list[Any]) -> bool:
    """Whether ``n`` counts lines of ``trace`` (a position in it, its end included)."""
    return type(n) is int and 0 <= n <= len(trace)


def _is_settled(settled: Any) -> bool:
    """Whether ``settled`` is {bodies_started, bodies_settled}, no more settled than started."""
    return (
        isinstance(settled, dict)
        and settled.keys() == {"bodies_started", "bodies_settled"}
        and all(_is_count(n) for n in settled.values())
        and settled["bodies_settled"] <= settled["bodies_started"]
    )


class AdapterDied(Exception):
    """The adapter hung, exited, or wrote a line that is not an answer (message says which)."""


def hello_problem(hello: Mapping[str, Any]) -> str | None:
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


def vector_message(v: Vector, protocol: int = PROTOCOL) -> bytes:
    msg = {
        "protocol": protocol,
        "type": "vector",
        "id": v.id,
        "revision": v.revision,
        "scenario": scenario_data(v.scenario),
    }
    return (json.dumps(msg, separators=(",", ":")) + "\n").encode()


def parse_answer(line: bytes, vid: str, protocol: int = PROTOCOL) -> dict[str, Any]:
    try:  # the shared strict reader: no NaN, no key twice in one object
        text = line.decode("utf-8")
        answer = STRICT.decode(text)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise AdapterDied(f"the answer is not JSON: {quote(line)}") from None
    # each level opens a bracket: a line with few enough cannot nest too deeply, so the walk
    # is left out for it (about half of the answers of a run)
    deep = text.count("{") + text.count("[") > ANSWER_DEPTH
    if deep and json_depth(answer, ANSWER_DEPTH) > ANSWER_DEPTH:
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
