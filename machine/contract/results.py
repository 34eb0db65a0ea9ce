"""Tool results: their shape, their lossless snapshot, and their canonical JSON.

A result is what the model sees of a call, so it is part of the contract byte for byte: the
texts come from the contract file, and :meth:`ToolResult.to_json` renders the field names of the
original harness (``content``, ``isError``, ``error``, ``additionalContexts``, ``meta``) in a
canonical form -- keys sorted, no whitespace, UTF-8, numbers formatted as ECMAScript does -- so a
result produced in Python compares byte for byte with one produced in TypeScript, Go or Rust.

"Lossless JSON" means a value that survives a JSON round trip unchanged: ``None``, ``bool``,
``int``, finite ``float`` other than ``-0.0``, ``str``, lists/tuples of those, and mappings with
``str`` keys.  Anything else (functions, sets, NaN, cycles, objects) is refused with the path where
it was found.  A materialized result is deep-frozen: tuples and :class:`FrozenDict`.
"""

from __future__ import annotations

import json
import math
from collections.abc import ItemsView, Iterator, KeysView, Mapping, Sequence, ValuesView
from dataclasses import dataclass
from typing import Any, Final

from .errors import NotSerializable
from .errors import ToolError as ToolError  # defined there since signals.AbortError is one
from .loader import RevisionContract

_new: Final = object.__new__


class FrozenDict(Mapping[str, Any]):
    """An immutable, hashable JSON object (what a snapshot turns a dict into)."""

    __slots__ = ("_data", "_hash")  # _hash stays unset until the first hash() asks for it

    _data: dict[str, Any]
    _hash: int

    def __init__(self, data: Mapping[str, Any] = {}) -> None:
        self._data = dict(data)

    @staticmethod
    def _adopt(data: dict[str, Any]) -> FrozenDict:
        """Wrap a dict nobody else holds, without copying it (the snapshot's fast path)."""
        self = _new(FrozenDict)
        self._data = data
        return self

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    # The dict's own lookups and views, not Mapping's: those call __getitem__ in Python once
    # per key (4-10 us to walk one result), and every judge reads results this way.  A dict's
    # views are read-only; the dict stays out of reach (a view's ``mapping`` is a read-only
    # proxy of it).

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def keys(self) -> KeysView[str]:
        return self._data.keys()

    def values(self) -> ValuesView[Any]:
        return self._data.values()

    def items(self) -> ItemsView[str, Any]:
        return self._data.items()

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            self._hash = hash(frozenset(self._data.items()))
            return self._hash

    def __eq__(self, other: object) -> bool:
        """Mapping's equality (the same keys, equal values), without building a dict of each
        side when both are frozen: Mapping's way took 5 us for one text block, and an
        integration compares each published result with what its body returned."""
        if type(other) is FrozenDict:
            return self._data == other._data
        return Mapping.__eq__(self, other)

    def __repr__(self) -> str:
        return f"FrozenDict({self._data!r})"


def snapshot(value: Any, path: str = "$") -> Any:
    """A deep-frozen copy of ``value`` if it is losslessly JSON-serializable.

    Raises :class:`NotSerializable` naming the first offending place.  The common case (plain
    dicts, lists, tuples and scalars, nested at most :data:`_FAST_DEPTH` containers below the top
    one) takes a walk that keeps neither paths nor a cycle set; anything else is walked again by
    :func:`_freeze`, which finds cycles, and only a refusal walks a third time to say where.  A
    cycle always exceeds the depth, so every value still ends in the walk that would have judged
    it alone.
    """
    try:
        return _walk(value, 0)
    except _Unusual:
        pass
    except _Refused:
        _snap(value, path, set())  # raises NotSerializable with the path
        raise AssertionError("the two walks disagree") from None
    try:
        return _freeze(value, set())
    except _Refused:
        _snap(value, path, set())  # raises NotSerializable with the path
        raise AssertionError("the two walks disagree") from None


class _Refused(Exception):
    """A walk without paths met something that is not lossless JSON."""


class _Unusual(Exception):
    """The plain walk met a value it does not judge: too deep (maybe a cycle), or not a plain
    dict, list, tuple or scalar."""


_FAST_DEPTH: Final = 64
"""How many containers below the top one the plain walk enters before it hands the value to the
cycle-finding walk (deeper JSON is rare; a cycle reaches it after a few laps)."""

