"""Where a plain call's time goes beyond a bare task, item by item: ``python bench/accounting.py``.

Run with each venv's interpreter (``.venv``, ``.venv-compiled``, ``.venv-3.12`` ...): the figures
are that Python's and that build's.  One process, the rungs' rounds interleaved (rung A, B, C, D,
E, then again), CPU time (``time.process_time``), medians: what other processes on a shared
machine do falls on every rung alike.  Each rung adds one thing to the one before, so the
differences are the items of the account:

A. bare ``await asyncio.create_task(body())`` (the benchmark's unit);
B. the body awaited in the awaiting task (no task at all: the floor);
C. + what the contract asks of the call's data, still in the awaiting task: the argument
   snapshot, the caller's signal C captured with its listener, the checks before and after the
   body (C1-C4), one frozen result (``minimal.py``'s pipeline without its task);
D. + a task of its own, awaited through a future (Python binding P1, P2: cancelling the task that
   awaits the call never reaches the body, which runs to quiescence): the minimal pipeline;
E. the registry: D's guarantees, plus the machine's transitions and what the registry promises
   beyond the contract's outcome;

and, beside them, the hooked shape (one hook of each kind) through both pipelines.

For an interpreted registry, the largest single items are then priced by taking each out in
rounds interleaved with the registry as it is (CPU time, not a profiler's share), and E - D is
split further by a ``cProfile`` of the registry's plain call (self time per function, grouped by
what the function does, scaled to E's measured cost).
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from functools import partial
from typing import Any

import minimal  # bench/ is the script's folder, first on the path
from test_overhead import body, hooked, plain
from toolcancel import AbortController

BATCH = 1000
ROUNDS = 15

GROUPS: list[tuple[str, bool, Callable[[str, str], bool]]] = [
    # (what, required by the contract, which functions: (file, function) -> bool)
    ("the machine's transitions (steps through the compiled contract)", True,
     lambda f, n: f.endswith(("stepping.py", "compiled.py")) and n.startswith(("offer", "take"))),
    ("argument snapshot and the frozen result", True,
     lambda f, n: f.endswith("results.py")),
    ("the caller's signal C, its listener, the fused signal", True,
     lambda f, n: f.endswith(("signals.py", "fusion.py"))),
    ("the call's own task and its wake-up (P1, P2), the event loop", True,
     lambda f, n: f.endswith(("binding.py", "owning.py"))
     or "asyncio" in f or "selectors" in f or n in ("<method 'run' of '_contextvars.Context' "
                                                    "objects>",)),
    ("awaiting the body, the stages' frames (run, base_dispatch, publish)", True,
     lambda f, n: f.endswith("driver.py")),
    ("the call's entry: its object, id, plan, view, first node; in_flight()'s listing", False,
     lambda f, n: f.endswith(("stepping.py", "toolregistry.py", "plan.py", "execution.py",
                              "registry.py"))),
    ("the clock read at each state change (in_flight()'s time in state)", False,
     lambda f, n: n in ("_clock_of", "<built-in method time.monotonic>", "time")
     or f.endswith("eventloop.py")),
]


def _bare() -> Callable[[], Coroutine[Any, Any, None]]:
    async def batch() -> None:
        for _ in range(BATCH):
            await asyncio.create_task(body({}, None))

    return batch


def _inline() -> Callable[[], Coroutine[Any, Any, None]]:
    async def batch() -> None:
        for _ in range(BATCH):
            await body({}, None)

    return batch


def _contract_data() -> Callable[[], Coroutine[Any, Any, None]]:
    """The minimal pipeline's ``execute`` without the task of its own."""
    pipe = plain(minimal.Pipeline)
    signal = AbortController().signal

    async def batch() -> None:
        for _ in range(BATCH):
            own = AbortController()
            follow = partial(minimal._follow, own)
            signal.add_listener(follow)
            view = minimal.View(minimal.freeze({"q": 1}), own.signal)
            result = await pipe._run("t", view, own.signal)
            signal.remove_listener(follow)
            for observer in pipe.observers:
                observer(view, result)

    return batch


