"""The one writer and the one reader every command shares.

**Writing** (:func:`write_text`): a file is written to a temporary file in its own directory and
moved into place with ``os.replace``, so an interrupted run leaves it old or new, never
half-written.  That is only right for a regular file (or a new path): renaming over ``/dev/null``,
a FIFO or a socket would replace the device node itself -- run as root, ``--svg /dev/full`` once
turned the machine's ``/dev/full`` into a regular file.  So a destination that exists and is not
a regular file, or that lies under ``/dev`` or ``/proc``, is refused with one line
(:class:`OutputError`, exit 2) before anything is computed (:func:`check_destination`) and again
right before the rename.  ``-`` means stdout.  A symbolic link is followed: the file it points to
is replaced, the link stays.

**Reading** (:func:`open_input`, :func:`line_batches`, :func:`decode_json`): untrusted JSON Lines
(traces, vectors) and JSON (scenarios, adapter answers), with the same limits and the same words
for the same problem everywhere: bytes that are not UTF-8, a line over its length limit, too many
lines, a file cut in the middle of a line, JSON that is not JSON (``NaN``, an integer of more
than 4,300 digits), nests too deeply, or repeats a key in one object (JSON leaves that open;
readers disagree on which value wins, so evidence must not contain it).  A UTF-8 byte-order mark
at the start of a file is skipped.  ``-`` means stdin.  Values quoted in messages are cut
(:func:`show`), so a line of a megabyte never ends up whole in an error.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Final

from .errors import ToolcancelError

STREAM: Final = "-"
"""The path that means stdin (reading) or stdout (writing)."""
STDIN_NAME: Final = "<stdin>"
BOM: Final = b"\xef\xbb\xbf"
QUOTE: Final = 60
"""Longest quotation of input in an error message (characters, ellipsis included)."""


class OutputError(ToolcancelError):
    """A destination that cannot (or must not) be written: one line naming it."""


class InputError(ToolcancelError):
    """Input that cannot be read; ``where`` is the file (and line), ``message`` what is wrong."""

    def __init__(self, where: str, message: str) -> None:
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}")


def show(value: Any, limit: int = QUOTE) -> str:
    """A value for an error message: its ``repr``, cut to ``limit`` characters with an ellipsis."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ------------------------------------------------------------------------------------------------
# Writing
# ------------------------------------------------------------------------------------------------

_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)
_SPECIAL_TREES: Final = ("/dev", "/proc", "/sys")


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def is_stream(path: str | Path | None) -> bool:
    return path is not None and str(path) == STREAM


def _target(path: Path, mkdir: bool = False) -> Path:
    """The file that writing ``path`` replaces (symbolic links followed); refuses every
    destination that is not a regular file or a new path in an existing directory (with
    ``mkdir``: in a directory that can be created, below the nearest existing one)."""
    absolute = Path(os.path.abspath(path))
    target = Path(os.path.realpath(path))
    for p in (absolute, target):
        if any(p == Path(t) or Path(t) in p.parents for t in _SPECIAL_TREES):
            raise OutputError(
                f"{path}: is under {p.parts[1] and '/' + p.parts[1]}, not a regular file; "
                "toolcancel writes only regular files (give - for stdout)"
            )
    try:
        st = os.stat(target)
    except (FileNotFoundError, NotADirectoryError):
        parent = target.parent
        if mkdir:
            while not parent.exists() and parent != parent.parent:
                parent = parent.parent
        if not parent.is_dir():
            what = "is not a directory" if parent.exists() else "does not exist"
            where = _as_given(path, parent)
            raise OutputError(f"{path}: cannot write there: {where} {what}") from None
        return target
    except OSError as exc:
        raise OutputError(f"{path}: cannot write ({exc.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{path}: is a directory; give a file name")
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(
            f"{path}: is {_kind(st.st_mode)}, not a regular file; toolcancel replaces only "
            "regular files (give - for stdout)"
        )
    return target


def _as_given(path: Path, other: Path) -> Path:
    """``other`` (an absolute path) as ``path`` is written: relative when ``path`` is relative
    and no symbolic link lies between them, so one message never mixes the two forms."""
    if path.is_absolute() or Path(os.path.realpath(path)) != Path(os.path.abspath(path)):
        return other
    return Path(os.path.relpath(other))


def check_directory(path: str | Path, option: str) -> None:
    """Refuse, before any work, an output directory (``option``, e.g. ``--out``) that exists
    and is not a directory, or lies under /dev, /proc or /sys (a missing one is created)."""
    absolute = Path(os.path.abspath(path))
    for p in (absolute, Path(os.path.realpath(path))):
        if any(p == Path(t) or Path(t) in p.parents for t in _SPECIAL_TREES):
            raise OutputError(
                f"{option} {path}: is under /{p.parts[1]}; give a directory for the files"
            )
    if os.path.exists(path) and not os.path.isdir(path):
        mode = os.stat(path).st_mode
        kind = "a regular file" if stat.S_ISREG(mode) else _kind(mode)
        raise OutputError(f"{option} {path}: is {kind}, not a directory")


