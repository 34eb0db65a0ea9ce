"""toolcancel explain: every vector, a recorded trace, a scenario file; the highlighted SVG."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from toolcancel import AbortController, ToolRegistry, load_contract
from toolcancel.cli.main import main
from toolcancel.contract.trace import TraceRecorder
from toolcancel.contract.trace_reader import read_traces
from toolcancel.oracle.scenario_language import Scenario
from toolcancel.selfcheck.harness import run_scenario
from toolcancel.teaching.explain import Explanation, replay_trace, shipped_vectors

SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize("revision", ["seed", "revised"])
def test_every_shipped_vector_explains_to_its_expected_outcome(revision: str) -> None:
    vectors = shipped_vectors(revision)
    assert len(vectors) > 100
    table = load_contract().revision(revision)
    for vector in vectors:
        obs = run_scenario(Scenario.from_data(vector["scenario"]))
        ex = Explanation(table, obs.path)
        assert ex.outcome == vector["expected"]["outcome"], vector["id"]
        lines = ex.lines()
        assert lines[-1].startswith(f"Outcome: {ex.outcome}")


def test_explain_prints_each_step_with_rule_text_and_the_deciding_row(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"pre": "deny", "cancel": "gate:pre"}))
    assert main(["explain", str(scenario)]) == 0
    out = capsys.readouterr().out
    assert "pre_policy --pre_deny--> post_policy" in out
    assert "R13 Checkpoint C1:" in out
    assert "decided by precedence row 2" in out
    assert '"code":"ABORTED"' in out


def test_a_recorded_trace_replays_to_the_path_the_registry_took(tmp_path: Path) -> None:
    recorder = TraceRecorder()
    seen: list[object] = []
    reg = ToolRegistry(trace=recorder)
    reg.add_observer(lambda view, result: seen.append(view.path))

    async def body(args: object, call: object) -> list[dict[str, str]]:
        return [{"type": "text", "text": "x"}]

    reg.register("t", body)
    ctl = AbortController()
    asyncio.run(reg.execute("t", {}, signal=ctl.signal, call_id="c1"))
    path = tmp_path / "t.jsonl"
    recorder.write(path)
    _, steps, result = replay_trace(read_traces(path)["c1"], path)
    assert [(p.source, p.event, p.dest, p.transition) for p in steps] == [
        (p.source, p.event, p.dest, p.transition) for p in seen[0]  # type: ignore[attr-defined]
    ]
    assert result == '{"content":[{"text":"x","type":"text"}],"isError":false}'


def test_svg_highlights_the_path_in_order(tmp_path: Path) -> None:
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"cancel": "gate:body"}))
    svg = tmp_path / "path.svg"
    assert main(["explain", str(scenario), "--svg", str(svg), "--json"]) == 0
    root = ET.parse(svg).getroot()
    steps = {}
    for g in root.iter(f"{SVG}g"):
        for cls in (g.get("class") or "").split():
            if cls.startswith("step-"):
                steps[int(cls[5:])] = g.get("id")
    obs = run_scenario(Scenario(cancel="gate:body"))
    assert sorted(steps) == list(range(1, len(obs.path) + 1))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "not a vector id"),
        (["seed-99999"], "no such vector"),
        (["tokyo-00001"], "unknown contract revision"),
        (["/"], "is a directory"),
    ],
)
def test_bad_targets_get_one_line_and_exit_2(args: list[str], message: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "toolcancel.cli.main", "explain", *args],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert message in proc.stderr and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------------------------------------
# A recorded call that breaks the contract: explain says so exactly as check does, and exits 1
# ------------------------------------------------------------------------------------------------


def _explain_and_check(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, int, str]:
    code = main(["explain", str(path)])
    out, err = capsys.readouterr()
    assert err == "", err
    check_code = main(["check", str(path)])
    check_out, _ = capsys.readouterr()
    return code, out, check_code, check_out


@pytest.mark.parametrize("revision", ["seed", "revised"])
def test_explain_on_every_violating_edit_of_the_checker_tests_exits_1_naming_the_rule(
    revision: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The violating traces of the test suite: test_checker.py's single-event edits of recorded
    # calls (deletions, duplications, swaps), each of which check rejects with a rule.
    from test_checker import EDIT_SCENARIOS, edits, record
    from toolcancel.contract.trace import encode_line
    from toolcancel.oracle.judge.checker import Checker
    from toolcancel.teaching.explain import render_verdict as render

    checker = Checker(revision)
    violating = 0
    for name, base in EDIT_SCENARIOS.items():
        original = record(Scenario(**{**base.to_data(), "revision": revision}))
        for what, edited in edits(original):
            if checker.check_lines(edited)[0].conforming:
                continue
            violating += 1
            path = tmp_path / "edited.jsonl"
            path.write_text("".join(encode_line(ln) + "\n" for ln in edited), "utf-8")
            code, out, check_code, check_out = _explain_and_check(path, capsys)
            assert (code, check_code) == (1, 1), (name, what, out)
            verdict = checker.check_file(path)[0]
            block = render(verdict)
            assert block in check_out
            # the violation first (right after the header line), then how the call got there
            assert out.split("\n", 2)[2].startswith(block + "\n"), (name, what, out)
            assert f"violation of {verdict.rule} " in out
    assert violating > 100


def test_explain_flags_a_success_result_next_to_an_aborted_outcome(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = TraceRecorder()

    async def go() -> None:
        registry = ToolRegistry(trace=recorder)
        stop = asyncio.Event()

        @registry.tool("t")
        async def body(args: object, call: object) -> object:
            await stop.wait()
            return [{"type": "text", "text": "late"}]

        caller = AbortController()
        task = asyncio.create_task(registry.execute("t", {}, signal=caller.signal))
        await asyncio.sleep(0)
        caller.abort()
        stop.set()
        await task

    asyncio.run(go())
    lines = recorder.lines
    for ln in lines:  # the registry's answer was ABORTED; pretend it let the late success through
        if ln["event"] == "result":
            ln["result"] = {"content": [{"type": "text", "text": "late"}], "isError": False}
    path = tmp_path / "late.jsonl"
    recorder.write(path)
    code, out, check_code, check_out = _explain_and_check(path, capsys)
    assert (code, check_code) == (1, 1)
    assert "Outcome: aborted" in out and "does NOT conform" in out
    rule_line = next(ln for ln in check_out.splitlines() if "violation of" in ln)
    assert rule_line in out


def test_explain_reads_stdin_and_writes_a_drawing_to_stdout(tmp_path: Path) -> None:
    scenario = json.dumps({"revision": "seed", "cancel": "gate:body"})
    proc = subprocess.run(
        [sys.executable, "-m", "toolcancel", "explain", "-", "--mermaid", "-"],
        input=scenario, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("---\ntitle: ") and "stateDiagram-v2" in proc.stdout
    assert "Outcome: aborted" in proc.stderr  # the explanation moves out of the drawing's way


def _cooperative_stop_trace(path: Path) -> Path:
    """A real registry's trace of a body that stops with the cooperation helpers when the
    caller aborts: it raises their AbortError (P8)."""
    from toolcancel.runtime.cooperate import cancellable

    recorder = TraceRecorder()

    async def go() -> None:
        registry = ToolRegistry(trace=recorder)
        started = asyncio.Event()

        @registry.tool("t")
        async def body(args: object, call: object) -> object:
            started.set()
            return await cancellable(call, asyncio.Event().wait())  # type: ignore[arg-type]

        caller = AbortController()
        task = asyncio.create_task(
            registry.execute("t", {}, signal=caller.signal, call_id="c1")
        )
        await started.wait()
        caller.abort()
        await task

    asyncio.run(go())
    recorder.write(path)
    return path


def test_a_cooperative_stop_is_explained_as_the_canonical_aborted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A body's AbortError IS the canonical ABORTED (P8): explain says so next to body_error,
    instead of leaving "a tool-owned failure is kept" beside an ABORTED result unexplained."""
    path = _cooperative_stop_trace(tmp_path / "stop.jsonl")
    assert main(["explain", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Outcome: body_error" in out and '"code":"ABORTED"' in out
    assert "exactly R4's canonical ABORTED result -- this call ended ABORTED" in out
    assert "P8" in out
    assert main(["explain", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cooperative_stop"] is True
    # a body that fails on its own is a body_error and nothing more
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"body": "throw"}))
    assert main(["explain", str(scenario)]) == 0
    out = capsys.readouterr().out
    assert "Outcome: body_error" in out and "canonical ABORTED" not in out


def test_a_violation_is_shown_before_the_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [json.loads(x) for x in _cooperative_stop_trace(tmp_path / "a.jsonl").read_text()
             .splitlines()]  # fmt: skip
    for ln in lines:  # the registry published ABORTED; pretend it published a success instead
        if ln["event"] == "result":
            ln["result"] = {"content": [{"type": "text", "text": "late"}], "isError": False}
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(ln) + "\n" for ln in lines))
    assert main(["explain", str(path)]) == 1
    out = capsys.readouterr().out
    violation = out.index("does NOT conform")
    assert violation < out.index("  1. entry --") < out.index("Outcome:")
