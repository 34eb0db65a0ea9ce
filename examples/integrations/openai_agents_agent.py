"""An existing OpenAI Agents SDK agent whose run is cancelled while a tool is writing.

    python examples/integrations/openai_agents_agent.py

Needs ``toolcancel[openai-agents]``; no network, no key: the model is the SDK's own
``ScriptedModel``.  The tool ``save`` writes a record and cannot stop half-way: cancelled, it
finishes its write first.  Each way of cancelling a run is shown plain, then with the agent's
tools run through a ``ToolRegistry`` (``toolcancel.integrations.openai_agents``): what the
program knows when the run has ended, and what the run's history keeps of the call.
Deterministic: the tool and the program wait on events, never on the clock.
"""

from __future__ import annotations

import asyncio

from agents import Agent, RunConfig, Runner, ToolCallOutputItem, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from toolcancel import ToolRegistry
from toolcancel.integrations.openai_agents import ToolCalls

CONFIG = RunConfig(tracing_disabled=True)
writing = asyncio.Event()  # the tool has begun its write
told = asyncio.Event()  # the tool has been cancelled
finish = asyncio.Event()  # the program lets the write complete
wrote = asyncio.Event()  # the write is done


@function_tool
async def save(record: str) -> str:
    """Save a record (a write that cannot stop half-way)."""
    writing.set()
    try:
        await finish.wait()
    except asyncio.CancelledError:
        told.set()
        await finish.wait()
    wrote.set()
    return f"saved {record}"


def existing_agent() -> Agent:
    """The agent as the program already had it."""
    model = ScriptedModel(
        [
            [function_call("save", {"record": "invoice-7"}, call_id="call-1")],
            [assistant_message("done")],
        ]
    )
    return Agent(name="clerk", model=model, tools=[save])


def reset() -> None:
    for event in (writing, told, finish, wrote):
        event.clear()


async def cancel_the_task(run: asyncio.Task[object]) -> None:
    """Cancel the task running the run once the tool is writing; report what the program sees."""
    await writing.wait()
    run.cancel()
    try:
        await run
    except asyncio.CancelledError:
        pass
    print(f"  run ended; tool told: {told.is_set()}, tool still writing: {not wrote.is_set()}")


async def by_task() -> None:
    print("cancelling the run's task, plain:")
    run = asyncio.ensure_future(Runner.run(existing_agent(), "file it", run_config=CONFIG))
    await cancel_the_task(run)
    finish.set()
    await wrote.wait()
    print("  the write finished later; its result went nowhere")

    reset()
    print("cancelling the run's task, with the integration:")
    calls = ToolCalls(ToolRegistry())  # one per run
    agent = calls.agent(existing_agent())  # the same agent, its tools through the registry
    run = asyncio.ensure_future(calls.run(Runner.run(agent, "file it", run_config=CONFIG)))
    done = asyncio.ensure_future(cancel_the_task(run))
    await told.wait()  # the run is cancelled and waits for the tool
    finish.set()
    await done
    for p in await calls.settled():
        print(f"  published for {p.call_id}: {p.result.text!r} ({p.result.error.code})")


async def after_turn(calls: ToolCalls | None) -> None:
    """``cancel("after_turn")``: the SDK lets the turn's tools run on and never tells them."""
    agent = existing_agent() if calls is None else calls.agent(existing_agent())
    config = CONFIG if calls is None else calls.run_config(CONFIG)
    run = Runner.run_streamed(agent, "file it", run_config=config)

    async def cancel_mid_write() -> None:
        await writing.wait()
        if calls is None:
            run.cancel("after_turn")
        else:
            calls.cancel(run, "after_turn")  # the run's cancel, heard by its tools
        finish.set()

    canceller = asyncio.ensure_future(cancel_mid_write())
    async for _ in run.stream_events():
        pass
    await canceller
    kept = [(i.output, i.custom_data) for i in run.new_items if isinstance(i, ToolCallOutputItem)]
    print(f"  tool told: {told.is_set()}; the history keeps: {kept}")


async def main() -> None:
    await by_task()
    reset()
    print('cancel("after_turn"), plain:')
    await after_turn(None)
    reset()
    print('cancel("after_turn"), with the integration:')
    await after_turn(ToolCalls(ToolRegistry()))


if __name__ == "__main__":
    asyncio.run(main())
