"""The trace checker: accepts every behaviour the contract allows, cites the rule of the rest.

Why these tests: an oracle is worth what its verdicts are worth both ways.  So:

* traces our registry records, over many configurations and every cancellation point, conform;
* the MAY points are accepted (a seed or revised call that skips approval after a cancellation in
  pre-execute, D1), and what they do not cover is not;
* every single-event deletion, duplication and adjacent swap of the events that carry the
  contract's timing (body start and settle, aborts, result, notify, and their contract neighbours)
  is either accepted -- and then provably harmless: only cancellation timing or listener order
  moved, and the reference machine replaying the edited events reaches the same outcome -- or
  rejected with a rule id of the contract; never a crash;
* hand-broken traces are rejected citing the rule they break, and so are the traces of the
  deliberately broken registries whose faults a trace can show.
"""

from __future__ import annotations

import copy
import functools
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from toolcancel import ContractViolation, load_contract
from toolcancel.contract.core import Occurrence, initial_state, step
from toolcancel.contract.trace import TraceRecorder
from toolcancel.contract.trace_reader import TraceError
from toolcancel.oracle.judge.checker import Checker, Verdict, check_lines
from toolcancel.oracle.scenario_language import Scenario
from toolcancel.runtime.registry import ToolRegistry
from toolcancel.runtime.virtual_time import VirtualClock, run
from toolcancel.selfcheck.harness import Harness
from toolcancel.selfcheck.space import configurations

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = load_contract()
DATA = {e.name: e.data for e in CONTRACT.events}

Line = dict[str, Any]


def record(scenario: Scenario, factory: Callable[..., ToolRegistry] = ToolRegistry) -> list[Line]:
    recorder = TraceRecorder()
    clock = VirtualClock()
    run(Harness(scenario, functools.partial(factory, trace=recorder), clock).run(), clock=clock)
    return recorder.lines


def record_many(scenarios: list[Scenario]) -> list[Line]:
    """One trace of many calls (ids c0, c1, ...), recorded on one virtual-time loop."""
    recorder = TraceRecorder()
    factory = functools.partial(ToolRegistry, trace=recorder)

    async def go(clock: VirtualClock) -> None:
        for n, scenario in enumerate(scenarios):
            start = len(recorder.lines)
            await Harness(scenario, factory, clock).run()
            for line in recorder.lines[start:]:
                line["call"] = f"c{n}"

    clock = VirtualClock()
    run(go(clock), clock=clock)
    return recorder.lines


def verdict(lines: list[Line], revision: str = "seed") -> Verdict:
    (only,) = check_lines(lines, revision)
    return only


def violation(lines: list[Line], revision: str = "seed") -> Verdict:
    v = verdict(lines, revision)
    assert not v.conforming, "the checker accepted a trace that breaks the contract"
    return v


def events(lines: list[Line]) -> list[str]:
    return [ln["event"] for ln in lines]


def at(lines: list[Line], event: str, nth: int = 0) -> int:
    return [i for i, ln in enumerate(lines) if ln["event"] == event][nth]


def line(event: str, **fields: Any) -> Line:
    return {"trace": 1, "call": "c1", "event": event, **fields}


# ------------------------------------------------------------------------------------------------
# Our registry's traces conform
# ------------------------------------------------------------------------------------------------


@functools.cache
def space(revision: str) -> tuple[Scenario, ...]:
    return tuple(configurations(revision, max_wrappers=1))


TWO_WRAPPERS = [
    ("retry", "delegate"),
    ("wait_before", "replace_aborting"),
    ("replace_live", "wait_after"),
    ("remove", "retry"),
    ("wait_after", "throw_after"),
    ("replace_aborted", "delegate"),
]


def cancellation_points(config: Scenario) -> Iterator[Scenario]:
    yield config
    if config.caller != "live":
        return
    steps = sum(1 for ln in record(config) if ln["event"] in DATA)
    for cancel in ("before_entry", "gate:body", "after", *(f"step:{k}" for k in range(1, steps))):
        yield config.with_cancel(cancel)


@pytest.mark.parametrize("revision", ["seed", "revised"])
def test_traces_our_registry_records_conform(revision: str) -> None:
    configs = list(space(revision)[::31])
    configs += [
        Scenario(revision=revision, wrappers=w, timeout=t, body=b)
        for w in TWO_WRAPPERS
        for t in ("absent", "timer_first")
        for b in ("success", "defer_throw")
    ]
    scenarios = [s for config in configs for s in cancellation_points(config)]
    lines = record_many(scenarios)
    verdicts = check_lines(lines, revision)
    assert len(verdicts) == len(scenarios) > 1200
    bad = [(v, scenarios[int(v.call_id[1:])].as_code()) for v in verdicts if not v.conforming]
    assert not bad, bad[:3]


