"""The MCP Python SDK\'s ``MCPServer`` with ``toolcancel.integrations.mcp``:
adapter_mcp_sdk.py's row.

    toolcancel conform --revision seed --adapter python \\
        examples/runtimes/adapter_mcp_sdk__integrated.py

The server's tool requests run through a ``ToolRegistry`` of the vector's revision (the
integration is server middleware); the line that puts it in ends with ``# integration``, and
without it this is the plain row.  ``--control`` is the plain row's control (toolcancel's own
server behind the same client): the mapping is the plain row's, the integration what is judged.
"""

from __future__ import annotations

import logging
from typing import Any

from adapter_mcp_sdk import McpSdk
from toolcancel import ToolRegistry
from toolcancel import runtimes as kit
from toolcancel.integrations.mcp import ToolCalls  # integration


class Integrated(McpSdk):
    implementation = f"{McpSdk.implementation} + toolcancel.integrations.mcp"

    def server(self, call: kit.Call) -> Any:
        server = super().server(call)
        if self.control:  # the control of the mapping: toolcancel's own server, as the plain row's
            return server
        server.middleware.append(ToolCalls(ToolRegistry(revision=call.revision)))  # integration
        return server


if __name__ == "__main__":
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    kit.main(Integrated(), Integrated(control=True))
