"""Declared deviations (``[[deviation]]`` of spec/contract.toml): data that means what it says.

Why these tests exist:

* A deviation names a known way real registries depart from rules; an adapter declares it by
  name.  Each entry must cite rules that exist, a scope in the scenario vocabulary that touches
  vectors of every revision it is declared for, and a modelling mutant that exists.
* CONTRACT.md's table ("What revised is") is the data's table, rendered, never typed.
* A count CONTRACT.md quotes is derived here where our own registry can behave so: the D13
  mutant fails exactly as many seed vectors as a registry faithful to the original was measured
  to (175), every one of them in D13's scope -- and the JavaScript example, switched to classify
  by code, fails the very same vectors: two implementations of D13 agree on what it touches.
* A hello that declares an unknown deviation is refused in one line, before any vector runs.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import run_cli, shipped_vectors, write_sample
from toolcancel.contract.loader import load_contract
from toolcancel.oracle import scenario_language as vocabulary
from toolcancel.oracle.conform import _judged
from toolcancel.oracle.conform.deviations import EXPECTS, Declared, markdown_table
from toolcancel.oracle.conform.judge import Judge
from toolcancel.oracle.conform.protocol import hello_problem, vector_message
from toolcancel.oracle.vectors import scenario_data
from toolcancel.selfcheck.models import MODELS

ROOT = Path(__file__).resolve().parent.parent
JS_OUTCOME = ROOT / "examples" / "js" / "adapter-outcome.js"
VALUES = {
    "wrappers": vocabulary.WRAPPERS,
    "body": vocabulary.BODIES,
    "pre": vocabulary.PRE,
    "post": vocabulary.POSTS,
    "timeout": vocabulary.TIMEOUTS,
}


@functools.cache
def _shipped(revision: str) -> list[Any]:
    """The shipped vectors of ``revision``, read once for the module (reading is the cost)."""
    return shipped_vectors(revision)


HELLO = {"protocol": 2, "type": "hello", "revisions": ["seed"], "retry": "cursor"}


def test_contract_md_carries_the_generated_table() -> None:
    text = (ROOT / "spec" / "CONTRACT.md").read_text(encoding="utf-8")
    assert markdown_table() in text


def test_every_deviation_cites_rules_a_scope_and_a_model_that_exist() -> None:
    import toolcancel.selfcheck.mutants as mutants

    contract = load_contract()
    names = {m.name for m in mutants.MUTANTS}
    assert contract.deviations, "the contract names at least D13 and the later source's"
    for d in contract.deviations:
        assert all(contract.rule(r) for r in d.departs_from)
        for key, values in d.scope.items():
            assert set(values) <= set(VALUES[key]), (d.name, key)
        for revision in d.revisions:
            touched = [v for v in _shipped(revision) if d.touches(scenario_data(v.scenario))]
            assert touched, f"{d.name} touches no {revision} vector"
            if d.expects == "timeout_by_code":  # its model runs once: no MAY point in scope
                retries = contract.retry_names
                assert not any(v.for_retry(r).alternatives for v in touched for r in retries)
        assert d.model is None or d.model in names, d.model


@pytest.mark.parametrize(
    ("declared", "problem"),
    [
        (["D13"], None),
        ([], None),
        (["D99"], "the adapter's hello declares the unknown deviation 'D99'; the contract's "
                  "deviations are D13, pre-R44-error, E7-wrapper-results, E7-meta, E7-value "
                  "(spec/contract.toml)"),
        ("D13", "the adapter's hello declares deviations \"D13\"; a list of names of the "
                "contract's deviations (D13, pre-R44-error, E7-wrapper-results, E7-meta, "
                "E7-value), or none"),
        (["D13", "D13"], "the adapter's hello declares a deviation twice: [\"D13\", \"D13\"]"),
    ],
)  # fmt: skip
def test_a_hello_declares_known_deviations_only(declared: object, problem: str | None) -> None:
    assert hello_problem({**HELLO, "deviations": declared}) == problem


def test_an_unknown_deviation_stops_conform_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_sample(tmp_path, _shipped("seed")[:1])
    hello = json.dumps({**HELLO, "deviations": ["D99"]})
    adapter = [sys.executable, "-c", f"print({hello!r}, flush=True); import sys; sys.stdin.read()"]
    code, out, err = run_cli(["--vectors", str(path), "--adapter", *adapter], capsys)
    assert (code, out, err.count("\n")) == (2, "", 1)
    assert err.startswith("toolcancel conform: the adapter's hello declares the unknown deviation")


def _d13_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], adapter: list[str]
) -> tuple[int, Any]:
    """conform --json on the seed vectors in D13's scope: exit code and report."""
    d13 = load_contract().deviation("D13")
    scoped = [v for v in _shipped("seed") if d13.touches(scenario_data(v.scenario))]
    path = write_sample(tmp_path, scoped)
    code, data, _ = run_cli(["--vectors", str(path), "--json", "--adapter", *adapter], capsys)
    return code, data


