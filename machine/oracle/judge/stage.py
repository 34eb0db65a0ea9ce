"""What the pre-policy stage ends in: R5, R13-R15, R42, R43, from the call's setup and its record.

Written from ``spec/CONTRACT.md``, not from the transition table (a perturbed table, ``verify
--spec-mutants``, is judged by these checks too).  The setup says what each hook decides; the
record says when the environment aborted the caller (``caller_aborted``: after ``steps`` contract
transitions) and which decisions the registry took (its trace's ``pre_*``, ``approval_*`` and
guard lines).  The caller aborted *before* a decision when it aborted before the transition that
took it: that is the decision checkpoint C1 (revised: R43) looks at -- pre-execute's, or
approval's when the seam was asked.  From those, one plan (:class:`Plan`) per record: the rule
that decides the stage's end, what post-execute must receive (or that it must not run), and
whether the guards run; a check per rule asks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from .record import Failure, Record, Want
from .registry import RECORD, check
from .setup import (
    ANY_NAME,
    is_error,
    pre_aborted,
    received,
    revision_table,
    same_text,
    text,
    transition_steps,
)

FINAL: Final = "final"
"""Post-execute must not run: a pre-stage exception is the R3 error on the final route."""
ONWARD: Final = "onward"
"""The stage lets the call on to dispatch: what follows is the later checks' to judge."""

_DECISIONS: Final = {
    "pre": frozenset({"pre_allow", "pre_deny", "pre_ask", "pre_raise"}),
    "approval": frozenset(
        {"approval_approved", "approval_rejected", "approval_cancelled", "approval_unavailable",
         "approval_raise"}
    ),
    "guard": frozenset({"guards_pass", "guard_deny", "guard_raise"}),
}
"""The contract events that take each hook's decision (the registry's trace writes them)."""


@dataclass(frozen=True)
class Plan:
    """How the pre-policy stage must end for this setup and this abort."""

    rule: str  # the rule that decides it
    expect: str  # the text post-execute must receive, FINAL or ONWARD
    guards: bool  # whether the guards run
    decided_at: int  # the record line of the decision that ends the stage (its evidence)
    guard_at: int | None  # the record line of the guards' decision, if they ran
    seam_skipped: bool  # pre-execute asked, a seam and an agent, yet the seam was not asked


def _decisions(record: Record) -> dict[str, tuple[int, int]]:
    """Per hook (pre, approval, guard): the record line of its decision and the contract
    transition that took it, counted from 1 (:func:`.setup.transition_steps`)."""
    steps = transition_steps(record)
    found: dict[str, tuple[int, int]] = {}
    for hook, names in _DECISIONS.items():
        firsts = [at[0] for at in map(record.at, names) if at]
        if firsts:
            first = min(firsts)
            found[hook] = (first, steps[first])
    return found


def plan(record: Record, want: Want) -> Plan | None:
    """The stage's plan (worked out once per record), or None where the stage did not run
    (arguments refused at entry, a revised pre-aborted call: R42's) or the record does not say
    when the caller aborted."""
    if "stage_plan" not in record.derived:
        record.derived["stage_plan"] = _plan(record, want)
    found: Plan | None = record.derived["stage_plan"]
    return found


