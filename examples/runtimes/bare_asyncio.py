"""Bare-asyncio controls: a runtime's tool body and cancellation with no runtime at all.

    python examples/runtimes/bare_asyncio.py          # every control

A finding classified ``inherited`` (docs/REAL-WORLD.md) names one of these (``Control:``), and
one that a runtime does *not* share shows that the behaviour is the runtime's own: what asyncio
does with the same body, written once for every runtime it is set beside.  Each prints what
happened and returns True when asyncio behaves as its docstring says; the script exits 1 if one
does not.
"""

from __future__ import annotations

import asyncio
import sys


async def bare_await_waits_for_the_tool() -> bool:
    """Control: the same tool body with no agent runtime: a task awaiting the tool's own task is
    cancelled while the tool finishes a write that cannot stop half-way -- the await hands the
    cancel on to the tool and waits for it, so bare asyncio is quiescent (and the write's
    result reaches the awaiting task)."""
    started, release = asyncio.Event(), asyncio.Event()
    events: list[str] = []

    async def write_file() -> str:
        started.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            await release.wait()  # the write cannot stop half-way: finish it first
            events.append("tool: the write is done")
        return "written"

    async def run() -> str:
        return await asyncio.ensure_future(write_file())

    outer = asyncio.ensure_future(run())
    await started.wait()
    outer.cancel()
    for _ in range(10):
        await asyncio.sleep(0)
    events.append(f"run done before the write: {outer.done()}")
    release.set()
    try:
        events.append(f"run returned {await outer!r}")
    except asyncio.CancelledError:
        events.append("run raised CancelledError")
    print(" -> ".join(events))
    return events[:2] == ["run done before the write: False", "tool: the write is done"]


async def bare_task_late_failure() -> bool:
    """Control: the same body in a bare asyncio task, no LangGraph: cancelled while it finishes
    a write that cannot stop half-way, then failing -- awaiting the task raises the body's
    exception, not ``CancelledError``."""
    started, release = asyncio.Event(), asyncio.Event()

    async def write_file() -> str:
        started.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            await release.wait()  # the write cannot stop half-way: finish it first
        raise RuntimeError("disk full")

    run = asyncio.ensure_future(write_file())
    await started.wait()
    run.cancel()
    await asyncio.sleep(0)
    release.set()
    try:
        await run
    except asyncio.CancelledError:
        print("the task raised CancelledError")
        return False
    except RuntimeError as exc:
        print(f"the cancelled task raised {exc!r}")
        return str(exc) == "disk full"
    return False


async def bare_timeout_keeps_a_late_result() -> bool:
    """Control: the same body under a bare ``asyncio.timeout()``, no runtime: its deadline passes
    while the body finishes a write that cannot stop half-way -- the body swallows the
    timeout's cancellation and returns, and the ``async with`` block ends without
    ``TimeoutError``: the late result comes out as if no deadline had passed (asyncio raises
    ``TimeoutError`` only for the ``CancelledError`` its own cancellation caused)."""
    release = asyncio.Event()
    events: list[str] = []

    async def write_file() -> str:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                events.append("tool: cancelled by the deadline, finishing the write")
                await release.wait()
        return "written"

    async def later() -> None:
        await asyncio.sleep(0.05)
        release.set()

    helper = asyncio.ensure_future(later())
    try:
        async with asyncio.timeout(0.01):
            events.append(f"returned {await write_file()!r}")
    except TimeoutError:
        events.append("raised TimeoutError")
    await helper
    print(" -> ".join(events))
    return events == ["tool: cancelled by the deadline, finishing the write", "returned 'written'"]


CONTROLS = {
    f.__name__: f
    for f in (
        bare_await_waits_for_the_tool,
        bare_task_late_failure,
        bare_timeout_keeps_a_late_result,
    )
}

if __name__ == "__main__":
    from toolcancel.runtimes import reproduce

    sys.exit(reproduce(CONTROLS))
