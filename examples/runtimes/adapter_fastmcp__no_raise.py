"""FastMCP 4, a call read with ``call_tool(..., raise_on_error=False)``: an error result returned.

    toolcancel conform --revision seed --adapter python \\
        examples/runtimes/adapter_fastmcp__no_raise.py

Everything else is adapter_fastmcp.py's.
"""

from __future__ import annotations

import logging
from importlib.metadata import version

from adapter_fastmcp import FastMcp
from toolcancel import runtimes as kit

FastMcpNoRaise = kit.row(
    FastMcp,
    f"fastmcp {version('fastmcp')} (in-memory Client, raise_on_error=False)",
    raise_on_error=False,
)

if __name__ == "__main__":
    logging.getLogger("fastmcp").setLevel(logging.CRITICAL)
    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    kit.main(FastMcpNoRaise(), FastMcpNoRaise(control=True))
