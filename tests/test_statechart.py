"""The ``transitions`` statechart and :func:`toolcancel.contract.core.step` are the same machine.

Two engines read the one table: ``core.step`` (the hot path, a dict lookup and the guard
functions) and a :class:`transitions.Machine` built by :mod:`toolcancel.teaching.statechart`.  If
they ever disagree, one of them does not implement the contract file, so this module enumerates the
whole reachable space instead of sampling it:

* every initial configuration (caller signal none / live / aborted x has an agent x has an
  approval seam), for both revisions, with the around-wrapper count unknown; and, for a live
  caller with an agent and a seam, every retry behaviour (D11) x a known count of 0, 1 or 2
  wrappers (the retry and count only matter in the around states, which the other dimensions do
  not reach differently);
* from every reachable :class:`CallState` (breadth first; wrapper depth bounded by 2, which is
  enough to see every wrapper transition both nested and not), every event with every combination
  of the data fields that event declares in ``contract.toml`` (the others keep their defaults);
* each step is compared: same transition index and same next state, or both refuse with the same
  list of allowed events.  Every MAY transition is also taken on purpose, and must land where the
  file's candidate order says.

A second walk over the *valid* configurations proves that every transition of the contract can
actually be taken: a row no path reaches is dead text in the contract.
"""

from __future__ import annotations

import functools
import itertools
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest
from toolcancel import load_contract
from toolcancel.contract.core import (
    GUARDS,
    UNKNOWN,
    CallerSignal,
    CallState,
    Occurrence,
    choices,
    initial_state,
    step,
)
from toolcancel.contract.errors import ContractViolation
from toolcancel.contract.loader import RevisionContract, Transition
from toolcancel.teaching.statechart import CallModel, Statechart, build_statechart

MAX_DEPTH = 2
CALLERS: tuple[CallerSignal, ...] = ("none", "live", "aborted")
REVISIONS = load_contract().revisions


def occurrences(table: RevisionContract) -> list[Occurrence]:
    """Every event, with every combination of the boolean observations it declares."""
    out = []
    for event in table.events:
        for name in event.data:
            assert name in Occurrence._fields, f"event {event.name} declares unknown data {name}"
        for values in itertools.product((False, True), repeat=len(event.data)):
            out.append(Occurrence(event.name, **dict(zip(event.data, values, strict=True))))
    return out


def starts(table: RevisionContract, *, valid_only: bool) -> list[CallState]:
    required = table.contract.revision_info[table.name].get("caller_signal") == "required"
    plain = [
        initial_state(table, caller, has_agent=agent, approval_seam=seam)
        for caller in CALLERS
        if not (valid_only and required and caller == "none")
        for agent in (False, True)
        for seam in (False, True)
    ]
    retrying = [
        initial_state(
            table, "live", has_agent=True, approval_seam=True, retry=retry, wrappers=wrappers
        )
        for retry in table.contract.retry_names
        for wrappers in range(MAX_DEPTH + 1)
    ]
    assert all(s.wrappers == UNKNOWN for s in plain)
    return plain + retrying


def alternatives_for(table: RevisionContract, state: str, event: str) -> list[Transition]:
    return [t for t in table.candidates.get((state, event), ()) if t.alternative]


def core_alternative(
    table: RevisionContract, s: CallState, o: Occurrence, alt: int
) -> tuple[Transition, CallState] | None:
    """What an implementation that takes MAY transition ``alt`` does: the first applying candidate
    in file order that is either ordinary or ``alt`` itself."""
    for t, after in choices(table, s, o):
        if not t.alternative or t.index == alt:
            return t, after
    return None


@dataclass
class Walk:
    states: set[CallState] = field(default_factory=set)
    steps: int = 0
    refusals: int = 0
    alternative_steps: int = 0
    taken: set[tuple[int, str, str]] = field(default_factory=set)
    """(transition index, source state, event) of every step taken."""


def offer_both(
    table: RevisionContract, chart: Statechart, model: CallModel, s: CallState, o: Occurrence
) -> tuple[Transition, CallState] | None:
    """Step ``s`` on ``o`` through both engines, assert they agree, return the common result."""
    try:
        expected: tuple[Transition, CallState] | None = step(table, s, o)
        refusal = None
    except ContractViolation as exc:
        expected, refusal = None, exc
    chart.place(model, s)
    try:
        taken = chart.offer(model, o)
    except ContractViolation as exc:
        assert refusal is not None, f"statechart refused {o} in {s}; core took {expected}"
        assert (exc.state, exc.event, exc.allowed) == (
            refusal.state,
            refusal.event,
            refusal.allowed,
        )
        return None
    assert expected is not None, f"core refused {o} in {s}; statechart took t{taken.index}"
    assert taken.index == expected[0].index, (s, o, taken.index, expected[0].index)
    assert model.call == expected[1], (s, o, model.call, expected[1])
    assert model.state == model.call.state
    last = model.path[-1]
    assert (last.source, last.dest, last.transition, last.occurrence) == (
        s.state,
        expected[1].state,
        taken.index,
        o,
    )
    return expected


