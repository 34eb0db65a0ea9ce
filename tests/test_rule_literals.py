"""Rule ids are written in one place (issue 26): the judge's check registry
(the judge's room ``machine/oracle/judge/``: its registry and its checks' modules), the contract
(``spec/contract.toml``), the docs and the tests.

Why: a rule id written in another module is a restatement of what the rule means -- the judges
drifted apart exactly that way (one mistake cited under five rules).  A module that still holds
some is listed in ALLOWED with how many and why; the count may only go down, and the entry goes
when it reaches zero.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RULE_ID = re.compile(r"R\d+")
REGISTRY = "machine/oracle/judge/__init__.py"
JUDGE = re.compile(r"machine/oracle/judge/\w+\.py")
"""The registry and the modules of its checks (the judge's room), where rule ids are written."""
ALLOWED: dict[str, tuple[int, str]] = {
    # module: (at most this many rule-id literals, why they are still there)
    # 24, then 28 with the task caller's two mutants and REVISED_RULE's pair (R13 -> R43), then
    # 29 with the broken server (capped_drain, R27)
    "machine/selfcheck/mutants.py": (29, "each broken registry names the rule its kill "
                                     "must cite: the expected answer, not a restatement"),
    "machine/teaching/integrated.py": (3, "the rules an integration exists to keep (issue 41: "
                                       "R27, R28, R31), shown beside every plain row"),
}
DECLARATIONS = "LIMITS"
"""A module-level dict of this name (each runtime integration's) is keyed by the rules the
integration declares it cannot keep, each with the runtime's reason: claims the real-world page
holds to the measured rows (regeneration fails on a missing or a stale key), not restatements."""


def _declared_keys(tree: ast.Module) -> set[int]:
    """The ids of the key nodes of the module's :data:`DECLARATIONS` dict."""
    keys: set[int] = set()
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        )
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        named = isinstance(target, ast.Name) and target.id == DECLARATIONS
        if named and isinstance(value, ast.Dict):
            keys |= {id(k) for k in value.keys if k is not None}
    return keys


def _rule_literals(path: Path) -> list[int]:
    """Lines of the string constants in ``path`` that are exactly a rule id."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    declared = _declared_keys(tree)
    return [
        node.lineno
        for node in ast.walk(tree)
        if id(node) not in declared
        and isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and RULE_ID.fullmatch(node.value)
    ]


@pytest.mark.rules("R10")
def test_rule_ids_are_written_only_in_the_check_registry_the_contract_docs_and_tests() -> None:
    found = {}
    for path in sorted((ROOT / "machine").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        lines = _rule_literals(path)
        if lines and not JUDGE.fullmatch(name):
            found[name] = lines
    over = {
        name: lines
        for name, lines in found.items()
        if len(lines) > ALLOWED.get(name, (0, ""))[0]
    }
    assert not over, (
        "rule-id literals outside the judge's room (machine/oracle/judge/), at lines: "
        f"{over}; derive them from the registry or spec/contract.toml"
    )
    assert _rule_literals(ROOT / REGISTRY), "the registry holds the rule ids"
    gone = sorted(set(ALLOWED) - set(found))
    assert not gone, f"{gone} hold no rule-id literal any more: drop them from ALLOWED"


CONFORM_JUDGE = "machine/oracle/conform/judge.py"
WORD_RULE = re.compile(r"\bR\d+\b")


def _is_rule_constant(value: object) -> bool:
    """A rule id, or a table keyed by or made of rule ids."""
    if isinstance(value, str):
        return bool(RULE_ID.fullmatch(value))
    if isinstance(value, dict):
        return any(isinstance(k, str) and RULE_ID.fullmatch(k) for k in value)
    if isinstance(value, (set, frozenset, tuple, list)):
        return any(isinstance(x, str) and RULE_ID.fullmatch(x) for x in value)
    return False


@pytest.mark.rules("R10")
def test_conforms_judge_cites_no_rule_of_its_own() -> None:
    """conform's judge (issue 43) asks the judge's room which rule a departure cites: its source
    holds no rule id, not even in prose, and imports no rule constant (a name bound to a rule id
    or to a table of them).  The attribution it used to hold is the judge's
    (:mod:`toolcancel.oracle.judge.attribution`)."""
    import importlib

    path = ROOT / CONFORM_JUDGE
    source = path.read_text(encoding="utf-8")
    written = [n for n, line in enumerate(source.splitlines(), 1) if WORD_RULE.search(line)]
    assert not written, f"{CONFORM_JUDGE} writes rule ids at lines {written}"
    module = importlib.import_module("toolcancel.oracle.conform.judge")
    imported = {
        alias.asname or alias.name
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    constants = sorted(n for n in imported if _is_rule_constant(getattr(module, n, None)))
    assert not constants, f"{CONFORM_JUDGE} imports rule constants: {constants}"
