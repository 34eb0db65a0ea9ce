"""A call reads its registry only through the plan it took at entry.

Why this test exists: the call's modules used to read 13 private fields of the registry, 38
times, and the registry and the call named each other's types in a circle.  Now the registry
hands each call a frozen :class:`~toolcancel.runtime.plan.CallPlan`; these tests hold the shape
(no ``registry._`` in the call, no circle even counting annotation-only imports) and what it
means for an embedder (a registration change reaches the calls that enter after it, never one
in flight).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import grimp
from toolcancel import Accept, ToolRegistry
from toolcancel.runtime.execution import Execution
from toolcancel.runtime.plan import CallsInFlight
from toolcancel.runtime.signals import AbortController

RUNTIME = Path(__file__).resolve().parent.parent / "machine" / "runtime"
THE_CALL = ("stepping.py", "driver.py", "binding.py", "owning.py")


def test_the_call_reads_no_private_field_of_its_registry() -> None:
    for name in THE_CALL:
        source = (RUNTIME / name).read_text("utf-8")
        assert not re.findall(r"registry\._", source), name


def test_the_runtime_has_no_import_circle_even_by_annotation() -> None:
    graph = grimp.build_graph("toolcancel", exclude_type_checking_imports=False)
    runtime = {m for m in graph.modules if m.startswith("toolcancel.runtime.")}
    for module in sorted(runtime):
        for imported in graph.find_modules_directly_imported_by(module) & runtime:
            assert not graph.chain_exists(imported, module), (module, imported)


def test_a_hook_added_while_a_call_runs_reaches_the_next_call_only() -> None:
    async def main() -> tuple[list[str], list[str]]:
        registry = ToolRegistry()
        started, release = asyncio.Event(), asyncio.Event()
        seen: list[str] = []

        async def body(args: object, view: object) -> list[object]:
            started.set()
            await release.wait()
            return []

        async def post(view: Execution, result: object, next_: object) -> Accept:
            seen.append(view.call_id)
            return Accept()

        registry.register("t", body)
        first = asyncio.ensure_future(
            registry.execute("t", signal=AbortController().signal, call_id="first")
        )
        await asyncio.wait_for(started.wait(), 30)
        registry.add_post_execute(post)
        release.set()
        await asyncio.wait_for(first, 30)
        before = list(seen)
        await asyncio.wait_for(
            registry.execute("t", signal=AbortController().signal, call_id="second"), 30
        )
        return before, seen

    before, after = asyncio.run(main())
    assert before == [] and after == ["second"]


def test_calls_share_a_plan_until_the_registration_changes() -> None:
    registry = ToolRegistry()
    a = registry.begin("t", signal=None)
    b = registry.begin("t", signal=None)
    assert a.plan is b.plan  # type: ignore[attr-defined]
    remove = registry.add_guard(lambda view: None)
    c = registry.begin("t", signal=None)
    assert c.plan is not a.plan and c.plan.guards  # type: ignore[attr-defined]
    remove()
    d = registry.begin("t", signal=None)
    assert d.plan is not c.plan and not d.plan.guards  # type: ignore[attr-defined]


def test_a_call_leaves_the_calls_in_flight_once_whichever_way_out() -> None:
    calls = CallsInFlight()
    one, two = object(), object()
    calls.enter(one)
    calls.enter(two)
    assert list(calls) == [one, two] and one in calls and len(calls) == 2
    calls.leave(one)
    calls.leave(one)
    assert list(calls) == [two]
