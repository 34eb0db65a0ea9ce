"""The RFC's own verification list, one test per promise it makes.

The RFC ("Cooperative tool cancellation at the registry boundary", 2026-07-19) says its tests pin
"cancellation during pre-policy and around/post waits, signal replacement and removal,
no-late-success behavior, context retention, started-body drainage, and pre-aborted direct entry".
Each test below quotes the sentence of the RFC it checks, and drives that exact situation with
gates against the seed revision.  Where the rule tests pin the detailed contract, these read as
the RFC's acceptance tests: if one of them fails, the registry no longer does what the RFC says.
"""

from __future__ import annotations

from typing import Any

import pytest
from support import Gate, Harness, Next, aborted, controller, expected, ok, text, until_idle
from toolcancel import (
    AbortController,
    Accept,
    Allow,
    Approval,
    ApprovalRequest,
    Ask,
    Block,
    Execution,
    ToolError,
    ToolOutput,
    ToolResult,
)


async def cancel_while(h: Harness, gate: Gate, name: str = "t", **kwargs: Any) -> Any:
    """Start a call, wait for ``gate``, abort the caller, release the gate, return the call."""
    c, signal = controller()
    task = h.start(name, signal=signal, **kwargs)
    await gate.reached()
    c.abort()
    gate.open()
    return await task


# ------------------------------------------------------------------------------------------------
# "Cancellation during any of those waits yields structured ABORTED without starting the body."
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R13", "R28")
async def test_cancellation_while_pre_execute_waits() -> None:
    h = Harness()
    gate = Gate()
    body = h.body("t")

    async def pre(view: Execution) -> Allow:
        await gate.passage()
        return Allow()

    h.pre(pre)
    call = await cancel_while(h, gate)
    assert call.json == aborted()
    assert not body.started


@pytest.mark.rules("R13", "R28")
async def test_cancellation_while_approval_waits() -> None:
    h = Harness()
    gate = Gate()
    body = h.body("t")

    async def seam(request: ApprovalRequest) -> Approval:
        await gate.passage()
        return Approval.APPROVED  # the answer arrives, but too late to matter

    async def ask(view: Execution) -> Ask:
        return Ask()

    h.pre(ask)
    h.registry.set_approval(seam)
    call = await cancel_while(h, gate, agent="a1")
    assert call.json == aborted()
    assert not body.started


@pytest.mark.rules("R17", "R28")
async def test_cancellation_while_a_wrapper_waits_before_delegation() -> None:
    h = Harness()
    gate = Gate()
    body = h.body("t")

    async def around(view: Execution, next_: Next) -> ToolResult:
        await gate.passage()
        result: ToolResult = await next_()
        return result

    h.registry.add_around(around)
    call = await cancel_while(h, gate)
    assert call.json == aborted()
    assert not body.started


# ------------------------------------------------------------------------------------------------
# "A wrapper or post-policy listener cannot return a late successful result after caller
# cancellation merely because the body completed earlier."
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R19", "R28")
async def test_cancellation_while_a_wrapper_waits_after_delegation() -> None:
    h = Harness()
    gate = Gate()
    body = h.body("t")

    async def around(view: Execution, next_: Next) -> ToolResult:
        result: ToolResult = await next_()
        await gate.passage()
        return result

    h.registry.add_around(around)
    call = await cancel_while(h, gate)
    assert body.finished == 1
    assert call.json == aborted()


@pytest.mark.rules("R20", "R7")
@pytest.mark.parametrize(
    ("decision", "want"),
    [
        (Accept(), aborted()),
        (Block([text("Error: withheld")]), expected("Error: withheld")),
    ],
    ids=["accept-success-replaced", "block-kept"],
)
async def test_cancellation_while_post_waits_replaces_only_its_successful_outcome(
    decision: Any, want: str
) -> None:
    h = Harness()
    gate = Gate()
    h.body("t")

    async def post(view: Execution, result: ToolResult) -> Any:
        await gate.passage()
        return decision

    h.post(post)
    assert (await cancel_while(h, gate)).json == want


@pytest.mark.rules("R16", "R19")
async def test_a_wrapper_owned_failure_remains_a_failure() -> None:
    """ "The timeout-policy wrapper may therefore classify its own winning deadline as
    TOOL_TIMEOUT instead of losing that information to generic cancellation.\""""
    h = Harness()
    gate = Gate()
    deadline = AbortController()
    h.body("t", gate=gate, on_start=lambda view: deadline.abort("timer fired"))

    async def timeout_policy(view: Execution, next_: Next) -> ToolResult:
        upstream = view.signal
        view.signal = deadline.signal
        try:
            result: ToolResult = await next_()
        finally:
            view.signal = upstream
        return h.registry.results.timeout(30) if deadline.signal.aborted else result

    h.registry.add_around(timeout_policy)
    call = await cancel_while(h, gate)  # the caller aborts too, after the timer
    assert call.json == expected(
        "Error: tool call timed out after 30ms",
        error={"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"},
    )


