"""Adding toolcancel to an existing LangGraph agent, and what changes after a cancellation.

    pip install 'toolcancel[langgraph]'
    python examples/integrations/langgraph_agent.py

The graph's tools node books a room.  Its tool cannot stop half-way: cancelled, it finishes the
booking and returns.  The user cancels the graph run while the tool runs.  A cancelled node
writes nothing to the graph's state, so the conversation is left with a tool call and no
answer, and the tool's late result is dropped without a trace -- nothing says whether the
booking stopped.  With the integration the call still publishes exactly one result after the
tool stopped, the contract's ABORTED; the program waits for it (``settled``) and gives the model
that as the tool call's answer on the next turn.
No model is needed: the turn is an ``AIMessage`` with the tool call; the tool waits on events.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from toolcancel.integrations.langgraph import Toolcancel, as_message

started = asyncio.Event()
finished: list[str] = []


@tool
async def book(room: str) -> str:
    """Book ``room``; a booking under way finishes even when cancelled."""
    started.set()
    try:
        await asyncio.Event().wait()  # the booking system's reply: slow, never in this example
    except asyncio.CancelledError:
        pass  # half-done: it cannot stop, so it finishes
    finished.append(room)
    return f"booked the {room} room"


def graph(**options: Any) -> Any:
    """The existing graph: START -> tools -> END."""
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode([book], **options))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    return builder.compile()


TURN = AIMessage("", tool_calls=[{"name": "book", "args": {"room": "blue"}, "id": "call-1"}])
ASKED = [HumanMessage("book the blue room"), TURN]


async def cancel_while_booking(app: Any) -> str:
    """Run the graph, cancel the run while the tool runs; how the run ended."""
    started.clear()
    run = asyncio.create_task(app.ainvoke({"messages": ASKED}))
    await started.wait()
    run.cancel()
    try:
        await run
    except asyncio.CancelledError:
        return "the run was cancelled"
    return "the run finished"


async def main() -> None:
    print("without the integration")
    print(f"  {await cancel_while_booking(graph())}; the tool finished anyway: {finished}")
    print("  the conversation: a tool call with no answer; the late result is nowhere")

    print("with the integration")
    calls = Toolcancel()  # the one change: ToolNode(..., awrap_tool_call=calls)
    ended = await cancel_while_booking(graph(awrap_tool_call=calls))
    published = await calls.settled("call-1")  # returns once the tool stopped
    print(f"  {ended}; the tool finished: {finished}")
    print("  the call published:", published.to_json())
    answer = as_message(published, TURN.tool_calls[0])
    print(f"  the next turn gives the model: {answer.content!r} (status {answer.status})")


if __name__ == "__main__":
    asyncio.run(main())
