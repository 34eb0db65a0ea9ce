"""The conformance vectors: fresh, well-formed, reproducible, and honest about what is allowed.

Why these tests exist:

* The committed files are generated; a change of the contract, the vocabulary or the registry
  that changes them must show up.  The slow test regenerates everything and compares; the fast
  ones check the schema file, every vector's shape against the schema, and that the reference
  registry still produces every committed expectation (which catches most drift in seconds).
* Every allowed path must be one the contract's table accepts and must end in the expectation's
  outcome, and the MAY point (D1) must be represented exactly where the table has it.
* The README's worked example is what our adapter really answers, so the documentation of the
  protocol cannot rot.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from toolcancel.cli.main import main
from toolcancel.contract.loader import load_contract
from toolcancel.oracle.conform.judge import Judge
from toolcancel.oracle.observation import classify_reason
from toolcancel.oracle.scenario_language import Scenario
from toolcancel.oracle.vectors import (
    REVISIONS,
    SCHEMA_NAME,
    Vector,
    VectorError,
    body_signals,
    expectation,
    load_vectors,
    render,
    schema,
    schema_text,
    shipped_dir,
    shipped_stageless,
    shipped_vectors,
    vectors_file,
)
from toolcancel.runtime.registry import ToolRegistry
from toolcancel.selfcheck import vectorgen
from toolcancel.selfcheck.adapter import Session
from toolcancel.selfcheck.harness import run_scenario
from toolcancel.selfcheck.vectorgen import compare, generate, portable_cancels

README = shipped_dir() / "README.md"


@pytest.fixture(scope="module", params=REVISIONS)
def committed(request: pytest.FixtureRequest) -> list[Vector]:
    return shipped_vectors(request.param)


# ------------------------------------------------------------------------------------------------
# Fresh
# ------------------------------------------------------------------------------------------------


def test_vectors_check_passes_on_fresh_output_and_fails_on_a_modified_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the check reports, not what the generator yields: scripts/test runs `vectors --check`
    # on both revisions in full, so here the generation is the committed seed vectors.
    fresh = shipped_vectors("seed")
    monkeypatch.setattr(vectorgen, "generate", lambda revision, **_: fresh)
    family = shipped_stageless("seed")
    monkeypatch.setattr(vectorgen, "generate_stageless", lambda revision, main, **_: family)
    for name in ("seed.jsonl", "stageless-seed.jsonl", "turns-seed.jsonl", SCHEMA_NAME):
        shutil.copy(shipped_dir() / name, tmp_path / name)
    seed = tmp_path / "seed.jsonl"
    lines = seed.read_text(encoding="utf-8").splitlines(keepends=True)
    seed.write_text("".join(lines) + lines[-1], encoding="utf-8")  # one vector too many
    code = main(["vectors", "--check", "--revision", "seed", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    # Every committed line equals the fresh generation; only the appended one is stale.
    assert code == 1
    assert err == (
        f"toolcancel vectors: {seed}: stale at length ({len(lines) + 1} vs {len(lines)} lines); "
        "regenerate with `toolcancel vectors`\n"
    )
    assert f"{tmp_path / SCHEMA_NAME}: up to date" not in out  # nothing printed on failure
    seed.write_text("".join(lines), encoding="utf-8")
    code = main(["vectors", "--check", "--revision", "seed", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert f"{seed}: up to date ({len(lines):,} vectors)" in out


def test_compare_names_the_first_stale_line(tmp_path: Path) -> None:
    (tmp_path / "seed.jsonl").write_text("a\nb\nc\n", encoding="utf-8")
    assert compare(tmp_path, {"seed.jsonl": "a\nB\nc\n"}) == [
        f"{tmp_path / 'seed.jsonl'}: stale at line 2; regenerate with `toolcancel vectors`"
    ]
    assert compare(tmp_path, {"revised.jsonl": ""}) == [
        f"{tmp_path / 'revised.jsonl'}: missing (run `toolcancel vectors` to write it)"
    ]


def test_the_committed_schema_is_the_generated_one() -> None:
    assert (shipped_dir() / SCHEMA_NAME).read_text(encoding="utf-8") == schema_text()


def test_the_reference_registry_reproduces_every_committed_expectation(
    committed: list[Vector],
) -> None:
    for v in committed:
        exp = expectation(run_scenario(v.scenario))
        assert exp.result_json == v.expected.result_json, v.id
        assert exp.paths[0] == v.expected.paths[0], v.id
        assert (exp.outcome, exp.body_starts, exp.body_signals, exp.notifications) == (
            v.expected.outcome,
            v.expected.body_starts,
            v.expected.body_signals,
            v.expected.notifications,
        ), v.id


def test_generation_is_deterministic_and_deduplicated() -> None:
    configs = [
        Scenario(),
        Scenario(wrappers=("delegate",)),  # a different path: a vector of its own
        Scenario(post="accept_content"),
        Scenario(),  # the same key as the first: no new vector
    ]
    first = generate("seed", configs=configs)
    again = generate("seed", configs=configs)
    assert render(first) == render(again)
    assert [v.id for v in first] == [f"seed-{i:05d}" for i in range(1, len(first) + 1)]
    scenarios = [v.scenario for v in first]
    assert len(scenarios) == len(set(scenarios))
    # Scenario(): never plus its three gates (pre, body, post) give four distinct runs.
    assert [v.scenario.cancel for v in first if v.scenario.wrappers == ()][:4] == [
        "never",
        "gate:pre",
        "gate:body",
        "gate:post",
    ]


# ------------------------------------------------------------------------------------------------
# Well-formed
# ------------------------------------------------------------------------------------------------


def _validate(value: Any, sch: dict[str, Any], root: dict[str, Any], where: str) -> None:
    """The subset of JSON Schema 2020-12 the vector schema uses (a test's own validator)."""
    if "$ref" in sch:
        sch = root["$defs"][sch["$ref"].rsplit("/", 1)[1]]
    kinds = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int}
    if "type" in sch:  # one type, or a list of them ("null" among them)
        types = sch["type"] if isinstance(sch["type"], list) else [sch["type"]]
        assert any(
            value is None if t == "null" else type(value) is kinds[t] for t in types
        ), where
    if "const" in sch:
        assert value == sch["const"], where
    if "enum" in sch:
        assert value in sch["enum"], f"{where}: {value!r}"
    if "pattern" in sch:
        assert re.search(sch["pattern"], value), f"{where}: {value!r}"
    if "minimum" in sch:
        assert value >= sch["minimum"], where
    if "minItems" in sch:
        assert len(value) >= sch["minItems"], where
    if isinstance(value, dict):
        for key in sch.get("required", []):
            assert key in value, f"{where}: missing {key}"
        props = sch.get("properties", {})
        if sch.get("additionalProperties") is False:
            assert set(value) <= set(props), f"{where}: extra {set(value) - set(props)}"
        for key, item in value.items():
            if key in props:
                _validate(item, props[key], root, f"{where}.{key}")
    if isinstance(value, list) and "items" in sch:
        for i, item in enumerate(value):
            _validate(item, sch["items"], root, f"{where}[{i}]")


