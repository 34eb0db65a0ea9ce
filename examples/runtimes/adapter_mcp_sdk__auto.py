"""The MCP Python SDK's ``MCPServer`` called by its in-memory ``Client`` in its default mode.

    toolcancel conform --revision seed --adapter python \\
        examples/runtimes/adapter_mcp_sdk__auto.py

``Client(server)`` -- ``mode="auto"``, what a user gets without asking -- drives the server's
modern per-request path, not the JSON-RPC stream loop ``mode="legacy"`` drives.  Everything else
is adapter_mcp_sdk.py's, ``--control`` (toolcancel's server behind the same client) included.
"""

from __future__ import annotations

import logging
from importlib.metadata import version

from adapter_mcp_sdk import McpSdk
from toolcancel import runtimes as kit

McpSdkAuto = kit.row(
    McpSdk, f"mcp {version('mcp')} MCPServer (in-memory Client, default mode='auto')", mode="auto"
)

if __name__ == "__main__":
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    kit.main(McpSdkAuto(), McpSdkAuto(control=True))