def _d13_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], adapter: list[str]
) -> set[str]:
    """The ids of the seed vectors in D13's scope that the adapter fails."""
    code, data = _d13_run(tmp_path, capsys, adapter)
    assert code == 1
    return {f["id"] for f in data["failures"]}


@pytest.mark.slow  # every vector in D13's scope, three times: ~45 s on a loaded machine
def test_the_d13_count_is_derived_and_two_implementations_agree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d13 = load_contract().deviation("D13")
    measured = {m.source: m.vectors for m in d13.measured}
    assert d13.model is not None
    mutant = [sys.executable, "-m", "toolcancel.selfcheck.adapter", "--level", "outcome",
              "--mutant"]
    failed = _d13_failures(tmp_path, capsys, [*mutant, d13.model])
    # Measured outside on the seed vectors shipped then, seed-00001 to seed-05164; vectors are
    # only ever appended (toolcancel.oracle.vectors numbers new dimensions after the old), so those
    # ids are still exactly that set.  The vectors added since touch D13 too: they count beyond it.
    then = {i for i in failed if i <= "seed-05164"}
    assert len(then) == measured["seed commit"]
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not found: the JavaScript half of this test needs Node.js >= 20")
    js = [node, str(JS_OUTCOME), "--classify-by-code"]
    assert _d13_failures(tmp_path, capsys, [*js, "--undeclared"]) == failed
    # declared: the very vectors deviate as declared, the seed commit's 175 among them
    code, data = _d13_run(tmp_path, capsys, js)
    assert (code, data["failed"], data["deviations"]["deviated"]) == (0, 0, {"D13": len(failed)})
    assert {d["id"] for d in data["deviated"]} == failed


def test_the_javascript_example_declares_d13_when_it_classifies_by_code() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not found: install Node.js >= 20 to run examples/js")
    hellos = {}
    for flags in ((), ("--classify-by-code",), ("--classify-by-code", "--undeclared")):
        run = subprocess.run(
            [node, str(JS_OUTCOME), *flags], input="", capture_output=True, text=True,
            timeout=60, check=True, cwd=ROOT,
        )  # fmt: skip
        hellos[flags] = json.loads(run.stdout.splitlines()[0]).get("deviations")
    assert list(hellos.values()) == [None, ["D13"], None]


# ------------------------------------------------------------------------------------------------
# Judging declared deviations (in process: our registry's answers, doctored as a deviating
# registry writes them, through conform's own judging of one answer)
# ------------------------------------------------------------------------------------------------


def _answers(
    vectors: list[Any], revision: str, mutant: str | None = None, level: str = "outcome"
) -> list[Any]:
    from toolcancel.runtime.registry import ToolRegistry
    from toolcancel.selfcheck.adapter import Session, _mutant

    with contextlib.ExitStack() as stack:
        factory = stack.enter_context(_mutant(mutant)) if mutant else ToolRegistry
        session = Session(factory, (revision,), level=level)
        stack.callback(session.close)
        return [session.answer(vector_message(v).decode()) for v in vectors]


def _verdicts(
    vectors: list[Any],
    answers: list[Any],
    declared: list[str],
    revision: str,
    level: str = "outcome",
) -> Any:
    judge = Judge(revision, level=level)
    mine = Declared(declared, revision, judge.retry, MODELS)
    mine.prepare(vectors)
    return [_judged(judge, mine, v, a) for v, a in zip(vectors, answers, strict=True)]


def _in_scope(name: str, revision: str, every: int) -> list[Any]:
    """Every ``every``-th vector of ``revision`` in the deviation's scope."""
    d = load_contract().deviation(name)
    return [v for v in _shipped(revision) if d.touches(scenario_data(v.scenario))][::every]


