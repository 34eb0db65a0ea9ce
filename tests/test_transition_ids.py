"""Transitions are named, never numbered: every ``[[transition]]`` of contract.toml has a stable
id, no document cites a position (``t23``), and inserting a row anywhere renames nothing -- the
table is the one place a transition's order matters, and that order is display only elsewhere."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from toolcancel.contract.errors import ContractError
from toolcancel.contract.loader import load_contract, load_contract_file
from toolcancel.teaching.tables import precedence_markdown

ROOT = Path(__file__).resolve().parents[1]
CONTRACT_TOML = ROOT / "spec" / "contract.toml"
POSITIONAL = re.compile(r"(?<![\w$.#-])t\d{1,3}(?![\w])")
"""A transition cited by its position, as every document did before ids: ``t23``, ``seed t5``."""
DOCUMENTS = (".md", ".toml", ".js", ".html", ".mmd", ".dot", ".svg")
SKIP = {".venv", ".git", "node_modules", "build", "dist"}


def _documents() -> list[Path]:
    found = []
    for path in ROOT.rglob("*"):
        if path.suffix in DOCUMENTS and not SKIP & set(path.relative_to(ROOT).parts):
            found.append(path)
    return sorted(found)


def test_no_document_names_a_transition_by_its_position() -> None:
    docs = _documents()
    assert ROOT / "spec" / "CONTRACT.md" in docs and ROOT / "explorer" / "explorer.js" in docs
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {m.group(0)}"
        for path in docs
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        for m in POSITIONAL.finditer(line)
    ]
    assert not hits, "cite the transition's id instead:\n" + "\n".join(hits)


def test_the_positional_pattern_finds_what_it_must() -> None:
    """The check above could pass by matching nothing: it matches every form docs used."""
    for text in ("(t2, R11)", "seed t29 without", "t31 enters it", "`t57`", "t0 to t58"):
        assert POSITIONAL.search(text), text
    for text in ("R39", "revised-00004", "t_start", "at0", "#t2-x", "D13"):
        assert not POSITIONAL.search(text), text


def _with(tmp_path: Path, edit: str) -> Path:
    copy = tmp_path / "contract.toml"
    copy.write_text(edit, "utf-8")
    return copy


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s.replace('id = "args_valid"', 'id = "args_invalid"', 1), "defined twice"),
        (lambda s: s.replace('id = "args_valid"', 'id = "t2"', 1), "not a position"),
        (lambda s: s.replace('id = "args_valid"', 'id = "Args Valid"', 1), "lower-case name"),
        (lambda s: s.replace('id = "args_valid"\n', "", 1), "'id'"),
    ],
)
def test_a_transition_id_is_a_unique_name(tmp_path: Path, change: object, message: str) -> None:
    text = CONTRACT_TOML.read_text("utf-8")
    edited = change(text)  # type: ignore[operator]
    assert edited != text
    with pytest.raises(ContractError, match=message):
        load_contract_file(_with(tmp_path, edited))


def test_inserting_a_transition_first_renames_nothing(tmp_path: Path) -> None:
    """A revised-only row inserted before every other: each existing transition keeps its id and
    everything but its position, and the precedence tables (which name deciders) are unchanged."""
    text = CONTRACT_TOML.read_text("utf-8")
    first = text.index("[[transition]]\n")
    row = (
        '[[transition]]\nid = "inserted_first"\nsource = ["draining"]\nevent = "fused_abort"\n'
        'rules = ["R27"]\nrevisions = ["revised"]\n\n'
    )
    inserted = load_contract_file(_with(tmp_path, text[:first] + row + text[first:]))
    original = load_contract()
    assert [t.id for t in inserted.transitions] == ["inserted_first"] + [
        t.id for t in original.transitions
    ]
    for t in original.transitions:
        moved = inserted.transition(t.id)
        assert moved.index == t.index + 1
        assert replace(moved, index=t.index) == t
    assert precedence_markdown(inserted) == precedence_markdown(original)
