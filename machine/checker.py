"""The trace checker: replays each call of a trace through the pure machine, gives a verdict.

A trace (:mod:`toolcancel.trace`) from any registry, in any language, is checked call by call.
The call's **contract events** are offered to the machine of :mod:`toolcancel.core` as a
*nondeterministic* automaton: the checker keeps every state the contract allows the call to be in,
and for each event takes :func:`toolcancel.core.choices` from each of them -- the reference's
transition and every MAY alternative the contract marks (``alternative = true``).  So every
behaviour the contract allows is accepted, and the first event no possible state allows is the
violation.  A ``caller_abort`` is a contract event like any other: where it appears is when the
registry saw the caller's signal abort.

The **observation events** are checked by trace rules the machine cannot see by itself:

* every stage's decision comes after that stage started, and a stage starts only where the
  contract's state runs it (post-execute never on the final route: R14, R16; guards never after
  a seed C1 cancellation: R13; stage order: R10);
* a body starts only right after a ``base_dispatch`` the machine took into the body (with a
  ``fused`` line saying which signal it got: R21, R17, R25), never after a cancellation before
  checkpoint C2 (R28), never without a dispatch (R18); it settles before the registry reports how
  (``body_settle`` then ``body_ok``/``body_raise``, R18) and before the call moves on (R27);
* the registry's listeners on the caller's and the slot's signal are balanced when the result is
  published (R22); the slot never changes once published (R23);
* exactly one ``result`` after ``publish`` and exactly one ``notify`` after it (R31);
* the result object has the envelope of R1 and agrees with the outcome the contract decided: its
  ``isError``, its code, the registry's exact texts, the error shape of the revision (R4-R8, R11,
  R30, R41, R44), no contexts where R29 drops them.

What a trace must hold, beyond the contract events: a ``call_entry`` first; a ``stage_enter``
before each stage's decision; a ``fused`` line, then ``body_start``, right after a
``base_dispatch`` that invokes the body, and a ``body_settle`` before its ``body_ok`` or
``body_raise``; ``result`` and ``notify`` after ``publish``.  ``slot`` lines are optional and
``listener`` lines are only checked for balance, so a registry that adds no listener writes none.
A trace does not say whether a post-execute ``accept`` replaced the content, so after one the
content is not compared with the registry's texts (the revised ``error.message`` still is).

Why an automaton over interned state sets: a trace of millions of events must be checked in
linear time.  Each distinct set of possible states is interned once; the step from a set on an
event is computed once and cached, so checking an event costs one dict lookup.  Explanations are
computed only for the one event that fails.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NamedTuple

from .contract import Contract, RevisionContract, Transition
from .core import (
    GUARDS,
    UNKNOWN,
    CallerSignal,
    CallState,
    Occurrence,
    choices,
    initial_state,
    revision_table,
)
from .judge_lines import ON_LINE, judge_line
from .results import block_message, canonical_json
from .trace import (
    ENVIRONMENT,
    TraceError,
    TraceEvent,
    Traces,
    entry_error,
    gc_paused,
    iter_batches,
    parse_lines,
)

# ------------------------------------------------------------------------------------------------
# Verdicts
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """The verdict on one call: conforming, or the first violation and why."""

    call_id: str
    verdict: str  # "conforming" or "violation"
    source: str = "<trace>"
    rule: str | None = None
    title: str | None = None
    event_index: int | None = None  # 0-based within the call
    line: int | None = None  # 1-based line in the file
    allowed: tuple[str, ...] = ()
    seen: str | None = None
    explanation: str | None = None

    @property
    def conforming(self) -> bool:
        return self.verdict == "conforming"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"call_id": self.call_id, "verdict": self.verdict}
        out["file"] = self.source
        if not self.conforming:
            out.update(
                rule=self.rule,
                title=self.title,
                event_index=self.event_index,
                line=self.line,
                allowed=list(self.allowed),
                seen=self.seen,
                explanation=self.explanation,
            )
        return out


class Death(NamedTuple):
    """Why one possible state of the call cannot take an event: a rule id and a sentence."""

    rule: str
    explanation: str



# ------------------------------------------------------------------------------------------------
# Possible states of a call
# ------------------------------------------------------------------------------------------------

STAGE_STATE: Final = {
    "pre": "pre_policy",
    "approval": "approval",
    "guards": "guards",
    "post": "post_policy",
}
"""The machine state in which each hook stage runs."""

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

CANCELLATION: Final = frozenset({"caller_abort", "fused_abort"})
_ORDER: Final = (
    "a call goes through pre-execute, approval (for ask), guards, the around waterfall (base "
    "dispatch, the body), post-execute and publication, in that order (R10)"
)

# Body phases: where the call stands with respect to a body the contract invoked.
IDLE, DISPATCHED, DISPATCHED_ABORTED, FUSED, RUNNING, SETTLED_OK, SETTLED_RAISE = range(7)
_PHASE_TEXT: Final = {
    DISPATCHED: "The contract invoked the body at base dispatch",
    DISPATCHED_ABORTED: "The contract invoked the body at base dispatch",
    FUSED: "The body's fused signal was built",
    RUNNING: "The body is running",
    SETTLED_OK: "The body settled by returning",
    SETTLED_RAISE: "The body settled by raising",
}

# Call-level events: checked by counters, not by the automaton.
_LISTENER, _SLOT, _RESULT, _NOTIFY, _ENTRY = range(5)
_CALL_LEVEL: Final = {
    "listener": _LISTENER,
    "slot": _SLOT,
    "result": _RESULT,
    "notify": _NOTIFY,
    "call_entry": _ENTRY,
}


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
    last: int = -1  # the last transition that changed the state
    before: CallState | None = None  # the state that transition left
    last_event: Occurrence | None = None


EventKey = str | tuple[Any, ...]
"""An event as the automaton sees it: its name alone when it carries no data, else a tuple of
its name and its data values in a fixed order."""


# ------------------------------------------------------------------------------------------------
# The automaton of one revision
# ------------------------------------------------------------------------------------------------


class Automaton:
    """Interned sets of possible states of one contract revision, and the steps between them.

    ``step(config, key)`` is a dict lookup once computed; -1 means no possible state takes the
    event (the violation, explained by :meth:`explain`).
    """

    def __init__(self, table: RevisionContract) -> None:
        self.table = table
        self.contract: Contract = table.contract
        self.configs: list[tuple[Branch, ...]] = []
        self._config_ids: dict[tuple[Branch, ...], int] = {}
        self.rows: list[dict[EventKey, int]] = []  # per configuration: event key -> next
        self._starts: dict[tuple[str, bool, bool, str | None, int], int] = {}
        self._allowed: dict[tuple[int, bool, bool, bool], list[str]] = {}
        self._patterns: dict[Any, re.Pattern[str]] = {}  # compiled text patterns, per builder
        self._deaths: dict[tuple[int, EventKey], Death] = {}
        self.data_fields: dict[str, tuple[str, ...]] = {e.name: e.data for e in table.events}
        self.contract_events: frozenset[str] = frozenset(self.data_fields)
        # The seed reads "cancelled after entry", the revised contract "caller aborted": whichever
        # predicate this revision's transitions use is the one that forbids a late start (R28).
        used = {g for t in table.transitions for g, _ in t.guards}
        self._cancelled = GUARDS[
            "cancelled_after_entry" if "cancelled_after_entry" in used else "caller_aborted"
        ]
        self.rule_ids = frozenset(r.id for r in table.rules)
        self._titles = {r.id: r.title for r in self.contract.rules}
        self._summaries = {r.id: r.summary.rstrip(".") for r in self.contract.rules}
        self._shape_rules = frozenset(o.rule for o in table.outcomes)
        self._specific = frozenset(
            r.id for r in table.rules if r.revisions != frozenset(self.contract.revisions)
        )
        self.outcomes = {o.name: o for o in table.outcomes}
        # contract.toml lists the states in pipeline order: where each lies along the pipeline
        # tells which states a decision jumped over.
        self._pipeline = {st.name: i for i, st in enumerate(table.states)}
        self.transitions = {t.index: t for t in table.transitions}

    # -- configurations ----------------------------------------------------------------------

    def start(
        self,
        caller: CallerSignal,
        agent: bool,
        approval_seam: bool,
        retry: str | None = None,
        wrappers: int = UNKNOWN,
    ) -> int:
        """The configuration a call begins in, given what its call_entry line says."""
        key = (caller, agent, approval_seam, retry, wrappers)
        found = self._starts.get(key)
        if found is None:
            cs = initial_state(
                self.table,
                caller,
                has_agent=agent,
                approval_seam=approval_seam,
                retry=retry,
                wrappers=wrappers,
            )
            found = self._starts[key] = self._intern([Branch(cs)])
        return found

    def _intern(self, branches: Iterable[Branch]) -> int:
        kept: dict[tuple[Any, ...], Branch] = {}
        for b in branches:
            kept.setdefault((b.cs, b.phase, b.stage, b.free), b)
        key = tuple(kept.values())
        found = self._config_ids.get(key)
        if found is None:
            found = len(self.configs)
            self.configs.append(key)
            self.rows.append({})
            self._config_ids[key] = found
        return found

    def step(self, config: int, key: EventKey) -> int:
        """The configuration after ``key`` (cached), or -1 if no possible state takes it."""
        row = self.rows[config]
        found = row.get(key)
        if found is not None:
            return found
        survivors: list[Branch] = []
        first: Death | None = None
        for b in self.configs[config]:
            nxt, death = self.successors(b, key)
            survivors.extend(nxt)
            if death is not None and first is None:
                first = death
        if survivors:
            found = self._intern(survivors)
        else:
            found = -1
            assert first is not None
            self._deaths[(config, key)] = first
        row[key] = found
        return found

    def death(self, config: int, key: EventKey) -> Death:
        """Why the event ``key`` is a violation in ``config`` (after :meth:`step` said -1)."""
        return self._deaths[(config, key)]

    def filter(self, config: int, keep: Iterable[Branch]) -> int:
        return self._intern(keep)

    # -- one possible state, one event ---------------------------------------------------------

    def occurrence(self, key: tuple[Any, ...]) -> Occurrence:
        name = key[0]
        return Occurrence(name, **dict(zip(self.data_fields[name], key[1:], strict=True)))

    def successors(self, b: Branch, key: EventKey) -> tuple[list[Branch], Death | None]:
        if isinstance(key, str):
            key = (key,)
        name = key[0]
        if name in self.contract_events:
            return self._contract_event(b, key)
        if name == "stage_enter":
            return self._stage_enter(b, key[1])
        if name == "fused":
            return self._fused(b, key[1], key[2])
        if name == "body_start":
            return self._body_start(b)
        if name == "body_settle":
            if b.phase == RUNNING:
                return [b._replace(phase=SETTLED_OK if key[1] == "ok" else SETTLED_RAISE)], None
            if b.phase in (SETTLED_OK, SETTLED_RAISE):
                return [], Death(
                    "R27", "The body settled twice: a body_settle without a new start."
                )
            return [], Death(
                "R18", "A body_settle although no body was running (no body_start before it)."
            )
        raise AssertionError(f"not an automaton event: {name}")

    def _contract_event(self, b: Branch, key: tuple[Any, ...]) -> tuple[list[Branch], Death | None]:
        name = key[0]
        phase = b.phase
        if phase != IDLE and name not in CANCELLATION:
            death = self._phase_death(b, name)
            if death is not None:
                return [], death
        elif name in ("body_ok", "body_raise"):
            return [], Death(
                "R18",
                f"The registry reported {name} although no body was running: no body_start and "
                "body_settle came before it.",
            )
        stage = DECISION_STAGE.get(name)
        if b.stage is not None and stage != b.stage and name not in CANCELLATION:
            return [], Death(
                "R27",
                f"{name} arrived while the {b.stage} stage had started and not decided: every "
                "hook promise is awaited, never abandoned.",
            )
        occ = self.occurrence(key)
        allowed = choices(self.table, b.cs, occ)
        if not allowed:
            return [], self._machine_death(b, occ)
        if stage is not None and b.stage != stage:
            return [], Death(
                "R10",
                f"{name} is the decision of the {stage} stage, but the trace shows no "
                f"stage_enter {stage} before it: a stage decides only after it ran.",
            )
        out = []
        for t, cs in reversed(allowed):  # the reference's transition first
            nb = b._replace(cs=cs, stage=None if stage is not None else b.stage)
            if t.invoke:
                nb = nb._replace(phase=DISPATCHED_ABORTED if cs.state == "draining" else DISPATCHED)
            elif name in ("body_ok", "body_raise"):
                nb = nb._replace(phase=IDLE)
            if t.outcome is not None:
                nb = nb._replace(free=False, decided=t.index, decided_event=name)
            elif name == "post_accept":
                nb = nb._replace(free=True)
            if t.dest is not None or name == "redelegate":
                # (a rejected retry stays in its state, but the next event is judged after it)
                nb = nb._replace(last=t.index, before=b.cs, last_event=occ)
            out.append(nb)
        return out, None

    def _phase_death(self, b: Branch, name: str) -> Death | None:
        phase = b.phase
        if phase in (DISPATCHED, DISPATCHED_ABORTED, FUSED):
            return Death(
                "R18",
                f"{_PHASE_TEXT[phase]}, but the trace shows no body_start before {name}: a "
                "dispatch the contract lets through invokes the body.",
            )
        if phase == RUNNING:
            return Death(
                "R27",
                f"{name} while the body is still running (no body_settle): the registry must "
                "await the body to quiescence before it goes on.",
            )
        want = "body_ok" if phase == SETTLED_OK else "body_raise"
        if name == want:
            return None
        if name in ("body_ok", "body_raise"):
            return Death(
                "R18",
                f"{_PHASE_TEXT[phase]} (body_settle), but the registry reported {name}; a body "
                "that returns is a body_ok, one that raises a body_raise.",
            )
        return Death(
            "R18",
            f"{_PHASE_TEXT[phase]}, but the registry went on to {name} without reporting how "
            f"the body settled ({want}).",
        )

    def _stage_enter(self, b: Branch, stage: str) -> tuple[list[Branch], Death | None]:
        if b.phase != IDLE:
            return [], Death(
                "R27" if b.phase == RUNNING else "R18",
                f"The {stage} stage started while {_PHASE_TEXT[b.phase].lower()} and its outcome "
                "was not reported yet.",
            )
        if b.stage is not None:
            again = "again " if b.stage == stage else ""
            return [], Death(
                "R10",
                f"The {stage} stage started {again}while the {b.stage} stage had not decided.",
            )
        need = STAGE_STATE[stage]
        if b.cs.state == need:
            return [b._replace(stage=stage)], None
        return [], self._stage_death(b, stage, need)

    def _stage_death(self, b: Branch, stage: str, need: str) -> Death:
        state = b.cs.state
        if state == "materialized":
            return Death(
                "R31",
                f"The {stage} stage started after the result was published; publication is the "
                "end of the call.",
            )
        if stage == "post" and state == "finalizing" and not self._final_route(b):
            return Death(
                "R10",
                "Post-execute ran again after it had decided: each stage runs once per call.",
            )
        if stage == "post" and state == "finalizing" and b.decided >= 0:
            t = self.transitions[b.decided]
            rule = self._first_rule(t)
            return Death(
                rule,
                f"Post-execute ran, but {b.decided_event} put the call on the final route with "
                f"outcome {b.cs.outcome} ({rule}: {self._summary(rule)}); post-execute is "
                "skipped there.",
            )
        other = self._other_path(b, lambda dest: dest == need)
        if other is not None:
            return other
        skipping = self._skipped(b, (need,))
        if skipping is not None:
            rule = self._first_rule(skipping)
            return Death(
                rule,
                f"The {stage} stage ran, but {b.decided_event} had already decided outcome "
                f"{b.cs.outcome} ({rule}: {self._summary(rule)}).",
            )
        return Death(
            "R10",
            f"The {stage} stage started while the call was in {state}; the contract runs it in "
            f"{need}: {_ORDER}.",
        )

    def _fused(self, b: Branch, kind: str, aborted: bool) -> tuple[list[Branch], Death | None]:
        phase = b.phase
        if phase not in (DISPATCHED, DISPATCHED_ABORTED):
            if phase == IDLE:
                return [], self._no_invoke_death(b, "a fused signal was built for a body")
            return [], Death(
                "R21", "A second fused line for one dispatch: the body gets exactly one signal."
            )
        caller = b.cs.caller
        if caller == "none" and kind in ("caller", "relay"):
            return [], Death(
                "R21",
                f"The call has no caller signal, yet the body's signal is reported as {kind}.",
            )
        if caller != "none" and kind in ("none", "slot"):
            what = "no signal at all" if kind == "none" else "the slot's signal alone"
            return [], Death(
                "R21",
                f"The body got {what}: the caller's signal was detached.  The fused signal must "
                "be the caller's own or a relay of the caller's and the slot's.",
            )
        if aborted and phase == DISPATCHED:
            return [], Death(
                "R17",
                "The body's fused signal was already aborted at base dispatch, yet the body was "
                "invoked as if live; checkpoint C2 returns ABORTED instead (base_dispatch must "
                "report slot_aborted when the slot's signal is aborted).",
            )
        if not aborted and phase == DISPATCHED_ABORTED:
            rule = "R25" if caller == "aborted" else "R21"
            return [], Death(
                rule,
                "The contract invokes this body with an already-aborted signal (the caller was "
                "aborted at entry, or the slot's signal was), but the fused signal is reported "
                "live.",
            )
        return [b._replace(phase=FUSED)], None

    def _body_start(self, b: Branch) -> tuple[list[Branch], Death | None]:
        phase = b.phase
        if phase == FUSED:
            return [b._replace(phase=RUNNING)], None
        if phase in (DISPATCHED, DISPATCHED_ABORTED):
            return [], Death(
                "R21",
                "The body started, but the trace does not say which signal it got: a fused line "
                "follows the base_dispatch that invokes a body.",
            )
        if phase != IDLE:
            return [], Death(
                "R27",
                "A second body_start before the first body's outcome was reported: bodies of "
                "one call run one after the other.",
            )
        return [], self._no_invoke_death(b, "a body started")

    def _no_invoke_death(self, b: Branch, what: str) -> Death:
        """A body start (or its fused signal) where the contract invoked no body."""
        cs = b.cs
        if cs.state in ("finalizing", "materialized"):
            return Death(
                "R28",
                f"{what.capitalize()} after the call's result was decided for publication "
                f"(R28: {self._summary('R28')}).",
            )
        if cs.state in ("pre_policy", "approval", "guards", "around_before") or (
            cs.state == "post_policy" and cs.outcome in ("aborted", "aborted_before_dispatch")
        ):
            if self._cancelled(cs, Occurrence("body_start"), self.table):
                return Death(
                    "R28",
                    f"{what.capitalize()} after the caller cancelled and before checkpoint C2 "
                    f"(R28: {self._summary('R28')}).",
                )
        skipping = self._skipped(b, ("body",))
        if skipping is not None:
            rule = self._first_rule(skipping)
            return Death(
                rule,
                f"{what.capitalize()}, but {b.decided_event} had decided outcome {cs.outcome} "
                f"({rule}: {self._summary(rule)}); no body starts after that.",
            )
        return Death(
            "R18",
            f"{what.capitalize()} without the contract invoking one: a body starts only right "
            "after a base_dispatch that lets it through.",
        )

    def _machine_death(self, b: Branch, occ: Occurrence) -> Death:
        """The contract has no applying transition for ``occ`` in ``b``: the most specific why."""
        cs, name = b.cs, occ.event
        if cs.state == "materialized":
            return Death(
                "R31",
                f"{name} after the call published its result: a call publishes exactly once, "
                "and nothing of it happens after that.",
            )
        candidates = self.table.candidates.get((cs.state, name), ())
        if candidates:
            t = candidates[-1]  # the most general candidate: the one with the fewest conditions
            for guard, want in t.guards:
                if GUARDS[guard](cs, occ, self.table) is not want:
                    rule = self._guard_rule(guard)
                    doc = self._guard_doc(guard)
                    return Death(
                        rule,
                        f"{name} in {cs.state} is allowed only when {'' if want else 'not '}"
                        f"{guard} ({doc}), which is not the case here ({rule}: "
                        f"{self._summary(rule)}).",
                    )
        other = self._other_path(b, lambda dest: (dest, name) in self.table.candidates)
        if other is not None:
            return other
        skipping = self._skipped(b, (s for s, e in self.table.candidates if e == name))
        if skipping is not None:
            rule = self._first_rule(skipping)
            return Death(
                rule,
                f"{name} cannot happen in {cs.state}: {b.decided_event} decided outcome "
                f"{cs.outcome} ({rule}: {self._summary(rule)}), which skips where {name} "
                "happens.",
            )
        return Death(
            "R10",
            f"{name} cannot happen while the call is in {cs.state}: {_ORDER}.",
        )

    def _other_path(self, b: Branch, reaches: Any) -> Death | None:
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
            rule = self._first_rule(taken)
            when = f"when {taken.guard_text}" if taken.guard_text else "unconditionally"
            return Death(
                rule,
                f"After {prev.event} in {before.state} the contract goes to {taken.dest} {when} "
                f"({rule}: {self._summary(rule)}), before it would consider {t.dest}, where this "
                "event can happen.",
            )
        rule = self._first_rule(t)
        return Death(
            rule,
            f"After {prev.event} in {before.state} the contract goes to {t.dest} (where this "
            f"event can happen) only when {t.guard_text} ({rule}: {self._summary(rule)}); here "
            f"{' and '.join(failing)} did not hold, so it went to {b.cs.state}.",
        )

    # -- rules ---------------------------------------------------------------------------------

    def _guard_rule(self, guard: str) -> str:
        return next(g.rule for g in self.contract.guards if g.name == guard)

    def _guard_doc(self, guard: str) -> str:
        return next(g.doc for g in self.contract.guards if g.name == guard)

    def _first_rule(self, t: Transition) -> str:
        """The transition's most specific rule: the first one that is not only a result shape."""
        return next((r for r in t.rules if r not in self._shape_rules), t.rules[0])

    def decisive_rule(
        self, t: Transition, seen_cancel: bool, expected_cancel: bool, seen_success: bool
    ) -> str:
        """The rule to cite when the result is of another kind than ``t`` decided."""
        if seen_cancel and expected_cancel:  # the right cancellation with the wrong code
            return "R41" if "R41" in self.rule_ids else self._first_rule(t)
        row = self.table.precedence_row(t.precedence) if t.precedence is not None else None
        if seen_cancel and row is not None:
            # A revision-specific rule of the row is the one that ranks this outcome above
            # cancellation (revised: a denial or a pre-stage failure beats it, R43).
            for r in row.rules:
                if r in self._specific and r in self.rule_ids:
                    return r
        if expected_cancel and seen_success and "R28" in t.rules:
            return "R28"  # a success where cancellation had to prevent one: a late success
        if row is not None:
            for r in t.rules:
                if r in row.rules:
                    return r
        return self._first_rule(t)

    def _skipped(self, b: Branch, states: Iterable[str]) -> Transition | None:
        """The transition that set the call's outcome, if it jumped over one of ``states``
        (the call was sent past the place where the event at hand could happen)."""
        t = self.transitions.get(b.decided)
        if t is None or t.dest is None:
            return None
        at = self._pipeline
        low = min(at[s] for s in t.sources)
        return t if any(low < at[s] < at[t.dest] for s in states) else None

    def title(self, rule: str) -> str:
        return self._titles.get(rule, rule)

    def _summary(self, rule: str) -> str:
        """The rule's one-line summary, without its final period (it is quoted mid-sentence)."""
        return self._summaries.get(rule, "")

    # -- what was allowed ----------------------------------------------------------------------

    def allowed(self, config: int, published: bool, resulted: bool, notified: bool) -> list[str]:
        """Event names some possible state accepts next (listener and slot lines aside).

        Cached per configuration, so a trace full of violations stays linear too."""
        memo = (config, published, resulted, notified)
        found = self._allowed.get(memo)
        if found is None:
            found = self._allowed[memo] = self._probe(config, published, resulted, notified)
        return list(found)

    def _probe(self, config: int, published: bool, resulted: bool, notified: bool) -> list[str]:
        names: list[str] = []
        probes: list[tuple[str, EventKey]] = []
        for e in self.table.events:
            probes.append((e.name, (e.name, *(d in _TRUE_BY_DEFAULT for d in e.data))))
        for stage in STAGE_STATE:
            probes.append((f"stage_enter({stage})", ("stage_enter", stage)))
        for kind in ("none", "caller", "slot", "relay"):
            for aborted in (False, True):
                probes.append(("fused", ("fused", kind, aborted)))
        probes.append(("body_start", ("body_start",)))
        probes.append(("body_settle(ok)", ("body_settle", "ok")))
        probes.append(("body_settle(raise)", ("body_settle", "raise")))
        for label, key in probes:
            if label in names:
                continue
            if any(self.successors(b, key)[0] for b in self.configs[config]):
                names.append(label)
        if published and not resulted:
            names.append("result")
        if resulted and not notified:
            names.append("notify")
        return names

    # -- the result object ---------------------------------------------------------------------

    def result_death(self, b: Branch, res: Mapping[str, Any]) -> Death | None:
        """Whether the published result agrees with the outcome ``b`` holds (None: it does)."""
        outcome = b.cs.outcome
        if outcome is None:  # cannot happen after publish; kept total for foreign contracts
            return Death("R31", "A result was published although the contract decided no outcome.")
        kind = self.outcomes[outcome]
        revised = "R44" in self.rule_ids
        code = _code(res, revised)
        seen_cancel = code in _CANCEL_CODES
        expected_cancel = kind.code in _CANCEL_CODES
        mismatch = res.get("isError") is not kind.is_error
        if kind.code is not None:
            mismatch = mismatch or code != kind.code
        elif outcome in _REGISTRY_AUTHORED and code is not None:
            mismatch = True  # a result the registry authors without a code carries one
        if mismatch:
            t = self.transitions.get(b.decided)
            seen_success = res.get("isError") is False
            rule = (
                self.decisive_rule(t, seen_cancel, expected_cancel, seen_success)
                if t
                else kind.rule
            )
            where = f"decided at {b.decided_event}" if t else "the outcome"
            return Death(
                rule,
                f"The contract's outcome for this call is {_describe_outcome(kind)}, {where} "
                f"({rule}: {self._summary(rule)}); the published result is {describe(res)}.",
            )
        return self._shape_death(b, outcome, res, revised)

    def _shape_death(
        self, b: Branch, outcome: str, res: Mapping[str, Any], revised: bool
    ) -> Death | None:
        """The result is of the right kind; is it shaped as that kind must be?

        A trace does not say whether a post-execute ``accept`` supplied content, so once one
        has (``b.free``) the content is not compared with the registry's text; the revised
        contract's ``error.message`` survives an accept, so there the text is still checked.
        """
        kind = self.outcomes[outcome]
        text = _only_text(res)
        error = res.get("error")
        expected = self._expected_text(outcome, b)
        if expected is not None and not b.free and (text is None or not expected[0](text)):
            return Death(
                kind.rule,
                f"A {outcome} result must read {expected[1]} ({kind.rule}: "
                f"{self._summary(kind.rule)}); it reads {_quote(res)}.",
            )
        if "meta" in res and outcome not in ("body_success", "wrapper_success", "wrapper_error"):
            rule = "R4" if kind.code in _CANCEL_CODES else "R1"
            return Death(rule, f"A {outcome} result carries meta; only a body's success does.")
        if "additionalContexts" in res and self._final_route(b):
            return Death(
                "R29",
                f"A {outcome} result on the final route carries additionalContexts; contexts "
                "never enter final-route results (they are lost on pre-stage, around and post "
                "failures and on a failed snapshot).",
            )
        if not revised:
            if kind.code is not None:
                if not (
                    isinstance(error, dict)
                    and error.keys() == {"name", "code"}
                    and isinstance(error["name"], str)
                ):
                    return Death(
                        kind.rule,
                        f"A {outcome} result carries error {{name, code: {kind.code}}}; "
                        f"it has {_quote_error(error)}.",
                    )
            elif outcome in _REGISTRY_AUTHORED and error is not None:
                return Death(
                    kind.rule,
                    f"A {outcome} result has no error key in the seed contract "
                    f"({kind.rule}: {self._summary(kind.rule)}); it has {_quote_error(error)}.",
                )
            elif outcome in _THROWN and error is not None and not _seed_error_ok(error):
                return Death(
                    "R3",
                    f"A thrown value's error key is {{name, code}} of a structured error; "
                    f"it is {_quote_error(error)}.",
                )
            return None
        if outcome in _WRAPPER or not kind.is_error:
            return None
        if not isinstance(error, dict) or not isinstance(error.get("message"), str):
            return Death(
                "R44",
                f"In the revised contract every error result the registry authors carries error "
                f"{{message, info?}}; this {outcome} result has {_quote_error(error)}.",
            )
        info = error.get("info")
        if set(error) - {"message", "info"}:
            return Death("R44", f"error has unknown keys: {_quote_error(error)}.")
        if kind.code is not None:
            if not (
                isinstance(info, dict)
                and info.keys() == {"name", "code"}
                and isinstance(info["name"], str)
            ):
                return Death(
                    "R44",
                    f"A {outcome} result carries error.info {{name, code: {kind.code}}}; it has "
                    f"{_quote_error(error)}.",
                )
        elif outcome in _REGISTRY_AUTHORED and info is not None:
            return Death("R44", f"A {outcome} result has no error.info; it has {info!r}.")
        message = error["message"]
        if expected is not None and not expected[0]("Error: " + message):
            return Death(
                kind.rule,
                f"A {outcome} result must read {expected[1]}, so its error.message is that text "
                f"without 'Error: ' ({kind.rule}: {self._summary(kind.rule)}); it is "
                f"{_short(message)!r}.",
            )
        if outcome == "blocked" and isinstance(res.get("content"), list):
            want = block_message(res["content"], self.contract.texts)
            if message != want:
                return Death(
                    "R44",
                    f"A block's error.message is its feedback, a line per block (a text block's "
                    f"text, any other '[<type> content]'), nothing stripped: {_short(want)!r}; "
                    f"it is {_short(message)!r}.",
                )
        if not b.free and outcome != "blocked" and text is not None:
            if message != text.removeprefix("Error: "):
                return Death(
                    "R44",
                    f"error.message is the result's text without 'Error: ' "
                    f"({_short(text.removeprefix('Error: '))!r}); it is {_short(message)!r}.",
                )
        return None

    def _expected_text(self, outcome: str, b: Branch) -> tuple[Callable[[str], bool], str] | None:
        """How the registry's text for ``outcome`` must read: a test and its description."""
        texts = self.contract.texts
        want = _EXACT.get(outcome)
        if want is not None:
            exact = texts[want]
            return (lambda t: t == exact), f"exactly {exact!r}"
        build = _PATTERNS.get(outcome)
        if outcome == "denied":
            build = _DENIAL_PATTERNS.get(b.decided_event, _any_error)
        if build is None:
            return None
        pattern = self._patterns.get(build)
        if pattern is None:
            pattern = self._patterns[build] = build(texts)
        return (lambda t: pattern.fullmatch(t) is not None), _pattern_text(outcome, b, texts)

    def _final_route(self, b: Branch) -> bool:
        if b.cs.outcome in ("post_error", "serialization_error"):
            return True
        t = self.transitions.get(b.decided)
        return t is not None and t.dest == "finalizing" and "post_policy" not in t.sources