_LEAVES: Final = frozenset({str, int, bool, type(None)})
"""Types a snapshot keeps as they are without looking (a float must be checked)."""


def _walk(value: Any, depth: int) -> Any:
    """The plain walk: no cycle set, no paths; containers' leaves are judged inline."""
    t = type(value)
    if t is dict or t is FrozenDict:
        if depth > _FAST_DEPTH:
            raise _Unusual
        out = value.copy() if t is dict else value._data.copy()
        for k, v in out.items():
            if type(k) is not str:  # not a string, or a str subclass: _freeze judges it
                raise _Unusual
            if type(v) not in _LEAVES:
                out[k] = _walk(v, depth + 1)  # replacing a key's value keeps the iteration valid
        frozen = _new(FrozenDict)  # FrozenDict._adopt, inline: the call was a tenth of a walk
        frozen._data = out
        return frozen
    if t is tuple or t is list:
        if depth > _FAST_DEPTH:
            raise _Unusual
        depth += 1
        items = []  # a loop, not a comprehension: no frame of its own (3.11), faster when short
        for v in value:
            items.append(v if type(v) in _LEAVES else _walk(v, depth))
        return tuple(items)
    if t in _LEAVES:
        return value
    if t is float:
        return _lossless(value)
    raise _Unusual


def _lossless(value: float) -> float:
    """``value`` if it survives JSON; NaN, the infinities and -0.0 are refused (the walks that
    keep no path; :func:`_snap` says which it was)."""
    if not math.isfinite(value) or (value == 0.0 and math.copysign(1.0, value) < 0):
        raise _Refused
    return value


def _freeze(value: Any, active: set[int]) -> Any:
    t = type(value)
    if t in _LEAVES:
        return value
    if t is float:
        return _lossless(value)
    if t is dict or t is FrozenDict:
        if id(value) in active:
            raise _Refused
        active.add(id(value))
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):  # a str subclass is a string key, as _snap judges it
                raise _Refused
            out[k] = _freeze(v, active)
        active.discard(id(value))
        return FrozenDict._adopt(out)
    if t is list or t is tuple:
        if id(value) in active:
            raise _Refused
        active.add(id(value))
        frozen = tuple([_freeze(v, active) for v in value])
        active.discard(id(value))
        return frozen
    if not _plausible(value):
        raise _Refused
    try:
        return _snap(value, "$", active)
    except NotSerializable:  # its path starts here, not at the top: the top walks again
        raise _Refused from None


def _plausible(value: Any) -> bool:
    return isinstance(value, (bool, str, int, float, list, tuple, Mapping))


def _snap(value: Any, path: str, active: set[int]) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotSerializable(path, f"{value!r} is not a finite number")
        if value == 0.0 and math.copysign(1.0, value) < 0:
            raise NotSerializable(path, "-0.0 does not survive JSON")
        return value
    if isinstance(value, (list, tuple, Mapping)):
        if id(value) in active:
            raise NotSerializable(path, "the value contains itself (a cycle)")
        active.add(id(value))
        try:
            if isinstance(value, Mapping):
                out = {}
                for k, v in value.items():
                    if not isinstance(k, str):
                        raise NotSerializable(path, f"key {k!r} is not a string")
                    out[k] = _snap(v, f"{path}.{k}", active)
                return FrozenDict(out)
            return tuple(_snap(v, f"{path}[{i}]", active) for i, v in enumerate(value))
        finally:
            active.discard(id(value))
    raise NotSerializable(path, f"a {type(value).__name__} is not JSON")


def thaw(value: Any) -> Any:
    """Plain JSON data (dicts and lists) from a snapshot, for ``json`` and comparisons."""
    t = type(value)
    if t in _LEAVES:  # most values: no isinstance against the Mapping ABC
        return value
    if t is FrozenDict:  # a copy with containers replaced: loops, not comprehensions (3.11
        out = value._data.copy()  # gives each comprehension a frame), as in _walk
        for k, v in out.items():
            if type(v) not in _LEAVES:
                out[k] = thaw(v)  # replacing a key's value keeps the iteration valid
        return out
    if t is tuple:
        items = []
        for v in value:
            items.append(v if type(v) in _LEAVES else thaw(v))
        return items
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