def core_only(
    table: RevisionContract, s: CallState, o: Occurrence
) -> tuple[Transition, CallState] | None:
    """Step ``s`` on ``o`` through ``core.step`` alone (None when it refuses)."""
    try:
        return step(table, s, o)
    except ContractViolation:
        return None


def walk(table: RevisionContract, roots: Iterable[CallState], *, compare: bool = True) -> Walk:
    """Breadth-first over every call state reachable from ``roots``.  With ``compare`` each step
    goes through both engines and they must agree; without it only ``core.step`` runs (the walks
    that only need the reachable space: the comparison over *every* start already covers them)."""
    chart = Statechart(table)
    model = chart.model_at(next(iter(roots)))
    result = Walk()
    queue: deque[CallState] = deque()
    for root in roots:
        if root not in result.states:
            result.states.add(root)
            queue.append(root)
    events = occurrences(table)

    def enqueue(after: CallState) -> None:
        if after.depth <= MAX_DEPTH and after not in result.states:
            result.states.add(after)
            queue.append(after)

    while queue:
        s = queue.popleft()
        for o in events:
            result.steps += 1
            common = offer_both(table, chart, model, s, o) if compare else core_only(table, s, o)
            if common is None:
                result.refusals += 1
            else:
                result.taken.add((common[0].index, s.state, o.event))
                enqueue(common[1])
            for alt in alternatives_for(table, s.state, o.event):
                result.alternative_steps += 1
                expected = core_alternative(table, s, o, alt.index)
                if not compare:
                    if expected is not None:
                        result.taken.add((expected[0].index, s.state, o.event))
                        enqueue(expected[1])
                    continue
                chart.place(model, s)
                if expected is None:
                    with pytest.raises(ContractViolation):
                        chart.offer(model, o, alternative=alt.index)
                    continue
                taken = chart.offer(model, o, alternative=alt.index)
                assert taken.index == expected[0].index, (s, o, alt.index)
                assert model.call == expected[1]
                result.taken.add((taken.index, s.state, o.event))
                enqueue(expected[1])
    return result


@functools.cache
def valid_walk(revision: str) -> Walk:
    """Every call state a *valid* start reaches (core only), shared by the tests that need it."""
    table = load_contract().revision(revision)
    return walk(table, starts(table, valid_only=True), compare=False)


@pytest.mark.parametrize("revision", REVISIONS)
def test_statechart_and_core_step_agree_on_every_reachable_step(revision: str) -> None:
    table = load_contract().revision(revision)
    result = walk(table, starts(table, valid_only=False))
    print(
        f"\n[{revision}] compared {result.steps} offers ({result.steps - result.refusals} taken, "
        f"{result.refusals} refused by both) and {result.alternative_steps} MAY offers "
        f"over {len(result.states)} reachable call states"
    )
    # The enumeration really covered the machine: every state was visited, both nested and not.
    assert {s.state for s in result.states} == {s.name for s in table.states}
    assert {s.depth for s in result.states} == set(range(MAX_DEPTH + 1))
    assert result.alternative_steps > 0


@pytest.mark.parametrize("revision", REVISIONS)
def test_every_transition_is_reachable(revision: str) -> None:
    table = load_contract().revision(revision)
    result = valid_walk(revision)
    taken = {index for index, _, _ in result.taken}
    unreachable = [t for t in table.transitions if t.index not in taken]
    listing = "\n".join(
        f"  {t.id}: {'/'.join(t.sources)} --{'/'.join(t.events)}--> {t.dest} [{t.guard_text}]"
        for t in unreachable
    )
    print(f"\n[{revision}] {len(taken)}/{len(table.transitions)} transitions reachable")
    assert not unreachable, f"transitions no path reaches in {revision}:\n{listing}"


