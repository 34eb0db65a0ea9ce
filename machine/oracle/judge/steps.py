"""The step checks: which rule a call's next trace line breaks in one state the contract allows.

The trace checker (:mod:`toolcancel.oracle.judge.checker`) replays a call's lines through the
machine as
an automaton over every state the contract allows the call to be in (a :class:`Branch` each).
Before a branch takes a line, it asks the checks registered here for that kind of line
(:func:`judge_step`): the first that finds a problem kills the branch with its rule and
explanation (a :class:`Death`); where every branch dies, the first branch's death is the
violation.  So the automaton only replays: what each line observably means -- the body's
phases, the stages, the fused signal, a body started where none was invoked, an event the
contract has no transition for -- is decided here, each rule once, under its rule id.

The checks are the one registry's ``step`` vantage (:mod:`toolcancel.oracle.judge.registry`).
A check registered under :data:`CONTRACT` cites the rule the contract's data gives the
transition concerned (a guard's rule, the transition that set the outcome, the one that would
have gone elsewhere), so no rule id is restated for it.  The result line's checks are in
:mod:`toolcancel.oracle.judge.results`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, Final, NamedTuple

from ...contract.core import GUARDS, CallState, Occurrence
from ...contract.loader import Contract, RevisionContract, Transition
from .registry import CONTRACT, STEP, check, on, rule_of


class Death(NamedTuple):
    """Why one possible state of the call cannot take an event: a rule id and a sentence."""

    rule: str
    explanation: str


# Body phases: where the call stands with respect to a body the contract invoked.
IDLE, DISPATCHED, DISPATCHED_ABORTED, FUSED, RUNNING, SETTLED_OK, SETTLED_RAISE = range(7)
PHASE_TEXT: Final = {
    DISPATCHED: "The contract invoked the body at base dispatch",
    DISPATCHED_ABORTED: "The contract invoked the body at base dispatch",
    FUSED: "The body's fused signal was built",
    RUNNING: "The body is running",
    SETTLED_OK: "The body settled by returning",
    SETTLED_RAISE: "The body settled by raising",
}
SETTLED: Final = frozenset({SETTLED_OK, SETTLED_RAISE})
CANCELLATION: Final = frozenset({"caller_abort", "fused_abort"})
STAGE_STATE: Final = {
    "pre": "pre_policy",
    "approval": "approval",
    "guards": "guards",
    "post": "post_policy",
}
"""The machine state in which each hook stage runs."""
BODY_REPORTS: Final = frozenset({"body_ok", "body_raise"})
ORDER: Final = (
    "a call goes through pre-execute, approval (for ask), guards, the around waterfall (base "
    "dispatch, the body), post-execute and publication, in that order (R10)"
)


class Branch(NamedTuple):
    """One state the call may be in: the machine's state plus what the trace rules track.

    ``cs``, ``phase``, ``stage`` and ``free`` decide what is accepted next; the other fields only
    say where the current state and outcome came from, for explanations.
    """

    cs: CallState
    phase: int = IDLE
    stage: str | None = None  # a stage that started and has not decided yet
    free: bool = False  # post-execute accepted since the outcome was set: content may differ
    decided: int = -1  # the transition that set the current outcome
    decided_event: str = ""
    decided_in: str = ""  # the state that transition left: where the result was produced
    decided_over: str | None = None  # the outcome the call held before it (None: no result)
    last: int = -1  # the last transition that changed the state
    before: CallState | None = None  # the state that transition left
    last_event: Occurrence | None = None


class Replay:
    """What the step checks know of the contract revision a call is replayed against: its
    transitions, outcomes and rules, and the contract's own attribution of a refused step."""

    def __init__(self, table: RevisionContract) -> None:
        self.table = table
        self.contract: Contract = table.contract
        # The seed reads "cancelled after entry", the revised contract "caller aborted": whichever
        # predicate this revision's transitions use is the one that forbids a late start (R28).
        used = {g for t in table.transitions for g, _ in t.guards}
        self.cancelled = GUARDS[
            "cancelled_after_entry" if "cancelled_after_entry" in used else "caller_aborted"
        ]
        self.rule_ids = frozenset(r.id for r in table.rules)
        self.revised = "R44" in self.rule_ids  # the revised error shape {message, info?}
        self._titles = {r.id: r.title for r in self.contract.rules}
        self._summaries = {r.id: r.summary.rstrip(".") for r in self.contract.rules}
        self.shape_rules = frozenset(o.rule for o in table.outcomes)
        self.specific = frozenset(
            r.id for r in table.rules if r.revisions != frozenset(self.contract.revisions)
        )
        self.outcomes = {o.name: o for o in table.outcomes}
        # contract.toml lists the states in pipeline order: where each lies along the pipeline
        # tells which states a decision jumped over.
        self._pipeline = {st.name: i for i, st in enumerate(table.states)}
        self.transitions = {t.index: t for t in table.transitions}
        # Where base dispatch invokes the body: the first state its reports (body_ok, body_raise)
        # are taken in; the states before it, once entry has captured the caller's signal, are
        # those a caller's cancellation must keep a body out of (before checkpoint C2); those
        # after the last state that awaits anyone's code hold a result decided for publication.
        first_body = min(
            self._pipeline[s]
            for t in table.transitions
            if BODY_REPORTS & set(t.events)
            for s in t.sources
        )
        self.body_state = table.states[first_body].name
        self.before_dispatch = frozenset(
            st.name for st in table.states[:first_body] if not st.initial
        )
        last_wait = max(i for i, st in enumerate(table.states) if st.wait)
        self.decided_states = frozenset(st.name for st in table.states[last_wait + 1 :])
        self.cancellations = frozenset(o.name for o in table.outcomes if o.cancellation)
        self.code_rule = next(
            (o.rule for o in table.outcomes if o.cancellation and o.rule in self.specific), None
        )
        """The rule of the cancellation outcome only this revision has: where a call gets one
        cancellation code or the other, it decides which (None: one cancellation, one code)."""
        self.patterns: dict[Any, re.Pattern[str]] = {}  # the registry's texts, per builder
        self.asked: dict[tuple[str, Branch], tuple[tuple[str, StepJudge], ...]] = {}
        """Per kind of step and branch: (rule, function) of the step checks whose antecedent
        holds there (:func:`judge_step`)."""

    def title(self, rule: str) -> str:
        return self._titles.get(rule, rule)

    def summary(self, rule: str) -> str:
        """The rule's one-line summary, without its final period (it is quoted mid-sentence)."""
        return self._summaries.get(rule, "")

    def guard_rule(self, guard: str) -> str:
        return next(g.rule for g in self.contract.guards if g.name == guard)

    def guard_doc(self, guard: str) -> str:
        return next(g.doc for g in self.contract.guards if g.name == guard)

    def first_rule(self, t: Transition) -> str:
        """The transition's most specific rule: the first one that is not only a result shape."""
        return next((r for r in t.rules if r not in self.shape_rules), t.rules[0])

    def skipped(self, b: Branch, states: Iterable[str]) -> Transition | None:
        """The transition that set the call's outcome, if it jumped over one of ``states``
        (the call was sent past the place where the event at hand could happen)."""
        t = self.transitions.get(b.decided)
        if t is None or t.dest is None:
            return None
        at = self._pipeline
        low = min(at[s] for s in t.sources)
        return t if any(low < at[s] < at[t.dest] for s in states) else None

    def final_route(self, b: Branch) -> bool:
        if b.cs.outcome in ("post_error", "serialization_error"):
            return True
        t = self.transitions.get(b.decided)
        return t is not None and t.dest == "finalizing" and "post_policy" not in t.sources

    def other_path(self, b: Branch, reaches: Callable[[str], bool]) -> Death | None:
        """The event fits a state the previous event leads to only under other conditions: cite
        the transition that would have gone there, with the conditions that did not hold (the
        most specific why).  Of several, the one with the fewest failing conditions wins."""
        if b.before is None or b.last_event is None:
            return None
        prev, before = b.last_event, b.before
        best: tuple[int, Transition, list[str]] | None = None
        for t in self.table.candidates.get((before.state, prev.event), ()):
            if t.index == b.last or t.dest is None or not reaches(t.dest):
                continue
            failing = [
                ("" if want else "not ") + g
                for g, want in t.guards
                if GUARDS[g](before, prev, self.table) is not want
            ]
            if not failing and t.alternative:
                continue  # a MAY point: the checker follows it as a possible state of its own
            if best is None or len(failing) < best[0]:
                best = (len(failing), t, failing)
        if best is None:
            return None
        _, t, failing = best
        if not failing:  # it applied, but the transition the call took comes first
            taken = self.transitions[b.last]
            rule = self.first_rule(taken)
            when = f"when {taken.guard_text}" if taken.guard_text else "unconditionally"
            return Death(
                rule,
                f"After {prev.event} in {before.state} the contract goes to {taken.dest} {when} "
                f"({rule}: {self.summary(rule)}), before it would consider {t.dest}, where this "
                "event can happen.",
            )
        rule = self.first_rule(t)
        return Death(
            rule,
            f"After {prev.event} in {before.state} the contract goes to {t.dest} (where this "
            f"event can happen) only when {t.guard_text} ({rule}: {self.summary(rule)}); here "
            f"{' and '.join(failing)} did not hold, so it went to {b.cs.state}.",
        )

    def decided_past(self, b: Branch, states: Iterable[str]) -> tuple[str, str] | None:
        """Where the transition that set the outcome sent the call past ``states``: its rule
        and the rest of an explanation citing it."""
        skipping = self.skipped(b, states)
        if skipping is None:
            return None
        rule = self.first_rule(skipping)
        return rule, f"decided outcome {b.cs.outcome} ({rule}: {self.summary(rule)})"


