"""verify --spec-mutants: perturbations of the transition table, judged by the table-independent
checks alone (toolcancel.selfcheck.specmutants).  The full run is ``toolcancel verify
--spec-mutants``; here a handful of known perturbations, each of which must be killed at a small
bound."""

from __future__ import annotations

from typing import Any

import pytest
from toolcancel.contract.loader import load_contract
from toolcancel.oracle.scenario_language import Scenario
from toolcancel.selfcheck.harness import run_scenario
from toolcancel.selfcheck.specmutants import Perturbation, judge, perturbations
from toolcancel.selfcheck.verifier import check


def _index(revision: str, event: str, guard: str | None = None, outcome: str | None = None) -> int:
    """The index of the non-alternative row of ``revision`` for ``event`` (with ``guard`` and
    ``outcome``, when given): looked up, so the tests survive rows being added."""
    rows = [
        t
        for t in load_contract().revision(revision).transitions
        if event in t.events
        and not t.alternative
        and (guard is None or any(name == guard for name, _ in t.guards))
        and (outcome is None or t.outcome == outcome)
    ]
    assert len(rows) == 1, rows
    return rows[0].index


def test_the_perturbations_are_every_single_row_change() -> None:
    table = load_contract().revision("seed")
    found = perturbations("seed")
    rows = [t for t in table.transitions if not t.alternative]
    assert sum(p.kind == "delete" for p in found) == len(rows)
    assert sum(p.kind == "guard" for p in found) == sum(len(t.guards) for t in rows)
    assert sum(p.kind == "outcome" for p in found) == 2 * sum(t.outcome is not None for t in rows)
    assert len({p.name for p in found}) == len(found)


def test_a_perturbation_changes_one_row_and_keeps_every_index() -> None:
    contract = load_contract()
    i = _index("seed", "pre_deny", guard="cancelled_after_entry")
    gone = Perturbation("seed", "delete", i).apply(contract)
    assert [t.index for t in gone.transitions] == [
        t.index for t in contract.transitions if t.index != i
    ]
    flipped = Perturbation("seed", "outcome", i, outcome="denied").apply(contract)
    changed = [(a, b) for a, b in zip(contract.transitions, flipped.transitions, strict=True)
               if a != b]
    assert [(a.outcome, b.outcome) for a, b in changed] == [("aborted", "denied")]
    assert load_contract().revision("seed").transitions[i].outcome == "aborted"  # not mutated


KNOWN = [
    # (revision, kind, event, guard of the row, outcome of the row, change)
    # Issue 14's example: the seed's "deny after cancellation is ABORTED" (R13, D2) deleted --
    # the revised contract's reading -- passed verify, conform and vectors --check.
    ("seed", "delete", "pre_deny", "cancelled_after_entry", None, {}),
    ("seed", "outcome", "pre_deny", "cancelled_after_entry", None, {"outcome": "denied"}),
    ("seed", "outcome", "pre_deny", None, "denied", {"outcome": None}),
    ("revised", "outcome", "pre_deny", None, "denied", {"outcome": "aborted"}),
    ("seed", "guard", "pre_deny", "cancelled_after_entry", None,
     {"guard": "cancelled_after_entry"}),
]


@pytest.mark.parametrize(("revision", "kind", "event", "guard", "outcome", "change"), KNOWN)
def test_a_known_perturbation_is_killed_by_a_table_independent_check(
    revision: str,
    kind: str,
    event: str,
    guard: str | None,
    outcome: str | None,
    change: dict[str, object],
) -> None:
    p = Perturbation(revision, kind, _index(revision, event, guard, outcome), **change)  # type: ignore[arg-type]
    verdict = judge(p, max_wrappers=0)
    assert verdict.status == "killed", (p.describe(load_contract().revision(revision)), verdict)
    assert verdict.rule in p.rules(), (p.describe(load_contract().revision(revision)), verdict)


def test_the_pre_stage_check_holds_for_the_real_registry_and_reads_no_table() -> None:
    # The check behind the kills above: with the caller aborted before C1, a seed denial reaches
    # post-execute as ABORTED (R13, D2); a revised one as the denial (R43 b).
    for revision, text in (("seed", "Error: tool call aborted"),
                           ("revised", "Error: policy refused the call")):
        obs = run_scenario(Scenario(revision=revision, pre="deny", cancel="gate:pre"))
        post_in = next(e[1] for e in obs.log if e[0] == "post_in")
        assert post_in.text == text
        assert check(obs, load_contract().revision(revision), replay=False).violations == []


