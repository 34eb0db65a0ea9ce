"""The oracle room: what an implementer in any language runs against their registry.

For implementers.  Its sub-rooms, in the order a verdict flows through them:

* the languages -- ``scenario_language`` (one call and when it is cancelled), ``turn_language``
  (a batch of model calls and when the turn is cancelled) and ``observation`` (what the
  environment saw of one run): data, with no way to run one;
* ``vectors`` -- the vectors' file format: a scenario or a turn with what the contract allows,
  read, validated and written (``vectors.turns`` for turns);
* ``judge`` -- the one judge: each rule's observable meaning, written once under its rule id, and
  the trace checker that replays a trace through the contract's machine;
* ``conform`` -- the run against an adapter: its protocol, its process, one answer judged
  against one vector, the report; with the adapters' capabilities and declared deviations.

Theory of operation: a vector goes out to an adapter, an answer comes back, becomes one record
(the canonical trace lines plus the environment's observations) and the judge's checks decide
it; coverage and attribution are read off the checks, never kept by hand.  Invariant: the oracle
runs no registry.  It imports the contract room only, never the runtime (the independence
contract in ``.importlinter``): what plays a scenario or a turn on *our* registry is
self-verification's (:mod:`toolcancel.selfcheck.harness`, :mod:`toolcancel.selfcheck.turncheck`),
and a declared deviation whose model runs a registry gets that model handed in
(:mod:`toolcancel.selfcheck.models`).  A contributor may add a value to a language (and its
harness support, in selfcheck), a check to the judge under its rule, a field to the protocol
(with its README section); never a rule's meaning outside the judge.
"""