_TRUE_BY_DEFAULT: Final = frozenset({"tool_found", "serializable"})
_CANCEL_CODES: Final = frozenset({"ABORTED", "ABORTED_BEFORE_DISPATCH"})
_REGISTRY_AUTHORED: Final = frozenset({"denied", "blocked", "args_error", "serialization_error"})
_THROWN: Final = frozenset({"body_error", "pre_error", "around_error", "post_error"})
_WRAPPER: Final = frozenset({"wrapper_success", "wrapper_error"})
_EXACT: Final = {
    "aborted": "aborted",
    "aborted_before_dispatch": "aborted_before_dispatch",
    "args_error": "args_not_serializable",
    "serialization_error": "result_not_serializable",
}
_JS_NUMBER: Final = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:e[+-][0-9]+)?"


def _template(key: str, prefix: str = "") -> Any:
    def build(texts: Mapping[str, str]) -> re.Pattern[str]:
        parts = re.split(r"(\{\w+\})", texts[key])
        regex = "".join(
            (_JS_NUMBER if p == "{ms}" else ".*") if p.startswith("{") else re.escape(p)
            for p in parts
        )
        return re.compile(re.escape(prefix) + regex, re.DOTALL)

    return build


def _any_error(texts: Mapping[str, str]) -> re.Pattern[str]:
    return re.compile(r"Error: .*", re.DOTALL)


