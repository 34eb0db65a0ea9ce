"""The runtime room: what a Python program that embeds the registry imports.

For embedders.  What is in it: WHATWG-style abort signals (``signals``), deadlines and the
timeout policy (``deadline``, ``timeout_policy``), the registry's public face and its per-call
driver (``toolregistry``, ``registry``, ``native`` for the compiled driver), what hooks, guards
and wrappers exchange with it (``hooks``, ``execution``, ``fusion``, ``approval``), the event
loop a call runs on (``eventloop``), the turn scheduler (``scheduler``), the helpers that make a
body cooperative (``cooperate``), virtual time for tests (``virtual_time``) and the MCP server
(``mcp``).  The names an embedder needs are re-exported by ``toolcancel`` itself.

May import: the contract room.  Never the oracle, self-verification, teaching or the command
line: an embedder's import pulls in no checker, verifier or diagram.
"""
