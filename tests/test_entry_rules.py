"""The rule of the caller's signal at entry is the contract's data (``entry_rules`` in
spec/contract.toml), not a table in the judge: what conform's attribution and the judge's replay
cite for a wrong entry is read from it, and bad data stops the loader with one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from toolcancel.contract.errors import ContractError
from toolcancel.contract.loader import CALLERS, load_contract, load_contract_file
from toolcancel.oracle.judge.attribution import Attribution
from toolcancel.oracle.scenario_language import entry_caller
from toolcancel.oracle.vectors import shipped_vectors

ROOT = Path(__file__).resolve().parents[1]
CONTRACT_TOML = ROOT / "spec" / "contract.toml"


@pytest.mark.rules("R12", "R25", "R26", "R42")
def test_each_entry_rule_is_a_rule_of_its_revision_or_the_seeds() -> None:
    contract = load_contract()
    assert set(contract.entry_rules) == set(CALLERS)
    for caller in CALLERS:
        for revision in contract.revisions:
            rule = contract.entry_rule(caller, revision)
            assert rule in {r.id for r in contract.rules}
    # the revised contract's pre-aborted entry is its own short-circuit transition's rule
    (short,) = (t for t in contract.revision("revised").transitions if "entry" in t.sources
                and t.outcome == "aborted_before_dispatch")  # fmt: skip
    assert contract.entry_rule("aborted", "revised") in short.rules
    assert contract.entry_rule("aborted", "seed") != contract.entry_rule("aborted", "revised")


def test_attribution_cites_the_entry_rule_the_contract_file_holds(tmp_path: Path) -> None:
    """A contract whose ``entry_rules`` name other rules makes conform's attribution cite those:
    the judge keeps no table of its own to fall back on."""
    text = CONTRACT_TOML.read_text("utf-8")
    start = text.index("entry_rules = ")
    end = text.index("\n", start)
    changed = '{ none = "R31", live = "R27", aborted = "R28" }'
    copy = tmp_path / "contract.toml"
    copy.write_text(text[:start] + "entry_rules = " + changed + text[end:], "utf-8")
    contract = load_contract_file(copy)
    cited = {"none": "R31", "live": "R27", "aborted": "R28"}
    seen = set()
    for revision in contract.revisions:
        a = Attribution(contract.revision(revision))
        for v in shipped_vectors(revision):
            caller = entry_caller(v.scenario)
            assert a._entry_rule(v) == cited[caller], (revision, v.id)
            seen.add(caller)
    assert seen == set(CALLERS)  # every caller state at entry was asked, in some revision


@pytest.mark.parametrize(
    ("entry_rules", "message"),
    [
        ('{ none = "R26", live = "R12" }', "exactly the caller's states"),
        ('{ none = "R26", live = "R12", aborted = { seed = "R25" } }', "one per revision"),
        ('{ none = "R26", live = "R12", aborted = "R999" }', "unknown rule 'R999'"),
        ('{ none = "R26", live = 12, aborted = "R25" }', "entry_rules.live must be a rule id"),
        ('{ none = "R26", live = "R12", aborted = { seed = 1, revised = "R42" } }',
         "entry_rules.aborted.seed must be a rule id"),
        ('"R26"', "'entry_rules' must be"),
    ],
)
def test_bad_entry_rules_is_one_line(tmp_path: Path, entry_rules: str, message: str) -> None:
    text = CONTRACT_TOML.read_text("utf-8")
    start = text.index("entry_rules = ")
    end = text.index("\n", start)
    copy = tmp_path / "contract.toml"
    copy.write_text(text[:start] + "entry_rules = " + entry_rules + text[end:], "utf-8")
    with pytest.raises(ContractError, match=message) as info:
        load_contract_file(copy)
    assert "\n" not in str(info.value) and "entry_rules" in str(info.value)
