"""Rules R27-R31: quiescence, no late start or success, deferred contexts, materialization and
the single notification -- plus listener hygiene over many randomly cancelled calls.

Quiescence is the RFC's reason for existing: a registry that raced the body's promise against
cancellation would report ABORTED while the body's side effects were still live.  The tests here
prove the *wait* happened, not just the eventual result: the body holds at a gate, the caller
aborts, every other task gets to run until it blocks, and the call must still be pending.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import anyio
import pytest
from support import (
    Gate,
    Harness,
    Next,
    aborted,
    controller,
    expected,
    ok,
    text,
    until_idle,
    yield_to_others,
)
from toolcancel import (
    AbortController,
    AbortSignal,
    Accept,
    Allow,
    Approval,
    ApprovalRequest,
    Ask,
    Block,
    Deny,
    Execution,
    RegistryUsageError,
    ToolOutput,
    ToolResult,
)

# ------------------------------------------------------------------------------------------------
# R27 quiescence
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R27")
async def test_an_uncooperative_body_keeps_the_call_pending_after_cancellation() -> None:
    h = Harness()
    gate = Gate()
    body = h.body("t", gate=gate)
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    await until_idle()
    assert not task.done(), "execute() settled while the body was still running"
    assert body.finished == 0
    assert h.notified == []
    gate.open()
    call = await task
    assert body.finished == 1
    assert call.json == aborted()


@pytest.mark.rules("R27")
async def test_a_day_after_the_abort_the_call_still_waits_and_warned_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # No grace period: however long a body ignores its aborted signal, the call waits for it.
    # The drain warning (30 s by default) only logs, once, and the registry keeps waiting.
    h = Harness()
    gate = Gate()
    body = h.body("t", gate=gate)
    c, signal = controller()
    task = h.start("t", signal=signal, call_id="c-stubborn")
    await gate.reached()
    with caplog.at_level(logging.WARNING, logger="toolcancel.runtime.registry"):
        c.abort()
        await anyio.sleep(86_400)  # virtual time: a day
        await until_idle()
        assert not task.done(), "execute() stopped waiting for a body that ignores its signal"
        assert h.notified == [] and body.finished == 0
        assert [i.state for i in h.registry.in_flight()] == ["draining"]
        gate.open()
        call = await task
    assert call.json == aborted()
    warnings = [r for r in caplog.records if "still running" in r.getMessage()]
    assert len(warnings) == 1 and "c-stubborn" in warnings[0].getMessage()


@pytest.mark.rules("R27")
@pytest.mark.parametrize("stage", ["pre", "approval", "around-before", "around-after", "post"])
async def test_every_hook_is_awaited_after_cancellation(stage: str) -> None:
    h = Harness()
    gate = Gate()
    h.body("t")
    finished: list[str] = []

    async def hold(label: str) -> None:
        if label == stage:
            await gate.passage()
            finished.append(label)

    async def pre(view: Execution) -> Any:
        await hold("pre")
        return Ask()

    async def seam(request: ApprovalRequest) -> Approval:
        await hold("approval")
        return Approval.APPROVED

    async def around(view: Execution, next_: Next) -> ToolResult:
        await hold("around-before")
        result: ToolResult = await next_()
        await hold("around-after")
        return result

    async def post(view: Execution, result: ToolResult) -> Accept:
        await hold("post")
        return Accept()

    h.pre(pre)
    h.registry.set_approval(seam)
    h.registry.add_around(around)
    h.post(post)
    c, signal = controller()
    task = h.start("t", signal=signal, agent="a1")
    await gate.reached()
    c.abort()
    await until_idle()
    assert not task.done(), f"execute() abandoned the {stage} hook"
    gate.open()
    call = await task
    assert finished == [stage]
    assert call.json == aborted()


@pytest.mark.rules("R27", "R16")
async def test_a_retried_body_is_awaited_each_time() -> None:
    h = Harness()
    gates = [Gate("first"), Gate("second")]
    calls = 0

    async def body(arguments: Any, view: Execution) -> Any:
        nonlocal calls
        calls += 1
        await gates[calls - 1].passage()
        return [text(f"try {calls}")]

    async def retry(view: Execution, next_: Next) -> ToolResult:
        await next_()
        result: ToolResult = await next_()
        return result

    h.registry.register("t", body)
    h.registry.add_around(retry)
    task = h.start("t")
    await gates[0].reached()
    gates[0].open()
    await gates[1].reached()
    await until_idle()
    assert not task.done()
    gates[1].open()
    assert (await task).json == ok("try 2")


# ------------------------------------------------------------------------------------------------
# R28 no late start, no late success
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R28")
async def test_a_cancellation_after_c4_has_no_effect() -> None:
    """D16: materialization and notification are synchronous after C4; an observer that aborts
    the caller cannot change the result it is being told about."""
    h = Harness()
    h.body("t")
    c, signal = controller()

    def abort_in_observer(view: Execution, result: ToolResult) -> None:
        c.abort()

    h.registry.add_observer(abort_in_observer)
    call = await h.call("t", signal=signal)
    assert signal.aborted
    assert call.json == ok()
    assert call.path[-1].event == "publish"


@pytest.mark.rules("R28")
@pytest.mark.parametrize("where", ["pre", "approval", "guard", "around-before"])
async def test_no_body_starts_after_a_cancellation_before_c2(where: str) -> None:
    """Aborts happen from inside the stage, at the very last moment before it hands on."""
    h = Harness()
    body = h.body("t")
    c, signal = controller()

    async def pre(view: Execution) -> Any:
        if where == "pre":
            c.abort()
        return Ask()

    async def seam(request: ApprovalRequest) -> Approval:
        if where == "approval":
            c.abort()
        return Approval.APPROVED

    def guard(view: Execution) -> None:
        if where == "guard":
            c.abort()

    async def around(view: Execution, next_: Next) -> ToolResult:
        if where == "around-before":
            c.abort()
        result: ToolResult = await next_()
        return result

    h.pre(pre)
    h.registry.set_approval(seam)
    h.registry.add_guard(guard)
    h.registry.add_around(around)
    call = await h.call("t", signal=signal, agent="a1")
    assert not body.started
    assert call.json == aborted()


# ------------------------------------------------------------------------------------------------
# R29 deferred contexts
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R29")
async def test_contexts_are_ordered_deferred_then_wrapper_then_post() -> None:
    h = Harness()
    h.body(
        "t", defer=[{"source": "body", "n": 1, "envelope": {"k": "v"}}, {"source": "body", "n": 2}]
    )

    async def pre(view: Execution) -> Allow:
        view.defer_context({"source": "pre"})
        return Allow()

    async def around(view: Execution, next_: Next) -> ToolResult:
        result: ToolResult = await next_()
        # The wrapper puts its own context *first*; the registry still puts deferrals before it.
        return result.with_contexts([{"source": "wrapper"}, *result.contexts])

    async def post(view: Execution, result: ToolResult) -> Accept:
        return Accept(contexts=[{"source": "post"}])

    h.pre(pre)
    h.registry.add_around(around)
    h.post(post)
    call = await h.call("t")
    assert call.json == ok(
        contexts=[
            {"source": "pre"},
            {"source": "body", "n": 1, "envelope": {"k": "v"}},
            {"source": "body", "n": 2},
            {"source": "wrapper"},
            {"source": "post"},
        ]
    )


@pytest.mark.rules("R29", "R17")
async def test_deferred_contexts_survive_an_aborted_from_c2() -> None:
    h = Harness()
    gate = Gate()
    h.body("t")

    async def around(view: Execution, next_: Next) -> ToolResult:
        view.defer_context({"source": "wrapper-before"})
        await gate.passage()
        result: ToolResult = await next_()
        return result

    h.registry.add_around(around)
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    assert (await task).json == aborted(contexts=[{"source": "wrapper-before"}])


@pytest.mark.rules("R29", "R6")
async def test_deferred_contexts_survive_unknown_tool() -> None:
    h = Harness()

    async def around(view: Execution, next_: Next) -> ToolResult:
        view.defer_context({"source": "wrapper"})
        result: ToolResult = await next_()
        return result

    h.registry.add_around(around)
    call = await h.call("nope")
    assert call.json == expected(
        'Error: unknown tool "nope"',
        error={"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"},
        contexts=[{"source": "wrapper"}],
    )


@pytest.mark.rules("R29")
async def test_a_short_circuit_body_defers_nothing_and_a_denial_carries_no_deferrals() -> None:
    h = Harness()
    body = h.body("t", defer=[{"source": "body"}])

    async def short(view: Execution, next_: Next) -> ToolResult:
        return ToolResult([text("cached")])

    async def deny_second(view: Execution) -> Any:
        view.defer_context({"source": "pre"})
        return Deny("no") if view.call_id == "denied" else Allow()

    h.pre(deny_second)
    h.registry.add_around(short)
    short_circuit = await h.call("t", call_id="short")
    denied = await h.call("t", call_id="denied")
    assert not body.started
    assert short_circuit.json == ok("cached", contexts=[{"source": "pre"}])
    assert denied.json == expected("Error: no")  # deferrals count only if the call reaches C3


@pytest.mark.rules("R29", "R7")
async def test_deferred_contexts_are_lost_on_post_block() -> None:
    h = Harness()
    h.body("t", defer=[{"source": "body"}])

    async def post(view: Execution, result: ToolResult) -> Block:
        return Block([text("Error: no")], contexts=[{"source": "block"}])

    h.post(post)
    call = await h.call("t")
    assert call.json == expected("Error: no", contexts=[{"source": "block"}])


@pytest.mark.rules("R29", "R16")
async def test_deferred_contexts_are_lost_on_an_around_throw() -> None:
    h = Harness()
    h.body("t", defer=[{"source": "body"}])

    async def around(view: Execution, next_: Next) -> ToolResult:
        await next_()
        raise RuntimeError("wrapper failed")

    h.registry.add_around(around)
    assert (await h.call("t")).json == expected("Error: wrapper failed")


@pytest.mark.rules("R29", "R20")
async def test_deferred_contexts_are_lost_on_a_post_throw() -> None:
    h = Harness()
    h.body("t", defer=[{"source": "body"}])

    async def post(view: Execution, result: ToolResult) -> Accept:
        raise RuntimeError("post failed")

    h.post(post)
    assert (await h.call("t")).json == expected("Error: post failed")


@pytest.mark.rules("R29", "R30")
async def test_deferred_contexts_are_lost_on_a_serialization_failure() -> None:
    h = Harness()
    h.body("t", defer=[{"source": "body"}], returns=ToolOutput([text("x")], meta={"f": print}))
    call = await h.call("t")
    assert call.json == expected("Error: tool result must be losslessly JSON-serializable")


@pytest.mark.rules("R29", "R27")
async def test_d4_a_context_deferred_after_c3_is_dropped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness()
    views: list[Execution] = []
    h.body("t", on_start=views.append)

    async def post(view: Execution, result: ToolResult) -> Accept:
        views[0].defer_context({"source": "leaked continuation"})
        return Accept()

    h.post(post)
    with caplog.at_level(logging.WARNING, logger="toolcancel.runtime.registry"):
        call = await h.call("t", call_id="late-1")
    assert call.json == ok()
    assert any(r.levelno == logging.WARNING and "late-1" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------------------------------------
# R30 materialization
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R30")
@pytest.mark.parametrize(
    "output",
    [
        ToolOutput([text("x")], meta={"callback": print}),
        ToolOutput([text("x")], meta=float("inf")),
        [{"type": "text", "text": "x", "when": {1, 2}}],
    ],
    ids=["meta-function", "meta-infinity", "content-set"],
)
async def test_a_result_that_is_not_lossless_json_becomes_the_serialization_error(
    output: Any,
) -> None:
    h = Harness()
    h.body("t", output)
    call = await h.call("t")
    assert call.json == (
        '{"content":[{"text":"Error: tool result must be losslessly JSON-serializable",'
        '"type":"text"}],"isError":true}'
    )
    step = call.path[-1]
    assert (step.event, step.outcome) == ("publish", "serialization_error")


@pytest.mark.rules("R30", "R39")
async def test_d15_a_cancelled_success_with_a_bad_context_is_the_serialization_error() -> None:
    h = Harness()
    gate = Gate()
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    h.body("t", gate=gate, defer=[cyclic])
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    call = await task
    assert call.json == expected("Error: tool result must be losslessly JSON-serializable")
    assert "aborted" in call.outcomes()


@pytest.mark.rules("R30", "R31")
async def test_materialization_happens_once_before_any_observer() -> None:
    """Observers and the caller hold one snapshot; the body's own list is not it."""
    h = Harness()
    returned = [text("x")]
    h.body("t", returned)
    call = await h.call("t")
    returned.append(text("appended later"))
    assert call.json == ok("x")
    assert call.result.content is not returned


