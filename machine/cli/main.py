"""The ``toolcancel`` command line.

Each command lives in its own module under ``toolcancel.cli.commands`` and exposes ``register(sub)``
(adding its parser, with ``func`` set to a function taking the parsed arguments and returning an
exit code).  This module only dispatches and keeps the promise every command makes: bad input
gets one clear line naming where the problem is and exit code 2 -- never a traceback.

The readers name the file and line themselves (:class:`ToolcancelError` messages).  What they do
not foresee is still one line and exit 2 here: an ``OSError`` names its file, running out of
memory or recursion says so, and anything else is reported as an internal error (set
``TOOLCANCEL_DEBUG=1`` to get the traceback instead).  Messages are flattened to one line.

Every error line has one shape, ``toolcancel COMMAND: MESSAGE``; a problem with the command line
itself (argparse's errors, :class:`UsageError`) ends with ``(see toolcancel COMMAND --help)``.
``-`` stands for stdin where a command reads a file and for stdout where it writes one.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any, Final

from ..contract.errors import ToolcancelError

COMMANDS = (
    "verify", "check", "vectors", "conform", "diagram", "explain", "explore", "regen", "where",
)
"""Command modules, in the order ``--help`` lists them; a missing module is simply not offered."""

MAX_WORKERS = 256
"""Most worker processes ``--workers`` may ask for (``verify``, ``vectors``)."""


class CliError(ToolcancelError):
    """A problem with the command's input: printed as one line, exit code 2."""


class UsageError(CliError):
    """A problem with the command line itself (an option's value): the line ends with the hint
    to ``--help``."""


def default_workers() -> int:
    """``--workers`` default: every CPU this process may run on (at most :data:`MAX_WORKERS`)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_WORKERS))


def version() -> str:
    """The installed distribution's version (the source tree's when run from a checkout)."""
    from importlib import metadata

    try:
        return metadata.version("toolcancel")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


class Progress:
    """Progress of a long command, on stderr: a bar with the elapsed time and an estimate of
    what is left on a terminal (redrawn at most 10 times a second), else a plain line every
    ``every`` seconds (CI logs).  Nothing for work that ends within ``quiet`` seconds, nothing
    with ``enabled=False`` (``--json``, ``--quiet``) or ``TOOLCANCEL_PROGRESS=0`` in the
    environment.  Use as a context manager; :meth:`update` is the callback
    ``(done, total[, label])`` the long-running functions take; the estimate restarts with a new
    phase (the total changes or the count starts over, as from one revision to the next), and
    the label (a revision, a mutant, a file) is shown as it is.
    """

    def __init__(
        self,
        command: str,
        unit: str,
        *,
        enabled: bool = True,
        every: float = 10.0,
        quiet: float = 2.0,
        stream: Any = None,
        clock: Any = None,
    ) -> None:
        import time

        self.command = command
        self.unit = unit
        self.enabled = enabled and os.environ.get("TOOLCANCEL_PROGRESS", "1") != "0"
        self.every = every
        self.quiet = quiet
        self.stream = sys.stderr if stream is None else stream
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._clock = time.monotonic if clock is None else clock
        self.start = self._clock()
        self._phase: tuple[int, int] | None = None
        self._label_start = self.start
        self._shown = -float("inf")
        self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Clear the bar from the terminal (a plain line stays)."""
        if self._drawn and self.tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        self._drawn = False

    def line(self, done: int, total: int, label: str | None = None) -> str:
        now = self._clock()
        what = f"{label}: " if label else ""
        eta = ""
        spent = now - self._label_start
        if 0 < done < total and done >= ESTIMATE_SHARE * total and spent >= ESTIMATE_AFTER:
            eta = f", about {_duration(spent * (total - done) / done)} left"
        if self.tty:
            width = 24
            filled = int(width * min(done, total) / max(total, 1))
            head = f"[{'#' * filled}{'.' * (width - filled)}] "
        else:
            head = f"toolcancel {self.command}: "
        return f"{head}{what}{done:,}/{total:,} {self.unit} ({_duration(now - self.start)}{eta})"

    def elapsed(self) -> float:
        """Seconds since the display began, on the clock of its lines: the time a command's
        summary prints, so that it and the last progress line agree."""
        return self._clock() - self.start

    def update(self, done: int, total: int, label: str | None = None) -> None:
        if not self.enabled:
            return
        now = self._clock()
        if self._phase is not None and (total != self._phase[1] or done < self._phase[0]):
            self._label_start = now  # a new phase (another revision): a new estimate
        self._phase = (done, total)
        if now - self.start < self.quiet:
            return
        if self.tty:
            if now - self._shown < 0.1 and done < total:
                return
            self.stream.write("\r\x1b[K" + self.line(done, total, label))
        else:
            if now - self._shown < self.every:
                return
            self.stream.write(self.line(done, total, label) + "\n")
        self._shown = now
        self._drawn = True
        self.stream.flush()