# ------------------------------------------------------------------------------------------------
# The registry
# ------------------------------------------------------------------------------------------------

StepJudge = Callable[[Replay, Branch, Any], "Death | str | None"]
"""A step check: the branch and the line's data (per kind of step) against the contract; a
violation (its explanation, or a :class:`Death` when it cites the contract's rule), or None."""
_ON_STEP: Final = on(STEP)
"""The step checks by the kind of step they judge, in the order they are asked (the registry's
live index)."""


def judge_step(replay: Replay, on: str, b: Branch, data: Any = None) -> Death | None:
    """The first step check of ``on`` that ``b`` fails (None: the branch may take the step).
    Which checks apply in ``b`` is worked out once per branch (every result line asks)."""
    key = (on, b)
    asked = replay.asked.get(key)
    if asked is None:
        asked = replay.asked[key] = tuple(
            (c.rule, c.judge) for c in _ON_STEP[on] if c.holds(replay, b)
        )
    for rule, judge in asked:
        found = judge(replay, b, data)
        if found is not None:
            return found if found.__class__ is Death else Death(rule, found)  # type: ignore[arg-type]
    return None


# ------------------------------------------------------------------------------------------------
# The body's phases (``body_settle``; ``event``: a contract event, data its name)
# ------------------------------------------------------------------------------------------------


