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

import anyio
from pydantic_ai import Agent, CancellationToken, ToolReturn, capture_run_messages
from pydantic_ai.capabilities import Hooks
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
    re-run it).

    Kind: design -- ``RunCancelled``: "Raised when the agent run was cancelled by the
    application itself. [...] This is a normal, catchable application-level outcome: the run
    stopped because your own code asked it to." (pydantic_ai/exceptions.py): a cancelled run is
    answered with a raise, not with a result for the call."""
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


async def unserializable_metadata() -> bool:
    """R30/R31 [body=bad_meta]: a tool's ``ToolReturn`` metadata that is not JSON is kept as it
    is in the recorded result.

    Kind: design -- ``ToolReturn.metadata: Any``, "Additional data that can be accessed
    programmatically by the application but is not sent to the LLM." (pydantic_ai/messages.py):
    any Python value, serialized only if the application serializes the history."""
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
    call.

    Kind: design -- a tool reports a failure to the model by raising ``ModelRetry`` or
    ``ToolFailed`` ("Raise this when a tool call is done and has failed [...] and you want the
    model to see the failure and adapt", pydantic_ai/exceptions.py); any other exception is the
    application's and ends the run."""
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
    """R11: arguments that are not losslessly JSON (a set) reach the tool.

    Kind: runtime -- a ``ToolCallPart``'s ``args`` may be a dict, validated against the tool's
    signature (``q: Any`` takes anything); nothing checks that it is JSON, which a model's tool
    call always is, so only a program (a ``FunctionModel``, a replayed history) can send one."""
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
    """R6: an unknown tool is a retry prompt with pydantic-ai's own text, no error code.

    Kind: design -- ``_UnknownTool(ModelRetry)``: "A ``ModelRetry`` refusing a call to a tool
    name that doesn't exist. [...] it reaches the model as an ordinary retry"
    (pydantic_ai/tool_manager.py): the model is asked to correct the call."""
    agent = Agent(calls("no_such_tool", {}))
    with capture_run_messages() as history:
        await agent.run("go")
    parts = returned(history)
    print(f"recorded for the call: {[(type(p).__name__, p.content) for p in parts]}")
    return len(parts) == 1 and "Unknown tool name: 'no_such_tool'" in str(parts[0].content)


async def unknown_tool_skips_the_hook() -> bool:
    """R16/R19 [tool_known=false]: a ``tool_execute`` hook never runs for a tool name the agent
    does not have: the model gets the unknown-tool retry prompt whatever the hook would do.

    Kind: design -- the hook wraps a tool's execution and is handed its ``ToolDefinition``
    (``wrap_tool_execute(ctx, *, call, tool_def, args, handler)``, "Wrap the complete
    tool-execution lifecycle", pydantic_ai/capabilities/abstract.py); a name without one is
    refused before that lifecycle starts (``raise _UnknownTool(...)``,
    pydantic_ai/tool_manager.py)."""
    ran: list[str] = []

    async def hook(ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:
        ran.append(call.tool_name)
        raise RuntimeError("the hook failed")

    agent = Agent(calls("no_such_tool", {}), capabilities=[Hooks(tool_execute=hook)])

    @agent.tool_plain
    async def known() -> str:
        return "done"

    with capture_run_messages() as history:
        await agent.run("go")
    parts = returned(history)
    print(f"the hook ran for {ran}; recorded for the call: {[p.content for p in parts]}")
    return ran == [] and len(parts) == 1 and "Unknown tool name" in str(parts[0].content)


async def tool_timeout_is_a_retry_prompt() -> bool:
    """R34/R16/R17/R18/R19 [timeout=timer_first, cooperative=true]: a tool past its ``timeout``
    is answered with pydantic-ai's own text for the model, "Timed out after 0.01 seconds." (no
    error code), and a ``tool_execute`` hook around the tool gets that timeout from its handler
    as an exception (``ToolRetryError``), not as a result: what a wrapper does with the tool's
    result -- fail after it, call it again -- never happens.

    Kind: design -- ``Tool(timeout=...)``: "Timeout in seconds for tool execution. If the tool
    takes longer, a retry prompt is returned to the model." (pydantic_ai/tools.py): a timeout is
    a retry prompt raised through the hooks, not a timeout result of the call."""
    seen: list[str] = []

    async def tool_execute(ctx: Any, *, call: Any, tool_def: Any, args: Any, handler: Any) -> Any:
        try:
            return await handler(args)
        except Exception as exc:
            seen.append(f"hook: the handler raised {type(exc).__name__}: {exc}")
            raise

    agent = Agent(calls("slow", {}), capabilities=[Hooks(tool_execute=tool_execute)])

    @agent.tool_plain(timeout=0.01)
    async def slow() -> str:
        await asyncio.sleep(10)
        return "done"

    with capture_run_messages() as history:
        await agent.run("go")
    parts = returned(history)
    print(f"{seen}; the model got {[p.content for p in parts]}")
    return seen == ["hook: the handler raised ToolRetryError: Timed out after 0.01 seconds."] and [
        p.content for p in parts
    ] == ["Timed out after 0.01 seconds."]


async def late_success_past_timeout() -> bool:
    """R34/R17 [timeout=timer_first, cooperative=false]: a tool that outlasts its ``timeout``,
    finishing work that cannot stop half-way, has its late result returned as the tool's
    success: the timeout is not reported, and a hook around the tool sees a success and goes on.

    Kind: inherited -- ``anyio.fail_after``, like a bare ``asyncio.timeout()``, raises only for
    the cancellation it caused; a body that swallowed it and returned leaves the block without
    ``TimeoutError``. Control: ``bare_timeout_keeps_a_late_result``."""
    agent = Agent(calls("write_file", {}))
    outlasted: list[bool] = []

    @agent.tool_plain(timeout=0.01)
    async def write_file() -> str:
        deadline = anyio.current_effective_deadline()  # the tool's timeout
        with anyio.CancelScope(shield=True):  # the write cannot stop half-way
            await asyncio.sleep(0.05)
            outlasted.append(anyio.current_time() > deadline)
        return "written"

    with capture_run_messages() as history:
        await agent.run("go")
    parts = returned(history)
    print(f"the tool outlasted its timeout: {outlasted}; the model got "
          f"{[(type(p).__name__, p.content) for p in parts]}")  # fmt: skip
    return outlasted == [True] and [(type(p), p.content) for p in parts] == [
        (ToolReturnPart, "written")
    ]


REPRODUCTIONS = {
    f.__name__: f
    for f in (
        token_cancelled_run,
        unserializable_metadata,
        tool_exception,
        lossy_arguments,
        unknown_tool,
        unknown_tool_skips_the_hook,
        tool_timeout_is_a_retry_prompt,
        late_success_past_timeout,
    )
}


if __name__ == "__main__":
    from toolcancel.runtimes import reproduce  # only the runner: each pastes without it

    sys.exit(reproduce(REPRODUCTIONS))
