"""The drawings are the contract file, no more and no less; ``toolcancel diagram`` keeps them so.

Each test reads the generated text back (a small DOT attribute parser, a Mermaid line parser,
``xml.etree`` for SVG) and compares it with the contract's own table, so a drawing that drops,
duplicates or mislabels a transition fails -- as does a ``--check`` that misses an edited contract.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest
from toolcancel import load_contract, load_contract_file
from toolcancel.cli.main import main
from toolcancel.contract.core import CallMachine, Occurrence
from toolcancel.contract.loader import RevisionContract, Transition
from toolcancel.teaching.diagrams import (
    CANCEL_COLOUR,
    GENERATED,
    MAY_COLOUR,
    PATH_COLOUR,
    SLIDE_INCHES,
    dot_digest,
    draw,
    edge_id,
    mermaid_text,
    overview_dot,
    render_svg,
    resolve_path,
    stage_titles,
    svg_dot_digest,
)
from toolcancel.teaching.tables import precedence_markdown

CONTRACT = load_contract()
REVISIONS = CONTRACT.revisions
SPEC = Path(__file__).resolve().parent.parent / "spec" / "contract.toml"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")


def expected_edges(table: RevisionContract) -> Counter[str]:
    return Counter(edge_id(t, s) for t in table.transitions for s in t.sources)


def by_id(table: RevisionContract) -> dict[str, tuple[Transition, str]]:
    return {edge_id(t, s): (t, s) for t in table.transitions for s in t.sources}


# ------------------------------------------------------------------------------------------------
# Reading DOT back
# ------------------------------------------------------------------------------------------------

_TOKEN = re.compile(r'\s*(?:(?P<id>[A-Za-z0-9_.]+)|(?P<q>")|(?P<h><)|(?P<eq>=))')


def parse_attrs(text: str) -> dict[str, str]:
    """``key=value ...`` of a DOT attribute list (values: IDs, "quoted", or <HTML>)."""
    attrs: dict[str, str] = {}
    i = 0
    pending: str | None = None
    key: str | None = None
    while i < len(text):
        m = _TOKEN.match(text, i)
        if m is None:
            if text[i:].strip() == "":
                break
            raise AssertionError(f"cannot parse DOT attributes at {text[i:]!r}")
        if m.group("eq"):
            key, pending, i = pending, None, m.end()
            continue
        if m.group("id"):
            value, i = m.group("id"), m.end()
        elif m.group("q"):
            j = m.end()
            out = []
            while text[j] != '"':
                if text[j] == "\\" and text[j + 1] == '"':
                    out.append('"')
                    j += 2
                else:
                    out.append(text[j])
                    j += 1
            value, i = "".join(out), j + 1
        else:
            depth, j = 0, m.start("h")
            while True:
                depth += {"<": 1, ">": -1}.get(text[j], 0)
                j += 1
                if depth == 0:
                    break
            value, i = text[m.start("h") : j], j
        if key is not None:
            attrs[key] = value
            key = None
        else:
            pending = value
    return attrs


_EDGE = re.compile(r"^\t+(\w+) -> (\w+) \[(.*)\]$")
_NODE = re.compile(r"^\t+(\w+) \[(.*)\]$")


def dot_edges(dot: str) -> list[tuple[str, str, dict[str, str]]]:
    return [
        (m.group(1), m.group(2), parse_attrs(m.group(3)))
        for line in dot.splitlines()
        if (m := _EDGE.match(line))
    ]


def dot_nodes(dot: str) -> dict[str, dict[str, str]]:
    return {
        m.group(1): parse_attrs(m.group(2))
        for line in dot.splitlines()
        if not _EDGE.match(line)
        and (m := _NODE.match(line))
        and m.group(1) not in ("graph", "node", "edge")
    }


def dot_clusters(dot: str) -> dict[str, list[str]]:
    clusters: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in dot.splitlines():
        if m := re.match(r"^\tsubgraph cluster_(\w+) \{$", line):
            current = clusters.setdefault(m.group(1), [])
        elif line == "\t}":
            current = None
        elif current is not None and (m := _NODE.match(line)):
            current.append(m.group(1))
    return clusters


# ------------------------------------------------------------------------------------------------
# DOT
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("revision", REVISIONS)
def test_dot_edges_are_exactly_the_contract_transitions(revision: str) -> None:
    table = CONTRACT.revision(revision)
    known = by_id(table)
    drawn: Counter[str] = Counter()
    for tail, head, attrs in dot_edges(draw(table).dot):
        members = attrs["id"].split("+")
        drawn.update(members)
        transitions = [known[m] for m in members]
        for t, source in transitions:
            assert (tail, head) == (source, source if t.dest is None else t.dest)
            starts = rf"(^|\\n|>)(MAY )?{t.id}(?![a-z0-9_])"
            assert re.search(starts, attrs["label"]), attrs["label"]
            for rule in t.rules:
                assert rule in attrs["label"]
        if len(members) > 1:
            # Only transitions between the same two states (checked above) that are drawn
            # alike share an edge, and the label lists every one.
            assert (
                len(
                    {
                        (t.alternative, any(e in ("caller_abort", "fused_abort") for e in t.events))
                        for t, _ in transitions
                    }
                )
                == 1
            )
    assert drawn == expected_edges(table)


@pytest.mark.parametrize("revision", REVISIONS)
def test_dot_styles_cancellation_and_may_edges(revision: str) -> None:
    table = CONTRACT.revision(revision)
    cancelling = {e.name for e in table.events if e.cancellation}
    assert cancelling == {"caller_abort", "fused_abort"}
    known = by_id(table)
    seen = Counter[str]()
    for _, _, attrs in dot_edges(draw(table).dot):
        t, _ = known[attrs["id"].split("+")[0]]
        style = attrs.get("style", "")
        if t.alternative:
            seen["may"] += 1
            assert (style, attrs["color"]) == ("dotted", MAY_COLOUR)
            assert re.match(rf"MAY {t.id}(?![a-z0-9_])", attrs["label"]), attrs["label"]
        elif set(t.events) & cancelling:
            seen["cancel"] += 1
            assert (style, attrs["color"]) == ("dashed", CANCEL_COLOUR)
        else:
            seen["plain"] += 1
            assert (style, attrs["color"]) == ("", "black")
            assert "MAY" not in attrs["label"]
    assert seen["may"] == sum(t.alternative for t in table.transitions) > 0
    assert seen["cancel"] > 0


@pytest.mark.parametrize("revision", REVISIONS)
def test_dot_states_clusters_and_terminal_outcomes(revision: str) -> None:
    table = CONTRACT.revision(revision)
    dot = draw(table).dot
    nodes = dot_nodes(dot)
    assert set(nodes) == {s.name for s in table.states} | {"legend"}
    # the contract's one grouping: every state in the cluster of its stage, in pipeline order
    assert dot_clusters(dot) == {
        f"stage{k}": list(stage.states) for k, stage in enumerate(CONTRACT.stages)
    }
    titles = re.findall(r'\bid="stage-\d+" label="([^"]+)"', dot)
    assert titles == stage_titles(table)
    assert ("4 C1 · denial · guards" in titles) == (revision == "seed")  # revised: R43's order
    terminal = nodes["materialized"]["label"]
    published = set(re.findall(r">(\w+)(?: \([^)]*\))?</font>", terminal))
    assert published & {o.name for o in CONTRACT.outcomes} == {o.name for o in table.outcomes}
    assert ("aborted_before_dispatch" in published) == (revision == "revised")
    for s in table.states:
        assert f"<b>{s.name}</b>" in nodes[s.name]["label"]


def test_dot_has_no_version_or_time_and_is_deterministic_across_processes() -> None:
    code = (
        "import hashlib; from toolcancel import load_contract; "
        "from toolcancel.teaching.diagrams import draw; "
        "from toolcancel.teaching.tables import precedence_markdown; c = load_contract(); "
        "print(hashlib.sha256(''.join(draw(c.revision(r)).dot + draw(c.revision(r)).mermaid "
        "for r in c.revisions).encode() + precedence_markdown(c).encode()).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(digests) == 1
    for revision in REVISIONS:
        first = draw(CONTRACT.revision(revision))
        again = draw(load_contract_file(SPEC).revision(revision))
        assert first == again
        for text in (first.dot, first.mermaid):
            assert "graphviz version" not in text.lower()
            assert not re.search(r"\b20\d\d-\d\d-\d\d[T ]\d\d:", text)


# ------------------------------------------------------------------------------------------------
# Mermaid
# ------------------------------------------------------------------------------------------------

_MMD_EDGE = re.compile(r"^\s+(\w+) --> (\w+) : (.*)$")


@pytest.mark.parametrize("revision", REVISIONS)
def test_mermaid_transitions_are_exactly_the_contract_transitions(revision: str) -> None:
    table = CONTRACT.revision(revision)
    text = draw(table).mermaid
    assert text.splitlines()[3] == "stateDiagram-v2"
    known = {t.id: t for t in table.transitions}
    drawn: Counter[str] = Counter()
    for line in text.splitlines():
        m = _MMD_EDGE.match(line)
        if not m:
            continue
        source, dest, label = m.groups()
        name = re.sub(r"^(STEP [0-9, ]+<br>)?(CANCEL )?(MAY )?", "", label)
        name = re.split(r"[ <]", name, maxsplit=1)[0]
        t = known[name]
        drawn[edge_id(t, source)] += 1
        assert dest == (source if t.dest is None else t.dest)
        assert label.startswith("CANCEL ") == bool({"caller_abort", "fused_abort"} & set(t.events))
        assert ("MAY " in label) == t.alternative
        # A ':' or ';' would end the label early; '#' and '%%' open comments.
        assert not re.search(r"[:;#%{}\"]", label)
        assert re.sub(r"<br>", "", label).count("<") == 0
    assert drawn == expected_edges(table)
    assert f"    [*] --> {table.initial}" in text
    assert "    materialized --> [*]" in text
    for k, (stage, title) in enumerate(zip(CONTRACT.stages, stage_titles(table), strict=True)):
        assert f'    state "{mermaid_text(title)}" as stage{k}\n    state stage{k} {{\n' in text
        block = text.split(f"    state stage{k} {{\n", 1)[1].split("    }\n", 1)[0]
        assert {line.split(" : ")[0].strip() for line in block.splitlines()} == set(stage.states)
    assert "\u204f" not in text  # no look-alike glyph standing for a ';' (it read as a stray mark)


def test_mermaid_text_replaces_what_would_end_or_break_a_label() -> None:
    raw = 'a: b; c # d %% e <f> {g} "h"\nnext'
    safe = mermaid_text(raw)
    assert not re.search(r"[:;#%<>{}\"\n]", safe)
    assert safe.split()[0] == "a\u2236"
    assert safe.split()[1] == "b,"  # a ';' between clauses reads as a comma
    assert len(safe) == len(raw)


# ------------------------------------------------------------------------------------------------
# SVG
# ------------------------------------------------------------------------------------------------

SVG = "{http://www.w3.org/2000/svg}"


def svg_transition_elements(svg: str) -> Counter[str]:
    """Edge ids in the SVG: an edge's own id, or for a merged loop its per-row anchors."""
    root = ET.fromstring(svg.encode("utf-8"))
    out: Counter[str] = Counter()
    for g in root.iter(f"{SVG}g"):
        if g.get("class", "").split()[:1] != ["edge"] and "transition" not in g.get("class", ""):
            continue
        ident = g.get("id", "")
        if "+" not in ident:
            out[ident] += 1
            continue
        anchors = {a.get("id") for a in g.iter(f"{SVG}g")}
        for member in ident.split("+"):
            assert f"a_{member}" in anchors, member
            out[member] += 1
    return out


