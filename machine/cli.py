"""The ``toolcancel`` command line.

Each command lives in its own module under ``toolcancel.commands`` and exposes ``register(sub)``
(adding its parser, with ``func`` set to a function taking the parsed arguments and returning an
exit code).  This module only dispatches and keeps the promise every command makes: bad input
gets one clear line naming where the problem is and exit code 2 -- never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .errors import ToolcancelError

COMMANDS = ("verify", "check", "vectors", "conform", "diagram", "explain")
"""Command modules, in the order ``--help`` lists them; a missing module is simply not offered."""


class CliError(ToolcancelError):
    """A problem with the command's input: printed as one line, exit code 2."""


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
    except (CliError, ToolcancelError) as exc:
        print(f"toolcancel {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"toolcancel {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
