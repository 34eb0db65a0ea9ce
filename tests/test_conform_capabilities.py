"""Capability-scoped conformance: a runtime with only part of the contract's stages.

Why these tests exist:

* A hello's ``capabilities`` is validated to one line (every key, booleans, a cancel list), and
  absent means everything: our adapter and older adapters lose nothing.
* What a vector needs is derived from its scenario and its allowed paths, one stage at a time.
* conform sends exactly the vectors that need only declared stages, and its report (text and
  ``--json``) says how many it skipped for want of what, and which rules it could not judge.
* An adapter cannot pass by declaring less than it uses: an observation of an undeclared stage
  is a protocol failure naming it.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import sys
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support import adapter_answer, run_cli, shipped_vectors, write_sample
from toolcancel.cli.commands.conform import table
from toolcancel.contract.loader import ContractError, load_contract, parse_contract
from toolcancel.oracle import scenario_language as vocabulary
from toolcancel.oracle.conform import conform, run_vectors
from toolcancel.oracle.conform.capabilities import (
    CANCEL_ANY,
    CANCEL_SIGNAL,
    CANCELS,
    OPTIONAL,
    STAGES,
    Capabilities,
    needs,
)
from toolcancel.oracle.conform.judge import Judge
from toolcancel.oracle.conform.protocol import PROTOCOL_RULE, hello_problem
from toolcancel.oracle.scenario_language import BODIES, Scenario
from toolcancel.oracle.vectors import (
    REVISIONS,
    Vector,
    render,
    shipped_dir,
    shipped_stageless,
    stageless_file,
)
from toolcancel.oracle.vectors.turns import load_turn_vectors, turn_file
from toolcancel.runtime.registry import ToolRegistry
from toolcancel.selfcheck.adapter import Session
from toolcancel.selfcheck.vectorgen import generate_stageless

FIXTURE = str(Path(__file__).resolve().parent / "fixtures" / "misbehaving_adapter.py")
EVERYTHING: dict[str, Any] = {**dict.fromkeys(STAGES, True), "cancel": list(CANCELS)}


@pytest.fixture(scope="module")
def seed() -> list[Vector]:
    return shipped_vectors("seed")


def _hello(**caps: Any) -> dict[str, Any]:
    return {
        "protocol": 2,
        "type": "hello",
        "implementation": "x",
        "revisions": ["seed"],
        "level": "outcome",
        "retry": "reenter",
        "capabilities": {**EVERYTHING, **caps},
    }


# ------------------------------------------------------------------------------------------------
# The hello
# ------------------------------------------------------------------------------------------------


def test_absent_capabilities_mean_everything() -> None:
    caps = Capabilities.from_hello(None)
    assert (caps.declared, caps.everything) == (False, True)
    assert caps.lacks({*STAGES, CANCEL_SIGNAL, CANCEL_ANY}) == frozenset()


def test_a_full_declaration_is_usable_and_lacks_nothing() -> None:
    assert hello_problem(_hello()) is None
    caps = Capabilities.from_hello(EVERYTHING)
    assert (caps.declared, caps.everything, caps.to_json()) == (True, True, EVERYTHING)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"post": True}, "unknown key 'post'"),
        ({"guards": "yes"}, "capabilities.guards must be true or false"),
        ({"cancel": ["signal", "abort"]}, "capabilities.cancel must be a list"),
        ({"cancel": ["task", "task"]}, "capabilities.cancel must be a list"),
        ({"cancel": "signal"}, "capabilities.cancel must be a list"),
        ({"around": False}, "replace_signal is true but around is false"),
    ],
)
def test_a_bad_capability_is_one_line(change: dict[str, Any], words: str) -> None:
    problem = hello_problem(_hello(**change))
    assert problem is not None and words in problem and "\n" not in problem


def test_a_missing_key_is_named() -> None:
    hello = _hello()
    del hello["capabilities"]["around"]
    assert hello_problem(hello) == (
        "the adapter's hello: capabilities lacks around (every key is required but "
        "remove_signal, meta, raw_args, error_flag, which default to true)"
    )
    hello["capabilities"] = ["pre_policy"]
    assert "must be an object" in str(hello_problem(hello))


def test_turns_and_capabilities_turns_must_agree() -> None:
    assert hello_problem({**_hello(turns=False), "turns": False}) is None
    problem = hello_problem({**_hello(turns=False), "turns": True})
    assert problem is not None and "must agree" in problem


def test_a_bad_declaration_stops_the_run_with_one_line(
    seed: list[Vector], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_sample(tmp_path, seed[:1])
    adapter = [sys.executable, FIXTURE, "undeclared", json.dumps({"pre_policy": True})]
    code, _, err = run_cli(
        ["--revision", "seed", "--vectors", str(path), "--adapter", *adapter], capsys
    )
    assert code == 2
    assert err.strip().count("\n") == 0 and "capabilities lacks approval" in err


# ------------------------------------------------------------------------------------------------
# What a vector needs
# ------------------------------------------------------------------------------------------------


def _needs(v: Vector, **change: Any) -> frozenset[str]:
    judge = Judge(v.revision)
    return needs(replace(v, scenario=replace(v.scenario, **change)), judge.table)


def test_needs_follow_the_scenario_one_stage_at_a_time(seed: list[Vector]) -> None:
    v = next(
        v for v in seed
        if v.scenario == replace(v.scenario, caller="none", wrappers=(), cancel="never",
                                 pre="allow", guard="none", timeout="absent", post="accept",
                                 observer="none", args="ok", body="success")
        and not any(b["aborted"] for e in v.expectations() for b in e.body_signals)
    )  # fmt: skip
    assert _needs(v) == frozenset()  # the plain call: any runtime runs it
    assert _needs(v, pre="deny") == {"pre_policy"}  # (the expectation stays the plain call's)
    assert _needs(v, guard="throw") == {"guards"}
    assert _needs(v, post="block") == {"post_policy"}
    assert _needs(v, observer="throws") == {"observers"}
    assert _needs(v, timeout="budget") == {"timeout_policy"}
    assert _needs(v, wrappers=("delegate",)) == {"around"}
    assert _needs(v, wrappers=("replace_live",)) == {"around", "replace_signal"}
    assert _needs(v, wrappers=("remove",)) == {"around", "remove_signal"}
    assert _needs(v, body="success_meta") == {"meta"}
    assert _needs(v, args="not_serializable") == {"raw_args"}
    failing = next(w for w in seed if w.scenario == replace(v.scenario, body="throw"))
    assert failing.expected.result["isError"] and _needs(failing) == {"error_flag"}
    assert _needs(v, caller="live") == {CANCEL_ANY}
    assert _needs(v, caller="live", cancel="gate:pre") == {CANCEL_ANY, "pre_policy"}
    assert _needs(v, caller="live", cancel="gate:post") == {CANCEL_ANY, "post_policy"}
    assert _needs(v, caller="live", cancel="gate:body") == {CANCEL_ANY}
    assert _needs(v, caller="aborted") == {CANCEL_SIGNAL}
    assert _needs(v, caller="live", cancel="before_entry") == {CANCEL_SIGNAL}


def test_approval_and_the_body_signal_are_needed_where_the_contract_uses_them(
    seed: list[Vector],
) -> None:
    asked = next(v for v in seed if any(e.startswith("approval_") for e in v.allowed_paths()[0]))
    assert "approval" in needs(asked, Judge("seed").table)
    aborted = next(
        v for v in seed if any(b["aborted"] for e in v.expectations() for b in e.body_signals)
    )
    assert "body_signal" in needs(aborted, Judge("seed").table)
    never = next(v for v in seed if v.scenario.pre != "ask")
    assert "approval" not in needs(never, Judge("seed").table)


def test_lacking_a_way_to_cancel() -> None:
    task_only = Capabilities(cancel=frozenset({"task"}), declared=True)
    assert task_only.lacks({CANCEL_SIGNAL, CANCEL_ANY}) == {CANCEL_SIGNAL}
    nothing = Capabilities(cancel=frozenset(), declared=True)
    assert nothing.lacks({CANCEL_ANY}) == {CANCEL_ANY}


# ------------------------------------------------------------------------------------------------
# A capability-scoped run
# ------------------------------------------------------------------------------------------------


WITHOUT = ("post_policy", "around", "approval")
LACKS = (*WITHOUT, "replace_signal", "remove_signal")  # no around wrapper: none can write the slot


def test_a_limited_runtime_runs_exactly_the_vectors_it_can_and_says_what_it_left(
    seed: list[Vector], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sample = seed[::30]
    path = write_sample(tmp_path, sample)
    command = [sys.executable, "-m", "toolcancel.selfcheck.adapter", "--level", "outcome"]
    for stage in WITHOUT:
        command += ["--without", stage]
    args = ["--revision", "seed", "--vectors", str(path), "--quiet"]
    verdicts = tmp_path / "verdicts.jsonl"
    code, data, _ = run_cli(
        [*args, "--json", "--report", str(verdicts), "--adapter", *command], capsys
    )
    sent = {json.loads(x)["id"] for x in verdicts.read_text(encoding="utf-8").splitlines()}
    for v in sample:  # what ran, seen from the scenario alone: no wrapper, post-execute, seam
        plain = (not v.scenario.wrappers and v.scenario.post == "accept"
                 and v.scenario.cancel not in ("gate:post", "gate:approval")
                 and not any(e.startswith("approval_") for e in v.allowed_paths()[0]))  # fmt: skip
        assert (v.id in sent) == plain, v.id
    table = Judge("seed").table
    lacks = {v.id: set(LACKS) & needs(v, table) for v in sample}
    ran = [i for i, x in lacks.items() if not x]
    assert (code, data["report"]) == (0, str(verdicts))
    assert data["vectors"] == data["passed"] == len(ran) == len(sent)
    assert data["skipped"]["vectors"] == len(sample) - len(ran) > 0
    counts = {c: n for c in LACKS if (n := sum(c in x for x in lacks.values()))}
    assert data["skipped"]["by_capability"] == counts  # no turn vector: --vectors
    assert list(data["skipped"]["by_capability"].values()) == sorted(counts.values(), reverse=True)
    assert data["capabilities"] == {**EVERYTHING, **dict.fromkeys(LACKS, False)}
    # what it could not judge: R24 (the approval seam's signal) and R23 (the slot after next())
    assert {"R23", "R24"} <= set(data["unjudged"])
    assert next(iter(data["unjudged"]["R24"])) == "approval"  # most vectors lack it
    assert data["unjudged"]["R23"] == {"around": data["vectors"]}  # its checks read the slot
    for rule in data["unjudged"]:
        assert data["by_rule"][rule]["status"] == "none"
        assert data["by_rule"][rule]["why"].startswith("NOT JUDGED for want of a capability")
    code, text, _ = run_cli([*args, "--adapter", *command], capsys)
    assert code == 0
    lines = text.splitlines()
    assert any(x.startswith(f"  SKIPPED: {data['skipped']['vectors']:,} vectors") for x in lines)
    loud = next(x for x in lines if x.startswith("  NOT JUDGED for want of a capability:"))
    assert "R24 (approval " in loud and "R23 (around " in loud
    assert any(x.startswith("  R24 ") and "NOT JUDGED: needs approval" in x for x in lines)


def test_a_full_declaration_loses_nothing(
    seed: list[Vector], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_sample(tmp_path, seed[::60])
    adapter = [sys.executable, FIXTURE, "undeclared", json.dumps(EVERYTHING)]
    code, data, _ = run_cli(
        ["--revision", "seed", "--vectors", str(path), "--json", "--adapter", *adapter], capsys
    )
    assert (code, data["failures"], data["vectors"]) == (0, [], len(seed[::60]))
    assert (data["skipped"], data["unjudged"]) == ({"vectors": 0, "by_capability": {}}, {})
    assert data["capabilities"] == EVERYTHING


def test_our_adapter_declares_nothing_and_is_judged_on_everything() -> None:
    session = Session(ToolRegistry, REVISIONS)
    try:
        assert "capabilities" not in session.hello()
    finally:
        session.close()


# ------------------------------------------------------------------------------------------------
# Declaring less than it uses
# ------------------------------------------------------------------------------------------------


def test_declaring_less_than_it_uses_fails_as_a_protocol_error(
    seed: list[Vector], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    caps = {**EVERYTHING, "post_policy": False}
    path = write_sample(tmp_path, seed[::40])
    adapter = [sys.executable, FIXTURE, "undeclared", json.dumps(caps)]
    code, data, _ = run_cli(
        ["--revision", "seed", "--vectors", str(path), "--json", "--adapter", *adapter], capsys
    )
    assert code == 1
    failures = data["failures"]
    assert failures and {f["rule"] for f in failures} == {PROTOCOL_RULE}
    assert {f["step"] for f in failures} == {"capabilities"}
    assert "does not declare post_policy" in failures[0]["explanation"]


def _answer(v: Vector, level: str = "outcome") -> dict[str, Any]:
    return adapter_answer(v, level)


def _judge(v: Vector, answer: dict[str, Any], lacks: set[str], level: str = "outcome") -> Any:
    caps = Capabilities(frozenset(STAGES) - lacks, frozenset(CANCELS), True)
    return Judge(v.revision, level=level, capabilities=caps).judge(v, answer)


@pytest.mark.parametrize(
    ("stage", "doctor"),
    [
        ("approval", lambda a: a["observed"].__setitem__("approval_signal", "pre_slot")),
        ("around", lambda a: a["observed"].__setitem__("slot_after_next", [True])),
        ("observers", lambda a: a["observed"].__setitem__("notifications", 1)),
        ("body_signal", lambda a: a["observed"]["bodies"][0].__setitem__(
            "settle", {"aborted": True, "reason": "caller"})),
        ("post_policy", lambda a: a["result"].__setitem__(
            "additionalContexts", [{"type": "note", "text": "from post-execute"}])),
    ],
)  # fmt: skip
def test_each_undeclared_observation_names_its_capability(
    seed: list[Vector], stage: str, doctor: Any
) -> None:
    v = next(v for v in seed if v.expected.body_starts == 1 and v.scenario.post == "accept"
             and not v.scenario.wrappers and v.scenario.cancel == "never"
             and v.scenario.timeout == "absent")  # fmt: skip
    answer = _answer(v)
    answer["observed"].pop("post_received")  # what a runtime without the stage reports
    answer["observed"].pop("slot_after_next")
    if stage == "observers":
        answer["observed"] |= {"notifications": 0, "notified_same": True}
        answer["observed"].pop("frozen")
    assert _judge(v, copy.deepcopy(answer), {stage}).passed
    doctor(answer)
    verdict = _judge(v, answer, {stage})
    assert (verdict.passed, verdict.rule, verdict.step) == (False, PROTOCOL_RULE, "capabilities")
    assert f"does not declare {stage}" in verdict.explanation


def test_a_trace_event_of_an_undeclared_stage_is_a_protocol_error(seed: list[Vector]) -> None:
    v = next(v for v in seed if v.scenario.post == "accept"
             and all("post_accept" in p for p in v.allowed_paths()))  # fmt: skip
    answer = _answer(v, "trace")
    for key in ("post_received", "slot_after_next", "approval_signal"):
        answer["observed"].pop(key, None)
    assert _judge(v, copy.deepcopy(answer), {"post_policy"}, "trace").passed
    post = next(x for x in answer["trace"] if x["event"] == "post_accept")
    post["event"] = "post_block"
    verdict = _judge(v, answer, {"post_policy"}, "trace")
    assert (verdict.rule, verdict.step) == (PROTOCOL_RULE, "capabilities")
    assert "the trace has post_block" in verdict.explanation


def test_a_runtime_without_turns_is_told_its_scheduler_was_not_judged(
    seed: list[Vector],
) -> None:
    command = [sys.executable, "-m", "toolcancel.selfcheck.adapter", "--level", "outcome"]
    turns = load_turn_vectors(turn_file(shipped_dir(), "seed"))[:2]
    report = asyncio.run(
        run_vectors([*command, "--without", "turns"], seed[:1], "seed", turns=turns)
    )
    data = report.to_json()
    assert (data["failed"], data["vectors"], data["turns"]) == (0, 1, False)
    assert data["skipped"] == {"vectors": 2, "by_capability": {"turns": 2}}
    for rule in ("R9", "R36", "R37", "R38"):
        assert data["unjudged"][rule] == {"turns": 2}
    assert "NOT JUDGED: needs turns" in table(report)


def test_a_run_without_turn_vectors_does_not_blame_a_hello_that_declares_turns(
    seed: list[Vector],
) -> None:
    command = [sys.executable, "-m", "toolcancel.selfcheck.adapter", "--level", "outcome"]
    report = asyncio.run(run_vectors(command, seed[:1], "seed"))
    assert "turn scheduler (R9, R36-R38) -- this run has no turn vectors" in table(report)


# ------------------------------------------------------------------------------------------------
# The table behind it, and deferred contexts
# ------------------------------------------------------------------------------------------------


def test_the_capabilities_are_the_contracts_table() -> None:
    table = load_contract().capabilities
    assert STAGES == tuple(k.name for k in table)
    fields = {f.name for f in dataclasses.fields(Scenario)}
    assert all(k.field in fields for k in table if k.field is not None)
    assert all(set(k.values) <= set(getattr(vocabulary, k.field.upper(), k.values))
               for k in table if k.field is not None and k.values)  # fmt: skip
    data = tomllib.loads((Path(__file__).resolve().parent.parent / "spec" / "contract.toml")
                         .read_text(encoding="utf-8"))  # fmt: skip
    data["capability"].append({"name": "x", "doc": "x", "requires": "nothing"})
    with pytest.raises(ContractError, match="capability 'x' requires unknown capability"):
        parse_contract(data, "contract.toml")


def test_a_deferred_context_needs_its_capability(seed: list[Vector]) -> None:
    v = next(v for v in seed if v.scenario.body.startswith("defer_"))
    assert "defer_context" in needs(v, Judge("seed").table)
    plain = next(v for v in seed if v.scenario.body == "success")
    assert "defer_context" not in needs(plain, Judge("seed").table)


def test_a_runtime_without_deferred_contexts_is_not_sent_them(
    seed: list[Vector], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deferring = [v for v in seed if v.scenario.body.startswith("defer_")][:2]
    path = write_sample(tmp_path, [*deferring, seed[0]])
    command = [sys.executable, "-m", "toolcancel.selfcheck.adapter", "--level", "outcome",
               "--without", "defer_context"]  # fmt: skip
    code, data, _ = run_cli(
        ["--revision", "seed", "--vectors", str(path), "--json", "--adapter", *command], capsys
    )
    assert (code, data["vectors"], data["capabilities"]["defer_context"]) == (0, 1, False)
    assert data["skipped"] == {"vectors": 2, "by_capability": {"defer_context": 2}}


# ------------------------------------------------------------------------------------------------
# The stage-less family: kept per scenario, for a runtime that lacks a stage
# ------------------------------------------------------------------------------------------------

PLAIN = frozenset({"body_signal", "defer_context", "meta", "raw_args", "error_flag", CANCEL_ANY,
                   CANCEL_SIGNAL})  # fmt: skip
"""What a vector of the stage-less family may need: none of the pipeline's optional stages
(the result's channels are not stages)."""


@pytest.mark.parametrize("revision", REVISIONS)
def test_the_stageless_family_is_fresh_and_holds_what_one_path_per_vector_merges(
    revision: str,
) -> None:
    main = shipped_vectors(revision)
    family = shipped_stageless(revision)
    text = stageless_file(shipped_dir(), revision).read_text(encoding="utf-8")
    assert render(generate_stageless(revision, main)) == text, "toolcancel vectors"
    table = Judge(revision).table
    assert all(needs(v, table) <= PLAIN for v in family)
    assert not {v.scenario for v in main} & {v.scenario for v in family}
    # a body that ignores the abort while it runs, for every way a body ends (late success too):
    # with no stage its path is a cooperative body's, so the main vectors keep none of them
    ignoring = [
        v for v in family if v.scenario.cancel == "gate:body" and not v.scenario.cooperative
    ]
    assert {v.scenario.body for v in ignoring} == set(BODIES)
    late = next(v for v in ignoring if v.scenario.body == "success")
    assert late.expected.outcome == "aborted" and late.expected.body_starts == 1


def test_a_limited_hello_is_sent_the_stageless_family_and_a_full_one_is_not() -> None:
    vid = next(v.id for v in shipped_stageless("seed") if not v.scenario.cooperative)
    ours = [sys.executable, "-m", "toolcancel.selfcheck.adapter", "--level", "outcome"]
    limited = conform([*ours, "--without", "around"], "seed", only=[vid])
    assert [(j.id, j.passed) for j in limited.judgements] == [(vid, True)]
    full = conform(ours, "seed", only=[vid])
    assert full.judgements == []


def test_a_registry_that_forbids_removing_the_signal_is_not_sent_those_vectors(
    seed: list[Vector], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A registry whose types forbid an absent slot declares ``remove_signal: false``: the
    vectors whose wrapper removes the signal are skipped and named like a missing stage --
    never failed under a rule their crash would only be a consequence of -- and the rest run.
    A hello from before the key existed declares it (absent: true)."""
    removing = [v for v in seed if "remove" in v.scenario.wrappers][:6]
    others = [v for v in seed if v.scenario.wrappers and "remove" not in v.scenario.wrappers][:6]
    path = write_sample(tmp_path, [*removing, *others])
    command = [sys.executable, "-m", "toolcancel.selfcheck.adapter", "--level", "outcome",
               "--without", "remove_signal"]  # fmt: skip
    code, data, _ = run_cli(
        ["--revision", "seed", "--vectors", str(path), "--quiet", "--json", "--adapter",
         *command], capsys,
    )  # fmt: skip
    assert (code, data["failed"], data["vectors"]) == (0, 0, len(others))
    assert data["skipped"] == {"vectors": len(removing), "by_capability": {"remove_signal": 6}}
    assert data["capabilities"]["remove_signal"] is False
    old = {k: x for k, x in EVERYTHING.items() if k not in OPTIONAL}
    assert Capabilities.from_hello(old).everything


@pytest.mark.parametrize("revision", REVISIONS)
def test_a_stage_failure_needs_only_the_stage_that_failed(revision: str) -> None:
    """``pre_error`` leaves pre-execute, the approval seam and the guards, each by its own
    event: a pre-execute listener that throws needs ``pre_policy``, not the approval seam it
    never reaches (a runtime with a pre-execute stage and no seam is sent it, so R14 is judged
    there); a seam that throws still needs ``approval``."""
    rev = load_contract().revision(revision)
    vectors = shipped_vectors(revision)
    thrown = [v for v in vectors if v.scenario.pre == "throw" and v.scenario.guard == "none"
              and v.scenario.cancel != "gate:approval"]  # fmt: skip
    assert thrown and all("approval" not in needs(v, rev) for v in thrown)
    assert all("pre_policy" in needs(v, rev) for v in thrown)
    seam = [v for v in vectors if v.scenario.pre == "ask" and v.scenario.approval == "throw"
            and v.scenario.approval_seam and v.scenario.agent]  # fmt: skip
    assert seam and all("approval" in needs(v, rev) for v in seam)
