"""The ``toolcancel`` command line.

Each command lives in its own module under ``toolcancel.commands`` and exposes ``register(sub)``
(adding its parser, with ``func`` set to a function taking the parsed arguments and returning an
exit code).  This module only dispatches and keeps the promise every command makes: bad input
gets one clear line naming where the problem is and exit code 2 -- never a traceback.

The readers name the file and line themselves (:class:`ToolcancelError` messages).  What they do
not foresee is still one line and exit 2 here: an ``OSError`` names its file, running out of
memory or recursion says so, and anything else is reported as an internal error (set
``TOOLCANCEL_DEBUG=1`` to get the traceback instead).  Messages are flattened to one line.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from .errors import ToolcancelError

COMMANDS = ("verify", "check", "vectors", "conform", "diagram", "explain")
"""Command modules, in the order ``--help`` lists them; a missing module is simply not offered."""

MAX_WORKERS = 256
"""Most worker processes ``--workers`` may ask for (``verify``, ``vectors``)."""


class CliError(ToolcancelError):
    """A problem with the command's input: printed as one line, exit code 2."""


_BREAKS = {c: repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}
"""Every character ``str.splitlines`` breaks at, and its escape."""
_ESCAPE_BREAKS = str.maketrans(_BREAKS)


def one_line(text: str) -> str:
    """``text`` with its line breaks escaped, so that it prints as exactly one line (a file
    name or a value quoted from the input may hold any of them)."""
    return text.translate(_ESCAPE_BREAKS)


def complain(command: str, message: str) -> None:
    """The one line on stderr every unusable input gets."""
    print(one_line(f"toolcancel {command}: {message}"), file=sys.stderr)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="toolcancel",
        description="The cooperative, quiescent tool-cancellation contract: reference "
        "implementation, model checker and conformance oracle.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"toolcancel.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"toolcancel.commands.{name}":
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
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
            f"internal error ({type(exc).__name__}: {str(exc)[:200]}); this is a bug in "
            "toolcancel: please report it with the command line (TOOLCANCEL_DEBUG=1 shows "
            "the traceback)",
        )
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
