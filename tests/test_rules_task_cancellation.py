"""Giving up on a call by cancelling its task is the caller aborting (Python binding P1, P2).

Each case runs the same call twice, stopped at the same wait: once by aborting the caller's
signal, once by cancelling the task awaiting ``execute()`` (a call made without ``signal=``,
whose caller signal is its own) -- ``task.cancel()`` on asyncio (``task``; on trio, which has
no such call, a cancel scope), or an anyio cancel scope around the call (``scope``, on asyncio
too).  Both must publish the same result through the same path of the machine: the rule suites
then hold for task cancellation too.  A registry whose task cancellation does nothing publishes
a success here (or starts a body the caller gave up on) and fails every case.
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest
from support import Gate, controller, spawn, until_idle
from toolcancel import Accept, Allow, Execution, ToolRegistry, ToolResult

WAITS = ("pre", "wrapper_before", "body", "wrapper_after", "post")
"""Every point before publication where a call waits on user code."""


def _registry(stop_at: str) -> tuple[ToolRegistry, Gate, list[ToolResult], list[Execution]]:
    reg, gate = ToolRegistry(), Gate(stop_at)
    published: list[ToolResult] = []
    views: list[Execution] = []

    async def wait(where: str) -> None:
        if where == stop_at:
            await gate.passage()  # uncooperative: only the gate ends the wait

    async def pre(view: Execution, nxt: Any) -> Any:
        await wait("pre")
        return Allow()

    async def wrapper(view: Execution, nxt: Any) -> ToolResult:
        await wait("wrapper_before")
        result: ToolResult = await nxt()
        await wait("wrapper_after")
        return result

    async def body(args: Any, view: Execution) -> Any:
        await wait("body")
        return [{"type": "text", "text": "done"}]

    async def post(view: Execution, result: ToolResult, nxt: Any) -> Any:
        await wait("post")
        return Accept()

    def observe(view: Execution, result: ToolResult) -> None:
        published.append(result)
        views.append(view)

    reg.add_pre_execute(pre)
    reg.add_around(wrapper)
    reg.register("t", body)
    reg.add_post_execute(post)
    reg.add_observer(observe)
    return reg, gate, published, views


async def _stopped(where: str, by: str) -> tuple[str, list[str]]:
    """The published result and the path's events of a call stopped at ``where`` ``by`` the
    caller's signal, by cancelling its task, or by cancelling a scope around it."""
    reg, gate, published, views = _registry(where)
    if by == "signal":
        caller, signal = controller()
        task: Any = spawn(reg.execute("t", signal=signal))
        await gate.reached()
        caller.abort()
    elif by == "task" and _on_asyncio():
        task = asyncio.ensure_future(reg.execute("t"))
        await gate.reached()
        task.cancel()
    else:
        scope = anyio.CancelScope()

        async def in_scope() -> None:
            with scope:
                await reg.execute("t")

        task = spawn(in_scope())
        await gate.reached()
        scope.cancel()
    await until_idle()
    assert published == [], f"published while a {where} wait still ran"
    gate.open()
    try:
        await task
    except asyncio.CancelledError:
        assert by == "task"
    [result], [view] = published, views
    return result.to_json(), [step.event for step in view.path]


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@pytest.mark.rules("R13", "R17", "R18", "R19", "R20", "R27", "R28")
@pytest.mark.parametrize("by", ("task", "scope"))
@pytest.mark.parametrize("where", WAITS)
async def test_cancelling_the_task_is_the_caller_aborting(where: str, by: str) -> None:
    by_signal = await _stopped(where, "signal")
    by_task = await _stopped(where, by)
    assert by_task == by_signal
    assert "caller_abort" in by_task[1] and '"ABORTED"' in by_task[0]
