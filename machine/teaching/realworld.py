"""docs/REAL-WORLD.md: which of the contract's rules the tool runtimes people use keep.

``python -m toolcancel.teaching.realworld`` (from a source checkout with the ``runtimes`` extra)
makes it in two steps, so that checking it is cheap:

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
import platform
import re
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..contract.errors import ToolcancelError
from ..oracle.conform.capabilities import STAGES
from ..oracle.conform.jobs import available
from . import integrated

REVISIONS: Final = ("seed", "revised")
TABLE: Final = Path("docs/REAL-WORLD.md")
DATA: Final = Path("docs/real-world.json")
RUNTIMES_DIR: Final = Path("examples/runtimes")
PROTOCOL: Final = "protocol"
"""The rule conform cites when the adapter could not run a vector (an ``error`` answer): a
scenario the runtime cannot express, listed as not run, not as the runtime's failure."""
_RULES: Final = re.compile(r"^(R\d+(?:/R\d+)*)(?: \[([^\]]*)\])?: ")
"""A reproduction's docstring head: its rules, and optionally the scenario features of the
failures it reproduces, ``"R31 [body=throw]: ..."`` -- and ``row=<name>`` for a reproduction of
one configuration's row only (``row=mcp_sdk__auto``)."""


KINDS: Final = {
    "runtime": "the runtime's own behaviour",
    "design": "documented design",
    "inherited": "inherited from the language runtime",
    "mapping": "a limit of the mapping (not a finding)",
}
"""How a reproduction classifies what it shows (its docstring's ``Kind: <kind> -- <why>``
paragraph): only ``runtime`` is a defect a maintainer could act on as it stands; ``design``
quotes the runtime's documentation or source; ``inherited`` names a bare-asyncio control
(``Control: ``<function>``.``) that does the same without the runtime."""
_KIND: Final = re.compile(r"^Kind: (\w+) -- (.*)$", re.S)
_CONTROL_NAME: Final = re.compile(r"Control: ``(\w+)``")
ROW_KINDS: Final = (*KINDS, "limit", "text", "shared")
"""The order of a runtime's findings on the page: what a maintainer could act on first; a
text-only difference (another message, no error code: the same behaviour) and a failure the
control shares (the mapping's) last."""


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
    features: tuple[str, ...] = ()  # field=value the failure's scenario has (or cancelled=true)
    kind: str = "runtime"  # one of KINDS
    why: str = ""  # the classification's reason: a quote, the control, the configuration
    control: str | None = None  # inherited: the bare-asyncio function doing the same

    def shows(self, rule: str, scenario: dict[str, Any] | None) -> bool:
        """Whether this reproduces a failure citing ``rule`` on ``scenario``."""
        if scenario is None or rule not in self.rules:
            return False
        seen = {**scenario, "cancelled": scenario.get("cancel") != "never"}
        return all(
            str(seen.get(k)).lower() == v.lower()
            for k, v in (f.split("=", 1) for f in self.features)
        )


def runtime_of(name: str) -> str:
    """The runtime a row runs: ``mcp_sdk__stdio`` (``adapter_mcp_sdk__stdio.py``, the MCP SDK in
    another configuration) -> ``mcp_sdk``, whose ``repro_mcp_sdk.py`` its findings share."""
    return name.split("__", 1)[0]


def runtimes(root: Path) -> list[str]:
    """The runtimes with an adapter in ``examples/runtimes/``, sorted."""
    return sorted(
        p.stem.removeprefix("adapter_") for p in (root / RUNTIMES_DIR).glob("adapter_*.py")
    )


def setup(root: Path, name: str) -> str:
    """What every reproduction of ``repro_<name>.py`` stands on: the file's imports and helpers
    (every top-level statement before the first reproduction, the docstring and
    ``__future__`` aside), so that each can be pasted whole."""
    text = (root / RUNTIMES_DIR / f"repro_{runtime_of(name)}.py").read_text(encoding="utf-8")
    kept: list[ast.stmt] = []
    for node in ast.parse(text).body:
        doc = ast.get_docstring(node) if isinstance(node, ast.AsyncFunctionDef) else None
        if doc and _RULES.match(doc):
            break
        if not isinstance(node, ast.Expr) and not (
            isinstance(node, ast.ImportFrom) and node.module == "__future__"
        ):
            kept.append(node)
    if not kept:
        return ""
    lines = text.splitlines()
    return "\n".join(lines[kept[0].lineno - 1 : kept[-1].end_lineno]).strip()


