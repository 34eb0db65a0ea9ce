"""The contract inside the agent runtimes people use: one module per runtime, at its tool boundary.

For Python programs that run their tools through an agent runtime (pydantic-ai, LangGraph, the
OpenAI Agents SDK, an MCP server) rather than calling a registry themselves.  Each module,
``toolcancel.integrations.<runtime>``, puts a :class:`~toolcancel.runtime.ToolRegistry` at that
runtime's tool boundary through the runtime's *public* extension points only (its toolsets or
tool wrappers, tool-call wrappers, middleware, run hooks), so that a call the runtime cancels
keeps the contract: the caller's signal is the runtime's own cancellation, a started body is
awaited to quiescence, a late success is published -- and recorded by the runtime -- as
ABORTED, and where the runtime cannot wait the program is given a way to.

Each module needs its runtime's extra (``pip install 'toolcancel[<runtime>]'``) and imports it
at module level: importing this package imports no runtime.  The same vectors that judge a
runtime plain (``examples/runtimes/adapter_<runtime>.py``) judge it with its integration, and
docs/REAL-WORLD.md shows both rows.

May import: the contract and runtime rooms, and the runtime it integrates.  Nothing in the
package imports it but the runtime adapters and the examples.
"""