@pytest.mark.parametrize("level", ["trace", "outcome"])
def test_d13_vectors_deviate_as_declared_and_fail_undeclared(level: str) -> None:
    """The D13 mutant's answers: declared, a vector it changes deviates as declared (never a
    pass) and one it does not change passes; undeclared, the same vectors fail.  At both levels:
    the model's expectation holds its paths too."""
    vectors = _in_scope("D13", "seed", 30)
    answers = _answers(vectors, "seed", load_contract().deviation("D13").model, level)
    strict = _verdicts(vectors, answers, [], "seed", level)
    declared = _verdicts(vectors, answers, ["D13"], "seed", level)
    failed = {j.id for j in strict if not j.passed}
    assert failed and len(failed) < len(vectors)
    assert not any(j.deviations for j in strict)
    assert {j.id for j in declared if j.deviations} == failed
    deviated = [j for j in declared if j.id in failed]
    assert all(j.deviations == ("D13",) and not j.passed for j in deviated)
    assert all(j.passed for j in declared if j.id not in failed)


def test_a_faithful_registry_declaring_d13_passes_what_d13_does_not_touch() -> None:
    vectors = _in_scope("D13", "revised", 50)
    verdicts = _verdicts(vectors, _answers(vectors, "revised"), ["D13"], "revised")
    assert all(j.passed and not j.deviations for j in verdicts)


def _doctored(answer: dict[str, Any], change: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(answer))
    out["result"] = change(out["result"])
    if out["observed"].get("post_received") is not None:
        out["observed"]["post_received"] = change(out["observed"]["post_received"])
    return out


def _with_value(result: dict[str, Any]) -> dict[str, Any]:
    return {**result, "value": {"x": 1}} if result.get("isError") is False else result


def _seed_shaped(result: dict[str, Any]) -> dict[str, Any]:
    error = result.pop("error", None)
    if isinstance(error, dict) and "info" in error:
        result["error"] = error["info"]
    return result


@pytest.mark.parametrize(
    ("name", "change"), [("E7-value", _with_value), ("pre-R44-error", _seed_shaped)]
)
def test_a_rewritten_expectation_judges_what_it_rewrites_and_nothing_else(
    name: str, change: Any
) -> None:
    """A success with a ``value`` key (E7-value), an error in the seed's shape (pre-R44-error):
    declared, each such vector deviates as declared; undeclared it fails; a vector the doctoring
    leaves alone passes either way -- and a wrong result stays a failure, declared or not."""
    vectors = _shipped("revised")[:400:10]
    plain = _answers(vectors, "revised")
    answers = [_doctored(a, change) for a in plain]
    touched = {v.id for v, a, b in zip(vectors, plain, answers, strict=True) if a != b}
    assert 0 < len(touched) < len(vectors)
    strict = _verdicts(vectors, answers, [], "revised")
    declared = _verdicts(vectors, answers, [name], "revised")
    assert {j.id for j in strict if not j.passed} == touched
    assert {j.id for j in declared if j.deviations == (name,)} == touched
    assert {j.id for j in declared if j.passed} == {v.id for v in vectors} - touched
    wrong = [_doctored(a, lambda r: {**change(r), "content": []}) for a in answers]
    assert not any(j.passed or j.deviations for j in _verdicts(vectors, wrong, [name], "revised"))


def _invalid_output(result: dict[str, Any]) -> dict[str, Any]:
    """The later source's rejection of a tool's output: an INVALID_TOOL_OUTPUT tool error."""
    return {
        "content": [{"type": "text", "text": "Error: tool output is invalid"}],
        "isError": True,
        "error": {"message": "tool output is invalid", "info": {"name": "ToolOutputError",
                  "code": "INVALID_TOOL_OUTPUT"}},
    }  # fmt: skip


