"""``toolcancel vectors``: write (or ``--check``) the language-neutral conformance vectors."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ...contract.fileio import check_destination, is_stream
from ...contract.loader import load_contract
from ...oracle.vectors import REVISIONS, SCHEMA_NAME, shipped_dir, stageless_file
from ...oracle.vectors.turns import turn_file
from ...selfcheck import cluster
from ...selfcheck.vectorgen import compare, expected_files, write
from ..main import MAX_WORKERS, CliError, Progress, UsageError, default_workers


def _default_dir(check: bool) -> str:
    """spec/vectors of the source checkout in the current directory; for --check alone, the
    vectors shipped in the package.  Writing never defaults into the installed package."""
    if os.path.isfile("spec/contract.toml") and os.path.isfile("pyproject.toml"):
        return os.path.join("spec", "vectors")
    if check:
        return str(shipped_dir())
    raise UsageError(
        "give --out DIR: outside a source checkout of toolcancel there is no spec/vectors to "
        "write (the vectors shipped in the installed package are never rewritten)"
    )


def register(sub: Any) -> None:
    p = sub.add_parser(
        "vectors",
        help="write the conformance vectors (spec/vectors/) from the bounded enumeration",
        description="Enumerate the same bounded space as `verify`, run every configuration at "
        "every portable cancellation point on the reference registry, keep one vector per "
        "distinct (path, result) -- and, for runtimes without the optional stages, one per "
        "scenario they can tell apart (stageless-<revision>.jsonl) -- and write them, with their "
        "JSON Schema, as JSON Lines. With "
        "--check, compare a fresh generation with the files instead (exit 1 if they differ).",
    )
    p.add_argument(
        "--revision",
        default="all",
        help="contract revision: seed, revised or all (default: all)",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="directory to write to, or to compare with for --check (default: spec/vectors in "
        "a source checkout; --check alone compares with the vectors shipped in the package, "
        "which are never rewritten)",
    )
    p.add_argument("--check", action="store_true", help="compare instead of writing")
    p.add_argument(
        "--workers",
        type=int,
        default=default_workers(),
        help=f"worker processes (default: the CPUs available, here {default_workers()})",
    )
    p.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="run the configurations on the Dask distributed cluster whose scheduler is at "
        "ADDRESS (e.g. tcp://10.0.0.5:8786; its workers need this toolcancel installed, with "
        "the cluster extra) instead of --workers local processes; the vectors are the same",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress on stderr (shown by default: a bar on a terminal, else a line every "
        "10 s; TOOLCANCEL_PROGRESS=0 in the environment also turns it off)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.revision == "all":
        revisions: tuple[str, ...] = REVISIONS
    else:
        load_contract().revision(args.revision)  # an unknown revision: one line, exit 2
        revisions = (args.revision,)
    if args.workers < 1:
        raise UsageError("--workers must be at least 1")
    if args.workers > MAX_WORKERS:
        raise UsageError(f"--workers must be at most {MAX_WORKERS}")
    if is_stream(args.out):
        raise UsageError("--out is a directory (vectors are several files), not -")
    directory = args.out or _default_dir(args.check)
    if not args.check:  # found before the long generation
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise CliError(f"{directory}: not a directory")
        turns = (turn_file(directory, r).name for r in revisions)
        family = (stageless_file(directory, r).name for r in revisions)
        for name in (SCHEMA_NAME, *(f"{r}.jsonl" for r in revisions), *family, *turns):
            check_destination(os.path.join(directory, name), mkdir=True)
    if args.cluster is not None:
        cluster.quiet()
    with Progress("vectors", "configurations", enabled=not args.quiet) as progress:
        files = expected_files(
            revisions, args.workers, progress=progress.update, cluster=args.cluster
        )
    if args.check:
        problems = compare(directory, files)
        for problem in problems:
            print(f"toolcancel vectors: {problem}", file=sys.stderr)
        if not problems:
            for name, text in files.items():
                what = _what(name, text)
                print(f"{os.path.join(directory, name)}: up to date ({what})")
        return 1 if problems else 0
    written = write(directory, files)
    for path in written:
        text = files[path.name]
        print(f"wrote {path}: {_what(path.name, text)}, {len(text.encode()):,} bytes")
    return 0


def _what(name: str, text: str) -> str:
    """What a written file holds: the schema, call vectors, or a turn table and turn vectors."""
    lines = text.count(chr(10))
    if name == SCHEMA_NAME:
        return "schema"
    if name.startswith("turns-"):
        return f"{lines - 1:,} turn vectors"
    return f"{lines:,} vectors"
