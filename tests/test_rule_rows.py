"""Every rule a row of the table carries has a test that fails when that row changes.

Why: a rule suite that derives its expectation from ``contract.toml`` cannot fail when the row
changes; in session 15, 518 targeted tests passed on a changed R28.  Here the rule-to-test map is
the ``rules`` markers (read off the collection by the ``rowflip`` plugin, never a hand-kept list),
and the mutant is :func:`~toolcancel.selfcheck.specmutants.row_flip`: the spec mutant that flips
what one of the rule's rows decides (its outcome, or the row deleted), skipping the survivors
spec/SPEC-MUTANTS.md explains as equivalent at the registry boundary.  Each rule's marked tests run
in a pytest of their own, on the registry and judge built from the changed table, cheapest first,
until one fails.

Cost: a sample in the suite (:data:`SAMPLE`, about 50 s of CPU, seven pytest start-ups among
it); every rule with ``TOOLCANCEL_ROW_FLIPS=all`` (``scripts/verify --rule-rows``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
from test_rule_coverage import named_in_suites
from toolcancel.contract.loader import load_contract
from toolcancel.selfcheck.specmutants import (
    EXPLAINED,
    explained_survivors,
    perturbations,
    row_flip,
    row_flips,
)

ROOT = Path(__file__).resolve().parent.parent
CARRIED = sorted(
    {r for t in load_contract().transitions if not t.alternative for r in t.rules},
    key=lambda r: int(r[1:]),
)
"""The rules some row of the table carries, in id order: those a spec mutant can flip."""
FLIPPED = [r for r in CARRIED if row_flip(r) is not None]
"""Of them, those with a flip the registry shows (R33, R34: every change to wrapper_timeout is
a label of the wrapper's own result, explained in spec/SPEC-MUTANTS.md)."""
SAMPLE = sorted({*FLIPPED[::5], load_contract().publishes_over_rule}, key=lambda r: int(r[1:]))
"""Every fifth of them, and R28 (the rule whose change this test was born of)."""
ALL = os.environ.get("TOOLCANCEL_ROW_FLIPS") == "all"


def _flip(rule: str) -> tuple[int, list[str], str]:
    """Run the tests naming ``rule`` under its row flip: pytest's exit status, the ``FAILED``
    lines of its short summary (read from the whole output: a Hypothesis failure's summary line
    carries the whole multi-line falsifying example, so its start can lie far before the end),
    and the output's tail."""
    p = row_flip(rule)
    assert p is not None, f"{rule}: every flip of its rows is an explained survivor"
    files = sorted({where.split(":")[0] for where in named_in_suites().names[rule]})
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "tests"),
        "TOOLCANCEL_ROW_FLIP": json.dumps(asdict(p)),
        "TOOLCANCEL_ROW_FLIP_RULE": rule,
    }
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "rowflip", "-p", "no:cacheprovider", "-x", "-q",
         "--no-header", "-p", "no:xdist", *files],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    failed = re.findall(r"^FAILED (\S+)", run.stdout, re.M)
    return run.returncode, failed, run.stdout[-4000:] + run.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("rule", FLIPPED if ALL else SAMPLE)
def test_a_test_naming_the_rule_fails_when_its_row_flips(rule: str) -> None:
    status, failed, out = _flip(rule)
    table = load_contract()
    p = row_flip(rule)
    assert p is not None
    what = f"{p.revision} {p.describe(table.revision(p.revision))}"
    assert status == 1 and failed, (
        f"{rule}: no test naming it failed under {what} (pytest exit {status})\n{out}"
    )


def test_every_rule_a_row_carries_has_a_flip_and_a_test_naming_it() -> None:
    named = named_in_suites().names
    for rule in CARRIED:
        assert rule in named, f"{rule}: no test names it (@pytest.mark.rules)"
        assert row_flips(rule), rule
    assert sorted(set(CARRIED) - set(FLIPPED)) == ["R33", "R34"]  # a new one: kill it or say why


def test_a_row_flip_changes_what_a_row_of_the_rule_decides() -> None:
    contract = load_contract()
    for rule in FLIPPED:
        p = row_flip(rule)
        assert p is not None
        row = next(t for t in contract.revision(p.revision).transitions if t.index == p.index)
        assert rule in row.rules
        assert (p.kind == "outcome" and p.outcome is not None and row.outcome) or p.kind == "delete"


# ------------------------------------------------------------------------------------------------
# The survivors spec/SPEC-MUTANTS.md explains are held to the table
# ------------------------------------------------------------------------------------------------

DOC = ROOT / "spec" / EXPLAINED


def test_each_explained_survivor_is_a_perturbation_of_the_table() -> None:
    """The table names perturbations as the data describes them (a renamed row or guard fails
    here); that exactly the survivors are explained is ``verify --spec-mutants``' exit status."""
    contract = load_contract()
    described = {
        (r, p.describe(contract.revision(r))) for r in contract.revisions for p in perturbations(r)
    }
    explained = explained_survivors(DOC.read_text("utf-8"))
    assert explained
    assert sorted(set(explained) - described) == []


def test_the_prose_counts_the_explained_survivors() -> None:
    text = DOC.read_text("utf-8")
    explained = explained_survivors(text)
    heading = re.search(r"^## The (\d+) survivors, each explained", text, re.M)
    assert heading and int(heading[1]) == len(explained)
    groups = re.search(r"Four groups \(letters in the table below; ([^)]*)\)", text)
    assert groups
    counts = dict(re.findall(r"([A-Z]) (\d+)", groups[1]))
    by_letter: dict[str, int] = {}
    for group in explained.values():
        by_letter[group[0]] = by_letter.get(group[0], 0) + 1
    assert {k: int(v) for k, v in counts.items()} == by_letter
    for group in set(explained.values()):  # every group has its paragraph
        assert re.search(rf"\*\*{group[0]} --|  \* {group} \(", text), group
