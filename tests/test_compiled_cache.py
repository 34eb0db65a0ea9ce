"""The compiled-graph cache as the registry uses it: one process, registries of every retry
behaviour and both revisions, built in either order.

``tests/test_compiled.py`` proves each shape's graph steps as the pure core, but builds its graphs
itself and never goes through the cache (``RevisionContract.compiled``, filled by the registry on a
call's entry).  A cache whose key left out something the graph depends on -- the retry behaviour
(D11) above all, which decides what a second ``next()`` hands out -- would hand one registry the
graph another built: right in one test order, wrong in the other, and invisible to a test that
builds its own graphs.  Here every registry's answers must be the ones it gives with the cache
empty, whichever registries ran before it, and every cached graph must start from the shape it is
filed under.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from toolcancel.contract import compiled
from toolcancel.contract.loader import load_contract
from toolcancel.oracle.scenario_language import Scenario
from toolcancel.selfcheck.harness import run_scenario

CONTRACT = load_contract()

SCENARIOS = (
    # Where the behaviours part (D11): reenter runs the short-circuit again, cursor runs on past
    # it into the body, reject throws to the wrapper.
    Scenario(wrappers=("retry", "short_success")),
    # After a full pass, cursor skips the inner wrapper (its aborted signal) and the timeout
    # policy; reenter passes both again.
    Scenario(wrappers=("retry", "replace_aborted"), timeout="budget"),
    # Three wrappers: cursor hands out the one the short-circuit never delegated to.
    Scenario(wrappers=("retry", "short_error", "delegate")),
)

RUNS = [
    (revision, retry, scenario)
    for revision in CONTRACT.revisions
    for retry in CONTRACT.retry_names
    for scenario in SCENARIOS
]


def _answer(revision: str, retry: str, scenario: Scenario) -> tuple[object, ...]:
    """What a registry declaring ``retry`` makes of ``scenario``: its result and its path."""
    obs = run_scenario(replace(scenario, revision=revision), retry=retry)
    result = None if obs.result is None else obs.result.to_json()
    return result, repr(obs.error), tuple((p.event, p.dest) for p in obs.path)


@pytest.fixture
def empty_cache() -> Iterator[None]:
    """Every revision's graph cache emptied for the test, and the graphs it held put back."""
    kept = {r: dict(CONTRACT.revision(r).compiled) for r in CONTRACT.revisions}
    for r in CONTRACT.revisions:
        CONTRACT.revision(r).compiled.clear()
    try:
        yield
    finally:
        for r, graphs in kept.items():
            CONTRACT.revision(r).compiled.clear()
            CONTRACT.revision(r).compiled.update(graphs)


def _alone() -> dict[tuple[str, str, Scenario], tuple[object, ...]]:
    """Each run's answer with the cache emptied before it: nothing built by another registry."""
    answers = {}
    for run in RUNS:
        for r in CONTRACT.revisions:
            CONTRACT.revision(r).compiled.clear()
        answers[run] = _answer(*run)
    return answers


def test_the_behaviours_part_on_these_scenarios(empty_cache: None) -> None:
    """The scenarios are worth running: under each revision, the three behaviours answer
    differently (so a graph of the wrong behaviour cannot pass unnoticed)."""
    alone = _alone()
    for revision in CONTRACT.revisions:
        for scenario in SCENARIOS:
            answers = {alone[revision, retry, scenario] for retry in CONTRACT.retry_names}
            assert len(answers) == len(CONTRACT.retry_names), (revision, scenario)


@pytest.mark.parametrize("order", ["forward", "backward"])
def test_registries_of_every_behaviour_share_one_cache_in_either_order(
    empty_cache: None, order: str
) -> None:
    alone = _alone()
    for r in CONTRACT.revisions:
        CONTRACT.revision(r).compiled.clear()
    runs = RUNS if order == "forward" else RUNS[::-1]
    for i, run in enumerate(runs):
        before = sorted({(r, b) for r, b, _ in runs[:i]})
        revision, retry, scenario = run
        assert _answer(*run) == alone[run], (
            f"{revision}, {retry}, wrappers {scenario.wrappers}: another answer than with the "
            f"cache empty, after registries of {before}"
        )
    for revision in CONTRACT.revisions:
        cache = CONTRACT.revision(revision).compiled
        assert {key[3] for key in cache} == set(CONTRACT.retry_names)
        for key, node in cache.items():
            shape = compiled.Shape(*key)
            start = node.current
            filed = (start.caller, start.has_agent, start.approval_seam, start.retry,
                     start.wrappers)  # fmt: skip
            assert filed == shape, f"the graph filed under {key} starts at {start}"
