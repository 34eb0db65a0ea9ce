"""The contract compiled for the registry's per-call path: a graph of interned call states.

:mod:`toolcancel.contract.core` interprets the table at every step: it tries the candidates of
``(state, event)`` in file order and evaluates their guards, memoized on the whole
``(CallState, Occurrence)`` pair -- a dozen-field tuple hashed per step.  Here each decision is
taken once per call *shape* (revision, caller signal, agent, approval seam, retry behaviour,
number of wrappers): the first call that takes a step asks :func:`core.decide` and keeps the
answer as an edge of a :class:`Node` -- an interned call state -- mapping the occurrence (or, for
an event without observations, its name) straight to ``(transition, next node, path record,
effect)``.  Every later call of that shape takes the step with one dict lookup.

The graph is built as calls walk it, never enumerated ahead: a table that is not the contract's
(``verify --spec-mutants`` and the explorer drive the registry with perturbed ones) may reach
states without end, and only the states calls visit are built.  The pure core stays the oracle:
every edge *is* an answer of :func:`core.decide`, and a step the core refuses raises its own
violation and is not kept.  ``tests/test_compiled.py`` builds every node of every shape within
the verifier's bounds (:func:`compile_shape`) and compares each step with the core.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterator
from typing import Any, Final, NamedTuple

from .core import CallerSignal, CallState, Occurrence, PathStep, decide, initial_state
from .errors import ContractViolation
from .loader import RevisionContract, Transition
from .trace import line_template

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
    line: dict[str, Any]
    """The step's trace line (:func:`~toolcancel.contract.trace.line_template`, call id blank): the
    occurrence's ``event`` and the observations its event declares (``data`` in contract.toml).
    Built once; the registry copies it and fills in the call."""
    cancels: str | None
    """The cancellation outcome this step publishes over whatever result the call held (its
    transition names one: which results it may replace is the table's, ``publishes_over``), or
    ``None``.  The registry builds that outcome's result and decides nothing itself."""


class Through(NamedTuple):
    """Two steps a driver takes back to back when the first leads to the state it expects and no
    code of anyone else's can run between them: taken as one (one lookup, one clock reading)."""

    node: Node
    records: tuple[PathStep, PathStep]
    moved: bool  # the call changed state: its clock restarts
    lines: tuple[dict[str, Any], dict[str, Any]]  # the two steps' trace lines (Edge.line)
    cancels: str | None  # the cancellation either step publishes (Edge.cancels)


class Node:
    """One reachable call state and the steps out of it taken so far.

    ``interned`` is the node of every state of the shape built so far (shared by all of them):
    a step to a state already seen leads to its node, so a call shape's graph is built once.
    """

    __slots__ = ("caller_aborted", "current", "edges", "interned", "outcome", "state", "throughs")

    def __init__(self, current: CallState, interned: dict[CallState, Node]) -> None:
        self.current = current
        self.state = current.state
        self.outcome = current.outcome
        self.caller_aborted = current.caller_aborted
        self.edges: dict[Hashable, Edge] = {}
        self.throughs: dict[tuple[str, str, str], Through | None] = {}  # by key, as taken
        self.interned = interned
        interned[current] = self

    def expand(self, table: RevisionContract, key: Hashable) -> Edge:
        """The core's step for ``key`` (an occurrence, or a plain event's name), kept as an
        edge; a step the core refuses raises its ``ContractViolation`` and is not kept."""
        o = key if isinstance(key, Occurrence) else Occurrence(str(key))
        t, after = decide(table, self.current, o)
        nxt = self.interned.get(after) or Node(after, self.interned)
        record = PathStep(self.state, o.event, after.state, t.index, t.rules, after.outcome, o)
        declared = next((e.data for e in table.events if e.name == o.event), ())
        line = line_template({"event": o.event, **{name: getattr(o, name) for name in declared}})
        cancels = t.outcome if t.outcome in table.cancellations else None
        edge = Edge(t, nxt, record, _effect(self.state, after.state), line, cancels)
        self.edges[o] = edge
        if o == Occurrence(o.event):
            self.edges[o.event] = edge  # a plain occurrence is also found by its name
        return edge

    def through(self, table: RevisionContract, key: tuple[str, str, str]) -> Through | None:
        """``key`` is ``(first, then, second)``: the step on ``first`` and, when it leads to state
        ``then``, the step on ``second``, as one :class:`Through` -- or ``None`` when ``first``
        leads elsewhere, changes the outcome the second step leaves (a driver acting on the
        outcome after both acts as it would have after either), or either step starts or stops
        the drain watchdog, or the core refuses either (a perturbed table): the driver then
        takes them one by one.  Both are edges of this graph: nothing is decided here.  Kept
        in ``throughs`` under ``key``."""
        if key in self.throughs:
            return self.throughs[key]
        first, then, second = key
        found = None
        try:
            a = self.edges.get(first) or self.expand(table, first)
            if a.node.state == then and a.effect in (0, MOVED):
                b = a.node.edges.get(second) or a.node.expand(table, second)
                if b.effect in (0, MOVED) and a.node.outcome == b.node.outcome:
                    found = Through(
                        b.node,
                        (a.record, b.record),
                        bool(a.effect or b.effect),
                        (a.line, b.line),
                        b.cancels or a.cancels,
                    )
        except ContractViolation:  # stepping one by one, the driver meets it where it is
            pass
        self.throughs[key] = found
        return found


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
    """The initial node of ``shape``, with every node reachable from it built (the registry
    builds only the steps calls take; a test builds them all to compare with the core)."""
    start = Node(_initial(table, shape), {})
    letters = alphabet(table)
    todo = [start]
    while todo:
        node = todo.pop()
        for o in letters:
            if o in node.edges:
                continue
            known = len(node.interned)
            try:
                edge = node.expand(table, o)
            except ContractViolation:
                continue
            if len(node.interned) > known:
                todo.append(edge.node)
    return start


def _initial(table: RevisionContract, shape: Shape) -> CallState:
    return initial_state(
        table,
        shape.caller,
        has_agent=shape.has_agent,
        approval_seam=shape.approval_seam,
        retry=shape.retry,
        wrappers=shape.wrappers,
    )


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
        node = compiled[shape] = Node(_initial(table, Shape(*shape)), {})
    assert isinstance(node, Node)
    return node
