"""Quiescence under anyio's cancel scopes, on asyncio and on trio (conftest.py runs both).

Under a cancel scope, cancellation is not one exception thrown once: every checkpoint inside a
cancelled scope raises again (anyio on asyncio re-delivers it on every turn of the loop).  The
registry must still turn it into the caller aborting once, keep awaiting the body however long
it runs (R27), publish its one result (R31) and only then let the cancellation out.  Each test
parks a body (or a hook) at a gate, cancels the scope around ``execute()`` in the way anyio
offers, and checks that the call settled only when the test opened the gate.
"""

from __future__ import annotations

import json

import anyio
import pytest
from support import Gate, Harness, aborted, controller, ok, spawn, until_idle
from toolcancel import Allow, Execution, ToolCallRequest, TurnLog, TurnScheduler
from toolcancel.contract.results import canonical_json
from toolcancel.runtime.cooperate import aborted as signal_aborted


async def _open_later(gate: Gate, log: list[str], after: float = 10) -> None:
    """Open ``gate`` ``after`` virtual seconds once the body waits there (past the tests'
    deadlines: the scope has been cancelled, and re-delivered, meanwhile)."""
    await gate.reached()
    await anyio.sleep(after)
    log.append("gate opened")
    gate.open()


@pytest.mark.rules("R27")
async def test_move_on_after_waits_for_an_uncooperative_body() -> None:
    h = Harness()
    gate = Gate()
    body = h.body("t", gate=gate)
    _, signal = controller()
    log: list[str] = []
    opener = spawn(_open_later(gate, log))
    with anyio.move_on_after(5) as scope:
        await h.call("t", signal=signal)
        log.append("returned")
    log.append("scope left")
    await opener
    assert scope.cancelled_caught
    assert log == ["gate opened", "scope left"]
    assert body.finished == 1
    [note] = h.notified
    assert note.result.to_json() == aborted()
    assert body.signal is not None and body.signal.aborted
    assert h.registry.in_flight() == []


@pytest.mark.rules("R27")
async def test_fail_after_drains_a_cooperative_body_then_raises_timeout() -> None:
    h = Harness()
    stopped: list[object] = []

    async def polite(arguments: object, view: Execution) -> list[dict[str, str]]:
        stopped.append(await signal_aborted(view))
        await anyio.sleep(3)  # virtual time: cleaning up after the abort
        stopped.append("cleaned up")
        return [{"type": "text", "text": "late"}]

    h.registry.register("t", polite)
    _, signal = controller()
    with pytest.raises(TimeoutError):
        with anyio.fail_after(2):
            await h.call("t", signal=signal)
    assert len(stopped) == 2 and stopped[1] == "cleaned up"
    [note] = h.notified
    assert note.result.to_json() == aborted()
    assert h.registry.in_flight() == []


@pytest.mark.rules("R13", "R27")
async def test_cancel_scope_cancelled_before_dispatch_starts_no_body() -> None:
    h = Harness()
    gate = Gate()
    body = h.body("t")

    async def held(view: Execution) -> Allow:
        await gate.passage()
        return Allow()

    h.pre(held)
    _, signal = controller()
    with anyio.CancelScope() as scope:
        task = spawn(_cancel_when_reached(gate, scope))
        await h.call("t", signal=signal)
    await task
    assert scope.cancelled_caught
    assert body.calls == 0
    [note] = h.notified
    assert note.result.to_json() == aborted()


async def _cancel_when_reached(gate: Gate, scope: anyio.CancelScope) -> None:
    await gate.reached()
    scope.cancel()
    await until_idle()
    gate.open()


@pytest.mark.rules("R27")
async def test_a_failing_sibling_in_a_task_group_waits_for_the_call_to_settle() -> None:
    h = Harness()
    gate = Gate()
    body = h.body("t", gate=gate)
    _, signal = controller()
    log: list[str] = []

    async def failing_sibling() -> None:
        await gate.reached()
        raise LookupError("sibling failed")

    async def call() -> None:
        await h.call("t", signal=signal)
        log.append("returned")

    opener = spawn(_open_later(gate, log))
    with pytest.raises(BaseExceptionGroup) as caught:
        async with anyio.create_task_group() as group:
            group.start_soon(call)
            group.start_soon(failing_sibling)
    await opener
    assert caught.group_contains(LookupError)
    assert log == ["gate opened"]
    assert body.finished == 1
    [note] = h.notified
    assert note.result.to_json() == aborted()


@pytest.mark.rules("R27")
async def test_a_body_s_own_cancel_scope_still_works_under_an_outer_scope() -> None:
    h = Harness()

    async def bounded(arguments: object, view: Execution) -> list[dict[str, str]]:
        with anyio.move_on_after(1) as own:
            await anyio.sleep_forever()
        return [{"type": "text", "text": "own deadline" if own.cancelled_caught else "?"}]

    h.registry.register("t", bounded)
    _, signal = controller()
    with anyio.move_on_after(100):
        call = await h.call("t", signal=signal)
    assert call.json == ok("own deadline")


@pytest.mark.rules("R36", "R27")
async def test_a_turn_in_a_cancelled_scope_drains_its_started_calls_and_skips_the_rest() -> None:
    h = Harness()
    gate = Gate()
    body = h.body("t", gate=gate)
    calls = [ToolCallRequest(f"c{i}", "t", exclusive=True) for i in range(2)]
    log: list[str] = []
    turn = TurnLog()
    opener = spawn(_open_later(gate, log))
    with anyio.move_on_after(5) as scope:
        await TurnScheduler(h.registry).run_turn(calls, signal=controller()[1], log=turn)
        log.append("returned")
    await opener
    assert scope.cancelled_caught and log == ["gate opened"]
    assert body.calls == 1 and body.finished == 1  # c0 drained; c1 never prepared
    results = [(e.call_id, e.payload) for e in turn if e.kind == "tool/result"]
    assert [call_id for call_id, _ in results] == ["c0", "c1"]
    assert json.loads(canonical_json(results[0][1])) == json.loads(aborted())
    assert "skipped" in canonical_json(results[1][1])