def _execute(
    factory: Callable[..., Any], shape: Callable[..., Any] = plain
) -> Callable[[], Coroutine[Any, Any, None]]:
    reg = shape(factory)
    signal = AbortController().signal

    async def batch() -> None:
        for _ in range(BATCH):
            await reg.execute("t", {"q": 1}, signal=signal)

    return batch


def rungs() -> dict[str, float]:
    """Microseconds of CPU per call of each rung: medians of interleaved rounds."""
    from toolcancel import ToolRegistry

    batches = {"A": _bare(), "B": _inline(), "C": _contract_data(),
               "D": _execute(minimal.Pipeline), "E": _execute(ToolRegistry),
               "hooked minimal": _execute(minimal.Pipeline, hooked),
               "hooked": _execute(ToolRegistry, hooked)}
    loop = asyncio.new_event_loop()
    times: dict[str, list[float]] = {k: [] for k in batches}
    for rnd in range(ROUNDS + 2):
        for k, batch in batches.items():
            start = time.process_time()
            loop.run_until_complete(batch())
            if rnd >= 2:  # two warm-up rounds
                times[k].append((time.process_time() - start) / BATCH * 1e6)
    loop.close()
    return {k: statistics.median(v) for k, v in times.items()}


@contextlib.contextmanager
def _without(owner: Any, name: str, stand_in: Any = None) -> Iterator[None]:
    """``owner.name`` replaced by ``stand_in`` (``None``: removed) while the block runs."""
    real = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    if stand_in is None:
        delattr(owner, name)
    else:
        setattr(owner, name, stand_in)
    try:
        yield
    finally:
        setattr(owner, name, real)


def items() -> list[tuple[str, bool, float, float]]:
    """What single items of an interpreted registry's call cost, each measured by taking it out
    (a stand-in that does nothing) in rounds interleaved with the registry as it is: ``(item,
    required by the contract, us per plain call, us per hooked call)``.  A taken-out item is
    not a registry that keeps its promises: these are the prices of those promises."""
    from toolcancel.contract.results import Results
    from toolcancel.runtime import binding, stepping

    loop = asyncio.new_event_loop()

    def clock_and_timers() -> tuple[Callable[[], float], Any]:
        return time.monotonic, loop.call_later

    async def unowned(call: Any, pipeline: Any, ended: Any) -> Any:
        return await pipeline  # the task's coroutine with no warning of its own

    out: list[tuple[str, bool, Callable[[], Any]]] = [
        ("the result's deep-frozen snapshot, Results.materialize (R30)", True,
         lambda: _without(Results, "materialize", lambda self, result: result)),
        ("the arguments' deep-frozen snapshot at entry (R11)", True,
         lambda: _without(stepping, "snapshot", lambda value, path="$": value)),
        ("finding the loop's clock and timers at entry (in_flight()'s time in state)", False,
         lambda: _without(stepping, "clock_and_timers", clock_and_timers)),
        ("PendingCall.__del__, the warning of a call never awaited", False,
         lambda: _without(binding.PendingCall, "__del__")),
    ]
    if sys.version_info >= (3, 12):  # before, owned() also wakes the awaiting task
        out.append(("owned(), the task's coroutine that names a call its closed loop left",
                    False, lambda: _without(binding, "owned", unowned)))
    from toolcancel import ToolRegistry

    batches = {"plain": _execute(ToolRegistry), "hooked": _execute(ToolRegistry, hooked)}

    def cost(batch: Callable[[], Coroutine[Any, Any, None]]) -> float:
        start = time.process_time()
        loop.run_until_complete(batch())
        return (time.process_time() - start) / BATCH * 1e6

    # Each round pairs the registry as it is with the item taken out, back to back, in either
    # order: the median of those paired differences, so drift in the machine's load cancels.
    saved: dict[tuple[str, str], list[float]] = {}
    for rnd in range(2 * ROUNDS + 1):
        for what, _, without in out:
            for shape, batch in batches.items():
                if rnd % 2:
                    whole = cost(batch)
                    with without():
                        less = cost(batch)
                else:
                    with without():
                        less = cost(batch)
                    whole = cost(batch)
                if rnd:  # a warm-up round
                    saved.setdefault((what, shape), []).append(whole - less)
    loop.close()
    med = {k: statistics.median(v) for k, v in saved.items()}
    return [(what, required, med[what, "plain"], med[what, "hooked"])
            for what, required, _ in out]


