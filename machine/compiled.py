"""The contract compiled for the registry's per-call path: a graph of interned call states.

:mod:`toolcancel.core` interprets the table at every step: it tries the candidates of
``(state, event)`` in file order and evaluates their guards, memoized on the whole
``(CallState, Occurrence)`` pair -- a dozen-field tuple hashed per step.  Here the same decisions
are taken once, when a registry first sees a call of a given shape (revision, caller signal,
agent, approval seam, retry behaviour, number of wrappers): every call state reachable from that
shape's initial state under every occurrence the contract declares (each event with every
combination of the observations it carries) is enumerated through :func:`core.decide`, and each
becomes a :class:`Node` whose ``edges`` map an occurrence -- or, for an event without
observations, its name -- straight to ``(transition, next node, path record, effect)``.  A step
is then one dict lookup.

The pure core stays the oracle: every edge *is* an answer of :func:`core.decide`, and an
occurrence without an edge is handed back to it, so a violation is raised by the core with its
own message.  The graph is finite because the shape fixes the number of wrappers (``depth`` and
``handed`` never exceed it), and ``tests/test_compiled.py`` walks every reachable node of every
shape within the verifier's bounds against the core.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterator
from typing import Any, Final, NamedTuple

from .contract import RevisionContract, Transition
from .core import CallerSignal, CallState, Occurrence, PathStep, decide, initial_state
from .errors import ContractViolation

MOVED: Final = 1
"""Edge effect: the call leaves its state (the registry restarts the state's clock)."""
DRAINING: Final = 2
"""Edge effect: the call enters ``draining`` (the registry starts the drain watchdog)."""
SETTLED: Final = 3
"""Edge effect: the call leaves ``body`` or ``draining`` (the registry stops the watchdog)."""

_BODY_STATES: Final = frozenset({"body", "draining"})


class Edge(NamedTuple):
    """One step the compiled machine can take: the core's answer, and what the driver must do."""

    transition: Transition
    node: Node
    record: PathStep
    effect: int  # 0, MOVED, DRAINING or SETTLED


class Node:
    """One reachable call state and every step out of it."""

    __slots__ = ("caller_aborted", "current", "edges", "outcome", "state")

    def __init__(self, current: CallState) -> None:
        self.current = current
        self.state = current.state
        self.outcome = current.outcome
        self.caller_aborted = current.caller_aborted
        self.edges: dict[Hashable, Edge] = {}


class Shape(NamedTuple):
    """What fixes a call's reachable states at entry."""

    caller: CallerSignal
    has_agent: bool
    approval_seam: bool
    retry: str
    wrappers: int


def alphabet(table: RevisionContract) -> tuple[Occurrence, ...]:
    """Every occurrence the contract declares: each event with every combination of the
    observations it carries (``data`` in contract.toml), the others at their defaults."""
    out: list[Occurrence] = []
    for event in table.events:
        for values in itertools.product((False, True), repeat=len(event.data)):
            data: dict[str, Any] = dict(zip(event.data, values, strict=True))
            out.append(Occurrence(event.name, **data))
    return tuple(out)


def _effect(before: str, after: str) -> int:
    if before == after:
        return 0
    if after == "draining":
        return DRAINING
    if before in _BODY_STATES:
        return SETTLED
    return MOVED


def compile_shape(table: RevisionContract, shape: Shape) -> Node:
    """The initial node of ``shape``, with every node reachable from it built."""
    start = initial_state(
        table,
        shape.caller,
        has_agent=shape.has_agent,
        approval_seam=shape.approval_seam,
        retry=shape.retry,
        wrappers=shape.wrappers,
    )
    letters = alphabet(table)
    nodes: dict[CallState, Node] = {start: Node(start)}
    todo = [start]
    while todo:
        s = todo.pop()
        node = nodes[s]
        for o in letters:
            try:
                t, after = decide(table, s, o)
            except ContractViolation:
                continue
            nxt = nodes.get(after)
            if nxt is None:
                nxt = nodes[after] = Node(after)
                todo.append(after)
            record = PathStep(s.state, o.event, after.state, t.index, t.rules, after.outcome, o)
            edge = Edge(t, nxt, record, _effect(s.state, after.state))
            node.edges[o] = edge
            if o == Occurrence(o.event):
                node.edges[o.event] = edge  # a plain occurrence is also found by its name
    return nodes[start]


def reachable(start: Node) -> Iterator[Node]:
    """Every node reachable from ``start``, each once."""
    seen = {id(start)}
    todo = [start]
    while todo:
        node = todo.pop()
        yield node
        for edge in node.edges.values():
            if id(edge.node) not in seen:
                seen.add(id(edge.node))
                todo.append(edge.node)


def initial_node(table: RevisionContract, shape: tuple[CallerSignal, bool, bool, str, int]) -> Node:
    """The compiled initial node of ``shape`` (a :class:`Shape`, or the plain tuple of its
    fields), built on first use and kept with the table."""
    compiled = table.compiled
    node = compiled.get(shape)
    if node is None:
        node = compiled[shape] = compile_shape(table, Shape(*shape))
    assert isinstance(node, Node)
    return node


class CompiledMachine:
    """A call's compiled machine and the path it has taken (:class:`core.CallMachine`'s
    interface: ``current``, ``state``, ``outcome``, ``path``, ``offer``)."""

    __slots__ = ("node", "path", "table")

    def __init__(
        self, table: RevisionContract, shape: tuple[CallerSignal, bool, bool, str, int]
    ) -> None:
        self.table = table
        self.node = initial_node(table, shape)
        self.path: list[PathStep] = []

    @property
    def current(self) -> CallState:
        return self.node.current

    @property
    def state(self) -> str:
        return self.node.state

    @property
    def outcome(self) -> str | None:
        return self.node.outcome

    def edge(self, key: Hashable) -> Edge:
        """The step for ``key`` (an occurrence, or a plain event's name) out of the current
        node; no edge means the core decides, and it raises the violation."""
        edge = self.node.edges.get(key)
        if edge is None:
            o = key if isinstance(key, Occurrence) else Occurrence(str(key))
            decide(self.table, self.node.current, o)  # raises ContractViolation
            raise AssertionError(f"the compiled contract lacks a step the core takes: {o}")
        return edge

    def offer(self, o: Occurrence | str) -> Transition:
        """Take the step for ``o`` and record it."""
        edge = self.edge(o)
        self.node = edge.node
        self.path.append(edge.record)
        return edge.transition