def test_a_masked_deviation_sets_aside_only_what_its_mask_names() -> None:
    """E7-meta has no model -- the sources leave its texts open -- but a mask: the result and
    what post-execute received may be an INVALID_TOOL_OUTPUT error.  Declared, answers so
    deviate as declared; a result the mask does not allow (no error at all) is an undeclared
    failure, and so is a vector outside the scope."""
    d = load_contract().deviation("E7-meta")
    assert d.expects is None and d.mask
    vectors = _in_scope("E7-meta", "revised", 1)[:3] + _shipped("revised")[:1]
    plain = _answers(vectors, "revised")
    verdicts = _verdicts(vectors, [_doctored(a, _invalid_output) for a in plain], ["E7-meta"],
                         "revised")  # fmt: skip
    assert [(j.passed, j.deviations) for j in verdicts] == [(False, ("E7-meta",))] * 3 + [
        (False, ())
    ]
    wrong = [_doctored(a, lambda r: {**r, "content": []}) for a in plain[:3]]
    assert not any(j.deviations for j in _verdicts(vectors[:3], wrong, ["E7-meta"], "revised"))


def _success(result: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "done"}], "isError": False}


def test_a_late_success_inside_a_masked_deviations_scope_is_an_undeclared_r28() -> None:
    """E7-wrapper-results may turn a wrapper-authored result into an error and skip
    post-execute; it never explains a success published after the caller cancelled.  So a late
    success in its scope fails, cited R28, while the rejection it does describe deviates."""
    vectors = [
        v for v in _in_scope("E7-wrapper-results", "revised", 1)
        if v.expected.outcome in ("aborted", "aborted_before_dispatch")
        and v.scenario.caller == "live"
    ][:4]  # fmt: skip
    assert vectors
    plain = _answers(vectors, "revised")
    late = [{**a, "result": _success(a["result"])} for a in plain]
    for j in _verdicts(vectors, late, ["E7-wrapper-results"], "revised"):
        assert (j.passed, j.deviations, j.rule) == (False, (), "R28"), j.explanation
    shorts = [
        v for v in _in_scope("E7-wrapper-results", "revised", 1)
        if v.expected.result.get("isError") is False and v.expected.post_received is not None
    ][:4]  # fmt: skip
    assert shorts
    rejected = []
    for a in _answers(shorts, "revised"):
        a = {**a, "result": _invalid_output(a["result"])}
        a["observed"] = {**a["observed"], "post_received": None}
        rejected.append(a)
    verdicts = _verdicts(shorts, rejected, ["E7-wrapper-results"], "revised")
    assert all(j.deviations == ("E7-wrapper-results",) for j in verdicts), verdicts
    assert not any(j.deviations for j in _verdicts(shorts, rejected, [], "revised"))


def test_a_relay_leak_under_declared_d13_is_cited_r22_not_d13s_rule() -> None:
    """D13 explains a same-coded outer deadline reported as the call's own TOOL_TIMEOUT, not a
    listener left on the caller's signal.  A registry with both fails those vectors under the
    rule the remaining difference breaks (R22), never under D13's R35."""
    vectors = _in_scope("D13", "seed", 10)
    answers = _answers(vectors, "seed", load_contract().deviation("D13").model, "trace")
    mine = Declared(["D13"], "seed", Judge("seed").retry, MODELS)
    mine.prepare(vectors)
    modelled = mine.modelled("D13")
    picked = [
        (v, a) for v, a in zip(vectors, answers, strict=True)
        if v.id in modelled and a["observed"].get("listeners_left")
    ][:4]  # fmt: skip
    assert picked
    leaky = []
    for _, a in picked:
        a = json.loads(json.dumps(a))
        left = a["observed"]["listeners_left"]
        a["observed"]["listeners_left"] = {**left, "leaks": 1, "first": "the caller's signal"}
        leaky.append(a)
    ids = [v for v, _ in picked]
    for j in _verdicts(ids, leaky, ["D13"], "seed", "trace"):
        assert (j.passed, j.deviations, j.rule) == (False, (), "R22"), j.explanation
    strict = _verdicts(ids, leaky, [], "seed", "trace")
    assert all(j.rule == "R35" for j in strict)  # what the contract alone cites first


def test_every_deviation_expects_a_known_kind_of_alternative() -> None:
    for d in load_contract().deviations:
        assert d.expects is None or d.expects in EXPECTS, (d.name, d.expects)


def _later_sample(tmp_path: Path) -> tuple[Path, list[Any]]:
    """A few revised vectors of each deviation the JavaScript example can have: in D13's scope,
    in E7-meta's, and plain ones (E7-value touches every success)."""
    contract = load_contract()
    d13, meta = contract.deviation("D13"), contract.deviation("E7-meta")
    vectors = _shipped("revised")
    sample = [v for v in vectors if d13.touches(scenario_data(v.scenario))][::12]
    sample += [v for v in vectors if meta.touches(scenario_data(v.scenario))][::8]
    sample += vectors[::400]
    sample = list({v.id: v for v in sample}.values())
    return write_sample(tmp_path, sample), sample