def check_destination(path: str | Path, *, mkdir: bool = False) -> None:
    """Refuse, before any work, a destination :func:`write_text` would refuse (``-`` is fine;
    ``mkdir``: missing parent directories will be created)."""
    if not is_stream(path):
        _target(Path(path), mkdir)


def write_text(path: str | Path, text: str, *, mkdir: bool = False) -> None:
    """Write ``text`` (UTF-8, ``\\n`` newlines) to ``path`` atomically, or to stdout for ``-``.

    ``mkdir``: create missing parent directories first.  Raises :class:`OutputError` naming
    ``path`` for a destination that is not a regular file or a new path, or a failed write; the
    temporary file is removed then, and the old file is intact.
    """
    if is_stream(path):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = Path(path)
    if mkdir:
        parent = Path(os.path.abspath(path)).parent
        if not parent.is_dir():
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise OutputError(f"{path}: cannot create {parent} ({exc.strerror})") from None
    target = _target(path)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o644
    except OSError as exc:
        raise OutputError(f"{path}: cannot write ({exc.strerror})") from None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        _target(path)  # once more: nothing may have put a device there meanwhile
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OutputError(f"{path}: cannot write ({exc.strerror})") from None
        raise


# ------------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------------


def source_name(path: str | Path) -> str:
    """How messages name an input: its path, or ``<stdin>`` for ``-``."""
    return STDIN_NAME if is_stream(path) else str(path)


@contextlib.contextmanager
def open_input(path: str | Path) -> Iterator[IO[bytes]]:
    """The input as a binary file (stdin for ``-``, left open); a directory is refused, and an
    ``OSError`` becomes :class:`InputError` naming the file."""
    if is_stream(path):
        yield sys.stdin.buffer
        return
    if os.path.isdir(path):
        raise InputError(str(path), "is a directory, not a file")
    try:
        f = open(path, "rb")  # closed below; opening errors must name the file
    except OSError as exc:
        raise InputError(str(path), f"cannot read ({exc.strerror})") from None
    with f:
        yield f


def read_bytes(path: str | Path, limit: int, what: str = "file") -> bytes:
    """The whole input, at most ``limit`` bytes (more: :class:`InputError`), without a leading
    byte-order mark."""
    source = source_name(path)
    try:
        with open_input(path) as f:
            raw = f.read(limit + 1)
    except OSError as exc:
        raise InputError(source, f"cannot read ({exc.strerror})") from None
    if len(raw) > limit:
        raise InputError(source, f"larger than {limit:,} bytes; not a {what}")
    return raw.removeprefix(BOM)


def generated_text(path: Path) -> str | None:
    """What a generated file holds now, for a freshness check: ``None`` when it is missing, and
    ``""`` when it cannot be read as UTF-8 text (so it compares as stale, not as an error)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return ""


def utf8_text(raw: bytes, source: str, first_line: int = 1) -> str:
    """``raw`` decoded; bytes that are not UTF-8 are an :class:`InputError` naming the line."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise not_utf8(raw, exc, source, first_line) from None


def not_utf8(raw: bytes, exc: UnicodeDecodeError, source: str, first_line: int = 1) -> InputError:
    line = first_line + raw.count(b"\n", 0, exc.start)
    column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
    return InputError(
        f"{source}:{line}", f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {column})"
    )


CHUNK: Final = 1 << 22


