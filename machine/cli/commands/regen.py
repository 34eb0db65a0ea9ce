"""``toolcancel regen``: every committed generated file, from one command, in dependency order.

A rule change touches ``spec/contract.toml`` (and ``spec/CONTRACT.md``'s prose, the code that
binds the rule); everything else that restates the contract is generated.  :data:`GENERATORS` is
the one table of what is generated, by what, in which order: each entry names its outputs and how
it is written or checked.  A new generated file is one more entry.

``--check`` writes nothing and exits 1 naming each stale file (CI's only freshness step).  Most
generators check in seconds; the vectors take a minute and more (the bounded enumeration runs
again).  So a successful ``regen`` records, in :data:`STAMPS`, a digest of every generator's
inputs and of the outputs it wrote; ``--check`` skips a generator whose inputs *and* outputs
still hash to what was recorded, and runs the real comparison otherwise (``--full`` always does).

Why that is sound: a generator's output is a pure function of its inputs (the files the entry
names, every source of the package -- the generators and the registry they drive -- the outputs
of the generators before it, the Python version and the versions of the package's run-time
dependencies, all of which the digest covers); a file
edited by hand changes its output digest; a digest that matches therefore means the comparison
would find what it found when the files were written, which was "fresh".  The stamp file is
written only by ``regen`` itself, after the generator succeeded.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...contract.fileio import write_text
from ..main import CliError

STAMPS = Path("generated.json")
"""Where ``regen`` records the digests (committed, written only by ``regen``)."""

SOURCES = ("machine/**/*.py", "spec/*.toml", "spec/CONTRACT.md")
"""Inputs of every generator: the package's sources (generators, registry, verifier...) and
the contract."""


@dataclass(frozen=True)
class Generator:
    """One generator: its name, what it reads besides :data:`SOURCES` and the outputs of the
    generators before it, what it writes (glob patterns from the checkout's root), and
    ``run(check) -> exit code`` (0 written or fresh, 1 stale; ``check`` writes nothing and
    prints each stale file)."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    run: Callable[[bool], int]


def _command(*argv: str) -> Callable[[bool], int]:
    """A ``toolcancel`` command that writes its files, or with ``--check`` compares them."""

    def run(check: bool) -> int:
        from ..main import main

        return main([*argv, "--check"] if check else list(argv))

    return run


def _trace_schema(check: bool) -> int:
    from ...contract.trace import schema_path, write_schema

    if write_schema(check=check):
        return 0
    print(f"stale: {schema_path()}")
    return 1


JS_OUTCOMES = Path("examples/js/outcomes.js")
"""What examples/js reads of the contract's outcomes, generated (``publishes_over``, R28)."""


def js_outcomes_text() -> str:
    """``examples/js/outcomes.js``: each revision's cancellation outcomes and what each
    publishes over an earlier result, as the JavaScript example reads them."""
    from ...contract.loader import load_contract

    contract = load_contract()
    rows = []
    for revision in contract.revisions:
        over = contract.revision(revision).publishes_over
        fields = ", ".join(f"{name}: '{over[name]}'" for name in sorted(over))
        rows.append(f"  {revision}: Object.freeze({{ {fields} }}),")
    rule = contract.publishes_over_rule
    return "\n".join(
        [
            "// outcomes.js: made from spec/contract.toml by `toolcancel regen`; never edit it.",
            "//",
            f"// What each cancellation outcome publishes over the result a call held ({rule};",
            "// `publishes_over` in contract.toml), per revision: 'success' (only failures survive",
            "// the cancellation) or 'any' (it replaces every result).",
            "",
            "export const PUBLISHES_OVER = Object.freeze({",
            *rows,
            "});",
            "",
        ]
    )


def _js_outcomes(check: bool) -> int:
    text = js_outcomes_text()
    try:
        current = JS_OUTCOMES.read_text("utf-8")
    except OSError:
        current = None
    if current == text:
        return 0
    if check:
        print(f"stale: {JS_OUTCOMES}")
        return 1
    write_text(JS_OUTCOMES, text)
    return 0


def _real_world(check: bool) -> int:
    """docs/REAL-WORLD.md from the recorded measurement (docs/real-world.json); measuring again
    runs every runtime's adapter (``python -m toolcancel.teaching.realworld --run``), not part of
    regen."""
    from ...teaching.realworld import generate_real_world

    changed = generate_real_world(Path(), check=check)
    for name in changed if check else ():
        print(f"stale: {name}")
    return 1 if check and changed else 0


def _pages(after_vectors: bool) -> Callable[[bool], int]:
    """The marked blocks of the hand-written pages (:mod:`toolcancel.teaching.pages`)."""

    def run(check: bool) -> int:
        from ...teaching.pages import AFTER_VECTORS, BLOCKS, PageError, refresh

        try:
            changed = refresh(AFTER_VECTORS if after_vectors else BLOCKS, check=check)
        except PageError as e:
            raise CliError(str(e)) from None
        for name in changed if check else ():
            print(f"stale: {name}")
        return 1 if check and changed else 0

    return run


GENERATORS: tuple[Generator, ...] = (
    Generator(
        # CONTRACT.md's marked blocks (revisions, deviations, stages) and SPEC-MUTANTS.md's
        # (what verify --spec-mutants runs)
        "contract tables",
        inputs=(),
        outputs=("spec/CONTRACT.md", "spec/SPEC-MUTANTS.md"),
        run=_pages(after_vectors=False),
    ),
    Generator(
        "vectors",  # the calls' vectors (the reference registry's paths) and the turn vectors
        inputs=("spec/contract.toml",),
        outputs=("spec/vectors/*.jsonl", "spec/vectors/vector.schema.json"),
        run=_command("vectors", "--quiet"),
    ),
    Generator(
        "trace schema",
        inputs=("spec/contract.toml",),
        outputs=("spec/trace.schema.json",),
        run=_trace_schema,
    ),
    Generator(
        "primer matrix",  # PRIMER.md's abort matrix: reads the vectors (above)
        inputs=(),
        outputs=("spec/PRIMER.md",),
        run=_pages(after_vectors=True),
    ),
    Generator(
        "diagrams",  # DOT, SVG, Mermaid, PRECEDENCE.md, SCENARIOS.md, README's Mermaid blocks
        inputs=("spec/contract.toml", "spec/scenarios.toml"),
        outputs=(
            "diagrams/contract-*.dot",
            "diagrams/contract-*.svg",
            "diagrams/contract-*.mmd",
            "spec/PRECEDENCE.md",
            "spec/SCENARIOS.md",
            "README.md",
        ),
        run=_command("diagram"),
    ),
    Generator(
        "explorer",  # reads the vectors (above) and CONTRACT.md's rule texts
        inputs=("spec/contract.toml", "spec/CONTRACT.md"),
        outputs=("explorer/*.html", "explorer/*.js", "explorer/*.css"),
        run=_command("explore", "--quiet"),
    ),
    Generator(
        "js example's outcomes",  # what examples/js/registry.js reads of the contract
        inputs=("spec/contract.toml",),
        outputs=(str(JS_OUTCOMES),),
        run=_js_outcomes,
    ),
    Generator(
        "real-world table",  # conform's recorded verdicts on examples/runtimes, and reproductions
        inputs=("docs/real-world.json", "examples/runtimes/**/*.py"),
        outputs=("docs/REAL-WORLD.md",),
        run=_real_world,
    ),
)
"""Every committed generated file, in dependency order: a generator may read what the ones
before it write (the explorer reads the vectors)."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "regen",
        help="regenerate every committed generated file (vectors, diagrams, explorer, ...)",
        description="Run every generator of a source checkout in dependency order: "
        + ", ".join(g.name for g in GENERATORS)
        + ". With --check, write nothing and exit 1 naming every stale file.",
        epilog="--check skips a generator whose inputs and outputs still have the digests the "
        f"last regen recorded in {STAMPS} (--full compares anyway). --list prints each "
        "generator's outputs. Exit codes: 0 written or fresh, 1 stale (--check), 2 bad input.",
    )
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if any is stale")
    p.add_argument("--full", action="store_true", help="with --check: ignore the recorded digests")
    p.add_argument("--list", action="store_true", help="print the generators and their outputs")
    p.set_defaults(func=run)


def files(patterns: Sequence[str], root: Path = Path()) -> list[Path]:
    """The files the patterns match, sorted, each once."""
    found = {p for pattern in patterns for p in root.glob(pattern) if p.is_file()}
    return sorted(found)


def digest(patterns: Sequence[str], root: Path = Path()) -> str:
    """SHA-256 of the matched files' names and contents."""
    h = hashlib.sha256()
    for path in files(patterns, root):
        data = path.read_bytes()
        h.update(f"{path.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def stamp(index: int, root: Path = Path()) -> dict[str, str]:
    """What generator ``index``'s output is a function of, and the output, as digests."""
    g = GENERATORS[index]
    earlier = tuple(p for before in GENERATORS[:index] for p in before.outputs)
    return {
        "python": "{}.{}".format(*sys.version_info[:2]),
        "dependencies": _dependencies(),
        "inputs": digest((*SOURCES, *g.inputs, *earlier), root),
        "outputs": digest(g.outputs, root),
    }


def _dependencies() -> str:
    """The installed versions of the package's run-time dependencies (the DOT writer...)."""
    import re
    from importlib import metadata

    try:
        required = metadata.requires("toolcancel") or []
    except metadata.PackageNotFoundError:
        return "not installed"
    names = sorted(
        m[0] for r in required if "extra ==" not in r and (m := re.match(r"[A-Za-z0-9_.-]+", r))
    )
    versions = []
    for name in names:
        try:
            versions.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} missing")
    return " ".join(versions)


def _recorded() -> dict[str, Any]:
    try:
        data = json.loads(STAMPS.read_text("utf-8"))
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: every generator is compared in full
    return data if isinstance(data, dict) else {}


def run(args: argparse.Namespace) -> int:
    if args.list:
        for g in GENERATORS:
            print(f"{g.name}: {', '.join(g.outputs)}")
        return 0
    if not (Path("spec/contract.toml").is_file() and Path("pyproject.toml").is_file()):
        raise CliError(
            "run it in a source checkout of toolcancel (the generated files are committed "
            "there); outside one, each command writes to --out"
        )
    recorded = {} if args.full else _recorded()
    stale: list[str] = []
    for index, g in enumerate(GENERATORS):
        if args.check and recorded.get(g.name) == stamp(index):
            print(f"== {g.name}: fresh (inputs and outputs as the last regen recorded)")
            continue
        print(f"== {g.name}", flush=True)
        code = g.run(args.check)
        if code == 1 and args.check:
            stale.append(g.name)
        elif code:
            return code
        elif not args.check:
            recorded[g.name] = stamp(index)
            _save(recorded)
    if stale:
        print(f"stale: {', '.join(stale)}; run `toolcancel regen` and commit the result")
        return 1
    return 0


def _save(recorded: dict[str, Any]) -> None:
    from ...contract.fileio import write_text

    known = {g.name for g in GENERATORS}
    kept = {name: recorded[name] for name in sorted(recorded) if name in known}
    write_text(STAMPS, json.dumps(kept, indent=2, sort_keys=True) + "\n")
