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


# ------------------------------------------------------------------------------------------------
# One registry (issue 43): every check, from every vantage, is a registry.Check
# ------------------------------------------------------------------------------------------------

JUDGE_ROOM = ROOT / "machine/oracle/judge"
REGISTRY_MODULE = "machine/oracle/judge/registry.py"
ATTRIBUTION = ("attribution.py", "differences.py", "results.py")
"""Attribution and the result checks: a rule id is written there only as the rule a check
registers under (``check("R..", ...)``); every other rule they cite is the registry's or the
contract's data."""
PLAIN_DECORATORS = frozenset(
    {"dataclass", "property", "staticmethod", "classmethod", "cache", "lru_cache",
     "cached_property", "_once"}
)  # fmt: skip
"""Decorators in the judge's room that register nothing: memos (``lru_cache``: setup's compiled
expected texts; ``_once``: setup's memo of a fact worked out once per record) and the language's
own."""


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr
    return target.id if isinstance(target, ast.Name) else ast.dump(target)


@pytest.mark.rules("R10")
def test_every_check_of_every_vantage_is_in_the_one_registry() -> None:
    """One ``Check`` type and one decorator: no module of the package defines another check
    type, no function of the judge's room is registered by another decorator, every vantage
    has checks, and each vantage's runner reads the registry's own index (not a copy)."""
    from toolcancel.oracle.judge import attribution, lines, steps
    from toolcancel.oracle.judge.registry import (
        CHECKS,
        LINE,
        RESULT,
        STEP,
        VANTAGES,
        by_rule,
        check,
        of,
        on,
    )

    types = {
        f"{path.relative_to(ROOT).as_posix()}:{node.name}"
        for path in sorted((ROOT / "machine").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and node.name.endswith("Check")
    }
    assert types == {f"{REGISTRY_MODULE}:Check"}, types
    decorators = {
        f"{path.name}:{node.name}": _decorator_name(d)
        for path in sorted(JUDGE_ROOM.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
        for d in node.decorator_list
    }
    other = {f: d for f, d in decorators.items() if d not in PLAIN_DECORATORS | {check.__name__}}
    assert not other, f"checks registered outside the one registry: {other}"
    staged = sum(  # the stage's end: one check per rule, registered by stage._stage_check
        isinstance(node, ast.Call) and _decorator_name(node) == "_stage_check"
        for node in ast.walk(ast.parse((JUDGE_ROOM / "stage.py").read_text(encoding="utf-8")))
    )
    registered = sum(d == check.__name__ for d in decorators.values()) + staged
    assert registered == len(CHECKS), "every registered check is a decorated function"
    for vantage in VANTAGES:
        assert of(vantage), f"no {vantage} check registered"
        assert all(c.vantage == vantage for c in of(vantage))
        assert sorted(map(id, of(vantage))) == sorted(
            id(c) for found in by_rule(vantage).values() for c in found
        )
    assert sorted(map(id, CHECKS)) == sorted(id(c) for v in VANTAGES for c in of(v))
    assert lines.LINES is on(LINE)
    assert steps._ON_STEP is on(STEP)
    assert attribution._DIFFERENCES is on(RESULT)


@pytest.mark.rules("R10")
def test_what_coverage_prints_is_derived_from_the_registry() -> None:
    """The rules the trace checker, the turn checks and the result comparison decide, and each
    rule's status, are read off the registry: a check registered for a rule no check decided
    (planted here, then removed) makes it checked at its levels."""
    from toolcancel.contract.loader import load_contract
    from toolcancel.oracle import judge
    from toolcancel.oracle.judge import registry
    from toolcancel.oracle.judge.registry import LINE, RECORD, RESULT, STEP, TURN, rules
    from toolcancel.oracle.vectors.turns import RULES as TURN_VECTOR_RULES

    assert judge.TRACE_RULES == rules(STEP) | rules(LINE)
    assert judge.TURN_RULES == rules(TURN) == TURN_VECTOR_RULES
    assert judge.RESULT_ATTRIBUTED == rules(RESULT, "result")
    assert set(judge.TRACE_READS.values()) <= set(judge.OPTIONAL_LINES)
    for rule, event in judge.TRACE_READS.items():
        assert rule in rules(LINE, event)
    contract = load_contract()
    for r in contract.rules:
        levels = {lv for c in registry.by_rule(RECORD).get(r.id, ()) if not c.needs_setup
                  for lv in c.levels}  # fmt: skip
        assert judge.registered_levels(r.id) == levels
    unjudged = [
        r.id for r in contract.rules
        if judge.static_status(r.id, contract)[:2] == (judge.NONE, judge.NONE)
    ]  # fmt: skip
    assert unjudged, "a rule no check decides (else plant the check under a made-up rule)"
    rule = unjudged[0]

    def planted(record: object, want: object) -> None:
        """A planted check: fails nothing."""

    before = list(registry.CHECKS)
    kept = list(registry.by_rule(RECORD).get(rule, ()))  # the rule's own checks (verify's, say)
    registry.check(rule, RECORD, "planted")(planted)
    try:
        assert judge.static_status(rule, contract)[:2] == (judge.CHECKED, judge.CHECKED)
        assert judge.registered_levels(rule) == {"trace", "outcome"}
    finally:  # take out the planted check alone: the rule's own checks stay for later tests
        registry.unregister(planted)
    assert registry.CHECKS == before
    assert registry.by_rule(RECORD).get(rule, []) == kept
    assert judge.static_status(rule, contract)[:2] == (judge.NONE, judge.NONE)


@pytest.mark.rules("R10")
def test_attribution_and_the_result_checks_cite_no_rule_of_their_own() -> None:
    """Attribution is data on the checks: what conform cites for a wrong result or input to
    post-execute is the first ``result`` check that finds the difference its own, else the
    contract's transition; so attribution, the result checks and the step checks of the result
    line write a rule id only as the rule a check registers under."""
    for name in ATTRIBUTION:
        tree = ast.parse((JUDGE_ROOM / name).read_text(encoding="utf-8"))
        registered = {
            id(node.args[0])
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and _decorator_name(node) == "check" and node.args
        }
        loose = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and RULE_ID.fullmatch(node.value)
            and id(node) not in registered
        ]
        assert not loose, f"{name} writes rule ids outside a check's registration: {loose}"


@pytest.mark.rules("R10")
def test_a_removal_then_a_registration_serves_no_stale_cache() -> None:
    """The runners' caches of asked checks are keyed by the registry's generation, not its size:
    a check taken out and another put in leaves the size as it was, and a cache keyed by it
    would keep asking the check that is gone (it did, last session, across two tests)."""
    from toolcancel.oracle.judge import registry
    from toolcancel.oracle.judge.record import asked
    from toolcancel.oracle.judge.registry import RECORD, of

    def first(record: object, want: object) -> None:
        """A planted check: fails nothing."""

    def second(record: object, want: object) -> None:
        """Another planted check, in the first's place."""

    size, generation = len(registry.CHECKS), registry.generation()
    registry.check("R10", RECORD, "planted")(first)
    try:
        assert [c.judge for c in of(RECORD)].count(first) == 1
        assert [c.judge for c in asked("trace", None)].count(first) == 1
    finally:
        registry.unregister(first)
    registry.check("R10", RECORD, "planted")(second)
    try:
        assert len(registry.CHECKS) == size + 1 and registry.generation() == generation + 3
        for found in (of(RECORD), asked("trace", None)):
            judged = [c.judge for c in found]
            assert first not in judged and judged.count(second) == 1
    finally:
        registry.unregister(second)
    assert len(registry.CHECKS) == size
    assert second not in [c.judge for c in of(RECORD)]
    with pytest.raises(LookupError, match="not a registered check"):
        registry.unregister(second)


REGISTRATIONS = frozenset({"check", "_stage_check"})
"""Calls whose first argument is the rule a check registers under: the one place in the judge's
room a rule id is written."""
ROOM_ALLOWED: dict[str, tuple[int, str]] = {
    # module: (at most this many rule-id literals outside a registration, why)
    "steps.py": (1, "Replay tells the revised error shape by its rule (R44) being the revision's; "
                 "the check that decides it lives in results.py, which imports steps.py"),
}


def _loose_rule_ids(source: str) -> list[int]:
    """Lines of the rule-id literals in ``source`` that are not the rule a registration names."""
    tree = ast.parse(source)
    registered = {
        id(node.args[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and node.args and _decorator_name(node) in REGISTRATIONS
    }
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and RULE_ID.fullmatch(node.value)
        and id(node) not in registered
    ]


@pytest.mark.rules("R10")
def test_the_judges_checks_cite_their_rule_from_their_registration() -> None:
    """A check's failure cites the rule it registered under (``Failure.of(check, ...)``, or the
    registered check whose case it is), and a table of rules is the contract's data
    (``entry_rules``, ``precedence_rule``, the outcomes' rules): no rule id is written in the
    judge's room except as the rule a check registers under."""
    found = {
        path.name: lines
        for path in sorted(JUDGE_ROOM.glob("*.py"))
        if (lines := _loose_rule_ids(path.read_text(encoding="utf-8")))
    }
    over = {n: ls for n, ls in found.items() if len(ls) > ROOM_ALLOWED.get(n, (0, ""))[0]}
    assert not over, f"rule ids written outside a check's registration, at lines: {over}"
    gone = sorted(set(ROOM_ALLOWED) - set(found))
    assert not gone, f"{gone} hold no loose rule id any more: drop them from ROOM_ALLOWED"
    planted = (
        '@check("R27", RECORD, "quiescence")\n'
        "def quiescent(record, want):\n"
        '    return Failure("R27", 0, "quiescence", "why")\n'
        'TABLE = {"none": "R26"}\n'
    )
    assert sorted(_loose_rule_ids(planted)) == [3, 4], "the scan finds a literal in a check body"


@pytest.mark.rules("R10")
def test_a_failure_cites_the_rule_its_check_registered_under() -> None:
    from toolcancel.oracle.judge import registry
    from toolcancel.oracle.judge.calls import body_starts, no_late_start_or_success, quiescent
    from toolcancel.oracle.judge.record import Failure
    from toolcancel.oracle.judge.registry import RECORD

    assert Failure.of(quiescent, 0, "quiescence", "why").rule == registry.rule_of(quiescent)
    assert registry.rule_of(body_starts) != registry.rule_of(no_late_start_or_success)

    def planted(record: object, want: object) -> Failure:
        """A planted check citing itself."""
        return Failure.of(planted, 0, "planted", "why")

    registry.check("R10", RECORD, "planted")(planted)
    try:
        assert planted(None, None).rule == "R10"
    finally:
        registry.unregister(planted)
    with pytest.raises(LookupError, match="not a registered check"):
        planted(None, None)