# ------------------------------------------------------------------------------------------------
# Every single-event edit: accepted only when harmless, else rejected with a contract rule id
# ------------------------------------------------------------------------------------------------

EDITED = {"body_start", "body_settle", "caller_abort", "fused_abort", "result", "notify"}
NEIGHBOURS = {"body_ok", "body_raise", "publish"}
TIMING_ONLY = {"caller_abort", "fused_abort", "listener", "slot"}

EDIT_SCENARIOS = {
    "plain success": Scenario(),
    "cancel in pre": Scenario(cancel="gate:pre"),
    "cancel during body": Scenario(cancel="gate:body"),
    "cancel during a throwing body": Scenario(body="throw", cancel="gate:body"),
    "wrapper short-circuit": Scenario(wrappers=("short_success",)),
    "wrapper short-circuit, cancelled": Scenario(
        wrappers=("wait_before", "short_error"), cancel="gate:w0_before"
    ),
    "timer first": Scenario(timeout="timer_first"),
    "timer first, then the caller": Scenario(timeout="timer_first", cancel="gate:post"),
    "retry": Scenario(wrappers=("retry",), cancel="gate:body"),
}


def edits(lines: list[Line]) -> Iterator[tuple[str, list[Line]]]:
    """Every deletion, duplication and adjacent swap involving an edited kind of event."""
    for i, ln in enumerate(lines):
        if ln["event"] not in EDITED | NEIGHBOURS:
            continue
        yield f"delete {ln['event']}@{i}", lines[:i] + lines[i + 1 :]
        yield f"duplicate {ln['event']}@{i}", [*lines[: i + 1], dict(ln), *lines[i + 1 :]]
        for j in (i - 1, i):
            if 1 <= j and j + 1 < len(lines):  # call_entry stays first: that is the format
                swapped = list(lines)
                swapped[j], swapped[j + 1] = swapped[j + 1], swapped[j]
                yield f"swap {lines[j]['event']}@{j}<->{lines[j + 1]['event']}", swapped


def skeleton(lines: list[Line]) -> list[Line]:
    return [ln for ln in lines if ln["event"] not in TIMING_ONLY]


def reference_outcome(lines: list[Line], revision: str) -> str | None:
    """The outcome the reference machine (``core.step``, no alternatives) reaches replaying
    the trace's contract events; None if it refuses one."""
    entry = lines[0]
    s = initial_state(
        CONTRACT.revision(revision),
        entry["caller"],
        has_agent=entry["agent"],
        approval_seam=entry["approval_seam"],
    )
    table = CONTRACT.revision(revision)
    try:
        for ln in lines:
            if ln["event"] in DATA:
                fields = {d: ln[d] for d in DATA[ln["event"]] if d in ln}
                _, s = step(table, s, Occurrence(ln["event"], **fields))
    except ContractViolation:
        return None
    return s.outcome if s.state == "materialized" else None


EXPECTED_RULES = {
    ("delete", "result"): {"R31"},
    ("duplicate", "result"): {"R31"},
    ("delete", "notify"): {"R31"},
    ("duplicate", "notify"): {"R31"},
    ("duplicate", "publish"): {"R31"},
    ("delete", "body_settle"): {"R27"},
    ("duplicate", "body_settle"): {"R27"},
    ("duplicate", "body_start"): {"R27"},
    ("delete", "body_start"): {"R18"},
    ("delete", "body_ok"): {"R18"},
    ("delete", "body_raise"): {"R18"},
    ("duplicate", "body_ok"): {"R18"},
}


