"""The canonical trace format: what one tool call did, as JSON Lines any registry can write.

A conformance oracle is only useful if implementations in other languages can feed it.  So the
oracle does not read our registry's memory: it reads a *trace*, one JSON object per line, that
any registry can produce by writing a line at each point where the contract decides something.

Every line is ``{"trace": 1, "call": "<call id>", "event": "<name>", ...fields}``.  Lines of
several concurrent calls may interleave; the lines of one call are in the order they happened.
The vocabulary is the contract's own events (``spec/contract.toml`` ``[[event]]``; their ``data``
observations are boolean fields that default to false, except ``tool_found`` and ``serializable``
which default to true) plus the observation events of :data:`OBSERVATIONS`, which say what the
registry did around the decisions: which stage started, which signal the body got, when the body
started and settled, which listeners it put on signals, the result it published and its single
notification.  :mod:`toolcancel.oracle.judge.checker` replays a trace against the contract.

This module is the format and its writing side: the vocabulary (the tables below, which say what
a line may hold), what a registry calls to write lines (:class:`TraceRecorder`, the line
templates) and the schema generated from the vocabulary.  Reading an untrusted trace back --
validating each line, grouping it per call, naming the file and line of bad input -- is
:mod:`toolcancel.contract.trace_reader`.  The registry imports only this module.

Limits (a trace is untrusted input): a line holds at most :data:`MAX_LINE_BYTES` bytes (1 MiB,
newline excluded), JSON nests at most :data:`MAX_DEPTH` levels, a file has at most
:data:`MAX_LINES` lines; the reader enforces them, the schema states them.

``spec/trace.schema.json`` is a JSON Schema of one line.  It is generated from the contract and
:data:`OBSERVATIONS` by :func:`trace_schema`, never written by hand: regenerate it with
``python -c "from toolcancel.contract.trace import write_schema; write_schema()"``;
``write_schema(check=True)`` compares instead of writing; a test fails when the committed file
is stale.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Final, NamedTuple, TypeVar

from .loader import Contract, load_contract
from .results import canonical_json

FORMAT_VERSION: Final = 1
MAX_LINE_BYTES: Final = 1 << 20
MAX_DEPTH: Final = 64
MAX_LINES: Final = 10_000_000

TraceSink = Callable[[dict[str, Any]], None]
"""What ``ToolRegistry(trace=...)`` takes: called synchronously with each line (a fresh dict)."""


class Field(NamedTuple):
    """One field of a trace event: its JSON type, allowed values, and default if optional."""

    type: str  # "boolean", "string", "integer" (never negative) or "object"
    values: tuple[str, ...] = ()  # for strings: the allowed values (empty: any string)
    required: bool = True
    default: Any = None
    doc: str = ""


def _enum(*values: str, doc: str = "") -> Field:
    return Field("string", values, doc=doc)


def _flag(doc: str = "") -> Field:
    return Field("boolean", doc=doc)


ENVIRONMENT_DOC: Final = "Environment observation (optional; a harness writes it, not a registry):"


OBSERVATIONS: Final[Mapping[str, tuple[str, Mapping[str, Field]]]] = {
    "call_entry": (
        "The first line of every call, before args_valid or args_invalid.",
        {
            "caller": _enum(
                "none", "live", "aborted", doc="the caller signal at entry: absent, live, aborted"
            ),
            "agent": _flag("the call carries an agent"),
            "approval_seam": _flag("an approval seam is mounted"),
            "revision": Field("string", doc="the contract revision the registry follows"),
            "retry": Field(
                "string",
                required=False,
                doc="the declared retry behaviour of next() (D11; default: the contract's "
                "default_retry)",
            ),
            "wrappers": Field(
                "integer",
                required=False,
                doc="how many around wrappers the call has (absent: unknown, and then which "
                "listener a next() hands out is not checked)",
            ),
        },
    ),
    "stage_enter": (
        "A hook stage starts (a wrapper's entry is the contract event wrapper_enter).",
        {"stage": _enum("pre", "approval", "guards", "post")},
    ),
    "slot": (
        "A hook changed the execution view's signal slot (optional: implementations may omit).",
        {
            "action": _enum("replace", "remove"),
            "aborted": _flag("the signal put in the slot was already aborted"),
        },
    ),
    "fused": (
        "The fused signal the body gets, built at base dispatch (right after base_dispatch).",
        {
            "kind": _enum(
                "none",
                "caller",
                "slot",
                "relay",
                doc="no signal, the caller's itself, the slot's itself, or a relay of both",
            ),
            "aborted": _flag("the fused signal was born aborted"),
        },
    ),
    "body_start": ("The tool body was invoked.", {}),
    "body_settle": (
        "The tool body settled (body_ok or body_raise follows).",
        {"how": _enum("ok", "raise")},
    ),
    "listener": (
        "The registry put a listener on, or removed one from, the caller's or the slot's signal.",
        {"signal": _enum("caller", "slot"), "action": _enum("add", "remove")},
    ),
    "result": (
        "The materialized final result (after publish), as canonical result JSON.",
        {"result": Field("object", doc="the result object: content, isError, error, ...")},
    ),
    "notify": ("The one notification of the result to observers.", {}),
    **{
        name: (f"{ENVIRONMENT_DOC} {doc}", fields)
        for name, (doc, fields) in {
            "body_signal": (
                "What one body invocation's signal showed when it started or settled, "
                "invocations in order (R17, R21, R25).",
                {
                    "at": _enum("start", "settle"),
                    "aborted": _flag("the signal was aborted"),
                    "reason": Field(
                        "string",
                        required=False,
                        doc="its reason, classified as the vectors do (absent: none)",
                    ),
                },
            ),
            "settled": (
                "execute() settled: how many body invocations had started and settled by then "
                "(R27).",
                {
                    "bodies_started": Field("integer"),
                    "bodies_settled": Field("integer"),
                },
            ),
            "returned": (
                "The object execute() returned, as canonical result JSON.",
                {"result": Field("object", doc="the result object")},
            ),
            "caller_cancelled": (
                "The caller gave up by cancelling the task awaiting execute(), and its await "
                "raised CancelledError after the call published its one result: returned holds "
                "that result, as the observers got it (R31: accepted only after exactly one "
                "result, when the caller did cancel that task after entry).",
                {},
            ),
            "raised": (
                "execute() raised instead of returning a result (R31).",
                {"error": Field("string", doc="what it raised, as type: message")},
            ),
            "notified": (
                "How often the caller's observers were notified, and whether every notification "
                "carried the very object execute() returned (R31).",
                {
                    "count": Field("integer"),
                    "same": Field("boolean", required=False, doc="absent: not observed"),
                },
            ),
            "listener_count": (
                "Listeners on the caller's signal before execute() and after it settled (R22).",
                {"before": Field("integer"), "after": Field("integer")},
            ),
            "post_received": (
                "The result post-execute received (R19, R20).",
                {"result": Field("object", required=False, doc="absent: post-execute never ran")},
            ),
            "frozen": (
                "Whether an observer's writes were refused by the published result (R30) and by "
                "the execution view's slot (R31).",
                {"result": _flag("the result refused a write"), "view": _flag("so did the view")},
            ),
            "approval_signal": (
                "Which signal the approval seam received (R24).",
                {"signal": _enum("pre_slot", "other")},
            ),
            "slot_after_next": (
                "Whether an around wrapper found in the slot, after its next() settled, the "
                "signal it handed on; one line per next(), in order (R23).",
                {"same": _flag("the slot held what the wrapper handed on")},
            ),
            "listeners_left": (
                "Listeners left, after execute() settled, on the signals the environment handed "
                "to the registry or got from it: the caller's, each wrapper's own, the view's "
                "slot and the body's fused signal (R22).",
                {
                    "watched": Field("integer", doc="how many such signals were counted"),
                    "leaks": Field("integer", doc="how many of them keep a listener"),
                    "first": Field(
                        "string", required=False, doc="the first that keeps one, in words"
                    ),
                },
            ),
            "caller_aborted": (
                "The environment aborted the caller's signal after entry, once the call had "
                "taken `steps` transitions (R28).",
                {
                    "steps": Field(
                        "integer", required=False, doc="absent: not counted (an adapter's answer)"
                    ),
                    "bodies_after": Field(
                        "integer", doc="body invocations that started at a later step"
                    ),
                    "before_post": _flag("post-execute had not been called yet"),
                },
            ),
            "signal_aborted": (
                "The environment aborted a signal that may feed a body's fused signal, or let a "
                "deadline fire; one line per abort, in the order it aborted them (R21, R34, "
                "R35).",
                {
                    "source": _enum(
                        "caller",
                        "wrapper",
                        "budget",
                        doc="the caller's signal, an around wrapper's own signal or deadline, or "
                        "the tool's own deadline (the timeout policy's budget)",
                    ),
                    "wrapper": Field(
                        "integer",
                        required=False,
                        doc="the wrapper's index, outermost first (a wrapper's source only)",
                    ),
                    "bodies_settled": Field(
                        "integer", doc="body invocations that had settled when it aborted"
                    ),
                },
            ),
            "registered": (
                "The environment registered a tool declaring the budget `timeout_ms`, before any "
                "call, and saw whether registration accepted it (R32).",
                {
                    "timeout_ms": Field("string", doc="the declared budget, as written"),
                    "valid": _flag("it is a positive finite number"),
                    "accepted": _flag("registration accepted it"),
                    "type_error": _flag("the refusal is a type error (the binding's language's)"),
                    "error": Field("string", required=False, doc="the refusal, as type: message"),
                },
            ),
            "begun_without_caller": (
                "The environment began a call with no caller signal, and saw whether the "
                "registry refused it as a usage error before the call existed (R40).",
                {"refused": _flag("it raised the usage error")},
            ),
            "deadline": (
                "The tool's own deadline (the timeout policy's budget), as the environment "
                "that controls its clock saw it (R35).",
                {
                    "expired": _flag(
                        "it may have expired first: its timer fired, or a body was held past it "
                        "with no enclosing deadline to expire before it"
                    ),
                    "outer": _flag("an enclosing deadline of the same code (a wrapper's) ran"),
                },
            ),
            "held": (
                "The environment held a body that ignores its aborted signal for `seconds` of "
                "virtual time, and saw whether the call moved on meanwhile (R27).",
                {
                    "seconds": Field("integer"),
                    "went": Field(
                        "string",
                        required=False,
                        doc="absent: the call kept waiting; else what it did (settled, or the "
                        "gate it went on to)",
                    ),
                },
            ),
        }.items()
    },
}
"""Observation events: not machine events, but what the trace rules of the checker read.  Those
of :data:`ENVIRONMENT` are optional: only a harness around the registry can see them."""

ENVIRONMENT: Final = frozenset(
    (
        "body_signal",
        "settled",
        "returned",
        "raised",
        "caller_cancelled",
        "notified",
        "listener_count",
        "post_received",
        "frozen",
        "approval_signal",
        "slot_after_next",
        "listeners_left",
        "held",
        "caller_aborted",
        "signal_aborted",
        "registered",
        "begun_without_caller",
        "deadline",
    )
)
"""Observation events only an environment sees (a reason's identity, what post-execute received,
the frozen result and view, listener counts): a harness writes them after the registry's own
lines, an adapter may, and :mod:`toolcancel.oracle.judge` reads them; the trace checker passes over
them."""

_DEFAULT_TRUE: Final = frozenset({"tool_found", "serializable"})
HEADER: Final = ("trace", "call", "event")
"""The fields every line starts with, in this order (:func:`encode_line`)."""


_T = TypeVar("_T")


def per_contract(build: Callable[[Contract], _T]) -> Callable[[Contract | None], _T]:
    """Memoize ``build`` per contract object (contracts hold dicts, so they are not hashable)."""
    memo: dict[int, tuple[Contract, _T]] = {}

    def get(contract: Contract | None = None) -> _T:
        c = contract or load_contract()
        hit = memo.get(id(c))
        if hit is None or hit[0] is not c:
            hit = (c, build(c))
            memo[id(c)] = hit
        return hit[1]

    get.__doc__ = build.__doc__
    return get


@per_contract
def vocabulary(c: Contract) -> Mapping[str, Mapping[str, Field]]:
    """Every event a trace line may name, with its fields: the contract's, then observations."""
    out: dict[str, Mapping[str, Field]] = {}
    for e in c.events:
        out[e.name] = {
            d: Field("boolean", required=False, default=d in _DEFAULT_TRUE, doc=f"{e.name} data")
            for d in e.data
        }
    for name, (_, fields) in OBSERVATIONS.items():
        out[name] = fields
    entry = dict(out["call_entry"])
    entry["retry"] = entry["retry"]._replace(values=c.retry_names, default=c.default_retry)
    out["call_entry"] = entry
    return out


