"""docs/REAL-WORLD.md: which of the contract's rules the tool runtimes people use keep.

``python -m toolcancel.realworld`` (from a source checkout with the ``runtimes`` extra) makes it in
two steps, so that checking it is cheap:

1. **measure** (``--run``): ``toolcancel conform`` runs every adapter of ``examples/runtimes/``
   (``adapter_<name>.py``), both revisions, at outcome level, and what it judged -- per rule kept,
   broken or not judged (and why), per failure family its rule, one vector id, what the runtime
   did and what the contract says -- is kept in ``docs/real-world.json``.  No timings: the same
   runtime versions give the same file.
2. **render**: the table is made from that file and the reproductions, ``repro_<name>.py`` beside
   each adapter.  A reproduction is a function whose docstring begins with the rules it shows
   (``"R27: a cancelled call_tool returns ..."``); it shows the runtime's own behaviour outside
   the adapter, and its source is what the table gives a maintainer to paste.  A failure family
   without a reproduction of its rule stops the render: nothing is published unconfirmed.

``--check`` renders again and exits 1 if the committed table differs; with ``--run`` it also
measures again and compares ``docs/real-world.json`` (slow: every runtime, every applicable
vector).  :func:`generate_real_world` is the one entry point (``toolcancel regen`` calls it).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .errors import ToolcancelError

REVISIONS: Final = ("seed", "revised")
TABLE: Final = Path("docs/REAL-WORLD.md")
DATA: Final = Path("docs/real-world.json")
RUNTIMES_DIR: Final = Path("examples/runtimes")
_RULES: Final = re.compile(r"^(R\d+(?:/R\d+)*): ")


class RealWorldError(ToolcancelError):
    """The table cannot be made (the message names the runtime, file or family)."""


@dataclass(frozen=True)
class Reproduction:
    """One function of a ``repro_<name>.py``: the rules it shows, its one-line summary, its
    source."""

    name: str
    rules: tuple[str, ...]
    summary: str
    source: str


def runtimes(root: Path) -> list[str]:
    """The runtimes with an adapter in ``examples/runtimes/``, sorted."""
    return sorted(
        p.stem.removeprefix("adapter_") for p in (root / RUNTIMES_DIR).glob("adapter_*.py")
    )


def reproductions(root: Path, name: str) -> list[Reproduction]:
    """The reproductions in ``repro_<name>.py``, in file order (read, never imported)."""
    path = root / RUNTIMES_DIR / f"repro_{name}.py"
    if not path.is_file():
        raise RealWorldError(f"{path}: missing: every runtime's findings need reproductions")
    text = path.read_text(encoding="utf-8")
    out = []
    for node in ast.parse(text).body:
        doc = ast.get_docstring(node) if isinstance(node, ast.AsyncFunctionDef) else None
        match = _RULES.match(doc or "")
        if isinstance(node, ast.AsyncFunctionDef) and doc and match:
            summary = " ".join(doc.split("\n\n")[0].split())[match.end() :]
            source = ast.get_source_segment(text, node) or ""
            out.append(Reproduction(node.name, tuple(match[1].split("/")), summary, source))
    return out


def measure(root: Path, name: str, revision: str) -> dict[str, Any]:
    """Run ``name``'s adapter through conform for ``revision``; what the table needs of it."""
    adapter = root / RUNTIMES_DIR / f"adapter_{name}.py"
    command = [sys.executable, "-m", "toolcancel", "conform", "--revision", revision, "--json",
               "--quiet", "--adapter", sys.executable, str(adapter)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, cwd=root, check=False)
    if done.returncode not in (0, 1):
        last = (done.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
        raise RealWorldError(f"{adapter}: conform could not run it ({revision}): {last}")
    report = json.loads(done.stdout)
    firsts = {f["id"]: f for f in report["failures"]}
    rules = {}
    for rule, row in report["by_rule"].items():
        if row["failed"]:
            verdict = "broken"
        elif row["passed"] and row["status"] != "none":
            verdict = "kept"
        else:
            verdict = "not judged"
        rules[rule] = {"title": row["title"], "verdict": verdict, "passed": row["passed"],
                       "failed": row["failed"], "why": row["why"]}  # fmt: skip
    return {
        "implementation": report["implementation"],
        "capabilities": report.get("capabilities"),
        "vectors": report["vectors"],
        "passed": report["passed"],
        "failed": report["failed"],
        "protocol": report["protocol"],
        "rules": rules,
        "families": [
            {
                "rule": f["rule"],
                "step": f["step"],
                "count": f["count"],
                "features": f["features"],
                "id": f["first"],
                "expected": firsts[f["first"]]["expected"],
                "observed": firsts[f["first"]]["observed"],
                "explanation": firsts[f["first"]]["explanation"],
            }
            for f in report["families"]
        ],
    }


def measure_all(root: Path) -> dict[str, Any]:
    """Every runtime, both revisions (the contents of ``docs/real-world.json``)."""
    return {name: {rev: measure(root, name, rev) for rev in REVISIONS} for name in runtimes(root)}


def _cell(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render(data: dict[str, Any], repros: dict[str, list[Reproduction]]) -> str:
    """The markdown table for the measurements ``data`` and each runtime's reproductions."""
    out = [
        "# Real-world tool runtimes against the contract",
        "",
        "<!-- generated by `python -m toolcancel.realworld` from docs/real-world.json and "
        "examples/runtimes/repro_*.py; do not edit by hand -->",
        "",
        "What each runtime keeps of the contract (spec/CONTRACT.md) at **outcome level**, "
        "judged by `toolcancel conform` through the adapters in "
        "[examples/runtimes/](../examples/runtimes/) -- public APIs only, offline, the versions "
        "pinned in the `runtimes` extra. A runtime "
        "declares the stages it has (`capabilities` in its hello); conform sends it only the "
        "vectors those stages can run, and a rule no such vector decides is **not judged** "
        "(not kept). Every failure family below was confirmed once outside the adapter by the "
        "reproduction it names: a self-contained script a maintainer can paste into their own "
        "issue tracker (`python examples/runtimes/repro_<runtime>.py <name>` runs one).",
        "",
    ]
    for name, by_rev in data.items():
        first = by_rev[REVISIONS[0]]
        out += [f"## {name}: {first['implementation']}", ""]
        caps = first.get("capabilities")
        if isinstance(caps, dict):
            has = [k for k, v in caps.items() if v is True]
            out.append(f"Declared: {', '.join(has) or 'no stage'}; cancels by "
                       f"{', '.join(caps.get('cancel', [])) or 'nothing'}.")  # fmt: skip
            out.append("")
        out += ["| revision | vectors run | passed | failed | rules kept | rules broken |",
                "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
        for rev in REVISIONS:
            m = by_rev[rev]
            kept = [r for r, row in m["rules"].items() if row["verdict"] == "kept"]
            broken = [r for r, row in m["rules"].items() if row["verdict"] == "broken"]
            out.append(f"| {rev} | {m['vectors']} | {m['passed']} | {m['failed']} | "
                       f"{', '.join(kept) or '—'} | {', '.join(broken) or '—'} |")  # fmt: skip
        out.append("")
        unjudged = sorted(
            {r for m in by_rev.values() for r, row in m["rules"].items()
             if row["verdict"] == "not judged"},
            key=lambda r: int(r[1:]),
        )  # fmt: skip
        if unjudged:
            out += [f"Not judged (no vector of this runtime decides them): {', '.join(unjudged)}.",
                    ""]  # fmt: skip
        families = [(rev, f) for rev in REVISIONS for f in by_rev[rev]["families"]]
        if not families:
            out += ["Every vector run passed.", ""]
            continue
        out += ["| rule | step | vectors | e.g. | what the runtime did | the contract | "
                "reproduction |", "| --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
        used: dict[str, Reproduction] = {}
        for rev, f in families:
            repro = next((r for r in repros.get(name, []) if f["rule"] in r.rules), None)
            if repro is None:
                raise RealWorldError(
                    f"{name}: the failure family {f['rule']} ({f['step']}, e.g. {f['id']}) has no "
                    f"reproduction: add a function to examples/runtimes/repro_{name}.py whose "
                    f"docstring begins with '{f['rule']}: '"
                )
            used[repro.name] = repro
            title = by_rev[rev]["rules"].get(f["rule"], {}).get("title", "")
            out.append(
                f"| {f['rule']} {_cell(title)} | {f['step']} | {f['count']} | `{f['id']}` | "
                f"{_cell(f['observed'])} | {_cell(f['expected'])} | "
                f"[`{repro.name}`](#{name}-{repro.name}) |"
            )
        out.append("")
        for repro in used.values():
            out += [
                f'<a id="{name}-{repro.name}"></a>**`{repro.name}`** ({"/".join(repro.rules)}): '
                f"{repro.summary}",
                "",
                "```python",
                repro.source,
                "```",
                "",
            ]
    return "\n".join(out).rstrip() + "\n"


def generate_real_world(root: Path, *, run: bool = False, check: bool = False) -> list[str]:
    """Make (or, with ``check``, compare) docs/REAL-WORLD.md -- and, with ``run``, measure again
    into docs/real-world.json first.  Returns the files that differ (``check``) or were written."""
    data_path, table_path = root / DATA, root / TABLE
    if run:
        data = measure_all(root)
    else:
        try:
            data = json.loads(data_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise RealWorldError(
                f"{data_path}: cannot read it ({exc}); measure with --run"
            ) from None
    repros = {name: reproductions(root, name) for name in data}
    table = render(data, repros)
    data_text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    changed = []
    for path, text in ((data_path, data_text), (table_path, table)):
        old = path.read_text(encoding="utf-8") if path.is_file() else None
        if old != text:
            changed.append(str(path.relative_to(root)))
            if not check:
                path.write_text(text, encoding="utf-8")
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m toolcancel.realworld", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--run", action="store_true", help="measure every runtime again (slow)")
    parser.add_argument("--check", action="store_true", help="exit 1 if a file would change")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the source checkout")
    args = parser.parse_args(argv)
    try:
        changed = generate_real_world(args.root, run=args.run, check=args.check)
    except RealWorldError as exc:
        print(f"toolcancel.realworld: {exc}", file=sys.stderr)
        return 2
    for path in changed:
        print(f"{'stale' if args.check else 'wrote'}: {path}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