def test_every_committed_vector_fits_the_schema(committed: list[Vector]) -> None:
    sch = schema()
    for v in committed:
        _validate(json.loads(v.to_line()), sch, sch, v.id)


def test_the_schema_validator_refuses_what_the_schema_forbids() -> None:
    sch = schema()
    good = json.loads(shipped_vectors("seed")[0].to_line())
    for doctor in (
        lambda d: d["scenario"].update(body="explode"),
        lambda d: d["scenario"].update(cancel="step:3"),
        lambda d: d["expected"].update(paths=[["args_valid", "teleport"]]),
        lambda d: d["expected"].pop("body_signals"),
        lambda d: d["expected"].update(post_received=[]),
        lambda d: d.update(extra=1),
    ):
        bad = json.loads(json.dumps(good))
        doctor(bad)
        with pytest.raises(AssertionError):
            _validate(bad, sch, sch, "bad")


def test_committed_files_are_sorted_unique_and_distinct(committed: list[Vector]) -> None:
    ids = [v.id for v in committed]
    revision = committed[0].revision
    assert ids == [f"{revision}-{i:05d}" for i in range(1, len(ids) + 1)]
    assert all(v.revision == revision == v.scenario.revision for v in committed)
    assert all(not v.scenario.cancel.startswith("step:") for v in committed)
    assert len({v.scenario for v in committed}) == len(committed)
    text = vectors_file(shipped_dir(), revision).read_text(encoding="utf-8")
    assert text == render(committed)  # the file is exactly the rendering of its vectors