def _row(
    revision: str, event: str, *guards: str, outcome: str | None = None, source: str | None = None
) -> int:
    """The non-alternative row of ``revision`` for ``event`` whose guards are exactly
    ``guards`` (and whose outcome is ``outcome``, and which leaves ``source``, when given)."""
    rows = [
        t.index
        for t in load_contract().revision(revision).transitions
        if event in t.events
        and not t.alternative
        and sorted(("!" if not holds else "") + name for name, holds in t.guards)
        == sorted(guards)
        and (outcome is None or t.outcome == outcome)
        and (source is None or source in t.sources)
    ]
    assert len(rows) == 1, rows
    return rows[0]


NEWLY_KILLED = [
    # (revision, kind, the row: event and exact guards, change, bound, the rule it is killed by)
    # Issue 14's open survivors, killed by record checks written from the prose since:
    ("seed", "guard", ("body_ok", "!aborted_at_entry"), {"guard": "aborted_at_entry"}, 0,
     "R25"),  # a seed pre-aborted entry gets none of the registry's cancellations
    ("seed", "delete", ("body_ok", "!aborted_at_entry"), {}, 1, "R18"),  # a late success kept
    # (at bound 0 only the caller aborts a body, and C3 then replaces the kept success)
    ("seed", "swap", ("base_dispatch", "listeners_done", "!aborted_at_entry", "fused_aborted"),
     {"other": ("base_dispatch", "listeners_done", "!tool_found")}, 0, "R17"),
    ("revised", "guard", ("pre_ask", "!approval_seam"), {"guard": "approval_seam"}, 0, "R5"),
    ("revised", "delete", ("around_settled", "!in_wrapper", "!exception_pending",
                           "caller_aborted", "!result_is_error", "body_invoked"), {}, 0, "R41"),
    ("revised", "delete", ("post_accept", "caller_aborted", "!result_is_error", "body_invoked"),
     {}, 0, "R28"),
    # Equivalent at bound 0 (no wrapper the harness sees), killed at bound 1: a wrapper runs
    # after the guards saw the cancellation.
    ("revised", "delete", ("guards_pass", "caller_aborted"), {}, 1, "R43"),
]  # fmt: skip


@pytest.mark.parametrize(("revision", "kind", "row", "change", "bound", "rule"), NEWLY_KILLED)
def test_an_open_survivor_is_now_killed(
    revision: str,
    kind: str,
    row: tuple[str, ...],
    change: dict[str, Any],
    bound: int,
    rule: str,
) -> None:
    if "other" in change:
        change = {"other": _row(revision, *change["other"])}
    p = Perturbation(revision, kind, _row(revision, *row), **change)
    verdict = judge(p, max_wrappers=bound)
    table = load_contract().revision(revision)
    assert (verdict.status, verdict.rule) == ("killed", rule), (p.describe(table), verdict)
    assert rule in p.rules(), f"{p.describe(table)} declares {p.rules()}"  # its own rule first


ATTRIBUTED = [
    # (revision, kind, (source, event, exact guards), change, verdict, rule) -- a kill cites a
    # rule the changed rows declare (Perturbation.rules), whatever the kind of change
    ("seed", "delete", ("pre_policy", "pre_raise", "cancelled_after_entry"), {}, "killed",
     "R14"),  # a pre-stage exception after the caller cancelled is C1' (row 3), not C1
    ("seed", "guard", ("around_before", "base_dispatch", "listeners_done", "!aborted_at_entry",
                       "fused_aborted"), {"guard": "fused_aborted"}, "killed",
     "R21"),  # a cancellation nothing caused, at base dispatch: the fused signal's predicate
    ("revised", "guard", ("guards", "guards_pass", "caller_aborted"),
     {"guard": "caller_aborted"}, "killed", "R43"),  # ... before dispatch: the caller's
    ("revised", "outcome", ("around_before", "base_dispatch", "listeners_done", "fused_aborted"),
     {"outcome": "aborted"}, "killed", "R41"),  # the outcome the row no longer gives
    ("seed", "delete", ("body", "caller_abort"), {}, "killed",
     "R18"),  # no draining: the late success kept (R18.4's row)
    ("seed", "delete", ("pre_policy", "pre_allow"), {}, "stopped",
     None),  # the registry's own machine refuses: no rule is read off the intact table
]  # fmt: skip


@pytest.mark.parametrize(("revision", "kind", "row", "change", "status", "rule"), ATTRIBUTED)
def test_a_kill_cites_a_rule_the_changed_rows_declare(
    revision: str,
    kind: str,
    row: tuple[str, ...],
    change: dict[str, Any],
    status: str,
    rule: str | None,
) -> None:
    source, event, *guards = row
    p = Perturbation(revision, kind, _row(revision, event, *guards, source=source), **change)
    verdict = judge(p, max_wrappers=0)
    table = load_contract().revision(revision)
    assert verdict.status == status, (p.describe(table), verdict)
    if rule is not None:
        assert verdict.rule == rule and rule in p.rules(), (p.describe(table), p.rules(), verdict)