@check("R27", STEP, "body_settle")
def settles_once(replay: Replay, b: Branch, how: Any) -> str | None:
    """A body settles once per start."""
    if b.phase in SETTLED:
        return "The body settled twice: a body_settle without a new start."
    return None


@check("R18", STEP, "body_settle")
def settles_a_running_body(replay: Replay, b: Branch, how: Any) -> str | None:
    """Only a running body settles."""
    if b.phase != RUNNING:
        return "A body_settle although no body was running (no body_start before it)."
    return None


def _moving_on(b: Branch, name: str) -> bool:
    """A contract event other than a cancellation while a body is dispatched or running."""
    return b.phase != IDLE and name not in CANCELLATION


@check("R18", STEP, "event")
def dispatch_invokes_the_body(replay: Replay, b: Branch, name: str) -> str | None:
    """A dispatch the contract lets through invokes the body before anything else happens."""
    if _moving_on(b, name) and b.phase in (DISPATCHED, DISPATCHED_ABORTED, FUSED):
        return (
            f"{PHASE_TEXT[b.phase]}, but the trace shows no body_start before {name}: a "
            "dispatch the contract lets through invokes the body."
        )
    return None


@check("R27", STEP, "event")
def awaits_the_running_body(replay: Replay, b: Branch, name: str) -> str | None:
    """The registry awaits a running body to quiescence before it goes on."""
    if _moving_on(b, name) and b.phase == RUNNING:
        return (
            f"{name} while the body is still running (no body_settle): the registry must "
            "await the body to quiescence before it goes on."
        )
    return None


