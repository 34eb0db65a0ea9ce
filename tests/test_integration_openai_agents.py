"""toolcancel.integrations.openai_agents: the OpenAI Agents SDK's tool calls through a registry.

Every run uses the SDK's own ``ScriptedModel`` (no network); every wait is on an event, and the
async tests run on the suite's virtual clock, which fails a test that waits for nothing.  The
user's example and page: tests/test_integration_pages.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

agents = pytest.importorskip("agents")

from agents import (  # noqa: E402
    Agent,
    RunConfig,
    Runner,
    ToolCallOutputItem,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    ToolInputGuardrailTripwireTriggered,
    ToolOutputGuardrailData,
    ToolTimeoutError,
    function_tool,
    tool_input_guardrail,
    tool_output_guardrail,
)
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402
from toolcancel import ToolRegistry  # noqa: E402
from toolcancel.integrations.openai_agents import ERROR_KEY, ToolCalls  # noqa: E402

CONFIG = RunConfig(tracing_disabled=True)


class Write:
    """A tool that cannot stop half-way: cancelled, it finishes its write, then returns."""

    def __init__(self) -> None:
        self.writing = asyncio.Event()
        self.told = asyncio.Event()
        self.finish = asyncio.Event()
        self.order: list[str] = []

    def tool(self, **options: Any) -> Any:
        @function_tool(name_override="save", **options)
        async def save(record: str) -> str:
            self.writing.set()
            try:
                await self.finish.wait()
            except asyncio.CancelledError:
                self.told.set()
                await self.finish.wait()
            self.order.append("tool wrote")
            return f"saved {record}"

        return save


def model(name: str = "save", **args: Any) -> ScriptedModel:
    return ScriptedModel(
        [[function_call(name, args or {"record": "r"}, call_id="c1")], [assistant_message("done")]]
    )


def received(run: Any) -> list[Any]:
    return [i.output for i in run.new_items if isinstance(i, ToolCallOutputItem)]


async def test_a_cancelled_run_ends_only_once_its_tool_stopped_and_publishes_aborted() -> None:
    write = Write()
    calls = ToolCalls(ToolRegistry())
    agent = calls.agent(Agent(name="a", model=model(), tools=[write.tool()]))
    run = asyncio.ensure_future(calls.run(Runner.run(agent, "go", run_config=CONFIG)))
    await write.writing.wait()
    run.cancel()
    await write.told.wait()  # the SDK cancelled the tool's task: the call's caller aborted
    write.finish.set()
    with pytest.raises(asyncio.CancelledError):
        await run
    write.order.append("run ended")
    assert write.order == ["tool wrote", "run ended"]
    [published] = await calls.settled()
    assert (published.call_id, published.tool) == ("c1", "save")
    assert published.result.error is not None and published.result.error.code == "ABORTED"


async def test_settled_waits_for_the_tool_the_sdk_detached() -> None:
    """Without run(): Runner.run ends at once (the SDK's design) and settled() is the wait."""
    write = Write()
    calls = ToolCalls(ToolRegistry())
    agent = calls.agent(Agent(name="a", model=model(), tools=[write.tool()]))
    run = asyncio.ensure_future(Runner.run(agent, "go", run_config=CONFIG))
    await write.writing.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert write.order == []  # the run is over, the tool still writing
    waiting = asyncio.ensure_future(calls.settled())
    await write.told.wait()
    write.finish.set()
    [published] = await waiting
    assert write.order == ["tool wrote"]
    assert published.result.text == "Error: tool call aborted"


async def test_cancel_after_turn_tells_the_tool_and_the_history_keeps_aborted() -> None:
    write = Write()
    calls = ToolCalls(ToolRegistry())
    agent = calls.agent(Agent(name="a", model=model(), tools=[write.tool()]))
    run = Runner.run_streamed(agent, "go", run_config=CONFIG)

    async def cancel() -> None:
        await write.writing.wait()
        calls.cancel(run, "after_turn")
        await write.told.wait()
        write.finish.set()

    cancelling = asyncio.ensure_future(cancel())
    async for _ in run.stream_events():
        pass
    await cancelling
    [item] = [i for i in run.new_items if isinstance(i, ToolCallOutputItem)]
    assert item.output == "Error: tool call aborted"  # not the late "saved r"
    assert item.custom_data == {ERROR_KEY: {"name": "AbortError", "code": "ABORTED"}}


async def test_a_tools_timeout_is_the_registrys_deadline_published_once_the_body_settled() -> None:
    """The SDK's own timeout would cancel the call's task from outside (ABORTED); here the copy
    has none, the registry's deadline stops the body, and TOOL_TIMEOUT is published only once
    it finished its write; the model reads what the SDK's timeout path says."""
    write = Write()
    answered: list[ToolTimeoutError] = []

    def timed_out(ctx: Any, error: Exception) -> str:
        assert isinstance(error, ToolTimeoutError)
        answered.append(error)
        write.order.append("timeout answered")
        return f"too slow: {error}"

    calls = ToolCalls(ToolRegistry())
    tool = calls.tool(write.tool(timeout=2.5, timeout_error_function=timed_out))
    assert tool.timeout_seconds is None  # the SDK has no timeout of its own to fire
    assert calls.registry.definition("save").timeout_ms == 2500
    agent = Agent(name="a", model=model(), tools=[tool])
    run = asyncio.ensure_future(calls.run(Runner.run(agent, "go", run_config=CONFIG)))
    await write.told.wait()  # the registry's deadline aborted the call: the body is told
    assert calls.result_of("c1") is None and not run.done()  # not before the body settled
    write.finish.set()
    done = await run
    assert write.order == ["tool wrote", "timeout answered"]
    [published] = calls.published
    assert published.result.error is not None and published.result.error.code == "TOOL_TIMEOUT"
    assert [(e.tool_name, e.timeout_seconds) for e in answered] == [("save", 2.5)]
    assert received(done) == ["too slow: Tool 'save' timed out after 2.5 seconds."]
    [item] = [i for i in done.new_items if isinstance(i, ToolCallOutputItem)]
    assert item.custom_data is not None and item.custom_data[ERROR_KEY]["code"] == "TOOL_TIMEOUT"


def stuck(**options: Any) -> Any:
    """A tool only its deadline ends (its task cancelled, it leaves at once)."""

    @function_tool(name_override="save", **options)
    async def save(record: str) -> str:
        await asyncio.Event().wait()
        return record

    return save


async def test_a_timeout_keeps_the_sdks_default_message_and_raise_exception() -> None:
    calls = ToolCalls(ToolRegistry())
    agent = calls.agent(Agent(name="a", model=model(), tools=[stuck(timeout=1)]))
    done = await calls.run(Runner.run(agent, "go", run_config=CONFIG))
    assert received(done) == ["Tool 'save' timed out after 1 seconds."]

    raising = ToolCalls(ToolRegistry())
    tool = stuck(timeout=1, timeout_behavior="raise_exception")
    agent = raising.agent(Agent(name="a", model=model(), tools=[tool]))
    with pytest.raises(ToolTimeoutError):
        await raising.run(Runner.run(agent, "go", run_config=CONFIG))
    [published] = raising.published
    assert published.result.error is not None and published.result.error.code == "TOOL_TIMEOUT"


def test_one_name_has_one_budget_in_a_registry() -> None:
    calls = ToolCalls(ToolRegistry())
    calls.tool(Write().tool(timeout=1))
    with pytest.raises(ValueError, match=r"'save'.*timeout_ms=1000"):
        calls.tool(Write().tool(timeout=2))
    other = ToolCalls(ToolRegistry())
    other.tool(stuck(timeout=0.3))
    assert other.registry.definition("save").timeout_ms == 300  # not 300.00000000000006


async def test_a_call_entering_after_abort_never_starts_its_tool() -> None:
    write = Write()
    calls = ToolCalls(ToolRegistry())
    calls.abort()
    agent = calls.agent(Agent(name="a", model=model(), tools=[write.tool()]))
    done = await calls.run(Runner.run(agent, "go", run_config=CONFIG))
    assert received(done) == ["Error: tool call aborted"]
    assert not write.writing.is_set()


async def test_a_success_reaches_the_model_exactly_as_without_the_integration() -> None:
    @function_tool
    async def lookup(key: str) -> dict[str, Any]:
        return {"key": key, "rows": [1, 2]}

    def agent() -> Agent:
        return Agent(name="a", model=model("lookup", key="k"), tools=[lookup])

    plain = await Runner.run(agent(), "go", run_config=CONFIG)
    calls = ToolCalls(ToolRegistry())
    integrated = await calls.run(Runner.run(calls.agent(agent()), "go", run_config=CONFIG))
    assert received(integrated) == received(plain) == [{"key": "k", "rows": [1, 2]}]
    assert [i.custom_data for i in integrated.new_items if isinstance(i, ToolCallOutputItem)] == [
        None
    ]
    assert calls.result_of("c1") is not None and not calls.result_of("c1").is_error


async def test_a_failure_the_tool_lets_through_is_the_registrys_error_result() -> None:
    @function_tool(failure_error_function=None)
    async def boom() -> str:
        raise RuntimeError("disk full")

    calls = ToolCalls(ToolRegistry())
    agent = calls.agent(Agent(name="a", model=model("boom"), tools=[boom]))
    done = await calls.run(Runner.run(agent, "go", run_config=CONFIG))
    assert received(done) == ["Error: disk full"]


async def test_an_unknown_tool_is_answered_by_the_registry_not_by_ending_the_run() -> None:
    calls = ToolCalls(ToolRegistry())
    agent = calls.agent(Agent(name="a", model=model("no_such_tool"), tools=[Write().tool()]))
    done = await calls.run(Runner.run(agent, "go", run_config=calls.run_config(CONFIG)))
    assert done.final_output == "done"
    assert received(done) == ['Error: unknown tool "no_such_tool"']
    code = calls.result_of("c1")
    assert code is not None and code.error is not None and code.error.code == "UNKNOWN_TOOL"


async def test_run_config_keeps_the_programs_own_formatter_for_other_errors() -> None:
    seen: list[str] = []

    def theirs(args: Any) -> str:
        seen.append(args.kind)
        return "theirs"

    config = ToolCalls(ToolRegistry()).run_config(RunConfig(tool_error_formatter=theirs))
    assert config.tool_not_found_behavior == "return_error_to_model"
    assert config.tool_error_formatter is not None
    said = config.tool_error_formatter(
        agents.ToolErrorFormatterArgs(kind="approval_rejected", tool_type="function",
                                      tool_name="t", call_id="c", default_message="no",
                                      run_context=None)  # type: ignore[arg-type]
    )  # fmt: skip
    assert await said == "theirs" and seen == ["approval_rejected"]


async def test_a_cancel_while_the_input_guardrail_runs_meets_the_registrys_checkpoint() -> None:
    """The guardrail is the registry's pre-execute policy: it allows after the run was
    cancelled, and the tool never starts (the SDK alone would run it)."""
    checking, allow = asyncio.Event(), asyncio.Event()

    @tool_input_guardrail
    async def slow(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        checking.set()
        await allow.wait()
        return ToolGuardrailFunctionOutput.allow()

    write = Write()
    tool = write.tool()
    tool.tool_input_guardrails = [slow]
    registry = ToolRegistry()
    calls = ToolCalls(registry)
    run = asyncio.ensure_future(
        calls.run(Runner.run(calls.agent(Agent(name="a", model=model(), tools=[tool])), "go",
                             run_config=CONFIG))
    )  # fmt: skip
    await checking.wait()
    run.cancel()
    while not registry.in_flight()[0].aborted:  # the cancellation reaches the call's caller
        await asyncio.sleep(0)
    allow.set()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert not write.writing.is_set()
    [published] = calls.published
    assert published.result.error is not None
    assert published.result.error.code == "ABORTED"  # seed's cancellation before the body


async def test_the_guardrails_rejections_are_the_registrys_denial_and_block() -> None:
    @tool_input_guardrail
    async def deny(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        return ToolGuardrailFunctionOutput.reject_content("Error: not today")

    @tool_output_guardrail
    async def block(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        assert data.output == "saved r"  # the tool's own output, as the SDK shows it
        return ToolGuardrailFunctionOutput.reject_content("withheld")

    async def answer(guard: str) -> tuple[list[Any], Write]:
        write = Write()
        write.finish.set()
        tool = write.tool()
        if guard == "input":
            tool.tool_input_guardrails = [deny]
        else:
            tool.tool_output_guardrails = [block]
        calls = ToolCalls(ToolRegistry())
        agent = calls.agent(Agent(name="a", model=model(), tools=[tool]))
        done = await calls.run(Runner.run(agent, "go", run_config=CONFIG))
        assert done.tool_input_guardrail_results == done.tool_output_guardrail_results == []
        return received(done), write

    said, write = await answer("input")
    assert said == ["Error: not today"] and not write.writing.is_set()
    said, write = await answer("output")
    assert said == ["withheld"] and write.order == ["tool wrote"]


async def test_a_tripwire_ends_the_run_as_the_sdks_once_the_call_published() -> None:
    @tool_input_guardrail
    async def trip(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        return ToolGuardrailFunctionOutput.raise_exception()

    write = Write()
    tool = write.tool()
    tool.tool_input_guardrails = [trip]
    calls = ToolCalls(ToolRegistry())
    agent = calls.agent(Agent(name="a", model=model(), tools=[tool]))
    with pytest.raises(ToolInputGuardrailTripwireTriggered):
        await calls.run(Runner.run(agent, "go", run_config=CONFIG))
    [published] = calls.published
    assert published.result.is_error and not write.writing.is_set()


async def test_runs_sharing_a_registry_each_get_their_own_calls() -> None:
    """One registry serves many runs, a ToolCalls each: each run's tool and guardrail see that
    run's call, each run records its own, and cancelling one leaves the other's call alone."""
    seen: list[Any] = []

    @tool_output_guardrail
    async def look(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        seen.append(data.output)
        return ToolGuardrailFunctionOutput.allow()

    def agent(calls: ToolCalls, write: Write, record: str) -> Agent:
        tool = write.tool()
        tool.tool_output_guardrails = [look]
        return calls.agent(Agent(name="a", model=model(record=record), tools=[tool]))

    registry = ToolRegistry()
    first, second = ToolCalls(registry), ToolCalls(registry)
    slow, quick = Write(), Write()
    quick.finish.set()
    held = asyncio.ensure_future(
        first.run(Runner.run(agent(first, slow, "a"), "go", run_config=CONFIG))
    )
    await slow.writing.wait()
    done = await second.run(Runner.run(agent(second, quick, "b"), "go", run_config=CONFIG))
    assert received(done) == ["saved b"] and not held.done()
    held.cancel()
    await slow.told.wait()
    slow.finish.set()
    with pytest.raises(asyncio.CancelledError):
        await held
    assert [p.result.text for p in first.published] == ["Error: tool call aborted"]
    assert [p.result.text for p in second.published] == ["saved b"]
    assert seen == ["saved b", "Error: tool call aborted"]