def test_every_allowed_path_is_accepted_by_the_table_and_ends_in_its_outcome(
    committed: list[Vector],
) -> None:
    judge = Judge(committed[0].revision)
    for v in committed:
        for exp in v.expectations():
            for path in exp.paths:
                taken = judge.transitions(v, path, exp.outcome)
                assert taken is not None, f"{v.id}: {path}"
                final = next(t.outcome for t in reversed(taken) if t.outcome is not None)
                assert final == exp.outcome, v.id


def test_the_may_point_d1_is_listed_where_the_table_has_it() -> None:
    seed = {v.scenario: v for v in shipped_vectors("seed")}
    v = seed[Scenario(pre="ask", cancel="gate:pre")]
    assert v.alternatives == ()
    assert sorted(v.expected.paths) == [
        ("args_valid", "caller_abort", "pre_ask", "approval_approved", "post_accept", "publish"),
        ("args_valid", "caller_abort", "pre_ask", "post_accept", "publish"),  # approval skipped
    ]
    revised = {v.scenario: v for v in shipped_vectors("revised")}
    v = revised[Scenario(revision="revised", pre="ask", approval="rejected", cancel="gate:pre")]
    assert v.expected.outcome == "denied"  # the reference asks; a rejection beats cancellation
    assert [(a.outcome, a.paths) for a in v.alternatives] == [
        (
            "aborted_before_dispatch",
            (("args_valid", "caller_abort", "pre_ask", "post_accept", "publish"),),
        )
    ]
    assert v.alternatives[0].result["error"]["info"]["code"] == "ABORTED_BEFORE_DISPATCH"


def test_every_outcome_and_transition_of_the_table_is_reached(committed: list[Vector]) -> None:
    revision = committed[0].revision
    table = load_contract().revision(revision)
    retries = table.contract.retry_names
    by_retry = {r: [v.for_retry(r) for v in committed] for r in retries}
    assert {o.name for o in table.outcomes} == {
        e.outcome for vs in by_retry.values() for v in vs for e in v.expectations()
    }
    taken: set[int] = set()
    for retry, vectors in by_retry.items():
        judge = Judge(revision, retry)
        for v in vectors:
            for e in v.expectations():
                for path in e.paths:
                    taken.update(t.index for t in judge.transitions(v, path, e.outcome) or [])
    missing = [(t.index, t.sources, t.events) for t in table.transitions if t.index not in taken]
    # Out of reach of portable cancellation points (verify reaches them with step:<k>): a caller
    # abort between two synchronous steps (pre-policy settled, guards not yet run), and one seen
    # after the result is final.
    unreachable = [(58, ("finalizing", "materialized"), ("caller_abort",))]
    if revision == "seed":
        unreachable.insert(0, (20, ("guards",), ("guard_raise",)))
    assert missing == unreachable


# ------------------------------------------------------------------------------------------------
# Loading refuses bad input, naming file and line
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doctor", "message"),
    [
        (lambda line: "{not json", "not valid JSON"),
        (
            lambda line: line.replace('"vector":2', '"vector":3'),
            "vector format 3, expected one of 1, 2",
        ),
        (lambda line: line.replace('"body":"success"', '"body":"explode"'), "scenario.body"),
        (
            lambda line: line.replace('"cancel":"never"', '"cancel":"step:1"'),
            "step:<k> is not portable",
        ),
        (lambda line: line.replace('"contexts":[]', '"contexts":[1]'), "expected.contexts"),
        (lambda line: line.replace('"paths":[[', '"paths":[[1,'), "expected.paths"),
    ],
)
def test_a_bad_vector_line_is_refused_with_file_and_line(
    doctor: Any, message: str, tmp_path: Path
) -> None:
    line = shipped_vectors("seed")[1].to_line()
    assert '"cancel":"never"' in line and '"body":"success"' in line
    path = tmp_path / "v.jsonl"
    path.write_text(line + "\n\n" + doctor(line) + "\n", encoding="utf-8")
    with pytest.raises(VectorError, match=re.escape(f"{path}:3")) as info:
        load_vectors(path)
    assert message in str(info.value)


def test_a_missing_vectors_file_is_a_vector_error(tmp_path: Path) -> None:
    with pytest.raises(VectorError, match="cannot read"):
        load_vectors(tmp_path / "nope.jsonl")


# ------------------------------------------------------------------------------------------------
# The pieces
# ------------------------------------------------------------------------------------------------


