"""``toolcancel diagram``: draw the contract from its own table, or check the drawings are fresh.

The drawings are committed so that readers (and GitHub's Markdown) see them without running
anything; a committed drawing that no longer matches ``contract.toml`` is worse than none.  So
this command both writes them and, with ``--check``, fails (exit 1) when the committed files differ
from what the contract generates -- the CI hook that keeps them honest.

What is compared: DOT, Mermaid and ``PRECEDENCE.md`` byte for byte (they contain no timestamps or
tool versions).  SVG is Graphviz's output and carries dot's version, so an SVG is fresh when it
exists, parses as XML, and embeds the SHA-256 of exactly the DOT that is generated now
(:func:`toolcancel.teaching.diagrams.render_svg` puts it there).  That check needs no Graphviz, and
a regeneration leaves a fresh SVG untouched, so two machines with different Graphviz versions do not
fight over it.

Every file is written by :func:`toolcancel.contract.fileio.write_text`: to a temporary file in its
own directory, then moved into place, so an interrupted run leaves each file either old or new,
never half-written; a destination that is a device, FIFO, socket or directory is refused before any
work.

Where the files go: in a source checkout (the current directory holds ``spec/contract.toml`` and
``pyproject.toml``) the repository's layout -- ``diagrams/``, ``spec/PRECEDENCE.md``,
``spec/SCENARIOS.md`` and the Mermaid blocks of ``README.md``.  Anywhere else everything goes into
the ``--out`` directory (default ``./diagrams``, created and announced), so the command never
creates ``./spec/`` or edits a README that is not the project's.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...contract.fileio import (
    check_destination,
    check_directory,
    generated_text,
    is_stream,
    write_text,
)
from ...contract.loader import Contract, load_contract, load_contract_file
from ..main import CliError, UsageError

SUFFIXES = (".dot", ".svg", ".mmd")
PREFIX = "contract-"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "diagram",
        help="draw the per-call machine and the precedence table from contract.toml",
        description="Write diagrams/contract-<revision>.{dot,svg,mmd} (Graphviz DOT and SVG, "
        "Mermaid stateDiagram-v2), diagrams/contract-<revision>-overview.svg (the stages and "
        "transitions on one 16:9 slide) and PRECEDENCE.md, all generated from the contract file. "
        "With --check, write nothing and exit 1 listing every stale file.",
        epilog="Where the files go: in a source checkout of toolcancel (the current directory "
        "holds spec/contract.toml and pyproject.toml), the repository's layout: diagrams/, "
        "spec/PRECEDENCE.md, spec/SCENARIOS.md and README.md's Mermaid blocks. Anywhere else, "
        "everything goes into --out (default ./diagrams). With --contract PATH, PRECEDENCE.md "
        "goes next to PATH; --precedence FILE overrides all of these. "
        "DOT and Mermaid need nothing but this package; SVG needs Graphviz's dot (apt-get "
        "install graphviz, brew install graphviz); without it the text formats are still "
        "written. Exit codes: 0 done or fresh, 1 stale (--check), 2 bad input.",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="directory for the drawings (default: ./diagrams)",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 and list the files that differ from the contract",
    )
    p.add_argument(
        "--revision",
        default="all",
        metavar="REV",
        help="seed, revised or all (default: all)",
    )
    p.add_argument(
        "--contract",
        type=Path,
        metavar="PATH",
        help="draw this contract file instead of the shipped one",
    )
    p.add_argument(
        "--precedence",
        type=Path,
        metavar="FILE",
        help="where PRECEDENCE.md goes (default: next to the contract, see below)",
    )
    p.set_defaults(func=run)


@dataclass
class Planned:
    """One file the contract generates."""

    path: Path
    text: str | None
    """The exact content (DOT, Mermaid, Markdown); None for an SVG (see ``dot``)."""
    dot: str | None = None
    """For an SVG: the DOT it must be drawn from."""


def in_checkout() -> bool:
    """Whether the current directory is a source checkout of toolcancel (the repository's
    layout is then where the generated files belong)."""
    return Path("spec/contract.toml").is_file() and Path("pyproject.toml").is_file()


def _plan(args: argparse.Namespace, contract: Contract) -> tuple[list[Planned], list[Path]]:
    """The files to generate, and the orphaned drawings of revisions the contract no longer has
    (only looked for when drawing all revisions)."""
    from ...teaching import diagrams, tables

    if args.revision == "all":
        revisions = list(contract.revisions)
    elif args.revision in contract.revisions:
        revisions = [args.revision]
    else:
        raise CliError(
            f"unknown revision {args.revision!r}; choose {', '.join(contract.revisions)} or all"
        )
    out: Path = args.out if args.out is not None else Path("diagrams")
    planned: list[Planned] = []
    for name in revisions:
        drawing = diagrams.draw(contract.revision(name))
        stem = out / f"{PREFIX}{name}"
        planned.append(Planned(stem.with_suffix(".dot"), drawing.dot))
        planned.append(Planned(stem.with_suffix(".svg"), None, drawing.dot))
        planned.append(Planned(stem.with_suffix(".mmd"), drawing.mermaid))
        slide = diagrams.overview_dot(contract.revision(name), slide=True)
        planned.append(Planned(out / f"{PREFIX}{name}-overview.svg", None, slide))
    planned.append(Planned(_precedence_path(args), tables.precedence_markdown(contract)))
    if args.contract is None:  # the curated stories run the shipped contract's registry
        from ...teaching.explain import build_scenarios_markdown

        planned.append(
            Planned(_precedence_path(args).with_name("SCENARIOS.md"), build_scenarios_markdown())
        )
    readme = _readme(Path("README.md"), planned) if in_checkout() else None
    if readme is not None:
        planned.append(readme)
    orphans: list[Path] = []
    if args.revision == "all" and out.is_dir():
        wanted = {p.path.name for p in planned}
        orphans = sorted(
            p
            for p in out.iterdir()
            if p.name.startswith(PREFIX) and p.suffix in SUFFIXES and p.name not in wanted
        )
    return planned, orphans


_BEGIN = "<!-- BEGIN GENERATED: "
_END = "<!-- END GENERATED -->"


def _readme(path: Path, planned: list[Planned]) -> Planned | None:
    """README.md with every ``<!-- BEGIN GENERATED: <file> -->`` block refilled from the planned
    Mermaid file of that name, so the picture a reader sees cannot drift from the contract."""
    text = generated_text(path)
    if text is None or _BEGIN not in text:
        return None
    mermaid = {str(p.path): p.text for p in planned if p.path.suffix == ".mmd"}
    out, rest = [], text
    while _BEGIN in rest:
        head, _, tail = rest.partition(_BEGIN)
        name, _, tail = tail.partition(" -->")
        if name not in mermaid or _END not in tail:
            return None
        _, _, rest = tail.partition(_END)
        out.append(f"{head}{_BEGIN}{name} -->\n```mermaid\n{mermaid[name]}```\n{_END}")
    return Planned(path, "".join(out) + rest)


def _precedence_path(args: argparse.Namespace) -> Path:
    if args.precedence is not None:
        return Path(args.precedence)
    if args.contract is not None:
        return Path(args.contract).parent / "PRECEDENCE.md"
    if in_checkout():
        return Path("spec") / "PRECEDENCE.md"
    return (args.out if args.out is not None else Path("diagrams")) / "PRECEDENCE.md"


def _svg_problem(path: Path, dot: str) -> str | None:
    """Why the SVG at ``path`` is not a drawing of ``dot`` (None if it is)."""
    from ...teaching.diagrams import dot_digest, svg_dot_digest

    text = generated_text(path)
    if text is None:
        return "missing"
    try:
        ET.fromstring(text.encode("utf-8"))
    except ET.ParseError:
        return "not valid XML"
    digest = svg_dot_digest(text)
    if digest is None:
        return "carries no DOT digest"
    if digest != dot_digest(dot):
        return "drawn from a different DOT"
    return None


def _problem(item: Planned) -> str | None:
    if item.text is None:
        assert item.dot is not None
        return _svg_problem(item.path, item.dot)
    current = generated_text(item.path)
    if current is None:
        return "missing"
    return None if current == item.text else "differs from the contract"


def run(args: argparse.Namespace) -> int:
    for option, value in (("--out", args.out), ("--precedence", args.precedence)):
        if is_stream(value):
            raise UsageError(
                f"{option} cannot be - (stdout): diagram writes a set of files; print one "
                "drawing with `toolcancel explain TARGET --mermaid -`"
            )
    if args.out is not None and not args.check:
        check_directory(args.out, "--out")  # a device is no place for a set of files
    contract = load_contract() if args.contract is None else load_contract_file(args.contract)
    planned, orphans = _plan(args, contract)
    if args.check:
        return _check(planned, orphans)
    return _generate(planned, orphans)


def _check(planned: list[Planned], orphans: list[Path]) -> int:
    stale = [(item.path, why) for item in planned if (why := _problem(item)) is not None]
    stale += [(path, "no such revision in the contract") for path in orphans]
    if not stale:
        print(f"fresh: all {len(planned)} generated files match the contract")
        return 0
    for path, why in stale:
        print(f"stale: {path} ({why})")
    print(f"{len(stale)} stale file(s); run `toolcancel diagram` to regenerate them")
    return 1


def _generate(planned: list[Planned], orphans: list[Path]) -> int:
    from ...teaching.diagrams import GraphvizMissing, render_svg

    for item in planned:  # a destination that cannot be a file: say so before any work
        check_destination(item.path, mkdir=True)
    # Render everything before writing anything: a failure leaves the old set intact.
    contents: list[tuple[Path, str]] = []
    missing_dot: GraphvizMissing | None = None
    not_rendered: list[Path] = []
    for item in planned:
        if item.text is not None:
            if generated_text(item.path) != item.text:
                contents.append((item.path, item.text))
            continue
        assert item.dot is not None
        if _svg_problem(item.path, item.dot) is None:
            continue  # drawn from this very DOT already (possibly by another Graphviz)
        if missing_dot is None:
            try:
                contents.append((item.path, render_svg(item.dot)))
                continue
            except GraphvizMissing as exc:
                missing_dot = exc
        not_rendered.append(item.path)
    made: set[Path] = set()
    for path, text in contents:
        if not path.parent.is_dir() and path.parent not in made:
            print(f"created directory {path.parent}")
            made.add(path.parent)
        write_text(path, text, mkdir=True)
        print(f"wrote {path}")
    try:
        for path in orphans:
            path.unlink()
            print(f"removed {path} (no such revision in the contract)")
    except OSError as exc:
        raise CliError(f"{exc.filename}: cannot remove ({exc.strerror})") from None
    unchanged = len(planned) - len(contents) - len(not_rendered)
    if unchanged:
        print(f"unchanged: {unchanged} file(s)")
    if missing_dot is not None:
        absent = sum(not path.exists() for path in not_rendered)
        left = [f"{absent} SVG file(s) missing (never written)"] if absent else []
        if len(not_rendered) > absent:
            left.append(f"{len(not_rendered) - absent} SVG file(s) left out of date")
        print(f"toolcancel diagram: {missing_dot}; {', '.join(left)}", file=sys.stderr)
    return 0