# ------------------------------------------------------------------------------------------------
# R31 exactly-once notification
# ------------------------------------------------------------------------------------------------


async def _route_args_error(h: Harness) -> Any:
    return await h.call("t", {"bad": float("nan")})


async def _route_pre_error(h: Harness) -> Any:
    async def boom(view: Execution) -> Any:
        raise RuntimeError("pre")

    h.pre(boom)
    return await h.call("t")


async def _route_denial(h: Harness) -> Any:
    async def deny(view: Execution) -> Deny:
        return Deny("no")

    h.pre(deny)
    return await h.call("t")


async def _route_around_error(h: Harness) -> Any:
    async def around(view: Execution, next_: Next) -> ToolResult:
        raise RuntimeError("around")

    h.registry.add_around(around)
    return await h.call("t")


async def _route_success(h: Harness) -> Any:
    return await h.call("t")


async def _route_aborted(h: Harness) -> Any:
    c, signal = controller()

    async def pre(view: Execution) -> Allow:
        c.abort()
        return Allow()

    h.pre(pre)
    return await h.call("t", signal=signal)


async def _route_pre_aborted(h: Harness) -> Any:
    c, signal = controller()
    c.abort()
    return await h.call("t", signal=signal)


ROUTES = {
    "args-error": _route_args_error,
    "pre-error": _route_pre_error,
    "denial": _route_denial,
    "around-error": _route_around_error,
    "success": _route_success,
    "aborted": _route_aborted,
    "pre-aborted": _route_pre_aborted,
}


