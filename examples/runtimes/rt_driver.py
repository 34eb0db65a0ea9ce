"""The part every runtime adapter shares: protocol 2 at outcome level, gates, the tool body.

An adapter (``adapter_<runtime>.py`` beside this file) says what its runtime has in its hello
(``capabilities`` and ``cancel``) and knows one thing: how to make one tool call through the
runtime's public API (``Runtime.execute``).  This module drives that call exactly as
spec/vectors/README.md says ("Driving the call: gates"): it builds the tool body, releases the
gates one at a time on a virtual clock (toolcancel's, so nothing waits on the wall clock), aborts
the caller where the scenario says, holds an uncooperative body a virtual day, and reports what a
user of the runtime saw -- the result or the exception, each body's signal at start and settle,
and what had started and settled when the call settled.

The caller.  The call runs inside an anyio cancel scope, which is how a Python caller cancels:
aborting the caller cancels that scope -- or, for a runtime whose caller cancels a task
(``cancel = ["task"]``), the call runs in its own asyncio task and aborting it is one
``Task.cancel()``, as an asyncio program cancels an agent run.  What the runtime makes of it is
its own business -- the MCP SDK's client turns it into ``notifications/cancelled`` (a protocol
message), an agent framework simply has its run cancelled (task cancellation).

The body.  It waits at gate ``body``.  A *cooperative* body also stops when its runtime tells it
the call was cancelled: the runtime's signal if it has one (``body_signal``), and in every Python
runtime the cancellation of its task.  An *uncooperative* body ignores both until its gate is
released (:meth:`Call.held`), the real-world shape of a body whose work cannot stop half-way (a
write): it waits in an anyio shield and catches a native ``Task.cancel()``, which no shield stops,
then returns or throws as its scenario says.

A scenario that needs a stage the runtime lacks is answered with an ``error`` message naming the
stage (conform sends such a vector only to an adapter that declared the stage): the adapter never
plays a stage the runtime does not have.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import anyio
from toolcancel.oracle.capabilities import OPTIONAL, STAGES  # the hello's capability keys
from toolcancel.runtime.virtual_time import VirtualClock

HOLD_S = 86_400.0
"""How long an uncooperative body is held after the call was cancelled (R27: no grace period)."""
HANG = "execute() never settled: it waits for something nothing will do (the loop is idle)"
"""What a call that hangs is reported as -- never as the cancellation the driver ends it with."""



def text(t: str) -> dict[str, str]:
    return {"type": "text", "text": t}


def needs(s: dict[str, Any]) -> list[str]:
    """The stages scenario ``s`` needs beyond a plain tool call (what this adapter refuses to play
    when its runtime lacks them)."""
    out = []
    if s["pre"] != "allow" or s["cancel"] == "gate:pre":
        out.append("pre_policy")
    if s["pre"] == "ask" or s["cancel"] == "gate:approval":  # a seam nobody asks does nothing
        out.append("approval")
    if s["guard"] != "none":
        out.append("guards")
    if s["wrappers"]:
        out.append("around")
    if s["timeout"] != "absent":
        out.append("timeout_policy")
    if s["post"] != "accept" or s["cancel"] == "gate:post":
        out.append("post_policy")
    if s["observer"] != "none":
        out.append("observers")
    if s["body"].startswith("defer_"):
        out.append("defer_context")
    return out


def no_signal() -> dict[str, Any]:
    """The body's signal in a runtime that hands its body none (``body_signal`` absent)."""
    return {"aborted": False, "reason": None}


def task_signal() -> dict[str, Any]:
    """The body's signal in a runtime that cancels its body's task: whether a cancellation is
    pending on it, read through public APIs only -- anyio's effective deadline (minus infinity
    inside a cancelled scope) and asyncio's ``Task.cancelling()``.  Only the caller cancels in a
    scenario without wrappers or timeouts, so the reason is the caller's."""
    task = asyncio.current_task()
    cancelled = anyio.current_effective_deadline() == -math.inf or bool(
        task is not None and task.cancelling()
    )
    return {"aborted": cancelled, "reason": "caller" if cancelled else None}


class Unsupported(Exception):
    """A scenario this runtime cannot run (answered with an ``error`` message)."""


@dataclass
class Body:
    """One body invocation: its signal when it started and when it stopped waiting."""

    start: dict[str, Any]
    settle: dict[str, Any] | None = None


