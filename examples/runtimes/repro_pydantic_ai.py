"""Minimal reproductions of what conform found in pydantic-ai's agent loop.

    python examples/runtimes/repro_pydantic_ai.py                # every reproduction
    python examples/runtimes/repro_pydantic_ai.py tool_exception # one

Each function below is self-contained (pydantic-ai's ``FunctionModel`` and asyncio only, no
toolcancel, no network, no key), prints what the runtime did, and returns True when the behaviour
reproduces; the script exits 1 if one does not (the runtime changed: regenerate
docs/REAL-WORLD.md).  Paste one into an issue as it is.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from pydantic_ai import Agent, CancellationToken, ToolReturn, capture_run_messages
from pydantic_ai.exceptions import RunCancelled
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel


def calls(tool: str, args: dict[str, Any]) -> FunctionModel:
    """A model that calls ``tool`` once, then ends the run with text."""

    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart(tool_name=tool, args=args, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("finished")])

    return FunctionModel(model)


def returned(history: list[ModelMessage]) -> list[ToolReturnPart | RetryPromptPart]:
    """What the run recorded for the tool call, in its message history."""
    return [
        p
        for m in history
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart | RetryPromptPart)
    ]


async def token_cancelled_run() -> bool:
    """R28/R31 [row=pydantic_ai__cancellation_token]: a run whose ``CancellationToken`` is
    cancelled -- before the run, while a tool that stops when told runs, or while a tool finishes
    work that cannot stop half-way -- raises ``RunCancelled``: no tool starts after the cancel, the
    run waits for a running tool (quiescent), and the caller gets no result for the call; a tool's
    late success is kept in ``exc.all_messages()`` (documented: so that a resumed run does not
    re-run it)."""
    events: list[str] = []

    async def one(when: str) -> None:
        started, release = asyncio.Event(), asyncio.Event()
        agent = Agent(calls("write_file", {}))

        @agent.tool_plain
        async def write_file() -> str:
            started.set()
            while not release.is_set():
                try:
                    await release.wait()
                except asyncio.CancelledError:
                    if when == "cooperative tool":
                        raise
            return "written"

        token = CancellationToken()
        if when == "before the run":
            token.cancel()
        run = asyncio.ensure_future(agent.run("go", cancellation_token=token))
        if when != "before the run":
            await started.wait()
            token.cancel()
            if when == "uncooperative tool":
                await asyncio.wait({run}, timeout=0.5)
                events.append(f"{when}: run done before the tool: {run.done()}")
            release.set()
        try:
            await run
            events.append(f"{when}: Agent.run returned")
        except RunCancelled as exc:
            kept = [p.content for p in returned(exc.all_messages())]
            events.append(f"{when}: RunCancelled, tool started: {started.is_set()}, kept: {kept}")

    for when in ("before the run", "cooperative tool", "uncooperative tool"):
        await one(when)
    print(" -> ".join(events))
    return events == [
        "before the run: RunCancelled, tool started: False, kept: []",
        "cooperative tool: RunCancelled, tool started: True, kept: []",
        "uncooperative tool: run done before the tool: False",
        "uncooperative tool: RunCancelled, tool started: True, kept: ['written']",
    ]


async def ignored_cancel_late_success() -> bool:
    """R28 [cancelled=true, cooperative=false, row=pydantic_ai]: a run cancelled while its tool
    finishes work
    that cannot stop half-way (a write) waits for the tool -- the run is quiescent -- and records
    the tool's late success in its history, but ``Agent.run`` raises ``CancelledError``: the
    caller gets no result for the call, the history says it succeeded."""
    started, release = asyncio.Event(), asyncio.Event()
    events: list[str] = []
    agent = Agent(calls("write_file", {}))

    @agent.tool_plain
    async def write_file() -> str:
        started.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            await release.wait()  # the write cannot stop half-way: finish it first
            events.append("tool: the write is done")
        return "written"

    with capture_run_messages() as history:
        run = asyncio.ensure_future(agent.run("go"))
        await started.wait()
        run.cancel()
        await asyncio.wait({run}, timeout=0.5)
        events.append(f"run done before the write: {run.done()}")
        release.set()
        try:
            await run
        except asyncio.CancelledError:
            events.append("Agent.run raised CancelledError")
    recorded = [(type(p).__name__, p.content) for p in returned(history)]
    print(" -> ".join(events) + f"; recorded for the call: {recorded}")
    return events == [
        "run done before the write: False",
        "tool: the write is done",
        "Agent.run raised CancelledError",
    ] and recorded == [("ToolReturnPart", "written")]


async def cancelled_call_unrecorded() -> bool:
    """R4/R31 [cancelled=true, row=pydantic_ai]: a run cancelled while its tool runs records no
    result for the call (the tool is awaited first: the run is quiescent)."""
    started = asyncio.Event()
    finished: list[str] = []
    agent = Agent(calls("slow", {}))

    @agent.tool_plain
    async def slow() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            finished.append("tool settled")
        return "done"

    with capture_run_messages() as history:
        run = asyncio.ensure_future(agent.run("go"))
        await started.wait()
        run.cancel()
        try:
            await run
        except asyncio.CancelledError:
            pass
    print(f"after cancel: {finished}; recorded for the call: {returned(history)}")
    return finished == ["tool settled"] and returned(history) == []


async def unserializable_metadata() -> bool:
    """R30/R31 [body=bad_meta]: a tool's ``ToolReturn`` metadata that is not JSON is kept as it
    is in the recorded result."""
    agent = Agent(calls("with_meta", {}))

    @agent.tool_plain
    async def with_meta() -> ToolReturn:
        return ToolReturn(return_value="done", metadata={"handle": len})

    with capture_run_messages() as history:
        await agent.run("go")
    (part,) = returned(history)
    print(f"recorded metadata: {part.metadata!r}")
    return isinstance(part, ToolReturnPart) and part.metadata == {"handle": len}


async def tool_exception() -> bool:
    """R3/R31: a tool's exception ends the whole run; the model gets no error result for the
    call."""
    agent = Agent(calls("failing", {}))

    @agent.tool_plain
    async def failing() -> str:
        raise RuntimeError("tool failed")

    with capture_run_messages() as history:
        try:
            await agent.run("go")
        except RuntimeError as exc:
            print(f"Agent.run raised {exc!r}; recorded for the call: {returned(history)}")
            return returned(history) == []
    return False


async def lossy_arguments() -> bool:
    """R11: arguments that are not losslessly JSON (a set) reach the tool."""
    seen: list[object] = []
    agent = Agent(calls("echo", {"q": {1}}))

    @agent.tool_plain
    async def echo(q: Any) -> str:
        seen.append(q)
        return "done"

    await agent.run("go")
    print(f"the tool received q={seen[0]!r}")
    return seen == [{1}]


async def unknown_tool() -> bool:
    """R6: an unknown tool is a retry prompt with pydantic-ai's own text, no error code."""
    agent = Agent(calls("no_such_tool", {}))
    with capture_run_messages() as history:
        await agent.run("go")
    parts = returned(history)
    print(f"recorded for the call: {[(type(p).__name__, p.content) for p in parts]}")
    return len(parts) == 1 and "Unknown tool name: 'no_such_tool'" in str(parts[0].content)


REPRODUCTIONS = {
    f.__name__: f
    for f in (
        token_cancelled_run,
        ignored_cancel_late_success,
        cancelled_call_unrecorded,
        unserializable_metadata,
        tool_exception,
        lossy_arguments,
        unknown_tool,
    )
}


def main(names: list[str]) -> int:
    failed = []
    for name in names or list(REPRODUCTIONS):
        print(f"{name}: ", end="", flush=True)
        if not asyncio.run(REPRODUCTIONS[name]()):
            failed.append(name)
    if failed:
        print(f"did not reproduce: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
