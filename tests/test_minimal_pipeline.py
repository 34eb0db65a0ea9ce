"""The benchmark's minimal pipeline (bench/minimal.py) keeps the guarantees it is measured for.

Why these tests: ``bench/run.py`` prints the registry's per-call cost as a ratio to this
pipeline, "the least plain Python that keeps the same guarantees"; a baseline that quietly
dropped one (raced a body, published a late success, let a task cancellation reach user code)
would flatter that ratio.  Gates and events only, no clock.
"""

from __future__ import annotations

import asyncio
import runpy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from toolcancel import AbortController

MINIMAL = Path(__file__).resolve().parents[1] / "bench" / "minimal.py"


@pytest.fixture(scope="module")
def minimal() -> Any:
    return SimpleNamespace(**runpy.run_path(str(MINIMAL)))


def test_a_success_is_frozen_and_published_once(minimal: Any) -> None:
    pipe, seen = minimal.Pipeline(), []

    async def body(args: Any, view: Any) -> Any:
        return [{"type": "text", "text": args["q"]}]

    pipe.register("t", body)
    pipe.observers.append(lambda view, result: seen.append(result))
    result = asyncio.run(pipe.execute("t", {"q": "ok"}, signal=AbortController().signal))
    assert result.error is None and result.content[0]["text"] == "ok"
    assert seen == [result]
    with pytest.raises(TypeError):
        result.content[0]["text"] = "changed"  # type: ignore[index]


def test_no_body_after_an_abort_during_pre_execute(minimal: Any) -> None:
    pipe, started = minimal.Pipeline(), []
    caller = AbortController()

    async def pre(view: Any, nxt: Any) -> Any:
        caller.abort("stop")
        return await nxt()

    async def body(args: Any, view: Any) -> Any:
        started.append(True)
        return []

    pipe.register("t", body)
    pipe.pre.append(pre)
    result = asyncio.run(pipe.execute("t", {}, signal=caller.signal))
    assert (result.error, started) == ("ABORTED", [])


def test_a_wrapper_cannot_detach_the_caller_and_a_late_success_is_aborted(minimal: Any) -> None:
    pipe = minimal.Pipeline()
    caller = AbortController()
    told: list[bool] = []

    async def around(view: Any, nxt: Any) -> Any:
        view.signal = AbortController().signal  # a wrapper's own signal replaces C in the slot
        return await nxt()

    async def body(args: Any, view: Any) -> Any:
        caller.abort("stop")
        told.append(view.signal.aborted)  # the fused signal followed C
        return [{"type": "text", "text": "late"}]

    pipe.register("t", body)
    pipe.around.append(around)
    result = asyncio.run(pipe.execute("t", {}, signal=caller.signal))
    assert (result.error, told) == ("ABORTED", [True])


def test_cancelling_the_awaiting_task_aborts_the_call_which_runs_to_its_result(
    minimal: Any,
) -> None:
    pipe, seen = minimal.Pipeline(), []
    started, release = asyncio.Event(), asyncio.Event()
    body_saw: list[bool] = []

    async def body(args: Any, view: Any) -> Any:
        started.set()
        await release.wait()  # ignores its signal: must still be awaited
        body_saw.append(view.signal.aborted)
        return []

    pipe.register("t", body)
    pipe.observers.append(lambda view, result: seen.append(result.error))

    async def main() -> None:
        task = asyncio.create_task(pipe.execute("t", {}, signal=AbortController().signal))
        await started.wait()
        task.cancel()
        await asyncio.sleep(0)
        assert not task.done() and seen == []  # not raced: the body still runs
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert (body_saw, seen) == ([True], ["ABORTED"])
