"""Rules R40-R44: the revised contract (``ToolRegistry(revision="revised")``).

The revision keeps quiescence, fusion and context handling, and changes what cancellation
*means* to a reader of the result: ABORTED now says the body ran, ABORTED_BEFORE_DISPATCH says
cancellation kept it from running; a pre-aborted call short-circuits; denials and pre-policy
failures beat cancellation; every error carries ``{message, info?}``.  These tests pin each
change against the same scenarios the seed tests use, so a registry that mixed the two revisions
fails here.
"""

from __future__ import annotations

from typing import Any

import pytest
from support import Gate, Harness, Next, canon, controller, passing_guard, text
from toolcancel import (
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
)


def err(message: str, name: str | None = None, code: str | None = None) -> dict[str, Any]:
    """The revised ``error`` field: ``{message, info?: {name, code}}``."""
    out: dict[str, Any] = {"message": message}
    if name is not None:
        out["info"] = {"name": name, "code": code}
    return out


def result(message: str, error: dict[str, Any] | None, contexts: list[Any] | None = None) -> str:
    data: dict[str, Any] = {"content": [text(message)], "isError": error is not None}
    if error is not None:
        data["error"] = error
    if contexts:
        data["additionalContexts"] = contexts
    return canon(data)


ABORTED = result("Error: tool call aborted", err("tool call aborted", "AbortError", "ABORTED"))
BEFORE_DISPATCH = result(
    "Error: tool call aborted before dispatch",
    err("tool call aborted before dispatch", "AbortError", "ABORTED_BEFORE_DISPATCH"),
)
OK = canon({"content": [text("ok")], "isError": False})


def revised() -> Harness:
    return Harness(revision="revised")


async def cancel_at(h: Harness, gate: Gate, name: str = "t", **kwargs: Any) -> Any:
    c, signal = controller()
    task = h.start(name, signal=signal, **kwargs)
    await gate.reached()
    c.abort()
    gate.open()
    return await task


def gated_pre(h: Harness, gate: Gate, decision: Any) -> None:
    async def decide(view: Execution) -> Any:
        await gate.passage()
        if isinstance(decision, BaseException):
            raise decision
        return decision

    h.pre(decide)


# ------------------------------------------------------------------------------------------------
# R40 required caller signal
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R40")
async def test_a_call_without_a_caller_signal_is_a_usage_error_not_a_result() -> None:
    h = revised()
    body = h.body("t")
    with pytest.raises(RegistryUsageError, match="requires a caller signal"):
        await h.registry.execute("t")
    assert not body.started
    assert h.notified == []
    assert (await h.call("t", signal=controller()[1])).json == OK


@pytest.mark.rules("R40", "R26")
async def test_the_seed_still_accepts_a_call_without_a_signal() -> None:
    assert (await _seed_call_without_signal()).json == OK


async def _seed_call_without_signal() -> Any:
    h = Harness()
    h.body("t")
    return await h.call("t")


# ------------------------------------------------------------------------------------------------
# R41 two cancellation codes
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R41", "R18")
async def test_cancellation_after_the_body_started_is_aborted() -> None:
    h = revised()
    gate = Gate()
    body = h.body("t", gate=gate)
    call = await cancel_at(h, gate)
    assert call.json == ABORTED
    assert body.finished == 1


@pytest.mark.rules("R41", "R13")
async def test_cancellation_during_pre_execute_is_aborted_before_dispatch() -> None:
    h = revised()
    gate = Gate()
    body = h.body("t")
    gated_pre(h, gate, Allow())
    posted: list[str] = []

    async def post(view: Execution, res: ToolResult) -> Accept:
        posted.append(res.text)
        return Accept()

    h.post(post)
    call = await cancel_at(h, gate)
    assert call.json == BEFORE_DISPATCH
    assert posted == ["Error: tool call aborted before dispatch"]  # post route
    assert not body.started


@pytest.mark.rules("R41", "R17")
async def test_a_wrapper_supplied_aborted_signal_is_aborted_before_dispatch() -> None:
    h = revised()
    body = h.body("t")
    w_controller, w = controller()
    w_controller.abort("deadline")

    async def around(view: Execution, next_: Next) -> ToolResult:
        view.signal = w
        res: ToolResult = await next_()
        return res

    h.registry.add_around(around)
    call = await h.call("t", signal=controller()[1])
    assert call.json == BEFORE_DISPATCH
    assert not body.started


@pytest.mark.rules("R41", "R6")
async def test_a_cancelled_unknown_tool_is_aborted_before_dispatch() -> None:
    h = revised()
    gate = Gate()

    async def around(view: Execution, next_: Next) -> ToolResult:
        await gate.passage()
        res: ToolResult = await next_()
        return res

    h.registry.add_around(around)
    call = await cancel_at(h, gate, "no-such-tool")
    assert call.json == BEFORE_DISPATCH


