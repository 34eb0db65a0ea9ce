"""Ground truth for attribution (issue 26): every shipped mutant declares the rule it breaks, and
each of its failing vectors must cite that rule first -- at trace level, and at outcome level
wherever a black box can decide it.

Why: a verdict is read for its rule.  A registry without checkpoint C2 used to fail hundreds of
vectors under R18 (the rule of the outcome it changed), a body left running under R31; the
checks were right and the explanation wrong.  A mutant breaks one guarantee on purpose, so what
it must be cited for is known.
"""

from __future__ import annotations

import asyncio
import collections
import sys
from collections.abc import Callable

import pytest
from support import ROOT, mutants, shipped_vectors
from toolcancel.oracle.conform import run_vectors
from toolcancel.oracle.scenario_language import Scenario
from toolcancel.oracle.vectors import Vector

sys.path.insert(0, str(ROOT / "tests"))
# the scenario shape each mutant shows in, and the retry behaviour a mutant's registry declares
from test_conform import KILLERS, _serving

sys.path.pop(0)
SAMPLE = 60
"""Vectors per mutant and level, spread over the mutant's shape (its first ones all look alike)."""

def _late_success_shows(s: Scenario) -> frozenset[str]:
    """Where a kept late success first shows in a record: post-execute is handed it instead of
    C3's ABORTED (R19) -- and when post-execute blocks or throws, that is all the record shows;
    when it accepts, the caller gets the late success as well (R28), so either may come first."""
    return frozenset({"R19"}) if s.post in ("block", "throw") else frozenset({"R19", "R28"})


SHOWN: dict[str, Callable[[Scenario], frozenset[str]]] = {
    # mutant: the rules its breach can show first on a vector of its shape, where that is not
    # (only) its declared rule -- what the record holds, never what a sample happened to hold
    "keeps_late_success": _late_success_shows,
    "keeps_late_success_without_signal": _late_success_shows,  # the same break, no signal=
}


UNDECIDABLE = {
    # (mutant, level): why its rule cannot be decided at that level; its failures are still
    # asserted (the mutant is killed there), not the rule they cite
    ("cursor_skips_last", "outcome"): "its registry's own machine refuses the early hand-out "
    "and the call raises: a black box shows only that no result came (R31); which listener a "
    "next() handed out is in the trace alone (at trace level conform cites R16)",
    ("ignores_task_cancellation", "outcome"): "a black box sees the body run and its success "
    "reach post-execute, which C3 must have replaced (R19); that C1 missed the cancelled task "
    "(R13) is in the trace alone",
}


def _mutant_rules() -> dict[str, str]:
    return {m.name: m.rule for m in mutants().MUTANTS}


def _cited(name: str, level: str, vectors: list[Vector]) -> list[tuple[Vector, str]]:
    """Each failing vector and the rule conform cites for it."""
    command = [sys.executable, "-m", "toolcancel.selfcheck.adapter", "--mutant", name,
               "--level", level, *_serving(name)]
    report = asyncio.run(run_vectors(command, vectors, "seed", timeout=60))
    by_id = {v.id: v for v in vectors}
    return [(by_id[j.id], j.rule or "protocol") for j in report.judgements if not j.passed]


CASES = [(name, level) for name in KILLERS for level in ("trace", "outcome")]


@pytest.mark.rules("R17", "R19", "R21", "R27", "R28", "R34")
@pytest.mark.parametrize(("name", "level"), CASES)
def test_each_mutants_failures_cite_its_declared_rule_first(name: str, level: str) -> None:
    declared = _mutant_rules()[name]
    shaped = [v for v in shipped_vectors("seed") if KILLERS[name](v.scenario)]
    sample = shaped[:: max(1, len(shaped) // SAMPLE)][:SAMPLE]
    failed = _cited(name, level, sample)
    assert failed, f"{name} passed every vector at {level} level"
    cited = collections.Counter(rule for _, rule in failed)
    assert "protocol" not in cited
    if (name, level) in UNDECIDABLE:
        return
    shows = SHOWN.get(name, lambda s: frozenset({declared}))
    wrong = collections.Counter((v.id, rule) for v, rule in failed if rule not in shows(v.scenario))
    assert not wrong, f"{name} breaks {declared}; at {level} level conform cited {cited}: {wrong}"
