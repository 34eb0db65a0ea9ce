"""Retry behaviours (CONTRACT.md D11): what a wrapper's second ``next()`` does, declared and judged.

Why these tests exist:

* The original's around waterfall is a cursor over one listener list per call; the RFC leaves
  retries open.  The contract names three behaviours (``reenter``, ``cursor``, ``reject``); the
  reference registry runs each, and the five vectors where the original and our default part
  ways are pinned here to the original's behaviour under ``cursor``, as the issue that found them
  lists them -- both from the shipped vectors and from a fresh run of the registry.
* A behaviour is judged *exactly*: a trace or an adapter that declares one and does another
  fails, citing R16; a version-1 trace (no retry, no wrapper count) is judged as it always was.
* The revised block message follows the original: a line per feedback block, nothing stripped.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from support import shipped_vectors
from toolcancel import AbortController, ToolRegistry, ToolResult
from toolcancel.cli.main import main
from toolcancel.contract.errors import RegistryUsageError
from toolcancel.contract.loader import load_contract
from toolcancel.contract.results import block_message, text_block
from toolcancel.contract.trace import TraceRecorder
from toolcancel.oracle.judge.checker import Checker
from toolcancel.oracle.scenario_language import Scenario
from toolcancel.oracle.vectors import Vector
from toolcancel.runtime.virtual_time import VirtualClock, run
from toolcancel.selfcheck.harness import Harness, run_scenario

RETRIES = load_contract().retry_names


@pytest.fixture(scope="module")
def seed() -> dict[str, Vector]:
    return {v.id: v for v in shipped_vectors("seed")}


def events(path: Any) -> list[str]:
    return [p.event for p in path]


def result_text(result: dict[str, Any] | ToolResult | None) -> str:
    if isinstance(result, ToolResult):
        return result.text
    assert result is not None
    return "".join(b["text"] for b in result["content"])


# -- the five vectors the issue lists, under cursor ------------------------------------------------

# id: (wrappers, timeout, cursor: outcome, body starts, text, a piece of its path)
ORIGINAL = {
    "seed-00256": (("delegate", "retry"), "budget", "body_success", 2, "done",
                   ["redelegate", "base_dispatch"]),
    "seed-00298": (("delegate", "retry"), "timer_first", "body_error", 2, "Error: tool failed",
                   ["redelegate", "base_dispatch"]),
    "seed-00660": (("retry", "replace_aborted"), "absent", "body_success", 1, "done",
                   ["redelegate", "base_dispatch", "body_ok"]),
    "seed-00680": (("retry", "short_error"), "absent", "body_success", 1, "done",
                   ["redelegate", "base_dispatch", "body_ok"]),
    "seed-00705": (("retry", "retry"), "absent", "body_error", 3, "Error: tool failed",
                   ["redelegate", "base_dispatch"]),
}  # fmt: skip


def contains(path: list[str], piece: list[str]) -> bool:
    return any(path[i : i + len(piece)] == piece for i in range(len(path)))


@pytest.mark.rules("R16")
@pytest.mark.parametrize("vid", sorted(ORIGINAL))
def test_the_shipped_vectors_expect_the_originals_behaviour_under_cursor(
    vid: str, seed: dict[str, Vector]
) -> None:
    wrappers, timeout, outcome, starts, text, piece = ORIGINAL[vid]
    v = seed[vid]
    assert (v.scenario.wrappers, v.scenario.timeout) == (wrappers, timeout)
    cursor = v.expected_for("cursor")
    assert (cursor.outcome, cursor.body_starts, result_text(cursor.result)) == (
        outcome,
        starts,
        text,
    )
    assert all(contains(list(p), piece) for p in cursor.paths)
    # ... and the default (reenter) expectation differs from it
    assert v.expected != cursor


@pytest.mark.rules("R16", "R18", "R27")
@pytest.mark.parametrize("vid", sorted(ORIGINAL))
def test_the_registry_under_cursor_does_what_the_original_did(
    vid: str, seed: dict[str, Vector]
) -> None:
    _, _, outcome, starts, text, piece = ORIGINAL[vid]
    obs = run_scenario(seed[vid].scenario, retry="cursor")
    assert obs.problems == [] and obs.result is not None
    assert (obs.path[-1].outcome, obs.body_starts, obs.result.text) == (outcome, starts, text)
    assert contains(events(obs.path), piece)


@pytest.mark.rules("R16")
def test_reenter_retries_the_whole_inner_chain_and_cursor_does_not() -> None:
    s = Scenario(caller="none", wrappers=("retry", "retry"), body="throw")
    reenter = run_scenario(s, retry="reenter")
    cursor = run_scenario(s, retry="cursor")
    assert (reenter.body_starts, cursor.body_starts) == (4, 3)
    assert events(reenter.path).count("wrapper_enter") == 3
    assert events(cursor.path).count("wrapper_enter") == 2


@pytest.mark.rules("R16", "R3")
def test_reject_throws_to_the_wrapper_and_runs_nothing() -> None:
    registry = ToolRegistry(retry="reject")
    caught: list[BaseException] = []
    starts = 0

    @registry.tool("t")
    async def body(args: Any, call: Any) -> Any:
        nonlocal starts
        starts += 1
        return [text_block("done")]

    async def retry(view: Any, nxt: Any) -> ToolResult:
        first: ToolResult = await nxt()
        try:
            await nxt()
        except RegistryUsageError as exc:
            caught.append(exc)
        return first

    registry.add_around(retry)
    result = asyncio.run(registry.execute("t", {}))
    assert starts == 1 and result.text == "done"
    assert len(caught) == 1 and "retry='reject'" in str(caught[0])


@pytest.mark.rules("R16")
def test_an_unknown_retry_behaviour_is_a_usage_error() -> None:
    with pytest.raises(RegistryUsageError, match="retry must be one of 'reenter', 'cursor'"):
        ToolRegistry(retry="again")
    assert ToolRegistry().retry == load_contract().default_retry == "reenter"


@pytest.mark.rules("R16")
def test_a_calls_wrappers_are_those_registered_when_it_entered() -> None:
    registry = ToolRegistry(retry="cursor")

    @registry.tool("t")
    async def body(args: Any, call: Any) -> Any:
        return [text_block("done")]

    seen: list[str] = []

    async def late(view: Any, nxt: Any) -> ToolResult:
        seen.append("late")
        result: ToolResult = await nxt()
        return result

    async def first(view: Any, nxt: Any) -> ToolResult:
        registry.add_around(late)  # registered during the call: not this call's wrapper
        result: ToolResult = await nxt()
        return result

    registry.add_around(first)
    assert asyncio.run(registry.execute("t", {})).text == "done"
    assert seen == []
    asyncio.run(registry.execute("t", {}))
    assert seen == ["late"]


# -- judged exactly ---------------------------------------------------------------------------


def traced(scenario: Scenario, retry: str) -> list[dict[str, Any]]:
    recorder = TraceRecorder()
    clock = VirtualClock()

    def factory(**options: Any) -> ToolRegistry:
        return ToolRegistry(trace=recorder, **options)

    run(Harness(scenario, factory, clock, retry).run(), clock=clock)
    return list(recorder.lines)


def verdict(lines: list[dict[str, Any]], revision: str = "seed") -> Any:
    (found,) = Checker(revision).check_lines(lines, "<test>")
    return found


@pytest.mark.rules("R16")
@pytest.mark.parametrize("retry", RETRIES)
def test_each_behaviours_own_trace_conforms(retry: str) -> None:
    for wrappers in (("delegate", "retry"), ("retry", "short_error"), ("retry", "retry")):
        lines = traced(Scenario(caller="none", wrappers=wrappers), retry)
        assert lines[0]["retry"] == retry and lines[0]["wrappers"] == len(wrappers)
        assert verdict(lines).conforming, (retry, wrappers)


@pytest.mark.rules("R16")
@pytest.mark.parametrize("ran", RETRIES)
@pytest.mark.parametrize("declared", RETRIES)
def test_a_trace_that_declares_another_behaviour_than_it_ran_fails_r16(
    ran: str, declared: str
) -> None:
    lines = traced(Scenario(caller="none", wrappers=("retry", "retry")), ran)
    lines[0] = {**lines[0], "retry": declared}
    found = verdict(lines)
    assert found.conforming == (ran == declared)
    if ran != declared:
        assert found.rule == "R16", found.explanation


@pytest.mark.rules("R16")
def test_a_version_1_trace_without_retry_or_wrapper_count_is_judged_as_before() -> None:
    for retry in RETRIES:
        lines = traced(Scenario(caller="none", wrappers=("retry", "retry")), retry)
        entry = {k: v for k, v in lines[0].items() if k not in ("retry", "wrappers")}
        # reenter is what version 1 meant; without a wrapper count the hand-outs are not judged
        assert verdict([entry, *lines[1:]]).conforming == (retry != "reject")


def adapter_command(tmp_path: Path, run_as: str, declare: str | None, protocol: int) -> list[str]:
    """Our adapter running ``run_as`` but saying hello as ``declare`` (None: a version-1 hello
    without retry), with every message of protocol ``protocol``."""
    script = tmp_path / "lying_adapter.py"
    script.write_text(
        f"""
