"""The contract's table as a ``transitions`` statechart: for teaching, and as a second opinion.

:mod:`toolcancel.contract.core` steps a call by reading the compiled table directly; that is the hot
path (one ``transitions`` model per call measured ~167 us against a ~6 us task switch).  This module
builds the *same* table into a :class:`transitions.Machine` -- every state, every transition, every
guard -- so that the contract can be explored with a well-known statechart library, and so that a
test can prove two independent engines agree on every enumerated step (``test_statechart.py``).
Nothing here is written by hand: states, triggers, conditions and effects all come from
``contract.toml`` through :class:`~toolcancel.contract.loader.RevisionContract`.

How the contract maps onto ``transitions``:

* Each contract state is a ``transitions`` state (a :class:`ContractNode`, which also carries
  the contract's ``action``, ``wait`` and ``terminal`` fields, and the stage that holds it).
  ``materialized`` is a *final* state.
* Each contract transition becomes one ``transitions`` transition per event it lists (a
  :class:`ContractEdge`, which remembers the contract transition it stands for).  Edges are added
  in file order, so ``transitions`` tries the candidates of a (state, event) pair in file order --
  the contract's own rule.
* Guards are conditions (``!name`` becomes an ``unless``), each evaluated by the one implementation
  in :data:`toolcancel.contract.core.GUARDS` against the model's
  :class:`~toolcancel.contract.core.CallState` and the :class:`~toolcancel.contract.core.Occurrence`
  being offered.
* The effect is an ``after`` callback running :func:`toolcancel.contract.core.apply`, so the model's
  ``call`` and the machine's ``state`` attribute move together.
* *Alternatives* (the contract's MAY transitions) are present -- they are part of the contract and
  of its diagrams -- but gated by one more condition: an alternative applies only when the offer
  names it (``offer(o, alternative=index)``).  An ordinary offer therefore takes exactly the
  reference's transition, and an explorer can still walk every MAY branch at its place in the
  candidate order.
* An offer no transition accepts raises :class:`~toolcancel.contract.errors.ContractViolation`, like
  :func:`toolcancel.contract.core.step`.

Why a plain :class:`transitions.Machine` and not ``HierarchicalMachine``: in a hierarchical machine
an event the sub-state does not handle bubbles up to its parent.  The contract has no such
inheritance: candidates are indexed by the exact state, and a stage (``[[stage]]``) only groups
states for teaching and drawing.  ``body`` handles ``body_ok`` but ``around_after``, in the
same stage, must refuse it -- a ``HierarchicalMachine`` with the stage as parent would accept it
through the stage and disagree with the contract.  Worse, a stage is not itself a state a call can
be in, and the nested machine's name separator (``_``) collides with the contract's state names.
So the grouping lives where the contract puts it, in its stages (:attr:`ContractNode.stage`,
:meth:`Statechart.stage_states`) and the diagrams' clusters; the stepping stays flat and exact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

try:
    from transitions import Machine, MachineError, State
    from transitions import Transition as _TransitionsEdge
    from transitions.core import EventData
except ModuleNotFoundError as exc:  # not a run-time dependency: only this module needs it
    raise ModuleNotFoundError(
        "toolcancel.teaching.statechart needs the statechart extra: "
        "pip install './toolcancel[statechart]', where ./toolcancel is your clone of toolcancel",
        name=exc.name,
    ) from exc

from ..contract.core import (
    GUARDS,
    CallerSignal,
    CallState,
    Occurrence,
    PathStep,
    apply,
    initial_state,
)
from ..contract.errors import ContractViolation
from ..contract.loader import Contract, RevisionContract, load_contract
from ..contract.loader import State as ContractStateSpec
from ..contract.loader import Transition as ContractTransition

__all__ = [
    "CallModel",
    "ContractEdge",
    "ContractNode",
    "Statechart",
    "build_statechart",
]


class ContractNode(State):
    """A ``transitions`` state that keeps the contract's description of itself."""

    def __init__(self, spec: ContractStateSpec, stage: str | None = None) -> None:
        super().__init__(spec.name, final=spec.terminal)
        self.spec = spec
        self.stage = stage
        """The name of the contract's stage that holds this state (None: the contract has none)."""

    @property
    def action(self) -> str:
        return self.spec.action

    @property
    def wait(self) -> bool:
        return self.spec.wait


