"""Minimal reproductions of what conform found in AutoGen's ``AssistantAgent``.

    python examples/runtimes/repro_autogen.py                  # every reproduction
    python examples/runtimes/repro_autogen.py tool_exception   # one

Each function below is self-contained (autogen-agentchat, autogen-core, autogen-ext's replay
model client and asyncio only, no toolcancel, no network, no key), prints what the runtime did,
and returns True when the behaviour reproduces; the script exits 1 if one does not (the runtime
changed: regenerate docs/REAL-WORLD.md).  Paste one into an issue as it is.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import ToolCallExecutionEvent
from autogen_core import CancellationToken, FunctionCall
from autogen_core.models import CreateResult, ModelInfo, RequestUsage
from autogen_core.tools import FunctionTool
from autogen_ext.models.replay import ReplayChatCompletionClient

MODEL = ModelInfo(
    vision=False, function_calling=True, json_output=False, family="unknown",
    structured_output=False,
)  # fmt: skip


def agent_calling(tool: Callable[..., Any], name: str = "") -> AssistantAgent:
    """An agent whose replayed model turn calls ``tool`` (or ``name``) once."""
    turn = CreateResult(
        finish_reason="function_calls",
        content=[FunctionCall(id="c1", name=name or tool.__name__, arguments="{}")],
        usage=RequestUsage(prompt_tokens=0, completion_tokens=0),
        cached=False,
    )
    client = ReplayChatCompletionClient([turn], model_info=MODEL)
    return AssistantAgent("agent", model_client=client, tools=[FunctionTool(tool, "a tool")])


def results(run: Any) -> list[tuple[str, bool | None]]:
    """What the run recorded for the call: (content, is_error)."""
    return [
        (r.content, r.is_error)
        for m in run.messages
        if isinstance(m, ToolCallExecutionEvent)
        for r in m.content
    ]


async def task_cancel_detaches_tool() -> bool:
    """R27 [cancel=gate:body]: cancelling the task awaiting ``AssistantAgent.run`` while its tool
    runs makes ``run`` raise ``CancelledError`` at once, and the tool is not told: its task is not
    cancelled, its token stays live, and it runs on, detached, its result dropped.  The tool calls
    run in a task of their own (``asyncio.create_task`` in ``on_messages_stream``), which
    cancelling ``run`` does not cancel.

    Kind: runtime -- ``on_messages_stream`` runs the tool calls in a task of their own that
    cancelling ``run`` does not cancel or await: the caller's cancellation leaves a live tool
    behind, where bare asyncio, awaiting its tool, waits for it. Control:
    ``bare_await_waits_for_the_tool``."""
    started, release = asyncio.Event(), asyncio.Event()
    events: list[str] = []

    async def write_file(cancellation_token: CancellationToken) -> str:
        started.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            events.append("tool: cancelled")
            raise
        events.append(f"tool: done, its token cancelled: {cancellation_token.is_cancelled()}")
        return "written"

    run = asyncio.ensure_future(agent_calling(write_file).run(task="write"))
    await started.wait()
    run.cancel()
    try:
        await run
    except asyncio.CancelledError:
        events.append("run raised CancelledError while the tool runs")
    release.set()
    for _ in range(10):
        await asyncio.sleep(0)
    print(" -> ".join(events))
    return events == [
        "run raised CancelledError while the tool runs",
        "tool: done, its token cancelled: False",
    ]


async def token_cancel_hangs() -> bool:
    """R31: cancelling the run's ``CancellationToken`` -- before the run, or while a tool that
    stops when told runs -- leaves ``run`` waiting forever: the tool's future is cancelled, the
    ``CancelledError`` is not an ``Exception`` the workbench turns into a result, the task that
    runs the tool calls dies with it before it ends the event stream, and ``run`` waits on that
    stream.  The call gets no result and the caller no answer (bounded here by a timeout).

    Kind: runtime -- AutoGen's own cancellation API, used as documented, leaves ``run`` waiting
    forever: nothing ends the event stream once the tool's future is cancelled."""
    events: list[str] = []

    async def one(when: str) -> None:
        started, release = asyncio.Event(), asyncio.Event()

        async def lookup(cancellation_token: CancellationToken) -> str:
            started.set()
            await release.wait()  # interrupted when the token is cancelled
            return "found"

        token = CancellationToken()
        if when == "before the run":
            token.cancel()
        run = asyncio.ensure_future(agent_calling(lookup).run(task="go", cancellation_token=token))
        if when == "while the tool runs":
            await started.wait()
            token.cancel()
        await asyncio.wait({run}, timeout=0.5)
        events.append(f"{when}: run still waiting after 0.5 s: {not run.done()}")
        run.cancel()

    for when in ("before the run", "while the tool runs"):
        await one(when)
    print(" -> ".join(events))
    return events == [
        "before the run: run still waiting after 0.5 s: True",
        "while the tool runs: run still waiting after 0.5 s: True",
    ]


async def token_cancel_late_success() -> bool:
    """R28 [cooperative=false, body=success]: cancelling the run's ``CancellationToken`` while its
    tool finishes work that cannot stop half-way waits for the tool -- right -- and then records
    the tool's late success as the call's result (``is_error=False``): the run the caller cancelled
    hands its model a success.

    Kind: runtime -- the run the caller cancelled through its own ``CancellationToken`` records
    the tool's late success as the call's result, ``is_error=False``, and hands it to its
    model."""
    started, release = asyncio.Event(), asyncio.Event()

    async def write_file(cancellation_token: CancellationToken) -> str:
        started.set()
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue  # the write cannot stop half-way: finish it first
        return "written"

    token = CancellationToken()
    run = asyncio.ensure_future(agent_calling(write_file).run(task="go", cancellation_token=token))
    await started.wait()
    token.cancel()
    for _ in range(10):
        await asyncio.sleep(0)
    waited = not run.done()
    release.set()
    got = results(await run)
    print(f"run waited for the tool: {waited}; the call's result: {got}")
    return waited and got == [("written", False)]


async def tool_exception() -> bool:
    """R18/R3: a tool that raises is answered with the exception's message alone
    (``is_error=True``), without the contract's ``Error: `` prefix -- a text-only difference.

    Kind: runtime -- AutoGen answers a failing tool with the exception's message as
    ``is_error=True`` content: the same behaviour as the contract's, other words."""

    async def save() -> str:
        raise RuntimeError("disk full")

    got = results(await agent_calling(save).run(task="save"))
    print(f"the call's result: {got}")
    return got == [("disk full", True)]


async def unknown_tool() -> bool:
    """R6 [tool_known=false]: a call to a tool the agent does not have is answered with an error
    result (right) in AutoGen's own words and without a code: a text-only difference.

    Kind: runtime -- an error result in AutoGen's words, without a code: the same behaviour as
    the contract's, other words."""

    async def save() -> str:
        return "saved"

    got = results(await agent_calling(save, name="no_such_tool").run(task="go"))
    print(f"the call's result: {got}")
    return got == [("Error: tool 'no_such_tool' not found in any workbench", True)]


REPRODUCTIONS = {
    f.__name__: f
    for f in (
        task_cancel_detaches_tool,
        token_cancel_hangs,
        token_cancel_late_success,
        tool_exception,
        unknown_tool,
    )
}


if __name__ == "__main__":
    from toolcancel.runtimes import reproduce  # only the runner: each pastes without it

    sys.exit(reproduce(REPRODUCTIONS))