def profile_split(registry_us: float) -> list[tuple[str, bool, float]]:
    """E's cost by group (interpreted only): self time under cProfile, scaled to ``registry_us``
    per call.  The benchmark's own loop and the body are left out (the bare task has them)."""
    from toolcancel import ToolRegistry

    loop = asyncio.new_event_loop()
    batch = _execute(ToolRegistry)
    loop.run_until_complete(batch())
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(10):
        loop.run_until_complete(batch())
    prof.disable()
    loop.close()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]

    def owner(key: tuple[str, int, str], depth: int = 0) -> list[tuple[float, str, str]]:
        """``(share, file, function)``: a built-in's or a helper module's time is its callers'."""
        file, _line, name = key
        callers = stats[key][4]
        if (file == "~" or file.endswith("_weakrefset.py")) and callers and depth < 4:
            calls = sum(c[1] for c in callers.values())
            return [(c[1] / calls * share, f, n) for k, c in callers.items()
                    for share, f, n in owner(k, depth + 1)]
        return [(1.0, file, name)]

    spent: dict[str, float] = {}
    total = 0.0
    for key, (_cc, _nc, tottime, _ct, _callers) in stats.items():
        for share, file, name in owner(key):
            if file.endswith(("accounting.py", "test_overhead.py")) or "disable" in name:
                continue
            total += share * tottime
            what = next((g for g, _, match in GROUPS if match(file, name)), "other")
            spent[what] = spent.get(what, 0.0) + share * tottime
    required = {g: r for g, r, _ in GROUPS}
    return sorted(
        ((g, required.get(g, False), registry_us * s / total) for g, s in spent.items()),
        key=lambda row: -row[2],
    )


def main() -> None:
    from toolcancel.runtime import registry

    compiled = registry.compiled()
    us = rungs()
    build = "compiled (mypyc)" if compiled else "interpreted"
    print(f"Python {sys.version.split()[0]}, {build}: CPU us per plain call, medians of {ROUNDS} "
          f"interleaved rounds of {BATCH}")
    steps = [
        ("A", "bare task (the unit)", None),
        ("B", "body awaited in the awaiting task (no task)", None),
        ("C", "+ argument snapshot, C captured with its listener, C1-C4, one frozen result",
         True),
        ("D", "+ a task of its own through a future (P1, P2): the minimal pipeline", True),
        ("E", "the registry: + the machine's transitions and the registry's own promises",
         None),
    ]
    prev = None
    for key, what, _ in steps:
        delta = "" if prev is None else f"{us[key] - us[prev]:+7.2f}"
        print(f"  {key}  {us[key]:6.2f} us  {us[key] / us['A']:5.2f}x  {delta:>8}  {what}")
        prev = key
    print(f"  beyond the bare task: {us['E'] - us['A']:+.2f} us; the contract's share (D - A, "
          f"the minimal pipeline's): {us['D'] - us['A']:+.2f} us; the registry's beyond it "
          f"(E - D): {us['E'] - us['D']:+.2f} us")
    print(f"  hooked (one hook of each kind): the registry {us['hooked']:.2f} us "
          f"({us['hooked'] / us['A']:.2f}x), the minimal pipeline {us['hooked minimal']:.2f} us "
          f"({us['hooked minimal'] / us['A']:.2f}x)")
    if not compiled:
        print("  single items, each taken out, paired with the registry as it is round by round "
              "(median us per call; 'yes': the contract requires it):")
        print("     plain  hooked")
        for what, required, plain_us, hooked_us in items():
            whose = "yes" if required else "no "
            print(f"    {plain_us:6.2f}  {hooked_us:6.2f}  {whose}  {what}")
        print("  E by group (cProfile self time scaled to E; 'yes': the contract requires it):")
        for group, required, cost in profile_split(us["E"]):
            print(f"    {cost:6.2f} us  {'yes' if required else 'no ':3}  {group}")


if __name__ == "__main__":
    main()