def js_number(x: int | float) -> str:
    """Format a number the way ECMAScript's Number::toString does (JSON.stringify's digits).

    Integers past 2**53 are formatted as the double JavaScript would hold.
    """
    if isinstance(x, bool):
        raise TypeError("booleans are not numbers here")
    if isinstance(x, int):
        return str(x) if abs(x) < 2**53 else js_number(float(x))
    if x == 0:
        return "0"
    if x < 0:
        return "-" + js_number(-x)
    # repr gives the shortest round-trip digits; rebuild value = digits * 10**e10.
    mantissa, _, exp_text = repr(x).partition("e")
    intpart, _, frac = mantissa.partition(".")
    digits = (intpart + frac).lstrip("0")
    e10 = (int(exp_text) if exp_text else 0) - len(frac)
    stripped = digits.rstrip("0")
    e10 += len(digits) - len(stripped)
    digits = stripped
    k = len(digits)
    n = k + e10  # ECMAScript's n: the value is 0.digits * 10**n
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    e = n - 1
    head = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{head}e{'+' if e >= 0 else '-'}{abs(e)}"


def canonical_json(value: Any) -> str:
    """Canonical JSON text: sorted keys, no whitespace, ECMAScript numbers, UTF-8 as is."""
    parts: list[str] = []
    _emit(value, parts)
    return "".join(parts)


def same_json(a: Any, b: Any) -> bool:
    """Whether two JSON values have the same canonical JSON text, without writing either (a
    judge compares every logged result with the published one): ``true`` is not ``1``, ``1`` is
    ``1.0``, keys in any order."""
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return a is b  # None, True and False are singletons; a bool is no number here
    if isinstance(a, str):
        return isinstance(b, str) and a == b
    if isinstance(a, (int, float)):
        if not isinstance(b, (int, float)):
            return False
        x, y = float(a), float(b)  # as JavaScript holds them (js_number: ints past 2**53 too)
        return x == y or (x != x and y != y)
    if isinstance(a, Mapping):
        return (
            isinstance(b, Mapping)
            and len(a) == len(b)
            and all(k in b and same_json(v, b[k]) for k, v in a.items())
        )
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(same_json, a, b))
    raise NotSerializable("$", f"a {type(a).__name__} is not JSON")


def _emit(v: Any, out: list[str]) -> None:
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, str):
        out.append(json.dumps(v, ensure_ascii=False))
    elif isinstance(v, (int, float)):
        out.append(js_number(v))
    elif isinstance(v, Mapping):
        out.append("{")
        for i, k in enumerate(sorted(v)):
            if i:
                out.append(",")
            out.append(json.dumps(k, ensure_ascii=False))
            out.append(":")
            _emit(v[k], out)
        out.append("}")
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for i, item in enumerate(v):
            if i:
                out.append(",")
            _emit(item, out)
        out.append("]")
    else:
        raise NotSerializable("$", f"a {type(v).__name__} is not JSON")


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """The structured part of an error result.

    Seed shape: ``{name, code}`` (only on structured failures and registry codes).  Revised
    shape: ``{message, info?: {name, code}}`` (on every error result).
    """

    name: str | None = None
    code: str | None = None
    message: str | None = None

    def to_data(self, revision: str) -> dict[str, Any]:
        if revision == "seed":
            return {"name": self.name, "code": self.code}
        out: dict[str, Any] = {"message": self.message or ""}
        if self.name is not None and self.code is not None:
            out["info"] = {"name": self.name, "code": self.code}
        return out


