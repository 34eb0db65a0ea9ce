"""The explorer's data is the contract and the vectors, no more and no less (no browser here).

The browser test (``test_explorer_browser.py``) drives the page; these check what the page is fed:
the stages cover the machine, the one layout has an element for every transition, the compact
paths decode back to the reference registry's paths, every rule's text comes from CONTRACT.md, and
``explore`` refuses bad output paths and reports a stale site.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from toolcancel import load_contract
from toolcancel.cli.commands import explore as explore_command
from toolcancel.cli.main import main
from toolcancel.teaching.diagrams import edge_id
from toolcancel.teaching.explain import shipped_vectors
from toolcancel.teaching.explorer import (
    ALPHABET,
    SCENARIO_FIELDS,
    Interned,
    SiteFile,
    build_vectors,
    contract_data,
    contract_markdown,
    encode_path,
    explorer_dot,
    layout_digest,
    markdown_html,
    render_layout,
    rule_sections,
    run_reference,
)

CONTRACT = load_contract()
ROOT = Path(__file__).resolve().parent.parent
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")


def decode(table: object, code: str) -> list[tuple[int, str]]:
    """The page's decoding of a compact path (explorer.js resolvePath), in Python."""
    events = {t.index: t.events for t in CONTRACT.revision(str(table)).transitions}
    out, k = [], 0
    while k < len(code):
        index = ALPHABET.index(code[k])
        if len(events[index]) > 1:
            k += 1
            out.append((index, events[index][ALPHABET.index(code[k])]))
        else:
            out.append((index, events[index][0]))
        k += 1
    return out


def test_the_seven_stages_hold_every_state_once() -> None:
    held = [s for stage in CONTRACT.stages for s in stage.states]
    assert len(CONTRACT.stages) == 7
    assert sorted(held) == sorted(s.name for s in CONTRACT.states)
    assert all(stage.rule in {r.id for r in CONTRACT.rules} for stage in CONTRACT.stages)


@pytest.mark.parametrize("revision", CONTRACT.revisions)
def test_the_layout_has_one_cell_per_transition_and_source(revision: str) -> None:
    table = CONTRACT.revision(revision)
    dot = explorer_dot(table)
    cells = re.findall(r'<td id="([^"]+)"', dot)
    assert sorted(cells) == sorted(edge_id(t, s) for t in table.transitions for s in t.sources)
    for k in range(len(CONTRACT.stages)):
        assert f'id="stage-{k}"' in dot
    for s in table.states:
        assert f'id="state-{s.name}"' in dot


@pytest.mark.parametrize("revision", CONTRACT.revisions)
def test_compact_paths_decode_to_the_reference_path(revision: str) -> None:
    table = CONTRACT.revision(revision)
    for vector in shipped_vectors(revision)[:40:7]:
        run = run_reference(vector["scenario"])
        assert run is not None
        code = encode_path(table, run.path)
        assert decode(revision, code) == [(p.transition, p.event) for p in run.path]
        assert [p.event for p in run.path] in vector["expected"]["paths"]


def test_vectors_carry_the_other_revision_and_every_retry_behaviour() -> None:
    vectors = shipped_vectors("seed")
    retrying = next(v for v in vectors if "retry" in v["scenario"]["wrappers"])
    plain = next(
        v for v in vectors if v["scenario"]["caller"] == "live" and not v["scenario"]["wrappers"]
    )

    results = Interned()
    values = {f: Interned() for f in (*SCENARIO_FIELDS, "wrappers")}
    built = build_vectors(CONTRACT, "seed", [retrying, plain], results, values)
    row_retry, row_plain = built.rows
    assert len(row_retry[5]) == len(CONTRACT.retry_names)
    assert row_plain[5] == 0
    other, code, result = row_plain[4]
    assert other == "revised"
    again = run_reference(plain["scenario"], "revised")
    assert again is not None
    assert decode("revised", code) == [(p.transition, p.event) for p in again.path]
    assert json.loads(results.items[result]) == json.loads(str(again.result))
    assert json.loads(results.items[row_plain[3]]) == plain["expected"]["result"]


