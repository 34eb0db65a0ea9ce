"""Minimal reproductions of what conform found in the OpenAI Agents SDK's agent loop.

    python examples/runtimes/repro_openai_agents.py                   # every reproduction
    python examples/runtimes/repro_openai_agents.py ignored_cancel    # one

Each function below is self-contained (the SDK and its own test model ``agents.testing``, asyncio,
no toolcancel, no network, no key), prints what the runtime did, and returns True when the
behaviour reproduces; the script exits 1 if one does not (the runtime changed: regenerate
docs/REAL-WORLD.md).  Paste one into an issue as it is.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Literal

from agents import (
    Agent,
    RunConfig,
    Runner,
    ToolCallOutputItem,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    ToolOutputGuardrailData,
    function_tool,
    tool_input_guardrail,
    tool_output_guardrail,
)
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

NO_TRACES = RunConfig(tracing_disabled=True)


def agent_calling(tool: Any, name: str = "") -> Agent[Any]:
    """An agent whose scripted model calls ``tool`` once, then answers with text."""
    model = ScriptedModel(
        [
            [function_call(name or tool.name, {}, call_id="c1")],
            ModelStep.respond(lambda call: [assistant_message("finished")]),
        ]
    )
    return Agent(name="agent", model=model, tools=[tool])


def write_tool(started: asyncio.Event, release: asyncio.Event, events: list[str]) -> Any:
    """A tool whose work cannot stop half-way (a write): it finishes before it returns."""

    @function_tool
    async def write_file() -> str:
        """Writes."""
        started.set()
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue  # the write cannot stop half-way: finish it first
        events.append("tool: the write is done")
        return "written"

    return write_file


def guarded_lookup(started: asyncio.Event, release: asyncio.Event, ran: list[str]) -> Any:
    """A tool whose input guardrail waits for ``release`` before it allows the call."""

    @tool_input_guardrail
    async def policy(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        started.set()
        await release.wait()
        return ToolGuardrailFunctionOutput.allow()

    @function_tool(tool_input_guardrails=[policy])
    async def lookup() -> str:
        """Looks up."""
        ran.append("the tool ran")
        return "found"

    return lookup


async def _drain(events: Any) -> None:
    async for _ in events:
        pass


async def cancelled_in_guardrail(mode: Literal["immediate", "after_turn"]) -> tuple[Any, Any]:
    """A streamed run cancelled in ``mode`` while its tool's input guardrail runs (it then
    allows the call): the run's outputs for the call, and whether the tool ran."""
    started, release, ran = asyncio.Event(), asyncio.Event(), []
    agent = agent_calling(guarded_lookup(started, release, ran))
    streamed = Runner.run_streamed(agent, "look up", run_config=NO_TRACES)
    stream = asyncio.ensure_future(_drain(streamed.stream_events()))
    await started.wait()
    streamed.cancel(mode)
    release.set()
    await stream
    outputs = [i.output for i in streamed.new_items if isinstance(i, ToolCallOutputItem)]
    print(f"outputs for the call: {outputs}; {ran or 'the tool did not run'}")
    return outputs, ran


async def ignored_cancel() -> bool:
    """R27 [cooperative=false]: a run cancelled while its tool finishes work that cannot stop
    half-way ends at once -- ``Runner.run``'s task raises ``CancelledError``, a streamed run's
    ``cancel("immediate")`` ends its stream -- while the tool still runs: the run is not
    quiescent, and the tool's late result is dropped with no trace in the run.

    Kind: runtime -- the run ends while the tool it started still runs: the SDK neither waits
    for the tool nor hands back what it did; a run that awaited its tool would be quiescent
    whichever way it was cancelled: bare asyncio, awaiting its tool, waits for it. Control:
    ``bare_await_waits_for_the_tool``."""
    events: list[str] = []
    for how in ("Runner.run, task cancelled", 'run_streamed, cancel("immediate")'):
        started, release = asyncio.Event(), asyncio.Event()
        agent = agent_calling(write_tool(started, release, events))
        if how.startswith("Runner.run"):
            run: asyncio.Future[Any] = asyncio.ensure_future(
                Runner.run(agent, "write", run_config=NO_TRACES)
            )
            await started.wait()
            run.cancel()
            try:
                await run
            except asyncio.CancelledError:
                events.append(f"{how}: raised while the write runs")
            items: list[Any] = []
        else:
            streamed = Runner.run_streamed(agent, "write", run_config=NO_TRACES)
            stream = asyncio.ensure_future(_drain(streamed.stream_events()))
            await started.wait()
            streamed.cancel("immediate")
            await stream
            events.append(f"{how}: ended while the write runs")
            items = streamed.new_items
        release.set()
        for _ in range(10):
            await asyncio.sleep(0)
        kept = [i.output for i in items if isinstance(i, ToolCallOutputItem)]
        events.append(f"the write's result kept: {kept or 'nowhere'}")
    print(" -> ".join(events))
    return events == [
        "Runner.run, task cancelled: raised while the write runs",
        "tool: the write is done",
        "the write's result kept: nowhere",
        'run_streamed, cancel("immediate"): ended while the write runs',
        "tool: the write is done",
        "the write's result kept: nowhere",
    ]


