"""The one judge (:mod:`toolcancel.oracle.judge`): its record is the trace format, each check is
registered under a contract rule, fails where its rule is broken, and says when it could have.

Why these tests exist: coverage is derived from :meth:`Check.could_fail`, so a check that claims
it could fail where it cannot (R22 on a caller whose abort consumed the leak) would print
"checked" for nothing; and the first broken rule is the earliest evidence in the record, so a
record built out of order would cite the wrong rule.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from support import shipped_vectors
from toolcancel import load_contract
from toolcancel.contract.trace import ENVIRONMENT, vocabulary
from toolcancel.contract.trace_reader import parse_lines, validate
from toolcancel.oracle.judge import VERIFY_ONLY, rule_status
from toolcancel.oracle.judge.record import (
    Record,
    Want,
    answer_record,
    could_fail,
    env_line,
    first_failure,
)
from toolcancel.oracle.judge.registry import BOTH, LEVELS, RECORD, by_rule, of
from toolcancel.oracle.scenario_language import entry_caller
from toolcancel.oracle.vectors import REVISIONS, Vector
from toolcancel.runtime.registry import ToolRegistry
from toolcancel.selfcheck.adapter import Session

SEED = shipped_vectors("seed")


def _answer(v: Vector, level: str = "outcome") -> dict[str, Any]:
    session = Session(ToolRegistry, REVISIONS, level=level)
    message = {"protocol": 2, "type": "vector", "id": v.id, "revision": v.revision}
    try:
        answer: dict[str, Any] = session.answer(
            json.dumps({**message, "scenario": v.scenario.to_data()})
        )
    finally:
        session.close()
    return answer


def _record(v: Vector, answer: dict[str, Any]) -> Record:
    return answer_record(answer, v.id, v.revision, entry_caller(v.scenario))


def _want(v: Vector) -> Want:
    return Want(v.scenario, v.expected, tuple(v.expectations()))


def _first(shape: Any) -> Vector:
    return next(v for v in SEED if shape(v.scenario))


@pytest.mark.rules("R17", "R22", "R27")
def test_every_check_is_registered_under_a_contract_rule_and_reads_the_trace_vocabulary() -> None:
    rules = {r.id for r in load_contract().rules}
    events = set(vocabulary())
    assert set(by_rule(RECORD)) <= rules
    for c in of(RECORD):
        assert c.levels and c.levels <= BOTH, c
        assert c.reads <= events, c
        assert c.judge.__doc__, f"{c.rule} {c.on}: a check says what its rule means"
    assert ENVIRONMENT <= events
    assert set(LEVELS) == set(BOTH)


@pytest.mark.parametrize("level", ["outcome", "trace"])
def test_an_answer_is_one_record_in_the_trace_format(level: str) -> None:
    v = _first(lambda s: s.caller == "live" and "replace_live" in s.wrappers)
    record = _record(v, _answer(v, level))
    # every line, the environment's too, is a valid line of the trace format
    assert [validate(x, "<record>", i).data for i, x in enumerate(record.lines, 1)] == record.lines
    if level == "trace":
        assert len(parse_lines(record.lines, "<record>")) == 1  # one call, environment included
    assert record.has("returned") and record.has("notified") and record.has("settled")
    assert record.trace is (level == "trace")
    assert first_failure(record, _want(v), level) is None


def test_a_body_started_on_an_aborted_signal_is_c2_first_even_when_the_count_differs() -> None:
    # A registry without checkpoint C2 starts bodies the contract never starts: the count and the
    # result differ too, but the record shows C2's broken decision first (issue 26: 981 such
    # failures were cited under R18).
    v = _first(lambda s: s.cancel.endswith("_before") and s.tool_known and s.caller == "live")
    answer = _answer(v)
    signal = {"aborted": True, "reason": "caller"}
    answer["observed"]["bodies"] = [{"start": signal, "settle": signal}]
    answer["observed"]["settled"] = {"bodies_started": 1, "bodies_settled": 1}
    found = first_failure(_record(v, answer), _want(v), "outcome")
    assert found is not None and (found.rule, found.step) == ("R17", "body_start_signals")


def test_a_body_left_running_is_r27_before_what_it_makes_look_wrong_afterwards() -> None:
    v = _first(lambda s: "replace_live" in s.wrappers and s.caller == "live")
    answer = _answer(v)
    observed = answer["observed"]
    observed["settled"] = {"bodies_started": 1, "bodies_settled": 0}
    observed["slot_after_next"] = [False for _ in observed.get("slot_after_next") or [0]]
    found = first_failure(_record(v, answer), _want(v), "outcome")
    assert found is not None and found.rule == "R27"


@pytest.mark.parametrize(
    ("edit", "rule", "step"),
    [
        (lambda o: o.update(notified_same=False), "R31", "notified_same"),
        (lambda o: o.update(frozen={"result": False, "view": True}), "R30", "frozen"),
        (lambda o: o.update(frozen={"result": True, "view": False}), "R31", "frozen"),
        (lambda o: o.update(notifications=2), "R31", "notifications"),
        (lambda o: o.update(settled=None, raised="hangs"), "R27", "quiescence"),
    ],
)
def test_each_check_fails_where_its_rule_is_broken(edit: Any, rule: str, step: str) -> None:
    v = _first(lambda s: s.cancel == "never" and s.body == "success")
    answer = _answer(v)
    assert first_failure(_record(v, answer), _want(v), "outcome") is None
    broken = copy.deepcopy(answer)
    edit(broken["observed"])
    if step == "quiescence":
        broken["result"] = None
    found = first_failure(_record(v, broken), _want(v), "outcome")
    assert found is not None and (found.rule, found.step) == (rule, step)


def test_r22_could_fail_only_where_a_leaked_listener_would_show() -> None:
    # Once-listeners: a caller that aborts consumes them before anything counts them, so R22
    # could have failed only on a live caller that stays live, where a relay was built.
    aborted = _first(
        lambda s: s.caller == "live" and "replace_live" in s.wrappers and s.cancel != "never"
    )
    counts_only = _answer(aborted)
    del counts_only["observed"]["listeners_left"]  # an adapter that counts the caller's only
    record = _record(aborted, counts_only)
    assert record.has("listener_count")
    assert "R22" not in could_fail(record, _want(aborted), "outcome")
    leaked = copy.deepcopy(counts_only)
    leaked["observed"]["listeners"] = {"before": 0, "after": 1}
    found = first_failure(_record(aborted, leaked), _want(aborted), "outcome")
    assert found is not None and found.rule == "R22"  # it still fails when it sees one
    assert rule_status("R22", "outcome", checked=0, consequence=0, seen=frozenset(ENVIRONMENT)) == (
        "none",
        "no vector of this run met its antecedent (a relay was built on a caller that stays "
        "live; the environment counted listeners on a signal it handed or got)",
    )


def test_a_check_whose_events_are_missing_could_not_have_failed() -> None:
    v = _first(lambda s: s.cancel == "never")
    lines = [env_line(v.id, "returned", result=dict(v.expected.result))]
    record = Record(lines, "seed", "live")
    rules = could_fail(record, _want(v), "outcome")
    assert "R30" not in rules and "R24" not in rules and "R22" not in rules
    assert "R31" in rules  # a call that returns no result would have failed it
    assert rule_status("R30", "outcome", checked=0, consequence=0, seen=frozenset()) == (
        "none",
        "the adapter reported no frozen observations (optional)",
    )


def test_a_rule_no_vector_of_a_run_exercised_says_so_and_not_that_nothing_decides_it() -> None:
    """A rule a transition or the trace checker decides, which no vector of the run could fail
    (R40 in the revised vectors: every call there has a caller signal), says that; only a rule
    nothing decides says that."""
    nothing = frozenset[str]()
    exercised = ("none", "no vector of this run exercised it")
    assert rule_status("R40", "trace", checked=0, consequence=0, seen=nothing) == exercised
    assert rule_status("R13", "outcome", checked=0, consequence=0, seen=nothing) == exercised
    assert rule_status("R39", "trace", checked=0, consequence=0, seen=nothing) == (
        "none",
        "no check of the judge reads it and no transition carries it",
    )
    # a rule whose checks judge only what verify probes itself says so (R32: registration)
    assert rule_status("R32", "trace", checked=0, consequence=0, seen=nothing) == (
        "none", VERIFY_ONLY
    )


@pytest.mark.rules("R1", "R22", "R23", "R31")
def test_the_trace_checkers_line_rules_are_the_judges_registered_checks() -> None:
    """The checker judges listener, slot, result and notify lines and the end of a call only by
    asking the judge's trace checks: each registered under a contract rule, on a line the trace
    vocabulary has, and counted among the rules the checker decides."""
    from toolcancel.oracle.judge import TRACE_RULES
    from toolcancel.oracle.judge.checker import check_lines
    from toolcancel.oracle.judge.registry import LINE, on
    from toolcancel.oracle.judge.registry import rules as registered

    rules = {r.id for r in load_contract().rules}
    assert registered(LINE) <= rules & TRACE_RULES
    assert set(on(LINE)) - {"end"} <= set(vocabulary())
    for c in of(LINE):
        assert c.judge.__doc__, f"{c.rule} on {c.on}: a check says what its rule means"
    v = _first(lambda s: s.caller == "none")
    trace = _answer(v, "trace")["trace"]
    twice = [*trace, trace[-1]]  # a second notify line
    assert trace[-1]["event"] == "notify"
    (verdict,) = check_lines(twice)
    assert verdict.rule == "R31" and "second notify" in (verdict.explanation or "")
    (verdict,) = check_lines(trace[:-1])  # the call never notified
    assert verdict.rule == "R31" and "never notified" in (verdict.explanation or "")


def test_the_checkers_automaton_asks_registered_step_checks_for_every_death() -> None:
    """The automaton's deaths and the result's shape are the judge's step checks: each under a
    contract rule (or citing the contract's own), saying what it means; the rules the automaton
    cites by itself are derived from them; and a death names the check's rule."""
    from toolcancel.oracle.judge import TRACE_RULES
    from toolcancel.oracle.judge.checker import check_lines
    from toolcancel.oracle.judge.registry import CONTRACT, STEP, on
    from toolcancel.oracle.judge.registry import rules as registered
    from toolcancel.oracle.judge.results import result_death

    assert result_death.__module__ == "toolcancel.oracle.judge.results"
    rules = {r.id for r in load_contract().rules}
    assert {c.rule for c in of(STEP)} - {CONTRACT} == registered(STEP) <= rules
    assert registered(STEP) <= TRACE_RULES
    assert {"event", "machine", "decision", "stage_enter", "fused", "body_start"} <= set(on(STEP))
    assert {"body_settle", "no_invoke", "result"} <= set(on(STEP))
    for c in of(STEP):
        assert c.judge.__doc__, f"{c.rule} on {c.on}: a check says what its rule means"
    v = _first(
        lambda s: (s.caller, s.args, s.tool_known, s.pre, s.wrappers, s.timeout)
        == ("none", "ok", True, "allow", (), "absent")
    )
    trace = _answer(v, "trace")["trace"]
    at = next(i for i, ln in enumerate(trace) if ln["event"] == "body_settle")
    (verdict,) = check_lines([*trace[: at + 1], trace[at], *trace[at + 1 :]])
    assert verdict.rule == "R27" and "settled twice" in (verdict.explanation or "")


@pytest.mark.rules("R9", "R36", "R37", "R38")
def test_the_turn_rules_are_registered_turn_checks_and_a_hang_is_r36_alone() -> None:
    """turncheck (verify) and turnvectors (conform) judge a turn only through the judge's turn
    checks; a turn that never returned is reported as that alone (nothing after it is known)."""
    from toolcancel.oracle.judge.registry import TURN, by_rule
    from toolcancel.oracle.judge.turns import TURN_RULES, TurnRecord, turn_problems
    from toolcancel.oracle.vectors.turns import RULES

    assert RULES == TURN_RULES == frozenset(by_rule(TURN))
    assert TURN_RULES <= {r.id for r in load_contract().rules}
    for c in of(TURN):
        assert c.judge.__doc__, f"{c.rule}: a check says what its rule means"
    unreturned = TurnRecord(1, [{"event": "pre", "call": "c0"}], [], None, {})
    assert [rule for rule, _ in turn_problems(unreturned)] == ["R36"]
    # a hang the harness saw is a fact of the record; the judge alone says what it breaks
    hung = TurnRecord(1, [{"event": "pre", "call": "c0"}], [], None, {}, hung=True)
    ((rule, why),) = turn_problems(hung)
    assert rule == "R36" and "neither finished nor waited at a gate" in why
    unpaired = TurnRecord(2, [], [{"kind": "tool/call", "callId": "c0"}], 0, {})
    assert [rule for rule, _ in turn_problems(unpaired)] == ["R37"]


@pytest.mark.parametrize("level", ["trace", "outcome"])
def test_r22_listeners_left_on_the_signals_the_harness_handed_fail_where_the_caller_aborts(
    level: str,
) -> None:
    # A relay that never removes its listeners leaves them on a wrapper's signal or the view's
    # slot, where no caller abort consumes them: listeners_left shows it on any vector.
    aborted = _first(
        lambda s: s.caller == "live" and "replace_live" in s.wrappers and s.cancel != "never"
    )
    answer = _answer(aborted, level)
    left = answer["observed"]["listeners_left"]
    assert left["watched"] > 0 and left["leaks"] == 0
    assert "R22" in could_fail(_record(aborted, answer), _want(aborted), level)
    assert first_failure(_record(aborted, answer), _want(aborted), level) is None
    answer["observed"]["listeners_left"].update(leaks=1, first="wrapper 0 signal keeps 1 listener")
    found = first_failure(_record(aborted, answer), _want(aborted), level)
    assert found is not None and (found.rule, found.step) == ("R22", "listeners")
    assert "wrapper 0 signal keeps 1 listener" in found.why