def input_size(f: IO[bytes]) -> int | None:
    """The size of ``f`` in bytes if it is a regular file (for progress), else None."""
    try:
        st = os.fstat(f.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def line_batches(
    f: IO[bytes],
    source: str,
    *,
    max_line_bytes: int,
    max_lines: int,
    first_chunk: bytes = b"",
    progress: Callable[[int], None] | None = None,
) -> Iterator[tuple[int, list[str], bool]]:
    """The lines of a JSON Lines file, decoded, in batches of one large read each.

    Yields ``(n, lines, last)``: ``n`` is the number of lines before the batch, ``lines`` the
    batch (without newlines), ``last`` whether the file ends with the batch's final line and that
    line has no newline (a line a writer may have been cut in).  Limits and encoding problems
    raise :class:`InputError` naming the line; for bytes that are not UTF-8, the lines before the
    bad one are yielded first, so that the first bad line is the one named.  A byte-order mark
    at the start is skipped.  ``progress(bytes_read)`` is called after each read.
    """
    n = 0
    carry = b""
    start = True
    consumed = 0
    while True:
        chunk = first_chunk + f.read(CHUNK) if start else f.read(CHUNK)
        consumed += len(chunk)
        if progress is not None:
            progress(consumed)
        if start:
            chunk = chunk.removeprefix(BOM)
            start = False
        data = carry + chunk if carry else chunk
        if not chunk:
            if not data:
                return
            body, carry, last = data, b"", True  # the file does not end with a newline
        else:
            cut = data.rfind(b"\n")
            if cut < 0:
                if len(data) > max_line_bytes:
                    raise InputError(
                        f"{source}:{n + 1}", f"line longer than {max_line_bytes:,} bytes"
                    )
                carry = data
                continue
            body, carry, last = data[: cut + 1], data[cut + 1 :], False
            if len(carry) > max_line_bytes:
                at = n + body.count(b"\n") + 1
                raise InputError(f"{source}:{at}", f"line longer than {max_line_bytes:,} bytes")
        bad = None
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = not_utf8(body, exc, source, n + 1)
            good = body.rfind(b"\n", 0, exc.start) + 1
            text, last = body[:good].decode("utf-8"), False
        lines = text.split("\n")
        if not last:
            lines.pop()  # the empty piece after the final newline
        if n + len(lines) > max_lines:
            raise InputError(f"{source}:{max_lines + 1}", f"more than {max_lines:,} lines")
        if lines and max(map(len, lines)) * 4 > max_line_bytes:  # a UTF-8 char has <= 4 bytes
            for i, line in enumerate(lines, n + 1):
                if len(line.encode("utf-8")) > max_line_bytes:
                    raise InputError(
                        f"{source}:{i}", f"line longer than {max_line_bytes:,} bytes"
                    )
        yield n, lines, last
        n += len(lines)
        if bad is not None:
            raise bad
        if last:
            return


def reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object hook that refuses a key given twice in one object."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"the key {show(key)} appears twice in one object")
            seen.add(key)
    return obj


STRICT: Final = json.JSONDecoder(parse_constant=reject_constant, object_pairs_hook=unique_object)
"""The decoder of all untrusted JSON: no NaN or Infinity, no key twice in one object."""


def json_error_text(exc: json.JSONDecodeError) -> str:
    """What is wrong where, for an error message: ``Expecting ',' delimiter at column 7``."""
    return f"{exc.msg.removesuffix(' at')} at column {exc.colno}"


def value_error_text(exc: ValueError) -> str:
    """Why the JSON decoder refused a value it could scan (a constant such as NaN, a key twice,
    or an integer longer than Python converts), in words for an error message."""
    if "integer string conversion" in str(exc):
        return "a number with more than 4,300 digits"
    return str(exc)


def json_depth(value: Any, limit: int) -> int:
    """Nesting depth of decoded JSON (a scalar is 0), without recursion; counting stops a level
    past ``limit``, so a deeper value reports at least ``limit + 1``.

    Level by level: each pass keeps the containers of one level and lists their items, in two
    comprehensions (a walk with a stack of (value, depth) pairs cost twice as much; conform runs
    it on every answer)."""
    depth = 0
    level = [value]
    while depth <= limit:
        containers = [v for v in level if isinstance(v, (dict, list))]
        if not containers:
            break
        depth += 1
        level = [x for c in containers for x in (c.values() if isinstance(c, dict) else c)]
    return depth


def decode_json(
    text: str,
    where: str,
    *,
    max_depth: int,
    truncated: bool = False,
    error: Callable[[str, str], Exception] = InputError,
) -> Any:
    """The JSON value of ``text`` (one document, surrounding whitespace allowed).

    Anything else raises ``error(where, message)``: not JSON (the column named, and the line
    appended to ``where`` for a multi-line text), a constant, a number too long, a key twice in
    one object, nesting deeper than ``max_depth``.  ``truncated``: the text is the last line of
    a file that ends without a newline, named as cut off if it does not parse.
    """
    try:
        value, end = STRICT.raw_decode(text, len(text) - len(text.lstrip()))
    except json.JSONDecodeError as exc:
        if truncated and (exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated")):
            return _raise(error(where, "the file ends in the middle of this line (truncated)"))
        if exc.lineno > 1:  # a multi-line document: name the line
            where = f"{where}:{exc.lineno}"
        return _raise(error(where, f"not valid JSON ({json_error_text(exc)})"))
    except ValueError as exc:
        return _raise(error(where, f"not valid JSON ({value_error_text(exc)})"))
    except RecursionError:
        return _raise(error(where, f"JSON nested deeper than {max_depth} levels"))
    rest = text[end:]
    if rest and not rest.isspace():
        column = end + len(rest) - len(rest.lstrip()) + 1
        return _raise(error(where, f"not valid JSON (extra data at column {column})"))
    # Each level of nesting opens a bracket: a text with few enough cannot nest too deeply, so
    # the walk (most of the time of reading a vectors file) is left out for it.
    deep = text.count("{") + text.count("[") > max_depth
    if deep and json_depth(value, max_depth) > max_depth:
        return _raise(error(where, f"JSON nested deeper than {max_depth} levels"))
    return value


def _raise(exc: Exception) -> Any:
    raise exc
