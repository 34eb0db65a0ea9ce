"""Rules R10-R20 and R39: the pipeline, its checkpoints, and outcome precedence (seed revision).

The checkpoints C1, C1', C2, C3 and C4 are where a live caller cancellation is read.  Each test
puts the cancellation in one wait -- a pre-execute listener, the approval seam, a wrapper before
or after delegation, the body, a post-execute listener -- by stopping that hook at a gate,
aborting the caller, then opening the gate; and it asserts the exact result, whether the body
started, and the transition of the contract that decided (the machine's path is the explanation
of the result, so a right result reached by the wrong rule fails too).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from support import (
    Call,
    Gate,
    Harness,
    Next,
    aborted,
    controller,
    expected,
    ok,
    passing_guard,
    spawn,
    text,
)
from toolcancel import (
    AbortController,
    Accept,
    Allow,
    Approval,
    ApprovalRequest,
    Ask,
    Block,
    Deny,
    Execution,
    RegistryUsageError,
    ToolError,
    ToolOutput,
    ToolResult,
    load_contract,
)


def rules_of(call: Call, event: str, nth: int = 0) -> tuple[str, ...]:
    return call.step(event, nth).rules


# ------------------------------------------------------------------------------------------------
# R10 stage order
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R10")
async def test_one_listener_per_stage_runs_in_contract_order() -> None:
    h = Harness()
    h.body("t", log=h.log, label="dispatch")

    async def pre(view: Execution, next_: Next) -> Any:
        h.log.append("pre")
        decision = await next_()
        h.log.append("pre:after")
        return decision

    async def around(view: Execution, next_: Next) -> ToolResult:
        h.log.append("execute:before")
        result: ToolResult = await next_()
        h.log.append("execute:after")
        return result

    async def post(view: Execution, result: ToolResult, next_: Next) -> Any:
        h.log.append("post")
        return await next_()

    h.registry.add_pre_execute(pre)
    h.registry.add_guard(passing_guard(h.log, "guard"))
    h.registry.add_around(around)
    h.registry.add_post_execute(post)
    call = await h.call("t")
    assert call.json == ok()
    assert h.log == [
        "pre",
        "pre:after",
        "guard",
        "execute:before",
        "dispatch",
        "execute:after",
        "post",
        "notify",
    ]
    assert call.states() == [
        "entry",
        "pre_policy",
        "guards",
        "around_before",
        "around_before",
        "body",
        "around_after",
        "around_after",
        "post_policy",
        "finalizing",
        "materialized",
    ]


@pytest.mark.rules("R10", "R5")
async def test_approval_comes_after_pre_execute_and_before_guards() -> None:
    h = Harness()
    h.body("t")

    async def seam(request: ApprovalRequest) -> Approval:
        h.log.append("approval")
        return Approval.APPROVED

    async def ask(view: Execution) -> Ask:
        return Ask()

    h.pre(ask)
    h.registry.set_approval(seam)
    h.registry.add_guard(passing_guard(h.log, "guard"))
    await h.call("t", agent="a1")
    assert h.log == ["pre", "approval", "guard", "body", "notify"]


@pytest.mark.rules("R10")
async def test_listeners_run_outermost_first_and_prepend_goes_to_the_front() -> None:
    h = Harness()
    h.body("t")

    def wrapper(label: str) -> Any:
        async def around(view: Execution, next_: Next) -> ToolResult:
            h.log.append(label)
            result: ToolResult = await next_()
            h.log.append(label + ":after")
            return result

        return around

    h.registry.add_around(wrapper("second"))
    h.registry.add_around(wrapper("third"))
    h.registry.add_around(wrapper("first"), prepend=True)
    await h.call("t")
    assert h.log == [
        "first",
        "second",
        "third",
        "body",
        "third:after",
        "second:after",
        "first:after",
        "notify",
    ]


@pytest.mark.rules("R10", "R15")
async def test_a_denied_call_never_enters_around() -> None:
    h = Harness()
    body = h.body("t")

    async def around(view: Execution, next_: Next) -> ToolResult:
        h.log.append("around")
        result: ToolResult = await next_()
        return result

    async def deny(view: Execution) -> Deny:
        return Deny("no")

    h.pre(deny)
    h.registry.add_around(around)
    call = await h.call("t")
    assert call.json == expected("Error: no")
    assert h.log == ["pre", "notify"]
    assert not body.started
    assert "wrapper_enter" not in call.events()


@pytest.mark.rules("R10", "R16")
async def test_a_wrapper_that_does_not_delegate_skips_the_body() -> None:
    h = Harness()
    body = h.body("t")

    async def short(view: Execution, next_: Next) -> ToolResult:
        return ToolResult([text("cached")])

    h.registry.add_around(short)
    call = await h.call("t")
    assert call.json == ok("cached")
    assert not body.started
    assert "base_dispatch" not in call.events()
    assert call.step("wrapper_returned").outcome == "wrapper_success"


# ------------------------------------------------------------------------------------------------
# R11 entry
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R11")
async def test_hooks_and_body_see_a_frozen_copy_of_the_arguments() -> None:
    h = Harness()
    seen: list[Any] = []
    gate = Gate()
    body = h.body("t", gate=gate)

    async def pre(view: Execution) -> Allow:
        seen.append(view.arguments)
        return Allow()

    h.pre(pre)
    arguments = {"path": "/tmp/x", "flags": ["a", "b"]}
    task = h.start("t", arguments)
    await gate.reached()
    arguments["path"] = "/etc/passwd"
    arguments["flags"].append("c")  # type: ignore[attr-defined]
    gate.open()
    await task
    [given] = body.arguments
    assert given is seen[0]
    assert given is not arguments
    assert dict(given) == {"path": "/tmp/x", "flags": ("a", "b")}
    with pytest.raises(TypeError):
        given["path"] = "/etc/shadow"


@pytest.mark.rules("R11", "R30", "R31")
@pytest.mark.parametrize(
    "arguments",
    [
        {"when": float("nan")},
        {"set": {1, 2}},
        {"callback": print},
        {1: "non-string key"},
        {"zero": -0.0},
    ],
    ids=["nan", "set", "function", "int-key", "negative-zero"],
)
async def test_unserializable_arguments_give_a_final_error_and_run_nothing(arguments: Any) -> None:
    h = Harness()
    body = h.body("t")

    async def pre(view: Execution) -> Allow:
        return Allow()

    async def post(view: Execution, result: ToolResult) -> Accept:
        return Accept()

    h.pre(pre)
    h.post(post)
    call = await h.call("t", arguments)
    assert call.json == (
        '{"content":[{"text":"Error: tool execution arguments must be losslessly '
        'JSON-serializable","type":"text"}],"isError":true}'
    )
    assert h.log == ["notify"]
    assert not body.started
    assert [(p.source, p.event, p.dest) for p in call.path] == [
        ("entry", "args_invalid", "finalizing"),
        ("finalizing", "publish", "materialized"),
    ]


@pytest.mark.rules("R11", "R39")
async def test_unserializable_arguments_beat_a_pre_aborted_signal() -> None:
    h = Harness()
    body = h.body("t")
    c, signal = controller()
    c.abort()
    call = await h.call("t", {"x": float("inf")}, signal=signal)
    assert (
        call.result.text == "Error: tool execution arguments must be losslessly JSON-serializable"
    )
    assert call.result.error is None
    assert not body.started


@pytest.mark.rules("R11", "R23")
async def test_a_cyclic_argument_is_refused_and_the_caller_keeps_no_listener() -> None:
    h = Harness()
    h.body("t")
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    _, signal = controller()
    call = await h.call("t", {"loop": cyclic}, signal=signal)
    assert call.result.text.endswith("losslessly JSON-serializable")
    assert signal.listener_count == 0


@pytest.mark.rules("R11", "R21")
async def test_the_caller_signal_is_captured_outside_the_view() -> None:
    """A pre listener and a wrapper both drop the slot; the caller still reaches the body."""
    h = Harness()
    gate = Gate()
    body = h.body("t", gate=gate)

    async def pre(view: Execution) -> Allow:
        del view.signal
        return Allow()

    async def around(view: Execution, next_: Next) -> ToolResult:
        view.signal = None
        result: ToolResult = await next_()
        return result

    h.pre(pre)
    h.registry.add_around(around)
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    assert body.signal is body.call_signal  # C, which follows `signal` (P1)
    c.abort()
    gate.open()
    assert (await task).json == aborted()


# ------------------------------------------------------------------------------------------------
# R12-R13 the cancelled-after-entry predicate and C1
# ------------------------------------------------------------------------------------------------


def _gated_pre(h: Harness, gate: Gate, decision: Any) -> None:
    async def decide(view: Execution) -> Any:
        await gate.passage()
        if isinstance(decision, BaseException):
            raise decision
        return decision

    h.pre(decide)


@pytest.mark.rules("R12", "R13", "R28")
async def test_cancel_during_pre_execute_gives_aborted_and_the_body_never_starts() -> None:
    h = Harness()
    body = h.body("t")
    gate = Gate()
    _gated_pre(h, gate, Allow())
    seen: list[str] = []

    async def post(view: Execution, result: ToolResult) -> Accept:
        seen.append(result.to_json())
        return Accept()

    h.post(post)
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    call = await task
    assert call.json == aborted()
    assert seen == [aborted()]  # on the POST route: post-execute saw it
    assert not body.started
    assert call.events()[:4] == ["args_valid", "caller_abort", "pre_allow", "post_accept"]
    assert call.step("pre_allow").outcome == "aborted"
    assert "R13" in rules_of(call, "pre_allow")


@pytest.mark.rules("R12", "R13")
@pytest.mark.parametrize(
    "decision", [Deny("denied anyway"), Ask("ask anyway")], ids=["deny", "ask-no-seam"]
)
async def test_c1_cancellation_beats_a_deny(decision: Any) -> None:
    h = Harness()
    body = h.body("t")
    gate = Gate()
    _gated_pre(h, gate, decision)
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    call = await task
    assert call.json == aborted()
    assert not body.started


@pytest.mark.rules("R13", "R24")
@pytest.mark.parametrize("answer", list(Approval))
async def test_c1_cancellation_during_approval_beats_every_answer(answer: Approval) -> None:
    h = Harness()
    body = h.body("t")
    gate = Gate()
    guard_calls: list[str] = []

    async def seam(request: ApprovalRequest) -> Approval:
        await gate.passage()
        return answer

    async def ask(view: Execution) -> Ask:
        return Ask()

    h.pre(ask)
    h.registry.set_approval(seam)
    h.registry.add_guard(passing_guard(guard_calls, "guard"))
    c, signal = controller()
    task = h.start("t", signal=signal, agent="a1")
    await gate.reached()
    c.abort()
    gate.open()
    call = await task
    assert call.json == aborted()
    assert guard_calls == []
    assert not body.started
    assert call.step("approval_" + answer.value).outcome == "aborted"


@pytest.mark.rules("R13")
async def test_c1_runs_before_guards_which_are_not_evaluated() -> None:
    h = Harness()
    body = h.body("t")
    gate = Gate()
    _gated_pre(h, gate, Allow())
    guard_calls: list[str] = []

    def guard(view: Execution) -> str:
        guard_calls.append("guard")
        return "a guard would deny"

    h.registry.add_guard(guard)
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    assert (await task).json == aborted()
    assert guard_calls == []
    assert not body.started


@pytest.mark.rules("R13")
async def test_d1_the_reference_still_asks_approval_after_a_cancel_in_pre_execute() -> None:
    """D1: there is one recheck after pre-execute *and* approval.  The contract allows skipping
    the question (an alternative transition); the reference asks, then reports ABORTED."""
    h = Harness()
    body = h.body("t")
    gate = Gate()
    _gated_pre(h, gate, Ask("why"))
    asked: list[bool] = []

    async def seam(request: ApprovalRequest) -> Approval:
        assert request.signal is not None
        asked.append(request.signal.aborted)
        return Approval.APPROVED

    h.registry.set_approval(seam)
    c, signal = controller()
    task = h.start("t", signal=signal, agent="a1")
    await gate.reached()
    c.abort()
    gate.open()
    call = await task
    assert call.json == aborted()
    assert asked == [True]
    assert not body.started
    assert call.step("pre_ask").dest == "approval"


# ------------------------------------------------------------------------------------------------
# R14 pre-stage exceptions (C1')
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R14")
async def test_a_pre_execute_throw_without_cancellation_is_final_and_skips_post() -> None:
    h = Harness()
    body = h.body("t")

    async def boom(view: Execution) -> Any:
        raise RuntimeError("policy store down")

    async def post(view: Execution, result: ToolResult) -> Accept:
        return Accept()

    h.pre(boom)
    h.post(post)
    _, signal = controller()
    call = await h.call("t", signal=signal)
    assert call.json == expected("Error: policy store down")
    assert "post" not in h.log
    assert not body.started
    assert call.step("pre_raise").dest == "finalizing"


@pytest.mark.rules("R14", "R28")
async def test_a_pre_execute_throw_after_cancellation_is_aborted_on_the_post_route() -> None:
    h = Harness()
    body = h.body("t")
    gate = Gate()
    _gated_pre(h, gate, RuntimeError("lost the policy store"))
    posted: list[str] = []

    async def post(view: Execution, result: ToolResult) -> Accept:
        posted.append(result.text)
        return Accept()

    h.post(post)
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    call = await task
    assert call.json == aborted()
    assert posted == ["Error: tool call aborted"]
    assert not body.started
    step = call.step("pre_raise")
    assert (step.dest, step.outcome, step.rules) == ("post_policy", "aborted", ("R14",))


@pytest.mark.rules("R14")
async def test_an_approval_throw_after_cancellation_is_aborted() -> None:
    h = Harness()
    h.body("t")
    gate = Gate()

    async def seam(request: ApprovalRequest) -> Approval:
        await gate.passage()
        raise ConnectionError("approval service gone")

    async def ask(view: Execution) -> Ask:
        return Ask()

    h.pre(ask)
    h.registry.set_approval(seam)
    c, signal = controller()
    task = h.start("t", signal=signal, agent="a1")
    await gate.reached()
    c.abort()
    gate.open()
    call = await task
    assert call.json == aborted()
    assert call.step("approval_raise").outcome == "aborted"


@pytest.mark.rules("R14")
async def test_a_guard_throw_is_final_without_cancellation() -> None:
    h = Harness()
    body = h.body("t")

    def guard(view: Execution) -> str:
        raise LookupError("quota table missing")

    h.registry.add_guard(guard)
    _, signal = controller()
    call = await h.call("t", signal=signal)
    assert call.json == expected("Error: quota table missing")
    assert call.step("guard_raise").outcome == "pre_error"
    assert not body.started


@pytest.mark.rules("R14", "R12")
async def test_a_guard_that_aborts_the_caller_then_throws_gives_aborted() -> None:
    """Guards are synchronous, so the only way for the caller to abort after C1 and before the
    guard's catch is from inside the guard itself; the catch still reads the caller live."""
    h = Harness()
    body = h.body("t")
    c, signal = controller()

    def guard(view: Execution) -> str:
        c.abort()
        raise LookupError("quota table missing")

    h.registry.add_guard(guard)
    call = await h.call("t", signal=signal)
    assert call.json == aborted()
    assert call.step("guard_raise").outcome == "aborted"
    assert not body.started