async def cancelled_call_unanswered() -> bool:
    """R31 [cancel=gate:body]: a run cancelled while its tool runs -- ``Runner.run``'s task
    cancelled, or a streamed run's ``cancel("immediate")`` -- stops the tool (it stops when told)
    and answers the call with nothing: ``Runner.run`` raises ``CancelledError``, the streamed run
    ends with no output item for the call; neither an aborted result nor an error.

    Kind: runtime -- a streamed run's ``cancel("immediate")`` ends with no output item and no
    exception for a call the model made (with ``Runner.run``'s task cancelled, what comes back
    is the caller's own cancellation, ``observed.caller_cancelled``, which toolcancel's
    registry earns the same way)."""
    events: list[str] = []

    async def one(how: str) -> None:
        started = asyncio.Event()
        stopped: list[str] = []

        @function_tool
        async def lookup() -> str:
            """Looks up."""
            started.set()
            try:
                await asyncio.Event().wait()
            finally:
                stopped.append("stopped")
            return "found"

        agent = agent_calling(lookup)
        if how.startswith("Runner.run"):
            run: asyncio.Future[Any] = asyncio.ensure_future(
                Runner.run(agent, "look up", run_config=NO_TRACES)
            )
            await started.wait()
            run.cancel()
            try:
                await run
                events.append(f"{how}: returned")
            except asyncio.CancelledError:
                events.append(f"{how}: raised CancelledError")
        else:
            streamed = Runner.run_streamed(agent, "look up", run_config=NO_TRACES)
            stream = asyncio.ensure_future(_drain(streamed.stream_events()))
            await started.wait()
            streamed.cancel("immediate")
            await stream
            outputs = [i for i in streamed.new_items if isinstance(i, ToolCallOutputItem)]
            events.append(f"{how}: ended, outputs for the call: {outputs}")
        for _ in range(10):
            await asyncio.sleep(0)
        events.append(f"tool {stopped[0] if stopped else 'still running'}")

    for how in ("Runner.run, task cancelled", 'run_streamed, cancel("immediate")'):
        await one(how)
    print(" -> ".join(events))
    return events == [
        "Runner.run, task cancelled: raised CancelledError",
        "tool stopped",
        'run_streamed, cancel("immediate"): ended, outputs for the call: []',
        "tool stopped",
    ]


async def cancelled_before_start() -> bool:
    """R31 [caller=aborted]: a streamed run cancelled before it starts (the caller had already
    given up) never starts the tool -- right -- and ends without an exception and without any
    output for the tool call the model made: the call is answered neither with a result nor an
    error.

    Kind: runtime -- a streamed run cancelled before it starts ends without an exception and
    without an output for the call the model made: the caller cannot tell it from a run that
    never asked for the tool."""
    started = asyncio.Event()

    @function_tool
    async def lookup() -> str:
        """Looks up."""
        started.set()
        return "found"

    streamed = Runner.run_streamed(agent_calling(lookup), "look up", run_config=NO_TRACES)
    streamed.cancel("immediate")
    await _drain(streamed.stream_events())
    outputs = [i for i in streamed.new_items if isinstance(i, ToolCallOutputItem)]
    print(f"tool started: {started.is_set()}; outputs for the call: {outputs}; "
          f"final output: {streamed.final_output!r}")  # fmt: skip
    return not started.is_set() and outputs == [] and streamed.final_output is None