@needs_dot
@pytest.mark.parametrize("revision", REVISIONS)
def test_svg_parses_and_has_one_element_per_transition(revision: str) -> None:
    table = CONTRACT.revision(revision)
    drawing = draw(table)
    svg = drawing.svg()
    assert svg_transition_elements(svg) == expected_edges(table)
    assert (
        svg_dot_digest(svg)
        == dot_digest(drawing.dot)
        == hashlib.sha256(drawing.dot.encode()).hexdigest()
    )
    assert svg_dot_digest(render_svg(drawing.dot + "\n")) != dot_digest(drawing.dot)


# ------------------------------------------------------------------------------------------------
# A highlighted path
# ------------------------------------------------------------------------------------------------


def _a_long_seed_path() -> CallMachine:
    table = CONTRACT.revision("seed")
    call = CallMachine(table, "live", has_agent=True, approval_seam=True)
    for o in [
        Occurrence("args_valid"),
        Occurrence("pre_ask"),
        Occurrence("approval_approved"),
        Occurrence("guards_pass"),
        Occurrence("wrapper_enter"),  # wrapper_enter's self-loop, taken twice
        Occurrence("wrapper_enter"),
        Occurrence("base_dispatch"),
        Occurrence("body_ok"),
        Occurrence("wrapper_returned", passthrough=True),  # a merged loop member
        Occurrence("caller_abort"),  # abort_recorded, the cancellation loop on around_after
        Occurrence("wrapper_returned", is_error=True),
        Occurrence("around_settled"),
        Occurrence("post_accept"),
        Occurrence("publish"),
    ]:
        call.offer(o)
    return call


