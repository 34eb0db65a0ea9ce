"""Every rule id of the contract is pinned by at least one test, and no test names an unknown id.

Tests name the rules they pin with ``@pytest.mark.rules("R13", "R28")`` (registered in
``conftest.py``).  This module reads those names *statically*, with :mod:`ast`, from every file
under ``tests/`` and ``model_tests/`` -- so the check does not depend on which tests a run
selected -- and compares them with the rule ids of the shipped contract file.  A rule added to
``spec/contract.toml`` without a test fails here, and so does a test citing a rule that does not
exist (a typo would otherwise pin nothing).

Rule ids must be written as string literals, so that they can be read without running anything.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from toolcancel import load_contract

ROOT = Path(__file__).resolve().parent.parent
SUITES = ("tests", "model_tests")


class NamedRules:
    """Rule ids named by ``pytest.mark.rules(...)`` in one source, with where each was named."""

    def __init__(self) -> None:
        self.names: dict[str, list[str]] = {}
        self.problems: list[str] = []

    def scan(self, source: str, where: str) -> None:
        for node in ast.walk(ast.parse(source, filename=where)):
            if isinstance(node, ast.Call) and _is_rules_mark(node.func):
                self._collect(node, f"{where}:{node.lineno}")

    def _collect(self, call: ast.Call, where: str) -> None:
        if call.keywords or not call.args:
            self.problems.append(f"{where}: pytest.mark.rules needs one or more rule ids, only")
        for arg in call.args:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                self.names.setdefault(arg.value, []).append(where)
            else:
                self.problems.append(
                    f"{where}: rule ids must be string literals, got {ast.unparse(arg)}"
                )


def _is_rules_mark(func: ast.expr) -> bool:
    """``pytest.mark.rules`` (or ``mark.rules`` after ``from pytest import mark``)."""
    if not (isinstance(func, ast.Attribute) and func.attr == "rules"):
        return False
    owner = func.value
    if isinstance(owner, ast.Attribute) and owner.attr == "mark":
        return isinstance(owner.value, ast.Name) and owner.value.id == "pytest"
    return isinstance(owner, ast.Name) and owner.id == "mark"


def suite_files() -> Iterator[Path]:
    for suite in SUITES:
        folder = ROOT / suite
        if folder.is_dir():
            yield from sorted(folder.rglob("*.py"))


def named_in_suites() -> NamedRules:
    named = NamedRules()
    for path in suite_files():
        named.scan(path.read_text("utf-8"), str(path.relative_to(ROOT)))
    return named


def test_every_rule_of_the_contract_is_pinned_by_a_test() -> None:
    contract_ids = [rule.id for rule in load_contract().rules]
    named = named_in_suites()
    missing = [rule_id for rule_id in contract_ids if rule_id not in named.names]
    assert not missing, "rules no test names with @pytest.mark.rules: " + ", ".join(missing)


def test_no_test_names_an_unknown_rule_id() -> None:
    contract_ids = {rule.id for rule in load_contract().rules}
    named = named_in_suites()
    unknown = sorted(
        f"{rule_id} ({', '.join(places)})"
        for rule_id, places in named.names.items()
        if rule_id not in contract_ids
    )
    assert not unknown, "tests name rule ids the contract does not define: " + "; ".join(unknown)


def test_rule_marks_are_readable_without_running_the_tests() -> None:
    named = named_in_suites()
    assert not named.problems, "\n".join(named.problems)


# ------------------------------------------------------------------------------------------------
# The scanner itself: it must find what it claims to find, or the checks above prove nothing.
# ------------------------------------------------------------------------------------------------

SAMPLE = """
import pytest
from pytest import mark

pytestmark = pytest.mark.rules("R1")

@pytest.mark.rules("R2", "R3")
def test_a(): ...

@mark.rules("R4")
class TestB:
    @pytest.mark.parametrize("x", [pytest.param(1, marks=pytest.mark.rules("R5"))])
    def test_c(self, x): ...

@pytest.mark.slow
def test_unmarked(): ...

IDS = ("R6",)

@pytest.mark.rules(*IDS)
def test_dynamic(): ...

@pytest.mark.rules()
def test_empty(): ...
"""


def test_the_scanner_finds_every_form_of_the_mark_and_flags_what_it_cannot_read() -> None:
    named = NamedRules()
    named.scan(SAMPLE, "sample.py")
    assert sorted(named.names) == ["R1", "R2", "R3", "R4", "R5"]
    assert named.names["R2"] == ["sample.py:7"]
    assert len(named.problems) == 2
    assert "string literals" in named.problems[0] and "*IDS" in named.problems[0]
    assert "one or more rule ids" in named.problems[1]


def test_the_marker_is_registered(pytestconfig: pytest.Config) -> None:
    """``--strict-markers`` is on: an unregistered ``rules`` mark would fail every module."""
    markers = pytestconfig.getini("markers")
    assert any(line.startswith("rules(") for line in markers)
