"""Every in-repo link of every committed Markdown page leads somewhere: the file exists, and an
``#anchor`` into a Markdown page is one of that page's headings (as GitHub spells a heading's
anchor) or an explicit ``<a id=...>``.  A heading renamed, a section moved or a page deleted
fails here, not in a reader's browser."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = subprocess.run(
    ["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True
).stdout.split()

LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped (hyphens and
    underscores kept), each space a hyphen."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    text = FENCE.sub("", page.read_text("utf-8"))
    seen: dict[str, int] = {}
    found: set[str] = set()
    for m in re.finditer(r"^#{1,6} +(.+?) *#*$", text, re.M):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        found.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    found |= set(re.findall(r"<a (?:id|name)=\"([^\"]+)\"", text))
    return frozenset(found)


def links(text: str) -> list[str]:
    text = FENCE.sub("", text)
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans are not links
    return [m.group(1) or m.group(2) for m in LINK.finditer(text)]


def problems(page: str, text: str | None = None) -> list[str]:
    """What is wrong with the links of ``page`` (its committed text unless ``text``)."""
    found = []
    for target in links((ROOT / page).read_text("utf-8") if text is None else text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: -- not in the repository
            continue
        path, _, anchor = target.partition("#")
        dest = (ROOT / page).parent / path if path else ROOT / page
        if not dest.exists():
            found.append(f"{page}: link {target!r}: no file {path!r}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.resolve()):
            found.append(f"{page}: link {target!r}: {path or page} has no heading #{anchor}")
    return found


@pytest.mark.parametrize("page", PAGES)
def test_every_link_leads_somewhere(page: str) -> None:
    assert problems(page) == []


def test_the_checker_sees_a_dead_anchor_and_a_dead_file() -> None:
    assert slug("R34 — Timeout classification") == "r34--timeout-classification"
    assert slug("Change 7 — output stages (later, not part of our revised contract)") == (
        "change-7--output-stages-later-not-part-of-our-revised-contract"
    )
    page = "spec/PRIMER.md"
    text = (ROOT / page).read_text("utf-8")
    assert "](CONTRACT.md#r34--timeout-classification)" in text
    scratch = "[a](CONTRACT.md#r8--no-such-rule) [b](NOPE.md) [c](PRIMER.md#reading-order)\n"
    found = problems(page, scratch)
    assert len(found) == 2 and "#r8--no-such-rule" in found[0] and "NOPE.md" in found[1]