def _plan(record: Record, want: Want) -> Plan | None:
    s = want.scenario
    if record.revision == "revised" and pre_aborted(want) and s.args == "ok":
        return None
    decisions = _decisions(record)
    if "pre" not in decisions:
        return None  # the call stopped at entry (args_error)
    aborted = record.of("caller_aborted")
    at: int | None = None
    if s.entry_caller == "live" and not pre_aborted(want) and aborted:
        at = aborted[0].get("steps")
        if at is None:
            return None  # an adapter that does not count transitions: when is unknown
    asked = "approval" in decisions
    decided_at, decisive = decisions["approval" if asked else "pre"]
    guard_at, guard_step = decisions.get("guard", (None, None))

    def before(step: int | None) -> bool:
        """The caller aborted (after entry) before the transition ``step`` took a decision."""
        return at is not None and step is not None and at < step

    texts = revision_table(record.revision).texts
    answer = s.approval if asked else None
    raised = s.pre in ("throw", "throw_structured") or answer == "throw"
    denial: str | None = None  # the R5 reason of a denial, if the decisions make one
    if not raised:
        if s.pre == "deny":
            denial = "policy refused the call"
        elif s.pre == "ask" and not s.approval_seam:
            denial = "needs a human"
        elif s.pre == "ask" and not s.agent:
            denial = texts["ask_without_agent"].format(name=ANY_NAME)
        elif answer in ("rejected", "cancelled", "unavailable"):
            denial = texts[f"approval_{answer}"].format(name=ANY_NAME)
    guards = not raised and denial is None and (s.pre == "allow" or answer == "approved")
    if record.revision == "seed":
        if before(decisive):  # C1 beats all (row 2); C1' a pre-stage exception (row 3)
            rule, expect, guards = PRE_FAILURE if raised else C1, texts["aborted"], False
        elif raised:
            rule, expect = PRE_FAILURE, FINAL
        elif denial is not None:
            rule, expect = DENIAL, "Error: " + denial
        elif guards and s.guard == "throw":  # C1': cancelled when the guard threw?
            rule, expect = PRE_FAILURE, texts["aborted"] if before(guard_step) else FINAL
        elif guards and s.guard == "deny" and not before(guard_step):
            rule, expect = GUARDS, "Error: guard refused the call"
        else:
            rule, expect = GUARDS, ONWARD
    else:
        # R43 orders a decision against a cancellation; with none before it, the decision's
        # own rule (the seed's) is what a wrong result breaks.
        if raised or (guards and s.guard == "throw"):
            step = decisive if raised else guard_step
            rule, expect = ORDER if before(step) else PRE_FAILURE, FINAL  # (d) a failure beats it
        elif answer == "cancelled" and before(decisive):
            rule, expect = ORDER, texts["aborted_before_dispatch"]  # (a)
        elif denial is not None:
            rule = ORDER if before(decisive) else DENIAL
            expect = "Error: " + denial  # (b) denials beat cancellation
        elif guards and s.guard == "deny":
            rule = ORDER if before(guard_step) else GUARDS
            expect = "Error: guard refused the call"  # (b)
        elif guards and before(guard_step):
            rule, expect = ORDER, texts["aborted_before_dispatch"]  # (c)
        else:
            rule, expect = ORDER, ONWARD
    # R5: the seam is asked exactly when pre-execute asks, a seam is mounted and the call has an
    # agent; skipping it is the MAY (D1) only once the caller aborted before pre-execute decided
    seam = s.pre == "ask" and s.approval_seam and s.agent and not before(decisions["pre"][1])
    return Plan(rule, expect, guards, decided_at, guard_at, seam and not asked)


def _ends(record: Record, want: Plan) -> Failure | None:
    """Whether the stage ended as ``want`` says: the guards ran exactly when they must, and a
    stage that ended the call ran no wrapper nor body and handed post-execute what it must
    (nothing, on the final route)."""
    if (want.guard_at is not None) != want.guards:
        ran = want.guard_at is not None
        return Failure(
            want.rule,
            want.decided_at if want.guard_at is None else want.guard_at,
            "pre_stage",
            f"the guards {'ran' if ran else 'did not run'}, but they must"
            f"{'' if want.guards else ' not'} here",
            "guards run" if want.guards else "no guard runs",
            "they ran" if ran else "they did not",
        )
    if want.expect == ONWARD:
        return None
    inside = record.at("wrapper_enter") + record.starts()
    if inside:
        return Failure(want.rule, min(inside), "pre_stage",
                       "the call ended in the pre-policy stage, yet an around wrapper or the "
                       "body ran", "neither runs", "one ran")  # fmt: skip
    _, post_in = received(record)
    returned = record.of("returned")
    got: Any = returned[0]["result"] if returned else None
    if want.expect == FINAL:
        if post_in is None and is_error(got):
            return None
        return Failure(want.rule, want.decided_at, "pre_stage",
                       "a pre-stage exception must be the R3 error on the final route "
                       f"(post-execute got {text(post_in) if post_in else None!r}, the result "
                       f"is {text(got)!r})", "the final route", text(got))  # fmt: skip
    if post_in is not None and same_text(want.expect, text(post_in)):
        return None
    seen = "no result (post-execute did not run)" if post_in is None else repr(text(post_in))
    return Failure(want.rule, want.decided_at, "pre_stage",
                   f"post-execute must receive {want.expect!r}, it got {seen}",
                   want.expect, seen)  # fmt: skip


