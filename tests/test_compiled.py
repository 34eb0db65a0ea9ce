"""The compiled contract steps exactly like the interpreted core, from every reachable state.

For every call shape within the verifier's bounds (both revisions, every caller kind, agent and
approval seam or not, every retry behaviour, 0 to 3 wrappers), the states reachable from the
shape's initial state are enumerated independently here, by a worklist search through
:func:`core.decide` over the contract's whole occurrence alphabet -- the graph is finite, so the
search is exhaustive -- and for each state and each occurrence the compiled node's edge must be
the core's answer: same transition, same next state, same path record, or no edge where the core
raises a violation.
"""

from __future__ import annotations

import asyncio
import itertools
from importlib.resources import files
from pathlib import Path

import pytest
from toolcancel import AbortController
from toolcancel.contract import compiled, core
from toolcancel.contract.errors import ContractViolation
from toolcancel.contract.loader import load_contract, load_contract_file
from toolcancel.contract.results import ToolResult
from toolcancel.runtime import driver
from toolcancel.runtime.registry import ToolRegistry

CONTRACT = load_contract()
SHAPES = [
    (revision, compiled.Shape(caller, agent, seam, retry, wrappers))
    for revision in CONTRACT.revisions
    for caller, agent, seam, retry, wrappers in itertools.product(
        ("none", "live", "aborted"), (False, True), (False, True), CONTRACT.retry_names, range(4)
    )
]


@pytest.mark.parametrize("revision", CONTRACT.revisions)
def test_compiled_and_interpreted_machines_step_alike_from_every_reachable_state(
    revision: str,
) -> None:
    table = CONTRACT.revision(revision)
    letters = compiled.alphabet(table)
    states = edges = 0
    for _, shape in (s for s in SHAPES if s[0] == revision):
        nodes = {n.current: n for n in compiled.reachable(compiled.compile_shape(table, shape))}
        start = core.initial_state(
            table, shape.caller, has_agent=shape.has_agent, approval_seam=shape.approval_seam,
            retry=shape.retry, wrappers=shape.wrappers,
        )  # fmt: skip
        seen, todo = {start}, [start]
        while todo:  # the interpreted machine's reachable states
            s = todo.pop()
            node = nodes[s]
            assert (node.state, node.outcome) == (s.state, s.outcome)
            for o in letters:
                plain = o == core.Occurrence(o.event)
                try:
                    t, after = core.decide(table, s, o)
                except ContractViolation:
                    assert o not in node.edges and not (plain and o.event in node.edges), (s, o)
                    continue
                edge = node.edges[o]
                assert edge.transition is t and edge.node.current == after, (shape, s, o)
                assert edge.record == core._recorded_step(table, s, o)[2], (shape, s, o)
                assert not plain or node.edges[o.event] is edge
                edges += 1
                if after not in seen:
                    seen.add(after)
                    todo.append(after)
        assert seen == set(nodes), shape  # no compiled state the core cannot reach
        states += len(nodes)
    assert states > 1000 and edges > states  # the walk really covered the graphs


def test_the_alphabet_is_every_event_with_every_combination_of_its_data() -> None:
    table = CONTRACT.revision("seed")
    letters = compiled.alphabet(table)
    assert {o.event for o in letters} == {e.name for e in table.events}
    assert len(letters) == sum(2 ** len(e.data) for e in table.events)
    assert len(set(letters)) == len(letters)


def test_an_occurrence_the_contract_refuses_is_refused_by_the_core_with_its_message() -> None:
    table = CONTRACT.revision("seed")
    node = compiled.initial_node(table, ("live", False, False, "reenter", 0))
    with pytest.raises(ContractViolation) as refused:
        node.expand(table, "body_ok")  # still in entry
    with pytest.raises(ContractViolation) as expected:
        core.decide(table, node.current, core.Occurrence("body_ok"))
    assert str(refused.value) == str(expected.value)
    assert "body_ok" not in node.edges and node.state == "entry"


@pytest.mark.parametrize("revision", CONTRACT.revisions)
@pytest.mark.parametrize("key", [driver._ALLOWED_UNGUARDED, driver._SETTLED_ACCEPTED])
def test_a_through_step_is_the_two_edges_it_stands_for(
    revision: str, key: tuple[str, str, str]
) -> None:
    """From every reachable state of every shape, each through step the registry takes (pre-
    execute allowed with no guard registered; C3 passed with no post-execute hook to run) is
    exactly its two edges -- or refused when the first leads elsewhere, changes the outcome the
    second leaves, or either touches the drain watchdog; the registry then steps one by one."""
    table = CONTRACT.revision(revision)
    first, then, second = key
    taken = refused = 0
    for _, shape in (s for s in SHAPES if s[0] == revision):
        for node in compiled.reachable(compiled.compile_shape(table, shape)):
            if first not in node.edges:
                continue
            through = node.through(table, key)
            a = node.edges[first]
            b = a.node.edges.get(second) if a.node.state == then else None
            if (
                b is None
                or not {a.effect, b.effect} <= {0, compiled.MOVED}
                or a.node.outcome != b.node.outcome
            ):
                assert through is None, (shape, node.current)
                refused += 1
                continue
            assert through is not None
            assert through.node is b.node and through.records == (a.record, b.record)
            assert through.moved == bool(a.effect or b.effect)
            taken += 1
    assert taken  # (refusals: the seed's caller abort seen at C1 sends pre_allow to post)
    assert refused or revision == "revised" or key == driver._SETTLED_ACCEPTED


@pytest.mark.parametrize("revision", CONTRACT.revisions)
def test_a_registry_call_records_the_path_the_core_replays(revision: str) -> None:
    """The registry runs the compiled machine; replaying its path through the core lands in the
    same states with the same transitions."""

    async def body(args: object, call: object) -> list[object]:
        return []

    reg = ToolRegistry(revision=revision)
    reg.register("t", body)

    async def main() -> tuple[ToolResult, tuple[core.PathStep, ...]]:
        pending = reg.execute("t", {}, signal=AbortController().signal)
        return await pending, pending.view.path

    result, path = asyncio.run(main())
    assert not result.is_error and path
    table = CONTRACT.revision(revision)
    state = core.initial_state(table, "live", wrappers=0)
    for step in path:
        t, state = core.decide(table, state, step.occurrence)
        assert (t.index, state.state, state.outcome) == (step.transition, step.dest, step.outcome)
    assert state.state == "materialized"


def test_a_call_builds_only_the_steps_it_takes() -> None:
    """The graph grows as calls walk it, never enumerated ahead: a perturbed table (the spec
    mutants', the explorer's) may reach states without end, and must not make a call hang."""

    async def body(args: object, call: object) -> list[object]:
        return []

    own = load_contract_file(Path(str(files("toolcancel.spec") / "contract.toml")))
    reg = ToolRegistry(revision="seed", contract=own)  # a table of its own: no graph yet
    reg.register("t", body)
    asyncio.run(reg.execute("t", {}, signal=AbortController().signal))
    (start,) = own.revision("seed").compiled.values()
    built = sum(1 for _ in compiled.reachable(start))
    shape = compiled.Shape("live", False, False, "reenter", 0)
    whole = compiled.compile_shape(own.revision("seed"), shape)
    everything = sum(1 for _ in compiled.reachable(whole))
    assert built == len(start.interned) < everything / 4
