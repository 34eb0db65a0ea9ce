"""``toolcancel conform``: self-conformance, mutants, misbehaving adapters, and the verdicts.

Why these tests exist:

* Self-conformance runs our own adapter over the real protocol (a child process speaking JSON
  Lines), so it tests the protocol, the trace recording and the checker together.  A sample runs
  in the fast suite; every vector of both revisions runs in the slow one.
* Each deliberately broken registry of ``machine/selfcheck/mutants.py``, served by the same adapter,
  must fail conform citing the rule it breaks -- otherwise conform proves nothing.
* Adapters that hang, crash, print garbage or skip the hello must cost one vector each (or end
  the run with exit 2 when nothing can start), never hang or abort the run.  The hang test waits
  for the runner's robustness timeout: a short one, on a process that really hangs.
* The verdict on one answer is tested directly on doctored answers, one mistake at a time.
"""

from __future__ import annotations

import asyncio
import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from support import adapter_answer, run_cli, shipped_vectors, write_sample
from toolcancel.oracle.conform import adapter as conform_adapter
from toolcancel.oracle.conform import run_vectors
from toolcancel.oracle.conform.judge import Judge
from toolcancel.oracle.conform.protocol import (
    ANSWER_DEPTH,
    PROTOCOL_RULE,
    AdapterDied,
    parse_answer,
)
from toolcancel.oracle.conform.report import Report
from toolcancel.oracle.vectors import REVISIONS, Vector, shipped_dir
from toolcancel.oracle.vectors.turns import load_turn_vectors, turn_file
from toolcancel.runtime.registry import ToolRegistry
from toolcancel.selfcheck.adapter import Session

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = str(Path(__file__).resolve().parent / "fixtures" / "misbehaving_adapter.py")


@pytest.fixture(scope="module")
def seed() -> list[Vector]:
    return shipped_vectors("seed")


@pytest.fixture(scope="module")
def revised() -> list[Vector]:
    return shipped_vectors("revised")