def text_block(text: str) -> FrozenDict:
    return FrozenDict({"type": "text", "text": text})


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The result of one tool call.

    Before materialization ``content``, ``contexts`` and ``meta`` hold whatever the tool or hook
    gave; the registry's final result is a snapshot of it (deep-frozen, lossless JSON).
    ``meta is None`` means absent; ``contexts == ()`` means absent.
    """

    content: Sequence[Any]
    is_error: bool = False
    error: ErrorInfo | None = None
    contexts: Sequence[Any] = ()
    meta: Any = None
    revision: str = "seed"

    def to_data(self) -> dict[str, Any]:
        """The result as plain JSON data with the contract's field names (absent keys omitted)."""
        out: dict[str, Any] = {"content": thaw(self.content), "isError": self.is_error}
        if self.error is not None:
            out["error"] = self.error.to_data(self.revision)
        if self.contexts:
            out["additionalContexts"] = thaw(self.contexts)
        if self.meta is not None:
            out["meta"] = thaw(self.meta)
        return out

    def to_json(self) -> str:
        """Canonical JSON (see the module docstring): equal results give equal bytes."""
        return canonical_json(self.to_data())

    @property
    def text(self) -> str:
        """The concatenated text blocks: what a model reads first."""
        return "".join(
            b["text"] for b in self.content if isinstance(b, Mapping) and b.get("type") == "text"
        )

    @staticmethod
    def _make(
        content: Sequence[Any],
        is_error: bool,
        error: ErrorInfo | None,
        contexts: Sequence[Any],
        meta: Any,
        revision: str,
    ) -> ToolResult:
        """``ToolResult(...)`` with every field given, at less than half the cost: the frozen
        dataclass's ``__init__`` stores each field through ``object.__setattr__``, while this
        fills a :class:`_Unfrozen` with plain stores and then makes it a ToolResult."""
        self: Any = _Unfrozen()  # the class called, not object.__new__: 20 ns less
        self.content = content
        self.is_error = is_error
        self.error = error
        self.contexts = contexts
        self.meta = meta
        self.revision = revision
        self.__class__ = ToolResult
        return self  # type: ignore[no-any-return]

    def with_contexts(self, contexts: Sequence[Any]) -> ToolResult:
        return ToolResult._make(
            self.content, self.is_error, self.error, tuple(contexts), self.meta, self.revision
        )