@check("R18", STEP, "event")
def reports_how_the_body_settled(replay: Replay, b: Branch, name: str) -> str | None:
    """After a body settled the registry reports how (``body_ok`` / ``body_raise``), and only
    then; never without a body."""
    if not _moving_on(b, name):
        if b.phase == IDLE and name in BODY_REPORTS:
            return (
                f"The registry reported {name} although no body was running: no body_start "
                "and body_settle came before it."
            )
        return None
    if b.phase not in SETTLED:
        return None
    want = "body_ok" if b.phase == SETTLED_OK else "body_raise"
    if name == want:
        return None
    if name in BODY_REPORTS:
        return (
            f"{PHASE_TEXT[b.phase]} (body_settle), but the registry reported {name}; a body "
            "that returns is a body_ok, one that raises a body_raise."
        )
    return (
        f"{PHASE_TEXT[b.phase]}, but the registry went on to {name} without reporting how "
        f"the body settled ({want})."
    )


DECISION_STAGE: Final = {
    **dict.fromkeys(("pre_allow", "pre_deny", "pre_ask", "pre_raise"), "pre"),
    **dict.fromkeys(
        (
            "approval_approved",
            "approval_rejected",
            "approval_cancelled",
            "approval_unavailable",
            "approval_raise",
        ),
        "approval",
    ),
    **dict.fromkeys(("guards_pass", "guard_deny", "guard_raise"), "guards"),
    **dict.fromkeys(("post_accept", "post_block", "post_raise"), "post"),
}
"""Contract events that are a stage's decision: each needs that stage's ``stage_enter`` first."""


@check("R27", STEP, "event")
def awaits_the_started_stage(replay: Replay, b: Branch, name: str) -> str | None:
    """A stage that started decides before anything else happens (hooks are awaited)."""
    if b.stage is not None and DECISION_STAGE.get(name) != b.stage and name not in CANCELLATION:
        return (
            f"{name} arrived while the {b.stage} stage had started and not decided: every "
            "hook promise is awaited, never abandoned."
        )
    return None


@check("R10", STEP, "decision")
def decides_after_it_ran(replay: Replay, b: Branch, name: str) -> str | None:
    """A stage decides only after its ``stage_enter`` (asked once the machine allows it)."""
    stage = DECISION_STAGE.get(name)
    if stage is not None and b.stage != stage:
        return (
            f"{name} is the decision of the {stage} stage, but the trace shows no "
            f"stage_enter {stage} before it: a stage decides only after it ran."
        )
    return None


# ------------------------------------------------------------------------------------------------
# An event the contract has no transition for (``machine``: data the Occurrence)
# ------------------------------------------------------------------------------------------------


@check("R31", STEP, "machine")
def nothing_after_publication(replay: Replay, b: Branch, occ: Occurrence) -> str | None:
    """Nothing of a call happens after it published its result."""
    if b.cs.state == "materialized":
        return (
            f"{occ.event} after the call published its result: a call publishes exactly once, "
            "and nothing of it happens after that."
        )
    return None