import json, sys
from toolcancel.selfcheck.adapter import Session, serve
from toolcancel.runtime.registry import ToolRegistry
from toolcancel.oracle.vectors import REVISIONS

class Lying(Session):
    def hello(self):
        hello = dict(super().hello(), protocol={protocol})
        if {declare!r} is None:
            del hello["retry"]
        else:
            hello["retry"] = {declare!r}
        return hello

    def answer(self, line):
        msg = json.loads(line)
        msg["protocol"] = 2
        out = super().answer(json.dumps(msg))
        out["protocol"] = {protocol}
        for entry in out.get("trace", [])[:1]:
            if {declare!r} is None:
                entry.pop("retry", None)
                entry.pop("wrappers", None)
            else:
                entry["retry"] = {declare!r}
        return out

session = Lying(ToolRegistry, REVISIONS, {run_as!r})
serve(session, sys.stdin, sys.stdout)
""",
        encoding="utf-8",
    )
    return [sys.executable, str(script)]


def conform(
    tmp_path: Path, seed: dict[str, Vector], command: list[str], capsys: Any
) -> tuple[int, Any]:
    sample = tmp_path / "five.jsonl"
    sample.write_text("".join(seed[vid].to_line() + "\n" for vid in sorted(ORIGINAL)))
    code = main(["conform", "--vectors", str(sample), "--json", "--adapter", *command])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.rules("R16")
@pytest.mark.parametrize("retry", RETRIES)
def test_conform_judges_a_declared_behaviour_by_its_own_expectations(
    retry: str, tmp_path: Path, seed: dict[str, Vector], capsys: Any
) -> None:
    code, report = conform(tmp_path, seed, adapter_command(tmp_path, retry, retry, 2), capsys)
    assert (code, report["passed"], report["retry"]) == (0, 5, retry)


@pytest.mark.rules("R16")
def test_conform_fails_an_adapter_that_runs_another_behaviour_than_it_declares(
    tmp_path: Path, seed: dict[str, Vector], capsys: Any
) -> None:
    code, report = conform(
        tmp_path, seed, adapter_command(tmp_path, "cursor", "reenter", 2), capsys
    )
    assert (code, report["passed"], report["failed"]) == (1, 0, 5)
    assert {f["rule"] for f in report["failures"]} == {"R16"}


@pytest.mark.rules("R16")
def test_a_protocol_1_adapter_is_judged_as_the_default_behaviour(
    tmp_path: Path, seed: dict[str, Vector], capsys: Any
) -> None:
    code, report = conform(tmp_path, seed, adapter_command(tmp_path, "reenter", None, 1), capsys)
    assert (code, report["passed"], report["retry"]) == (0, 5, "reenter")
    code, report = conform(tmp_path, seed, adapter_command(tmp_path, "cursor", None, 1), capsys)
    assert code == 1 and report["failed"] == 5


@pytest.mark.rules("R16")
def test_a_protocol_2_hello_must_declare_a_known_behaviour(
    tmp_path: Path, seed: dict[str, Vector], capsys: Any
) -> None:
    sample = tmp_path / "five.jsonl"
    sample.write_text(seed["seed-00705"].to_line() + "\n")
    command = adapter_command(tmp_path, "reenter", "sometimes", 2)
    code = main(["conform", "--vectors", str(sample), "--adapter", *command])
    err = capsys.readouterr().err
    assert code == 2 and "declares retry 'sometimes'" in err and len(err.splitlines()) == 1


# -- the revised block message --------------------------------------------------------------------


@pytest.mark.rules("R44", "R7")
def test_the_block_message_is_the_feedback_a_line_per_block_nothing_stripped() -> None:
    texts = load_contract().texts
    feedback = [
        {"type": "text", "text": "Error: blocked"},
        {"type": "image", "data": "..."},
        {"type": "text", "text": "second"},
    ]
    assert block_message(feedback, texts) == "Error: blocked\n[image content]\nsecond"
    assert block_message([], texts) == "tool result blocked by post-execute policy"


@pytest.mark.rules("R44", "R7")
def test_a_revised_block_carries_the_originals_message() -> None:
    registry = ToolRegistry(revision="revised")

    @registry.tool("t")
    async def body(args: Any, call: Any) -> Any:
        return [text_block("done")]

    from toolcancel import Block

    async def post(view: Any, result: Any, nxt: Any) -> Any:
        return Block([text_block("Error: no"), {"type": "resource", "uri": "x"}])

    registry.add_post_execute(post)
    result = asyncio.run(registry.execute("t", {}, signal=AbortController().signal))
    data = json.loads(result.to_json())
    assert data["error"] == {"message": "Error: no\n[resource content]"}
