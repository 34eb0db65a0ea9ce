"""Reading a trace: untrusted JSON Lines in, each call's validated events out.

The format itself -- what a line may say, how a registry writes it, its schema -- is
:mod:`toolcancel.contract.trace`; this module is the other side, what a checker does with a file
someone else wrote.  :mod:`toolcancel.oracle.judge.checker` reads through it, and so do ``check``
and
``explain``.

Why a reader this strict: a trace is evidence in a review.  A line the reader would have to guess
about (not JSON, not an object, an unknown event, a field of the wrong type, another format
version, a misspelt field) is refused with the file and line, never skipped or defaulted.
Fields whose names start with ``x_`` are the one extension point: implementations may add them
(timestamps, thread ids) and the reader ignores them.  Blank lines are ignored.

Limits (a trace is untrusted input): a line holds at most :data:`~toolcancel.contract.trace.
MAX_LINE_BYTES` bytes (1 MiB, newline excluded), JSON nests at most
:data:`~toolcancel.contract.trace.MAX_DEPTH` levels, a file has at most
:data:`~toolcancel.contract.trace.MAX_LINES` lines.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import io
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, NamedTuple, cast

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
from .loader import Contract
from .trace import (
    FORMAT_VERSION,
    HEADER,
    MAX_DEPTH,
    MAX_LINE_BYTES,
    MAX_LINES,
    per_contract,
    vocabulary,
)


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


class _Spec(NamedTuple):
    keys: frozenset[str]  # every field name the event may carry, header included
    fields: tuple[tuple[str, type, frozenset[str] | None, bool], ...]  # name, type, values, req.
    nested: bool  # whether a field holds an object (its depth is checked)


@per_contract
def _specs(c: Contract) -> Mapping[str, _Spec]:
    out = {}
    for name, fields in vocabulary(c).items():
        out[name] = _Spec(
            frozenset(HEADER) | frozenset(fields),
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
    specs, valid, new_event = _specs(contract), _valid, tuple.__new__
    calls = group(
        (  # validate's fast path inline: conform reads every answer's lines through here
            new_event(TraceEvent, (i, event, obj))
            if (event := valid(obj, specs)) is not None
            else validate(obj, source, i, contract)
            for i, obj in enumerate(lines, 1)
        ),
        source,
    )
    if not calls:
        raise TraceError(source, None, "the trace holds no lines")
    return calls
