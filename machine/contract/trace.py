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
notification.  :mod:`toolcancel.oracle.checker` replays a trace against the contract.

Why a reader this strict: a trace is evidence in a review.  A line the reader would have to guess
about (not JSON, not an object, an unknown event, a field of the wrong type, another format
version, a misspelt field) is refused with the file and line, never skipped or defaulted.
Fields whose names start with ``x_`` are the one extension point: implementations may add them
(timestamps, thread ids) and the reader ignores them.  Blank lines are ignored.

Limits (a trace is untrusted input): a line holds at most :data:`MAX_LINE_BYTES` bytes (1 MiB,
newline excluded), JSON nests at most :data:`MAX_DEPTH` levels, a file has at most
:data:`MAX_LINES` lines.

``spec/trace.schema.json`` is a JSON Schema of one line.  It is generated from the contract and
:data:`OBSERVATIONS` by :func:`trace_schema`, never written by hand: regenerate it with
``python -c "from toolcancel.contract.trace import write_schema; write_schema()"``;
``write_schema(check=True)`` compares instead of writing; a test fails when the committed file
is stale.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Final, NamedTuple, TypeVar, cast

from .errors import ToolcancelError
from .fileio import (
    STRICT,
    InputError,
    decode_json,
    input_size,
    line_batches,
    open_input,
    reject_constant,
    show,
    source_name,
)
from .fileio import json_depth as _json_depth
from .fileio import json_error_text as json_error_text
from .fileio import value_error_text as value_error_text
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
        "notified",
        "listener_count",
        "post_received",
        "frozen",
        "approval_signal",
        "slot_after_next",
        "listeners_left",
        "held",
        "caller_aborted",
        "deadline",
    )
)
"""Observation events only an environment sees (a reason's identity, what post-execute received,
the frozen result and view, listener counts): a harness writes them after the registry's own
lines, an adapter may, and :mod:`toolcancel.oracle.judge` reads them; the trace checker passes over
them."""

_DEFAULT_TRUE: Final = frozenset({"tool_found", "serializable"})
_HEADER: Final = ("trace", "call", "event")


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


class TraceError(ToolcancelError):
    """A trace that cannot be read: names the file and line, and what is wrong there."""

    def __init__(self, source: str, line: int | None, message: str) -> None:
        self.source = source
        self.line = line
        self.message = message
        where = source if line is None else f"{source}:{line}"
        super().__init__(f"{where}: {message}")


class TraceEvent(NamedTuple):
    """One validated line: its 1-based line number, its event name, and the whole object."""

    line: int
    event: str
    data: dict[str, Any]


Traces = dict[str, list[TraceEvent]]
"""A trace file split per call, calls in order of first appearance."""


# ------------------------------------------------------------------------------------------------
# Writing
# ------------------------------------------------------------------------------------------------


def encode_line(line: Mapping[str, Any]) -> str:
    """One trace line as text: trace, call, event first, then the other fields sorted.

    Values are canonical JSON (:func:`toolcancel.contract.results.canonical_json`), so the result
    object on a ``result`` line has exactly the bytes a cross-language comparison expects.
    """
    head = [f'"{k}":{canonical_json(line[k])}' for k in _HEADER if k in line]
    rest = [f"{json.dumps(k)}:{canonical_json(line[k])}" for k in sorted(line) if k not in _HEADER]
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
# Reading
# ------------------------------------------------------------------------------------------------


class _Spec(NamedTuple):
    keys: frozenset[str]  # every field name the event may carry, header included
    fields: tuple[tuple[str, type, frozenset[str] | None, bool], ...]  # name, type, values, req.
    nested: bool  # whether a field holds an object (its depth is checked)


@per_contract
def _specs(c: Contract) -> Mapping[str, _Spec]:
    out = {}
    for name, fields in vocabulary(c).items():
        out[name] = _Spec(
            frozenset(_HEADER) | frozenset(fields),
            tuple(
                (f, _TYPES[spec.type], frozenset(spec.values) or None, spec.required)
                for f, spec in fields.items()
            ),
            any(spec.type == "object" for spec in fields.values()),
        )
    return out


