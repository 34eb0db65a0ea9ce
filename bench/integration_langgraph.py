"""Per tool call: LangGraph ``ToolNode``'s own vs through ``toolcancel.integrations.langgraph``.

Not a test (timings depend on the machine); run it by hand (the ``langgraph`` extra)::

    python bench/integration_langgraph.py [--rounds N] [--runs M]

One ``ainvoke`` of a graph START -> tools -> END whose input is an ``AIMessage`` asking for 20
calls of one tool (``ToolNode`` gathers them); per-call microseconds are a run's CPU time over
20, the graph's own steps included in both variants.
"""

from __future__ import annotations

from typing import Any

from integration_timing import compare
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from toolcancel.integrations.langgraph import Toolcancel

CALLS = 20
ASKED = [{"name": "lookup", "args": {"key": f"k{i}"}, "id": f"c{i}"} for i in range(CALLS)]
TURN = {"messages": [AIMessage("", tool_calls=ASKED)]}


@tool
async def lookup(key: str) -> str:
    """Look ``key`` up."""
    return f"value of {key}"


def graph(**options: Any) -> Any:
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode([lookup], **options))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    return builder.compile()


app, calls = graph(), Toolcancel()
with_calls = graph(awrap_tool_call=calls)  # the one change


async def plain() -> None:
    await app.ainvoke(TURN)


async def integrated() -> None:
    await with_calls.ainvoke(TURN)
    calls.published.clear()  # a long-lived program forgets what it read


if __name__ == "__main__":
    compare("langgraph", plain, integrated, CALLS)