BARE_CONTROLS: Final = "bare_asyncio.py"
"""The bare-asyncio controls every runtime's reproductions may name, written once beside them."""


def controls(root: Path, name: str) -> dict[str, tuple[str, str]]:
    """The bare-asyncio controls ``repro_<name>.py`` may name (docstring ``"Control: ..."``):
    its own and :data:`BARE_CONTROLS`'s -- the same body and cancellation without the runtime;
    name -> (summary, source)."""
    out = {}
    for path in (RUNTIMES_DIR / BARE_CONTROLS, RUNTIMES_DIR / f"repro_{runtime_of(name)}.py"):
        if not (root / path).is_file():
            continue
        text = (root / path).read_text(encoding="utf-8")
        for node in ast.parse(text).body:
            doc = ast.get_docstring(node) if isinstance(node, ast.AsyncFunctionDef) else None
            if isinstance(node, ast.AsyncFunctionDef) and doc and doc.startswith("Control: "):
                summary = " ".join(doc.split("\n\n")[0].split()).removeprefix("Control: ")
                out[node.name] = (summary, ast.get_source_segment(text, node) or "")
    return out


def _classify(
    path: Path, fn: str, doc: str, known: dict[str, tuple[str, str]]
) -> tuple[str, str, str | None]:
    """A reproduction's ``Kind: <kind> -- <why>`` paragraph: (kind, why, control)."""
    found = [m for p in doc.split("\n\n") if (m := _KIND.match(p.strip()))]
    if len(found) != 1 or found[0][1] not in KINDS:
        raise RealWorldError(
            f"{path}: {fn} needs one paragraph 'Kind: <{'|'.join(KINDS)}> -- <why>' in its "
            "docstring: nothing is published unclassified"
        )
    kind, why = found[0][1], " ".join(found[0][2].split())
    control = _CONTROL_NAME.search(why)
    if kind == "inherited" and (control is None or control[1] not in known):
        raise RealWorldError(
            f"{path}: {fn} is classified inherited but names no bare-asyncio control "
            "(Control: ``<function>``, a function whose docstring begins 'Control: ')"
        )
    return kind, why, control[1] if control is not None else None


def reproductions(root: Path, name: str) -> list[Reproduction]:
    """The reproductions in ``repro_<name>.py``, in file order (read, never imported)."""
    path = root / RUNTIMES_DIR / f"repro_{runtime_of(name)}.py"
    if not path.is_file():
        raise RealWorldError(f"{path}: missing: every runtime's findings need reproductions")
    text = path.read_text(encoding="utf-8")
    known = controls(root, name)
    out = []
    for node in ast.parse(text).body:
        doc = ast.get_docstring(node) if isinstance(node, ast.AsyncFunctionDef) else None
        match = _RULES.match(doc or "")
        if isinstance(node, ast.AsyncFunctionDef) and doc and match:
            summary = " ".join(doc.split("\n\n")[0].split())[match.end() :]
            source = ast.get_source_segment(text, node) or ""
            features = tuple(f.strip() for f in (match[2] or "").split(",") if f.strip())
            rules = tuple(match[1].split("/"))
            kind, why, control = _classify(path, node.name, doc, known)
            out.append(
                Reproduction(node.name, rules, summary, source, features, kind, why, control)
            )
    return out


