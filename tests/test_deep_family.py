"""verify's deeper family: three-wrapper retry stacks, and what only a ``cursor`` retry reaches.

Retry bugs live past the default bound (issue 26): a registry whose ``cursor`` retry hands out the
base dispatch one wrapper too early (``cursor_skips_last`` in ``machine/selfcheck/mutants.py``)
shows it only with a retry, a short-circuit and one more around wrapper after it -- a stack the
bounded enumeration never builds at any bound, since it takes "nothing inside a short-circuit is
ever reached" for granted (true for ``reenter`` and ``reject`` only).  The family adds those stacks
and the three-wrapper retry stacks at a cost CI pays, and leaves the bounded space as it was.
"""

from __future__ import annotations

import pytest
from support import mutant
from toolcancel.oracle.scenario_language import Scenario
from toolcancel.selfcheck.space import (
    DEEP,
    DEEP_WRAPPERS,
    MAX_WRAPPERS,
    added_later,
    configurations,
    deep_stacks,
    expand,
    groups,
)
from toolcancel.selfcheck.verifier import run_batch


def _skips_last_shows(config: Scenario) -> bool:
    """Whether a cursor retry can stand at the last around wrapper: a retry outside a
    short-circuit that has an around wrapper after it (a scenario one or the timeout policy)."""
    around = len(config.wrappers) + (config.timeout != "absent")
    for k, w in enumerate(config.wrappers):
        if w in ("short_success", "short_error") and "retry" in config.wrappers[:k]:
            return k + 1 < around
    return False


@pytest.mark.parametrize("revision", ["seed", "revised"])
def test_the_bounded_space_is_what_it_was(revision: str) -> None:
    counts = {"seed": 62_103, "revised": 41_402}  # docs/ENGINEERING.md, "What verify checks"
    space = list(configurations(revision))
    # the caller that cancels its task (issue 39) came after, and added only its own
    assert sum(1 for c in space if c.caller != "task") == counts[revision]
    assert len(space) == counts[revision] + 2_215
    plain = list(groups(revision))
    assert list(groups(revision, deep=True))[: len(plain)] == plain  # the family comes after


@pytest.mark.parametrize("bound", range(DEEP_WRAPPERS + 1))
def test_the_family_adds_only_what_the_bound_leaves_out(bound: int) -> None:
    bounded = set(configurations("seed", bound))
    family = [g for g in groups("seed", bound, deep=True) if isinstance(g, tuple) and len(g) == 3]
    deeper = [c for g in family for c in expand(g)]
    assert deeper and len(set(deeper)) == len(deeper)
    assert not bounded & set(deeper)
    if bound >= MAX_WRAPPERS:  # vectors come from the default bound's space
        assert all(added_later(c) == 2 for c in deeper)  # numbered after every vector before
    assert not any(_skips_last_shows(c) for c in bounded)  # the bound cannot see the mutant
    shows = {c.wrappers for c in deeper if _skips_last_shows(c)}
    assert ("retry", "short_success") in shows  # with the timeout policy after it
    assert ("retry", "short_error", "delegate") in shows


def test_the_family_has_three_wrapper_retry_stacks_at_every_position() -> None:
    stacks = {s for s, _ in deep_stacks()}
    for position in range(3):
        assert any(len(s) == 3 and s[position] == "retry" for s in stacks), position
    assert ("retry", "retry", "retry") in stacks
    assert {s for s, _ in deep_stacks(DEEP_WRAPPERS)} < stacks  # the bound holds the rest


@pytest.mark.parametrize(
    "stack", [("retry", "short_success", "delegate"), ("retry", "short_error", "replace_aborted")]
)
def test_the_family_kills_the_cursor_that_skips_the_last_wrapper(stack: tuple[str, ...]) -> None:
    group = (Scenario(), stack, DEEP)
    configs = [c for c in expand(group) if c.body == "success" and c.timeout == "absent"]
    assert run_batch(configs).violations == []
    with mutant("cursor_skips_last").active() as factory:
        caught = run_batch(configs, factory)
    assert caught.violations, "cursor_skips_last survived its own shape"
    assert {v.retry for v in caught.violations} == {"cursor"}
