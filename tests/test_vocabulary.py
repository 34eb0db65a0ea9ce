"""The implementer's guide is right: one vocabulary table, checked against ``examples/js``, and
the example's sizes and counts derived, not typed.

Why these tests exist: an implementer maps the scenario language onto their registry from the
vocabulary table.  Three tables once mapped the post-execute decision's field to ``contexts``
where the original calls it ``additionalContexts``: an adapter following them dropped every
post-execute context without an error.  So there is one table, in ``spec/vectors/README.md``;
every name its ``registry.js`` column uses exists in the example; the decisions' fields it gives
for the original are exactly the ones the example's registry accepts (it refuses any other) and
its adapters send.  Sizes ("the outcome adapter is 140 lines" where it had 144) and vector
counts in the example's README are compared with the files and the shipped vectors.
"""

from __future__ import annotations

import re
from pathlib import Path

from toolcancel.oracle.vectors import REVISIONS, shipped_dir, shipped_vectors
from toolcancel.oracle.vectors.turns import load_turn_vectors, turn_file

ROOT = Path(__file__).resolve().parent.parent
JS = ROOT / "examples" / "js"
GUIDE = ROOT / "spec" / "vectors" / "README.md"
DOCS = [ROOT / "README.md", ROOT / "spec" / "CONTRACT.md", GUIDE, JS / "README.md"]
HEADER = "| scenario language (vectors) | the original (TypeScript) |"


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def vocabulary() -> list[dict[str, str]]:
    """The rows of the one vocabulary table, by column title."""
    lines = GUIDE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(HEADER))
    titles = _cells(lines[start])
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(titles, _cells(line), strict=True)))
    return rows


def _js_source() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(JS.glob("*.js")))


def test_there_is_one_vocabulary_table() -> None:
    tables = [
        (doc.name, line)
        for doc in DOCS
        for line in doc.read_text(encoding="utf-8").splitlines()
        if line.startswith("|") and "the original" in line and "registry.js" in line
    ]
    assert tables == [("README.md", vocabulary_header())]


def vocabulary_header() -> str:
    return next(
        line for line in GUIDE.read_text(encoding="utf-8").splitlines() if line.startswith(HEADER)
    )


def test_every_name_of_the_registry_js_column_exists_in_the_example() -> None:
    source = _js_source()
    words = set(re.findall(r"[A-Za-z_$][\w$]*", source))
    for row in vocabulary():
        for span in re.findall(r"`([^`]+)`", row["`registry.js`"]):
            for name in re.findall(r"[A-Za-z_$][\w$]*", span.replace("…", "")):
                assert name in words, f"{row['scenario language (vectors)']}: {name} ({span})"


def _decision_keys(text: str) -> list[set[str]]:
    """The key sets of the ``{kind: ...}`` decision literals in ``text`` (``?`` dropped)."""
    return [
        {k.strip().rstrip("?").split(":")[0].strip() for k in body.split(",")}
        for body in re.findall(r"\{(kind:[^}]*)\}", text)
    ]


def test_post_execute_fields_are_the_originals_and_the_examples() -> None:
    post = next(r for r in vocabulary() if r["scenario language (vectors)"].startswith("`post`"))
    accept, block = _decision_keys(post["the original (TypeScript)"])
    assert accept == {"kind", "content", "additionalContexts"}
    assert block == {"kind", "feedback", "additionalContexts"}
    registry = (JS / "registry.js").read_text(encoding="utf-8")
    checked = re.search(r"function checkPostDecision.*?\n}\n", registry, re.S)
    assert checked is not None
    allowed = [
        {k.strip(" '") for k in args.split(",")}
        for args in re.findall(r"keys\(([^)]*)\)", checked.group(0))
        if "'" in args
    ]
    assert allowed == [accept, block]  # what registry.js accepts; it refuses any other key
    for adapter in ("adapter-outcome.js", "adapter-trace.js"):
        text = (JS / adapter).read_text(encoding="utf-8")
        sent = re.findall(r"\{\s*kind: '(accept|block)'(,[^}]*)?\s*}", text)
        assert len(sent) >= 4, adapter  # accept, accept_content, accept_contexts, block
        for kind, rest in sent:
            keys = {"kind", *re.findall(r",\s*(\w+):", rest)}  # top-level keys follow a comma
            assert keys <= (accept if kind == "accept" else block), (adapter, keys)


def test_the_file_table_states_the_files_sizes() -> None:
    readme = (JS / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([^`]+)` \| ([0-9,]+) \|", readme, re.M)
    assert {name for name, _ in rows} >= {"adapter-outcome.js", "probes.js", "turns.js"}
    for name, stated in rows:
        lines = len((JS / name).read_text(encoding="utf-8").splitlines())
        assert f"{lines:,}" == stated, name


def test_the_conformance_counts_are_the_shipped_vectors() -> None:
    readme = " ".join((JS / "README.md").read_text(encoding="utf-8").split())
    counts = {}
    for revision in REVISIONS:
        calls = len(shipped_vectors(revision))
        turns = len(load_turn_vectors(turn_file(shipped_dir(), revision)))
        counts[revision] = (calls, turns, calls + turns)
    seed, revised = counts["seed"], counts["revised"]
    assert (
        f"seed {seed[0]:,} call vectors and {seed[1]:,} turn vectors ({seed[2]:,} / {seed[2]:,}), "
        f"revised {revised[0]:,} and {revised[1]:,} ({revised[2]:,} / {revised[2]:,})"
    ) in readme