@pytest.mark.rules("R41", "R6")
async def test_an_unknown_tool_never_counts_as_invoked() -> None:
    """The invoked flag is set after a successful lookup: an unknown tool whose success-looking
    wrapper result is overtaken by the caller reports ABORTED_BEFORE_DISPATCH."""
    h = revised()
    gate = Gate()

    async def around(view: Execution, next_: Next) -> ToolResult:
        await next_()
        await gate.passage()
        return ToolResult([text("wrapper made up a success")], revision="revised")

    h.registry.add_around(around)
    call = await cancel_at(h, gate, "no-such-tool")
    assert call.json == BEFORE_DISPATCH


@pytest.mark.rules("R41", "R19")
async def test_caller_cancellation_overtaking_a_wrapper_short_circuit_is_before_dispatch() -> None:
    h = revised()
    gate = Gate()
    body = h.body("t")

    async def cached(view: Execution, next_: Next) -> ToolResult:
        await gate.passage()
        return ToolResult([text("from cache")], revision="revised")

    h.registry.add_around(cached)
    call = await cancel_at(h, gate)
    assert call.json == BEFORE_DISPATCH
    assert not body.started


@pytest.mark.rules("R41", "R19")
async def test_c3_after_an_invoked_body_is_aborted() -> None:
    h = revised()
    gate = Gate()
    h.body("t", defer=[{"d": 1}])

    async def around(view: Execution, next_: Next) -> ToolResult:
        res: ToolResult = await next_()
        await gate.passage()
        return res

    h.registry.add_around(around)
    call = await cancel_at(h, gate)
    assert call.json == result(
        "Error: tool call aborted",
        err("tool call aborted", "AbortError", "ABORTED"),
        [{"d": 1}],
    )


@pytest.mark.rules("R41", "R20")
async def test_c4_after_an_invoked_body_is_aborted() -> None:
    h = revised()
    gate = Gate()
    h.body("t")

    async def post(view: Execution, res: ToolResult) -> Accept:
        await gate.passage()
        return Accept(contexts=[{"p": 1}])

    h.post(post)
    call = await cancel_at(h, gate)
    assert call.json == result(
        "Error: tool call aborted",
        err("tool call aborted", "AbortError", "ABORTED"),
        [{"p": 1}],
    )


@pytest.mark.rules("R41", "R20")
async def test_c4_after_a_short_circuit_is_aborted_before_dispatch() -> None:
    h = revised()
    gate = Gate()
    body = h.body("t")

    async def cached(view: Execution, next_: Next) -> ToolResult:
        return ToolResult([text("from cache")], revision="revised")

    async def post(view: Execution, res: ToolResult) -> Accept:
        await gate.passage()
        return Accept()

    h.registry.add_around(cached)
    h.post(post)
    call = await cancel_at(h, gate)
    assert call.json == BEFORE_DISPATCH
    assert not body.started


# ------------------------------------------------------------------------------------------------
# R42 pre-aborted entry short-circuits
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R42", "R31")
async def test_pre_aborted_entry_runs_nothing_and_notifies_once() -> None:
    h = revised()
    body = h.body("t")
    ran: list[str] = []

    async def pre(view: Execution) -> Allow:
        ran.append("pre")
        return Allow()

    async def seam(request: ApprovalRequest) -> Approval:
        ran.append("approval")
        return Approval.APPROVED

    async def around(view: Execution, next_: Next) -> ToolResult:
        ran.append("around")
        res: ToolResult = await next_()
        return res

    async def post(view: Execution, res: ToolResult) -> Accept:
        ran.append("post")
        return Accept()

    h.pre(pre)
    h.registry.set_approval(seam)
    h.registry.add_guard(passing_guard(ran, "guard"))
    h.registry.add_around(around)
    h.post(post)
    c, signal = controller()
    c.abort()
    call = await h.call("t", signal=signal, agent="a1")
    assert call.json == BEFORE_DISPATCH
    assert ran == []
    assert not body.started
    assert call.view.signal is call.view.call_signal and call.view.signal.aborted
    assert [(p.source, p.event, p.dest) for p in call.path] == [
        ("entry", "args_valid", "finalizing"),
        ("finalizing", "publish", "materialized"),
    ]


@pytest.mark.rules("R42", "R11")
async def test_argument_failure_still_beats_a_pre_aborted_signal() -> None:
    h = revised()
    h.body("t")
    c, signal = controller()
    c.abort()
    call = await h.call("t", {"x": float("nan")}, signal=signal)
    msg = "tool execution arguments must be losslessly JSON-serializable"
    assert call.json == result("Error: " + msg, err(msg))


# ------------------------------------------------------------------------------------------------
# R43 pre-policy precedence
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R43")
async def test_a_deny_beats_cancellation() -> None:
    h = revised()
    gate = Gate()
    h.body("t")
    gated_pre(h, gate, Deny("not allowed"))
    call = await cancel_at(h, gate)
    assert call.json == result("Error: not allowed", err("not allowed"))