# ------------------------------------------------------------------------------------------------
# R15 denial routing and guards
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R15")
async def test_denials_go_through_post_execute() -> None:
    h = Harness()
    h.body("t")

    async def deny(view: Execution) -> Deny:
        return Deny("no")

    async def post(view: Execution, result: ToolResult) -> Accept:
        return Accept(content=[text("Error: no (explained)")], contexts=[{"why": "policy"}])

    h.pre(deny)
    h.post(post)
    call = await h.call("t")
    assert call.json == expected("Error: no (explained)", contexts=[{"why": "policy"}])


@pytest.mark.rules("R15")
async def test_guards_run_global_first_then_the_agents_and_the_first_reason_wins() -> None:
    h = Harness()
    body = h.body("t")
    order: list[str] = []

    def guard(label: str, reason: str | None) -> Any:
        def g(view: Execution) -> str | None:
            order.append(label)
            return reason

        return g

    h.registry.add_guard(guard("agent-a2", "a2 says no"), agent="a2")
    h.registry.add_guard(guard("agent-a1", "a1 says no"), agent="a1")
    h.registry.add_guard(guard("global-1", None))
    h.registry.add_guard(guard("global-2", None))
    h.registry.add_guard(guard("agent-a1-late", "never asked"), agent="a1")
    call = await h.call("t", agent="a1")
    assert order == ["global-1", "global-2", "agent-a1"]
    assert call.json == expected("Error: a1 says no")
    assert not body.started