@pytest.mark.parametrize("revision", ["seed", "revised"])
@pytest.mark.parametrize("name", list(EDIT_SCENARIOS))
@pytest.mark.rules("R18", "R27", "R31")
def test_every_single_event_edit_is_harmless_or_rejected_with_a_rule(
    name: str, revision: str
) -> None:
    scenario = Scenario(**{**EDIT_SCENARIOS[name].to_data(), "revision": revision})
    scenario = Scenario.from_data({**scenario.to_data()})
    original = record(scenario)
    assert verdict(original, revision).conforming
    want = reference_outcome(original, revision)
    assert want is not None
    rule_ids = {r.id for r in CONTRACT.revision(revision).rules}
    accepted = rejected = 0
    for what, edited in edits(original):
        v = verdict(edited, revision)  # never raises: the edit keeps every line well-formed
        if v.conforming:
            accepted += 1
            assert skeleton(edited) == skeleton(original), (
                f"{what} was accepted but changes more than cancellation timing"
            )
            assert reference_outcome(edited, revision) == want, (
                f"{what} was accepted but the reference reaches another outcome"
            )
            continue
        rejected += 1
        assert v.rule in rule_ids, (what, v)
        assert v.explanation and v.seen and v.line is not None and v.event_index is not None
        kind, event = what.split(" ")[0], what.split(" ")[1].split("@")[0]
        if (kind, event) in EXPECTED_RULES:
            assert v.rule in EXPECTED_RULES[(kind, event)], (what, v)
    assert rejected > 8
    if "cancel" in name or "timer" in name:
        assert accepted > 0  # e.g. a repeated abort, or an abort moved past an observation


# ------------------------------------------------------------------------------------------------
# MAY points
# ------------------------------------------------------------------------------------------------


def without(lines: list[Line], drop: Callable[[Line], bool]) -> list[Line]:
    return [ln for ln in lines if not drop(ln)]


@pytest.mark.rules("R13")
def test_seed_may_skip_approval_after_a_cancellation_in_pre_execute() -> None:
    reference = record(Scenario(pre="ask", cancel="gate:pre"))
    assert "approval_approved" in events(reference) and verdict(reference).conforming
    skipping = without(
        reference,
        lambda ln: ln["event"].startswith("approval_") or ln.get("stage") == "approval",
    )
    assert verdict(skipping).conforming
    assert skipping[-2]["result"] == reference[-2]["result"]


@pytest.mark.rules("R43")
def test_revised_may_skip_approval_and_guards_after_a_cancellation_in_pre_execute() -> None:
    reference = record(Scenario(revision="revised", pre="ask", cancel="gate:pre"))
    assert "guards_pass" in events(reference) and verdict(reference, "revised").conforming
    skipping = without(
        reference,
        lambda ln: (
            ln["event"].startswith(("approval_", "guard"))
            or ln.get("stage") in ("approval", "guards")
        ),
    )
    assert verdict(skipping, "revised").conforming


@pytest.mark.rules("R5")
def test_skipping_approval_without_a_cancellation_is_not_allowed() -> None:
    reference = record(Scenario(pre="ask", post="block"))
    skipping = without(
        reference,
        lambda ln: (
            ln["event"].startswith(("approval_", "guard", "wrapper", "base", "body"))
            or ln["event"] in ("fused", "listener", "around_settled")
            or ln.get("stage") in ("approval", "guards")
        ),
    )
    v = violation(skipping)
    assert v.rule == "R5", v
    assert v.seen == 'stage_enter(stage="post")'


@pytest.mark.rules("R13", "R39")
def test_a_denial_where_seed_row_2_requires_aborted_cites_r13() -> None:
    lines = record(Scenario(pre="deny", cancel="gate:pre"))
    assert lines[at(lines, "result")]["result"]["error"]["code"] == "ABORTED"
    lines[at(lines, "result")]["result"] = {
        "content": [{"type": "text", "text": "Error: policy refused the call"}],
        "isError": True,
    }
    v = violation(lines)
    assert (v.rule, v.title, v.line, v.event_index) == ("R13", "Checkpoint C1", 9, 8)
    assert "decided at pre_deny" in (v.explanation or "")
    assert v.allowed == ("result of outcome aborted (an error with code ABORTED)",)