def _stage_check(rule: str, words: str) -> str:
    """Register the check of the stage's end for the plans ``rule`` decides; its rule, which
    :func:`_plan` names by the constant it is bound to (the registration writes the id)."""

    def decides(record: Record, want: Want | None) -> bool:
        assert want is not None
        found = plan(record, want)
        return found is not None and found.rule == rule

    decides.__name__ = f"_stage_decided_by_{rule}"

    def stage_ends_as_the_rule_says(record: Record, want: Want | None) -> Failure | None:
        assert want is not None
        found = plan(record, want)
        if found is None or found.rule != rule:
            return None
        return _ends(record, found)

    stage_ends_as_the_rule_says.__doc__ = (
        f"The pre-policy stage ends as {rule} says for this setup and this abort: " + words
    )
    stage_ends_as_the_rule_says.__name__ = f"stage_ends_as_{rule}_says"
    check(
        rule,
        RECORD,
        "pre_stage",
        reads=("post_received", "returned", "call_entry"),
        levels=frozenset({"trace"}),
        when=(decides, f"{rule} decides how the pre-policy stage ends"),
        needs_setup=True,
    )(stage_ends_as_the_rule_says)
    return rule


DENIAL: Final = _stage_check("R5", "a denial's text reaches post-execute (the seed's, or the "
                             "revised one with no cancellation before it).")
C1: Final = _stage_check("R13", "the seed's C1 -- the caller aborted before the decision -- "
                         "beats every decision: ABORTED on the post route, no guard run.")
PRE_FAILURE: Final = _stage_check("R14", "a pre-stage exception takes the final route (the "
                                  "seed's C1' cancels a guard that threw after the caller "
                                  "aborted).")
GUARDS: Final = _stage_check("R15", "the guards run exactly after an allow or an approved ask; "
                             "a guard's refusal reaches post-execute.")
ORDER: Final = _stage_check("R43", "revised: a failure beats a cancellation, a denial beats it "
                            "too, else ABORTED_BEFORE_DISPATCH.")


def _pre_asked(record: Record, want: Want | None) -> bool:
    assert want is not None
    found = plan(record, want)
    return found is not None and want.scenario.pre == "ask"


@check(
    "R5",
    RECORD,
    "pre_stage",
    reads=("call_entry",),
    levels=frozenset({"trace"}),
    when=(_pre_asked, "pre-execute asked"),
    needs_setup=True,
)
def seam_asked_when_pre_execute_asks(record: Record, want: Want | None) -> Failure | None:
    """Pre-execute's ask reaches the approval seam whenever a seam is mounted and the call has
    an agent, unless the caller aborted before pre-execute decided (the D1 MAY)."""
    assert want is not None
    found = plan(record, want)
    if found is None or not found.seam_skipped:
        return None
    return Failure.of(seam_asked_when_pre_execute_asks, found.decided_at, "pre_stage",
                      "pre-execute asked, a seam is mounted and the call has an agent, yet the "
                      "approval seam was not asked", "the seam is asked", "it was not")  # fmt: skip


def _revised_pre_aborted(record: Record, want: Want | None) -> bool:
    assert want is not None
    return record.revision == "revised" and pre_aborted(want) and want.scenario.args == "ok"


@check(
    "R42",
    RECORD,
    "pre_stage",
    reads=("returned", "call_entry"),
    levels=frozenset({"trace"}),
    when=(_revised_pre_aborted, "revised: the caller was aborted at entry"),
    needs_setup=True,
)
def pre_aborted_call_stops_at_entry(record: Record, want: Want | None) -> Failure | None:
    """Revised: a call entered with its caller already aborted stops after entry, with
    ABORTED_BEFORE_DISPATCH, before pre-execute runs."""
    if not _revised_pre_aborted(record, want):
        return None
    wanted = revision_table(record.revision).texts["aborted_before_dispatch"]
    decided = _decisions(record).get("pre")
    j = record.at("returned")[0]
    got = text(record.lines[j]["result"])
    if decided is None and got == wanted:
        return None
    return Failure.of(pre_aborted_call_stops_at_entry, decided[0] if decided else j, "pre_stage",
                      f"a pre-aborted call must stop after entry with {wanted!r}, got {got!r}",
                      wanted, got)  # fmt: skip
