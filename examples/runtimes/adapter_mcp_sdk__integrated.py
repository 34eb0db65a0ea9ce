"""The MCP Python SDK's ``MCPServer`` with ``toolcancel.integrations.mcp``:
adapter_mcp_sdk.py's row.

    toolcancel conform --revision seed --adapter python \\
        examples/runtimes/adapter_mcp_sdk__integrated.py

The server's tool requests run through a ``ToolRegistry`` of the vector's revision (the
integration is server middleware).  Everything else is the plain row's
(``toolcancel.runtimes.integrated``), ``--control`` included (toolcancel's own server behind
the same client: the mapping is the plain row's, the integration what is judged); the line that
puts the integration in ends with ``# integration``, and without it this is the plain row.
"""

from __future__ import annotations

import logging
from typing import Any

from adapter_mcp_sdk import McpSdk
from toolcancel import ToolRegistry
from toolcancel import runtimes as kit
from toolcancel.integrations.mcp import ToolCalls  # integration


def install(call: kit.Call, plain: Any) -> Any:
    """The server's middleware: toolcancel's."""
    glue = plain
    glue = ToolCalls(ToolRegistry(revision=call.revision))  # integration
    return glue


Integrated = kit.integrated(McpSdk, install, "toolcancel.integrations.mcp")

if __name__ == "__main__":
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    kit.main(Integrated(), Integrated(control=True))