def test_highlighted_path_marks_exactly_its_edges_in_order() -> None:
    table = CONTRACT.revision("seed")
    call = _a_long_seed_path()
    assert call.state == "materialized"
    want = [edge_id(t, s) for t, s in resolve_path(table, call.path)]
    ids = {t.index: t.id for t in table.transitions}
    assert want == [f"{ids[p.transition]}-{p.source}" for p in call.path]
    drawing = draw(table, call.path)
    steps: dict[int, str] = {}
    for _, _, attrs in dot_edges(drawing.dot):
        classes = attrs["class"].split()
        numbers = [int(c[5:]) for c in classes if c.startswith("step-")]
        if "path" in classes:
            assert "+" not in attrs["id"], "a path step must be an edge of its own"
            assert numbers and attrs["color"] == PATH_COLOUR and attrs["penwidth"] == "3"
            assert attrs["label"].startswith("step " + ", ".join(map(str, numbers)) + "\\n")
            for n in numbers:
                assert n not in steps
                steps[n] = attrs["id"]
        else:
            assert not numbers and attrs["color"] == "gray70"
    assert [steps[n] for n in sorted(steps)] == want
    assert sorted(steps) == list(range(1, len(want) + 1))
    # Bare transition indices walk the same path from the initial state.
    assert draw(table, [p.transition for p in call.path]) == drawing
    # Mermaid: the same steps, numbered in the labels; the visited states are classed.
    mm_steps: dict[int, str] = {}
    for line in drawing.mermaid.splitlines():
        if (m := _MMD_EDGE.match(line)) and m.group(3).startswith("STEP "):
            numbers_text, rest = m.group(3)[5:].split("<br>", 1)
            name = re.split(r"[ <]", re.sub(r"^(CANCEL )?(MAY )?", "", rest), maxsplit=1)[0]
            for n in numbers_text.split(", "):
                mm_steps[int(n)] = f"{name}-{m.group(1)}"
    assert [mm_steps[n] for n in sorted(mm_steps)] == want
    visited = {p.source for p in call.path} | {p.dest for p in call.path}
    onpath = [line for line in drawing.mermaid.splitlines() if line.endswith(" onpath")]
    assert onpath == [
        f"    class {','.join(s.name for s in table.states if s.name in visited)} onpath"
    ]