_TYPES: Final[Mapping[str, type]] = {
    "boolean": bool,
    "string": str,
    "integer": int,
    "object": dict,
}
_JSON_NAMES: Final = {
    bool: "a boolean",
    str: "a string",
    int: "a number",
    float: "a number",
    dict: "an object",
    list: "an array",
    type(None): "null",
}
_MISSING: Final = object()


def _json_type(value: Any) -> str:
    return _JSON_NAMES.get(type(value), type(value).__name__)


_decoder = json.JSONDecoder(parse_constant=reject_constant)
_scan: Callable[[str, int], tuple[Any, int]] = getattr(_decoder, "scan_once")  # noqa: B009
"""The JSON scanner itself: one C call per line (``raw_decode`` adds a Python frame).  It keeps
the last value of a repeated key, so the fast path takes a line only when it has exactly one
``:`` per field (no key twice, nothing nested); any other line goes through the strict decoder of
:mod:`toolcancel.contract.fileio`, which refuses a repeated key."""


def json_depth(value: Any) -> int:
    """Nesting depth of decoded JSON (a scalar is 0), without recursion.

    Counting stops a level past :data:`MAX_DEPTH`: a deeper value reports at least that."""
    return _json_depth(value, MAX_DEPTH)


def decode_line(text: str, source: str, line: int, *, truncated: bool = False) -> Any:
    """The JSON value of one line of text (``TraceError`` naming the line if it is not JSON,
    repeats a key or nests too deeply; ``truncated``: the file's last line, without newline)."""
    return decode_json(
        text,
        f"{source}:{line}",
        max_depth=MAX_DEPTH,
        truncated=truncated,
        error=lambda _where, message: TraceError(source, line, message),
    )


def _valid(obj: Any, specs: Mapping[str, _Spec], text: str | None = None) -> str | None:
    """The event name if ``obj`` is a valid line, else None (then :func:`validate` says why).

    The fast path of reading: no message is built for lines that are fine.  ``text``, the line
    ``obj`` was decoded from, saves the depth walk when it has too few brackets to nest deeply.
    """
    if type(obj) is not dict:
        return None
    version = obj.get("trace")
    event = obj.get("event")
    if type(version) is not int or version != FORMAT_VERSION or type(event) is not str:
        return None
    spec = specs.get(event)
    if spec is None or type(obj.get("call")) is not str or not obj.keys() <= spec.keys:
        return None
    for name, kind, values, required in spec.fields:
        value = obj.get(name, _MISSING)
        if value is _MISSING:
            if required:
                return None
        elif type(value) is not kind or (values is not None and value not in values):
            return None
        elif kind is int and cast(int, value) < 0:
            return None
    if spec.nested and (text is None or text.count("{") + text.count("[") > MAX_DEPTH):
        if any(type(v) is dict and json_depth(v) >= MAX_DEPTH for v in obj.values()):
            return None
    return event