async def after_turn_tool_not_told() -> bool:
    """R21 [cancel=gate:body]: ``cancel("after_turn")`` while a tool runs does not tell the tool:
    its task is not cancelled, and its result -- a success or its failure text -- is kept as the
    call's output; only the next model turn is skipped.  Documented: "after_turn" lets the current
    turn finish.

    Kind: design -- ``RunResultStreaming.cancel``: ""after_turn": Complete current turn
    gracefully before stopping" (agents/result.py): the tool of the current turn is left to
    finish."""
    started, release = asyncio.Event(), asyncio.Event()
    told: list[bool] = []

    @function_tool
    async def lookup() -> str:
        """Looks up."""
        started.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            told.append(True)
            raise
        return "found"

    streamed = Runner.run_streamed(agent_calling(lookup), "look up", run_config=NO_TRACES)
    stream = asyncio.ensure_future(_drain(streamed.stream_events()))
    await started.wait()
    streamed.cancel("after_turn")
    release.set()
    await stream
    outputs = [i.output for i in streamed.new_items if isinstance(i, ToolCallOutputItem)]
    print(f"tool told of the cancel: {bool(told)}; the call's output: {outputs}")
    return not told and outputs == ["found"]


async def tool_exception() -> bool:
    """R18/R3: a tool that raises is answered with the SDK's fixed text "An error
    occurred while running the tool. Please try again." -- the exception's own message is gone
    (documented: ``default_tool_error_function`` hides it; a ``failure_error_function`` can say
    more).

    Kind: design -- ``default_tool_error_function``: "Return a fixed error response without
    exposing the exception to the model." (agents/tool.py); a ``failure_error_function`` can
    return more."""

    @function_tool
    async def save() -> str:
        """Saves."""
        raise RuntimeError("disk full")

    result = await Runner.run(agent_calling(save), "save", run_config=NO_TRACES)
    outputs = [i.output for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    print(f"the call's output: {outputs}")
    return outputs == ["An error occurred while running the tool. Please try again."]


async def unknown_tool() -> bool:
    """R31 [tool_known=false]: a model that calls a tool the agent does not have makes the whole
    run raise ``ModelBehaviorError``: the call gets no result the model could read.

    Kind: runtime -- one bad tool name from the model ends the whole run with
    ``ModelBehaviorError`` instead of an error result the model could read and correct."""

    @function_tool
    async def save() -> str:
        """Saves."""
        return "saved"

    try:
        await Runner.run(agent_calling(save, name="no_such_tool"), "go", run_config=NO_TRACES)
    except Exception as exc:  # the SDK's ModelBehaviorError
        print(f"Runner.run raised {type(exc).__name__}: {exc}")
        return type(exc).__name__ == "ModelBehaviorError"
    print("Runner.run returned")
    return False


async def guardrail_exception() -> bool:
    """R31 [post=throw]: a tool output guardrail that raises ends the whole run (``UserError``):
    the call gets no error result, though the tool's own failure would have got one
    (``failure_error_function``).

    Kind: runtime -- a tool's exception becomes the model's error output
    (``failure_error_function``), but its guardrails' exceptions end the whole run: one failing
    policy check takes every other call of the run with it."""

    @tool_output_guardrail
    async def audit(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        raise RuntimeError("policy store unavailable")

    @function_tool(tool_output_guardrails=[audit])
    async def save() -> str:
        """Saves."""
        return "saved"

    try:
        await Runner.run(agent_calling(save), "save", run_config=NO_TRACES)
    except Exception as exc:
        print(f"Runner.run raised {type(exc).__name__}: {exc}")
        return type(exc).__name__ == "UserError"
    print("Runner.run returned")
    return False


async def rejection_has_one_message() -> bool:
    """R7/R29 [post=block]: a tool output guardrail that rejects an output hands the model one
    message in its place: a policy's notes beside it (the contract's contexts) have no channel.

    Kind: design -- ``ToolGuardrailFunctionOutput.reject_content(message)``: "Message to send
    to the model instead of the tool result" (agents/tool_guardrails.py), one string."""

    @tool_output_guardrail
    async def audit(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        return ToolGuardrailFunctionOutput.reject_content("Error: blocked by policy")

    @function_tool(tool_output_guardrails=[audit])
    async def save() -> str:
        """Saves."""
        return "saved"

    result = await Runner.run(agent_calling(save), "save", run_config=NO_TRACES)
    outputs = [i.output for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    print(f"the call's output: {outputs}")
    return outputs == ["Error: blocked by policy"]


async def rejected_input_skips_output_guardrail() -> bool:
    """R7/R15/R20 [pre=deny]: a call its input guardrail rejected never reaches its output
    guardrails: a post-execute policy does not see (and cannot block or fail) a denial, which
    is the guardrail's one message (no error of the contract's shape beside it).

    Kind: design -- ``reject_content``: "Reject the tool call/output but continue execution
    with a message to the model" (agents/tool_guardrails.py): the tool does not run, so there
    is no output for an output guardrail to check."""
    seen: list[object] = []

    @tool_input_guardrail
    async def policy(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        return ToolGuardrailFunctionOutput.reject_content("Error: policy refused the call")

    @tool_output_guardrail
    async def audit(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        seen.append(data.output)
        return ToolGuardrailFunctionOutput.allow()

    @function_tool(tool_input_guardrails=[policy], tool_output_guardrails=[audit])
    async def save() -> str:
        """Saves."""
        return "saved"

    result = await Runner.run(agent_calling(save), "save", run_config=NO_TRACES)
    outputs = [i.output for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    print(f"the output guardrail saw {seen}; the call's output: {outputs}")
    return seen == [] and outputs == ["Error: policy refused the call"]


async def cancelled_in_guardrail_unanswered() -> bool:
    """R31 [cancel=gate:pre]: a streamed run cancelled (``cancel("immediate")``) while its
    tool's input guardrail runs ends with no output item for the call: neither an aborted
    result nor an error.

    Kind: runtime -- as when it is cancelled while the tool runs: the model's call is left
    without any answer, and nothing says it was cancelled."""
    outputs, ran = await cancelled_in_guardrail("immediate")
    return outputs == [] and ran == []


async def after_turn_guardrail_decision_stands() -> bool:
    """R13/R28 [cancel=gate:pre, row=openai_agents__cancel_after_turn]: ``cancel("after_turn")``
    while a tool's input guardrail runs lets the call go on: the guardrail's decision stands,
    and an allowed tool still starts and its success is the call's output.

    Kind: design -- ``RunResultStreaming.cancel``: ""after_turn": Complete current turn
    gracefully before stopping" (agents/result.py): the calls of the current turn are run."""
    outputs, ran = await cancelled_in_guardrail("after_turn")
    return outputs == ["found"] and ran == ["the tool ran"]


async def stopped_tool_leaves_by_cancellation() -> bool:
    """R15/R19 [cancel=gate:body]: a tool the SDK tells to stop -- by cancelling its task, the
    only way it has -- and that stops leaves with ``CancelledError``, the cancellation itself:
    a failure it was about to report after stopping never happens unless the tool catches the
    cancellation and raises its own error.

    Kind: mapping -- rows with toolcancel's integration: the conformance adapter's cooperative
    body stops on its task's cancellation by letting ``CancelledError`` out, so its scenario's
    failure after the stop never happens and the call is published ABORTED; the control's body,
    told through a signal, does fail after stopping.  Not the SDK's defect."""
    started, seen = asyncio.Event(), []

    @function_tool
    async def wait_then_fail() -> str:
        """Waits, then fails."""
        started.set()
        try:
            await asyncio.Event().wait()
        except BaseException as exc:
            seen.append(type(exc).__name__)
            raise
        raise RuntimeError("never reached")

    run = asyncio.ensure_future(Runner.run(agent_calling(wait_then_fail), "go",
                                           run_config=NO_TRACES))  # fmt: skip
    await started.wait()
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
    while not seen:
        await asyncio.sleep(0)
    print(f"the tool left with: {seen}")
    return seen == ["CancelledError"]


async def unknown_tool_as_text() -> bool:
    """R6 [tool_known=false]: with ``tool_not_found_behavior="return_error_to_model"`` an
    unknown tool is answered from the ``tool_error_formatter``'s text alone: the output item
    the SDK makes for it carries no error code.

    Kind: design -- "Optional callback that formats tool error messages returned to the model"
    (agents/run_config.py, ``tool_error_formatter``, which returns ``str | None``): the model
    reads text, and an unknown tool's output item has no channel for an error code."""
    model = ScriptedModel([[function_call("no_such_tool", {}, call_id="c1")],
                           [assistant_message("finished")]])  # fmt: skip

    def formatter(args: Any) -> str:
        return f'Error: unknown tool "{args.tool_name}"'

    config = RunConfig(tracing_disabled=True, tool_not_found_behavior="return_error_to_model",
                       tool_error_formatter=formatter)  # fmt: skip
    done = await Runner.run(Agent(name="agent", model=model), "go", run_config=config)
    items = [(i.output, i.custom_data) for i in done.new_items if isinstance(i, ToolCallOutputItem)]
    print(f"the output item: {items}")
    return items == [('Error: unknown tool "no_such_tool"', None)]


async def tool_timeout_message() -> bool:
    """R34 [timeout=timer_first, cooperative=true]: a function tool past its ``timeout`` is
    answered with the SDK's model-visible message "Tool 'lookup' timed out after 0.01 seconds."
    -- an output like any other, no error code.

    Kind: design -- ``function_tool(timeout_behavior=...)``: ""error_as_result" returns a
    model-visible message, while "raise_exception" raises ToolTimeoutError and fails the run"
    (agents/tool.py; "error_as_result" is the default)."""

    @function_tool(timeout=0.01)
    async def lookup() -> str:
        """Looks up."""
        await asyncio.sleep(10)
        return "found"

    result = await Runner.run(agent_calling(lookup), "look up", run_config=NO_TRACES)
    outputs = [i.output for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    print(f"the call's output: {outputs}")
    return outputs == ["Tool 'lookup' timed out after 0.01 seconds."]


async def late_success_past_timeout() -> bool:
    """R34 [timeout=timer_first, cooperative=false]: a function tool that outlasts its
    ``timeout``, finishing work that cannot stop half-way, has its late result -- a success, or
    its failure -- kept as the call's output: the timeout is not reported.

    Kind: inherited -- ``asyncio.wait_for``, like a bare ``asyncio.timeout()``, returns what
    the awaited task returned once it swallowed the cancellation (and the SDK keeps a task that
    "done and not cancelled" ended, agents/tool.py). Control:
    ``bare_timeout_keeps_a_late_result``."""
    release = asyncio.Event()
    cancelled: list[bool] = []

    @function_tool(timeout=0.01)
    async def write_file() -> str:
        """Writes."""
        try:
            await release.wait()
        except asyncio.CancelledError:
            cancelled.append(True)  # the write cannot stop half-way: finish it first
            await asyncio.sleep(0.05)
        return "written"

    result = await Runner.run(agent_calling(write_file), "write", run_config=NO_TRACES)
    outputs = [i.output for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    print(f"tool cancelled by its timeout: {cancelled}; the call's output: {outputs}")
    return cancelled == [True] and outputs == ["written"]


async def after_turn_leaves_the_tool_to_its_timeout() -> bool:
    """R21 [cancel=with_deadline, row=openai_agents__cancel_after_turn]: ``cancel("after_turn")``
    in the very step the tool's ``timeout`` passes: only the timeout reaches the tool (the
    cancel does not tell it), so the call ends as a timeout, its output the SDK's timeout
    message.

    Kind: design -- ``RunResultStreaming.cancel``: ""after_turn": Complete current turn
    gracefully before stopping" (agents/result.py): the tool of the current turn is left to
    finish, here to its own timeout."""
    started: asyncio.Event = asyncio.Event()
    told: list[str] = []

    @function_tool(timeout=0.05)
    async def lookup() -> str:
        """Looks up."""
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            told.append("cancelled")
            raise
        return "found"

    streamed = Runner.run_streamed(agent_calling(lookup), "look up", run_config=NO_TRACES)
    stream = asyncio.ensure_future(_drain(streamed.stream_events()))
    await started.wait()
    await asyncio.sleep(0.05)  # the timeout is due: cancel in the step its timer runs
    streamed.cancel("after_turn")
    await stream
    outputs = [i.output for i in streamed.new_items if isinstance(i, ToolCallOutputItem)]
    print(f"the tool: {told}; the call's output: {outputs}")
    return told == ["cancelled"] and outputs == ["Tool 'lookup' timed out after 0.05 seconds."]


REPRODUCTIONS = {
    f.__name__: f
    for f in (
        ignored_cancel,
        cancelled_call_unanswered,
        cancelled_before_start,
        after_turn_tool_not_told,
        tool_exception,
        unknown_tool,
        guardrail_exception,
        rejection_has_one_message,
        rejected_input_skips_output_guardrail,
        cancelled_in_guardrail_unanswered,
        after_turn_guardrail_decision_stands,
        stopped_tool_leaves_by_cancellation,
        unknown_tool_as_text,
        tool_timeout_message,
        late_success_past_timeout,
        after_turn_leaves_the_tool_to_its_timeout,
    )
}


if __name__ == "__main__":
    from toolcancel.runtimes import reproduce  # only the runner: each pastes without it

    sys.exit(reproduce(REPRODUCTIONS))