class ContractEdge(_TransitionsEdge):
    """A ``transitions`` transition that knows which contract transition it stands for."""

    def __init__(
        self,
        source: str,
        dest: str | None,
        conditions: Any = None,
        unless: Any = None,
        before: Any = None,
        after: Any = None,
        prepare: Any = None,
        *,
        contract: ContractTransition,
        event: str,
    ) -> None:
        super().__init__(source, dest, conditions, unless, before, after, prepare)  # type: ignore[arg-type]
        self.contract = contract
        self.event = event

    def __repr__(self) -> str:
        alt = " MAY" if self.contract.alternative else ""
        return (
            f"<ContractEdge t{self.contract.index}{alt} {self.source} --{self.event}--> "
            f"{self.dest or '(internal)'}>"
        )


class _ContractMachine(Machine):
    transition_cls = ContractEdge


class CallModel:
    """One call stepped by the statechart.

    ``transitions`` keeps :attr:`state` (its model attribute); the ``after`` callbacks keep
    :attr:`call`, the :class:`~toolcancel.contract.core.CallState` the guards read.  The two always
    name the same state -- a test checks it after every step.
    """

    state: str
    """Set and updated by ``transitions``."""

    def __init__(self, chart: Statechart, call: CallState) -> None:
        self.chart = chart
        self.call = call
        self.occurrence: Occurrence | None = None
        self.chosen: int | None = None
        self.taken: ContractTransition | None = None
        self.path: list[PathStep] = []

    def offer(self, o: Occurrence, *, alternative: int | None = None) -> ContractTransition:
        """Offer ``o``; see :meth:`Statechart.offer`."""
        return self.chart.offer(self, o, alternative=alternative)


def _guard_condition(name: str, table: RevisionContract) -> Callable[[EventData], bool]:
    fn = GUARDS[name]

    def check(event: EventData) -> bool:
        model = cast(CallModel, event.model)
        assert model.occurrence is not None, "a guard ran outside Statechart.offer()"
        return fn(model.call, model.occurrence, table)

    check.__name__ = check.__qualname__ = name
    return check


def _chosen_condition(t: ContractTransition) -> Callable[[EventData], bool]:
    def chosen(event: EventData) -> bool:
        return cast(CallModel, event.model).chosen == t.index

    chosen.__name__ = chosen.__qualname__ = f"MAY_t{t.index}"
    return chosen


def _effect(t: ContractTransition) -> Callable[[EventData], None]:
    def take(event: EventData) -> None:
        model = cast(CallModel, event.model)
        assert model.occurrence is not None
        model.call = apply(t, model.call, model.occurrence)
        model.taken = t

    take.__name__ = take.__qualname__ = f"apply_t{t.index}"
    return take