def test_a_path_that_does_not_follow_the_machine_is_refused() -> None:
    table = CONTRACT.revision("seed")
    with pytest.raises(ValueError, match="step 2: args_valid leaves entry, not pre_policy"):
        draw(table, [2, 2])
    with pytest.raises(ValueError, match="not a transition of revision seed"):
        draw(table, [1])  # entry_pre_aborted belongs to the revised contract only


# ------------------------------------------------------------------------------------------------
# PRECEDENCE.md
# ------------------------------------------------------------------------------------------------


def test_precedence_markdown_is_the_precedence_rows_of_each_revision() -> None:
    text = precedence_markdown(CONTRACT)
    assert text.splitlines()[0] == f"<!-- {GENERATED} -->"
    sections = text.split("\n## ")[1:]
    assert len(sections) == len(REVISIONS)
    for revision, section in zip(REVISIONS, sections, strict=True):
        table = CONTRACT.revision(revision)
        assert f"revision `{revision}`" in section.splitlines()[0]
        rows = [line for line in section.splitlines() if re.match(r"^\| \d+ \|", line)]
        assert len(rows) == len(table.precedence)
        for line, p in zip(rows, table.precedence, strict=True):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            deciding = [t for t in table.transitions if t.precedence == p.row]
            by_outcome = {t.outcome for t in deciding if t.outcome is not None}
            assert cells[0] == str(p.row)
            if len(by_outcome) < 2:
                assert cells[2] == p.outcome
            else:  # a row decided two ways (revised 12, 15: R41) says which transition gives which
                assert cells[2].startswith(p.outcome + " (")
                for t in deciding:
                    assert re.search(rf"{t.outcome}: [a-z0-9_, ]*\b{t.id}\b", cells[2]), cells[2]
            assert cells[4] == ", ".join(p.rules)
            assert cells[5] == ", ".join(f"`{t.id}`" for t in deciding)