# ------------------------------------------------------------------------------------------------
# Writing
# ------------------------------------------------------------------------------------------------


def encode_line(line: Mapping[str, Any]) -> str:
    """One trace line as text: trace, call, event first, then the other fields sorted.

    Values are canonical JSON (:func:`toolcancel.contract.results.canonical_json`), so the result
    object on a ``result`` line has exactly the bytes a cross-language comparison expects.
    """
    head = [f'"{k}":{canonical_json(line[k])}' for k in HEADER if k in line]
    rest = [f"{json.dumps(k)}:{canonical_json(line[k])}" for k in sorted(line) if k not in HEADER]
    return "{" + ",".join(head + rest) + "}"


def line_sink(sink: TraceSink) -> TraceSink:
    """What the registry calls with each line of ``sink``'s trace: a :class:`TraceRecorder`'s
    own list's ``append`` (no Python call per line), else ``sink`` itself."""
    return sink.lines.append if type(sink) is TraceRecorder else sink


def runs_code(sink: TraceSink) -> bool:
    """Whether calling ``sink`` may run code of anyone's: false only for a plain list's
    ``append`` (what :func:`line_sink` makes of a :class:`TraceRecorder`).  A sink that runs code
    can abort a signal between two steps, so the registry then offers every step on its own."""
    return not (type(sink) is _LIST_APPEND and type(getattr(sink, "__self__", None)) is list)


