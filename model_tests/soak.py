"""A seeded, reproducible soak: many concurrent calls in one loop, nothing lost or leaked.

Every call gets a random shape (pre-execute decision, 0-2 around wrappers that may replace the
slot or wait, a body that is quick, slow, cooperative or uncooperative, sometimes throwing,
sometimes deferring a context, sometimes under a timeout budget) and a random fate (never
cancelled, its caller aborted after a random delay, its wrapper signal aborted, or the task
awaiting it cancelled).  Time is virtual, so thousands of calls with waits of minutes finish in
seconds and every run with the same seed is the same run.

What must hold when the loop is quiet again (:func:`check`):

* every call materialized exactly once, and its observer got the object ``execute()`` returned;
* every body that started had settled before its call's result was published;
* no caller or wrapper signal keeps a listener; no task is left pending;
* the memory the run allocated is given back (``tracemalloc``, within a small slack).
"""

from __future__ import annotations

import asyncio
import gc
import random
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolcancel import (
    AbortController,
    Accept,
    Allow,
    Deny,
    Execution,
    ToolError,
    ToolRegistry,
    ToolResult,
    install_timeout_policy,
)
from toolcancel.runtime.cooperate import aborted
from toolcancel.runtime.virtual_time import VirtualClock, run
from toolcancel.selfcheck.harness import quiet_failures


@dataclass
class SoakReport:
    calls: int
    finished: int = 0
    problems: list[str] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)
    leaked_bytes: int = 0
    seconds_virtual: float = 0.0
    task_cancellations: int = 0


@dataclass
class _Shape:
    pre: str
    wrappers: tuple[str, ...]
    body: str
    budget: bool
    fate: str
    delay: float


def _shape(rng: random.Random) -> _Shape:
    fates = ["never", "caller", "caller", "wrapper", "task"]
    return _Shape(
        pre=rng.choice(["allow"] * 6 + ["deny", "wait"]),
        wrappers=tuple(rng.choice(["delegate", "replace", "wait"])
                       for _ in range(rng.randint(0, 2))),
        body=rng.choice(["quick", "slow", "slow", "stubborn", "throw", "defer"]),
        budget=rng.random() < 0.2,
        fate=rng.choice(fates),
        delay=rng.uniform(0, 3),
    )