_PATTERNS: Final = {
    "unknown_tool": _template("unknown_tool"),
    "tool_timeout": _template("tool_timeout"),
    **dict.fromkeys(_THROWN, _any_error),
}
_DENIAL_PATTERNS: Final = {
    "approval_rejected": _template("approval_rejected", "Error: "),
    "approval_cancelled": _template("approval_cancelled", "Error: "),
    "approval_unavailable": _template("approval_unavailable", "Error: "),
}


def _pattern_text(outcome: str, b: Branch, texts: Mapping[str, str]) -> str:
    if outcome == "denied" and b.decided_event in _DENIAL_PATTERNS:
        return repr("Error: " + texts[b.decided_event])
    if outcome in ("unknown_tool", "tool_timeout"):
        return repr(texts[outcome])
    return "'Error: <message>'"


def _seed_error_ok(error: Any) -> bool:
    return (
        isinstance(error, dict)
        and error.keys() == {"name", "code"}
        and all(isinstance(v, str) for v in error.values())
    )


def _code(res: Mapping[str, Any], revised: bool) -> str | None:
    error = res.get("error")
    if not isinstance(error, dict):
        return None
    if revised:
        error = error.get("info")
        if not isinstance(error, dict):
            return None
    code = error.get("code")
    return code if isinstance(code, str) else None


