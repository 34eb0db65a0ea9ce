"""The model check of turn batches: the scheduler's rules, exhaustively within bounds.

A turn is a batch of one to three model calls, each of one *kind*, run through the real
:class:`~toolcancel.TurnScheduler` and registry.  Every pre-execute, body and post-execute of
every call waits at a gate; gates are released one at a time, either first-reached-first
(``fifo``) or last-reached-first (``lifo``, so overlapping bodies settle out of model order), and
the turn signal is aborted at every gate of every call, before the turn, or never.

What is checked (rule ids from the contract):

* R36 -- no call is prepared after the turn signal aborted; every started body settles before the
  turn returns (drained, never abandoned);
* R37 -- every model call has exactly one ``tool/call`` and one ``tool/result``; calls that never
  started get the revision's synthetic result, after all started calls' results, in model order,
  and never touch the registry (no pre-execute, no notification); R9 is that result's shape;
* R38 -- pre- and post-execute run in model order, results commit in model order, contexts are
  logged after all of the turn's results;
* R31 -- every started call is notified exactly once.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .registry import Accept, Allow, Deny, Execution, Next, PostDecision, PreDecision, ToolRegistry
from .results import ToolResult, text_block
from .scenario import _idle, quiet_failures
from .scheduler import ToolCallRequest, TurnScheduler
from .signals import AbortController
from .virtual_time import VirtualClock, run

KINDS = ("ok", "ok_exclusive", "defer", "throw", "denied")
"""What a call of a batch does: succeed; succeed as an exclusive call; defer a context and succeed;
throw; be denied by pre-execute."""

MAX_CALLS = 3
RELEASES = ("fifo", "lifo")


@dataclass(frozen=True)
class Turn:
    revision: str
    kinds: tuple[str, ...]
    abort: str  # never | before_turn | gate:<call>:<pre|body|post>
    release: str = "fifo"

    def as_code(self) -> str:
        return f"Turn({self.revision!r}, {self.kinds!r}, {self.abort!r}, {self.release!r})"


def batch_kinds(max_calls: int = MAX_CALLS) -> Iterator[tuple[str, ...]]:
    """Every batch within bounds: one to ``max_calls`` calls, each of every kind."""
    for n in range(1, max_calls + 1):
        yield from itertools.product(KINDS, repeat=n)


def turns(revision: str = "seed", max_calls: int = MAX_CALLS) -> Iterator[Turn]:
    """Every batch within bounds, with every abort point and release order."""
    for kinds in batch_kinds(max_calls):
        yield from turns_of(revision, kinds)


def turns_of(revision: str, kinds: tuple[str, ...]) -> Iterator[Turn]:
    """One batch with every abort point and release order."""
    gates = [
        f"gate:{i}:{g}"
        for i, k in enumerate(kinds)
        for g in (("pre", "post") if k == "denied" else ("pre", "body", "post"))
    ]
    for abort in ("never", "before_turn", *gates):
        for release in RELEASES:
            yield Turn(revision, kinds, abort, release)


@dataclass
class TurnObservation:
    turn: Turn
    log: list[tuple[Any, ...]] = field(default_factory=list)
    entries: list[Any] = field(default_factory=list)
    notified: dict[str, int] = field(default_factory=dict)
    problems: list[tuple[str, str]] = field(default_factory=list)
    skipped_json: str = ""


class TurnHarness:
    def __init__(self, turn: Turn) -> None:
        self.t = turn
        self.obs = TurnObservation(turn)
        self.waiting: dict[str, asyncio.Future[None]] = {}
        self.turn_signal = AbortController()
        self.aborted = False

    def kind(self, view: Execution) -> str:
        return self.t.kinds[int(view.call_id[1:])]

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
            self.obs.log.append(("abort",))
            self.turn_signal.abort("the turn was cancelled")

    async def pre(self, view: Execution, nxt: Next) -> PreDecision:
        self.obs.log.append(("pre", view.call_id, self.aborted))
        await self.gate(f"gate:{view.call_id[1:]}:pre")
        return Deny("not now") if self.kind(view) == "denied" else Allow()

    async def body(self, args: Any, view: Execution) -> Any:
        self.obs.log.append(("body_start", view.call_id))
        if self.kind(view) == "defer":
            view.defer_context({"type": "note", "text": f"from {view.call_id}"})
        try:
            await self.gate(f"gate:{view.call_id[1:]}:body")
        finally:
            self.obs.log.append(("body_settle", view.call_id))
        if self.kind(view) == "throw":
            raise RuntimeError("tool failed")
        return [text_block(f"done {view.call_id}")]

    async def post(self, view: Execution, result: ToolResult, nxt: Next) -> PostDecision:
        self.obs.log.append(("post", view.call_id))
        await self.gate(f"gate:{view.call_id[1:]}:post")
        return Accept()

    def observe(self, view: Execution, result: ToolResult) -> None:
        self.obs.notified[view.call_id] = self.obs.notified.get(view.call_id, 0) + 1

    async def run(self) -> TurnObservation:
        with quiet_failures():
            return await self._run()

    async def _run(self) -> TurnObservation:
        reg = ToolRegistry(revision=self.t.revision)
        reg.add_pre_execute(self.pre)
        reg.add_post_execute(self.post)
        reg.add_observer(self.observe)
        reg.register("tool", self.body)
        self.obs.skipped_json = reg.results.skipped().to_json()
        calls = [
            ToolCallRequest(f"c{i}", "tool", {"i": i}, exclusive=k == "ok_exclusive")
            for i, k in enumerate(self.t.kinds)
        ]
        if self.t.abort == "before_turn":
            self.abort()
        task = asyncio.ensure_future(
            TurnScheduler(reg, max_concurrency=4).run_turn(calls, signal=self.turn_signal.signal)
        )
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
            self.obs.problems.append(("R36", "the turn neither finished nor waited at a gate"))
            task.cancel()
            return self.obs
        self.obs.entries = list(task.result())
        return self.obs


def check_turn(obs: TurnObservation) -> list[tuple[str, str]]:
    """The R31/R36/R37/R38/R9 checks of the module docstring; (rule, explanation) pairs."""
    t, out = obs.turn, list(obs.problems)
    ids = [f"c{i}" for i in range(len(t.kinds))]
    for e in obs.log:
        if e[0] == "pre" and e[2]:
            out.append(("R36", f"{e[1]} was prepared after the turn signal aborted"))
    settled = {e[1] for e in obs.log if e[0] == "body_settle"}
    for e in obs.log:
        if e[0] == "body_start" and e[1] not in settled:
            out.append(("R36", f"the body of {e[1]} was not drained before the turn returned"))
    started = [e[1] for e in obs.log if e[0] == "pre"]
    if started != ids[: len(started)]:
        out.append(("R38", f"pre-execute ran in order {started}, not model order"))
    posts = [e[1] for e in obs.log if e[0] == "post"]
    if posts != sorted(posts, key=ids.index):
        out.append(("R38", f"post-execute ran in order {posts}, not model order"))
    calls = [e.call_id for e in obs.entries if e.kind == "tool/call"]
    results = [e for e in obs.entries if e.kind == "tool/result"]
    if sorted(calls) != ids or sorted(r.call_id for r in results) != ids:
        out.append(
            (
                "R37",
                f"calls {calls} and results {[r.call_id for r in results]} are "
                f"not one pair per model call {ids}",
            )
        )
        return out
    result_order = [r.call_id for r in results]
    expected_order = started + [c for c in ids if c not in started]
    if result_order != expected_order:
        out.append(("R37", f"results committed as {result_order}, expected {expected_order}"))
    last_result = max(i for i, e in enumerate(obs.entries) if e.kind == "tool/result")
    if any(e.kind == "context" for e in obs.entries[:last_result]):
        out.append(("R38", "a context was logged before the turn's last result"))
    for r in results:
        if r.call_id not in started:
            if _json(r.payload) != obs.skipped_json:
                out.append(("R9", f"{r.call_id} never started but its result is {r.payload}"))
            if obs.notified.get(r.call_id):
                out.append(("R37", f"{r.call_id} never started but was notified"))
        elif obs.notified.get(r.call_id) != 1:
            out.append(("R31", f"{r.call_id} was notified {obs.notified.get(r.call_id, 0)} times"))
    return out


def _json(payload: Any) -> str:
    from .results import canonical_json

    return canonical_json(payload)


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
            found = check_turn(obs)
            tally.violation_count += len(found)
            tally.violations.extend(
                (r, why, turn) for r, why in found[: max(0, 20 - len(tally.violations))]
            )
    if tally.schedules:
        tally.rules = {"R9", "R31", "R36", "R37", "R38"}
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