class Statechart:
    """The ``transitions`` machine of one contract revision, plus the models it steps."""

    def __init__(self, table: RevisionContract) -> None:
        self.table = table
        stages = {name: st.name for st in table.contract.stages for name in st.states}
        self.machine = _ContractMachine(
            model=None,
            states=[ContractNode(s, stages.get(s.name)) for s in table.states],
            initial=table.initial,
            auto_transitions=False,
            send_event=True,
            ignore_invalid_triggers=False,
            name=f"toolcancel[{table.name}]",
        )
        conditions = {g.name: _guard_condition(g.name, table) for g in table.contract.guards}
        for t in table.transitions:
            wanted = [conditions[name] for name, want in t.guards if want]
            if t.alternative:
                wanted.append(_chosen_condition(t))
            refused = [conditions[name] for name, want in t.guards if not want]
            for event in t.events:
                self.machine.add_transition(
                    event,
                    [source for source, by in t.pairs if by == event],
                    t.dest,
                    conditions=list(wanted),
                    unless=list(refused),
                    after=[_effect(t)],
                    contract=t,
                    event=event,
                )

    # -- building and placing models -------------------------------------------------------------

    def new_call(
        self,
        caller: CallerSignal,
        *,
        has_agent: bool = False,
        approval_seam: bool = False,
    ) -> CallModel:
        """A fresh call at entry, registered with the machine (see :func:`core.initial_state`)."""
        return self.model_at(
            initial_state(self.table, caller, has_agent=has_agent, approval_seam=approval_seam)
        )

    def model_at(self, call: CallState) -> CallModel:
        """A model registered with the machine and placed in ``call``."""
        model = CallModel(self, call)
        self.machine.add_model(model, initial=call.state)
        return model

    def place(self, model: CallModel, call: CallState) -> None:
        """Move an existing model to ``call`` (used to explore many states with one model)."""
        self.machine.set_state(call.state, model)
        model.call = call

    def release(self, model: CallModel) -> None:
        """Unregister a model, so the machine stops referring to it."""
        self.machine.remove_model(model)

    # -- stepping -----------------------------------------------------------------------------

    def offer(
        self, model: CallModel, o: Occurrence, *, alternative: int | None = None
    ) -> ContractTransition:
        """Trigger ``o.event`` on ``model`` and return the contract transition taken.

        Without ``alternative`` this takes the reference's transition (every MAY transition stays
        shut).  With ``alternative=index`` that one MAY transition is open too: it is taken if it
        applies and no earlier candidate does -- a MAY transition listed after an applying one
        cannot be taken, just as the candidate order says.  The returned transition tells which
        was taken.  Raises :class:`ContractViolation` when nothing applies.
        """
        if alternative is not None and not any(
            t.index == alternative and t.alternative for t in self.table.transitions
        ):
            raise ValueError(
                f"transition #{alternative} is not an alternative of revision {self.table.name}"
            )
        before = model.call
        if model.state != before.state:
            raise AssertionError(f"model drifted: {model.state!r} vs {before.state!r}")
        model.occurrence = o
        model.chosen = alternative
        model.taken = None
        try:
            event = self.machine.events.get(o.event)
            fired = event is not None and event.trigger(model)
        except MachineError:
            fired = False
        finally:
            model.occurrence = None
            model.chosen = None
        taken = model.taken
        if not fired or taken is None:
            raise ContractViolation(before.state, o.event, self.events_allowed_in(before.state))
        after = model.call
        model.path.append(
            PathStep(before.state, o.event, after.state, taken.index, taken.rules, after.outcome, o)
        )
        return taken

    # -- introspection ------------------------------------------------------------------------

    def events_allowed_in(self, state: str) -> tuple[str, ...]:
        """The triggers ``transitions`` knows for ``state``, in the contract's event order."""
        known = set(self.machine.get_triggers(state))
        return tuple(e.name for e in self.table.events if e.name in known)

    def edges(self) -> Iterator[ContractEdge]:
        """Every ``transitions`` edge, grouped by trigger, each in candidate order."""
        for event in self.machine.events.values():
            for edges in event.transitions.values():
                yield from cast(Sequence[ContractEdge], edges)

    def node(self, name: str) -> ContractNode:
        return cast(ContractNode, self.machine.get_state(name))

    def stage_states(self, stage: str) -> tuple[str, ...]:
        """The states the contract's stage named ``stage`` holds, in pipeline order."""
        return next((st.states for st in self.table.contract.stages if st.name == stage), ())

    def __repr__(self) -> str:
        return f"<Statechart {self.table.name}: {sum(1 for _ in self.edges())} edges>"


def build_statechart(revision: str | None = "seed", contract: Contract | None = None) -> Statechart:
    """The ``transitions`` statechart of one revision of the shipped (or the given) contract.

    Each call builds a new machine (with no models): it is cheap next to what it is for, and it
    keeps charts of edited contract copies (``load_contract_file``) independent.
    """
    return Statechart((contract or load_contract()).revision(revision))