def _only_text(res: Mapping[str, Any]) -> str | None:
    content = res.get("content")
    if (
        isinstance(content, list)
        and len(content) == 1
        and isinstance(content[0], dict)
        and content[0].get("type") == "text"
        and isinstance(content[0].get("text"), str)
    ):
        text: str = content[0]["text"]
        return text
    return None


def _quote(res: Mapping[str, Any]) -> str:
    text = _only_text(res)
    if text is None:
        return "content " + _short(canonical_json(res.get("content")))
    return repr(_short(text))


def _quote_error(error: Any) -> str:
    if error is None:
        return "no error key"
    try:
        return "error " + _short(canonical_json(error))
    except Exception:
        return f"error {error!r}"


def _short(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _describe_outcome(kind: Any) -> str:
    what = "an error" if kind.is_error else "a success"
    code = f" with code {kind.code}" if kind.code else ""
    return f"{kind.name} ({what}{code})"


def describe(res: Mapping[str, Any]) -> str:
    """A short description of a result object for explanations."""
    is_error = res.get("isError")
    what = "an error" if is_error is True else "a success" if is_error is False else "a result"
    code = _code(res, False) or _code(res, True)
    return f"{what}{' with code ' + code if code else ''} ({_quote(res)})"


# ------------------------------------------------------------------------------------------------
# Checking calls
# ------------------------------------------------------------------------------------------------


def _key_function(name: str, fields: tuple[tuple[str, Any], ...]) -> Any:
    """A function building the automaton key of a ``name`` line from its data (fast: no loop)."""
    if len(fields) == 1:
        ((f0, d0),) = fields
        return lambda d: (name, d.get(f0, d0))
    if len(fields) == 2:
        (f0, d0), (f1, d1) = fields
        return lambda d: (name, d.get(f0, d0), d.get(f1, d1))
    if len(fields) == 3:
        (f0, d0), (f1, d1), (f2, d2) = fields
        return lambda d: (name, d.get(f0, d0), d.get(f1, d1), d.get(f2, d2))
    return lambda d: (name, *(d.get(f, default) for f, default in fields))


_AUTOMATA: dict[int, tuple[RevisionContract, Automaton]] = {}


def automaton(table: RevisionContract) -> Automaton:
    """The (shared, growing) automaton of one revision table."""
    hit = _AUTOMATA.get(id(table))
    if hit is None or hit[0] is not table:
        hit = (table, Automaton(table))
        _AUTOMATA[id(table)] = hit
    return hit[1]


def _seen(ev: TraceEvent) -> str:
    data = ev.data
    fields = [k for k in data if k not in ("trace", "call", "event") and not k.startswith("x_")]
    if ev.event == "result":
        return "result: " + describe(data["result"])
    if not fields:
        return ev.event
    inside = ", ".join(f"{k}={canonical_json(data[k])}" for k in sorted(fields))
    return f"{ev.event}({inside})"


class CallRun:
    """One call being checked, event by event: where its automaton stands and what it has seen.

    Calls are checked incrementally, so a trace file is checked in one pass over its lines with
    memory proportional to its calls, not its events.
    """

    __slots__ = (
        "call_id",
        "caller_slot",
        "config",
        "entry",
        "index",
        "last",
        "notified",
        "published",
        "resulted",
        "row",
        "slot_slot",
        "source",
        "verdict",
    )

    def __init__(self, call_id: str, entry: TraceEvent, source: str) -> None:
        self.call_id = call_id
        self.entry = entry
        self.source = source
        self.config = 0
        self.row: dict[EventKey, int] = {}
        self.index = 0  # of the last event fed, within the call
        self.last = entry
        self.published = False
        self.resulted = False
        self.notified = False
        self.caller_slot = 0  # listeners the registry holds on the caller's signal
        self.slot_slot = 0  # ... and on the slot's signal
        self.verdict: Verdict | None = None  # set at the first violation


@dataclass
class Checker:
    """Checks calls against one revision of the contract (default: the contract's default)."""

    revision: str | None = None
    contract: Contract | None = None
    table: RevisionContract = field(init=False)
    auto: Automaton = field(init=False)

    def __post_init__(self) -> None:
        self.table = revision_table(self.revision, self.contract)
        self.revision = self.table.name
        self.auto = automaton(self.table)
        fields: dict[str, tuple[tuple[str, Any], ...]] = {
            e.name: tuple((d, d in _TRUE_BY_DEFAULT) for d in e.data) for e in self.table.events
        }
        fields.update(
            stage_enter=(("stage", None),),
            fused=(("kind", None), ("aborted", None)),
            body_start=(),
            body_settle=(("how", None),),
        )
        # Events without data are their own key (a str: its hash is cached); the others get a
        # function that builds the key from the line.
        self._plain: dict[str, str] = {name: name for name, f in fields.items() if not f}
        self._keyed = {name: _key_function(name, f) for name, f in fields.items() if f}
        self._requires_caller = (
            self.table.contract.revision_info[self.table.name].get("caller_signal") == "required"
        )

    # -- one call, incrementally ---------------------------------------------------------------

    def begin(self, entry: TraceEvent, source: str, call_id: str | None = None) -> CallRun:
        """Start checking the call whose ``call_entry`` line is ``entry``."""
        data = entry.data
        run = CallRun(data["call"] if call_id is None else call_id, entry, source)
        if data["revision"] != self.table.name:
            raise TraceError(
                source,
                entry.line,
                f"call {run.call_id!r} was recorded under the {data['revision']!r} contract, but "
                f"this check is against {self.table.name!r}; run with --revision "
                f"{data['revision']}",
            )
        if data["caller"] == "none" and self._requires_caller:
            run.verdict = self._violation(
                run,
                entry,
                Death(
                    "R40",
                    f"The call has no caller signal, but the {self.table.name} contract requires "
                    "one (R40).",
                ),
                ["call_entry(caller=live)", "call_entry(caller=aborted)"],
            )
            return run
        run.config = self.auto.start(
            data["caller"],
            data["agent"],
            data["approval_seam"],
            data.get("retry"),
            data.get("wrappers", UNKNOWN),
        )
        run.row = self.auto.rows[run.config]
        return run

    def feed(self, run: CallRun, ev: TraceEvent) -> None:
        """Check the call's next event (nothing happens once the call has a verdict)."""
        if run.verdict is not None:
            return
        run.index += 1
        run.last = ev
        name = ev.event
        key: EventKey | None = self._plain.get(name)
        if key is None:
            make = self._keyed.get(name)
            if make is None:
                self._call_level(run, ev)
                return
            key = make(ev.data)
        nxt = run.row.get(key)
        if nxt is None:
            nxt = self.auto.step(run.config, key)
        if nxt < 0:
            allowed = self.auto.allowed(run.config, run.published, run.resulted, run.notified)
            run.verdict = self._violation(run, ev, self.auto.death(run.config, key), allowed)
            return
        if nxt != run.config:
            run.config = nxt
            run.row = self.auto.rows[nxt]
        if name == "publish":
            run.published = True

    def _call_level(self, run: CallRun, ev: TraceEvent) -> None:
        """listener, slot, result and notify lines: counted and ordered, not automaton steps;
        the judge's trace checks (:func:`toolcancel.judge_lines.judge_line`) decide each."""
        name, data = ev.event, ev.data
        if name in ENVIRONMENT:
            return  # what a harness saw: judged by toolcancel.judge, not by the automaton
        if name not in ON_LINE:  # a second call_entry: the readers refuse that as unusable input
            raise AssertionError(f"{name} inside a call")
        found = judge_line(run, name, data)
        death: Death | None = None
        allowed: list[str] | None = None
        if found is not None:
            death = Death(found[0].rule, found[1])
            if found[0].allowed is not None:
                allowed = found[0].allowed(run)
        elif name == "result":
            death = self._check_result(run, data["result"])
        if name == "listener" and death is None:
            attr = "caller_slot" if data["signal"] == "caller" else "slot_slot"
            setattr(run, attr, getattr(run, attr) + (1 if data["action"] == "add" else -1))
        elif name == "result":
            if death is not None and allowed is None:
                allowed = [
                    f"result of outcome {_describe_outcome(self.auto.outcomes[o])}"
                    for o in dict.fromkeys(b.cs.outcome for b in self.auto.configs[run.config])
                    if o is not None
                ]
            run.resulted = True
        elif name == "notify":
            run.notified = True
        if death is not None:
            if allowed is None:
                resulted = run.resulted and name != "result"
                notified = run.notified and name != "notify"
                allowed = self.auto.allowed(run.config, run.published, resulted, notified)
            run.verdict = self._violation(run, ev, death, allowed)

    def finish(self, run: CallRun) -> Verdict:
        """The call's verdict once its trace has ended."""
        if run.verdict is not None:
            return run.verdict
        states = sorted({b.cs.state for b in self.auto.configs[run.config]})
        found = judge_line(run, "end", {"line": run.last.line, "states": states})
        if found is None:
            return Verdict(run.call_id, "conforming", run.source)
        allowed = (
            self.auto.allowed(run.config, run.published, run.resulted, run.notified)
            if not run.resulted
            else ["notify"]
        )
        return self._violation(
            run,
            run.last,
            Death(found[0].rule, found[1]),
            allowed,
            seen="end of the call's trace",
        )

    def check_call(self, call_id: str, events: Sequence[TraceEvent], source: str) -> Verdict:
        """The verdict on one call (``events[0]`` is its ``call_entry``)."""
        run = self.begin(events[0], source, call_id)
        feed = self.feed
        for ev in events[1:]:
            if run.verdict is not None:
                break
            feed(run, ev)
        return self.finish(run)

    def _check_result(self, run: CallRun, res: Mapping[str, Any]) -> Death | None:
        """Keep the possible states whose outcome the result agrees with (None: some do)."""
        auto = self.auto
        keep = []
        first: Death | None = None
        for b in auto.configs[run.config]:
            death = auto.result_death(b, res)
            if death is None:
                keep.append(b)
            elif first is None:
                first = death
        if not keep:
            return first
        run.config = auto.filter(run.config, keep)
        run.row = auto.rows[run.config]
        return None

    def _violation(
        self,
        run: CallRun,
        ev: TraceEvent,
        death: Death,
        allowed: Sequence[str],
        seen: str | None = None,
    ) -> Verdict:
        return Verdict(
            run.call_id,
            "violation",
            run.source,
            rule=death.rule,
            title=self.auto.title(death.rule),
            event_index=run.index,
            line=ev.line,
            allowed=tuple(allowed),
            seen=seen or _seen(ev),
            explanation=death.explanation,
        )

    # -- whole traces ----------------------------------------------------------------------------

    def check_traces(self, traces: Traces, source: str = "<trace>") -> list[Verdict]:
        return [self.check_call(call, events, source) for call, events in traces.items()]

    def check_file(
        self, path: str | Path, progress: Callable[[int, int], None] | None = None
    ) -> list[Verdict]:
        """Read and check a trace file in one pass (``TraceError`` for unusable input).

        Verdicts come in the order the calls first appear.  Memory grows with the number of
        calls, not of events; the garbage collector is paused (see :func:`gc_paused`).
        """
        source = "<stdin>" if str(path) == "-" else str(path)
        runs: dict[str, CallRun] = {}
        begin, feed = self.begin, self.feed
        with gc_paused():
            for batch in iter_batches(path, self.table.contract, progress):
                for ev in batch:
                    call = ev.data["call"]
                    run = runs.get(call)
                    if run is None or ev.event == "call_entry":
                        if run is not None or ev.event != "call_entry":
                            raise entry_error(source, ev, run.entry.line if run else None)
                        runs[call] = begin(ev, source)
                    elif run.verdict is None:
                        feed(run, ev)
        return [self.finish(run) for run in runs.values()]

    def check_lines(self, lines: Sequence[Any], source: str = "<trace>") -> list[Verdict]:
        """Check in-memory trace lines (decoded JSON objects, e.g. an adapter's answer)."""
        return self.check_traces(parse_lines(lines, source, self.table.contract), source)


class RecordedRevisionChecker(Checker):
    """Checks each call against the revision its own ``call_entry`` records (``toolcancel check``
    without ``--revision``); an unknown revision there is unusable input naming the line."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._checkers: dict[str, Checker] = {self.table.name: self}
        self._owner: dict[int, Checker] = {}

    def begin(self, entry: TraceEvent, source: str, call_id: str | None = None) -> CallRun:
        revision = entry.data["revision"]
        checker = self._checkers.get(revision)
        if checker is None:
            if revision not in self.table.contract.revisions:
                raise TraceError(
                    source,
                    entry.line,
                    f"unknown contract revision {revision!r} in call_entry; choose one of "
                    f"{', '.join(self.table.contract.revisions)}",
                )
            checker = self._checkers[revision] = Checker(revision, self.table.contract)
        run = Checker.begin(checker, entry, source, call_id)
        self._owner[id(run)] = checker
        return run

    def feed(self, run: CallRun, ev: TraceEvent) -> None:
        Checker.feed(self._owner[id(run)], run, ev)

    def finish(self, run: CallRun) -> Verdict:
        return Checker.finish(self._owner.pop(id(run)), run)


def check_file(path: str | Path, revision: str | None = None) -> list[Verdict]:
    """The verdict on every call of a trace file, against ``revision`` (default: seed)."""
    return Checker(revision).check_file(path)


def check_lines(
    lines: Sequence[Any], revision: str | None = None, source: str = "<trace>"
) -> list[Verdict]:
    """The verdict on every call of in-memory trace lines."""
    return Checker(revision).check_lines(lines, source)


__all__ = [
    "Automaton",
    "Checker",
    "Death",
    "RecordedRevisionChecker",
    "Verdict",
    "check_file",
    "check_lines",
    "describe",
]