@check(CONTRACT, STEP, "machine")
def guard_held(replay: Replay, b: Branch, occ: Occurrence) -> Death | None:
    """The event happens here only when a guard holds: cite the guard's rule."""
    cs, name = b.cs, occ.event
    candidates = replay.table.candidates.get((cs.state, name), ())
    if not candidates:
        return None
    t = candidates[-1]  # the most general candidate: the one with the fewest conditions
    for guard, want in t.guards:
        if GUARDS[guard](cs, occ, replay.table) is not want:
            rule = replay.guard_rule(guard)
            return Death(
                rule,
                f"{name} in {cs.state} is allowed only when {'' if want else 'not '}"
                f"{guard} ({replay.guard_doc(guard)}), which is not the case here ({rule}: "
                f"{replay.summary(rule)}).",
            )
    return None


@check(CONTRACT, STEP, "machine")
def went_elsewhere(replay: Replay, b: Branch, occ: Occurrence) -> Death | None:
    """The previous event led elsewhere than where this one happens: cite that transition."""
    return replay.other_path(b, lambda dest: (dest, occ.event) in replay.table.candidates)


@check(CONTRACT, STEP, "machine")
def outcome_skips_it(replay: Replay, b: Branch, occ: Occurrence) -> Death | None:
    """The decided outcome sent the call past where the event happens: cite its transition."""
    name = occ.event
    past = replay.decided_past(b, (s for s, e in replay.table.candidates if e == name))
    if past is None:
        return None
    rule, decided = past
    return Death(
        rule,
        f"{name} cannot happen in {b.cs.state}: {b.decided_event} {decided}, which skips where "
        f"{name} happens.",
    )


@check("R10", STEP, "machine")
def in_pipeline_order(replay: Replay, b: Branch, occ: Occurrence) -> str:
    """Anything else the contract refuses: the stage order (asked last, it always fails)."""
    return f"{occ.event} cannot happen while the call is in {b.cs.state}: {ORDER}."


# ------------------------------------------------------------------------------------------------
# A stage starts (``stage_enter``: data the stage)
# ------------------------------------------------------------------------------------------------


@check("R27", STEP, "stage_enter")
def no_stage_while_the_body_runs(replay: Replay, b: Branch, stage: str) -> str | None:
    """No stage starts while the body runs (it is awaited to quiescence)."""
    if b.phase == RUNNING:
        return (
            f"The {stage} stage started while {PHASE_TEXT[b.phase].lower()} and its outcome "
            "was not reported yet."
        )
    return None


@check("R18", STEP, "stage_enter")
def no_stage_before_the_body_is_reported(replay: Replay, b: Branch, stage: str) -> str | None:
    """No stage starts between a dispatch and the report of how its body settled."""
    if b.phase not in (IDLE, RUNNING):
        return (
            f"The {stage} stage started while {PHASE_TEXT[b.phase].lower()} and its outcome "
            "was not reported yet."
        )
    return None


@check("R10", STEP, "stage_enter")
def one_stage_at_a_time(replay: Replay, b: Branch, stage: str) -> str | None:
    """A stage starts after the previous one decided."""
    if b.stage is not None:
        again = "again " if b.stage == stage else ""
        return f"The {stage} stage started {again}while the {b.stage} stage had not decided."
    return None


def _misplaced(b: Branch, stage: str) -> bool:
    return b.cs.state != STAGE_STATE[stage]


@check("R31", STEP, "stage_enter")
def no_stage_after_publication(replay: Replay, b: Branch, stage: str) -> str | None:
    """No stage runs after the call published."""
    if _misplaced(b, stage) and b.cs.state == "materialized":
        return (
            f"The {stage} stage started after the result was published; publication is the "
            "end of the call."
        )
    return None


def _post_on_final_route(replay: Replay, b: Branch, stage: str) -> bool:
    return stage == "post" and b.cs.state == "finalizing" and _misplaced(b, stage)


@check("R10", STEP, "stage_enter")
def post_runs_once(replay: Replay, b: Branch, stage: str) -> str | None:
    """Post-execute runs once per call."""
    if _post_on_final_route(replay, b, stage) and not replay.final_route(b):
        return "Post-execute ran again after it had decided: each stage runs once per call."
    return None