def validate(obj: Any, source: str, line: int, contract: Contract | None = None) -> TraceEvent:
    """Check one decoded line against the vocabulary; return it as a :class:`TraceEvent`."""
    specs = _specs(contract)
    event = _valid(obj, specs)
    if event is not None:
        return TraceEvent(line, event, obj)
    if type(obj) is not dict:
        raise TraceError(source, line, f"expected a JSON object, got {_json_type(obj)}")
    version = obj.get("trace")
    if type(version) is not int or version != FORMAT_VERSION:
        if "trace" not in obj:
            raise TraceError(source, line, 'missing "trace" (the format version, 1)')
        if type(version) is int:
            raise TraceError(
                source,
                line,
                f"trace format version {version} is not supported (this checker reads "
                f"version {FORMAT_VERSION})",
            )
        raise TraceError(
            source, line, f'"trace" must be the format version 1, got {_json_type(version)}'
        )
    event = obj.get("event")
    if type(event) is not str:
        if "event" not in obj:
            raise TraceError(source, line, 'missing "event"')
        raise TraceError(source, line, f'"event" must be a string, got {_json_type(event)}')
    spec = specs.get(event)
    if spec is None:
        raise TraceError(source, line, f"unknown event {show(event)}")
    if type(obj.get("call")) is not str:
        if "call" not in obj:
            raise TraceError(source, line, 'missing "call" (the call id)')
        raise TraceError(
            source, line, f'"call" must be a string, got {_json_type(obj.get("call"))}'
        )
    for key in obj:
        if key not in spec.keys and not key.startswith("x_"):
            raise TraceError(
                source,
                line,
                f"unknown field {show(key)} on a {event} line (extensions must start with x_)",
            )
    for name, kind, values, required in spec.fields:
        if name not in obj:
            if required:
                raise TraceError(source, line, f"a {event} line needs the field {name!r}")
            continue
        value = obj[name]
        if type(value) is not kind:
            raise TraceError(
                source,
                line,
                f"field {name!r} of {event} must be {_JSON_NAMES[kind]}, got {_json_type(value)}",
            )
        if values is not None and value not in values:
            raise TraceError(
                source,
                line,
                f"field {name!r} of {event} must be one of {', '.join(sorted(values))}; "
                f"got {show(value)}",
            )
        if kind is int and cast(int, value) < 0:
            raise TraceError(source, line, f"field {name!r} of {event} must not be negative")
    for value in obj.values():
        if json_depth(value) >= MAX_DEPTH:
            raise TraceError(source, line, f"JSON nested deeper than {MAX_DEPTH} levels")
    return TraceEvent(line, event, obj)  # x_ fields nest freely... within the limit above


def entry_error(source: str, ev: TraceEvent, first_line: int | None) -> TraceError:
    """The error for a line that breaks "each call starts with exactly one call_entry".

    ``first_line`` is the line of the call's call_entry if the call was seen, else None.
    """
    call = ev.data["call"]
    if first_line is not None:
        return TraceError(
            source,
            ev.line,
            f"a second call_entry for call {show(call)} (the first is on line {first_line}); "
            "give concurrent calls distinct ids",
        )
    return TraceError(
        source,
        ev.line,
        f"call {show(call)} starts with {ev.event}; the first line of every call is call_entry",
    )


def group(events: Iterable[TraceEvent], source: str, calls: Traces | None = None) -> Traces:
    """Add events to per-call lists; each call starts with exactly one ``call_entry``."""
    calls = {} if calls is None else calls
    for ev in events:
        mine = calls.get(ev.data["call"])
        if mine is None:
            if ev.event != "call_entry":
                raise entry_error(source, ev, None)
            calls[ev.data["call"]] = [ev]
        elif ev.event == "call_entry":
            raise entry_error(source, ev, mine[0].line)
        else:
            mine.append(ev)
    return calls


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the garbage collector while reading (or checking) a large trace.

    The parsed lines are acyclic, so the collections their allocation would trigger -- full ones
    over millions of objects -- only cost time; reference counting frees them all the same.
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def read_traces(path: str | Path, contract: Contract | None = None) -> Traces:
    """Parse a trace file (``-``: stdin) into per-call event lists with their line numbers.

    Raises :class:`TraceError` naming the file (and line) for anything unreadable: the file
    itself, bytes that are not UTF-8, a line that is not JSON, not an object, not a known event
    with well-typed fields, another format version, a line or nesting over the limits, a call
    whose first line is not its ``call_entry``, a file cut in the middle of a line.
    """
    source = source_name(path)
    calls: Traces = {}
    with gc_paused():
        for batch in iter_batches(path, contract):
            group(batch, source, calls)
    return calls


def read_trace_bytes(raw: bytes, source: str, contract: Contract | None = None) -> Traces:
    """:func:`read_traces` of a trace already read into memory (e.g. from stdin), named
    ``source`` in messages."""
    import io

    calls: Traces = {}
    try:
        for batch in _batches(io.BytesIO(raw), source, _specs(contract), contract):
            group(batch, source, calls)
    except InputError as exc:
        raise _trace_error(source, exc) from None
    return calls


