"""``toolcancel vectors``: write (or ``--check``) the language-neutral conformance vectors."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..cli import MAX_WORKERS, CliError
from ..contract import load_contract
from ..vectors import REVISIONS, SCHEMA_NAME, compare, expected_files, shipped_dir, write


def register(sub: Any) -> None:
    p = sub.add_parser(
        "vectors",
        help="write the conformance vectors (spec/vectors/) from the bounded enumeration",
        description="Enumerate the same bounded space as `verify`, run every configuration at "
        "every portable cancellation point on the reference registry, keep one vector per "
        "distinct (path, result) and write them, with their JSON Schema, as JSON Lines. With "
        "--check, compare a fresh generation with the files instead (exit 1 if they differ).",
    )
    p.add_argument(
        "--revision",
        default="all",
        help="contract revision: seed, revised or all (default: all)",
    )
    p.add_argument("--out", metavar="DIR", help="directory (default: the shipped spec/vectors)")
    p.add_argument("--check", action="store_true", help="compare instead of writing")
    p.add_argument(
        "--workers",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="worker processes (default: 2)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.revision == "all":
        revisions: tuple[str, ...] = REVISIONS
    else:
        load_contract().revision(args.revision)  # an unknown revision: one line, exit 2
        revisions = (args.revision,)
    if args.workers < 1:
        raise CliError("--workers must be at least 1")
    if args.workers > MAX_WORKERS:
        raise CliError(f"--workers must be at most {MAX_WORKERS}")
    directory = args.out or shipped_dir()
    if not args.check and os.path.exists(directory) and not os.path.isdir(directory):
        raise CliError(f"{directory}: not a directory")  # found before the long generation
    files = expected_files(revisions, args.workers)
    if args.check:
        problems = compare(directory, files)
        for problem in problems:
            print(f"toolcancel vectors: {problem}", file=sys.stderr)
        if not problems:
            for name, text in files.items():
                what = "schema" if name == SCHEMA_NAME else f"{text.count(chr(10))} vectors"
                print(f"{os.path.join(directory, name)}: up to date ({what})")
        return 1 if problems else 0
    try:
        written = write(directory, files)
    except OSError as exc:
        raise CliError(f"cannot write {exc.filename or directory}: {exc.strerror}") from None
    for path in written:
        text = files[path.name]
        what = "schema" if path.name == SCHEMA_NAME else f"{text.count(chr(10)):,} vectors"
        print(f"wrote {path}: {what}, {len(text.encode()):,} bytes")
    return 0