@check(CONTRACT, STEP, "stage_enter")
def no_post_on_the_final_route(replay: Replay, b: Branch, stage: str) -> Death | None:
    """Post-execute is skipped on the final route: cite the transition that put the call there."""
    if not _post_on_final_route(replay, b, stage) or b.decided < 0:
        return None
    rule = replay.first_rule(replay.transitions[b.decided])
    return Death(
        rule,
        f"Post-execute ran, but {b.decided_event} put the call on the final route with "
        f"outcome {b.cs.outcome} ({rule}: {replay.summary(rule)}); post-execute is "
        "skipped there.",
    )


@check(CONTRACT, STEP, "stage_enter")
def stage_elsewhere(replay: Replay, b: Branch, stage: str) -> Death | None:
    """The stage runs where the previous event would have led only under other conditions, or
    the decided outcome skips it: cite that transition."""
    if not _misplaced(b, stage):
        return None
    need = STAGE_STATE[stage]
    other = replay.other_path(b, lambda dest: dest == need)
    if other is not None:
        return other
    past = replay.decided_past(b, (need,))
    if past is None:
        return None
    rule, decided = past
    return Death(rule, f"The {stage} stage ran, but {b.decided_event} had already {decided}.")


@check("R10", STEP, "stage_enter")
def stage_in_its_state(replay: Replay, b: Branch, stage: str) -> str | None:
    """Each stage runs in its own state of the pipeline."""
    if _misplaced(b, stage):
        return (
            f"The {stage} stage started while the call was in {b.cs.state}; the contract runs it "
            f"in {STAGE_STATE[stage]}: {ORDER}."
        )
    return None


# ------------------------------------------------------------------------------------------------
# The body's signal and its start (``fused``: data (kind, aborted); ``body_start``)
# ------------------------------------------------------------------------------------------------


def _dispatched(b: Branch) -> bool:
    return b.phase in (DISPATCHED, DISPATCHED_ABORTED)


@check("R21", STEP, "fused")
def one_signal_per_dispatch(replay: Replay, b: Branch, data: tuple[str, bool]) -> str | None:
    """The body gets exactly one signal per dispatch."""
    if b.phase != IDLE and not _dispatched(b):
        return "A second fused line for one dispatch: the body gets exactly one signal."
    return None


@check(CONTRACT, STEP, "fused")
def fused_for_an_invoked_body(replay: Replay, b: Branch, data: tuple[str, bool]) -> Death | None:
    """A fused signal is built only for a body the contract invoked."""
    if b.phase != IDLE:
        return None
    return judge_step(replay, "no_invoke", b, "a fused signal was built for a body")


@check("R21", STEP, "fused")
def keeps_the_callers_signal(replay: Replay, b: Branch, data: tuple[str, bool]) -> str | None:
    """The body's signal is the caller's own, or a relay of the caller's and the slot's."""
    kind, caller = data[0], b.cs.caller
    if caller == "none" and kind in ("caller", "relay"):
        return f"The call has no caller signal, yet the body's signal is reported as {kind}."
    if caller != "none" and kind in ("none", "slot"):
        what = "no signal at all" if kind == "none" else "the slot's signal alone"
        return (
            f"The body got {what}: the caller's signal was detached.  The fused signal must "
            "be the caller's own or a relay of the caller's and the slot's."
        )
    return None


@check("R17", STEP, "fused")
def c2_refuses_an_aborted_slot(replay: Replay, b: Branch, data: tuple[str, bool]) -> str | None:
    """Checkpoint C2 returns ABORTED rather than invoke a body with an aborted signal."""
    if data[1] and b.phase == DISPATCHED:
        return (
            "The body's fused signal was already aborted at base dispatch, yet the body was "
            "invoked as if live; checkpoint C2 returns ABORTED instead (base_dispatch must "
            "report slot_aborted when the slot's signal is aborted)."
        )
    return None