def test_no_precedence_row_is_shown_with_one_outcome_where_its_transitions_give_two() -> None:
    text = precedence_markdown(CONTRACT).split("## Revised", 1)[1]
    for row in (12, 15):
        (line,) = [x for x in text.splitlines() if x.startswith(f"| {row} |")]
        assert "aborted_before_dispatch: c" in line and "aborted: c" in line


def test_precedence_cells_escape_markdown_table_syntax(tmp_path: Path) -> None:
    text = SPEC.read_text().replace(
        'situation = "Body throws"', 'situation = "Body throws | rejects *loudly*"'
    )
    copy = tmp_path / "contract.toml"
    copy.write_text(text)
    md = precedence_markdown(load_contract_file(copy))
    line = next(line for line in md.splitlines() if "Body throws" in line)
    assert "Body throws \\| rejects \\*loudly\\*" in line
    assert len(re.split(r"(?<!\\)\|", line)) == 8


# ------------------------------------------------------------------------------------------------
# The command
# ------------------------------------------------------------------------------------------------


def run_cli(*argv: str) -> int:
    return main(["diagram", *argv])


def _copy_contract(tmp_path: Path) -> Path:
    spec = tmp_path / "spec"
    spec.mkdir()
    copy = spec / "contract.toml"
    copy.write_text(SPEC.read_text(encoding="utf-8"), encoding="utf-8")
    return copy


def _stale(out: str) -> list[str]:
    return sorted(line.split()[1] for line in out.splitlines() if line.startswith("stale: "))


