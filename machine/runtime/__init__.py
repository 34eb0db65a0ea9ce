"""The runtime room: what a Python program that embeds the registry imports.

For embedders.  What is in it: WHATWG-style abort signals (``signals``), deadlines and the
timeout policy (``deadline``, ``timeout_policy``), the registry's public face and its per-call
driver (``toolregistry``, ``registry``, ``plan``, ``stepping``, ``driver``, ``binding``,
``owning``), what hooks, guards and wrappers exchange with it (``hooks``, ``execution``,
``fusion``, ``approval``), the event loop a call runs on (``eventloop``), the turn scheduler
(``scheduler``), the helpers that make a body cooperative (``cooperate``), virtual time for tests
(``virtual_time``) and the MCP server (``mcp``).  The names an embedder needs are re-exported by
``toolcancel`` itself.

What flows through it, for one call::

    ToolRegistry.execute()/begin()          (toolregistry: validates, then hands over)
      -> CallPlan, frozen at entry          (plan: hooks, table, retry, trace, drain warning)
      -> _Call.enter()                      (stepping: snapshot, capture C, list in flight)
      -> PendingCall awaited                (binding: the call's own task; owning: its coroutine)
      -> _Call.run(): pre, approval, guards, around, body, post, publish   (driver)
      -> one frozen ToolResult, to the caller and to each observer once

Invariants a change must keep:

* the contract decides, the driver performs: every decision is the compiled machine's answer to
  an ``offer`` (``toolcancel.contract.compiled``); no stage tests a result to decide an outcome
  (which results a cancellation replaces is ``publishes_over`` in contract.toml);
* a call reads its registry only through its plan: no module of the call touches ``registry._``,
  and the registry imports the call, never the reverse;
* the caller's signal C is captured at entry, out of every hook's reach; the view's slot is
  written by a wrapper (``Execution.signal``) or by the registry's ``Execution.hold`` only;
* a started body is awaited to quiescence, never raced; exactly one result is published;
* asyncio and trio through their public APIs only; a faster private path must prove itself at
  import and fall back to a tested public one.

What a contributor may touch: a stage's code in ``driver`` (keeping it a thin driver), the public
face in ``toolregistry`` (every new registration input goes into :class:`~.plan.CallPlan`), the
helpers, signals and MCP freely.  ``stepping``, ``driver`` and ``binding`` are compiled with mypyc
in a ``TOOLCANCEL_COMPILE=1`` build: the constraints that puts on them are stated once, in
``setup.py`` beside ``COMPILED``.

May import: the contract room.  Never the oracle, self-verification, teaching or the command
line: an embedder's import pulls in no checker, verifier or diagram.
"""
