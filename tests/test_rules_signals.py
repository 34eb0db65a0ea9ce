"""Rules R21-R26: which signal the body gets, how long the relay listens, what the slot holds,
the approval signal, pre-aborted entry and calls without a caller signal (seed revision).

The point of fusion is that no around wrapper can detach the caller from a running body, while
wrappers keep replacing the slot to compose deadlines.  These tests pin the identity of the
signal the body receives in each case of the R21 table, which source's reason a relay carries,
and that nothing is left listening on the caller's signal once a call is over.

Where the R21 table says "C itself" or "W itself", the contract also allows a relay that behaves
identically; the reference hands over the object itself, and the identity assertions here pin
the reference.  In the Python binding C is the *call signal* (``Execution.call_signal``), which
follows the signal passed to ``execute()``; tests compare with it (P1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support import Gate, Harness, Next, aborted, controller, expected, ok, passing_guard, text
from toolcancel import (
    AbortSignal,
    Accept,
    Allow,
    Approval,
    ApprovalRequest,
    Ask,
    Execution,
    RegistryUsageError,
    ToolError,
    ToolResult,
)


def slot_setter(
    value: Callable[[Execution], AbortSignal | None], seen: list[Any] | None = None
) -> Any:
    """A wrapper that puts ``value(view)`` in the slot, delegates, and records what it sees
    after."""

    async def around(view: Execution, next_: Next) -> ToolResult:
        view.signal = value(view)
        result: ToolResult = await next_()
        if seen is not None:
            seen.append(view.signal)
        return result

    return around


# ------------------------------------------------------------------------------------------------
# R21 fusion: the identity of F
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R21")
async def test_without_wrappers_the_body_gets_the_caller_signal_itself() -> None:
    h = Harness()
    body = h.body("t")
    _, c = controller()
    call = await h.call("t", signal=c)
    assert body.signal is call.view.call_signal
    assert c.listener_count == 0 and body.signal.listener_count == 0


@pytest.mark.rules("R21")
async def test_a_wrapper_that_keeps_the_slot_as_c_passes_c_through() -> None:
    h = Harness()
    body = h.body("t")
    _, c = controller()
    h.registry.add_around(slot_setter(lambda view: view.call_signal))
    call = await h.call("t", signal=c)
    assert body.signal is call.view.call_signal


@pytest.mark.rules("R21", "R22")
async def test_a_replaced_slot_gives_the_body_a_fresh_relay_that_follows_the_caller() -> None:
    h = Harness()
    gate = Gate()
    body = h.body("t", gate=gate)
    c_controller, c = controller()
    _, w = controller()
    h.registry.add_around(slot_setter(lambda view: w))
    task = h.start("t", signal=c)
    await gate.reached()
    f, k = body.signal, body.call_signal
    assert f is not None and k is not None and f is not k and f is not w
    assert (f.aborted, k.listener_count, w.listener_count) == (False, 1, 1)
    reason = RuntimeError("user pressed stop")
    c_controller.abort(reason)
    assert f.aborted and f.reason is reason
    assert not w.aborted
    assert (k.listener_count, w.listener_count) == (0, 0)  # removed as soon as a source fired
    gate.open()
    assert (await task).json == aborted()


@pytest.mark.rules("R21", "R22")
async def test_a_relay_follows_the_wrapper_signal_and_never_aborts_the_caller() -> None:
    h = Harness()
    gate = Gate()
    body = h.body("t", gate=gate)
    _, c = controller()
    w_controller, w = controller()
    h.registry.add_around(slot_setter(lambda view: w))
    task = h.start("t", signal=c)
    await gate.reached()
    w_controller.abort("deadline")
    f, k = body.signal, body.call_signal
    assert f is not None and f.aborted and f.reason == "deadline"
    assert k is not None and not k.aborted and not c.aborted
    assert (k.listener_count, w.listener_count) == (0, 0)
    gate.open()
    call = await task
    assert call.json == aborted()
    assert not c.aborted


@pytest.mark.rules("R21")
async def test_a_removed_slot_gives_the_body_the_caller_signal_itself() -> None:
    h = Harness()
    body = h.body("t")
    _, c = controller()
    h.registry.add_around(slot_setter(lambda view: None))
    call = await h.call("t", signal=c)
    assert body.signal is call.view.call_signal


@pytest.mark.rules("R21", "R26")
async def test_without_a_caller_the_body_gets_the_wrapper_signal_itself() -> None:
    h = Harness()
    body = h.body("t")
    _, w = controller()
    h.registry.add_around(slot_setter(lambda view: w))
    await h.call("t")
    assert body.signal is w
    assert w.listener_count == 0


@pytest.mark.rules("R21", "R26")
async def test_without_a_caller_or_a_wrapper_signal_the_body_gets_none() -> None:
    h = Harness()
    body = h.body("t")
    await h.call("t")
    assert body.signal is None


@pytest.mark.rules("R21", "R25")
async def test_a_relay_over_a_pre_aborted_caller_is_born_aborted_with_the_callers_reason() -> None:
    h = Harness()
    body = h.body("t")
    c_controller, c = controller()
    c_controller.abort("caller gone")
    _, w = controller()
    h.registry.add_around(slot_setter(lambda view: w))
    call = await h.call("t", signal=c)
    f = body.signal
    assert f is not None and f is not c and f is not w
    assert f.aborted and f.reason == "caller gone"
    assert not w.aborted
    assert call.json == ok()  # pre-aborted entry: no replacement (R25)


@pytest.mark.rules("R21", "R25")
async def test_when_both_are_already_aborted_the_wrapper_reason_wins() -> None:
    h = Harness()
    body = h.body("t")
    c_controller, c = controller()
    c_controller.abort("caller gone")
    w_controller, w = controller()
    w_controller.abort("deadline")
    h.registry.add_around(slot_setter(lambda view: w))
    await h.call("t", signal=c)
    f = body.signal
    assert f is not None and f is not c and f is not w
    assert f.reason == "deadline"


# ------------------------------------------------------------------------------------------------
# R22 relay lifecycle
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R22")
async def test_aborting_the_caller_after_the_body_settled_does_not_abort_the_f_it_saw() -> None:
    h = Harness()
    wrapper_gate = Gate()
    body = h.body("t")
    c_controller, c = controller()
    _, w = controller()

    async def around(view: Execution, next_: Next) -> ToolResult:
        view.signal = w
        result: ToolResult = await next_()
        await wrapper_gate.passage()
        return result

    h.registry.add_around(around)
    task = h.start("t", signal=c)
    await wrapper_gate.reached()
    k = body.call_signal
    assert k is not None and (k.listener_count, w.listener_count) == (0, 0)
    c_controller.abort()
    f = body.signal
    assert f is not None and not f.aborted
    wrapper_gate.open()
    call = await task
    assert call.json == aborted()  # C3 still sees the caller
    assert not f.aborted
    assert (c.listener_count, w.listener_count) == (0, 0)


@pytest.mark.rules("R22")
async def test_the_caller_keeps_no_listener_after_a_call_with_a_body_error() -> None:
    h = Harness()
    h.body("t", raises=ToolError("no", code="NO"))
    _, c = controller()
    _, w = controller()
    h.registry.add_around(slot_setter(lambda view: w))
    await h.call("t", signal=c)
    assert (c.listener_count, w.listener_count) == (0, 0)


@pytest.mark.rules("R22", "R6")
async def test_the_caller_keeps_no_listener_after_an_unknown_tool() -> None:
    h = Harness()
    _, c = controller()
    _, w = controller()
    h.registry.add_around(slot_setter(lambda view: w))
    call = await h.call("nope", signal=c)
    assert call.result.error is not None and call.result.error.code == "UNKNOWN_TOOL"
    assert (c.listener_count, w.listener_count) == (0, 0)


# ------------------------------------------------------------------------------------------------
# R23 slot semantics
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R23")
async def test_the_slot_holds_c_for_pre_execute_and_the_outermost_wrapper() -> None:
    h = Harness()
    h.body("t")
    _, c = controller()
    _, w = controller()
    seen: dict[str, Any] = {}

    async def pre(view: Execution) -> Allow:
        seen["pre"] = view.signal
        return Allow()

    async def outer(view: Execution, next_: Next) -> ToolResult:
        seen["outer"] = view.signal
        view.signal = w
        result: ToolResult = await next_()
        return result

    async def inner(view: Execution, next_: Next) -> ToolResult:
        seen["inner"] = view.signal
        result: ToolResult = await next_()
        return result

    h.pre(pre)
    h.registry.add_around(outer)
    h.registry.add_around(inner)
    call = await h.call("t", signal=c)
    assert seen["pre"] is call.view.call_signal
    assert seen["outer"] is call.view.call_signal
    assert seen["inner"] is w


@pytest.mark.rules("R23", "R31")
async def test_d8_a_wrapper_that_does_not_restore_leaks_its_signal_to_post_and_observers() -> None:
    h = Harness()
    h.body("t")
    _, c = controller()
    _, w = controller()
    seen: list[Any] = []

    async def post(view: Execution, result: ToolResult) -> Accept:
        seen.append(view.signal)
        return Accept()

    h.registry.add_around(slot_setter(lambda view: w))
    h.post(post)
    call = await h.call("t", signal=c)
    assert seen == [w]
    assert call.view.signal is w


@pytest.mark.rules("R23")
async def test_a_wrapper_that_restores_gives_post_execute_the_caller_signal() -> None:
    h = Harness()
    h.body("t")
    _, c = controller()
    _, w = controller()
    seen: list[Any] = []

    async def around(view: Execution, next_: Next) -> ToolResult:
        upstream = view.signal
        view.signal = w
        try:
            result: ToolResult = await next_()
        finally:
            view.signal = upstream
        return result

    async def post(view: Execution, result: ToolResult) -> Accept:
        seen.append(view.signal)
        return Accept()

    h.registry.add_around(around)
    h.post(post)
    call = await h.call("t", signal=c)
    assert seen == [call.view.call_signal]


@pytest.mark.rules("R23", "R26")
async def test_after_the_body_an_absent_w_is_absent_again() -> None:
    h = Harness()
    seen: list[Any] = []
    _, c = controller()

    async def body(arguments: Any, view: Execution) -> Any:
        seen.append(view.signal)
        return [text("ok")]

    h.registry.register("t", body)
    h.registry.add_around(slot_setter(lambda view: None, seen))
    call = await h.call("t", signal=c)
    assert seen == [call.view.call_signal, None]


@pytest.mark.rules("R23", "R31")
async def test_the_view_is_frozen_once_published() -> None:
    h = Harness()
    h.body("t")
    _, c = controller()
    _, other = controller()
    refused: list[str] = []

    def observer(view: Execution, result: ToolResult) -> None:
        try:
            view.signal = other
        except RegistryUsageError as exc:
            refused.append(str(exc))

    h.registry.add_observer(observer)
    call = await h.call("t", signal=c, call_id="frozen-1")
    assert len(refused) == 1 and "frozen" in refused[0]
    with pytest.raises(RegistryUsageError):
        call.view.signal = other
    with pytest.raises(RegistryUsageError):
        del call.view.signal
    assert call.view.signal is call.view.call_signal


@pytest.mark.rules("R23")
async def test_the_slot_only_takes_signals() -> None:
    h = Harness()
    h.body("t")
    problems: list[str] = []

    async def around(view: Execution, next_: Next) -> ToolResult:
        try:
            view.signal = "not a signal"  # type: ignore[assignment]
        except RegistryUsageError as exc:
            problems.append(str(exc))
        result: ToolResult = await next_()
        return result

    h.registry.add_around(around)
    assert (await h.call("t")).json == ok()
    assert len(problems) == 1


# ------------------------------------------------------------------------------------------------
# R24 approval signal
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R24")
@pytest.mark.parametrize("with_caller", [True, False], ids=["caller", "no-caller"])
async def test_approval_gets_the_caller_signal_by_identity(with_caller: bool) -> None:
    h = Harness()
    h.body("t")
    _, c = controller()
    requests: list[ApprovalRequest] = []

    async def seam(request: ApprovalRequest) -> Approval:
        requests.append(request)
        return Approval.APPROVED

    async def ask(view: Execution) -> Ask:
        return Ask()

    h.pre(ask)
    h.registry.set_approval(seam)
    call = await h.call("t", signal=c if with_caller else None, agent="a1")
    [request] = requests
    if with_caller:
        assert request.signal is call.view.call_signal
    else:
        assert request.signal is None


# ------------------------------------------------------------------------------------------------
# R25 pre-aborted entry
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R25")
async def test_pre_aborted_entry_runs_every_stage_and_the_body_sees_the_aborted_signal() -> None:
    h = Harness()
    body = h.body("t")
    c_controller, c = controller()
    c_controller.abort("already gone")

    async def pre(view: Execution) -> Allow:
        return Allow()

    async def around(view: Execution, next_: Next) -> ToolResult:
        h.log.append("around")
        result: ToolResult = await next_()
        return result

    async def post(view: Execution, result: ToolResult) -> Accept:
        return Accept()

    h.pre(pre)
    h.registry.add_guard(passing_guard(h.log, "guard"))
    h.registry.add_around(around)
    h.post(post)
    call = await h.call("t", signal=c)
    assert call.json == ok()
    assert h.log == ["pre", "guard", "around", "body", "post", "notify"]
    assert body.signal is body.call_signal and body.signal.aborted and c.aborted
    assert all(p.outcome not in ("aborted", "aborted_before_dispatch") for p in call.path)
    assert call.step("base_dispatch").dest == "draining"


@pytest.mark.rules("R25")
async def test_pre_aborted_entry_reports_a_capability_specific_failure_as_is() -> None:
    class CleanupDone(ToolError):
        pass

    h = Harness()

    async def body(arguments: Any, view: Execution) -> Any:
        assert view.signal is not None and view.signal.aborted
        raise CleanupDone("cancelled; temp files removed", code="CLEANED_UP")

    h.registry.register("t", body)
    c_controller, c = controller()
    c_controller.abort()
    call = await h.call("t", signal=c)
    assert call.json == expected(
        "Error: cancelled; temp files removed", error={"name": "CleanupDone", "code": "CLEANED_UP"}
    )


@pytest.mark.rules("R25", "R5")
async def test_pre_aborted_entry_goes_to_approval_which_may_answer_cancelled() -> None:
    h = Harness()
    body = h.body("t")
    c_controller, c = controller()
    c_controller.abort()

    async def seam(request: ApprovalRequest) -> Approval:
        assert request.signal is not None and request.signal.reason is c.reason  # C follows c
        return Approval.CANCELLED if request.signal.aborted else Approval.APPROVED

    async def ask(view: Execution) -> Ask:
        return Ask()

    h.pre(ask)
    h.registry.set_approval(seam)
    call = await h.call("t", signal=c, agent="a1")
    assert call.json == expected('Error: approval for tool "t" was cancelled')
    assert not body.started


@pytest.mark.rules("R25", "R27")
async def test_pre_aborted_entry_with_an_aborting_wrapper_signal_still_runs_the_body() -> None:
    """Even a wrapper-supplied aborted slot does not stop a pre-aborted call at C2."""
    h = Harness()
    body = h.body("t")
    c_controller, c = controller()
    c_controller.abort()
    w_controller, w = controller()
    w_controller.abort("deadline")
    h.registry.add_around(slot_setter(lambda view: w))
    call = await h.call("t", signal=c)
    assert body.started
    assert call.json == ok()


# ------------------------------------------------------------------------------------------------
# R26 no caller signal
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R26")
async def test_without_a_caller_the_slot_stays_absent_for_every_stage() -> None:
    h = Harness()
    body = h.body("t")
    seen: list[Any] = []

    async def pre(view: Execution) -> Allow:
        seen.append(view.signal)
        return Allow()

    async def around(view: Execution, next_: Next) -> ToolResult:
        seen.append(view.signal)
        result: ToolResult = await next_()
        return result

    async def post(view: Execution, result: ToolResult) -> Accept:
        seen.append(view.signal)
        return Accept()

    h.pre(pre)
    h.registry.add_around(around)
    h.post(post)
    call = await h.call("t")
    assert seen == [None, None, None]
    assert body.signal is None
    assert call.json == ok()


@pytest.mark.rules("R26")
async def test_without_a_caller_a_wrapper_signal_aborting_after_the_body_changes_nothing() -> None:
    """C3 and C4 read only the caller: a wrapper signal that aborts once the body settled is
    the wrapper's business (it may map it itself, as the timeout policy does)."""
    h = Harness()
    gate = Gate()
    h.body("t")
    w_controller, w = controller()

    async def around(view: Execution, next_: Next) -> ToolResult:
        view.signal = w
        result: ToolResult = await next_()
        await gate.passage()
        return result

    async def post(view: Execution, result: ToolResult) -> Accept:
        return Accept()

    h.registry.add_around(around)
    h.post(post)
    task = h.start("t")
    await gate.reached()
    w_controller.abort("deadline after the body")
    gate.open()
    call = await task
    assert call.json == ok()
    assert "caller_abort" not in call.events()