ESTIMATE_SHARE: Final = 0.05
ESTIMATE_AFTER: Final = 3.0
"""A progress line estimates the time left only once this share of the phase's work is done and
these seconds of it have passed: before, a rate read off the first few items (the slowest, or a
lucky few) says "about 5 h left" for a run of seconds."""


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds // 60 % 60:02d} min"


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, the cut marked with an ellipsis."""
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


_BREAKS = {c: repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}
"""Every character ``str.splitlines`` breaks at, and its escape."""
_ESCAPE_BREAKS = str.maketrans(_BREAKS)


def one_line(text: str) -> str:
    """``text`` with its line breaks escaped, so that it prints as exactly one line (a file
    name or a value quoted from the input may hold any of them)."""
    return text.translate(_ESCAPE_BREAKS)


def complain(command: str | None, message: str, *, usage: bool = False) -> None:
    """The one line on stderr every unusable input gets (``usage``: ends with the hint to
    ``--help``, for a problem with the command line itself)."""
    prog = "toolcancel" if not command else f"toolcancel {command}"
    hint = f" (see {prog} --help)" if usage else ""
    print(one_line(f"{prog}: {message}{hint}"), file=sys.stderr)


def revision_option(value: str) -> str:
    """The ``type`` of a ``--revision`` option: a revision of the shipped contract (anything
    else is a usage error, so the line ends with the hint to ``--help``)."""
    from ..contract.loader import load_contract

    revisions = load_contract().revisions
    if value not in revisions:
        raise argparse.ArgumentTypeError(
            f"unknown contract revision {value!r}; choose one of {', '.join(revisions)}"
        )
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        command = self.prog.removeprefix("toolcancel").strip()
        complain(command, message, usage=True)
        self.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="toolcancel",
        description="The cooperative, quiescent tool-cancellation contract: reference "
        "implementation, model checker and conformance oracle.",
    )
    parser.add_argument("--version", action="version", version=f"toolcancel {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"toolcancel.cli.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"toolcancel.cli.commands.{name}":
                raise
            continue
        module.register(sub)
    for command in sub.choices.values():
        command.set_defaults(_parser=command)  # its own prefix for arguments it does not know
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by the command's own parser: its prefix and its --help
        args._parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        code: int = args.func(args)
    except UsageError as exc:
        complain(args.command, str(exc), usage=True)
        return 2
    except ToolcancelError as exc:
        complain(args.command, str(exc))
        return 2
    except KeyboardInterrupt:
        complain(args.command, "interrupted")
        return 130
    except BrokenPipeError:
        return 1
    except OSError as exc:  # a reader that did not name its file itself
        where = f"{exc.filename}: " if exc.filename is not None else ""
        complain(args.command, f"{where}{exc.strerror or exc}")
        return 2
    except MemoryError:
        complain(args.command, "out of memory (the input is too large)")
        return 2
    except RecursionError:
        complain(args.command, "the input is nested too deeply")
        return 2
    except Exception as exc:
        if os.environ.get("TOOLCANCEL_DEBUG"):
            raise
        complain(
            args.command,
            f"internal error ({type(exc).__name__}: {clip(str(exc), 200)}); this is a bug in "
            "toolcancel: please report it with the command line (TOOLCANCEL_DEBUG=1 shows "
            "the traceback)",
        )
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