def _tell(progress: Callable[[int, int], None], size: int, done: int) -> None:
    progress(done, size)


def _trace_error(source: str, exc: InputError) -> TraceError:
    line = exc.where.removeprefix(source).removeprefix(":")
    return TraceError(source, int(line) if line.isdigit() else None, exc.message)


def iter_batches(
    path: str | Path,
    contract: Contract | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[list[TraceEvent]]:
    """The validated events of a trace file, in file order, a list per chunk read.

    Raises :class:`TraceError` as :func:`read_traces` does (except for the call_entry rule,
    which needs the calls: see :func:`group`), at the latest when the batch holding the bad line
    is due.  ``progress(bytes_read, file_size)`` follows the reading of a regular file.

    Why it reads the way it does: a trace may hold millions of lines, and the checker promises
    linear time at well over 200,000 events a second.  So the file is read in large chunks split
    at newlines (:func:`toolcancel.contract.fileio.line_batches`, the reader every command shares),
    each line is parsed by the JSON scanner directly and validated by a fast path that builds no
    message; only a line that fails is parsed again slowly, to say exactly why.  Batches (not
    single events) are yielded so the consumer pays one generator step per chunk.
    """
    source = source_name(path)
    try:
        with open_input(path) as f:
            size = input_size(f) if progress is not None else None
            tell = None
            if progress is not None and size is not None:
                tell = functools.partial(_tell, progress, size)
            yield from _batches(f, source, _specs(contract), contract, tell)
    except InputError as exc:
        raise _trace_error(source, exc) from None
    except OSError as exc:
        raise TraceError(source, None, f"cannot read the trace ({exc.strerror})") from None


def _no_repeated_key(line: str) -> bool:
    """Whether no object of ``line`` (valid JSON) names a key twice."""
    try:
        STRICT.decode(line)
    except ValueError:
        return False
    return True


def _batches(
    f: Any,
    source: str,
    specs: Mapping[str, _Spec],
    contract: Contract | None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[list[TraceEvent]]:
    scan = _scan
    valid = _valid
    new_event = tuple.__new__
    seen = False
    batches = line_batches(
        f, source, max_line_bytes=MAX_LINE_BYTES, max_lines=MAX_LINES, progress=progress
    )
    for n, lines, last in batches:
        batch: list[TraceEvent] = []
        add = batch.append
        cut_off = n + len(lines) if last else -1  # the number of a line the file cuts off
        for line in lines:
            n += 1
            try:
                obj, end = scan(line, 0)
                if end != len(line) and not line[end:].isspace():
                    obj = _MISSING
            except (StopIteration, ValueError, RecursionError):
                obj = _MISSING
            event = None
            if type(obj) is dict and (line.count(":") == len(obj) or _no_repeated_key(line)):
                event = valid(obj, specs, line)
            if event is not None:
                add(new_event(TraceEvent, (n, event, obj)))
                continue
            if not line or line.isspace():
                continue
            obj = decode_line(line, source, n, truncated=n == cut_off)
            add(validate(obj, source, n, contract))
        seen = seen or bool(batch)
        yield batch
    if not seen:
        raise TraceError(source, None, "the file holds no trace lines")


def parse_lines(
    lines: Sequence[Any], source: str = "<trace>", contract: Contract | None = None
) -> Traces:
    """Validate in-memory trace lines (decoded JSON, e.g. an adapter's answer); line = index+1.

    Raises :class:`TraceError` as :func:`read_traces` does.
    """
    calls = group((validate(obj, source, i, contract) for i, obj in enumerate(lines, 1)), source)
    if not calls:
        raise TraceError(source, None, "the trace holds no lines")
    return calls


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
                "required": [*_HEADER, *(f for f, s in fields.items() if s.required)],
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
        "required": list(_HEADER),
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