@pytest.mark.rules("R15")
async def test_a_pre_listener_forcing_allow_cannot_bypass_a_guard() -> None:
    h = Harness()
    body = h.body("t")

    async def force(view: Execution, next_: Next) -> Allow:
        return Allow()  # never calls next(): the rest of pre-execute is skipped

    async def deny(view: Execution, next_: Next) -> Deny:
        return Deny("skipped")

    h.registry.add_pre_execute(force)
    h.registry.add_pre_execute(deny)
    h.registry.add_guard(lambda view: "the guard still denies")
    call = await h.call("t")
    assert call.json == expected("Error: the guard still denies")
    assert not body.started


@pytest.mark.rules("R15")
async def test_guards_do_not_run_for_a_deny() -> None:
    h = Harness()
    h.body("t")
    calls: list[str] = []
    h.registry.add_guard(passing_guard(calls, "guard"))

    async def deny(view: Execution) -> Deny:
        return Deny("no")

    h.pre(deny)
    await h.call("t")
    assert calls == []


# ------------------------------------------------------------------------------------------------
# R16 around waterfall
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R16", "R3")
async def test_next_returns_a_normalized_result_never_a_raw_throw() -> None:
    h = Harness()
    h.body("t", raises=ToolError("bad input", code="BAD"))
    seen: list[Any] = []

    async def around(view: Execution, next_: Next) -> ToolResult:
        result = await next_()
        seen.append(result)
        assert isinstance(result, ToolResult)
        return result

    h.registry.add_around(around)
    call = await h.call("t")
    want = expected("Error: bad input", error={"name": "ToolError", "code": "BAD"})
    assert [r.to_json() for r in seen] == [want]
    assert call.json == want


