"""verify's checks on the environment's own record, against registries broken where issue 14 found
verify blind: what post-execute received (2), nesting (3), immutability and acting observers (5),
the fused reason of a pre-aborted body and listeners on the registry's own signals (7), and the
first abort source that feeds a body (R21, R34, R35: ``toolcancel.oracle.judge.fusion``).

Each broken registry is a mutant of ``machine/selfcheck/mutants.py`` (so ``verify --mutants`` runs
it over the whole bounded space too); here one scenario that shows it, and the rule it is caught by.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest
from support import mutant
from toolcancel.contract.loader import load_contract
from toolcancel.contract.results import text_block
from toolcancel.oracle.judge import RECORD, Want, environment_judgement, environment_record
from toolcancel.oracle.judge.path import _key
from toolcancel.oracle.judge.registration import REGISTRATION
from toolcancel.oracle.judge.registry import of
from toolcancel.oracle.observation import Observation
from toolcancel.oracle.scenario_language import REWRITTEN, Scenario, ScenarioError
from toolcancel.runtime.registry import ToolRegistry
from toolcancel.runtime.signals import AbortController
from toolcancel.runtime.toolregistry import OWN
from toolcancel.selfcheck.harness import run_scenario
from toolcancel.selfcheck.space import configurations
from toolcancel.selfcheck.verifier import check, registration_record

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
    ("wrong_reason_source", Scenario(wrappers=("replace_aborting",)), "R21",
     "the wrapper aborted first, but the body's signal carries 'other'"),
    ("detaches_caller", Scenario(wrappers=("replace_live",), cancel="gate:body"), "R21",
     "the caller's signal was detached"),
    ("drops_tool_timeout", Scenario(timeout="timer_first"), "R34",
     "the deadline fired first, but the result is not TOOL_TIMEOUT"),
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


def _judged(obs: Observation, reason: str | None) -> tuple[list[str], frozenset[str]]:
    """The rules the judge finds broken, first first, and those it could have found, on
    ``obs``'s record with its first body's signal said to carry ``reason`` (None: live)."""
    record = environment_record(obs)
    i = record.body_signals("settle")[0][0]
    said = {"aborted": False} if reason is None else {"aborted": True, "reason": reason}
    record.lines[i] = {**record.lines[i], **said}
    found, could = environment_judgement(record, Want(obs.scenario))
    return [f.rule for f in found], could


def test_the_first_source_that_feeds_the_body_names_its_reason_and_its_rule() -> None:
    # The caller aborts first, the tool's deadline (the caller its upstream) around the body:
    # a body that sees a TOOL_TIMEOUT there is the deadline's mistake (R35), not fusion's.
    through = run_scenario(Scenario(timeout="budget", cancel="gate:body"))
    assert check(through, load_contract().revision("seed")).violations == []
    rules, could = _judged(through, "timeout")
    assert rules[:1] == ["R35"] and {"R21", "R35"} <= could, rules
    # No deadline: the same reason is fusion's (R21), and R35 could not have failed here.
    plain = run_scenario(Scenario(cancel="gate:body"))
    rules, could = _judged(plain, "timeout")
    assert rules[:1] == ["R21"], rules
    assert _judged(through, None)[0][:1] == ["R21"]  # a signal left live is fusion's, always
    assert "R35" not in {c.rule for c in of(RECORD) if c.could_fail(
        environment_record(plain), Want(plain.scenario), "trace") and c.on == "fused_signal"}
    # A wrapper's own signal that a wrapper inside it replaced never reaches the body: its
    # abort is not the first source's, and the body's live signal is no failure.
    cut = run_scenario(Scenario(wrappers=("replace_aborting", "replace_live")))
    record = environment_record(cut)
    assert [x["source"] for x in record.of("signal_aborted")] == ["wrapper"]
    assert not record.body_signals("settle")[0][1]["aborted"]
    assert check(cut, load_contract().revision("seed")).violations == []


def test_nested_calls_are_part_of_the_bounded_space() -> None:
    nested = [c for c in configurations("seed", 2) if "outer_deadline" in c.wrappers]
    assert {c.timeout for c in nested} == {"budget"}
    assert {c.wrappers[-1] for c in nested} == {"outer_deadline"}  # right outside the policy
    assert {len(c.wrappers) for c in nested} == {1, 2}
    assert not [c for c in configurations("seed", 0) if c.wrappers]
    with pytest.raises(ScenarioError, match="outer_deadline"):
        Scenario(wrappers=("outer_deadline",))


class _Lenient(ToolRegistry):
    """Takes any declared budget (R32 broken)."""

    def register(self, name: str, body: Any, *, timeout_ms: Any = None, **options: Any) -> Any:
        return super().register(name, body, **options)


class _Forgiving(ToolRegistry):
    """Begins a revised call without a caller signal as if it had one (R40 broken)."""

    def begin(self, name: str, arguments: Any = None, **options: Any) -> Any:
        if options.get("signal", OWN) in (OWN, None) and self.revision == "revised":
            options["signal"] = AbortController().signal
        return super().begin(name, arguments, **options)


@pytest.mark.rules("R32", "R40")
@pytest.mark.parametrize(("factory", "revision", "rule", "says"), [
    (ToolRegistry, "seed", None, ""),
    (ToolRegistry, "revised", None, ""),
    (_Lenient, "seed", "R32", "timeout_ms=0 is not a positive finite number, yet it was accepted"),
    (_Forgiving, "revised", "R40", "began a call without a caller signal"),
])  # fmt: skip
def test_what_no_call_shows_is_probed_and_judged(
    factory: Any, revision: str, rule: str | None, says: str
) -> None:
    record = registration_record(revision, factory)
    found, could = environment_judgement(record, Want(Scenario(revision=revision)),
                                         step=REGISTRATION)
    assert could == ({"R32", "R40"} if revision == "revised" else {"R32"})
    assert [f.rule for f in found] == ([] if rule is None else [rule]), found
    assert says in (found[0].why if found else "")


def test_a_replay_is_reused_only_for_the_same_trace_data() -> None:
    """verify replays hundreds of thousands of records and reuses a replay by its key: the trace
    lines' data and the environment's abort step.  Equal data built apart shares a key (and the
    environment's own lines are not in it); another abort step, or a value of another type
    (``1`` for ``True``, ``1.0`` for ``1``), does not; a value that is no plain data is refused,
    so that record is replayed every time."""
    obs = run_scenario(Scenario())
    lines = copy.deepcopy(obs.trace)
    key = _key(lines, None)
    assert _key(copy.deepcopy(lines), None) == key
    assert _key(obs.lines(), None) == key  # the environment's lines follow: not read
    assert _key(lines, 3) != key
    entry = lines[0]
    assert entry["agent"] is True and entry["trace"] == 1
    assert _key([{**entry, "agent": 1}, *lines[1:]], None) != key
    assert _key([{**entry, "trace": 1.0}, *lines[1:]], None) != key
    with pytest.raises(ValueError):
        _key([{**entry, "agent": object()}, *lines[1:]], None)