def test_every_rule_has_its_contract_text() -> None:
    sections = rule_sections(contract_markdown())
    data = contract_data(CONTRACT, contract_markdown())
    for rule in CONTRACT.rules:
        assert sections[rule.id].strip()
        assert data["rules"][rule.id]["html"]
    # R10's stage order is a fenced block: kept as preformatted text, escaped
    assert "<pre>entry (R11) → pre-execute waterfall" in data["rules"]["R10"]["html"]


def test_markdown_is_escaped_and_structured() -> None:
    html = markdown_html(
        "A `<b>` and **bold** *it*.\n\n* one\n* two\n\n| a | b |\n|---|---|\n| 1 | 2 |"
    )
    assert "<code>&lt;b&gt;</code>" in html
    assert "<b>bold</b>" in html and "<i>it</i>" in html
    assert "<ul><li>one</li><li>two</li></ul>" in html
    assert "<table><tr><td>a</td><td>b</td></tr><tr><td>1</td><td>2</td></tr></table>" in html


@needs_dot
def test_layout_embeds_the_digest_it_is_judged_by(tmp_path: Path) -> None:
    dots = (("seed", explorer_dot(CONTRACT.revision("seed"))),)
    text = render_layout(dots)
    assert text.startswith(f"// toolcancel-layout-sha256: {layout_digest(dots)}\n")
    assert "window.TC_LAYOUT = " in text and "<svg" in text
    f = SiteFile("layout.js", None, layout_digest(dots), dots)
    (tmp_path / "layout.js").write_text(text, encoding="utf-8")
    assert explore_command._problem(tmp_path, f) is None
    other = SiteFile("layout.js", None, layout_digest((("seed", "digraph {}"),)), dots)
    assert explore_command._problem(tmp_path, other) == "drawn from a different DOT"


def test_check_names_every_stale_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.js").write_text("old", encoding="utf-8")
    (tmp_path / "layout.js").write_text("// no digest\n", encoding="utf-8")
    files = [
        SiteFile("a.js", "new"),
        SiteFile("b.js", "b"),
        SiteFile("layout.js", None, "0" * 64, ()),
    ]
    assert explore_command._check(tmp_path, files) == 1
    out = capsys.readouterr().out
    assert f"stale: {tmp_path / 'a.js'} (differs from a fresh build)" in out
    assert f"stale: {tmp_path / 'b.js'} (missing)" in out
    assert "(carries no layout digest)" in out
    (tmp_path / "a.js").write_text("new", encoding="utf-8")
    (tmp_path / "b.js").write_text("b", encoding="utf-8")
    assert explore_command._check(tmp_path, files[:2]) == 0
    (tmp_path / "vectors-gone.js").write_text("", encoding="utf-8")
    assert explore_command._check(tmp_path, files[:2]) == 1
    assert "vectors-gone.js (no such revision in the contract)" in capsys.readouterr().out


def test_bad_output_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "file"
    afile.write_text("x", encoding="utf-8")
    assert main(["explore", "--out", str(afile)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"toolcancel explore: {afile}: not a directory"
    assert main(["explore", "--out", "-"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out is a directory" in err
    assert afile.read_text(encoding="utf-8") == "x"


def test_the_committed_site_lists_its_scripts() -> None:
    index = (ROOT / "explorer" / "index.html").read_text(encoding="utf-8")
    scripts = re.findall(r'<script src="([^"]+)"></script>', index)
    assert scripts == [
        "data.js",
        *(f"vectors-{r}.js" for r in CONTRACT.revisions),
        "layout.js",
        "explorer.js",
    ]
    for name in scripts:
        assert (ROOT / "explorer" / name).is_file()
    assert "http:" not in index and "https:" not in index  # nothing from the network