@pytest.mark.rules("R16", "R29")
async def test_a_wrapper_throw_is_a_final_error_that_skips_post_and_loses_contexts() -> None:
    h = Harness()
    body = h.body("t", defer=[{"d": 1}])

    async def around(view: Execution, next_: Next) -> ToolResult:
        await next_()
        raise RuntimeError("wrapper bug")

    async def post(view: Execution, result: ToolResult) -> Accept:
        return Accept()

    h.registry.add_around(around)
    h.post(post)
    call = await h.call("t")
    assert call.json == expected("Error: wrapper bug")
    assert body.started
    assert "post" not in h.log
    assert call.step("around_raised").dest == "finalizing"


@pytest.mark.rules("R16", "R39")
async def test_a_wrapper_throw_beats_cancellation() -> None:
    h = Harness()
    gate = Gate()
    h.body("t")

    async def around(view: Execution, next_: Next) -> ToolResult:
        await next_()
        await gate.passage()
        raise RuntimeError("wrapper bug")

    h.registry.add_around(around)
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    assert (await task).json == expected("Error: wrapper bug")


@pytest.mark.rules("R16")
async def test_an_outer_wrapper_may_catch_an_inner_wrappers_throw() -> None:
    h = Harness()
    h.body("t")

    async def outer(view: Execution, next_: Next) -> ToolResult:
        try:
            result: ToolResult = await next_()
            return result
        except RuntimeError as exc:
            return ToolResult([text(f"recovered from {exc}")])

    async def inner(view: Execution, next_: Next) -> ToolResult:
        await next_()
        raise RuntimeError("inner bug")

    h.registry.add_around(outer)
    h.registry.add_around(inner)
    call = await h.call("t")
    assert call.json == ok("recovered from inner bug")
    assert call.step("wrapper_raise").outcome == "around_error"
    assert call.step("wrapper_returned").outcome == "wrapper_success"


@pytest.mark.rules("R16")
async def test_a_wrapper_returning_a_non_result_fails_the_stage() -> None:
    h = Harness()
    h.body("t")

    async def around(view: Execution, next_: Next) -> Any:
        return ["not", "a", "result"]

    h.registry.add_around(around)
    call = await h.call("t")
    assert call.json == expected(  # P9: the message names the wrapper
        "Error: around-dispatch wrapper 0 "
        "(test_a_wrapper_returning_a_non_result_fails_the_stage.<locals>.around) returned list; "
        "expected a ToolResult or a mapping with its fields (content, isError, ...)"
    )
    assert call.step("around_raised").outcome == "around_error"


