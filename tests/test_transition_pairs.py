"""Which event leaves which source is data (``leaves`` in spec/contract.toml, read as
``Transition.pairs``): the machine, the trace checker's automaton, conform's capability table,
the statechart and the diagrams all read the declared pairs, never a transition's sources by its
events, and never a guess from the lists' shape.

``pre_error`` is the row that needs it: a pre-execute failure leaves ``pre_policy``, an approval
seam's ``approval``, a guard's ``guards``.  Read as every source by every event, the machine
also let a guard's failure end the call while pre-execute was still deciding -- six pairs the
contract does not mean."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from toolcancel import ContractViolation
from toolcancel.contract.core import Occurrence, initial_state, step
from toolcancel.contract.errors import ContractError
from toolcancel.contract.loader import load_contract, load_contract_file
from toolcancel.contract.trace import TraceRecorder
from toolcancel.oracle.judge.checker import check_lines
from toolcancel.oracle.scenario_language import Scenario
from toolcancel.runtime.registry import ToolRegistry
from toolcancel.runtime.virtual_time import VirtualClock, run
from toolcancel.selfcheck.harness import Harness

ROOT = Path(__file__).resolve().parents[1]
CONTRACT_TOML = ROOT / "spec" / "contract.toml"
CONTRACT = load_contract()
PRE_ERROR = (("pre_policy", "pre_raise"), ("approval", "approval_raise"), ("guards", "guard_raise"))
NOT_MEANT = [
    (s, e)
    for s, _ in PRE_ERROR
    for _, e in PRE_ERROR
    if (s, e) not in PRE_ERROR
]
"""What reading ``pre_error`` as its sources by its events admitted besides its pairs."""


def test_pre_error_leaves_each_source_by_its_own_event() -> None:
    assert CONTRACT.transition("pre_error").pairs == PRE_ERROR
    plain = CONTRACT.transition("args_valid")  # no ``leaves``: every event, every source
    assert plain.pairs == tuple((s, e) for s in plain.sources for e in plain.events)


@pytest.mark.parametrize("revision", ["seed", "revised"])
def test_the_machine_indexes_the_declared_pairs_only(revision: str) -> None:
    table = CONTRACT.revision(revision)
    assert set(table.candidates) == {p for t in table.transitions for p in t.pairs}
    for state, event in NOT_MEANT:
        assert event not in table.events_allowed_in(state), (state, event)
        assert all(t.id != "pre_error" for t in table.candidates.get((state, event), ()))


@pytest.mark.parametrize(("state", "event"), NOT_MEANT)
def test_the_machine_refuses_a_pair_the_contract_does_not_mean(state: str, event: str) -> None:
    """Before ``leaves``, ``core.step`` took each of these to ``finalizing`` with ``pre_error``."""
    table = CONTRACT.revision("seed")
    s = initial_state(table, "none", has_agent=True, approval_seam=True)._replace(state=state)
    with pytest.raises(ContractViolation) as info:
        step(table, s, Occurrence(event))
    assert (info.value.state, info.value.event) == (state, event)


def _record(scenario: Scenario) -> list[dict[str, object]]:
    recorder = TraceRecorder()
    clock = VirtualClock()
    run(Harness(scenario, functools.partial(ToolRegistry, trace=recorder), clock).run(),
        clock=clock)  # fmt: skip
    return recorder.lines


@pytest.mark.parametrize("revision", ["seed", "revised"])
@pytest.mark.parametrize("swap", ["approval_raise", "guard_raise"])
@pytest.mark.rules("R14")
def test_a_trace_that_leaves_pre_execute_by_another_stages_failure_is_refused(
    revision: str, swap: str
) -> None:
    """What ``check`` accepts is unchanged: the stage ledger refused these traces before the
    machine did, and still does."""
    lines = _record(Scenario(pre="throw", revision=revision))
    assert check_lines(lines, revision)[0].conforming
    for line in lines:
        if line["event"] == "pre_raise":
            line["event"] = swap
    (verdict,) = check_lines(lines, revision)
    assert not verdict.conforming and verdict.seen == swap


@pytest.mark.parametrize(
    ("leaves", "message"),
    [
        ('{ pre_policy = "pre_raise", approval = "approval_raise" }', "exactly the transition's"),
        ('{ pre_policy = "pre_raise", approval = "approval_raise", guards = "guard_raise", '
         'body = "body_raise" }', "exactly the transition's"),
        ('{ pre_policy = "pre_raise", approval = "approval_raise", guards = "body_raise" }',
         "names event 'body_raise'"),
        ('{ pre_policy = "pre_raise", approval = "pre_raise", guards = "pre_raise" }',
         "gives event 'approval_raise' no source"),
        ('{ pre_policy = 1, approval = "approval_raise", guards = "guard_raise" }',
         "expected a string or a list of strings"),
        ('"pre_raise"', "'leaves' must be"),
    ],
)
def test_bad_leaves_is_one_line_naming_the_transition(
    tmp_path: Path, leaves: str, message: str
) -> None:
    text = CONTRACT_TOML.read_text("utf-8")
    start = text.index("leaves = {", text.index('id = "pre_error"'))
    end = text.index("\n", start)
    copy = tmp_path / "contract.toml"
    copy.write_text(text[:start] + "leaves = " + leaves + text[end:], "utf-8")
    with pytest.raises(ContractError, match=message) as info:
        load_contract_file(copy)
    assert "\n" not in str(info.value)
    assert "pre_error" in str(info.value)