def test_portable_cancels_are_the_gates_reached_for_a_live_caller_only() -> None:
    """... and, where the tool's deadline fires while the body runs, the caller's abort in that
    very step (``with_deadline``, R34), unless a wrapper's own signal aborts there first."""
    s = Scenario(wrappers=("wait_before", "wait_after"))
    assert portable_cancels(s, run_scenario(s)) == [
        "gate:pre",
        "gate:w0_before",
        "gate:body",
        "gate:w1_after",
        "gate:post",
    ]
    assert portable_cancels(Scenario(caller="none"), run_scenario(Scenario(caller="none"))) == []
    lazy = Scenario(cooperative=False)
    assert portable_cancels(lazy, run_scenario(lazy)) == ["gate:body"]
    timed = Scenario(cooperative=False, timeout="timer_first")
    assert portable_cancels(timed, run_scenario(timed)) == [
        "gate:pre", "gate:body", "gate:post", "with_deadline"]  # fmt: skip
    raced = Scenario(timeout="timer_first", wrappers=("replace_aborting",))
    assert "with_deadline" not in portable_cancels(raced, run_scenario(raced))


def test_body_signals_say_whose_reason_the_body_saw() -> None:
    cases = {
        Scenario(cancel="gate:body"): [{"aborted": True, "reason": "caller"}],
        Scenario(wrappers=("replace_aborting",)): [{"aborted": True, "reason": "wrapper"}],
        Scenario(timeout="timer_first"): [{"aborted": True, "reason": "timeout"}],
        Scenario(): [{"aborted": False, "reason": None}],
        Scenario(wrappers=("retry",)): [{"aborted": False, "reason": None}] * 2,
        Scenario(pre="deny"): [],
    }
    for s, want in cases.items():
        assert body_signals(run_scenario(s)) == want, s
    assert classify_reason(RuntimeError("x")) == "other"


def test_an_unclean_reference_run_is_not_a_vector() -> None:
    obs = run_scenario(Scenario())
    obs.frozen = (False, True)  # as if an observer could write into the result (R30)
    assert obs.problems and obs.problems[0][0] == "R30"
    with pytest.raises(VectorError, match="did not run"):
        expectation(obs)


# ------------------------------------------------------------------------------------------------
# The README's worked example is true
# ------------------------------------------------------------------------------------------------


def _example(tag: str) -> Any:
    text = README.read_text(encoding="utf-8")
    block = re.search(rf"<!-- example:{tag} -->\n```json\n(.*?)\n```", text, re.S)
    assert block is not None, tag
    return json.loads(block.group(1))


def test_the_readme_worked_example_is_what_our_adapter_answers() -> None:
    message = _example("vector")
    answer = _example("answer")
    seed = {v.id: v for v in shipped_vectors("seed")}
    v = seed[message["id"]]
    assert message == {
        "protocol": 2,
        "type": "vector",
        "id": v.id,
        "revision": "seed",
        "scenario": v.scenario.to_data(),
    }
    session = Session(ToolRegistry, REVISIONS)
    try:
        assert session.answer(json.dumps(message)) == answer
    finally:
        session.close()
    assert Judge("seed").judge(v, answer).passed


def test_the_readme_documents_every_value_of_the_vocabulary() -> None:
    text = README.read_text(encoding="utf-8")
    from toolcancel.oracle import scenario_language as vocabulary

    values = itertools.chain(
        vocabulary.PRE,
        vocabulary.APPROVALS,
        vocabulary.WRAPPERS,
        vocabulary.TIMEOUTS,
        vocabulary.BODIES,
        vocabulary.POSTS,
    )
    assert [v for v in values if f"`{v}`" not in text] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--revision", "head"], "unknown contract revision 'head'; choose one of seed, revised"),
        (["--workers", "0"], "--workers must be at least 1 (see toolcancel vectors --help)"),
    ],
)
def test_bad_vectors_options_are_one_line_and_exit_2(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["vectors", "--out", str(tmp_path), *args]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"toolcancel vectors: {message}\n")
    assert list(tmp_path.iterdir()) == []


def test_the_format_module_loads_no_generator() -> None:
    """Reading vectors (an implementer's run) never loads the model checker or the cluster
    engine: their generation is toolcancel.selfcheck.vectorgen's (self-verification)."""
    code = (
        "import sys, toolcancel.oracle.vectors; "
        "print(sorted(m for m in sys.modules if m.split('.')[-1] in "
        "('verifier', 'cluster', 'vectorgen')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)  # fmt: skip
    assert done.stdout.strip() == "[]"