@pytest.mark.rules("R16", "R29")
async def test_d11_a_second_next_retries_the_body_and_appends_its_contexts() -> None:
    h = Harness()
    body = h.body("t", defer=[{"try": True}])
    firsts: list[str] = []

    async def retry(view: Execution, next_: Next) -> ToolResult:
        first: ToolResult = await next_()
        firsts.append(first.to_json())
        second: ToolResult = await next_()
        return second

    h.registry.add_around(retry)
    call = await h.call("t")
    assert body.calls == 2
    assert firsts == [ok()]
    assert call.json == ok(contexts=[{"try": True}, {"try": True}])
    assert call.events().count("base_dispatch") == 2
    assert call.step("redelegate").dest == "around_before"


@pytest.mark.rules("R16", "R17")
async def test_d11_a_retry_after_the_caller_aborted_is_stopped_at_c2() -> None:
    h = Harness()
    c, signal = controller()
    body = h.body("t", raises=ToolError("flaky", code="FLAKY"))
    results: list[str] = []

    async def retry(view: Execution, next_: Next) -> ToolResult:
        results.append((await next_()).to_json())
        c.abort()
        second: ToolResult = await next_()
        results.append(second.to_json())
        return second

    h.registry.add_around(retry)
    call = await h.call("t", signal=signal)
    assert body.calls == 1
    assert results[1] == aborted()
    assert call.json == aborted()
    assert call.step("base_dispatch", 1).outcome == "aborted"


@pytest.mark.rules("R16", "R27")
async def test_a_concurrent_second_next_fails_and_the_first_still_runs_to_the_end() -> None:
    h = Harness()
    gate = Gate()
    body = h.body("t", gate=gate)
    errors: list[BaseException] = []

    async def greedy(view: Execution, next_: Next) -> ToolResult:
        first = spawn(next_())
        await gate.reached()
        try:
            await next_()
        except RegistryUsageError as exc:
            errors.append(exc)
        gate.open()
        result: ToolResult = await first
        return result

    h.registry.add_around(greedy)
    call = await h.call("t")
    assert call.json == ok()
    assert body.calls == 1 and body.finished == 1
    [error] = errors
    assert "still running" in str(error)


# ------------------------------------------------------------------------------------------------
# R17 checkpoint C2
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R17", "R28", "R22")
async def test_caller_abort_during_a_wrappers_wait_before_delegation_stops_the_body() -> None:
    h = Harness()
    body = h.body("t")
    gate = Gate()
    inner: list[str] = []
    c, signal = controller()

    async def around(view: Execution, next_: Next) -> ToolResult:
        await gate.passage()
        result: ToolResult = await next_()
        inner.append(result.to_json())
        inner.append(f"listeners={signal.listener_count}")
        return result

    h.registry.add_around(around)
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    call = await task
    assert call.json == aborted()
    assert inner == [aborted(), "listeners=0"]
    assert not body.started
    step = call.step("base_dispatch")
    assert (step.dest, step.outcome) == ("around_after", "aborted")
    assert "R17" in step.rules


@pytest.mark.rules("R17", "R26", "R23")
@pytest.mark.parametrize("with_caller", [False, True], ids=["no-caller", "live-caller"])
async def test_a_wrapper_supplied_aborted_slot_gives_aborted_and_the_slot_stays_w(
    with_caller: bool,
) -> None:
    h = Harness()
    body = h.body("t")
    after: list[Any] = []
    _, caller = controller()
    w_controller, w = controller()
    w_controller.abort("wrapper deadline")

    async def around(view: Execution, next_: Next) -> ToolResult:
        view.signal = w
        result: ToolResult = await next_()
        after.append(view.signal)
        return result

    h.registry.add_around(around)
    call = await h.call("t", signal=caller if with_caller else None)
    assert call.json == aborted()
    assert not body.started
    assert after == [w]
    assert not caller.aborted
    assert caller.listener_count == 0