@pytest.mark.parametrize("revision", REVISIONS)
def test_statechart_is_the_contract_table(revision: str) -> None:
    """States and edges come from the file: one edge per (transition, source, event) pair the
    transition leaves by (``Transition.pairs``), and the candidates of each (state, event) pair
    in file order."""
    table = load_contract().revision(revision)
    chart = build_statechart(revision)
    assert list(chart.machine.states) == [s.name for s in table.states]
    for spec in table.states:
        node = chart.node(spec.name)
        stage = next(st.name for st in table.contract.stages if spec.name in st.states)
        assert (node.stage, node.action, node.wait, node.final) == (
            stage,
            spec.action,
            spec.wait,
            spec.terminal,
        )
    edges = list(chart.edges())
    assert sorted((e.contract.index, e.source, e.event) for e in edges) == sorted(
        (t.index, s, e) for t in table.transitions for s, e in t.pairs
    )
    for (state, event), candidates in table.candidates.items():
        in_chart = chart.machine.events[event].transitions[state]
        assert [e.contract.index for e in in_chart] == [t.index for t in candidates]
    for e in edges:
        assert e.dest == e.contract.dest
        guards = {c.func.__name__: c.target for c in e.conditions}
        expected = dict(e.contract.guards)
        if e.contract.alternative:
            expected[f"MAY_t{e.contract.index}"] = True
        assert guards == expected
        assert set(dict(e.contract.guards)) <= set(GUARDS)


def test_plain_offers_never_take_a_may_transition() -> None:
    """A MAY transition is in the chart (and its diagrams) but only taken when asked for."""
    chart = build_statechart("seed")
    call = chart.new_call("live", has_agent=True, approval_seam=True)
    call.offer(Occurrence("args_valid"))
    call.offer(Occurrence("caller_abort"))
    state = call.call
    assert call.offer(Occurrence("pre_ask")).id == "approval_wait"  # the reference asks (D1)
    chart.place(call, state)
    skip = load_contract().transition("c1_skips_approval").index
    taken = call.offer(Occurrence("pre_ask"), alternative=skip)
    assert (taken.id, taken.alternative, call.call.outcome) == (
        "c1_skips_approval",
        True,
        "aborted",
    )
    accept = load_contract().transition("post_accept").index
    with pytest.raises(ValueError, match="not an alternative"):
        call.offer(Occurrence("post_accept"), alternative=accept)


def test_the_states_of_a_stage_do_not_share_their_transitions() -> None:
    """Why the chart is flat: a state refuses what only another state of its stage accepts.

    A ``HierarchicalMachine`` with the stage as parent would let ``around_after`` take
    ``body_ok`` through the stage, because ``body`` takes it.
    """
    for revision in REVISIONS:
        table = load_contract().revision(revision)
        chart = build_statechart(revision)
        pairs = [
            (child, other)
            for stage in table.contract.stages
            for child in stage.states
            for other in stage.states
            if other != child
        ]
        assert chart.stage_states("around dispatch · body")[1] == "body"
        checked = 0
        for child, parent in pairs:
            for event in set(table.events_allowed_in(parent)) - set(table.events_allowed_in(child)):
                model = chart.model_at(CallState(state=child))
                with pytest.raises(ContractViolation):
                    model.offer(Occurrence(event))
                chart.release(model)
                checked += 1
        assert checked > 0, "no state handles an event another state of its stage refuses"


def test_a_refused_offer_names_the_events_the_state_allows() -> None:
    chart = build_statechart("revised")
    call = chart.new_call("live")
    with pytest.raises(ContractViolation) as caught:
        call.offer(Occurrence("body_ok"))
    assert caught.value.allowed == ("args_valid", "args_invalid")
    assert call.state == "entry" and call.path == []


@pytest.mark.parametrize("revision", REVISIONS)
def test_a_guard_the_diagrams_leave_out_holds_wherever_it_is_tried(revision: str) -> None:
    """``moot_guards`` (the diagrams drop these from labels) is sound: in every reachable state
    of a call of this revision, each guard it calls moot has the value the transition wants."""
    from toolcancel.contract.core import GUARDS
    from toolcancel.teaching.diagrams import moot_guards

    table = load_contract().revision(revision)
    moot = moot_guards(table)
    reachable = valid_walk(revision).states
    checked = 0
    for t in table.transitions:
        for name, want in moot.get(t.index, ()):
            for s in reachable:
                if s.state in t.sources:
                    assert GUARDS[name](s, Occurrence(t.events[0]), table) is want, (t.index, s)
                    checked += 1
    # R42 ends a pre-aborted call at entry: late_success_aborted's guard cannot fail
    if revision == "revised":
        late = load_contract().transition("late_success_aborted").index
        assert moot[late] == {("aborted_at_entry", False)} and checked > 0
    else:
        assert not any(moot.values())
