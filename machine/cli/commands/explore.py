"""``toolcancel explore``: write the contract explorer (a static, offline site), or check it.

The site is committed (``explorer/`` of a source checkout) so a teacher opens ``index.html`` with
no install; like the diagrams, a committed site that no longer matches the contract and the
vectors is worse than none, so ``--check`` rebuilds it in memory and exits 1 listing every stale
file.  Every file is compared byte for byte except ``layout.js``, which holds Graphviz's SVG: it is
fresh when it embeds the digest of exactly the DOT generated now (as ``diagram --check`` judges an
SVG), so the check needs no Graphviz and two Graphviz versions do not fight over it.

Every file is built before any is written, and each is written by
:func:`toolcancel.contract.fileio.write_text` (a temporary file, then a rename): an interrupted run
leaves each file old or new, never half-written, and a destination that cannot be a file is refused
before any work.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ...contract.fileio import check_destination, generated_text, is_stream, write_text
from ..main import CliError, Progress, UsageError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "explore",
        help="write the contract explorer: a static, offline site to click through the machine",
        description="Write a static web site (open index.html from disk or serve the directory; "
        "no network needed) generated from contract.toml, CONTRACT.md and the shipped vectors: "
        "an overview of the seven stages and the whole machine in one layout, every state and "
        "transition with its guards, outcome and rule texts, every vector stepped forward and "
        "back, a dropped trace replayed, the two revisions and the retry behaviours side by "
        "side, and the precedence table. With --check, write nothing and exit 1 listing every "
        "stale file.",
        epilog="Where the files go: --out DIR, else explorer/ (in a source checkout, the "
        "committed site) or ./explorer elsewhere. Building needs Graphviz's dot for the layout "
        "(apt-get install graphviz); --check does not. Exit codes: 0 done or fresh, 1 stale "
        "(--check), 2 bad input.",
    )
    p.add_argument("--out", type=Path, metavar="DIR", help="directory of the site")
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 and list the files that differ from a fresh build",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ...contract.loader import load_contract
    from ...teaching.diagrams import GraphvizMissing, have_dot
    from ...teaching.explain import shipped_vectors
    from ...teaching.explorer import ExplorerError, contract_markdown, site_files

    if is_stream(args.out):
        raise UsageError("--out is a directory (the site is several files), not -")
    out: Path = args.out if args.out is not None else Path("explorer")
    if out.exists() and not out.is_dir():
        raise CliError(f"{out}: not a directory")
    if args.check and not out.is_dir():  # nothing to compare: say so before a long build
        print(f"stale: {out}/ is missing; run `toolcancel explore` to write the site there")
        return 1
    contract = load_contract()
    if not args.check:
        for name in _names(contract):  # a destination that cannot be a file: before any work
            check_destination(out / name, mkdir=True)
        if not have_dot():
            raise GraphvizMissing()
    vectors = {r: shipped_vectors(r) for r in contract.revisions}
    with Progress("explore", "vectors", enabled=not args.quiet) as progress:
        try:
            files = site_files(contract, vectors, contract_markdown(), progress.update)
        except ExplorerError as exc:
            raise CliError(str(exc)) from None
    if args.check:
        return _check(out, files)
    return _write(out, files)


def _names(contract: Any) -> list[str]:
    from ...teaching.explorer import LAYOUT, STATIC

    return [*STATIC, "data.js", *(f"vectors-{r}.js" for r in contract.revisions), LAYOUT]


def _problem(out: Path, f: Any) -> str | None:
    from ...teaching.explorer import embedded_layout_digest

    current = generated_text(out / f.name)
    if current is None:
        return "missing"
    if f.text is None:
        found = embedded_layout_digest(current)
        if found is None:
            return "carries no layout digest"
        return None if found == f.digest else "drawn from a different DOT"
    return None if current == f.text else "differs from a fresh build"


def _orphans(out: Path, files: list[Any]) -> list[Path]:
    """Vectors of a revision the contract no longer has (the page would still list it)."""
    names = {f.name for f in files}
    return sorted(p for p in out.glob("vectors-*.js") if p.name not in names)


def _check(out: Path, files: list[Any]) -> int:
    stale = [(f.name, why) for f in files if (why := _problem(out, f)) is not None]
    stale += [(p.name, "no such revision in the contract") for p in _orphans(out, files)]
    if not stale:
        print(f"fresh: all {len(files)} files of {out} match the contract and the vectors")
        return 0
    for name, why in stale:
        print(f"stale: {out / name} ({why})")
    print(f"{len(stale)} stale file(s); run `toolcancel explore` to regenerate them")
    return 1


def _write(out: Path, files: list[Any]) -> int:
    from ...teaching.explorer import render_layout

    contents: list[tuple[Path, str]] = []
    for f in files:  # render everything before writing anything
        if _problem(out, f) is None:
            continue
        text = f.text if f.text is not None else render_layout(f.dots)
        contents.append((out / f.name, text))
    if contents and not out.is_dir():
        print(f"created directory {out}")
    total = 0
    for path, text in contents:
        write_text(path, text, mkdir=True)
        total += len(text.encode())
        print(f"wrote {path} ({len(text.encode()):,} bytes)")
    try:
        for path in _orphans(out, files):
            path.unlink()
            print(f"removed {path} (no such revision in the contract)")
    except OSError as exc:
        raise CliError(f"{exc.filename}: cannot remove ({exc.strerror})") from None
    unchanged = len(files) - len(contents)
    if unchanged:
        print(f"unchanged: {unchanged} file(s)")
    print(f"open {out / 'index.html'} in a browser (no server or network needed)", file=sys.stderr)
    return 0