class _Unfrozen:
    """ToolResult's slots without its frozen ``__setattr__``.  The layouts are the same, so an
    instance may change its ``__class__`` to ToolResult once filled (see ToolResult._make)."""

    __slots__ = ToolResult.__slots__


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool body may return besides a plain list of content blocks: content plus meta."""

    content: Sequence[Any]
    meta: Any = None


def thrown_message(value: BaseException, unprintable: str) -> str:
    """The message of a thrown value (R3), or ``unprintable`` if asking for it raises."""
    try:
        return str(value)
    except Exception:  # an exception whose __str__ raises
        return unprintable


def block_message(feedback: Sequence[Any], texts: Mapping[str, str]) -> str:
    """The revised ``error.message`` of a post-execute block, as the original derives it from
    the feedback: each block on its own line -- a text block as its text, any other block as
    ``[<type> content]`` -- with nothing stripped; no text at all gives the contract's
    ``blocked_without_feedback``."""
    other = texts["non_text_feedback"]
    lines = []
    for b in feedback:
        kind = b.get("type") if isinstance(b, Mapping) else None
        text = b.get("text") if kind == "text" else None
        lines.append(text if isinstance(text, str) else other.format(type=kind))
    return "\n".join(lines) or texts["blocked_without_feedback"]


class Results:
    """Builds every result the registry authors, with the exact texts of one contract revision."""

    def __init__(self, table: RevisionContract) -> None:
        self.revision = table.name
        self.texts = table.texts

    def _error(self, text: str, name: str | None = None, code: str | None = None) -> ToolResult:
        message = text.removeprefix("Error: ")
        if self.revision == "seed":
            info = ErrorInfo(name, code) if name is not None else None
        else:
            info = ErrorInfo(name, code, message)
        return ToolResult._make((text_block(text),), True, info, (), None, self.revision)

    def success(self, value: Any) -> ToolResult:
        """R2: a body's return value as a result; a wrong type raises ``TypeError``."""
        if isinstance(value, (list, tuple)):  # first: the common case (never a ToolOutput)
            return ToolResult._make(tuple(value), False, None, (), None, self.revision)
        if isinstance(value, ToolOutput):
            return ToolResult._make(
                tuple(value.content), False, None, (), value.meta, self.revision
            )
        raise TypeError(
            f"a tool body must return a list of content blocks or a ToolOutput, "
            f"not {type(value).__name__}"
        )

    def thrown(self, exc: BaseException) -> ToolResult:
        """R3: a thrown value as an error result."""
        text = "Error: " + thrown_message(exc, self.texts["unprintable"])
        if isinstance(exc, ToolError):
            try:  # R3: no error key when inspecting the structured error fails
                code = exc.code
            except Exception:
                code = None
            if isinstance(code, str):
                return self._error(text, type(exc).__name__, code)
        return self._error(text)

    def _fixed(self, key: str, name: str | None = None, code: str | None = None) -> ToolResult:
        """The error result of the contract's text ``key`` (no field of it is the call's):
        made once per text, error and revision, as a result is immutable (:data:`_FIXED`)."""
        text = self.texts[key]
        made = _FIXED.get((text, name, code, self.revision))
        if made is None:
            made = _FIXED[text, name, code, self.revision] = self._error(text, name, code)
            _AUTHORED[id(made.content)] = made.content
        return made

    def aborted(self, contexts: Sequence[Any] = ()) -> ToolResult:
        """R4: the canonical ABORTED, carrying the superseded result's contexts."""
        made = self._fixed("aborted", "AbortError", "ABORTED")
        return made.with_contexts(contexts) if contexts else made

    def aborted_before_dispatch(self, contexts: Sequence[Any] = ()) -> ToolResult:
        """R41 (revised): cancellation prevented the body's invocation."""
        made = self._fixed("aborted_before_dispatch", "AbortError", "ABORTED_BEFORE_DISPATCH")
        return made.with_contexts(contexts) if contexts else made

    def cancellation(self, outcome: str, contexts: Sequence[Any] = ()) -> ToolResult:
        """The cancellation result an outcome kind names (aborted, aborted_before_dispatch)."""
        if outcome == "aborted_before_dispatch":
            return self.aborted_before_dispatch(contexts)
        return self.aborted(contexts)

    def denied(self, reason: str) -> ToolResult:
        """R5: a denial; seed results carry no error key."""
        return self._error("Error: " + reason)

    def text(self, key: str, **fields: Any) -> str:
        return self.texts[key].format(**fields)

    def unknown_tool(self, name: str) -> ToolResult:
        return self._error(
            self.text("unknown_tool", name=name), "ToolNotFoundError", "UNKNOWN_TOOL"
        )

    def args_error(self) -> ToolResult:
        return self._fixed("args_not_serializable")

    def serialization_error(self) -> ToolResult:
        return self._fixed("result_not_serializable")

    def timeout(self, ms: float) -> ToolResult:
        """R8: TOOL_TIMEOUT with the budget written as JavaScript writes numbers."""
        return self._error(
            self.text("tool_timeout", ms=js_number(ms)), "ToolTimeoutError", "TOOL_TIMEOUT"
        )

    def skipped(self) -> ToolResult:
        """R9: the scheduler's synthetic result for an unstarted sibling."""
        if self.revision == "seed":
            return self._fixed("skipped_sibling", "AbortError", "ABORTED")
        return self.aborted_before_dispatch()

    def blocked(self, feedback: Sequence[Any], contexts: Sequence[Any]) -> ToolResult:
        """R7 block: the feedback as an error, only the block's own contexts, no error key
        (revised: ``error.message`` is :func:`block_message`)."""
        info = None
        if self.revision != "seed":
            info = ErrorInfo(None, None, block_message(feedback, self.texts))
        return ToolResult._make(
            tuple(feedback), True, info, tuple(contexts), None, self.revision
        )

    def materialize(self, result: ToolResult) -> ToolResult:
        """R30: the lossless, deep-frozen snapshot of ``result`` (raises NotSerializable)."""
        content = result.content
        if _AUTHORED.get(id(content)) is not content:  # else deep-frozen already (_fixed)
            try:  # snapshot()'s plain walk, without its frame: every call publishes one result
                content = _walk(content, 0)
            except (_Unusual, _Refused):  # walked again by the walks that judge it and say where
                content = snapshot(content, "$.content")
        contexts = snapshot(result.contexts, "$.additionalContexts") if result.contexts else ()
        meta = None if result.meta is None else snapshot(result.meta, "$.meta")
        return ToolResult._make(
            content, result.is_error, result.error, contexts, meta, self.revision
        )


_FIXED: Final[dict[tuple[str, str | None, str | None, str], ToolResult]] = {}
"""The results of the contract's fixed texts (cancellations, argument and serialization errors)
by text, error name and code, and revision; a handful per contract loaded."""

_AUTHORED: Final[dict[int, Sequence[Any]]] = {}
"""The content of each result in :data:`_FIXED`, by identity: made here of text blocks, so
deep-frozen already, and kept as it is by :meth:`Results.materialize` instead of walked into an
equal copy (the entries hold their content, so an identity is never reused)."""