@needs_dot
def test_check_is_fresh_after_generating_and_stale_after_editing_the_contract(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    copy = _copy_contract(tmp_path)
    args = ("--contract", str(copy), "--out", "diagrams")
    assert run_cli(*args) == 0
    files = sorted(p.name for p in (tmp_path / "diagrams").iterdir())
    assert files == sorted(
        f"contract-{r}{x}" for r in REVISIONS for x in (".dot", ".svg", ".mmd", "-overview.svg")
    )
    assert (tmp_path / "spec" / "PRECEDENCE.md").read_text() == precedence_markdown(
        load_contract_file(copy)
    )
    capsys.readouterr()
    assert run_cli(*args, "--check") == 0
    assert capsys.readouterr().out.startswith("fresh: ")

    # Delete the last transition (it belongs to both revisions and cites no precedence row).
    original = copy.read_text()
    head, _, last = original.rpartition("[[transition]]\n")
    tail = last[last.index("\n# ---") :]
    copy.write_text(head + tail)
    assert len(load_contract_file(copy).transitions) == len(CONTRACT.transitions) - 1
    assert run_cli(*args, "--check") == 1
    every_drawing = sorted(
        f"diagrams/contract-{r}{x}"
        for r in REVISIONS
        for x in (".dot", ".svg", ".mmd", "-overview.svg")
    )
    assert _stale(capsys.readouterr().out) == every_drawing
    assert run_cli(*args) == 0
    capsys.readouterr()
    assert run_cli(*args, "--check") == 0
    capsys.readouterr()

    # Insert a transition for the revised contract only, before every other one: transitions
    # are named by id, never by position, so only the revised drawings go stale.
    first = head.index("[[transition]]\n")
    copy.write_text(
        head[:first]
        + '[[transition]]\nid = "draining_refused"\nsource = ["draining"]\n'
        + 'event = "fused_abort"\nrules = ["R27"]\nrevisions = ["revised"]\n\n'
        + head[first:]
        + tail
    )
    assert run_cli(*args, "--check") == 1
    assert _stale(capsys.readouterr().out) == sorted(
        f"diagrams/contract-revised{x}" for x in (".dot", ".svg", ".mmd", "-overview.svg")
    )
    assert run_cli(*args) == 0
    capsys.readouterr()
    assert run_cli(*args, "--check") == 0


@needs_dot
def test_check_flags_a_tampered_svg_and_regenerating_leaves_a_fresh_one_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_cli("--revision", "seed") == 0
    svg = tmp_path / "diagrams" / "contract-seed.svg"
    # Not a source checkout: everything goes into --out, nothing into ./spec/.
    assert (tmp_path / "diagrams" / "PRECEDENCE.md").exists()
    assert not (tmp_path / "spec").exists()
    assert not (tmp_path / "diagrams" / "contract-revised.dot").exists()
    capsys.readouterr()

    # A different Graphviz's rendering of the same DOT is fresh: only the digest counts.
    other = svg.read_text().replace("Generated by graphviz", "Generated by another graphviz")
    svg.write_text(other)
    assert run_cli("--revision", "seed", "--check") == 0
    assert run_cli("--revision", "seed") == 0
    assert svg.read_text() == other
    capsys.readouterr()

    for tampered, why in [
        (other.replace(svg_dot_digest(other) or "", "0" * 64), "drawn from a different DOT"),
        (other[: len(other) // 2], "not valid XML"),
        (re.sub(r"<!-- toolcancel-dot-sha256: \w+ -->", "", other), "carries no DOT digest"),
    ]:
        svg.write_text(tampered)
        assert run_cli("--revision", "seed", "--check") == 1
        assert f"stale: diagrams/contract-seed.svg ({why})" in capsys.readouterr().out
    assert run_cli("--revision", "seed") == 0
    assert run_cli("--revision", "seed", "--check") == 0


def test_without_dot_the_text_formats_are_written_and_one_line_says_how_to_get_svg(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "no-such-bin"))
    assert run_cli() == 0
    err = capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "diagrams").iterdir()) == sorted(
        [*(f"contract-{r}.{x}" for r in REVISIONS for x in ("dot", "mmd")),
         "PRECEDENCE.md", "SCENARIOS.md"]
    )  # fmt: skip
    assert err.count("\n") == 1 and "apt-get install graphviz" in err
    assert err.endswith(f"; {2 * len(REVISIONS)} SVG file(s) missing (never written)\n")
    assert run_cli("--check") == 1
    assert _stale(capsys.readouterr().out) == sorted(
        f"diagrams/contract-{r}{x}" for r in REVISIONS for x in (".svg", "-overview.svg")
    )


