"""The runtime adapter kit (toolcancel.runtimes): its rules, and the control row it gives every
mapping.

A toy runtime (tests/fixtures/toy_runtime_adapter.py, written as an outsider writes an adapter)
stands in for a real one: the rules are the kit's, whatever runtime is behind it.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from toolcancel import AbortController
from toolcancel.oracle.conform.capabilities import STAGES, Capabilities
from toolcancel.oracle.conform.capabilities import needs as capability_needs
from toolcancel.oracle.conform.judge import Judge
from toolcancel.oracle.conform.protocol import outcome_problem
from toolcancel.oracle.vectors import load_vectors
from toolcancel.runtime import virtual_time
from toolcancel.runtime.virtual_time import VirtualClock
from toolcancel.runtimes import (
    HANG,
    AdapterError,
    Call,
    Execute,
    Outcome,
    RegistryControl,
    Runtime,
    Unsupported,
    main,
    registry_for,
    row,
    run_vector,
    serve,
    task_signal,
)
from toolcancel.runtimes import needs as kit_needs

ROOT = Path(__file__).resolve().parent.parent
TOY = ROOT / "tests" / "fixtures" / "toy_runtime_adapter.py"
STAGELESS = ROOT / "spec" / "vectors" / "stageless-seed.jsonl"
VECTORS = {v["id"]: v for v in map(json.loads, STAGELESS.read_text("utf-8").splitlines())}
PLAIN = VECTORS["seed-s00001"]  # a success, never cancelled
CANCELLED = VECTORS["seed-s00005"]  # cancelled while a cooperative body runs
assert CANCELLED["scenario"]["cancel"] == "gate:body" and CANCELLED["scenario"]["cooperative"]


def play(runtime: Runtime, vector: dict[str, Any]) -> dict[str, Any]:
    clock = VirtualClock()
    return virtual_time.run(
        run_vector(runtime, clock, vector["scenario"], vector["revision"]), clock=clock
    )


class Raising(Runtime):
    """A runtime whose execute() does what ``behave`` says instead of calling anything."""

    capabilities = {"body_signal": True}  # noqa: RUF012 -- a test double's declaration
    cancel = ["task"]  # noqa: RUF012

    def __init__(self, behave: Any) -> None:
        self.behave = behave

    @asynccontextmanager
    async def open(self, call: Call) -> AsyncIterator[Execute]:
        async def execute(args: dict[str, Any]) -> Outcome:
            return await self.behave(call)

        yield execute


def test_an_outcome_is_a_result_or_a_raise_never_both_never_neither() -> None:
    with pytest.raises(ValueError, match="exactly one of result"):
        Outcome(result={"content": [], "isError": False}, raised="boom")
    with pytest.raises(ValueError, match="exactly one of result"):
        Outcome()
    with pytest.raises(ValueError, match="needs raised"):
        Outcome(result={"content": [], "isError": False}, cancelled=True)


def test_unsupported_inside_execute_is_refused_like_in_open_never_scored_as_a_raise() -> None:
    async def refuse(call: Call) -> Outcome:
        raise Unsupported("this runtime cannot express that")

    with pytest.raises(Unsupported, match="cannot express"):
        play(Raising(refuse), PLAIN)


def test_serve_answers_a_refusal_with_a_protocol_error(monkeypatch: pytest.MonkeyPatch) -> None:
    async def refuse(call: Call) -> Outcome:
        raise Unsupported("this runtime cannot express that")

    line = json.dumps({"protocol": 2, "type": "vector", **PLAIN})
    monkeypatch.setattr(sys, "stdin", io.StringIO(line + "\n"))
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    serve(Raising(refuse))
    hello, answer = map(json.loads, out.getvalue().splitlines())
    assert hello["type"] == "hello"
    assert answer == {"protocol": 2, "type": "error", "id": PLAIN["id"],
                      "message": "Unsupported: this runtime cannot express that"}  # fmt: skip


def test_a_raised_call_answered_with_a_result_is_the_adapters_error() -> None:
    async def contradict(call: Call) -> Outcome:
        call.outcome = Outcome(result={"content": [], "isError": False})  # what a history kept
        raise RuntimeError("the run failed")

    with pytest.raises(AdapterError, match="answered with raised only"):
        play(Raising(contradict), PLAIN)


def test_a_raised_call_is_answered_with_raised_only() -> None:
    async def fail(call: Call) -> Outcome:
        raise RuntimeError("the run failed")

    answer = play(Raising(fail), PLAIN)
    assert answer["result"] is None
    assert answer["observed"]["raised"] == "RuntimeError: the run failed"
    assert "caller_cancelled" not in answer["observed"]


def test_a_task_cancel_caller_sees_its_own_cancellation_come_back_and_says_so() -> None:
    """Our registry through a task-cancel mapping: it publishes, then re-raises the caller's
    CancelledError (the Python binding's P2): the answer flags the raise as the caller's."""

    class Mapping(Runtime):
        implementation = "a task-cancel mapping"
        capabilities = {"body_signal": True}  # noqa: RUF012
        cancel = ["task"]  # noqa: RUF012

    answer = play(RegistryControl(Mapping), CANCELLED)
    assert answer["result"] is None
    assert answer["observed"]["raised"] == "CancelledError"
    assert answer["observed"]["caller_cancelled"] is True
    assert answer["observed"]["settled"] == {"bodies_started": 1, "bodies_settled": 1}


def test_the_protocol_refuses_a_cancellation_flag_with_neither_a_result_nor_a_raise() -> None:
    answer: dict[str, Any] = {
        "result": None,
        "observed": {"raised": None, "caller_cancelled": True, "notifications": 0,
                     "notified_same": True, "bodies": [],
                     "settled": {"bodies_started": 0, "bodies_settled": 0}},
    }  # fmt: skip
    assert "caller_cancelled is true with neither a result nor a raise" in str(
        outcome_problem(answer)
    )
    answer["observed"]["caller_cancelled"] = "yes"
    assert "must be true or false" in str(outcome_problem(answer))


def conform(*argv: str) -> dict[str, Any]:
    """conform's JSON report of the toy adapter on the stage-less seed family."""
    command = [sys.executable, "-m", "toolcancel", "conform", "--revision", "seed", "--quiet",
               "--json", "--vectors", str(STAGELESS), "--adapter", sys.executable, str(TOY),
               *argv]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode in (0, 1), done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def test_the_control_passes_every_vector_and_a_planted_mapping_fault_fails_it() -> None:
    """The control row (our registry through the toy's mapping) passes all it is sent; the same
    control with a mapping that reads every result as a success fails, citing the rules that
    fault breaks -- a control that could not fail would prove nothing."""
    control = conform("--control")
    assert control["vectors"] > 0 and control["failed"] == 0, control["families"]
    faulty = conform("--control", "--faulty")
    assert faulty["failed"] > 0
    assert {f["rule"] for f in faulty["families"]} >= {"R6", "R18"}


def test_a_runtime_raising_its_callers_cancellation_is_not_failed_for_it() -> None:
    """The toy runtime, judged through the same mapping, is not failed for raising its
    caller's cancellation (R31): what the control also does is not a finding."""
    toy = conform()
    cited = {(x["rule"], x["id"]) for x in toy["failures"]}
    cancelled = {v["id"] for v in VECTORS.values() if v["scenario"]["cancel"] == "gate:body"}
    assert not {i for rule, i in cited if rule == "R31"} & cancelled
    assert toy["failed"] > 0  # the toy has real findings: it is judged, not excused


def _judged(vector_id: str, answer: dict[str, Any]) -> tuple[bool, str | None]:
    """The judge's verdict on ``answer`` for a stage-less vector, for a task-cancel runtime."""
    (v,) = [v for v in load_vectors(STAGELESS) if v.id == vector_id]
    caps = Capabilities.from_hello(
        {**{k: False for k in STAGES}, "body_signal": True, "cancel": ["task"]}
    )
    verdict = Judge("seed", level="outcome", capabilities=caps).judge(v, answer)
    return verdict.passed, verdict.rule


def test_the_judge_excuses_a_raise_only_as_the_cancellation_of_a_caller_who_cancelled() -> None:
    """A flagged raise on a vector whose caller cancelled while the call ran owes no return;
    unflagged, it is R31's failure; flagged on a vector nobody cancelled, it excuses nothing."""

    class Mapping(Runtime):
        implementation = "a task-cancel mapping"
        capabilities = {"body_signal": True}  # noqa: RUF012
        cancel = ["task"]  # noqa: RUF012

    cancelled = play(RegistryControl(Mapping), CANCELLED)
    assert _judged(CANCELLED["id"], cancelled) == (True, None)
    del cancelled["observed"]["caller_cancelled"]
    assert _judged(CANCELLED["id"], cancelled) == (False, "R31")
    plain = play(RegistryControl(Mapping), PLAIN)
    assert _judged(PLAIN["id"], plain) == (True, None)
    plain["result"] = None
    plain["observed"].update(raised="CancelledError", caller_cancelled=True)
    assert _judged(PLAIN["id"], plain) == (False, "R31")


REVISED = {
    v["id"]: v
    for v in map(json.loads, (ROOT / "spec" / "vectors" / "revised.jsonl").open(encoding="utf-8"))
    if v["id"] in ("revised-03000", "revised-00026")
}
PRE_ABORTED = REVISED["revised-03000"]  # the caller aborted before execute()
LATE_FAILURE = REVISED["revised-00026"]  # cancelled while a cooperative body runs; it then throws
assert PRE_ABORTED["scenario"]["caller"] == "aborted"
assert LATE_FAILURE["scenario"]["cancel"] == "gate:body"


class SignalMapping(Runtime):
    """A mapping whose caller's signal is the runtime's own cancellation API."""

    implementation = "a signal mapping"
    capabilities = {"body_signal": True}  # noqa: RUF012
    cancel = ["signal"]  # noqa: RUF012


def test_a_signal_caller_fires_the_runtimes_own_cancel_before_entry_and_while_it_runs() -> None:
    """``cancel = ["signal"]``: the kit fires what the adapter registered with Call.on_abort --
    at once for a caller aborted before the call (no body starts), when it aborts otherwise (a
    cooperative body stops, and its late failure survives) -- never by cancelling a task."""
    before = play(RegistryControl(SignalMapping), PRE_ABORTED)
    assert before["result"] == PRE_ABORTED["expected"]["result"]
    assert before["observed"]["bodies"] == []
    late = play(RegistryControl(SignalMapping), LATE_FAILURE)
    assert late["result"] == LATE_FAILURE["expected"]["result"]
    assert late["observed"]["raised"] is None
    assert late["observed"]["bodies"][0]["settle"] == {"aborted": True, "reason": "caller"}


def test_a_signal_runtime_whose_adapter_registered_no_cancel_is_the_adapters_error() -> None:
    """A runtime declaring ``signal`` that never hands the kit its cancel: the caller's abort
    reached nobody, and the kit says so instead of scoring what the runtime then did."""

    class Deaf(Raising):
        cancel = ["signal"]  # noqa: RUF012

    async def run_body(call: Call) -> Outcome:
        await call.body(lambda: {"aborted": False, "reason": None}, None)
        return Outcome(result={"content": [], "isError": False})

    with pytest.raises(AdapterError, match=r"registered nothing with Call\.on_abort"):
        play(Deaf(run_body), CANCELLED)


def test_a_call_that_hangs_is_answered_as_a_hang_not_as_the_cancel_that_ends_it() -> None:
    async def wait_for_nothing(call: Call) -> Outcome:
        await anyio.Event().wait()
        raise AssertionError("nothing sets that event")

    answer = play(Raising(wait_for_nothing), PLAIN)
    assert answer["result"] is None
    assert answer["observed"]["raised"] == HANG
    assert "caller_cancelled" not in answer["observed"]


def test_an_adapter_says_which_stages_its_runtime_has_undriven_naming_only_stages(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--undriven`` prints what the page publishes beside the rules left not judged; a name
    that is no stage of the hello is the adapter's mistake, said in one line."""

    class Fine(Runtime):
        undriven = {"approval": "an approval seam, not driven yet"}  # noqa: RUF012
        absent = {"guards": "no check after the decision"}  # noqa: RUF012
        unmeasured = {"stdio": "another process"}  # noqa: RUF012

    main(Fine(), argv=["--undriven"])
    assert json.loads(capsys.readouterr().out) == {
        "stages": {"approval": "an approval seam, not driven yet"},
        "absent": {"guards": "no check after the decision"},
        "configurations": {"stdio": "another process"},
    }

    class Odd(Runtime):
        undriven = {"hooks": "not a stage of the hello"}  # noqa: RUF012

    with pytest.raises(SystemExit):
        main(Odd(), argv=["--undriven"])
    assert "undriven or absent names no stage of the hello: hooks" in capsys.readouterr().err

    class Both(Runtime):
        capabilities = {"around": True}  # noqa: RUF012
        absent = {"around": "declared, yet said to be absent"}  # noqa: RUF012

    with pytest.raises(SystemExit):
        main(Both(), argv=["--undriven"])
    assert "absent names a stage the hello declares: around" in capsys.readouterr().err


def test_a_row_is_its_base_with_only_the_configuration_it_names_changed() -> None:
    """``row``: another configuration of a runtime, a class of its own; a switch its base does
    not have is refused, so a misspelt row cannot measure the base again."""
    signal_row = row(Raising, "the toy, by its own signal", cancel=["signal"])
    assert issubclass(signal_row, Raising) and signal_row.cancel == ["signal"]
    assert signal_row.implementation == "the toy, by its own signal"
    assert Raising.cancel == ["task"] and signal_row.capabilities is Raising.capabilities
    with pytest.raises(AttributeError, match="Raising has no cancle"):
        row(Raising, "misspelt", cancle=["signal"])


class Policies(Runtime):
    """A mapping that drives pre- and post-execute (and nothing else): what the OpenAI Agents
    SDK's guardrail adapter declares."""

    implementation = "policies"
    capabilities = {"body_signal": True, "pre_policy": True, "post_policy": True}  # noqa: RUF012
    cancel = ["task"]  # noqa: RUF012


class PoliciesUnmounted(RegistryControl):
    """A planted mapping fault: it declares pre- and post-execute but mounts neither."""

    @asynccontextmanager
    async def open(self, call: Call) -> AsyncIterator[Execute]:
        registry = registry_for(call)

        async def execute(args: dict[str, Any]) -> Outcome:
            result = await registry.execute("tool", args)
            return Outcome(result=result.to_data())

        yield execute


def control_then_planted(
    table: Any, sent: list[Any], raw: dict[str, Any], control: Runtime, planted: Runtime
) -> set[str | None]:
    """Every vector of ``sent`` passes through ``control`` (toolcancel's registry through the
    mapping); the rules the same vectors fail under ``planted`` (the mapping with a fault)."""
    failed = {}
    for v in sent:
        verdict = table.judge(v, play(control, raw[v.id]))
        if not verdict.passed:
            failed[v.id] = verdict.rule
    assert failed == {}
    return {table.judge(v, play(planted, raw[v.id])).rule for v in sent}


def test_the_control_plays_the_scenarios_pre_and_post_execute_on_the_kits_gates() -> None:
    """Our registry through a mapping that declares pre- and post-execute passes every seed
    vector such a runtime is sent (the decisions, and a caller cancelling at gate ``pre`` or
    ``post``); the same declarations with nothing mounted fail under the stages' rules."""
    policies = Capabilities.from_hello(Policies().hello()["capabilities"])
    table = Judge("seed", level="outcome", capabilities=policies)
    path = ROOT / "spec" / "vectors" / "seed.jsonl"
    raw = {v["id"]: v for v in map(json.loads, path.read_text("utf-8").splitlines())}
    sent = [
        v
        for v in load_vectors(path)
        if set(kit_needs(raw[v.id]["scenario"])) <= {"pre_policy", "post_policy"}
        and not policies.lacks(capability_needs(v, table.table))
        and v.scenario.caller != "aborted"
    ]
    assert {v.scenario.pre for v in sent} >= {"deny", "ask"}  # an ask no seam can take
    assert {v.scenario.cancel for v in sent} >= {"gate:pre", "gate:post"}
    planted = control_then_planted(
        table, sent, raw, RegistryControl(Policies), PoliciesUnmounted(Policies)
    )
    assert {"R5", "R7"} <= planted


class Deadlines(Runtime):
    """A mapping that gives its runtime's own tool timeout the scenario's budget (and nothing
    else), its caller a signal: what the pydantic-ai token row declares."""

    implementation = "deadlines"
    capabilities = {"body_signal": True, "timeout_policy": True}  # noqa: RUF012
    cancel = ["signal"]  # noqa: RUF012


class DeadlineUnset(RegistryControl):
    """A planted mapping fault: it declares the timeout stage but gives the tool no budget."""

    @asynccontextmanager
    async def open(self, call: Call) -> AsyncIterator[Execute]:
        registry = registry_for(call)  # no capabilities: no timeout policy, no budget

        async def execute(args: dict[str, Any]) -> Outcome:
            caller = AbortController()
            call.on_abort(caller.abort)
            result = await registry.execute("tool", args, signal=caller.signal)
            return Outcome(result=result.to_data())

        yield execute


@pytest.mark.parametrize("revision", ["seed", "revised"])
def test_the_control_plays_the_scenarios_tool_deadline_on_the_kits_clock(revision: str) -> None:
    """Our registry through a mapping that declares a tool timeout passes every vector such a
    runtime is sent -- the budget alone, its deadline passing while the body waits
    (``timer_first``), the caller aborting in that very step (``with_deadline``) -- its body's
    signal classified as the deadline's where the deadline came first; the same declaration
    with no budget given fails under the timeout's rules."""
    deadlines = Capabilities.from_hello(Deadlines().hello()["capabilities"])
    table = Judge(revision, level="outcome", capabilities=deadlines)
    path = ROOT / "spec" / "vectors" / f"{revision}.jsonl"
    raw = {v["id"]: v for v in map(json.loads, path.read_text("utf-8").splitlines())}
    sent = [
        v
        for v in load_vectors(path)
        if set(kit_needs(raw[v.id]["scenario"])) == {"timeout_policy"}
        and not deadlines.lacks(capability_needs(v, table.table))
    ]
    assert {v.scenario.cancel for v in sent} >= {"with_deadline", "gate:body", "never"}
    assert {v.scenario.timeout for v in sent} == {"budget", "timer_first"}
    planted = control_then_planted(
        table, sent, raw, RegistryControl(Deadlines), DeadlineUnset(Deadlines)
    )
    # no deadline to pass: the first thing that differs is the body's signal, which the
    # deadline aborts (R21: the fused signal carries the first source's reason)
    assert "R21" in planted


@pytest.mark.parametrize(
    ("body", "answered"),
    [("throw", "tool failed"), ("throw_structured", "disk full"), ("defer_throw", "tool failed"),
     ("success", None)],
)  # fmt: skip
def test_a_cooperative_body_whose_task_is_cancelled_settles_as_its_scenario_says(
    body: str, answered: str | None
) -> None:
    """A body whose only signal is its task's cancellation stops at the cancel, then settles
    with its own behaviour (spec/vectors/README.md, ``cooperative``): a failing body raises its
    failure -- for the runtime to keep or lose -- and a succeeding one ends cancelled."""

    async def run_body(call: Call) -> Outcome:
        try:
            await call.body(task_signal, None)
        except Exception as exc:  # the body's own failure: the runtime's answer here
            return Outcome(result={"content": [{"type": "text", "text": str(exc)}],
                                   "isError": True})  # fmt: skip
        return Outcome(result={"content": [], "isError": False})

    vector = {**CANCELLED, "scenario": {**CANCELLED["scenario"], "body": body}}
    runtime = Raising(run_body)
    runtime.capabilities = {**runtime.capabilities, "defer_context": True}  # defer_throw's need
    answer = play(runtime, vector)
    (seen,) = answer["observed"]["bodies"]
    assert seen["settle"] == {"aborted": True, "reason": "caller"}
    if answered is None:
        assert answer["observed"]["raised"] == "CancelledError"
        assert answer["observed"]["caller_cancelled"] is True
    else:
        assert answer["result"]["content"] == [{"type": "text", "text": answered}]
