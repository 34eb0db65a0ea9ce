"""docs/ENGINEERING.md's measured figures held to what the commands print.

The configuration counts are the verifier's plan, worked out without running a schedule, so
they are checked here against the table and the prose; schedule counts and times need the full
run, so the page dates the run they come from (and this checks that it does)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from toolcancel.selfcheck.verifier import MAX_CALLS, MAX_WRAPPERS, plan

PAGE = (Path(__file__).resolve().parents[1] / "docs" / "ENGINEERING.md").read_text("utf-8")


def configurations(revision: str, *, deep: bool) -> int:
    return sum(job.size for job in plan(revision, MAX_WRAPPERS, MAX_CALLS, deep=deep))


def row(label: str) -> list[str]:
    [line] = [line for line in PAGE.splitlines() if line.startswith(f"| {label} |")]
    return [cell.strip() for cell in line.strip("|").split("|")[1:]]


@pytest.mark.parametrize("column,revision", [(0, "seed"), (1, "revised")])
def test_the_verify_table_s_configurations_are_the_verifier_s(column: int, revision: str) -> None:
    bounded = configurations(revision, deep=False)
    deeper = configurations(revision, deep=True) - bounded
    assert row("configurations")[column] == f"{bounded:,}"
    family = row("then the deeper family: configurations / schedules (2026-12-02)")[column]
    assert family.startswith(f"+{deeper:,} / "), family


def test_the_prose_says_what_verify_prints_and_which_run_the_rest_came_from() -> None:
    total = configurations("seed", deep=True)
    assert f"what it prints: {total:,} configurations" in PAGE
    assert f"the bounded space is {configurations('seed', deep=False):,} configurations" in PAGE
    assert re.search(r"measured on this project's 2-core machine \(\d{4}-\d\d-\d\d", PAGE)


def test_the_schedules_verify_prints_are_the_table_s_bounded_run_and_its_deeper_family() -> None:
    bounded = int(row("schedules run (+ pruned as equivalent)")[0].split()[0].replace(",", ""))
    family = row("then the deeper family: configurations / schedules (2026-12-02)")[0]
    deeper = int(family.split("/ +")[1].replace(",", ""))
    assert f"configurations and {bounded + deeper:,} schedules." in PAGE


def test_the_mutant_counts_in_the_prose_are_the_shipped_lists() -> None:
    from toolcancel.selfcheck import mutants

    words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
    turn = re.search(r"and so do (\w+) broken schedulers\s+\(`TURN_MUTANTS`", PAGE)
    observed = re.search(r"and (\w+) registries only the optional\s+observations show", PAGE)
    assert turn and observed, "the conformance bullet no longer names the two counts"
    assert words.index(turn.group(1)) == len(mutants.TURN_MUTANTS)
    assert words.index(observed.group(1)) == len(mutants.OBSERVATION_MUTANTS)