@dataclass
class Call:
    """Everything one vector's call shares between the driver and the runtime's adapter."""

    scenario: dict[str, Any]
    gates: dict[str, anyio.Event] = field(default_factory=dict)
    bodies: list[Body] = field(default_factory=list)
    caller_aborted: bool = False
    outcome: Outcome | None = None  # set by an adapter that saw its call end in an exception
    settled: dict[str, int] | None = None  # set by an adapter whose call settles before it returns
    aborters: list[Callable[[], None]] = field(default_factory=list)  # see on_abort

    def settled_now(self) -> dict[str, int]:
        """What had started and settled so far (``observed.settled``)."""
        return {
            "bodies_started": len(self.bodies),
            "bodies_settled": sum(b.settle is not None for b in self.bodies),
        }

    def on_abort(self, fire: Callable[[], None]) -> None:
        """The runtime's own cancellation API is the caller's signal (``cancel = ["signal"]``):
        ``fire`` (a token's ``cancel``) is called when the caller aborts -- at once if it already
        has, as a caller passes an already-cancelled token."""
        if self.caller_aborted:
            fire()
        else:
            self.aborters.append(fire)

    def settled_at(self, snapshot: dict[str, int]) -> None:
        """The call settled earlier than ``execute`` returned: when ``snapshot`` was taken (an
        agent loop's tool call settles when its result reaches the model, not when the run ends)."""
        self.settled = snapshot

    async def gate(self, name: str, stop: anyio.Event | None = None) -> None:
        """Wait at gate ``name`` until the driver releases it (or, if given, ``stop`` is set)."""
        released = self.gates[name] = anyio.Event()
        try:
            if stop is None:
                await released.wait()
                return
            async with anyio.create_task_group() as group:

                async def first(event: anyio.Event) -> None:
                    await event.wait()
                    group.cancel_scope.cancel()

                group.start_soon(first, released)
                group.start_soon(first, stop)
        finally:
            if self.gates.get(name) is released:
                del self.gates[name]

    async def held(self, name: str) -> None:
        """Wait at gate ``name`` ignoring every cancellation until the driver releases it: an
        anyio cancel scope's (the shield) and a native ``Task.cancel()``, which no anyio shield
        stops and the body therefore catches -- work that cannot stop half-way, then goes on."""
        released = self.gates[name] = anyio.Event()
        try:
            with anyio.CancelScope(shield=True):
                while not released.is_set():
                    try:
                        await released.wait()
                    except asyncio.CancelledError:
                        continue  # ignored, as a write half-done cannot stop
        finally:
            if self.gates.get(name) is released:
                del self.gates[name]

    async def body(self, signal: Callable[[], dict[str, Any]], stop: anyio.Event | None) -> Any:
        """The scenario's tool body.  ``signal()`` reads the body's signal as the runtime shows it
        (``{"aborted", "reason"}``); ``stop`` is the runtime's cancellation flag, if it has one.
        Returns the body's value in the scenario language (a list of content blocks, or a dict
        with ``content`` and ``meta``); raises as the scenario says."""
        s = self.scenario
        record = Body(start=signal())
        self.bodies.append(record)
        try:
            if s["cooperative"]:
                await self.gate("body", stop)
            else:
                await self.held("body")
        finally:
            record.settle = signal()
        if s["body"] == "success_meta":
            return {"content": [text("done")], "meta": {"rows": 3}}
        if s["body"] == "bad_meta":
            return {"content": [text("done")], "meta": {"handle": lambda: 0}}
        if s["body"] == "throw_structured":
            raise ToolError("disk full", "ENOSPC")
        if s["body"].endswith("throw"):
            raise RuntimeError("tool failed")
        return [text("done")]