@pytest.mark.rules("R31")
@pytest.mark.parametrize("route", list(ROUTES))
async def test_every_route_notifies_exactly_once_with_the_returned_object(route: str) -> None:
    h = Harness()
    h.body("t")
    second: list[tuple[Execution, ToolResult]] = []
    h.registry.add_observer(lambda view, result: second.append((view, result)))
    call = await ROUTES[route](h)  # Harness.call checks the first observer: once, same object
    assert len(h.notified) == 1
    assert len(second) == 1
    assert second[0][0] is call.view and second[0][1] is call.result
    assert call.path[-1].dest == "materialized"


@pytest.mark.rules("R31")
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_failing_observer_is_contained_and_logged(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    h = Harness()
    h.body("t")
    reached: list[str] = []

    def sync_failure(view: Execution, result: ToolResult) -> None:
        reached.append("failing")
        raise RuntimeError("observer bug")

    async def async_failure(view: Execution, result: ToolResult) -> None:
        reached.append("failing")
        raise RuntimeError("observer bug")

    h.registry.add_observer(sync_failure if kind == "sync" else async_failure)
    h.registry.add_observer(lambda view, result: reached.append("after"))
    with caplog.at_level(logging.ERROR, logger="toolcancel.runtime.registry"):
        call = await h.call("t", call_id="obs-1")
    assert call.json == ok()
    assert reached == ["failing", "after"]
    assert len(h.notified) == 1
    [record] = [r for r in caplog.records if r.name == "toolcancel.runtime.registry"]
    assert "obs-1" in record.getMessage()
    assert record.exc_info is not None and str(record.exc_info[1]) == "observer bug"


@pytest.mark.rules("R31", "R23")
async def test_the_view_is_frozen_before_the_first_observer_runs() -> None:
    h = Harness()
    h.body("t")
    outcome: list[str] = []

    def first(view: Execution, result: ToolResult) -> None:
        try:
            view.signal = AbortController().signal
            outcome.append("changed")
        except RegistryUsageError:
            outcome.append("refused")

    # Registered before the harness' own observer would not matter: every observer sees a frozen
    # view, because the freeze happens before notification starts.
    h.registry.add_observer(first)
    await h.call("t")
    assert outcome == ["refused"]


# ------------------------------------------------------------------------------------------------
# Listener hygiene: many calls, random cancellation points, nothing left listening
# ------------------------------------------------------------------------------------------------

POINTS = (
    "never",
    "entry",
    "pre",
    "approval",
    "around-before",
    "body",
    "around-after",
    "post",
    "observer",
)


def _hygiene_registry(plans: dict[str, tuple[str, AbortController, AbortSignal | None]]) -> Harness:
    """A registry whose hooks abort the caller at the point each call's plan names."""
    h = Harness()

    def maybe(view: Execution, point: str) -> None:
        where, c, _ = plans[view.call_id]
        if where == point:
            c.abort(f"abort at {point}")

    async def pre(view: Execution) -> Any:
        await yield_to_others()
        maybe(view, "pre")
        return Ask() if view.agent is not None else Allow()

    async def seam(request: ApprovalRequest) -> Approval:
        await yield_to_others()
        where, c, _ = plans[request.call_id]
        if where == "approval":
            c.abort("abort at approval")
        return Approval.APPROVED

    async def around(view: Execution, next_: Next) -> ToolResult:
        _, _, w = plans[view.call_id]
        upstream = view.signal
        if w is not None:
            view.signal = w
        await yield_to_others()
        maybe(view, "around-before")
        try:
            result: ToolResult = await next_()
        finally:
            view.signal = upstream
        await yield_to_others()
        maybe(view, "around-after")
        return result

    async def body(arguments: Any, view: Execution) -> Any:
        maybe(view, "body")
        await yield_to_others()
        return [text("ok")]

    async def post(view: Execution, result: ToolResult) -> Accept:
        await yield_to_others()
        maybe(view, "post")
        return Accept()

    def observer(view: Execution, result: ToolResult) -> None:
        maybe(view, "observer")

    h.pre(pre)
    h.registry.set_approval(seam)
    h.registry.add_around(around)
    h.registry.register("t", body)
    h.post(post)
    h.registry.add_observer(observer)
    return h


@pytest.mark.rules("R22", "R27", "R28", "R31")
async def test_a_thousand_randomly_cancelled_calls_leave_no_listener_on_any_signal() -> None:
    rng = random.Random(20260719)
    plans: dict[str, tuple[str, AbortController, AbortSignal | None]] = {}
    h = _hygiene_registry(plans)
    tasks = []
    wrapper_signals: list[AbortSignal] = []
    for i in range(1000):
        call_id = f"c{i}"
        where = rng.choice(POINTS)
        c = AbortController()
        if where == "entry":
            c.abort("pre-aborted")
        w: AbortSignal | None = None
        if rng.random() < 0.5:
            w = AbortController().signal
            wrapper_signals.append(w)
        plans[call_id] = (where, c, w)
        agent = "a1" if where == "approval" or rng.random() < 0.3 else None
        tasks.append(h.start("t", signal=c.signal, call_id=call_id, agent=agent))
    calls = [await task for task in tasks]

    callers = [plan[1].signal for plan in plans.values()]
    assert [s.listener_count for s in callers] == [0] * len(callers)
    assert [s.dependent_count for s in callers] == [0] * len(callers)
    assert [w.listener_count for w in wrapper_signals] == [0] * len(wrapper_signals)
    assert len(h.notified) == 1000
    by_id = {call.view.call_id: call for call in calls}
    for call_id, (where, _, _) in plans.items():
        want = ok() if where in ("never", "entry", "observer") else aborted()
        assert by_id[call_id].json == want, (call_id, where)
