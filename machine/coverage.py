"""Which contract rules ``toolcancel conform`` can decide at each conformance level.

An adapter declares a level in its hello (``spec/vectors/README.md``):

* ``trace`` (white box): it reports the registry's trace as well as what a user observes, so
  conform replays every contract event and can decide every rule a transition carries;
* ``outcome`` (black box): it reports only what a registry's user observes from outside -- the
  result or the exception, each body invocation's signal at start and at settle, when
  ``execute()`` settled relative to the bodies, the notifications and their identity with the
  result, and (optionally) listener counts on the caller's signal.

This table is the single source of the per-rule status conform prints and ``--json`` carries; the
README's table is tested against it.  A status is one of:

* ``checked`` -- every vector that exercises the rule decides it at that level;
* ``outcome`` -- checked at outcome level only: what the rule decides is checked through its
  observable consequences (the result, whether and how the body started), not the internal
  steps that reach it;
* ``none`` -- not checked, and ``why`` says why.

A rule may also *need* an observation the protocol leaves optional (``needs``): R22 is decided
from listener lines (trace) or listener counts (outcome); an adapter that reports none gets "not
checked" for it, with that reason, instead of a silent pass.  The scheduler's rules (R9,
R36-R38) need ``turns``: the turn vectors run only through an adapter whose hello declares it
(an adapter written before turn vectors existed still runs, and is told loudly what it left
unchecked).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

CHECKED: Final = "checked"
OUTCOME: Final = "outcome"
NONE: Final = "none"


@dataclass(frozen=True)
class RuleCoverage:
    """How far conform decides one rule: at trace level, at outcome level, and why not more."""

    trace: str
    outcome: str
    why: str = ""
    needs: str | None = None  # an optional observation the rule's check depends on


_STEPS = "the result and whether the body started show the decision, not the steps that made it"

COVERAGE: Final[dict[str, RuleCoverage]] = {
    "R1": RuleCoverage(CHECKED, CHECKED),
    "R2": RuleCoverage(CHECKED, CHECKED),
    "R3": RuleCoverage(CHECKED, CHECKED),
    "R4": RuleCoverage(CHECKED, CHECKED),
    "R5": RuleCoverage(CHECKED, CHECKED),
    "R6": RuleCoverage(CHECKED, CHECKED),
    "R7": RuleCoverage(CHECKED, CHECKED),
    "R8": RuleCoverage(CHECKED, CHECKED),
    "R9": RuleCoverage(CHECKED, CHECKED, needs="turns"),
    "R10": RuleCoverage(CHECKED, OUTCOME, "which stages ran shows in the result, not their order"),
    "R11": RuleCoverage(CHECKED, OUTCOME, _STEPS),
    "R12": RuleCoverage(CHECKED, OUTCOME, _STEPS),
    "R13": RuleCoverage(CHECKED, OUTCOME, _STEPS),
    "R14": RuleCoverage(CHECKED, OUTCOME, _STEPS),
    "R15": RuleCoverage(CHECKED, OUTCOME, _STEPS),
    "R16": RuleCoverage(CHECKED, OUTCOME, "the waterfall's order shows only through results"),
    "R17": RuleCoverage(CHECKED, OUTCOME, _STEPS),
    "R18": RuleCoverage(CHECKED, CHECKED),
    "R19": RuleCoverage(CHECKED, OUTCOME, _STEPS),
    "R20": RuleCoverage(CHECKED, OUTCOME, _STEPS),
    "R21": RuleCoverage(CHECKED, CHECKED),
    "R22": RuleCoverage(
        CHECKED,
        OUTCOME,
        "listener counts before and after show a listener that outlives the call, not one that "
        "the caller's abort consumed, nor when listeners came and went",
        needs="listeners",
    ),
    "R23": RuleCoverage(
        CHECKED,
        OUTCOME,
        "the slot's value shows in the body's signal and, when reported, in what each wrapper "
        "finds after next(); not what hooks see before the body",
    ),
    "R24": RuleCoverage(
        CHECKED,
        OUTCOME,
        "the approval's effect shows in the result and, when reported, the identity of the "
        "signal it received; not that its answer is awaited",
    ),
    "R25": RuleCoverage(CHECKED, CHECKED),
    "R26": RuleCoverage(CHECKED, CHECKED),
    "R27": RuleCoverage(CHECKED, CHECKED),
    "R28": RuleCoverage(CHECKED, CHECKED),
    "R29": RuleCoverage(CHECKED, CHECKED),
    "R30": RuleCoverage(CHECKED, CHECKED),
    "R31": RuleCoverage(CHECKED, CHECKED),
    "R32": RuleCoverage(
        NONE, NONE, "an invalid budget fails registration; no vector registers one"
    ),
    "R33": RuleCoverage(CHECKED, OUTCOME, "the timeout wrapper shows through body signals"),
    "R34": RuleCoverage(CHECKED, CHECKED),
    "R35": RuleCoverage(
        NONE, NONE, "no transition carries it; its effect is checked as R21 and R34"
    ),
    "R36": RuleCoverage(CHECKED, CHECKED, needs="turns"),
    "R37": RuleCoverage(CHECKED, CHECKED, needs="turns"),
    "R38": RuleCoverage(CHECKED, CHECKED, needs="turns"),
    "R39": RuleCoverage(
        NONE, NONE, "checked through the rules of the outcomes it picks, not as a rule of its own"
    ),
    "R40": RuleCoverage(
        NONE, NONE, "a call without a caller signal is a usage error; no vector makes one"
    ),
    "R41": RuleCoverage(CHECKED, CHECKED),
    "R42": RuleCoverage(CHECKED, CHECKED),
    "R43": RuleCoverage(CHECKED, OUTCOME, _STEPS),
    "R44": RuleCoverage(CHECKED, CHECKED),
}

TURNS_WHY: Final = (
    "THE SCHEDULER WAS NOT RUN: the adapter's hello does not declare turns, so no turn vector "
    "was sent"
)
NEEDS_WHY: Final = {
    ("listeners", "trace"): "the adapter wrote no listener lines",
    ("listeners", "outcome"): "the adapter reported no listener counts",
    ("turns", "trace"): TURNS_WHY,
    ("turns", "outcome"): TURNS_WHY,
}
"""Why a rule is not checked when the run lacked the optional observation it needs."""


def level_status(rule: str, level: str) -> str:
    """``checked``, ``outcome`` or ``none``: what the table says for ``rule`` at ``level``."""
    cov = COVERAGE.get(rule)
    if cov is None:
        return CHECKED  # a pseudo rule such as protocol
    return cov.trace if level == "trace" else cov.outcome


def decidable(rule: str, level: str) -> bool:
    """Whether conform can decide ``rule`` (fully or by its consequences) at ``level``."""
    return level_status(rule, level) != NONE


def rule_status(rule: str, level: str, *, exercised: bool, seen: frozenset[str]) -> tuple[str, str]:
    """The status a run reports for ``rule`` and why: the table, then what the run showed.

    ``exercised``: some vector of the run exercised the rule (passed or failed citing it);
    ``seen``: the optional observations some answer of the run carried (``listeners``).
    """
    cov = COVERAGE.get(rule, RuleCoverage(CHECKED, CHECKED))
    status = level_status(rule, level)
    if status == NONE:
        return NONE, cov.why
    if cov.needs is not None and cov.needs not in seen:
        return NONE, NEEDS_WHY[(cov.needs, level)]
    if not exercised:
        return NONE, "no vector of this run exercised it"
    return status, cov.why if status == OUTCOME else ""


_WORDS: Final = {CHECKED: "checked", OUTCOME: "outcome level only", NONE: "not checked"}


def markdown_table(titles: dict[str, str]) -> str:
    """The per-rule table of ``spec/vectors/README.md`` (tested to be the README's own)."""
    lines = [
        "| rule | title | trace level | outcome level | why not (fully) checked |",
        "| --- | --- | --- | --- | --- |",
    ]
    for rule, cov in COVERAGE.items():
        why = cov.why
        if cov.needs == "turns":
            why = "needs an adapter that runs turns (optional: `turns` in its hello), else not "
            why += "checked"
        elif cov.needs is not None:
            why = f"{why}; needs {cov.needs} observations (optional), else not checked"
        lines.append(
            f"| {rule} | {titles.get(rule, '')} | {_WORDS[cov.trace]} | {_WORDS[cov.outcome]} "
            f"| {why} |"
        )
    return "\n".join(lines)
