"""Every runtime integration's user's page and example, driven by what exists.

A runtime integration is a module of machine/integrations/ that declares ``LIMITS`` (the shared
bases declare none).  Each has one page in docs/integrations/ and one example in
examples/integrations/ that the page links to; the example, run, prints exactly its ``.stdout``
and ``.stderr`` files, and the page quotes that stdout whole; its ``LIMITS`` name rules of the
contract, each with a sentence.  A new integration without its page or example fails here.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
from toolcancel.contract.loader import load_contract
from toolcancel.teaching import integrated

ROOT = Path(__file__).resolve().parent.parent
PAGES = ROOT / "docs" / "integrations"
EXAMPLES = ROOT / "examples" / "integrations"


def _declares_limits(path: Path) -> bool:
    try:
        integrated.limits(ROOT, path.stem)
    except integrated.IntegrationError:
        return False
    return True


MODULES = sorted(p.stem for p in (ROOT / integrated.INTEGRATIONS_DIR).glob("*.py")
                 if _declares_limits(p))  # fmt: skip
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.py"))


def _example_of(module: str) -> Path:
    """The example that imports ``toolcancel.integrations.<module>`` (exactly one)."""
    found = [e for e in EXAMPLE_FILES if module in integrated.IMPORT.findall(e.read_text())]
    assert len(found) == 1, f"{module}: examples importing it: {[e.name for e in found]}"
    return found[0]


def _page_of(example: Path) -> Path:
    """The page that links to ``example`` (exactly one)."""
    link = f"examples/integrations/{example.name}"
    found = [p for p in sorted(PAGES.glob("*.md")) if link in p.read_text(encoding="utf-8")]
    assert len(found) == 1, f"{example.name}: pages linking to it: {[p.name for p in found]}"
    return found[0]


def test_the_rooms_hold_the_integrations_and_nothing_else() -> None:
    """Four runtimes at least; every example and every page belongs to one of them."""
    assert {"pydantic_ai", "langgraph", "openai_agents", "mcp"} <= set(MODULES)
    examples = {_example_of(m) for m in MODULES}
    assert examples == set(EXAMPLE_FILES)
    assert {_page_of(e) for e in examples} == set(PAGES.glob("*.md"))


@pytest.mark.parametrize("module", MODULES)
def test_limits_name_rules_of_the_contract_each_with_a_reason(module: str) -> None:
    rules = {r.id for r in load_contract().rules}
    limits = integrated.limits(ROOT, module)
    assert set(limits) <= rules
    assert all(len(why) > 40 for why in limits.values())


@pytest.mark.parametrize("module", MODULES)
def test_the_page_quotes_its_examples_output_whole(module: str) -> None:
    example = _example_of(module)
    page = _page_of(example).read_text(encoding="utf-8")
    stdout = example.with_suffix(".stdout").read_text(encoding="utf-8")
    assert re.search(r"```(?:text)?\n" + re.escape(stdout) + "```", page), example.name


@pytest.mark.slow
@pytest.mark.real_io
@pytest.mark.parametrize("module", MODULES)
def test_the_example_prints_what_its_files_hold(module: str) -> None:
    try:
        importlib.import_module(f"toolcancel.integrations.{module}")
    except ImportError as exc:
        pytest.skip(f"{exc}: pip install -e '.[runtimes]'")
    example = _example_of(module)
    done = subprocess.run([sys.executable, str(example)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == example.with_suffix(".stdout").read_text(encoding="utf-8")
    assert done.stderr == example.with_suffix(".stderr").read_text(encoding="utf-8")