def _conform(root: Path, name: str, revision: str, *, control: bool) -> dict[str, Any]:
    """conform's JSON report of ``name``'s adapter (or, ``control``, of its control row), on one
    adapter process: each process pays the runtime's import once, so :func:`measure_all` runs
    several conform runs at once instead of several adapter processes per run."""
    adapter = root / RUNTIMES_DIR / f"adapter_{name}.py"
    command = [sys.executable, "-m", "toolcancel", "conform", "--revision", revision, "--json",
               "--quiet", "--jobs", "1", "--adapter", sys.executable, str(adapter),
               *(["--control"] if control else [])]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, cwd=root, check=False)
    if done.returncode not in (0, 1):
        last = (done.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
        what = "its control" if control else "it"
        raise RealWorldError(f"{adapter}: conform could not run {what} ({revision}): {last}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def measure_control(root: Path, name: str, revision: str) -> dict[str, Any]:
    """The control row of ``name``'s mapping for ``revision``: toolcancel's registry through
    the adapter's mapping (``--control``, :mod:`toolcancel.runtimes.control`), and every
    vector it failed with the rule it broke -- a runtime failing one of them the same way has
    shown a property of the mapping, not of itself."""
    report = _conform(root, name, revision, control=True)
    return {
        "implementation": report["implementation"],
        "vectors": report["vectors"],
        "passed": report["passed"],
        "failed": report["failed"],
        "failures": [
            {"id": f["id"], "rule": f["rule"], "step": f["step"]} for f in report["failures"]
        ],
    }


def undriven(root: Path, name: str) -> dict[str, dict[str, str]]:
    """What ``name``'s adapter says it leaves out (its ``--undriven``): ``stages`` the runtime
    has that it does not drive, ``configurations`` of the runtime no row measures, each with
    why (:attr:`toolcancel.runtimes.Runtime.undriven`, ``unmeasured``)."""
    adapter = root / RUNTIMES_DIR / f"adapter_{name}.py"
    done = subprocess.run([sys.executable, str(adapter), "--undriven"], capture_output=True,
                          text=True, cwd=root, check=False)  # fmt: skip
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
        raise RealWorldError(f"{adapter}: --undriven failed: {last}")
    said: dict[str, dict[str, str]] = json.loads(done.stdout)
    return said


def measure(
    root: Path, name: str, revision: str, said: dict[str, dict[str, str]] | None = None
) -> dict[str, Any]:
    """Run ``name``'s adapter (and its control) through conform for ``revision``; what the
    table needs of it.  ``said``: the adapter's :func:`undriven`, if already asked."""
    report = _conform(root, name, revision, control=False)
    control = measure_control(root, name, revision)
    if control["implementation"] == report["implementation"]:  # --control ignored: no control
        raise RealWorldError(
            f"{RUNTIMES_DIR / f'adapter_{name}.py'}: --control served the runtime itself: end the "
            "adapter with toolcancel.runtimes.main(TheRuntime(), RegistryControl(TheRuntime))"
        )
    rules = {}
    for rule, row in report["by_rule"].items():
        verdict = row["state"]  # conform's own: broken, kept, masked, vacuous or not judged
        rules[rule] = {"title": row["title"], "verdict": verdict, "passed": row["passed"],
                       "failed": row["failed"]}  # fmt: skip
    return {
        "implementation": report["implementation"],
        "python": platform.python_version(),  # the adapter runs on this interpreter
        "control": control,
        "capabilities": report.get("capabilities"),
        "undriven": (said := undriven(root, name) if said is None else said)["stages"],
        "unmeasured": said["configurations"],
        "absent": said.get("absent", {}),
        "vectors": report["vectors"],
        "passed": report["passed"],
        "failed": report["failed"],
        "protocol": report["protocol"],
        "rules": rules,
        "families": [
            {
                "rule": f["rule"],
                "step": f["step"],
                "broken": f["broken"],
                "count": f["count"],
                "features": f["features"],
                "examples": _examples(root, revision, f, report["failures"]),
            }
            for f in report["families"]
        ],
    }


def _behaviour(s: dict[str, Any]) -> tuple[Any, ...]:
    """What tells apart the behaviours one family (a rule at a step) lumps together in a runtime
    without the contract's stages: the tool and its arguments, whether the body returns, throws
    or returns a non-JSON ``meta``, whether the caller cancelled while the call ran (an abort
    after the result changes nothing) and, if so, whether the body ignored it.  The table shows
    one vector of each."""
    body = s["body"]
    kind = "throw" if body.endswith("throw") else "bad_meta" if body == "bad_meta" else "return"
    cancelled = s["cancel"] not in ("never", "after")
    return (s["tool_known"], s["args"], kind, cancelled, cancelled and not s["cooperative"])


def _examples(
    root: Path, revision: str, family: dict[str, Any], failures: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One failure of ``family`` per distinct behaviour (:func:`_behaviour`), first first."""
    scenarios = _scenarios(root, revision)
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for f in failures:
        if (f["rule"], f["step"], f["broken"]) != (
            family["rule"],
            family["step"],
            family["broken"],
        ):
            continue
        s = scenarios[f["id"]]
        key = _behaviour(s)
        if key not in out:
            out[key] = {"id": f["id"], "expected": f["expected"], "observed": f["observed"],
                        "explanation": f["explanation"], "scenario": s}  # fmt: skip
    return list(out.values())


_SCENARIOS: dict[str, dict[str, Any]] = {}


def _scenarios(root: Path, revision: str) -> dict[str, Any]:
    """Vector id -> scenario, for the committed vectors of ``revision`` and its stage-less
    family (conform adds it for a runtime that lacks a stage)."""
    if revision not in _SCENARIOS:
        found: dict[str, Any] = {}
        for name in (f"{revision}.jsonl", f"stageless-{revision}.jsonl"):
            with (root / "spec" / "vectors" / name).open(encoding="utf-8") as lines:
                found.update((v["id"], v["scenario"]) for v in map(json.loads, lines))
        _SCENARIOS[revision] = found
    return _SCENARIOS[revision]


def measure_all(
    root: Path,
    only: Sequence[str] = (),
    before: dict[str, Any] | None = None,
    jobs: int | None = None,
) -> dict[str, Any]:
    """Every runtime, both revisions (the contents of ``docs/real-world.json``) -- or, with
    ``only``, those rows measured again and every other row as ``before`` has it.  ``jobs``
    conform runs at once (default: the CPUs available), each on one adapter process, and each
    adapter's ``--undriven`` asked once: the same file as one run after another."""
    names = runtimes(root)
    unknown = sorted(set(only) - set(names))
    if unknown:
        raise RealWorldError(f"--only {', '.join(unknown)}: no such row (adapter_<row>.py in "
                             f"{RUNTIMES_DIR})")  # fmt: skip
    todo = [name for name in names if not only or name in only]
    pairs = [(name, rev) for name in todo for rev in REVISIONS]
    with ThreadPoolExecutor(jobs or available()) as pool:
        said = dict(zip(todo, pool.map(lambda name: undriven(root, name), todo), strict=True))
        got = list(pool.map(lambda p: measure(root, p[0], p[1], said[p[0]]), pairs))
    out: dict[str, Any] = {name: {} for name in todo}
    for (name, rev), measured in zip(pairs, got, strict=True):
        out[name][rev] = measured
    kept = before or {}
    return {name: out[name] if name in out else kept[name]
            for name in names if name in out or name in kept}  # fmt: skip


def _rule_number(rule: str) -> int:
    """R27 -> 27 (the table lists rules in the contract's order; the data file sorts keys)."""
    return int(rule[1:]) if rule[1:].isdigit() else 0


def _cell(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


_KIND_CELL: Final = {
    "runtime": "**runtime**",
    "design": "design",
    "inherited": "inherited",
    "mapping": "mapping",
    "limit": "structural (LIMITS)",
    "text": "text only",
    "shared": "control fails too",
}


def text_only(expected: str, observed: str) -> bool:
    """Whether a result differs from the contract's only in words: the same error flag and the
    same shape, another message or no error code (R1's ``error`` left out) -- reported apart
    from a difference in behaviour."""
    try:
        want, got = json.loads(expected), json.loads(observed)
    except ValueError:
        return False  # a raise, or no result: behaviour
    if not (isinstance(want, dict) and isinstance(got, dict)):
        return False

    def shape(r: dict[str, Any]) -> tuple[Any, ...]:
        blocks = tuple(b.get("type") for b in r.get("content", []) if isinstance(b, dict))
        rest = {k: v for k, v in r.items() if k not in ("content", "error", "isError")}
        return blocks, r.get("isError"), json.dumps(rest, sort_keys=True)

    return bool(want.get("isError")) and shape(want) == shape(got)


def _control_line(by_rev: dict[str, Any]) -> str:
    """The control row: toolcancel's registry through the same mapping, per revision."""
    said = []
    for rev in REVISIONS:
        c = by_rev[rev].get("control")
        if c is None:
            return "Control: not measured (run `realworld --run`)."
        said.append(f"{rev} {c['passed']} of {c['vectors']} passed")
    first = by_rev[REVISIONS[0]]["control"]["implementation"]
    return (f"Control (`--control`: {first}): {'; '.join(said)}. A vector the control fails "
            "too is the mapping's, listed as such, never as the runtime's.")  # fmt: skip


def render(
    data: dict[str, Any],
    repros: dict[str, list[Reproduction]],
    setups: dict[str, str],
    control_sources: dict[str, dict[str, tuple[str, str]]] | None = None,
    integrations: dict[str, tuple[str, dict[str, str]]] | None = None,
) -> str:
    """The markdown table for the measurements ``data``, each runtime's reproductions (and the
    bare-asyncio controls they name, ``control_sources``) and what they stand on
    (:func:`setup`); an integrated row (``integrations``: row -> its integration module and
    that module's ``LIMITS``) is shown beside its plain row, each failure with its reason."""
    control_sources = control_sources or {}
    integrations = integrations or {}
    out = [
        "# Real-world tool runtimes against the contract",
        "",
        "<!-- generated by `python -m toolcancel.teaching.realworld` from docs/real-world.json and "
        "examples/runtimes/repro_*.py; do not edit by hand -->",
        "",
        "What each runtime keeps of the contract (spec/CONTRACT.md) at **outcome level**, "
        "judged by `toolcancel conform` through the adapters in "
        "[examples/runtimes/](../examples/runtimes/) -- public APIs only, offline, the versions "
        "pinned in the `runtimes` extra. A runtime "
        "declares the stages it has (`capabilities` in its hello); conform sends it only the "
        "vectors those stages can run, and a rule no such vector decides is **not judged** "
        "(not kept). A rule is **broken** when some vector's record breaks it (cited first or "
        "not), **kept** when a vector on which it could have failed was judged by it and "
        "passed, **masked** when the vectors that could have judged it all failed first under "
        "another rule, and **kept only vacuously** when only the empty step of a stage the "
        "runtime lacks exercised it (R7 without a post-execute stage): that says only that the "
        "runtime behaves as the stage's default would. Every failure family "
        "below was confirmed once outside the adapter by the "
        "reproduction it names: a self-contained script a maintainer can paste into their own "
        "issue tracker (`python examples/runtimes/repro_<runtime>.py <name>` runs one).",
        "",
        "Before a failure is published as the runtime's, toolcancel's own registry goes "
        "through the same mapping -- the same way to cancel, the same declared stages, the same "
        "reading of the answer (the **control** row, `adapter_<runtime>.py --control`, "
        "`toolcancel.runtimes.control`): a vector the control fails too is the mapping's. Each "
        "finding then has a **kind**: **runtime** (the runtime's own behaviour: what a "
        "maintainer could act on), *design* (documented: the reproduction quotes the "
        "runtime's doc or source), *inherited* (the language runtime's rule: a bare-asyncio "
        "control beside the reproduction does the same), *text only* (the same behaviour in "
        "other words: another message, no error code) or *mapping* (a limit of the adapter, "
        "not a finding). `python -m toolcancel.teaching.realworld --run` measures all of it "
        "again, every runtime and its control, both revisions.",
        "",
    ]
    for name, by_rev in data.items():
        first = by_rev[REVISIONS[0]]
        out += [f"## {name}: {first['implementation']}", ""]
        caps = first.get("capabilities")
        if isinstance(caps, dict):
            has = [k for k in STAGES if caps.get(k) is True]  # the contract's order, not the file's
            out.append(f"Declared: {', '.join(has) or 'no stage'}; cancels by "
                       f"{', '.join(caps.get('cancel', [])) or 'nothing'}. Measured on Python "
                       f"{first.get('python', '?')}.")  # fmt: skip
            out.append("")
        out += [_control_line(by_rev), ""]
        out += ["| revision | vectors run | passed | failed | rules kept | rules broken |",
                "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
        for rev in REVISIONS:
            m = by_rev[rev]
            rules = sorted(m["rules"].items(), key=lambda item: _rule_number(item[0]))
            kept = [r for r, row in rules if row["verdict"] == "kept"]
            broken = [r for r, row in rules if row["verdict"] == "broken" and r != PROTOCOL]
            out.append(f"| {rev} | {m['vectors']} | {m['passed']} | {m['failed']} | "
                       f"{', '.join(kept) or '—'} | {', '.join(broken) or '—'} |")  # fmt: skip
        out.append("")
        if name in integrations:
            module, reasons = integrations[name]
            out += integrated.beside(name, data, module, reasons, PROTOCOL, _cell, REVISIONS)
        for state, words in (
            ("masked", "Ran but masked by an earlier failure"),
            ("vacuous", "Kept only vacuously (a stage the runtime lacks)"),
        ):
            said = [f"{rev}: {', '.join(rs)}" for rev in REVISIONS
                    if (rs := [r for r, row in sorted(by_rev[rev]["rules"].items(),
                               key=lambda item: _rule_number(item[0]))
                               if row["verdict"] == state])]  # fmt: skip
            if said:
                out += [f"{words}: {'; '.join(said)}.", ""]
        unjudged = sorted(
            set.intersection(*({r for r, row in m["rules"].items()
                                if row["verdict"] == "not judged"} for m in by_rev.values())),
            key=_rule_number,
        )  # fmt: skip
        if unjudged:
            out += [f"Not judged in either revision (no vector this runtime can run decides "
                    f"them): {', '.join(unjudged)}.", ""]  # fmt: skip
        if first.get("undriven"):
            stages = sorted(first["undriven"].items())
            undriven_text = "; ".join(f"**{k}**: {_cell(v, 400)}" for k, v in stages)
            out += ["Stages the runtime has that this adapter does not drive (declared absent, "
                    f"so their rules are not judged here): {undriven_text}.", ""]  # fmt: skip
        if first.get("absent"):
            absent = "; ".join(
                f"**{k}**: {_cell(v, 400)}" for k, v in sorted(first["absent"].items())
            )
            out += [f"Stages of the contract the runtime does not have (declared absent, so the "
                    f"rules only they decide cannot be judged on it): {absent}.", ""]  # fmt: skip
        if first.get("unmeasured"):
            configurations = sorted(first["unmeasured"].items())
            text = "; ".join(f"**{k}**: {_cell(v, 400)}" for k, v in configurations)
            out += [f"Configurations no row measures: {text}.", ""]
        refused = [(rev, f) for rev in REVISIONS for f in by_rev[rev]["families"]
                   if f["rule"] == PROTOCOL]  # fmt: skip
        for rev, f in refused:
            e = f["examples"][0]
            out += [f"Not run ({rev}): {f['count']} vectors the adapter refused, e.g. "
                    f"{_cell(e['explanation'], 300)}", ""]  # fmt: skip
        families = [(rev, f) for rev in REVISIONS for f in by_rev[rev]["families"]
                    if f["rule"] != PROTOCOL]  # fmt: skip
        if not families:
            out += ["Every vector run passed.", ""]
            continue
        rows: list[tuple[int, str]] = []  # (its kind's place in ROW_KINDS, the row)
        used: dict[str, Reproduction] = {}
        actionable: dict[str, None] = {}  # the runtime's own, in behaviour: what to file
        for rev, f in families:
            title = by_rev[rev]["rules"].get(f["rule"], {}).get("title", "")
            control = by_rev[rev].get("control", {}).get("failures", [])
            failed = {(c["id"], c["rule"]) for c in control}
            for e in f["examples"]:
                repro = next(
                    (
                        r
                        for r in repros.get(name, [])
                        if r.shows(f["rule"], {**e["scenario"], "row": name})
                    ),
                    None,
                )
                if (e["id"], f["rule"]) in failed:  # the control fails it too: the mapping's
                    kind, link = "shared", "—"
                elif name in integrations:  # the integration's structural reason, no repro
                    kind = "text" if text_only(e["expected"], e["observed"]) else "limit"
                    link = _cell(integrations[name][1].get(f["rule"], ""), 240)
                elif repro is None:
                    raise RealWorldError(
                        f"{name}: the failure family {f['rule']} ({f['step']}, e.g. {e['id']}) "
                        f"has no reproduction: add a function to "
                        f"examples/runtimes/repro_{runtime_of(name)}.py "
                        f"whose docstring begins with '{f['rule']}: '"
                    )
                else:
                    used[repro.name] = repro
                    kind = "text" if text_only(e["expected"], e["observed"]) else repro.kind
                    link = f"[`{repro.name}`](#{name}-{repro.name})"
                    if kind == "runtime":
                        actionable[link] = None
                rows.append((ROW_KINDS.index(kind),
                             f"| {_KIND_CELL[kind]} | {f['rule']} {_cell(title)} | {f['step']} | "
                             f"{f['count']} | `{e['id']}` | {_cell(e['observed'])} | "
                             f"{_cell(e['expected'])} | {link} |"))  # fmt: skip
        out += [f"What a maintainer could act on as it stands: "
                f"{', '.join(actionable) or 'nothing'}.", ""]  # fmt: skip
        for title, kinds in (("Behaviour", (*KINDS, "limit")),
                             ("Text only: the same behaviour in other words (another message, "
                              "no error code)", ("text",)),
                             ("The mapping's (the control fails these too)",
                              ("shared",))):  # fmt: skip
            kept = [line for k, line in sorted(rows, key=lambda row: row[0])
                    if ROW_KINDS[k] in kinds]  # fmt: skip
            last = "why it stays broken" if name in integrations else "reproduction"
            if kept:
                out += [f"{title}:", "", "| kind | rule | step | vectors | e.g. | what the "
                        f"runtime did | the contract | {last} |",
                        "| --- | --- | --- | --- | --- | --- | --- | --- |", *kept, ""]  # fmt: skip
        if name in integrations:  # its failures have their reasons, not reproductions
            continue
        out += [f"The reproductions below stand on this set-up "
                f"(`examples/runtimes/repro_{runtime_of(name)}.py`):", "", "```python",
                setups.get(name, ""), "```", ""]  # fmt: skip
        for repro in used.values():
            out += [
                f'<a id="{name}-{repro.name}"></a>**`{repro.name}`** ({"/".join(repro.rules)}): '
                f"{repro.summary} Run it: `python examples/runtimes/repro_{runtime_of(name)}.py "
                f"{repro.name}`.",
                "",
                f"*{KINDS[repro.kind]}*: {repro.why}",
                "",
                "```python",
                repro.source,
                "```",
                "",
            ]
            if repro.control is not None:
                summary, source = control_sources[name][repro.control]
                out += [f"The bare-asyncio control `{repro.control}`: {summary}", "",
                        "```python", source, "```", ""]  # fmt: skip
    return "\n".join(out).rstrip() + "\n"


def generate_real_world(
    root: Path, *, run: bool = False, check: bool = False, only: Sequence[str] = ()
) -> list[str]:
    """Make (or, with ``check``, compare) docs/REAL-WORLD.md -- and, with ``run``, measure again
    into docs/real-world.json first (``only``: just those rows, the others kept as they are).
    Returns the files that differ (``check``) or were written."""
    data_path, table_path = root / DATA, root / TABLE
    before = _read(data_path)
    if run:
        data = measure_all(root, only, json.loads(before) if only and before else None)
        if not check:  # the measurement stands even if the render below stops
            data_path.write_text(_data_text(data), encoding="utf-8")
    else:
        try:
            data = json.loads(before or "")
        except ValueError as exc:
            raise RealWorldError(
                f"{data_path}: cannot read it ({exc}); measure with --run"
            ) from None
    repros = {name: reproductions(root, name) for name in data}
    table = render(
        data,
        repros,
        {name: setup(root, name) for name in data},
        {name: controls(root, name) for name in data},
        integrations_of(root, data),
    )
    changed = []
    for path, text, old in (
        (data_path, _data_text(data), before),
        (table_path, table, _read(table_path)),
    ):
        if old != text:
            changed.append(str(path.relative_to(root)))
            if not check:
                path.write_text(text, encoding="utf-8")
    return changed


def integrations_of(root: Path, data: dict[str, Any]) -> dict[str, tuple[str, dict[str, str]]]:
    """Each integrated row of ``data``: its integration module and that module's ``LIMITS``,
    checked against the row's verdicts (:func:`toolcancel.teaching.integrated.check`)."""
    try:
        modules = {name: integrated.module_of(root / RUNTIMES_DIR / f"adapter_{name}.py")
                   for name in data if integrated.is_integrated(name)}  # fmt: skip
        reasons = {m: integrated.limits(root, m) for m in set(modules.values())}
        integrated.check(data, modules, reasons, PROTOCOL)
    except integrated.IntegrationError as exc:
        raise RealWorldError(str(exc)) from None
    return {name: (m, reasons[m]) for name, m in modules.items()}


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.is_file() else None


def _data_text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m toolcancel.teaching.realworld", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--run", action="store_true", help="measure every runtime again (slow)")
    parser.add_argument("--check", action="store_true", help="exit 1 if a file would change")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the source checkout")
    parser.add_argument("--only", action="append", default=[], metavar="ROW",
                        help="with --run: measure only this row (adapter_ROW.py; repeatable), "
                        "keeping the others' measurement")  # fmt: skip
    args = parser.parse_args(argv)
    if args.only and not args.run:
        parser.error("--only needs --run")
    try:
        changed = generate_real_world(args.root, run=args.run, check=args.check, only=args.only)
    except RealWorldError as exc:
        print(f"toolcancel.teaching.realworld: {exc}", file=sys.stderr)
        return 2
    for path in changed:
        print(f"{'stale' if args.check else 'wrote'}: {path}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