@pytest.mark.rules("R17", "R6", "R39")
async def test_d10_cancellation_beats_unknown_tool_because_c2_comes_before_lookup() -> None:
    h = Harness()
    gate = Gate()

    async def around(view: Execution, next_: Next) -> ToolResult:
        await gate.passage()
        result: ToolResult = await next_()
        return result

    h.registry.add_around(around)
    c, signal = controller()
    task = h.start("no-such-tool", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    call = await task
    assert call.json == aborted()
    assert call.step("base_dispatch").outcome == "aborted"


# ------------------------------------------------------------------------------------------------
# R18 body invocation
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R18", "R27", "R28")
async def test_a_late_success_after_caller_cancellation_becomes_aborted() -> None:
    h = Harness()
    gate = Gate()
    body = h.body("t", gate=gate)
    inner: list[str] = []

    async def around(view: Execution, next_: Next) -> ToolResult:
        result: ToolResult = await next_()
        inner.append(result.to_json())
        return result

    h.registry.add_around(around)
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    call = await task
    assert inner == [aborted()]  # replaced at body level, before any wrapper sees the success
    assert call.json == aborted()
    assert body.finished == 1
    assert body.aborted_at_settle == [True]
    assert call.events()[4:7] == ["base_dispatch", "caller_abort", "body_ok"]
    step = call.step("body_ok")
    assert (step.source, step.outcome) == ("draining", "aborted")


@pytest.mark.rules("R18", "R39")
async def test_a_body_throw_is_kept_after_cancellation() -> None:
    h = Harness()
    gate = Gate()
    h.body("t", gate=gate, raises=ToolError("connection reset by peer", code="ECONNRESET"))
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    call = await task
    assert call.json == expected(
        "Error: connection reset by peer", error={"name": "ToolError", "code": "ECONNRESET"}
    )
    assert call.step("body_raise").outcome == "body_error"


@pytest.mark.rules("R18", "R26")
async def test_d3_a_wrapper_signal_aborting_during_the_body_replaces_success() -> None:
    h = Harness()
    gate = Gate()
    body = h.body("t", gate=gate)
    w_controller, w = controller()

    inner: list[str] = []

    async def around(view: Execution, next_: Next) -> ToolResult:
        view.signal = w
        result: ToolResult = await next_()
        inner.append(result.to_json())
        return result

    h.registry.add_around(around)
    task = h.start("t")  # no caller signal at all
    await gate.reached()
    assert body.signal is w
    w_controller.abort("deadline")
    gate.open()
    call = await task
    assert inner == [aborted()]
    assert call.json == aborted()
    assert call.step("fused_abort").dest == "draining"


@pytest.mark.rules("R18", "R23")
async def test_the_slot_holds_f_during_the_body_and_w_again_after_it() -> None:
    h = Harness()
    seen: dict[str, Any] = {}
    _, caller = controller()
    _, w = controller()

    async def body(arguments: Any, view: Execution) -> Any:
        seen["during"] = view.signal
        return [text("ok")]

    async def around(view: Execution, next_: Next) -> ToolResult:
        seen["outer"] = view.signal
        view.signal = w
        result: ToolResult = await next_()
        seen["after"] = view.signal
        view.signal = seen["outer"]  # restoring is the wrapper's duty
        return result

    h.registry.register("t", body)
    h.registry.add_around(around)
    call = await h.call("t", signal=caller)
    c = call.view.call_signal  # C, which follows `caller` (P1)
    assert seen["outer"] is c
    assert seen["during"] is not c and seen["during"] is not w
    assert seen["after"] is w


@pytest.mark.rules("R18", "R22")
async def test_the_body_is_awaited_with_no_relay_left_behind() -> None:
    h = Harness()
    _, caller = controller()
    _, w = controller()
    counts: list[tuple[int, int]] = []

    async def body(arguments: Any, view: Execution) -> Any:
        c = view.call_signal  # C, which follows `caller` (P1)
        assert c is not None
        counts.append((c.listener_count, w.listener_count))
        return [text("ok")]

    async def around(view: Execution, next_: Next) -> ToolResult:
        c = view.call_signal
        assert c is not None
        view.signal = w
        result: ToolResult = await next_()
        counts.append((c.listener_count, w.listener_count))
        return result

    h.registry.register("t", body)
    h.registry.add_around(around)
    await h.call("t", signal=caller)
    assert counts == [(1, 1), (0, 0)]
    assert caller.listener_count == 0  # and the call signal let go of the caller's


# ------------------------------------------------------------------------------------------------
# R19 checkpoint C3
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R19", "R28", "R29")
async def test_c3_a_success_when_the_caller_aborted_after_the_body_becomes_aborted() -> None:
    h = Harness()
    gate = Gate()
    h.body("t", ToolOutput([text("fresh")], meta={"rows": 1}), defer=[{"d": 1}])

    async def around(view: Execution, next_: Next) -> ToolResult:
        result: ToolResult = await next_()
        await gate.passage()
        return result.with_contexts([*result.contexts, {"w": 1}])

    posted: list[str] = []

    async def post(view: Execution, result: ToolResult) -> Accept:
        posted.append(result.to_json())
        return Accept()

    h.registry.add_around(around)
    h.post(post)
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    call = await task
    assert posted == [aborted(contexts=[{"d": 1}, {"w": 1}])]  # C3 decided, not C4
    assert call.json == aborted(contexts=[{"d": 1}, {"w": 1}])
    assert call.step("body_ok").outcome == "body_success"
    step = call.step("around_settled")
    assert (step.outcome, "R19" in step.rules) == ("aborted", True)


@pytest.mark.rules("R19", "R39")
async def test_c3_keeps_a_wrapper_authored_error() -> None:
    h = Harness()
    gate = Gate()
    h.body("t")

    async def around(view: Execution, next_: Next) -> ToolResult:
        await next_()
        await gate.passage()
        return ToolResult([text("Error: wrapper refused the output")], is_error=True)

    h.registry.add_around(around)
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    call = await task
    assert call.json == expected("Error: wrapper refused the output")
    assert call.step("around_settled").outcome == "wrapper_error"


@pytest.mark.rules("R19")
async def test_c3_a_short_circuit_success_after_cancellation_becomes_aborted() -> None:
    h = Harness()
    gate = Gate()
    body = h.body("t")

    async def cached(view: Execution, next_: Next) -> ToolResult:
        await gate.passage()
        return ToolResult([text("from cache")])

    posted: list[str] = []

    async def post(view: Execution, result: ToolResult) -> Accept:
        posted.append(result.text)
        return Accept()

    h.registry.add_around(cached)
    h.post(post)
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    assert (await task).json == aborted()
    assert posted == ["Error: tool call aborted"]
    assert not body.started


# ------------------------------------------------------------------------------------------------
# R20 post stage and C4
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R20", "R28")
async def test_c4_an_accepted_success_when_the_caller_aborts_during_post_becomes_aborted() -> None:
    h = Harness()
    gate = Gate()
    h.body("t", defer=[{"d": 1}])

    async def post(view: Execution, result: ToolResult) -> Accept:
        await gate.passage()
        return Accept(content=[text("polished")], contexts=[{"p": 1}])

    h.post(post)
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    call = await task
    assert call.json == aborted(contexts=[{"d": 1}, {"p": 1}])
    step = call.step("post_accept")
    assert (step.outcome, "R20" in step.rules) == ("aborted", True)


@pytest.mark.rules("R20", "R29", "R39")
async def test_a_post_throw_after_cancellation_is_the_post_error_without_contexts() -> None:
    h = Harness()
    gate = Gate()
    h.body("t", defer=[{"d": 1}])

    async def post(view: Execution, result: ToolResult) -> Accept:
        await gate.passage()
        raise RuntimeError("audit log unreachable")

    h.post(post)
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    call = await task
    assert call.json == expected("Error: audit log unreachable")
    assert call.step("post_raise").outcome == "post_error"


@pytest.mark.rules("R20", "R7")
async def test_d9_post_accept_rewrites_the_content_of_aborted_and_keeps_its_code() -> None:
    h = Harness()
    gate = Gate()
    h.body("t", gate=gate)

    async def post(view: Execution, result: ToolResult) -> Accept:
        return Accept(content=[text("Error: the user stopped this call")])

    h.post(post)
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    call = await task
    assert call.json == expected(
        "Error: the user stopped this call", error={"name": "AbortError", "code": "ABORTED"}
    )


@pytest.mark.rules("R20", "R7", "R39")
async def test_d9_post_block_drops_the_aborted_code() -> None:
    h = Harness()
    gate = Gate()
    _gated_pre(h, gate, Allow())
    h.body("t")

    async def post(view: Execution, result: ToolResult) -> Block:
        return Block([text("Error: blocked by policy")])

    h.post(post)
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    call = await task
    assert call.json == expected("Error: blocked by policy")
    assert call.step("pre_allow").outcome == "aborted"
    assert call.step("post_block").outcome == "blocked"


@pytest.mark.rules("R20")
async def test_post_execute_sees_every_post_route_result_once() -> None:
    h = Harness()
    seen: list[str] = []

    async def deny_odd(view: Execution) -> Any:
        return Deny("odd") if view.call_id == "odd" else Allow()

    async def post(view: Execution, result: ToolResult) -> Accept:
        seen.append(f"{view.call_id}:{result.text}")
        return Accept()

    h.body("t")
    h.pre(deny_odd)
    h.post(post)
    await h.call("t", call_id="even")
    await h.call("t", call_id="odd")
    await h.call("missing", call_id="unknown")
    assert seen == ["even:ok", "odd:Error: odd", 'unknown:Error: unknown tool "missing"']


# ------------------------------------------------------------------------------------------------
# R39 outcome precedence: one scenario per row of the seed table
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """A call set up so that the situation of one precedence row arises."""

    row: int
    run: Callable[[], Awaitable[Call]]
    want: str


async def _cancel_at(
    h: Harness, gate: Gate, name: str = "t", arguments: Any = None, **kwargs: Any
) -> Call:
    c, signal = controller()
    task = h.start(name, arguments, signal=signal, **kwargs)
    await gate.reached()
    c.abort()
    gate.open()
    return await task


async def _row1() -> Call:
    h = Harness()
    c, signal = controller()
    c.abort()
    return await h.call("t", {"bad": float("nan")}, signal=signal)


async def _row2() -> Call:
    h, gate = Harness(), Gate()
    h.body("t")
    _gated_pre(h, gate, Deny("deny"))
    return await _cancel_at(h, gate)


async def _row3() -> Call:
    h, gate = Harness(), Gate()
    h.body("t")
    _gated_pre(h, gate, RuntimeError("pre failed"))
    return await _cancel_at(h, gate)


async def _row4() -> Call:
    h = Harness()
    h.body("t")
    _gated_pre(h, _open_gate(), RuntimeError("pre failed"))
    return await h.call("t", signal=controller()[1])


async def _row5() -> Call:
    h = Harness()
    h.body("t")
    h.registry.add_guard(lambda view: "guarded")
    return await h.call("t", signal=controller()[1])


async def _row6() -> Call:
    h, gate = Harness(), Gate()
    h.body("t", defer=[{"d": 1}])

    async def around(view: Execution, next_: Next) -> ToolResult:
        await next_()
        await gate.passage()
        raise RuntimeError("around failed")

    h.registry.add_around(around)
    return await _cancel_at(h, gate)


async def _row7() -> Call:
    h, gate = Harness(), Gate()

    async def around(view: Execution, next_: Next) -> ToolResult:
        await gate.passage()
        result: ToolResult = await next_()
        return result

    h.registry.add_around(around)
    return await _cancel_at(h, gate, "unknown-name")


async def _row8() -> Call:
    h, gate = Harness(), Gate()
    h.body("t", gate=gate, raises=RuntimeError("body failed"))
    return await _cancel_at(h, gate)


async def _row9() -> Call:
    h, gate = Harness(), Gate()
    h.body("t", gate=gate)
    return await _cancel_at(h, gate)


async def _row10() -> Call:
    h, gate = Harness(), Gate()
    deadline = AbortController()
    h.body("t", gate=gate, on_start=lambda view: deadline.abort("own deadline"))

    async def timeout_wrapper(view: Execution, next_: Next) -> ToolResult:
        upstream = view.signal
        view.signal = deadline.signal
        try:
            result: ToolResult = await next_()
        finally:
            view.signal = upstream
        if deadline.signal.aborted:
            return h.registry.results.timeout(100)
        return result

    h.registry.add_around(timeout_wrapper)
    return await _cancel_at(h, gate)


async def _row11() -> Call:
    h, gate = Harness(), Gate()
    h.body("t")

    async def around(view: Execution, next_: Next) -> ToolResult:
        await next_()
        await gate.passage()
        return ToolResult([text("Error: wrapper says no")], is_error=True)

    h.registry.add_around(around)
    return await _cancel_at(h, gate)


async def _row12() -> Call:
    h, gate = Harness(), Gate()
    h.body("t", defer=[{"d": 1}])

    async def around(view: Execution, next_: Next) -> ToolResult:
        result: ToolResult = await next_()
        await gate.passage()
        return result

    h.registry.add_around(around)
    return await _cancel_at(h, gate)


async def _row13() -> Call:
    h, gate = Harness(), Gate()
    h.body("t", defer=[{"d": 1}])

    async def post(view: Execution, result: ToolResult) -> Block:
        await gate.passage()
        return Block([text("Error: blocked")])

    h.post(post)
    return await _cancel_at(h, gate)


async def _row14() -> Call:
    h, gate = Harness(), Gate()
    h.body("t", defer=[{"d": 1}])

    async def post(view: Execution, result: ToolResult) -> Accept:
        await gate.passage()
        raise RuntimeError("post failed")

    h.post(post)
    return await _cancel_at(h, gate)


async def _row15() -> Call:
    h, gate = Harness(), Gate()
    h.body("t")

    async def post(view: Execution, result: ToolResult) -> Accept:
        await gate.passage()
        return Accept(contexts=[{"p": 1}])

    h.post(post)
    return await _cancel_at(h, gate)


async def _row16() -> Call:
    h, gate = Harness(), Gate()
    h.body("t", defer=[{"fn": print}])

    async def post(view: Execution, result: ToolResult) -> Accept:
        await gate.passage()
        return Accept()

    h.post(post)
    return await _cancel_at(h, gate)


async def _row17() -> Call:
    h = Harness()
    h.body("t")
    c, signal = controller()
    c.abort()
    return await h.call("t", signal=signal)


def _open_gate() -> Gate:
    gate = Gate()
    gate.open()
    return gate


SEED_ROWS = [
    Scenario(
        1, _row1, expected("Error: tool execution arguments must be losslessly JSON-serializable")
    ),
    Scenario(2, _row2, aborted()),
    Scenario(3, _row3, aborted()),
    Scenario(4, _row4, expected("Error: pre failed")),
    Scenario(5, _row5, expected("Error: guarded")),
    Scenario(6, _row6, expected("Error: around failed")),
    Scenario(7, _row7, aborted()),
    Scenario(8, _row8, expected("Error: body failed")),
    Scenario(9, _row9, aborted()),
    Scenario(
        10,
        _row10,
        expected(
            "Error: tool call timed out after 100ms",
            error={"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"},
        ),
    ),
    Scenario(11, _row11, expected("Error: wrapper says no")),
    Scenario(12, _row12, aborted(contexts=[{"d": 1}])),
    Scenario(13, _row13, expected("Error: blocked")),
    Scenario(14, _row14, expected("Error: post failed")),
    Scenario(15, _row15, aborted(contexts=[{"p": 1}])),
    Scenario(16, _row16, expected("Error: tool result must be losslessly JSON-serializable")),
    Scenario(17, _row17, ok()),
]


@pytest.mark.rules("R39")
def test_every_seed_precedence_row_has_a_scenario() -> None:
    rows = {p.row for p in load_contract().revision("seed").precedence}
    assert {s.row for s in SEED_ROWS} == rows


@pytest.mark.rules("R39")
@pytest.mark.parametrize("scenario", SEED_ROWS, ids=[f"row{s.row}" for s in SEED_ROWS])
async def test_precedence_row_decides_the_outcome(scenario: Scenario) -> None:
    """Each row's situation gives its outcome, and a transition citing that row decided it."""
    call = await scenario.run()
    assert call.json == scenario.want
    table = load_contract().revision("seed")
    cited = {table.contract.transitions[p.transition].precedence for p in call.path}
    assert scenario.row in cited, f"row {scenario.row} not cited along {call.events()}"


@pytest.mark.rules("R39")
async def test_a_pre_aborted_entry_never_takes_a_cancellation_row() -> None:
    """Row 17: rows 2, 3, 7, 9, 12 and 15 do not apply to a pre-aborted entry."""
    h = Harness()
    gate = Gate()
    h.body("t", gate=gate)

    async def around(view: Execution, next_: Next) -> ToolResult:
        result: ToolResult = await next_()
        return result

    h.registry.add_around(around)
    h.post(_accept)
    c, signal = controller()
    c.abort()
    task = h.start("t", signal=signal)
    await gate.reached()
    gate.open()
    call = await task
    assert call.json == ok()
    table = load_contract().revision("seed")
    cited = {table.contract.transitions[p.transition].precedence for p in call.path}
    assert cited.isdisjoint({2, 3, 7, 9, 12, 15})
    assert 17 in cited


async def _accept(view: Execution, result: ToolResult) -> Accept:
    return Accept()