def test_the_javascript_example_deviates_as_declared_and_fails_undeclared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/js classifying by code and building outputs as the later source does: declared,
    conform passes it and names each deviation with its count -- D13's is what our own model of
    D13 changes in the sample, so two implementations agree -- and undeclared it fails exactly
    the vectors it deviated on.  (About 60 vectors: a few seconds.)"""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not found: install Node.js >= 20 to run examples/js")
    path, sample = _later_sample(tmp_path)
    js = [node, str(JS_OUTCOME), "--classify-by-code", "--later-outputs"]
    args = ["--revision", "revised", "--vectors", str(path), "--json", "--adapter"]
    code, data, err = run_cli([*args, *js], capsys)
    assert isinstance(data, dict), (code, data, err)
    assert (code, data["failed"]) == (0, 0), data.get("failures")
    deviations = data["deviations"]
    assert deviations["declared"] == ["D13", "E7-meta", "E7-value"]
    counts = deviations["deviated"]
    assert set(counts) == {"D13", "E7-meta", "E7-value"}
    assert all(n > 0 for n in counts.values())
    model = Declared(["D13"], "revised", data["retry"], MODELS)
    model.prepare(sample)
    assert counts["D13"] == len(model.modelled("D13"))
    assert data["passed"] + sum(counts.values()) == len(sample)
    code, strict, _ = run_cli([*args, *js, "--undeclared"], capsys)
    assert code == 1
    assert {f["id"] for f in strict["failures"]} == {d["id"] for d in data["deviated"]}
    code, text, _ = run_cli([*args[:4], "--adapter", *js], capsys)
    assert code == 0
    assert f"deviates as declared (D13): {counts['D13']:,} vectors" in text


def test_the_report_lists_undeclared_failures_first_and_never_counts_a_deviation() -> None:
    from toolcancel.cli.commands.conform import table
    from toolcancel.oracle.conform.report import Judgement, Report

    report = Report("seed", "x", ["x"], declared=("D13",))
    report.judgements = [
        Judgement("seed-1", True),
        Judgement("seed-2", False, rule="R19", step="result", explanation="seed-2: wrong"),
        Judgement("seed-3", False, rule="R19", step="result", deviations=("D13",)),
        Judgement("seed-4", False, rule="R30", deviations=("E7-meta",)),
    ]
    assert (report.passed, report.failed, report.deviated) == (1, 1, 2)
    assert report.by_rule()["R19"].failed == 1
    assert [f.ids for f in report.families()] == [("seed-2",)]
    lines = table(report).splitlines()
    assert "  1 passed, 1 failed, 2 deviate as declared; " in "\n".join(lines)
    at = lines.index("declared deviations (neither passed nor failed):")
    assert lines.index("failures in 1 family:") < at
    assert lines[at + 1 :] == [
        "  deviates as declared (D13): 1 vector",
        "  deviates as declared (E7-meta): 1 vector",
    ]
    verdicts = [json.loads(line)["verdict"] for line in report.verdict_lines()]
    assert verdicts == ["pass", "fail", "deviates", "deviates"]


def test_deviations_combine_and_the_fewest_that_explain_a_vector_are_named() -> None:
    """A registry faithful to the first revised commit: D13, and the seed's error shape.  A
    vector only the combination explains names both; one the error shape alone explains names
    that one; a success neither touches passes; undeclared, every other one fails."""
    vectors = _in_scope("D13", "revised", 20)
    answers = _answers(vectors, "revised", load_contract().deviation("D13").model)
    answers = [_doctored(a, _seed_shaped) for a in answers]
    both = ["D13", "pre-R44-error"]
    verdicts = _verdicts(vectors, answers, both, "revised")
    named = {j.deviations for j in verdicts if not j.passed}
    assert named == {("D13", "pre-R44-error"), ("pre-R44-error",)}
    strict = _verdicts(vectors, answers, [], "revised")
    assert {j.id for j in strict if not j.passed} == {j.id for j in verdicts if j.deviations}
    only_d13 = _verdicts(vectors, answers, ["D13"], "revised")
    assert not any(j.deviations for j in only_d13)  # the error shape is not declared
