"""``toolcancel where`` reads everything it shows from the code and the data: for every rule id it
answers, and what it lists is what contract.toml, the judge's registry and the mutants hold -- so
a rule that gains a transition, a check or a mutant shows up without anyone editing a list."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from toolcancel.contract.loader import load_contract
from toolcancel.oracle.judge.registry import RECORD, VANTAGES, by_rule
from toolcancel.selfcheck.mutants import MUTANTS
from toolcancel.teaching.where import Section, WhereError, where

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = load_contract()
sys.path.insert(0, str(Path(__file__).parent))
from test_links import anchors  # noqa: E402


def _section(sections: list[Section], title: str) -> tuple[str, ...]:
    (found,) = [s.lines for s in sections if s.title.startswith(title)]
    return found


@pytest.mark.parametrize("rule", [r.id for r in CONTRACT.rules])
def test_where_answers_for_every_rule_from_the_data(rule: str) -> None:
    sections = where(CONTRACT, rule, ROOT)
    assert sections[0].title.startswith(f"{rule} — ")
    transitions = [line.split(" ")[0] for line in _section(sections, "transitions")]
    assert transitions == [t.id for t in CONTRACT.transitions if rule in t.rules]
    checks = _section(sections, "judge checks")
    assert sum(line.startswith("call check ") for line in checks) == len(
        by_rule(RECORD).get(rule, [])
    )
    # every vantage's checks of it, from the registry
    assert len(checks) == sum(len(by_rule(v).get(rule, [])) for v in VANTAGES)
    shown = {line.split(":")[0] for line in _section(sections, "mutants")}
    assert shown >= {m.name for m in MUTANTS if m.rule == rule}
    prose = _section(sections, "prose naming it")
    page, _, anchor = prose[0].partition("#")
    assert page == "spec/CONTRACT.md" and anchor in anchors((ROOT / page).resolve())
    assert any(line.startswith("spec/CONTRACT.md: ") for line in prose[1:])
    # every rule is held somewhere: at the least, a test names it
    assert _section(sections, "tests naming it"), rule


def test_where_a_transition_and_an_outcome() -> None:
    t = where(CONTRACT, "late_success_aborted", ROOT)
    assert "rules: R18, R27, R28; precedence row: 9" in t[0].lines
    assert any("delete late_success_aborted" in line for line in t[1].lines)
    o = where(CONTRACT, "tool_timeout", ROOT)
    assert _section(o, "transitions that set it") == ("wrapper_timeout",)


def test_where_refuses_what_the_contract_does_not_name() -> None:
    with pytest.raises(WhereError, match="'R99' is no rule id"):
        where(CONTRACT, "R99")


def test_the_cli_prints_and_exits_two_on_an_unknown_subject(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolcancel.cli.main import main

    monkeypatch.chdir(ROOT)
    assert main(["where", "R28"]) == 0
    out = capsys.readouterr().out
    assert "== judge checks" in out and "keeps_late_success" in out
    assert main(["where", "t23"]) == 2
    assert "'t23' is no rule id" in capsys.readouterr().err
