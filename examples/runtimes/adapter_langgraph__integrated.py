"""LangGraph's ``ToolNode`` with ``toolcancel.integrations.langgraph``: adapter_langgraph.py's row
with toolcancel's ``Toolcancel`` as the node's ``awrap_tool_call``.

    toolcancel conform --revision seed --adapter python \\
        examples/runtimes/adapter_langgraph__integrated.py

The scenario's wrappers, if any, become the registry's around wrappers, and the tool call a call
of toolcancel's ``ToolRegistry``: the caller cancelling the task that awaits ``ainvoke`` aborts
the call, the tool is cancelled and awaited, one result is published.  The cancelled graph run
writes no ``ToolMessage``; the caller waits for the call's published result
(``Toolcancel.settled``), and that is its answer.  Everything else is the plain row's
(``toolcancel.runtimes.integrated``); the lines that put the integration in end with
``# integration``, and without them this is the plain row.
"""

from __future__ import annotations

from typing import Any

from adapter_langgraph import LangGraph
from toolcancel import runtimes as kit
from toolcancel.integrations.langgraph import Toolcancel  # integration


def install(call: kit.Call, plain: Any, wrapper: Any) -> Any:
    """The node's wrapper: toolcancel's, the node's own (``wrapper``) inside it."""
    glue = plain
    glue = Toolcancel(revision=call.revision, around=wrapper)  # integration
    return glue


Integrated = kit.integrated(
    LangGraph, install, "toolcancel.integrations.langgraph",
    settled=lambda glue: glue.settled("c1"),
)  # fmt: skip

if __name__ == "__main__":
    kit.main(Integrated(), kit.RegistryControl(Integrated))
