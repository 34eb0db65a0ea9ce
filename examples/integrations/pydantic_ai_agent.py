"""Adding toolcancel to an existing pydantic-ai agent, and what changes after a cancellation.

    pip install 'toolcancel[pydantic-ai]'
    python examples/integrations/pydantic_ai_agent.py

The agent books a room.  Its tool cannot stop half-way: cancelled, it finishes the booking and
returns.  The user cancels the run while the tool runs, then resumes the conversation from the
run's history.  Without the integration pydantic-ai keeps the tool's late success in that
history (by design: "so resuming from that history doesn't re-run it"), and the resumed model
reads that the room was booked -- for a request the user cancelled.  With it, the call's one
result is the contract's ABORTED: that is what the history keeps and the model reads, and the
program can wait for the call's quiescence and read what it published (``settled``).
The model is pydantic-ai's ``FunctionModel`` (offline, no key); the tool waits on events, not time.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import Agent, capture_run_messages
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from toolcancel.integrations.pydantic_ai import Toolcancel


async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Asks for the booking once; then says what it read of the tool's return."""
    del info
    returns = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts
               if isinstance(p, ToolReturnPart)]  # fmt: skip
    if not returns:
        return ModelResponse(parts=[ToolCallPart("book", {"room": "blue"}, tool_call_id="call-1")])
    return ModelResponse(parts=[TextPart(f"the model read: {returns[-1].content!r}")])


agent = Agent(FunctionModel(model))  # the existing agent
started = asyncio.Event()


@agent.tool_plain
async def book(room: str) -> str:
    """Books ``room``; a booking under way finishes even when cancelled."""
    started.set()
    try:
        await asyncio.Event().wait()  # the booking system's reply: slow, never in this example
    except asyncio.CancelledError:
        pass  # half-done: it cannot stop, so it finishes
    return f"booked the {room} room"


async def cancelled(capabilities: list[Any]) -> list[ModelMessage]:
    """Run the agent, cancel the run while the tool runs; the run's history."""
    started.clear()
    with capture_run_messages() as messages:
        run = asyncio.create_task(agent.run("book the blue room", capabilities=capabilities))
        await started.wait()
        run.cancel()
        try:
            await run
        except asyncio.CancelledError:
            pass
    return messages


def recorded(messages: list[ModelMessage]) -> str:
    """What the history keeps for the tool call."""
    parts = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts
             if isinstance(p, ToolReturnPart)]  # fmt: skip
    return ", ".join(f"{p.content!r} (outcome {p.outcome})" for p in parts) or "nothing"


async def main() -> None:
    print("without the integration")
    history = await cancelled([])
    print("  the history keeps:", recorded(history))
    resumed = await agent.run("go on", message_history=history)
    print("  resumed,", resumed.output)

    print("with the integration")
    calls = Toolcancel()  # the one line that adds it (or Agent(..., capabilities=[calls]))
    history = await cancelled([calls])
    print("  the history keeps:", recorded(history))
    print("  the call published:", (await calls.settled("call-1")).to_json())
    resumed = await agent.run("go on", message_history=history)
    print("  resumed,", resumed.output)


if __name__ == "__main__":
    asyncio.run(main())
