"""The marked blocks of the hand-written pages are what regen writes, and a marker typed by hand
that regen would not refill is refused with one line naming the page and the block -- never a
block that silently stops following the data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from toolcancel.contract.loader import load_contract
from toolcancel.teaching.pages import BLOCKS, PageError, fill, revisions_markdown

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = load_contract()
PAGE = "spec/CONTRACT.md"
TEXT = (ROOT / PAGE).read_text("utf-8")


def test_contract_md_carries_exactly_what_regen_writes() -> None:
    assert fill(PAGE, TEXT, BLOCKS[PAGE], CONTRACT) == TEXT


def test_a_hand_edit_inside_a_block_is_written_over() -> None:
    edited = TEXT.replace("| `seed` (the default) |", "| `seed` |", 1)
    assert edited != TEXT
    assert fill(PAGE, edited, BLOCKS[PAGE], CONTRACT) == TEXT


def test_the_revisions_table_follows_the_data() -> None:
    table = revisions_markdown(CONTRACT)
    for name in CONTRACT.revisions:
        assert CONTRACT.revision_info[name]["title"] in table
    assert "R1–R39" in table and "R27–R44" in table  # the rules each revision holds


@pytest.mark.parametrize(
    ("edit", "complaint"),
    [
        (lambda t: t + "\n<!-- BEGIN GENERATED: nobody -->\n<!-- END GENERATED: nobody -->\n",
         "block 'nobody' is not one regen writes"),
        (lambda t: t.replace("<!-- BEGIN GENERATED: stages -->\n", "", 1),
         "needs exactly one block '<!-- BEGIN GENERATED: stages -->'"),
        (lambda t: t.replace("<!-- END GENERATED: stages -->", "<!-- END GENERATED -->", 1),
         "a block's END marker is missing or misnamed"),
    ],
)
def test_a_marker_regen_would_not_refill_is_refused(edit: object, complaint: str) -> None:
    with pytest.raises(PageError, match=complaint.replace("(", r"\(")):
        fill(PAGE, edit(TEXT), BLOCKS[PAGE], CONTRACT)  # type: ignore[operator]


def test_regen_says_it_in_one_line_and_exit_2(tmp_path: Path) -> None:
    """In a scratch checkout whose CONTRACT.md lost a marker, regen names it and writes nothing
    (the first generator fails, so no later one runs)."""
    (tmp_path / "spec").mkdir()
    for name in ("contract.toml", "PRIMER.md"):
        (tmp_path / "spec" / name).write_text((ROOT / "spec" / name).read_text("utf-8"))
    broken = TEXT.replace("<!-- END GENERATED: deviations -->", "", 1)
    (tmp_path / "spec" / "CONTRACT.md").write_text(broken, "utf-8")
    (tmp_path / "pyproject.toml").write_text("")
    done = subprocess.run([sys.executable, "-m", "toolcancel", "regen"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "spec/CONTRACT.md" in line and "END marker" in line
    assert (tmp_path / "spec" / "CONTRACT.md").read_text("utf-8") == broken