class ToolError(Exception):
    """The scenario's structured error: a name, a code and a message."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


Execute = Callable[[dict[str, Any]], Awaitable["Outcome"]]


@dataclass
class Outcome:
    """What ``Runtime.execute`` reports: the contract's result (R1's keys only) or the error."""

    result: dict[str, Any] | None = None
    raised: str | None = None


class Runtime:
    """One runtime behind the protocol: subclasses say what it has and make one call."""

    implementation: ClassVar[str] = ""
    capabilities: ClassVar[dict[str, bool]] = {}
    cancel: ClassVar[list[str]] = []

    def open(self, call: Call) -> AbstractAsyncContextManager[Execute]:
        """Set the runtime up for ``call`` (the scenario's tool registered, a client connected)
        and yield the function that makes the one tool call through the runtime's public API.
        The set-up lives outside the caller's scope: cancelling the call is not tearing it down."""
        raise NotImplementedError

    def hello(self) -> dict[str, Any]:
        return {
            "type": "hello",
            "implementation": self.implementation,
            "revisions": ["seed", "revised"],
            "level": "outcome",
            "retry": "reenter",
            "capabilities": {
                # a key added later (OPTIONAL) is left to its default unless the runtime sets it
                **{
                    k: self.capabilities.get(k, False)
                    for k in STAGES
                    if k not in OPTIONAL or k in self.capabilities
                },
                "cancel": self.cancel,
            },
        }


async def run_vector(runtime: Runtime, clock: VirtualClock, s: dict[str, Any]) -> dict[str, Any]:
    """Drive one scenario (spec/vectors/README.md, "Driving the call: gates")."""
    lacking = [k for k in needs(s) if not runtime.capabilities.get(k)]
    if lacking:
        raise Unsupported(f"the runtime has no {', '.join(lacking)}")
    if s["caller"] == "none" and s["cancel"] != "never":
        raise Unsupported("a scenario without a caller cannot cancel")
    call = Call(s)
    args: dict[str, Any] = {"q": "x"} if s["args"] == "ok" else {"q": {1}}
    scope = anyio.CancelScope()
    box: dict[str, Any] = {}
    by_task = runtime.cancel == ["task"]  # the caller cancels the task, once (Task.cancel())
    by_signal = runtime.cancel == ["signal"]  # the runtime's own cancellation API (Call.on_abort)

    def abort() -> None:
        if not call.caller_aborted:
            call.caller_aborted = True
            if by_signal:
                for fire in call.aborters:
                    fire()
            elif by_task and "task" in box:
                box["task"].cancel()
            else:
                scope.cancel()

    async def caller(execute: Execute) -> None:
        try:
            with scope:
                if by_task:
                    box["task"] = asyncio.ensure_future(execute(args))
                    box["outcome"] = await box["task"]
                else:
                    box["outcome"] = await execute(args)
            if scope.cancelled_caught:
                box["outcome"] = call.outcome or Outcome(
                    raised="the call was cancelled: it raised to its caller"
                )
        except asyncio.CancelledError:  # its task was cancelled, and the call raised that
            box["outcome"] = (
                Outcome(raised=HANG)  # or the driver ended a call that waits for nothing
                if "hung" in box
                else call.outcome
                or Outcome(raised="the call was cancelled: it raised to its caller")
            )
        except Exception as exc:  # the runtime let an exception out of the call
            box["outcome"] = call.outcome or Outcome(raised=f"{type(exc).__name__}: {exc}")
        box["settled"] = call.settled or call.settled_now()

    if s["caller"] == "aborted" or s["cancel"] == "before_entry":
        abort()
    async with runtime.open(call) as execute, anyio.create_task_group() as group:
        group.start_soon(caller, execute)
        while True:
            await clock.idle()
            if not call.gates:
                break
            g = next(iter(call.gates))
            if s["cancel"] == f"gate:{g}":
                abort()
                await clock.idle()
            if g == "body" and not s["cooperative"] and call.caller_aborted:
                clock.advance(HOLD_S)
                await clock.idle()
                while (other := next((k for k in call.gates if k != "body"), None)) is not None:
                    if s["cancel"] == f"gate:{other}":
                        abort()
                    call.gates[other].set()
                    await clock.idle()
            if g in call.gates:
                call.gates[g].set()
        if "settled" not in box:
            box["hung"] = True
            group.cancel_scope.cancel()  # it hangs: report it, and end the run
    outcome: Outcome = box.get("outcome", Outcome(raised=HANG))
    if s["cancel"] == "after":
        abort()
    # A runtime without observers notifies nobody: conform judges notifications only where the
    # hello declares observers.
    return {
        "result": outcome.result,
        "observed": {
            "raised": outcome.raised,
            "notifications": 0,
            "notified_same": True,
            "bodies": [{"start": b.start, "settle": b.settle} for b in call.bodies],
            "settled": box.get("settled"),
        },
    }


def not_json(value: object) -> str:
    return f"<not JSON: {type(value).__name__}>"


def serve(runtime: Runtime) -> None:
    """Speak protocol 2 on stdin/stdout: the hello, then one answer per vector."""
    loop = asyncio.new_event_loop()
    clock = VirtualClock()
    out = sys.stdout

    def send(message: dict[str, Any]) -> None:
        # A value that is not JSON (a bad_meta body's function) is shown, not dropped: the
        # runtime kept it in its result, and the comparison must see that.
        out.write(json.dumps({"protocol": 2, **message}, default=not_json) + "\n")
        out.flush()

    async def one(line: str) -> None:
        v = json.loads(line)
        try:
            if v.get("type") != "vector":
                raise Unsupported(f"{v.get('type')!r} messages: this runtime has no turns")
            answer = await run_vector(runtime, clock, v["scenario"])
            send({"type": "outcome", "id": v["id"], **answer})
        except Exception as exc:
            send({"type": "error", "id": v.get("id"), "message": f"{type(exc).__name__}: {exc}"})

    with clock.patch_loop(loop):
        send(runtime.hello())
        for line in sys.stdin:
            if line.strip():
                loop.run_until_complete(one(line))
    loop.close()
