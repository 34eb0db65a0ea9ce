"""The MCP Python SDK\'s ``MCPServer`` with ``toolcancel.integrations.mcp``:
adapter_mcp_sdk__auto.py's row.

    toolcancel conform --revision seed --adapter python \\
        examples/runtimes/adapter_mcp_sdk__auto__integrated.py

The server's tool requests run through a ``ToolRegistry`` of the vector's revision (the
integration is server middleware); the line that puts it in ends with ``# integration``, and
without it this is the plain row.  ``--control`` puts the same middleware in front of
toolcancel's own server.
"""

from __future__ import annotations

import logging
from typing import Any

from adapter_mcp_sdk__auto import McpSdkAuto
from toolcancel import ToolRegistry
from toolcancel import runtimes as kit
from toolcancel.integrations.mcp import ToolCalls


class Integrated(McpSdkAuto):
    implementation = f"{McpSdkAuto.implementation} + toolcancel.integrations.mcp"

    def server(self, call: kit.Call) -> Any:
        server = super().server(call)
        server.middleware.append(ToolCalls(ToolRegistry(revision=call.revision)))  # integration
        return server


if __name__ == "__main__":
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    kit.main(Integrated(), Integrated(control=True))
