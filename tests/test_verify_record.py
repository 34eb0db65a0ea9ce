"""verify's checks on the environment's own record, against registries broken where issue 14 found
verify blind: what post-execute received (2), nesting (3), immutability and acting observers (5),
the fused reason of a pre-aborted body and listeners on the registry's own signals (7).

Each broken registry is a mutant of ``machine/selfcheck/mutants.py`` (so ``verify --mutants`` runs
it over the whole bounded space too); here one scenario that shows it, and the rule it is caught by.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from support import mutant
from toolcancel.contract.loader import load_contract
from toolcancel.contract.results import text_block
from toolcancel.oracle.scenario import REWRITTEN, Scenario, ScenarioError, run_scenario
from toolcancel.selfcheck.space import configurations
from toolcancel.selfcheck.verifier import check

CAUGHT = [
    # (mutant, a scenario that shows it, the rule, a piece of the explanation)
    ("post_sees_late_success",
     Scenario(caller="none", wrappers=("replace_aborting",), post="block"), "R4",
     "post-execute received 'done'"),
    ("post_sees_late_success",
     Scenario(revision="revised", wrappers=("replace_aborting",), body="defer_success",
              post="throw"),
     "R4", "post-execute received 'done'"),
    ("classifies_timeout_by_code", Scenario(wrappers=("outer_deadline",), timeout="budget"),
     "R35", "the outer deadline expired"),
    ("classifies_timeout_by_code",
     Scenario(revision="revised", wrappers=("outer_deadline",), timeout="budget",
              body="defer_success", post="block"),
     "R35", "the outer deadline expired"),
    ("publishes_mutable_result", Scenario(), "R30", "it must be deep-frozen"),
    ("view_writable_by_observers", Scenario(cancel="gate:body"), "R31",
     "must freeze the view immediately before notifying"),
    ("prefers_caller_reason", Scenario(caller="aborted", wrappers=("replace_aborted",)), "R21",
     "must be the wrapper's"),
    ("keeps_fused_watch", Scenario(), "R22", "registry's call signal"),
    ("keeps_fused_watch", Scenario(revision="revised", cancel="gate:body"), "R22",
     "registry's call signal"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "scenario", "rule", "says"), CAUGHT)
def test_a_registry_broken_where_verify_was_blind_is_caught_on_the_record(
    name: str, scenario: Scenario, rule: str, says: str
) -> None:
    table = load_contract().revision(scenario.revision)
    assert check(run_scenario(scenario), table).violations == []
    with mutant(name).active() as factory:
        broken = run_scenario(scenario, factory)
    found = check(broken, table).violations
    assert found and found[0].rule == rule, found
    assert says in found[0].explanation, found[0].explanation


def test_the_rewritten_content_is_judged_too() -> None:
    # Blind spot 2: the result text was not checked when post-execute rewrote the content.  A
    # success accepted (and rewritten) after the caller aborted is replaced whole at C4; a
    # registry that only relabels it as ABORTED keeps the rewritten text.
    table = load_contract().revision("seed")
    obs = run_scenario(Scenario(post="accept_content", cancel="gate:post"))
    assert obs.result is not None and check(obs, table).violations == []
    r = obs.result
    relabelled = replace(r, content=(text_block(REWRITTEN),))
    found = check(replace(obs, result=relabelled, notified=[relabelled]), table).violations
    assert [v.rule for v in found][:1] == ["R28"], found
    # And an error result keeps what post-execute wrote: one that loses it is caught (R7).
    obs = run_scenario(Scenario(body="throw", post="accept_content", cancel="gate:post"))
    assert obs.result is not None and obs.result.text == REWRITTEN
    assert check(obs, table).violations == []
    lost = replace(obs.result, content=(text_block("Error: tool failed"),))
    found = check(replace(obs, result=lost, notified=[lost]), table).violations
    assert [v.rule for v in found][:1] == ["R7"], found


def test_nested_calls_are_part_of_the_bounded_space() -> None:
    nested = [c for c in configurations("seed", 2) if "outer_deadline" in c.wrappers]
    assert {c.timeout for c in nested} == {"budget"}
    assert {c.wrappers[-1] for c in nested} == {"outer_deadline"}  # right outside the policy
    assert {len(c.wrappers) for c in nested} == {1, 2}
    assert not [c for c in configurations("seed", 0) if c.wrappers]
    with pytest.raises(ScenarioError, match="outer_deadline"):
        Scenario(wrappers=("outer_deadline",))
