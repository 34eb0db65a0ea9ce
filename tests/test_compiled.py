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
import functools
import itertools
from importlib.resources import files
from pathlib import Path

import pytest
from toolcancel import AbortController, compiled, core, registry
from toolcancel.contract import load_contract, load_contract_file
from toolcancel.errors import ContractViolation
from toolcancel.registry import ToolRegistry
from toolcancel.results import ToolResult

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


THROUGH_KEYS = [registry._ALLOWED_UNGUARDED, *registry._THROUGH.values()]


@functools.cache
def every_node(revision: str) -> list[tuple[compiled.Shape, compiled.Node]]:
    """Every reachable node of every shape of ``revision``, built once for the tests below."""
    table = CONTRACT.revision(revision)
    return [
        (shape, node)
        for _, shape in (s for s in SHAPES if s[0] == revision)
        for node in compiled.reachable(compiled.compile_shape(table, shape))
    ]


@pytest.mark.parametrize("revision", CONTRACT.revisions)
@pytest.mark.parametrize("key", THROUGH_KEYS, ids=lambda key: "-".join(key[0::2]))
def test_a_through_step_is_the_edges_it_stands_for(
    revision: str, key: tuple[str, ...]
) -> None:
    """From every reachable state of every shape, each through step the registry takes (pre-
    execute allowed with no guard registered; the body's success, C3, post-execute accepting
    with no hook to run) is exactly its edges, one after the other -- or refused when a step
    lands elsewhere than the next expects, the outcome changes along the way, or a step enters
    draining; the registry then steps one by one."""
    table = CONTRACT.revision(revision)
    taken = refused = 0
    for shape, node in every_node(revision):
        if key[0] not in node.edges:
            continue
        through = node.through(table, key)
        at, chain = node, []
        for i in range(0, len(key), 2):
            edge = at.edges.get(key[i]) if i == 0 or at.state == key[i - 1] else None
            if edge is None or edge.effect == compiled.DRAINING:
                chain = []
                break
            chain.append(edge)
            at = edge.node
        if not chain or any(e.node.outcome != at.outcome for e in chain):
            assert through is None, (shape, node.current)
            refused += 1
            continue
        assert through is not None, (shape, node.current)
        assert through.node is at and through.records == tuple(e.record for e in chain)
        assert through.moved == any(e.effect for e in chain)
        assert through.settles == any(e.effect == compiled.SETTLED for e in chain)
        taken += 1
    assert taken
    if key == registry._ALLOWED_UNGUARDED and revision == "seed":
        assert refused  # a caller abort seen at C1 sends the seed's pre_allow to post


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
