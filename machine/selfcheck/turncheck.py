"""The model check of turn batches: the scheduler's rules, exhaustively within bounds.

A turn is a batch of one to three model calls, each of one *kind*, run through the real
:class:`~toolcancel.TurnScheduler` and registry.  Every pre-execute, body and post-execute of
every call waits at a gate; gates are released one at a time, either first-reached-first
(``fifo``) or last-reached-first (``lifo``, so overlapping bodies settle out of model order), and
the turn signal is aborted at every gate of every call, before the turn, or never.

What is checked (rule ids from the contract):

* R36 -- no call starts (none of its hooks or body runs) after the turn signal aborted; every
  started body settles before the turn returns (drained, never abandoned), and it returns;
* R37 -- every model call has exactly one ``tool/call`` and one ``tool/result``; calls that never
  started get the revision's synthetic result, after all started calls' results, in model order,
  and never touch the registry (no pre-execute, no notification); R9 is that result's shape;
* R38 -- pre- and post-execute run in model order, results commit in model order, each
  ``tool/result`` entry is the published result without its contexts, and exactly the committed
  results' contexts are logged, in commit order, after all of the turn's results;
* R31 -- every started call is notified exactly once.

The checks (:func:`toolcancel.oracle.judge.turns.turn_problems`, registered there under their rules)
read only what an environment sees of a turn -- the hooks' and the observer's events, the log, when
``run_turn`` returned -- so ``toolcancel conform`` judges another implementation's scheduler
with the very same function (:mod:`toolcancel.oracle.vectors.turns`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ..contract.results import ToolResult, canonical_json, text_block, thaw
from ..oracle.judge import rule_of
from ..oracle.judge.calls import no_late_start_or_success
from ..oracle.judge.turns import TURN_RULES, TurnRecord, turn_call_record, turn_problems
from ..oracle.turn_language import (
    KINDS,
    MAX_CALLS,
    Turn,
    batch_kinds,
    turns,
    turns_of,
)
from ..oracle.vectors.turns import TurnTable, TurnVector, _variant, phase_of
from ..runtime.execution import Execution
from ..runtime.hooks import Accept, Allow, Deny, Next, PostDecision, PreDecision
from ..runtime.signals import AbortController
from ..runtime.virtual_time import VirtualClock, run
from .harness import _idle, quiet_failures

LATE_START: Final = rule_of(no_late_start_or_success)
"""The call check a turn shows (no late start or success once the turn signal aborted)."""

if TYPE_CHECKING:  # the harness loads them when it runs: reading turn vectors (conform) does not
    from ..runtime.registry import ToolRegistry
    from ..runtime.scheduler import ToolCallRequest

@dataclass
class TurnObservation:
    """What the environment saw of one turn, in the form the adapter protocol reports it
    (``spec/vectors/README.md``, turns): the ordered ``events`` the hooks, bodies and observer
    recorded (``{"event", "call"}``; a notification also carries the ``result`` it received),
    the turn's ``log`` entries as data, how many events existed when ``run_turn`` returned
    (``None``: it never did), and whether the turn hung: neither finished nor waited at a gate
    (a fact; what it breaks is the judge's)."""

    turn: Turn
    events: list[dict[str, Any]] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)
    returned: int | None = None
    hung: bool = False
    skipped: dict[str, Any] = field(default_factory=dict)


class TurnHarness:
    """Runs one :class:`Turn` through the real scheduler and registry, recording events."""

    def __init__(self, turn: Turn) -> None:
        self.t = turn
        self.obs = TurnObservation(turn)
        self.waiting: dict[str, asyncio.Future[None]] = {}
        self.turn_signal = AbortController()
        self.aborted = False

    def kind(self, view: Execution) -> str:
        return self.t.kinds[int(view.call_id[1:])]

    def record(self, event: str, view: Execution, **data: Any) -> None:
        self.obs.events.append({"event": event, "call": view.call_id, **data})

    async def gate(self, name: str) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting[name] = fut
        try:
            await fut
        finally:
            self.waiting.pop(name, None)

    def abort(self) -> None:
        if not self.aborted:
            self.aborted = True
            self.obs.events.append({"event": "abort"})
            self.turn_signal.abort("the turn was cancelled")

    async def pre(self, view: Execution, nxt: Next) -> PreDecision:
        self.record("pre", view)
        await self.gate(f"gate:{view.call_id[1:]}:pre")
        self.record("pre_done", view)
        return Deny("not now") if self.kind(view) == "denied" else Allow()

    async def body(self, args: Any, view: Execution) -> Any:
        self.record("body_start", view)
        if self.kind(view) == "defer":
            view.defer_context({"type": "note", "text": f"from {view.call_id}"})
        try:
            await self.gate(f"gate:{view.call_id[1:]}:body")
        finally:
            self.record("body_settle", view)
        if self.kind(view) == "throw":
            raise RuntimeError("tool failed")
        return [text_block(f"done {view.call_id}")]

    async def post(self, view: Execution, result: ToolResult, nxt: Next) -> PostDecision:
        self.record("post", view)
        await self.gate(f"gate:{view.call_id[1:]}:post")
        self.record("post_done", view)
        return Accept()

    def observe(self, view: Execution, result: ToolResult) -> None:
        self.record("notify", view, result=result.to_data())

    async def run(self) -> TurnObservation:
        with quiet_failures():
            return await self._run()

    async def _run(self) -> TurnObservation:
        from ..runtime.registry import ToolRegistry
        from ..runtime.scheduler import ToolCallRequest

        reg = ToolRegistry(revision=self.t.revision)
        reg.add_pre_execute(self.pre)
        reg.add_post_execute(self.post)
        reg.add_observer(self.observe)
        reg.register("tool", self.body)
        self.obs.skipped = reg.results.skipped().to_data()
        calls = [
            ToolCallRequest(f"c{i}", "tool", {"i": i}, exclusive=k == "ok_exclusive")
            for i, k in enumerate(self.t.kinds)
        ]
        if self.t.abort == "before_turn":
            self.abort()
        task = asyncio.ensure_future(self._turn(reg, calls))
        while True:
            await _idle()
            if not self.waiting:
                break
            names = list(self.waiting)
            name = names[0] if self.t.release == "fifo" else names[-1]
            if self.t.abort == name:
                self.abort()
            fut = self.waiting.get(name)
            if fut is not None and not fut.done():
                fut.set_result(None)
        if not task.done():
            self.obs.hung = True
            task.cancel()
        return self.obs

    async def _turn(self, reg: ToolRegistry, calls: list[ToolCallRequest]) -> None:
        from ..runtime.scheduler import TurnScheduler

        scheduler = TurnScheduler(reg, max_concurrency=4)
        log = await scheduler.run_turn(calls, signal=self.turn_signal.signal)
        self.obs.returned = len(self.obs.events)
        self.obs.log = [thaw(e.to_data()) for e in log]


