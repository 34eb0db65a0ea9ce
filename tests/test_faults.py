"""Faults at every point: whatever user code does wrong, every call publishes exactly once.

Each case plants one fault kind at one injection point of a call that is otherwise fully hooked
(pre-execute asking an approval seam, a guard, one around wrapper, the body, post-execute, two
observers), right away or after the code has suspended once (so the fault arrives both in the
awaiting task and in the call's own task, Python binding).  For every case:

* the call publishes exactly one result, the very object ``execute()`` returns;
* that result is the one the contract prescribes for the fault (the ``EXPECTED`` table);
* no body is running when it is published, nothing is left in flight, the caller's signal keeps
  no listener;
* a failure is logged with the call id.

The table doubles as documentation: ``python tests/test_faults.py`` prints it.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from support import controller, expected, ok, text
from toolcancel import (
    AbortController,
    Accept,
    Allow,
    Approval,
    ApprovalRequest,
    Ask,
    Execution,
    ToolError,
    ToolRegistry,
    ToolResult,
)

POINTS = (
    "entry", "pre", "approval", "guard", "wrapper_before", "wrapper_after", "body", "post",
    "observer",
)
ASYNC_POINTS = ("pre", "approval", "wrapper_before", "wrapper_after", "body", "post", "observer")

SERIALIZATION = expected("Error: tool result must be losslessly JSON-serializable")
ARGUMENTS = expected("Error: tool execution arguments must be losslessly JSON-serializable")


def thrown(message: str, code: str | None = None) -> str:
    return expected(
        f"Error: {message}", error=None if code is None else {"name": "ToolError", "code": code}
    )


# fault kind -> point -> (what the one published result must be, a label for the table).  A
# regular expression (``re.Pattern``) where the message is the reference's own wording.
RAISING = ("pre", "approval", "guard", "wrapper_before", "wrapper_after", "body", "post")
EXPECTED: dict[str, dict[str, Any]] = {
    "exception": {p: thrown(f"boom at {p}") for p in RAISING} | {"observer": ok("done")},
    "tool_error": {p: thrown(f"structured at {p}", "E_FAULT") for p in RAISING}
    | {"observer": ok("done")},
    "cancelled_error": {p: thrown(f"cancelled at {p}") for p in RAISING}
    | {"observer": ok("done")},
    "wrong_type": {
        "pre": re.compile(r"Error: pre-execute returned 'yes'; expected Allow, Deny or Ask"),
        "approval": thrown('unreachable variant in ApprovalOutcome: "yes"'),
        "wrapper_after": re.compile(
            r"Error: around-dispatch wrapper \d+ \(\S+\) returned a mapping that has unknown fields"
        ),
        "body": re.compile(r"Error: a tool body must return a list of content blocks or a "),
        "post": re.compile(r"Error: post-execute returned None; expected Accept or Block"),
    },
    "non_json": {
        "entry": ARGUMENTS,
        "wrapper_after": SERIALIZATION,
        "body": SERIALIZATION,
        "post": SERIALIZATION,
    },
    "forget_slot": {"wrapper_before": ok("done")},
    "next_twice": {"pre": ok("done"), "wrapper_after": ok("done"), "post": ok("done")},
    "next_concurrently": {
        "wrapper_before": re.compile(r"Error: next\(\) was called again while the previous"),
    },
    "next_never": {"pre": ok("done"), "wrapper_before": ok("cached"), "post": ok("done")},
    "observer_async": {"observer": ok("done")},
}

LOGGED = {"exception", "tool_error", "cancelled_error", "wrong_type", "non_json",
          "next_concurrently", "observer_async"}
"""Fault kinds that are failures, so the log must name the call.  (The others are legitimate,
if unusual, uses: documented outcomes, nothing failed.)"""

CASES = [
    (kind, point, suspend)
    for kind, points in EXPECTED.items()
    for point in points
    for suspend in ((False, True) if point in ASYNC_POINTS else (False,))
]


@dataclass
class Plant:
    """A fully hooked registry with one fault planted."""

    kind: str
    point: str
    suspend: bool
    registry: ToolRegistry = field(init=False)
    published: list[ToolResult] = field(default_factory=list)
    body_runs: int = 0
    body_running: int = 0
    running_at_publish: list[int] = field(default_factory=list)
    post_saw: list[Any] = field(default_factory=list)
    wrapper_signal: AbortController = field(default_factory=AbortController)

    def __post_init__(self) -> None:
        reg = self.registry = ToolRegistry()
        reg.add_pre_execute(self.pre)
        reg.set_approval(self.approval)
        reg.add_guard(self.guard)
        reg.add_around(self.wrapper)
        reg.register("t", self.body)
        reg.add_post_execute(self.post)
        reg.add_observer(self.observer)
        reg.add_observer(self.recorder)

    async def at(self, point: str) -> bool:
        """True when the fault is planted here (after suspending once, if asked)."""
        if point != self.point:
            return False
        if self.suspend:
            await asyncio.sleep(0)
        return True

    def throw(self) -> None:
        where = self.point
        if self.kind == "exception":
            raise RuntimeError(f"boom at {where}")
        if self.kind == "tool_error":
            raise ToolError(f"structured at {where}", code="E_FAULT")
        if self.kind == "cancelled_error":
            raise asyncio.CancelledError(f"cancelled at {where}")

    async def pre(self, view: Execution, nxt: Callable[[], Any]) -> Any:
        if await self.at("pre"):
            self.throw()
            if self.kind == "wrong_type":
                return "yes"
            if self.kind == "next_twice":
                await nxt()
                return await nxt()
            if self.kind == "next_never":
                return Allow()
        if self.point == "approval":
            return Ask("needs a human")
        return await nxt()

    async def approval(self, request: ApprovalRequest) -> Approval:
        if await self.at("approval"):
            self.throw()
            return "yes"  # type: ignore[return-value]  # the wrong type, on purpose
        return Approval.APPROVED

    def guard(self, view: Execution) -> None:
        if self.point == "guard":
            self.throw()

    async def wrapper(self, view: Execution, nxt: Callable[[], Any]) -> Any:
        if await self.at("wrapper_before"):
            self.throw()
            if self.kind == "forget_slot":
                view.signal = self.wrapper_signal.signal  # and never restored
                return await nxt()
            if self.kind == "next_concurrently":
                first = asyncio.ensure_future(nxt())
                await asyncio.sleep(0)  # the first next() is now inside the body
                try:
                    return await nxt()
                finally:
                    del first  # left running: the registry must still await it
            if self.kind == "next_never":
                return self.registry.results.success([text("cached")])
        upstream = view.signal
        try:
            result = await nxt()
        finally:
            if self.kind != "forget_slot":
                view.signal = upstream
        if await self.at("wrapper_after"):
            self.throw()
            if self.kind == "wrong_type":  # a mapping, but not of a result's fields (P9)
                return {"text": "done"}
            if self.kind == "non_json":
                return self.registry.results.success([{"type": "text", "text": {1, 2}}])
            if self.kind == "next_twice":
                return await nxt()
        return result

    async def body(self, args: Any, view: Execution) -> Any:
        self.body_runs += 1
        self.body_running += 1
        try:
            if self.kind == "next_concurrently":
                await asyncio.sleep(1)  # still running when the second next() is refused
            if await self.at("body"):
                self.throw()
                if self.kind == "wrong_type":
                    return 42
                if self.kind == "non_json":
                    return [{"type": "text", "text": "x", "extra": object()}]
            return [text("done")]
        finally:
            self.body_running -= 1

    async def post(self, view: Execution, result: ToolResult, nxt: Callable[[], Any]) -> Any:
        self.post_saw.append(view.signal)
        if await self.at("post"):
            self.throw()
            if self.kind == "wrong_type":
                return None
            if self.kind == "non_json":
                return Accept(content=[{"type": "text", "text": float("nan")}])
            if self.kind == "next_twice":
                await nxt()
                return await nxt()
            if self.kind == "next_never":
                return Accept()
        return await nxt()

    async def observer(self, view: Execution, result: ToolResult) -> None:
        self.running_at_publish.append(self.body_running)
        if await self.at("observer"):
            self.throw()
            if self.kind == "observer_async":
                await asyncio.sleep(0)
                raise RuntimeError("observer failed after awaiting")

    def recorder(self, view: Execution, result: ToolResult) -> None:
        self.published.append(result)


@pytest.mark.rules("R3", "R27", "R30", "R31")
@pytest.mark.parametrize(("kind", "point", "suspend"), CASES)
async def test_one_fault_at_one_point(
    kind: str, point: str, suspend: bool, caplog: pytest.LogCaptureFixture
) -> None:
    plant = Plant(kind, point, suspend)
    given, signal = controller()
    arguments: Any = {"q": {1, 2}} if point == "entry" else {"q": 1}
    with caplog.at_level(logging.INFO, logger="toolcancel.runtime.registry"):
        result = await plant.registry.execute(
            "t", arguments, signal=signal, call_id="f-1", agent="agent"
        )
        await asyncio.sleep(5)  # anything the fault left running finishes (virtual time)
    assert plant.published == [result], "exactly one result, the one execute() returned"
    want = EXPECTED[kind][point]
    if isinstance(want, re.Pattern):
        assert result.is_error and result.error is None
        assert want.match(result.content[0]["text"]), result.to_json()
    else:
        assert result.to_json() == want
    assert plant.running_at_publish == [0], "published while a body was running"
    assert plant.registry.in_flight() == []
    assert signal.listener_count == 0 and not given.signal.aborted
    current = asyncio.current_task()
    assert current is not None and current.cancelling() == 0
    if kind in LOGGED:
        assert any("f-1" in r.getMessage() for r in caplog.records), caplog.records
    if kind == "forget_slot":  # D8: the wrapper's signal leaks to post-execute, nothing breaks
        assert plant.post_saw == [plant.wrapper_signal.signal]
    if kind == "next_twice" and point == "wrapper_after":
        assert plant.body_runs == 2  # D11: a sequential retry runs the body again
    if kind == "next_never" and point == "wrapper_before":
        assert plant.body_runs == 0
    if kind == "next_concurrently":
        assert plant.body_runs == 1


def table() -> str:
    """The fault kinds x injection points tried, and the outcome of each (for the docs)."""
    lines = ["| fault kind | " + " | ".join(POINTS) + " |", "|---" * (len(POINTS) + 1) + "|"]
    for kind, points in EXPECTED.items():
        cells = []
        for point in POINTS:
            want = points.get(point)
            if want is None:
                cells.append("")
            elif isinstance(want, re.Pattern):
                cells.append("thrown (R3)")
            elif want == ok("done"):
                cells.append("success kept")
            elif want == SERIALIZATION:
                cells.append("not serializable (R30)")
            elif want == ARGUMENTS:
                cells.append("arguments error (R11)")
            elif want == ok("cached"):
                cells.append("wrapper's result, no body")
            elif "E_FAULT" in want:
                cells.append("structured error (R3)")
            else:
                cells.append("thrown (R3)")
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
