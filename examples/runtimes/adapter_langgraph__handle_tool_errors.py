"""LangGraph's ``ToolNode`` with ``handle_tool_errors=True``: every tool exception a ToolMessage.

    toolcancel conform --revision seed --adapter python \\
        examples/runtimes/adapter_langgraph__handle_tool_errors.py

Everything else is adapter_langgraph.py's.
"""

from __future__ import annotations

from importlib.metadata import version

from adapter_langgraph import LangGraph
from toolcancel import runtimes as kit

LangGraphHandled = kit.row(
    LangGraph,
    f"langgraph {version('langgraph')} ToolNode(handle_tool_errors=True)"
    f" (langgraph-prebuilt {version('langgraph-prebuilt')}, task cancel)",
    handle_tool_errors=True,
)

if __name__ == "__main__":
    kit.main(LangGraphHandled(), kit.RegistryControl(LangGraphHandled))