def check_turn(obs: TurnObservation) -> tuple[list[tuple[str, str]], set[str]]:
    """The R31/R36/R37/R38/R9 checks of the module docstring, then each started call's record
    asked the call check a turn shows (:func:`toolcancel.oracle.judge.turns.turn_call_record`:
    no body starts, and no success is published, after the turn signal -- the call's caller
    signal -- aborted): (rule, explanation) pairs, and the rules whose checks could have failed
    on the turn (the turn checks, which read every turn; the call check where a call's caller
    signal aborted)."""
    record = TurnRecord(
        len(obs.turn.kinds), obs.events, obs.log, obs.returned, obs.skipped, obs.hung
    )
    found = turn_problems(record)
    could = set(TURN_RULES)
    for i in range(len(obs.turn.kinds)):
        call = turn_call_record(f"c{i}", obs.events, obs.turn.revision)
        if not call.has("caller_aborted"):
            continue
        could.add(LATE_START)
        late = no_late_start_or_success(call, None)
        if late is not None:
            found.append((late.rule, f"c{i}: {late.why}"))
    return found, could


@dataclass
class TurnTally:
    batches: int = 0
    schedules: int = 0
    violations: list[tuple[str, str, Turn]] = field(default_factory=list)
    violation_count: int = 0
    rules: set[str] = field(default_factory=set)


async def _run_turns(revision: str, kinds: Iterable[tuple[str, ...]]) -> TurnTally:
    tally = TurnTally()
    for batch in kinds:
        tally.batches += 1
        for turn in turns_of(revision, batch):
            obs = await TurnHarness(turn).run()
            tally.schedules += 1
            found, could = check_turn(obs)
            tally.rules |= could
            tally.violation_count += len(found)
            tally.violations.extend(
                (r, why, turn) for r, why in found[: max(0, 20 - len(tally.violations))]
            )
    return tally


def verify_turns(
    revision: str = "seed",
    max_calls: int = MAX_CALLS,
    *,
    kinds: Iterable[tuple[str, ...]] | None = None,
) -> TurnTally:
    """Run every turn batch within bounds (or only the batches of ``kinds``) on one virtual-time
    loop."""
    chosen = batch_kinds(max_calls) if kinds is None else kinds
    return run(_run_turns(revision, chosen), clock=VirtualClock())


# ------------------------------------------------------------------------------------------------
# Turn vectors, generated from the reference
# ------------------------------------------------------------------------------------------------


async def _observe(revision: str, max_calls: int) -> list[tuple[Turn, Any]]:
    return [(t, await TurnHarness(t).run()) for t in turns(revision, max_calls)]


def turn_vectors(revision: str, max_calls: int = MAX_CALLS) -> list[TurnVector]:
    """Every turn within bounds on the reference, kept one per distinct (batch, events, log)."""
    runs = run(_observe(revision, max_calls), clock=VirtualClock())
    table: dict[tuple[str, str], dict[str, dict[str, Mapping[str, Any]]]] = {}
    kept: list[tuple[Turn, Any]] = []
    seen: set[str] = set()
    for turn, obs in runs:
        for i, kind in enumerate(turn.kinds):
            call = f"c{i}"
            variant = _variant(call, obs.events)
            if variant is not None:
                phases = table.setdefault((call, kind), {})
                phases.setdefault(phase_of(call, obs.events), {})[canonical_json(variant)] = variant
        key = canonical_json([list(turn.kinds), obs.events, obs.log])
        if key not in seen:
            seen.add(key)
            kept.append((turn, obs))
    calls: dict[str, dict[str, dict[str, tuple[Mapping[str, Any], ...]]]] = {}
    for call, kind in sorted(table, key=lambda ck: (int(ck[0][1:]), KINDS.index(ck[1]))):
        phases = table[call, kind]
        calls.setdefault(call, {})[kind] = {p: tuple(phases[p].values()) for p in sorted(phases)}
    shared = TurnTable(revision, runs[0][1].skipped, calls)
    return [
        TurnVector(f"{revision}-t{n:05d}", revision, turn, shared)
        for n, (turn, _) in enumerate(kept, 1)
    ]