_LIVE_BUT_ABORTED: Final = (
    "The contract invokes this body with an already-aborted signal (the caller was aborted at "
    "entry, or the slot's signal was), but the fused signal is reported live."
)


@check("R25", STEP, "fused")
def aborted_caller_aborts_the_body(
    replay: Replay, b: Branch, data: tuple[str, bool]
) -> str | None:
    """A caller aborted at entry hands the body an aborted signal."""
    if not data[1] and b.phase == DISPATCHED_ABORTED and b.cs.caller == "aborted":
        return _LIVE_BUT_ABORTED
    return None


@check("R21", STEP, "fused")
def aborted_slot_aborts_the_body(replay: Replay, b: Branch, data: tuple[str, bool]) -> str | None:
    """An aborted slot's signal reaches the body through the fused signal."""
    if not data[1] and b.phase == DISPATCHED_ABORTED:
        return _LIVE_BUT_ABORTED
    return None


@check("R21", STEP, "body_start")
def body_start_after_fused(replay: Replay, b: Branch, data: Any) -> str | None:
    """A fused line (which signal the body got) follows the dispatch that invokes a body."""
    if _dispatched(b):
        return (
            "The body started, but the trace does not say which signal it got: a fused line "
            "follows the base_dispatch that invokes a body."
        )
    return None


@check("R27", STEP, "body_start")
def one_body_at_a_time(replay: Replay, b: Branch, data: Any) -> str | None:
    """Bodies of one call run one after the other."""
    if b.phase not in (IDLE, FUSED):
        return (
            "A second body_start before the first body's outcome was reported: bodies of "
            "one call run one after the other."
        )
    return None


@check(CONTRACT, STEP, "body_start")
def started_where_invoked(replay: Replay, b: Branch, data: Any) -> Death | None:
    """A body starts only where the contract invoked one."""
    if b.phase != IDLE:
        return None
    return judge_step(replay, "no_invoke", b, "a body started")


# ------------------------------------------------------------------------------------------------
# A body (or its signal) where the contract invoked none (``no_invoke``: data what happened)
# ------------------------------------------------------------------------------------------------


@check("R28", STEP, "no_invoke")
def no_body_once_decided(replay: Replay, b: Branch, what: str) -> str | None:
    """No body starts after the call's result was decided for publication."""
    if b.cs.state in replay.decided_states:
        rule = rule_of(no_body_once_decided)
        return (
            f"{what.capitalize()} after the call's result was decided for publication "
            f"({rule}: {replay.summary(rule)})."
        )
    return None


@check("R28", STEP, "no_invoke")
def no_body_after_cancellation(replay: Replay, b: Branch, what: str) -> str | None:
    """No body starts after the caller cancelled and before checkpoint C2."""
    cs = b.cs
    if cs.state in replay.before_dispatch or (
        cs.state == STAGE_STATE["post"] and cs.outcome in replay.cancellations
    ):
        if replay.cancelled(cs, Occurrence("body_start"), replay.table):
            rule = rule_of(no_body_after_cancellation)
            return (
                f"{what.capitalize()} after the caller cancelled and before checkpoint C2 "
                f"({rule}: {replay.summary(rule)})."
            )
    return None


@check(CONTRACT, STEP, "no_invoke")
def no_body_past_the_outcome(replay: Replay, b: Branch, what: str) -> Death | None:
    """The decided outcome skips the body: cite the transition that decided it."""
    past = replay.decided_past(b, (replay.body_state,))
    if past is None:
        return None
    rule, decided = past
    return Death(
        rule,
        f"{what.capitalize()}, but {b.decided_event} had {decided}; no body starts after that.",
    )


@check("R18", STEP, "no_invoke")
def body_only_after_dispatch(replay: Replay, b: Branch, what: str) -> str:
    """A body starts only right after a base dispatch that lets it through (asked last)."""
    return (
        f"{what.capitalize()} without the contract invoking one: a body starts only right "
        "after a base_dispatch that lets it through."
    )