@pytest.mark.rules("R43")
def test_revised_denial_beats_cancellation_so_aborted_cites_r43() -> None:
    lines = record(Scenario(revision="revised", pre="deny", cancel="gate:pre"))
    assert verdict(lines, "revised").conforming
    lines[at(lines, "result")]["result"] = {
        "content": [{"type": "text", "text": "Error: tool call aborted before dispatch"}],
        "isError": True,
        "error": {
            "message": "tool call aborted before dispatch",
            "info": {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"},
        },
    }
    assert violation(lines, "revised").rule == "R43"


# ------------------------------------------------------------------------------------------------
# Hand-broken traces cite the rule they break
# ------------------------------------------------------------------------------------------------


def replace_result(lines: list[Line], edit: Callable[[dict[str, Any]], None]) -> list[Line]:
    out = copy.deepcopy(lines)
    edit(out[at(out, "result")]["result"])
    return out


@pytest.mark.rules("R13")
def test_running_guards_and_the_body_after_a_cancellation_in_pre_cites_r13() -> None:
    lines = record(Scenario())
    lines.insert(at(lines, "pre_allow"), line("caller_abort"))
    v = violation(lines)
    assert (v.rule, v.seen) == ("R13", 'stage_enter(stage="guards")')
    assert "cancelled_after_entry" in (v.explanation or "")


@pytest.mark.rules("R28")
def test_a_body_start_after_a_cancellation_before_c2_cites_r28() -> None:
    lines = record(Scenario(wrappers=("wait_before",)))
    dispatch = at(lines, "base_dispatch")
    lines[dispatch:dispatch] = [line("caller_abort")]
    del lines[dispatch + 1]  # no base_dispatch: the body just starts
    v = violation(lines)
    assert v.rule == "R28", v


@pytest.mark.rules("R17")
def test_invoking_the_body_with_an_aborted_fused_signal_cites_r17() -> None:
    lines = record(Scenario())
    lines[at(lines, "fused")]["aborted"] = True
    assert violation(lines).rule == "R17"


@pytest.mark.rules("R14")
def test_post_execute_on_the_final_route_cites_r14() -> None:
    lines = record(Scenario(pre="throw"))
    publish = at(lines, "publish")
    lines[publish:publish] = [line("stage_enter", stage="post"), line("post_accept")]
    v = violation(lines)
    assert (v.rule, v.event_index) == ("R14", publish)


@pytest.mark.rules("R21")
def test_a_detached_caller_signal_cites_r21() -> None:
    lines = record(Scenario(wrappers=("replace_live",)))
    lines[at(lines, "fused")]["kind"] = "slot"
    v = violation(lines)
    assert v.rule == "R21" and "detached" in (v.explanation or "")


@pytest.mark.rules("R25")
def test_a_pre_aborted_seed_body_with_a_live_signal_cites_r25() -> None:
    lines = record(Scenario(caller="aborted"))
    lines[at(lines, "fused")]["aborted"] = False
    assert violation(lines).rule == "R25"


@pytest.mark.rules("R22")
def test_a_listener_left_on_the_caller_signal_cites_r22() -> None:
    lines = record(Scenario(wrappers=("replace_live",)))
    removes = [i for i, ln in enumerate(lines) if ln.get("action") == "remove"]
    del lines[removes[0]]
    v = violation(lines)
    assert (v.rule, v.seen.split(":")[0]) == ("R22", "result")
    assert "1 on the caller signal" in (v.explanation or "")
    unbalanced = record(Scenario())
    unbalanced.insert(1, line("listener", signal="slot", action="remove"))
    assert violation(unbalanced).rule == "R22"


@pytest.mark.rules("R23")
def test_a_slot_change_after_publication_cites_r23() -> None:
    lines = record(Scenario())
    lines.append(line("slot", action="remove", aborted=False))
    assert violation(lines).rule == "R23"


@pytest.mark.rules("R27")
def test_publishing_while_post_execute_runs_cites_r27() -> None:
    lines = record(Scenario())
    del lines[at(lines, "post_accept")]
    assert violation(lines).rule == "R27"


@pytest.mark.rules("R10")
def test_a_decision_without_its_stage_cites_r10() -> None:
    lines = record(Scenario())
    del lines[at(lines, "stage_enter")]
    v = violation(lines)
    assert (v.rule, v.seen) == ("R10", "pre_allow")


@pytest.mark.rules("R16")
def test_a_wrapper_returning_outside_any_wrapper_cites_r16() -> None:
    lines = record(Scenario())
    settled = at(lines, "around_settled")
    lines.insert(settled, line("wrapper_returned", passthrough=True))
    assert violation(lines).rule == "R16"


@pytest.mark.rules("R31")
def test_a_call_that_never_publishes_is_a_violation_at_its_last_line() -> None:
    lines = record(Scenario(cancel="gate:post"))
    cut = lines[: at(lines, "post_accept")]
    v = violation(cut)
    assert (v.rule, v.seen, v.line, v.event_index) == (
        "R31",
        "end of the call's trace",
        len(cut),
        len(cut) - 1,
    )
    assert "never published" in (v.explanation or "")


@pytest.mark.rules("R4", "R7")
def test_an_aborted_result_with_another_text_cites_r4() -> None:
    lines = record(Scenario(cancel="gate:post"))  # ABORTED decided at C4, after post-execute
    broken = replace_result(lines, lambda r: r["content"][0].update(text="Error: cancelled"))
    v = violation(broken)
    assert v.rule == "R4" and "'Error: tool call aborted'" in (v.explanation or "")
    with_meta = replace_result(lines, lambda r: r.update(meta={"rows": 1}))
    assert violation(with_meta).rule == "R4"
    # Before post-execute, an accept may have replaced the content (R7): the text is free then,
    # but isError and the code are not.
    earlier = record(Scenario(cancel="gate:body"))
    rewritten = replace_result(earlier, lambda r: r["content"][0].update(text="rewritten"))
    assert verdict(rewritten).conforming
    uncoded = replace_result(earlier, lambda r: r.pop("error"))
    assert violation(uncoded).rule == "R18"


@pytest.mark.rules("R41")
def test_revised_cancellation_codes_are_told_apart() -> None:
    lines = record(Scenario(revision="revised", cancel="gate:body"))
    assert verdict(lines, "revised").conforming

    def before_dispatch(r: dict[str, Any]) -> None:
        r["content"][0]["text"] = "Error: tool call aborted before dispatch"
        r["error"] = {
            "message": "tool call aborted before dispatch",
            "info": {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"},
        }

    assert violation(replace_result(lines, before_dispatch), "revised").rule == "R41"


@pytest.mark.rules("R44")
def test_revised_error_shape_is_checked() -> None:
    lines = record(Scenario(revision="revised", pre="deny"))
    assert verdict(lines, "revised").conforming
    assert violation(replace_result(lines, lambda r: r.pop("error")), "revised").rule == "R44"
    seed = record(Scenario(pre="deny"))
    broken = replace_result(seed, lambda r: r.update(error={"message": "policy refused"}))
    assert violation(broken).rule == "R5"


@pytest.mark.rules("R5")
def test_the_registry_authored_denial_texts_are_exact() -> None:
    # The revised error.message keeps the denial's text even past a post-execute accept.
    lines = record(Scenario(revision="revised", pre="ask", approval="rejected"))
    assert verdict(lines, "revised").conforming

    def reworded(r: dict[str, Any]) -> None:
        r["content"][0]["text"] = "Error: rejected"
        r["error"]["message"] = "rejected"

    v = violation(replace_result(lines, reworded), "revised")
    assert v.rule == "R5" and "the user rejected tool" in (v.explanation or "")


@pytest.mark.rules("R6", "R8", "R11", "R30")
def test_registry_texts_of_every_other_kind_are_exact() -> None:
    def oops(r: dict[str, Any]) -> None:
        r["content"][0]["text"] = "Error: oops"
        if "message" in r.get("error", {}):
            r["error"]["message"] = "oops"

    cases = [
        (Scenario(revision="revised", tool_known=False), "R6"),
        (Scenario(revision="revised", timeout="timer_first"), "R8"),
        (Scenario(args="not_serializable"), "R11"),
        (Scenario(body="bad_meta"), "R30"),
        (Scenario(revision="revised", caller="aborted"), "R41"),
    ]
    for scenario, rule in cases:
        lines = record(scenario)
        assert verdict(lines, scenario.revision).conforming
        assert violation(replace_result(lines, oops), scenario.revision).rule == rule, scenario


@pytest.mark.rules("R29")
def test_contexts_on_a_final_route_result_cite_r29() -> None:
    lines = record(Scenario(wrappers=("throw_after",), body="defer_success"))
    assert verdict(lines).conforming
    broken = replace_result(lines, lambda r: r.update(additionalContexts=[{"type": "note"}]))
    assert violation(broken).rule == "R29"


@pytest.mark.rules("R1")
def test_the_result_envelope_is_checked() -> None:
    lines = record(Scenario())
    for edit in (
        lambda r: r.update(meta=None),
        lambda r: r.update(isError="no"),
        lambda r: r.update(additionalContexts=[]),
        lambda r: r.update(extra=1),
        lambda r: r.update(content="done"),
    ):
        assert violation(replace_result(lines, edit)).rule == "R1"


@pytest.mark.rules("R40")
def test_a_revised_call_without_a_caller_signal_cites_r40() -> None:
    lines = record(Scenario(revision="revised"))
    lines[0]["caller"] = "none"
    v = violation(lines, "revised")
    assert (v.rule, v.event_index, v.line) == ("R40", 0, 1)


def test_a_call_recorded_under_another_revision_is_unusable_input() -> None:
    lines = record(Scenario(revision="revised"))
    with pytest.raises(TraceError, match=r"<trace>:1: call 'c1' was recorded under the 'revised'"):
        check_lines(lines, "seed")


def test_a_verdict_serializes_with_every_field_the_design_names() -> None:
    lines = record(Scenario())
    del lines[at(lines, "notify")]
    data = violation(lines).to_json()
    assert set(data) == {
        "call_id",
        "verdict",
        "file",
        "rule",
        "title",
        "event_index",
        "line",
        "allowed",
        "seen",
        "explanation",
    }
    assert data["allowed"] == ["notify"]
    assert verdict(record(Scenario())).to_json() == {
        "call_id": "c1",
        "verdict": "conforming",
        "file": "<trace>",
    }


def test_checkers_share_one_automaton_per_revision() -> None:
    a, b = Checker("seed"), Checker("seed")
    assert a.auto is b.auto and Checker("revised").auto is not a.auto


# ------------------------------------------------------------------------------------------------
# Broken registries: the faults a trace can show are caught, citing the mutant's rule
# ------------------------------------------------------------------------------------------------


def _mutants() -> Any:
    """The deliberately broken registries of the self-verification room, by name."""
    from toolcancel.selfcheck import mutants

    return {m.name: m for m in mutants.MUTANTS}


TRACE_VISIBLE = {
    # A mutant that only misjudges what the registry itself observed (a missed recheck, a lost
    # context, a wrong abort reason, a second notification outside the publication) writes a
    # self-consistent trace: conform catches those by comparing results with the vectors.  (A
    # racing registry fails its own machine and never publishes: R31, not the R27 it breaks.)
    # These three leave evidence of their own fault in the trace.
    "leaks_fused_listeners": Scenario(wrappers=("replace_live",)),
    "detaches_caller": Scenario(wrappers=("replace_live",)),
    "keeps_late_success": Scenario(cancel="gate:post"),
}


@pytest.mark.parametrize("name", list(TRACE_VISIBLE))
def test_a_broken_registrys_own_trace_is_rejected_citing_its_rule(name: str) -> None:
    mutant = _mutants()[name]
    with mutant.active() as factory:
        lines = record(TRACE_VISIBLE[name], factory)
    v = verdict(lines)
    assert not v.conforming and v.rule == mutant.rule, v


# ------------------------------------------------------------------------------------------------
# Robustness: random multi-event edits never crash the checker
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("revision", ["seed", "revised"])
def test_random_edits_give_a_verdict_with_a_contract_rule_or_unusable_input(revision: str) -> None:
    rng = random.Random(5)  # fixed: the same edits every run
    checker = Checker(revision)
    rule_ids = {r.id for r in checker.table.rules}
    flips = {"stage": ("pre", "approval", "guards", "post"), "kind": ("none", "slot", "relay")}
    seen_rules: set[str] = set()
    for config in space(revision)[::509]:
        cancel = rng.choice(("never", "gate:body", "gate:pre", "step:5"))
        base = record(config.with_cancel(cancel) if config.caller == "live" else config)
        for _ in range(12):
            lines = copy.deepcopy(base)
            for _ in range(rng.randint(1, 3)):
                i = rng.randrange(1, len(lines))
                op = rng.random()
                if op < 0.3 and len(lines) > 2:
                    del lines[i]
                elif op < 0.5:
                    lines.insert(i, dict(lines[rng.randrange(1, len(lines))]))
                elif op < 0.7 and i + 1 < len(lines):
                    lines[i], lines[i + 1] = lines[i + 1], lines[i]
                else:
                    for key, value in list(lines[i].items()):
                        if isinstance(value, bool):
                            lines[i][key] = not value
                        elif key in flips:
                            lines[i][key] = rng.choice(flips[key])
            try:
                verdicts = checker.check_lines(lines)
            except TraceError:
                continue  # e.g. a duplicated call_entry: unusable input, said as such
            for v in verdicts:
                if not v.conforming:
                    assert v.rule in rule_ids and v.explanation and v.seen, v
                    seen_rules.add(v.rule or "")
    assert len(seen_rules) >= 8, seen_rules