# ------------------------------------------------------------------------------------------------
# "Adding, replacing, or removing the public slot cannot detach the caller from a running body."
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R21", "R11")
@pytest.mark.parametrize("change", ["add", "replace", "remove"])
async def test_slot_changes_cannot_detach_the_caller_from_a_running_body(change: str) -> None:
    h = Harness()
    gate = Gate()
    body = h.body("t", gate=gate)
    upstream = AbortController()

    async def outer(view: Execution, next_: Next) -> ToolResult:
        if change != "add":
            view.signal = upstream.signal  # an outer scope's signal in the slot
        result: ToolResult = await next_()
        return result

    async def inner(view: Execution, next_: Next) -> ToolResult:
        if change in ("add", "replace"):
            view.signal = AbortController().signal
        else:
            del view.signal
        result: ToolResult = await next_()
        return result

    h.registry.add_around(outer)
    h.registry.add_around(inner)
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    reason = RuntimeError("stop")
    c.abort(reason)
    seen = body.signal
    assert seen is not None and seen.aborted and seen.reason is reason
    gate.open()
    assert (await task).json == aborted()
    assert signal.listener_count == 0  # "Dispatch-scoped listeners are removed when the body
    # settles."


# ------------------------------------------------------------------------------------------------
# "If the body settles successfully after that cancellation, the registry replaces success with
# { name: 'AbortError', code: 'ABORTED' }; a structured tool failure remains the more specific
# result.  Context deferred by a composite tool is retained."
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R18", "R28", "R4")
async def test_no_late_success() -> None:
    h = Harness()
    gate = Gate()
    h.body("t", ToolOutput([text("done anyway")], meta={"bytes": 10}), gate=gate)
    assert (await cancel_while(h, gate)).json == aborted()


@pytest.mark.rules("R18")
async def test_a_structured_tool_failure_remains_the_more_specific_result() -> None:
    h = Harness()
    gate = Gate()
    h.body("t", gate=gate, raises=ToolError("subprocess killed", code="KILLED"))
    call = await cancel_while(h, gate)
    assert call.json == expected(
        "Error: subprocess killed", error={"name": "ToolError", "code": "KILLED"}
    )


@pytest.mark.rules("R29", "R4")
async def test_context_deferred_by_a_composite_tool_is_retained() -> None:
    h = Harness()
    gate = Gate()
    h.body("t", gate=gate, defer=[{"source": "nested", "note": "partial work"}])
    call = await cancel_while(h, gate)
    assert call.json == aborted(contexts=[{"source": "nested", "note": "partial work"}])


# ------------------------------------------------------------------------------------------------
# "Once ToolDefinition.execute() starts, the registry awaits it ... the registry remains pending
# until the body settles."
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R27", "R22")
async def test_a_started_body_is_drained_before_the_call_completes() -> None:
    h = Harness()
    gate = Gate()
    body = h.body("t", gate=gate)
    c, signal = controller()
    w = AbortController().signal

    async def around(view: Execution, next_: Next) -> ToolResult:
        view.signal = w
        result: ToolResult = await next_()
        return result

    h.registry.add_around(around)
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    await until_idle()
    assert not task.done()
    assert h.notified == []  # "The frozen tools/result notification is the completion boundary"
    gate.open()
    call = await task
    assert body.finished == 1
    assert call.json == aborted()
    assert (signal.listener_count, w.listener_count) == (0, 0)


# ------------------------------------------------------------------------------------------------
# "A signal already aborted when registry entry begins still reaches the tool body ... the more
# specific result remains observable."
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R25")
async def test_pre_aborted_direct_entry_reaches_the_body() -> None:
    h = Harness()

    class Cancelled(ToolError):
        pass

    async def body(arguments: Any, view: Execution) -> Any:
        assert view.signal is not None and view.signal.aborted
        raise Cancelled("rolled back the transaction", code="ROLLED_BACK")

    h.registry.register("t", body)
    c, signal = controller()
    c.abort()
    call = await h.call("t", signal=signal)
    assert call.json == expected(
        "Error: rolled back the transaction", error={"name": "Cancelled", "code": "ROLLED_BACK"}
    )


@pytest.mark.rules("R25")
async def test_pre_aborted_direct_entry_success_stays_a_success() -> None:
    h = Harness()
    body = h.body("t")
    c, signal = controller()
    c.abort()
    assert (await h.call("t", signal=signal)).json == ok()
    assert body.signal is body.call_signal and body.signal.aborted  # C, the call signal (P1)