async def _soak(n: int, seed: int, report: SoakReport) -> None:
    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    shapes: dict[str, _Shape] = {}
    notified: dict[str, int] = {}
    returned: dict[str, ToolResult] = {}
    pending_bodies: dict[str, int] = {}
    signals: list[tuple[str, Any]] = []
    wrapper_ctls: dict[str, AbortController] = {}
    reg = ToolRegistry()

    def shape(view: Execution) -> _Shape:
        return shapes[view.call_id]

    async def pre(view: Execution, nxt: Callable[[], Any]) -> Any:
        s = shape(view)
        if s.pre == "wait":
            await asyncio.sleep(1)
        return Deny("no") if s.pre == "deny" else Allow()

    def wrapper(i: int) -> Callable[[Execution, Callable[[], Any]], Any]:
        async def around(view: Execution, nxt: Callable[[], Any]) -> ToolResult:
            s = shape(view)
            kind = s.wrappers[i] if i < len(s.wrappers) else "delegate"
            upstream = view.signal
            if kind == "wait":
                await asyncio.sleep(0.5)
            if kind == "replace":
                ctl = wrapper_ctls.setdefault(view.call_id, AbortController())
                signals.append((f"{view.call_id} wrapper", ctl.signal))
                view.signal = ctl.signal
            try:
                result: ToolResult = await nxt()
                return result
            finally:
                view.signal = upstream
        return around

    async def body(args: Any, view: Execution) -> Any:
        s = shape(view)
        pending_bodies[view.call_id] = pending_bodies.get(view.call_id, 0) + 1
        try:
            if s.body == "defer":
                view.defer_context({"type": "note", "text": view.call_id})
            if s.body in ("slow", "defer"):
                sig = view.signal  # cooperative: settles when its signal aborts
                if sig is None:
                    await asyncio.sleep(5)
                else:
                    waiter = asyncio.ensure_future(aborted(sig))
                    try:
                        await asyncio.wait([waiter], timeout=5)
                    finally:  # finished its work first (or is torn down): leave nothing behind
                        waiter.cancel()
            elif s.body == "stubborn":
                await asyncio.sleep(4)  # ignores its signal: the call must wait for it
            if s.body == "throw":
                raise ToolError("soak failure", code="SOAK")
            return [{"type": "text", "text": "ok"}]
        finally:
            pending_bodies[view.call_id] -= 1

    async def post(view: Execution, result: ToolResult, nxt: Callable[[], Any]) -> Any:
        return Accept()

    def observe(view: Execution, result: ToolResult) -> None:
        notified[view.call_id] = notified.get(view.call_id, 0) + 1
        if pending_bodies.get(view.call_id, 0):
            report.problems.append(f"{view.call_id}: published while its body was running")
        kind = view.path[-1].outcome or "none"
        report.outcomes[kind] = report.outcomes.get(kind, 0) + 1
        returned[view.call_id] = result

    reg.add_pre_execute(pre)
    reg.add_around(wrapper(0))
    reg.add_around(wrapper(1))
    install_timeout_policy(reg)
    reg.add_post_execute(post)
    reg.add_observer(observe)
    reg.register("slow", body, timeout_ms=2500)
    reg.register("plain", body)

    async def one(i: int) -> None:
        call_id = f"s{i}"
        s = _shape(rng)
        shapes[call_id] = s
        caller = AbortController()
        signals.append((f"{call_id} caller", caller.signal))
        task = asyncio.ensure_future(reg.execute("slow" if s.budget else "plain", {"i": i},
                                                 signal=caller.signal, call_id=call_id))
        if s.fate != "never":
            await asyncio.sleep(s.delay)
            if s.fate == "caller":
                caller.abort("soak caller")
            elif s.fate == "wrapper" and call_id in wrapper_ctls:
                wrapper_ctls[call_id].abort("soak wrapper")
            elif s.fate == "task" and task.cancel():  # False once the call returned
                report.task_cancellations += 1
        try:
            result = await task
        except asyncio.CancelledError:
            if s.fate != "task":
                report.problems.append(f"{call_id}: CancelledError without a task cancellation")
            elif not task.cancelled():
                report.problems.append(f"{call_id}: the cancelled task did not end cancelled")
            return
        if s.fate == "task" and task.cancelling():
            report.problems.append(f"{call_id}: the task was cancelled but returned a result")
        report.finished += 1
        if returned.get(call_id) is not result:
            report.problems.append(f"{call_id}: observer and caller got different objects")

    start = loop.time()
    await asyncio.gather(*(one(i) for i in range(n)))
    report.seconds_virtual = loop.time() - start
    for call_id in shapes:
        if notified.get(call_id) != 1:
            report.problems.append(f"{call_id}: notified {notified.get(call_id, 0)} times")
    for what, sig in signals:
        if sig.listener_count:
            report.problems.append(f"{what} keeps {sig.listener_count} listener(s)")
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    if others:
        report.problems.append(f"{len(others)} task(s) left pending")


def soak(n: int = 1000, seed: int = 1) -> SoakReport:
    """Run the soak.  Memory is compared around the run, after a warm-up run of the same size
    has filled the one-time caches and high-water marks (the contract, and asyncio's global
    task set, whose hash table never shrinks), so what remains is what leaked.  The registry's
    failure warnings are silenced: a capturing log handler (pytest's) keeps every record, with
    the traceback and frames of its exception, which is not the registry's memory."""
    with quiet_failures():
        return _soak_measured(n, seed)


def _soak_measured(n: int, seed: int) -> SoakReport:
    run(_soak(n, seed + 1, SoakReport(calls=n)), clock=VirtualClock())
    report = SoakReport(calls=n)
    gc.collect()
    tracemalloc.start()
    try:
        before = _held()
        run(_soak(n, seed, report), clock=VirtualClock())
        gc.collect()
        after = _held()
    finally:
        tracemalloc.stop()
    report.leaked_bytes = after - before
    return report


def _held() -> int:
    """Bytes traced, without asyncio's global registry of tasks: a weak set whose hash table
    grows and shrinks with every earlier test's tasks, not with anything this run keeps."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, "*/_weakrefset.py")]
    )
    return sum(stat.size for stat in snapshot.statistics("filename"))