def test_orphaned_drawings_of_a_vanished_revision_are_stale_and_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "no-such-bin"))  # text formats are enough here
    assert run_cli() == 0
    orphan = tmp_path / "diagrams" / "contract-draft.mmd"
    orphan.write_text("stateDiagram-v2\n")
    keep = tmp_path / "diagrams" / "notes.md"
    keep.write_text("mine\n")
    capsys.readouterr()
    assert run_cli("--check") == 1
    assert "stale: diagrams/contract-draft.mmd (no such revision in the contract)" in (
        capsys.readouterr().out
    )
    assert run_cli() == 0
    assert not orphan.exists() and keep.read_text() == "mine\n"


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "no-such-bin"))
    target = tmp_path / "diagrams" / "contract-seed.dot"
    target.parent.mkdir()
    target.write_text("old\n")

    def refuse(src: str, dst: str) -> None:
        raise PermissionError(13, "Permission denied", dst)

    monkeypatch.setattr("toolcancel.contract.fileio.os.replace", refuse)
    assert run_cli("--revision", "seed") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Permission denied" in err and "Traceback" not in err
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["contract-seed.dot"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--revision", "nope"], "unknown revision 'nope'; choose seed, revised or all"),
        (["--contract", "missing.toml"], "missing.toml: cannot read the contract file"),
        (["--contract", "bad.toml"], "bad.toml: not valid TOML"),
        (["--contract", "dangling.toml"], "unknown destination state 'nowhere'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.toml").write_text("[contract\n")
    (tmp_path / "dangling.toml").write_text(
        SPEC.read_text().replace('dest = "draining"\n', 'dest = "nowhere"\n', 1)
    )
    assert run_cli(*argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("toolcancel diagram: ") and message in err
    assert "Traceback" not in err
    assert not (tmp_path / "diagrams").exists()


def test_a_guard_that_cannot_matter_in_a_revision_is_not_drawn() -> None:
    """The revised contract ends a pre-aborted call at entry (R42), so late_success_aborted's guard
    ``not aborted_at_entry`` cannot fail there: drawing it would suggest a branch that is not
    (soundness for every guard: test_statechart.py)."""
    seed, revised = (draw(CONTRACT.revision(r)) for r in ("seed", "revised"))
    late = [ln for ln in revised.mermaid.splitlines() if ": late_success_aborted " in ln]
    assert late and "aborted_at_entry" not in late[0]
    assert any(
        ": late_success_aborted " in ln and "not aborted_at_entry" in ln
        for ln in seed.mermaid.splitlines()
    )
    assert "not aborted_at_entry" in seed.dot


@needs_dot
@pytest.mark.parametrize("revision", REVISIONS)
def test_the_overview_fits_a_slide_and_shows_every_stage_and_transition(revision: str) -> None:
    """diagrams/contract-<revision>-overview.svg: the seven stages and every transition's tN on
    one 16:9 slide, where the full drawing is a poster a slide shrinks to nothing."""
    table = CONTRACT.revision(revision)
    svg = render_svg(overview_dot(table, slide=True))
    root = ET.fromstring(svg.encode("utf-8"))
    width, height = (float(root.get(k, "0").removesuffix("pt")) for k in ("width", "height"))
    slide_w, slide_h = (72 * x for x in SLIDE_INCHES)
    assert width <= slide_w + 1 and height <= slide_h + 1
    assert max(width / slide_w, height / slide_h) > 0.95  # it fills the slide one way
    text = [t.text for t in root.iter(f"{SVG}text")]
    for title in stage_titles(table):
        assert title in text
    expected = {edge_id(t, s) for t in table.transitions for s in t.sources}
    cells = {g.get("id", "")[2:] for g in root.iter(f"{SVG}g") if g.get("id", "").startswith("a_")}
    assert cells == expected
    full = ET.fromstring(draw(table).svg().encode("utf-8"))
    assert float(full.get("width", "0").removesuffix("pt")) > 2 * slide_w  # why it is needed


def test_contract_md_lists_the_stages_of_the_contract_file() -> None:
    """R10's prose carries the one grouping of states into stages, ``[[stage]]``, as generated."""
    from toolcancel.contract.loader import load_contract
    from toolcancel.teaching.tables import stages_markdown

    text = (Path(__file__).resolve().parents[1] / "spec" / "CONTRACT.md").read_text("utf-8")
    marker = "<!-- BEGIN GENERATED: stages -->\n"
    assert marker in text, "CONTRACT.md's R10 lost its generated stage table"
    table = text.split(marker, 1)[1].split("<!-- END GENERATED: stages -->", 1)[0]
    assert table == stages_markdown(load_contract()), (
        "CONTRACT.md's stage table differs from contract.toml's [[stage]]: run toolcancel regen"
    )