# ------------------------------------------------------------------------------------------------
# Self-conformance
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("revision", REVISIONS)
def test_self_conformance_on_a_sample(
    revision: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sample = shipped_vectors(revision)[::25]
    path = write_sample(tmp_path, sample)
    code, data, _ = run_cli(
        ["--self", "--revision", revision, "--vectors", str(path), "--json"], capsys
    )
    assert (code, data["failures"]) == (0, [])
    assert (data["vectors"], data["passed"], data["failed"]) == (len(sample), len(sample), 0)
    assert data["revision"] == revision
    assert {"R17", "R21", "R27", "R31"} <= set(data["by_rule"])  # the sample exercised them
    assert all(t["failed"] == 0 for t in data["by_rule"].values())


@pytest.mark.slow
@pytest.mark.parametrize("revision", REVISIONS)
def test_self_conformance_is_total(revision: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, data, _ = run_cli(["--self", "--revision", revision, "--json"], capsys)
    assert (code, data["failed"], data["failures"]) == (0, 0, [])
    assert data["passed"] == data["vectors"] == len(shipped_vectors(revision)) + len(
        load_turn_vectors(turn_file(shipped_dir(), revision))
    )


def test_table_output_names_rules_and_totals(
    seed: list[Vector], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_sample(tmp_path, seed[:40])
    code, out, _ = run_cli(["--self", "--vectors", str(path)], capsys)
    assert code == 0
    assert "seed contract, 40 vectors" in out
    assert "40 passed, 0 failed" in out
    assert any(line.split()[:1] == ["R11"] for line in out.splitlines())


# ------------------------------------------------------------------------------------------------
# Mutants: each fails conform, citing its own rule
# ------------------------------------------------------------------------------------------------


def _retry(name: str) -> str | None:
    """The retry behaviour a mutant's registry must declare (D11), if it breaks only one."""
    from toolcancel.selfcheck.mutants import MUTANTS as found

    return next(m.retry for m in found if m.name == name)


def _serving(name: str) -> list[str]:
    """Our adapter's options that serve mutant ``name``: the retry behaviour its registry must
    declare and how its caller must give up (``--cancel task``), where it needs them."""
    from toolcancel.selfcheck.mutants import MUTANTS as found

    m = next(m for m in found if m.name == name)
    return [*(["--retry", m.retry] if m.retry else []),
            *(["--cancel", m.cancel] if m.cancel != "signal" else [])]  # fmt: skip


def _mutants(revision: str = "seed") -> list[tuple[str, str]]:
    """The mutants an adapter's answer can show (the others are verify's alone, for now) that
    break something in ``revision``."""
    from toolcancel.selfcheck.mutants import BLIND_TO_PROTOCOL
    from toolcancel.selfcheck.mutants import MUTANTS as found

    return [
        (m.name, m.rule)
        for m in found
        if m.name not in BLIND_TO_PROTOCOL and revision in m.revisions
    ]


def _mutant_report(name: str, vectors: list[Vector], revision: str) -> Report:
    import asyncio

    command = [sys.executable, "-m", "toolcancel.selfcheck.adapter", "--mutant", name]
    command += _serving(name)
    return asyncio.run(run_vectors(command, vectors, revision, timeout=60))


KILLERS = {
    # A scenario shape each mutant's broken guarantee shows in: the test below runs every vector
    # of it, in each revision, instead of the whole suite (CI runs it: a sample of the shape
    # would run a subset of its seed half, asserting less).
    "races_body": lambda s: s.cancel == "gate:body" and not s.cooperative,
    "abandons_after_grace": lambda s: s.cancel == "gate:body" and not s.cooperative,
    "no_recheck_after_pre": lambda s: s.cancel in ("gate:pre", "gate:approval"),
    "no_recheck_before_body": lambda s: s.cancel.endswith("_before"),
    "keeps_late_success": lambda s: s.cancel == "gate:post" or s.cancel.endswith("_after"),
    "drops_tool_timeout": lambda s: s.timeout == "timer_first",
    "wrong_reason_source": lambda s: (
        s.caller == "live" and (s.timeout == "timer_first" or "replace_aborting" in s.wrappers)
    ),
    "leaks_fused_listeners": lambda s: s.caller == "live" and s.timeout != "absent",
    "notifies_twice": lambda s: s.cancel == "never",
    "detaches_caller": lambda s: s.caller == "live" and s.timeout != "absent",
    "loses_contexts_on_abort": lambda s: (
        s.body.startswith("defer_") and (s.cancel == "gate:post" or s.cancel.endswith("_after"))
    ),
    "classifies_timeout_by_code": lambda s: "outer_deadline" in s.wrappers,
    "prefers_caller_reason": lambda s: s.caller == "aborted" and "replace_aborted" in s.wrappers,
    "publishes_mutable_result": lambda s: s.cancel == "never",
    "view_writable_by_observers": lambda s: s.cancel == "never",
    # a retry, a short-circuit, an around wrapper after it: the deeper family's vectors
    "cursor_skips_last": lambda s: any(
        w.startswith("short_") and "retry" in s.wrappers[:k]
        and k + 1 < len(s.wrappers) + (s.timeout != "absent")
        for k, w in enumerate(s.wrappers)
    ),
    # served with --cancel task (Mutant.cancel): a live caller's abort at a gate cancels the task
    "ignores_task_cancellation": lambda s: s.cancel == "gate:pre" and s.pre == "allow",
    "keeps_late_success_without_signal": lambda s: (
        s.cancel == "gate:post" or s.cancel.endswith("_after")
    ),
}




REVISED_RULE = {"R13": "R43"}
"""Where the revised contract restates a mutant's rule: its pre-policy checkpoint is R43."""


@pytest.mark.slow
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize(("name", "rule"), _mutants())
def test_each_mutant_fails_its_whole_shape_citing_its_rule(
    name: str, rule: str, revision: str
) -> None:
    if (name, rule) not in _mutants(revision):
        pytest.skip(f"{name} breaks nothing in the {revision} contract")
    # Every shipped vector of the mutant's shape (KILLERS: where the guarantee it breaks can show),
    # in each revision, not a sample; the whole suite per mutant cost CI about ten minutes.
    vectors = [v for v in shipped_vectors(revision) if KILLERS[name](v.scenario)]
    assert vectors, f"no {revision} vector of the shape that kills {name}"
    if revision == "revised":
        rule = REVISED_RULE.get(rule, rule)
    report = _mutant_report(name, vectors, revision)
    failed = {r: t.failed for r, t in report.by_rule().items() if t.failed}
    assert rule in failed, f"{name} breaks {rule}, but conform cited {failed}"
    assert PROTOCOL_RULE not in failed
    first = next(j for j in report.judgements if not j.passed)
    assert first.rule == rule, first.explanation  # the first failure already names the rule


# ------------------------------------------------------------------------------------------------
# Misbehaving adapters
# ------------------------------------------------------------------------------------------------


def test_lines_that_arrive_together_are_read_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner reads an adapter's stdout in chunks and splits them into lines: lines written
    in one write come back one per read, in order, a line longer than LINE_LIMIT fails only when
    it is its turn, and the last line without a newline comes back as it is before the exit."""
    monkeypatch.setattr(conform_adapter, "LINE_LIMIT", 64)
    hello = json.dumps({"protocol": 1, "type": "hello", "revisions": ["seed"]})
    out = f"{hello}\nfirst\nsecond\n{'x' * 65}\nafter\nlast"
    command = [sys.executable, "-c", f"import sys; sys.stdout.write({out!r}); sys.stdin.read()"]

    async def read() -> list[bytes | str]:
        adapter = conform_adapter.Adapter(command, timeout=60)
        await adapter.start()
        got: list[bytes | str] = []
        try:
            for _ in range(6):
                try:
                    got.append(await adapter.readline("a vector"))
                except AdapterDied as exc:
                    got.append(str(exc))
                    if "exited" in str(exc):
                        break
                if got[-1] == b"after\n":  # "last" has no newline: it comes at the exit
                    assert adapter.proc is not None and adapter.proc.stdin is not None
                    adapter.proc.stdin.close()  # so the adapter's stdin.read() returns
        finally:
            await adapter.stop()
        return got

    got = asyncio.run(read())
    assert got[:5] == [
        b"first\n",
        b"second\n",
        "the answer for a vector is longer than 64 bytes",
        b"after\n",
        b"last",
    ]
    assert got[5].startswith("the adapter exited with code 0 before answering a vector")



@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("hang", "no answer for vector {id} within 0.5 s (the adapter hangs?)"),
        ("crash", "the adapter exited with code 3 before answering vector {id}"),
        (
            "garbage",
            "the answer is not JSON: 'Traceback (most recent call last): this is not JSON'",
        ),
        ("wrong_id", "expected the answer for {id}, got id 'someone-else'"),
    ],
)
def test_a_misbehaving_adapter_fails_one_vector_and_the_run_goes_on(
    mode: str, message: str, seed: list[Vector], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sample = seed[:6]
    bad = sample[2].id
    adapter = [sys.executable, FIXTURE, mode, bad]
    path = write_sample(tmp_path, sample)
    code, data, _ = run_cli(
        ["--vectors", str(path), "--timeout", "0.5", "--json", "--adapter", *adapter],
        capsys,
    )
    assert code == 1
    assert (data["vectors"], data["passed"], data["failed"]) == (6, 5, 1)
    assert data["failures"] == [
        {
            "id": bad,
            "rule": PROTOCOL_RULE,
            "broken": [PROTOCOL_RULE],
            "step": "adapter",
            "expected": "",
            "observed": "",
            "explanation": f"{bad}: " + message.format(id=bad),
        }
    ]
    assert data["restarts"] == 1
    assert data["by_rule"][PROTOCOL_RULE] == {
        "title": "adapter failures (hang, crash, garbage)",
        "passed": 0,
        "failed": 1,
        "first_failure": bad,
        "status": "checked",
        "why": "",
        "state": "broken",
        "broken_by": 0,
    }


def test_an_answer_with_both_result_and_raised_is_a_protocol_failure_naming_the_field(
    seed: list[Vector], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An adapter that reports a result and a raised error for one call: the protocol says one
    of them is null, so the answer is refused -- never judged as if the call had returned."""
    sample = seed[:3]
    bad = sample[1].id
    path = write_sample(tmp_path, sample)
    code, data, _ = run_cli(
        ["--vectors", str(path), "--json", "--adapter", sys.executable, FIXTURE, "both", bad],
        capsys,
    )
    assert (code, data["passed"], data["failed"], data["restarts"]) == (1, 2, 1, 0)
    [failure] = data["failures"]
    assert (failure["id"], failure["rule"], failure["step"]) == (bad, PROTOCOL_RULE, "answer")
    assert failure["explanation"].startswith(f"{bad}: observed.raised is given with a result")


def test_an_adapter_without_hello_is_unusable(
    seed: list[Vector], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_sample(tmp_path, seed[:2])
    code, out, err = run_cli(
        [
            "--vectors",
            str(path),
            "--timeout",
            "5",
            "--adapter",
            sys.executable,
            FIXTURE,
            "no_hello",
        ],
        capsys,
    )
    assert (code, out) == (2, "")
    assert err == (
        "toolcancel conform: the adapter's first line is not a hello: 'adapter starting up...'\n"
    )


def test_a_nonexistent_adapter_command_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli(["--adapter", "/nonexistent/adapter", "--flag"], capsys)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert err.startswith("toolcancel conform: cannot start the adapter '/nonexistent/adapter'")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give exactly one of --self and --adapter CMD [ARGS...]"),
        (["--self", "--adapter", "x"], "give exactly one of --self and --adapter CMD [ARGS...]"),
        (["--self", "--timeout", "0"], "--timeout must be a positive number of seconds"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(args, capsys)
    assert (code, err) == (2, f"toolcancel conform: {message} (see toolcancel conform --help)\n")


def test_an_unknown_revision_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["--self", "--revision", "head"], capsys)
    assert code == 2 and err.count("\n") == 1 and "head" in err


def test_an_adapter_without_the_revision_is_exit_2(
    revised: list[Vector], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_sample(tmp_path, revised[:2])
    command = [sys.executable, "-m", "toolcancel.selfcheck.adapter", "--revision", "seed"]
    code, _, err = run_cli(
        ["--revision", "revised", "--vectors", str(path), "--adapter", *command], capsys
    )
    assert (code, err) == (
        2,
        "toolcancel conform: the adapter does not implement the revised contract (its hello "
        "lists seed)\n",
    )


def test_an_error_answer_fails_that_vector_without_a_restart(
    seed: list[Vector], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sample = seed[:3]
    adapter = [sys.executable, FIXTURE, "refuse", sample[1].id]
    path = write_sample(tmp_path, sample)
    code, data, _ = run_cli(
        ["--vectors", str(path), "--json", "--adapter", *adapter],
        capsys,
    )
    assert (code, data["passed"], data["restarts"]) == (1, 2, 0)
    assert data["failures"] == [
        {
            "id": sample[1].id,
            "rule": PROTOCOL_RULE,
            "broken": [PROTOCOL_RULE],
            "step": "adapter",
            "expected": "",
            "observed": "",
            "explanation": f"{sample[1].id}: the adapter could not run it: not today",
        }
    ]


def test_our_adapter_answers_an_error_for_what_it_cannot_run() -> None:
    session = Session(ToolRegistry, ("seed",))
    try:
        answers = [
            session.answer(json.dumps(msg))
            for msg in (
                {"protocol": 2, "type": "vector", "id": "a", "revision": "revised",
                 "scenario": {"revision": "revised"}},
                {"protocol": 2, "type": "vector", "id": "b", "revision": "seed",
                 "scenario": {"cancel": "step:2"}},
                {"protocol": 2, "type": "vector", "id": "c", "revision": "seed",
                 "scenario": {"body": "explode"}},
                {"protocol": 3, "type": "vector", "id": "d"},
            )
        ]  # fmt: skip
    finally:
        session.close()
    assert [(a["type"], a["id"], a["message"]) for a in answers] == [
        ("error", "a", "revision 'revised' is not one of ['seed']"),
        ("error", "b", "cancel step:<k> is not part of the portable language"),
        (
            "error",
            "c",
            "scenario.body: 'explode' is not one of success, success_meta, bad_meta, throw, "
            "throw_structured, defer_success, defer_throw",
        ),
        ("error", "d", "protocol 3; this adapter speaks 1 or 2"),
    ]


@pytest.mark.parametrize("spread", [False, True])
def test_an_answer_nesting_deeper_than_the_limit_is_refused(spread: bool) -> None:
    """An answer nests at most ANSWER_DEPTH levels: one at the limit is read, one a level
    deeper is a protocol failure -- with its brackets in one nest, and spread over many
    (so that the line has more brackets than the limit even when the nest is shallow)."""

    def answer(depth: int) -> bytes:
        nest = "[" * (depth - 1) + "]" * (depth - 1)  # the answer object is the first level
        extra = ',"observed":{"pad":[' + ",".join(["[]"] * ANSWER_DEPTH) + "]}" if spread else ""
        return f'{{"protocol":2,"type":"outcome","id":"v","result":{nest}{extra}}}'.encode()

    assert parse_answer(answer(ANSWER_DEPTH), "v")["id"] == "v"
    with pytest.raises(AdapterDied, match=f"nests deeper than {ANSWER_DEPTH} levels"):
        parse_answer(answer(ANSWER_DEPTH + 1), "v")


# ------------------------------------------------------------------------------------------------
# The verdict on one answer
# ------------------------------------------------------------------------------------------------


def _find(vectors: list[Vector], **want: Any) -> Vector:
    return next(v for v in vectors if all(getattr(v.scenario, k) == x for k, x in want.items()))


def _answer(v: Vector) -> dict[str, Any]:
    return adapter_answer(v)


def _verdict(v: Vector, answer: dict[str, Any]) -> tuple[bool, str | None, str]:
    j = Judge(v.revision).judge(v, answer)
    return j.passed, j.rule, j.explanation


def test_an_untouched_answer_passes(seed: list[Vector]) -> None:
    v = _find(seed, cancel="gate:body", body="defer_success", wrappers=())
    passed, rule, _ = _verdict(v, _answer(v))
    assert (passed, rule) == (True, None)


def test_a_caller_abort_seen_late_is_cited_by_the_checker(seed: list[Vector]) -> None:
    v = _find(seed, caller="live", pre="allow", cancel="gate:pre", post="accept")
    answer = _answer(v)
    trace = answer["trace"]
    moved = trace.pop(next(k for k, x in enumerate(trace) if x["event"] == "caller_abort"))
    trace.insert(next(k for k, x in enumerate(trace) if x["event"] == "publish"), moved)
    passed, rule, why = _verdict(v, answer)
    assert (passed, rule) == (False, "R13")
    assert 'trace event 4 (stage_enter(stage="post"))' in why


def test_a_consistent_trace_off_the_allowed_paths_is_cited_where_it_leaves_them(
    seed: list[Vector],
) -> None:
    # The trace of the uncancelled call is valid on its own; for the vector that cancels during
    # pre-execute it misses the abort that checkpoint C1 (R13) had to see.
    v = _find(seed, caller="live", pre="allow", cancel="gate:pre", post="accept")
    answer = _answer(Vector(v.id, v.revision, v.scenario.with_cancel("never"), v.expected))
    passed, rule, why = _verdict(v, answer)
    assert (passed, rule) == (False, "R13")
    assert why.startswith(
        f"{v.id}: at contract event 1 the trace has pre_allow where the contract has "
        "caller_abort (the caller's abort is not seen there): the contract takes pre_allow to "
        "post_policy with outcome aborted (R13, R28)."
    )


def test_lost_contexts_are_r29(seed: list[Vector]) -> None:
    v = _find(seed, body="defer_success", cancel="gate:body", wrappers=(), post="accept")
    answer = _answer(v)
    assert "additionalContexts" in answer["result"]
    del answer["result"]["additionalContexts"]
    passed, rule, why = _verdict(v, answer)
    assert (passed, rule) == (False, "R29")
    assert "only the contexts differ" in why


def test_a_late_success_is_r28(seed: list[Vector]) -> None:
    v = _find(seed, cancel="gate:post", post="accept", wrappers=(), body="success")
    answer = _answer(v)
    success = {"content": [{"type": "text", "text": "done"}], "isError": False}
    answer["result"] = success
    passed, rule, _ = _verdict(v, answer)
    assert (passed, rule) == (False, "R28")


def test_notifying_twice_is_r31(seed: list[Vector]) -> None:
    v = seed[10]
    answer = _answer(v)
    answer["observed"]["notifications"] = 2
    passed, rule, why = _verdict(v, answer)
    assert (passed, rule) == (False, "R31")
    assert "notified 2 time(s)" in why


def test_a_body_signal_with_the_wrong_reason_is_r21(seed: list[Vector]) -> None:
    v = _find(seed, wrappers=("replace_aborting",), cancel="never")
    answer = _answer(v)
    assert answer["observed"]["body_signals"] == [{"aborted": True, "reason": "wrapper"}]
    answer["observed"]["body_signals"] = [{"aborted": True, "reason": "other"}]
    passed, rule, _ = _verdict(v, answer)
    assert (passed, rule) == (False, "R21")


def test_settling_before_the_body_is_r27(seed: list[Vector]) -> None:
    v = _find(seed, cancel="gate:body", wrappers=(), post="accept", body="success")
    answer = _answer(v)
    start = next(k for k, x in enumerate(answer["trace"]) if x["event"] == "body_start")
    answer["observed"]["settled_at"] = start + 1
    passed, rule, _ = _verdict(v, answer)
    assert (passed, rule) == (False, "R27")


def test_a_malformed_answer_is_a_protocol_failure(seed: list[Vector]) -> None:
    v = seed[0]
    for doctor in (
        lambda a: a.pop("observed"),
        lambda a: a["observed"].update(settled_at=10_000),
        lambda a: a["observed"].update(body_signals=[{"aborted": "yes", "reason": None}]),
        lambda a: a.update(result=[]),
        lambda a: a.update(trace=[{"no": "event"}]),
        lambda a: a["observed"].update(listeners_left={"watched": 1}),
        lambda a: a["observed"].update(listeners_left={"watched": 1, "leaks": -1}),
    ):
        answer = copy.deepcopy(_answer(v))
        doctor(answer)
        passed, rule, _ = _verdict(v, answer)
        assert (passed, rule) == (False, PROTOCOL_RULE)


@pytest.mark.parametrize(
    ("doctor", "field"),
    [
        (lambda a: a["observed"].update(raised="Error: boom"), "observed.raised"),
        (lambda a: a["observed"].update(settled_at=None, settled=None), "observed.settled_at"),
        (lambda a: a["observed"].update(settled_at=None), "observed.settled"),
        (lambda a: a.update(result=None), "observed.settled_at"),
        (lambda a: a["observed"].update(notifications=0, notified_same=False),
         "observed.notified_same"),
        (lambda a: a["observed"].update(notifications=0, frozen={"result": True, "view": True}),
         "observed.frozen"),
        (lambda a: a["observed"].update(listeners_left={"watched": 1, "leaks": 2}),
         "observed.listeners_left.leaks"),
        (lambda a: a["observed"].update(listeners_left={"watched": 1, "leaks": 0, "first": "x"}),
         "observed.listeners_left.first"),
        (lambda a: a["observed"].update(body_signals=[{"aborted": False, "reason": "caller"}]),
         "observed.body_signals"),
        (lambda a: a["observed"].update(body_signals=[{"aborted": True, "reason": None}]),
         "observed.body_signals"),
    ],
)  # fmt: skip
def test_fields_that_contradict_each_other_are_a_protocol_failure_naming_one(
    seed: list[Vector], doctor: Any, field: str
) -> None:
    """Values no registry can make -- a result and a raised error, a settled call with neither,
    a false ``notified_same`` without a notification, more leaks than watched signals, a live
    signal with a reason -- are refused, naming the field, before any rule is judged."""
    v = _find(seed, cancel="never", wrappers=(), body="success", post="accept")
    answer = copy.deepcopy(_answer(v))
    doctor(answer)
    passed, rule, why = _verdict(v, answer)
    assert (passed, rule) == (False, PROTOCOL_RULE)
    assert why.startswith(f"{v.id}: {field}"), why


def test_outcome_answers_that_contradict_themselves_are_a_protocol_failure(
    seed: list[Vector],
) -> None:
    """At outcome level: a call reported settled with neither result nor raised, more bodies
    settled than settle observations, more bodies started after the abort than bodies."""
    v = _find(seed, caller="live", cancel="gate:body", wrappers=(), body="success", post="accept")
    plain = adapter_answer(v, level="outcome")
    assert plain["observed"]["caller_aborted"] is not None
    for doctor, field in (
        (lambda a: a.update(result=None), "observed.settled"),
        (lambda a: a["observed"].update(settled=None), "observed.settled"),
        (lambda a: a["observed"]["bodies"][0].update(settle=None), "observed.settled.bodies"),
        (lambda a: a["observed"]["caller_aborted"].update(bodies_after=5),
         "observed.caller_aborted.bodies_after"),
    ):  # fmt: skip
        answer = copy.deepcopy(plain)
        doctor(answer)
        j = Judge(v.revision, level="outcome").judge(v, answer)
        assert (j.passed, j.rule) == (False, PROTOCOL_RULE)
        assert j.explanation.startswith(f"{v.id}: {field}"), j.explanation


def test_a_trace_the_checker_refuses_cites_the_checker_rule(seed: list[Vector]) -> None:
    v = _find(seed, cancel="never", wrappers=(), body="success", post="accept")
    answer = _answer(v)
    assert answer["trace"][-1]["event"] == "notify"
    answer["trace"].append(dict(answer["trace"][-1]))  # a second notify line
    passed, rule, why = _verdict(v, answer)
    assert (passed, rule) == (False, "R31")
    assert "second notify" in why


def _move(trace: list[dict[str, Any]], event: str, before: str | None) -> None:
    """Move the first ``event`` line to just before the first ``before`` line (None: drop it)."""
    line = trace.pop(next(k for k, x in enumerate(trace) if x["event"] == event))
    if before is not None:
        trace.insert(next(k for k, x in enumerate(trace) if x["event"] == before), line)


def test_an_abort_noticed_later_or_never_passes_while_nothing_depends_on_it(
    seed: list[Vector],
) -> None:
    # The body fails, so neither C3 nor C4 replaces anything: when the registry notices the
    # caller's abort after the body settled cannot matter.
    v = _find(seed, wrappers=("wait_after",), body="throw", cancel="gate:w0_after", post="accept")
    listed = v.expected.paths[0]
    assert listed.index("caller_abort") < listed.index("around_settled")
    for before in ("publish", None):
        answer = _answer(v)
        _move(answer["trace"], "caller_abort", before)
        answer["observed"]["settled_at"] = len(answer["trace"])
        assert _verdict(v, answer)[:2] == (True, None), before


def test_an_abort_noticed_too_late_or_too_early_fails(seed: list[Vector]) -> None:
    # The body succeeds: an abort noticed only after C3 and C4 means the success should have
    # been published, yet the result is ABORTED -- the checker cites the decision (R18).
    v = _find(seed, wrappers=("wait_after",), body="success", cancel="gate:w0_after", post="accept")
    late = _answer(v)
    _move(late["trace"], "caller_abort", "publish")
    passed, rule, why = _verdict(v, late)
    assert (passed, rule) == (False, "R18")
    assert "outcome for this call is body_success" in why
    # An abort the registry claims to have seen before the caller aborted: between dispatch and
    # the body's settling, which changes no transition, but is not when it happened.
    early = _answer(v)
    _move(early["trace"], "caller_abort", "body_settle")
    passed, rule, why = _verdict(v, early)
    assert (passed, rule) == (False, "R2")
    assert "the trace has caller_abort where the contract has body_ok" in why


@pytest.mark.rules("R21", "R27")
@pytest.mark.parametrize("revision", REVISIONS)
def test_a_caller_abort_seen_through_a_derived_slot_signal_may_be_named_fused_abort_first(
    revision: str,
) -> None:
    """The timeout policy's deadline listens on the caller's signal, so the caller's abort
    reaches the body's relay through the slot first: a registry may write ``fused_abort`` and
    then ``caller_abort`` where the reference writes ``caller_abort`` (both take the body to
    draining).  A ``fused_abort`` with no caller abort after it is still judged as before."""
    vectors = shipped_vectors(revision)
    v = _find(vectors, timeout="budget", cancel="gate:body", wrappers=(), body="success")
    answer = _answer(v)
    events = [line["event"] for line in answer["trace"]]
    at = events.index("caller_abort")
    fused = {"trace": 1, "call": "c1", "event": "fused_abort"}
    both = copy.deepcopy(answer)
    both["trace"].insert(at, fused)
    both["observed"]["settled_at"] += 1
    assert _verdict(v, both)[:2] == (True, None)
    alone = copy.deepcopy(answer)
    alone["trace"][at] = fused
    assert _verdict(v, alone)[0] is False


def test_an_optional_observation_that_contradicts_the_scenario_is_a_protocol_failure(
    seed: list[Vector],
) -> None:
    """A deadline reported for a tool without a budget, or an ``outer`` that disagrees with the
    scenario's wrappers, and a caller abort where no live caller is aborted after entry: values
    the vector rules out, refused naming the field."""
    plain = _find(seed, cancel="never", wrappers=(), timeout="absent", caller="none")
    budget = _find(seed, timeout="budget", wrappers=())
    for v, doctor, field in (
        (plain, lambda o: o.update(deadline={"expired": False, "outer": False}),
         "observed.deadline"),
        (budget, lambda o: o.update(deadline={"expired": False, "outer": True}),
         "observed.deadline.outer"),
        (plain, lambda o: o.update(caller_aborted={"bodies_after": 0, "before_post": True}),
         "observed.caller_aborted"),
    ):  # fmt: skip
        answer = copy.deepcopy(_answer(v))
        doctor(answer["observed"])
        passed, rule, why = _verdict(v, answer)
        assert (passed, rule) == (False, PROTOCOL_RULE)
        assert why.startswith(f"{v.id}: {field} "), why