_LIST_APPEND: Final[type] = type([].append)


def line_template(fields: dict[str, Any]) -> dict[str, Any]:
    """A line with the header in front and the call id still blank: the registry copies it and
    sets ``call`` (cheaper than building a line from the header and the fields each time)."""
    return {"trace": FORMAT_VERSION, "call": "", **fields}


def line_templates() -> dict[tuple[Any, ...], dict[str, Any]]:
    """The template of every observation line whose fields are all enums or flags, keyed by the
    event and its fields' values in :data:`OBSERVATIONS`' order, e.g. ``("slot", "replace",
    False)``: every such line a registry can write, made once from the vocabulary."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for event, (_, fields) in OBSERVATIONS.items():
        choices: list[tuple[Any, ...]] = []
        for spec in fields.values():
            if spec.type == "boolean":
                choices.append((False, True))
            elif spec.type == "string" and spec.values:
                choices.append(spec.values)
            else:  # a free value (call_entry's revision, the result): built per call
                break
        else:
            for values in itertools.product(*choices):
                line = {"event": event, **dict(zip(fields, values, strict=True))}
                out[(event, *values)] = line_template(line)
    return out


class TraceRecorder:
    """A trace sink that keeps every line; pass it as ``ToolRegistry(trace=recorder)``.

    It only appends, so recording costs a list append per line; encoding happens in
    :meth:`jsonl` and :meth:`write`, after the calls ran.  A registry appends to :attr:`lines`
    directly (:func:`line_sink`): keep that list (``clear()`` it, never replace it).
    """

    __slots__ = ("lines",)

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def __call__(self, line: dict[str, Any]) -> None:
        self.lines.append(line)

    def __len__(self) -> int:
        return len(self.lines)

    def clear(self) -> None:
        self.lines.clear()

    def calls(self) -> dict[str, list[dict[str, Any]]]:
        """The lines of each call, calls in order of first appearance."""
        out: dict[str, list[dict[str, Any]]] = {}
        for line in self.lines:
            out.setdefault(line["call"], []).append(line)
        return out

    def jsonl(self) -> str:
        """The whole trace as JSON Lines text (one line per event, newline-terminated)."""
        return "".join(encode_line(line) + "\n" for line in self.lines)

    def write(self, path: str | Path) -> None:
        Path(path).write_text(self.jsonl(), encoding="utf-8")


# ------------------------------------------------------------------------------------------------
# The schema, generated
# ------------------------------------------------------------------------------------------------

SCHEMA_ID: Final = "https://toolcancel.dev/spec/trace.schema.json"


def trace_schema(contract: Contract | None = None) -> dict[str, Any]:
    """A JSON Schema (2020-12) of one trace line, built from the contract and the observations."""
    c = contract or load_contract()
    docs = {e.name: e.doc for e in c.events}
    docs.update({name: doc for name, (doc, _) in OBSERVATIONS.items()})
    branches = []
    for name, fields in vocabulary(c).items():
        props: dict[str, Any] = {
            "trace": {"$ref": "#/$defs/version"},
            "call": {"$ref": "#/$defs/call"},
            "event": {"const": name},
        }
        for f, spec in fields.items():
            prop: dict[str, Any] = {"type": spec.type}
            if spec.values:
                prop["enum"] = list(spec.values)
            if not spec.required:
                prop["default"] = spec.default
            if spec.doc:
                prop["description"] = spec.doc
            props[f] = prop
        if name == "call_entry":
            props["revision"]["enum"] = list(c.revisions)
            props["wrappers"]["minimum"] = 0
        branches.append(
            {
                "title": name,
                "description": docs[name],
                "type": "object",
                "properties": props,
                "required": [*HEADER, *(f for f, s in fields.items() if s.required)],
                "patternProperties": {"^x_": {}},
                "additionalProperties": False,
            }
        )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"toolcancel trace line, format {FORMAT_VERSION}",
        "description": "One line of a toolcancel trace (JSON Lines). GENERATED from "
        "spec/contract.toml and toolcancel.contract.trace.OBSERVATIONS by "
        "toolcancel.contract.trace.write_schema(); "
        f"do not edit. Limits: a line holds at most {MAX_LINE_BYTES} bytes, JSON nests at most "
        f"{MAX_DEPTH} levels, a file has at most {MAX_LINES} lines.",
        "$defs": {
            "version": {"const": FORMAT_VERSION, "description": "the trace format version"},
            "call": {"type": "string", "description": "the call id; lines of a call share it"},
        },
        "type": "object",
        "required": list(HEADER),
        "oneOf": branches,
    }


def schema_text(contract: Contract | None = None) -> str:
    return json.dumps(trace_schema(contract), indent=2, ensure_ascii=False) + "\n"


def schema_path() -> Path:
    """Where the schema lives: next to contract.toml (``spec/`` in a source checkout)."""
    return Path(str(resources.files("toolcancel.spec").joinpath("trace.schema.json")))


def write_schema(path: str | Path | None = None, *, check: bool = False) -> bool:
    """Write the generated schema; with ``check``, only compare.  True when the file is current.

    ``check=True`` raises nothing and writes nothing: the caller (a test) fails on False.
    """
    target = Path(path) if path is not None else schema_path()
    text = schema_text()
    try:
        current = target.read_text(encoding="utf-8")
    except OSError:
        current = None
    if check:
        return current == text
    if current != text:
        target.write_text(text, encoding="utf-8")
    return True