@pytest.mark.rules("R43", "R15")
async def test_guards_run_even_when_aborted_and_their_denial_beats_cancellation() -> None:
    h = revised()
    gate = Gate()
    body = h.body("t")
    gated_pre(h, gate, Allow())
    calls: list[bool] = []

    def guard(view: Execution) -> str:
        calls.append(True)
        return "outside business hours"

    h.registry.add_guard(guard)
    call = await cancel_at(h, gate)
    assert calls == [True]
    assert call.json == result("Error: outside business hours", err("outside business hours"))
    assert not body.started


@pytest.mark.rules("R43")
async def test_guards_pass_while_aborted_gives_aborted_before_dispatch_on_the_post_route() -> None:
    h = revised()
    gate = Gate()
    body = h.body("t")
    gated_pre(h, gate, Allow())
    calls: list[bool] = []
    h.registry.add_guard(passing_guard(calls, True))
    posted: list[str] = []

    async def post(view: Execution, res: ToolResult) -> Accept:
        posted.append(res.text)
        return Accept()

    h.post(post)
    call = await cancel_at(h, gate)
    assert calls == [True]
    assert call.json == BEFORE_DISPATCH
    assert posted == ["Error: tool call aborted before dispatch"]
    assert not body.started
    assert call.step("guards_pass").outcome == "aborted_before_dispatch"


@pytest.mark.rules("R43", "R5")
@pytest.mark.parametrize(
    ("answer", "want"),
    [
        (Approval.CANCELLED, BEFORE_DISPATCH),
        (
            Approval.REJECTED,
            result('Error: the user rejected tool "t"', err('the user rejected tool "t"')),
        ),
        (
            Approval.UNAVAILABLE,
            result(
                'Error: tool "t" requires approval, but no approval channel is available',
                err('tool "t" requires approval, but no approval channel is available'),
            ),
        ),
    ],
)
async def test_cancelled_approval_of_an_aborted_call_is_before_dispatch_other_denials_win(
    answer: Approval, want: str
) -> None:
    h = revised()
    gate = Gate()
    body = h.body("t")

    async def seam(request: ApprovalRequest) -> Approval:
        await gate.passage()
        return answer

    async def ask(view: Execution) -> Ask:
        return Ask()

    h.pre(ask)
    h.registry.set_approval(seam)
    call = await cancel_at(h, gate, agent="a1")
    assert call.json == want
    assert not body.started


@pytest.mark.rules("R43", "R14")
async def test_a_pre_execute_failure_after_cancellation_is_final() -> None:
    h = revised()
    gate = Gate()
    h.body("t")
    gated_pre(h, gate, RuntimeError("policy store down"))
    posted: list[str] = []

    async def post(view: Execution, res: ToolResult) -> Accept:
        posted.append(res.text)
        return Accept()

    h.post(post)
    call = await cancel_at(h, gate)
    assert call.json == result("Error: policy store down", err("policy store down"))
    assert posted == []
    assert call.step("pre_raise").dest == "finalizing"


# ------------------------------------------------------------------------------------------------
# R44 error shape
# ------------------------------------------------------------------------------------------------


class Throttled(ToolError):
    pass


@pytest.mark.rules("R44", "R3")
async def test_thrown_values_carry_message_and_structured_ones_info() -> None:
    h = revised()
    h.body("plain", raises=RuntimeError("disk full"))
    h.body("structured", raises=Throttled("slow down", code="THROTTLED"))
    signal = controller()[1]
    plain = await h.call("plain", signal=signal)
    structured = await h.call("structured", signal=signal)
    assert plain.json == result("Error: disk full", err("disk full"))
    assert structured.json == result("Error: slow down", err("slow down", "Throttled", "THROTTLED"))


@pytest.mark.rules("R44", "R7")
async def test_a_block_carries_its_feedback_as_the_message_nothing_stripped() -> None:
    h = revised()
    h.body("t")

    async def post(view: Execution, res: ToolResult) -> Block:
        return Block([text("Error: the output leaked a secret")])

    h.post(post)
    call = await h.call("t", signal=controller()[1])
    # The original keeps the feedback's text as it is: no "Error: " is stripped (issue 12).
    assert call.json == result(
        "Error: the output leaked a secret", err("Error: the output leaked a secret")
    )


@pytest.mark.rules("R44", "R6", "R8")
async def test_registry_codes_carry_info() -> None:
    h = revised()
    unknown = await h.call("nope", signal=controller()[1])
    assert unknown.json == result(
        'Error: unknown tool "nope"',
        err('unknown tool "nope"', "ToolNotFoundError", "UNKNOWN_TOOL"),
    )
    assert h.registry.results.timeout(1.5).to_json() == result(
        "Error: tool call timed out after 1.5ms",
        err("tool call timed out after 1.5ms", "ToolTimeoutError", "TOOL_TIMEOUT"),
    )


@pytest.mark.rules("R44", "R30")
async def test_the_serialization_error_carries_a_message() -> None:
    h = revised()
    h.body("t", ToolOutput([text("x")], meta={"f": print}))
    call = await h.call("t", signal=controller()[1])
    msg = "tool result must be losslessly JSON-serializable"
    assert call.json == result("Error: " + msg, err(msg))
