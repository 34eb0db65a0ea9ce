"""The adapter protocol's runtime side: the hello, each vector's gates, clock and caller, answers.

A runtime adapter is a :class:`Runtime` subclass that says what its runtime has (``capabilities``
and ``cancel``, the hello's) and knows one thing: how to make one tool call through the
runtime's public API (:meth:`Runtime.open`).  :func:`run_vector` drives that call exactly as
spec/vectors/README.md says ("Driving the call: gates"): it releases the gates one at a time on
toolcancel's virtual clock (nothing waits on the wall clock), aborts the caller where the
scenario says, holds an uncooperative body a virtual day (:data:`~toolcancel.runtimes.HOLD_S`),
and reports what a user of the runtime saw.  :func:`serve` speaks protocol 2 on stdin/stdout;
:func:`main` is an adapter script's entry point (``--control`` serves its control instead).

**The caller.**  ``cancel = ["task"]``: the call runs in its own asyncio task and aborting the
caller is one ``Task.cancel()``, as an asyncio program cancels an agent run.  ``["signal"]``:
the caller's signal is the runtime's own cancellation API (a ``CancellationToken``, a run's
``cancel()``), which the adapter hands the runtime and registers with
:meth:`~toolcancel.runtimes.Call.on_abort`; aborting the caller fires it, and a caller aborted
before the call exists hands it over already fired -- only such a runtime runs those scenarios
(the driver refuses them otherwise).  Otherwise (``["message"]``) the call runs inside an anyio
cancel scope that aborting the caller cancels; what the runtime makes of that is its own
business (the MCP SDK's client sends ``notifications/cancelled``).  A call still waiting when
nothing is left to release hangs: it is answered as a hang (:data:`~toolcancel.runtimes.HANG`),
never as the cancellation the driver ends it with.

**The answer.**  A call that returned is answered with its result.  A call that raised is
answered with ``raised``: :attr:`Call.outcome` if the adapter set one (``raised`` only: a
result there is a protocol error), else the exception's type and text.  When what it raised is
the caller's own cancellation coming back -- ``CancelledError`` in the task the caller
cancelled, the cancel scope the caller cancelled -- the answer says so
(``observed.caller_cancelled``): the Python binding's P2 re-raises ``CancelledError`` after
the call published its result, and an MCP request the caller cancelled is never answered.  A
runtime cancelled through its own API (``signal``) that raises is not so excused: a signal is
how a caller asks for the contract's ``ABORTED`` result.
:class:`~toolcancel.runtimes.Unsupported` from ``open()`` or ``execute()`` is a protocol
``error`` naming why.

**Capabilities** (the hello; a key left out of ``capabilities`` is false, an optional one --
``remove_signal``, ``meta``, ``raw_args``, ``error_flag`` -- is left to its default, true):
declare a stage only if the adapter drives it through the runtime (conform then sends vectors
that need it, and a scenario needing an undeclared stage is refused here before it runs);
``body_signal`` if a body can see the caller's cancellation (:func:`task_signal` counts);
``meta``, ``raw_args``, ``error_flag`` false where the runtime's call cannot carry a metadata
channel, non-JSON argument values (a wire protocol serializes them first) or an error flag;
``timeout_policy`` if the adapter gives :attr:`~toolcancel.runtimes.Call.budget_s` to the
runtime's own per-tool timeout -- the driver then moves the virtual clock past the budget when
the body waits (``timer_first``; ``with_deadline`` aborts the caller first, in the same step,
and needs ``signal``), holds an uncooperative body whose deadline passed as one whose caller
aborted, and reports ``observed.deadline``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar, Final

import anyio

from ..oracle.conform.capabilities import OPTIONAL, STAGES
from ..runtime.virtual_time import VirtualClock
from .call import HANG, HOLD_S, Call, Execute, Outcome, Unsupported

PAST_BUDGET_S: Final = 0.001
"""How far past the tool's budget the driver moves the clock for ``timer_first``."""


class AdapterError(Exception):
    """The adapter broke a rule of the kit (an answer the protocol forbids): a protocol error."""


def needs(s: dict[str, Any]) -> list[str]:
    """The stages scenario ``s`` needs beyond a plain tool call (what the driver refuses to play
    when the runtime lacks them)."""
    out = []
    if s["pre"] != "allow" or s["cancel"] == "gate:pre":
        out.append("pre_policy")
    # the seam, where an ask reaches it (mounted, an agent to route it): else the ask is a denial
    if (s["pre"] == "ask" and s["approval_seam"] and s["agent"]) or s["cancel"] == "gate:approval":
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


class Runtime:
    """One runtime behind the protocol: subclasses say what it has and make one call.

    ``implementation`` names the runtime, its version and the configuration (shown in reports);
    ``capabilities`` the stages and channels it has (see the module's rules); ``cancel`` how
    its caller cancels: ``["task"]``, ``["message"]`` or ``["signal"]``; ``undriven`` the
    stages the runtime has that the adapter does not drive (declared absent, so their rules go
    unjudged), each with where the runtime has it and why it is not driven -- published beside
    the rules left not judged, so a reader never takes "not judged" for "absent"."""

    implementation: ClassVar[str] = ""
    capabilities: ClassVar[dict[str, bool]] = {}
    cancel: ClassVar[list[str]] = []
    undriven: ClassVar[dict[str, str]] = {}
    absent: ClassVar[dict[str, str]] = {}
    """Stages of the contract the runtime does not have (declared false, so the rules only
    they decide cannot be judged on it), each with the runtime's design that leaves it out --
    what it has instead, by its documented name: published beside the rules not judged, so a
    reader never takes "not judged" for "not looked at"."""
    unmeasured: ClassVar[dict[str, str]] = {}
    """Configurations of the runtime its users run that no row measures, each with why (a
    transport out of the driver's reach, a switch its public API does not expose): published
    on the runtime's section, so a reader knows what the rows do not cover."""

    answered: ClassVar[bool] = False
    """Whether the adapter answers a call its caller cancelled with what the call published
    (:meth:`~toolcancel.runtimes.Call.answered`, through an integration): its control does too."""

    def open(self, call: Call) -> AbstractAsyncContextManager[Execute]:
        """Set the runtime up for ``call`` (the scenario's tool registered, a client connected)
        and yield the function that makes the one tool call through the runtime's public API.
        The set-up lives outside the caller's scope: cancelling the call is not tearing it down.
        Raise :class:`~toolcancel.runtimes.Unsupported` for a scenario it cannot run."""
        raise NotImplementedError

    def hello(self) -> dict[str, Any]:
        """The protocol-2 hello at outcome level."""
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


def row(base: type[Runtime], implementation: str, **attributes: Any) -> type[Runtime]:
    """Another configuration of ``base``'s runtime, a row of its own on the page: ``base`` with
    ``implementation`` (naming the configuration) and the class attributes in ``attributes``
    (``cancel=["signal"]``, the adapter's own switches) -- each a name ``base`` already has, so a
    misspelt switch is refused here instead of silently measuring ``base`` again."""
    unknown = sorted(k for k in attributes if not hasattr(base, k))
    if unknown:
        raise AttributeError(f"{base.__name__} has no {', '.join(unknown)}: a row sets only "
                             "what its base runtime already has")  # fmt: skip
    namespace = {"implementation": implementation, "__module__": base.__module__, **attributes}
    return type(f"{base.__name__}Row", (base,), namespace)


def _raised(call: Call, text: str, *, cancelled: bool) -> Outcome:
    """The answer of a call that raised: the adapter's own reading if it gave one, else ``text``."""
    if call.outcome is None:
        return Outcome(raised=text, cancelled=cancelled)
    if call.outcome.result is not None:
        raise AdapterError(
            "the adapter set Call.outcome to a result, yet its execute() raised "
            f"({text}): a call that raised is answered with raised only"
        )
    return Outcome(raised=call.outcome.raised, cancelled=cancelled)


async def run_vector(
    runtime: Runtime, clock: VirtualClock, s: dict[str, Any], revision: str = "seed"
) -> dict[str, Any]:
    """Drive one scenario of the contract's ``revision`` (spec/vectors/README.md, "Driving the
    call: gates"); the answer's ``result`` and ``observed``."""
    lacking = [k for k in needs(s) if not runtime.capabilities.get(k)]
    if lacking:
        raise Unsupported(f"the runtime has no {', '.join(lacking)}")
    if s["caller"] == "none" and s["cancel"] != "never":
        raise Unsupported("a scenario without a caller cannot cancel")
    if s["caller"] == "aborted" or s["cancel"] == "before_entry":
        if "signal" not in runtime.cancel:
            raise Unsupported("a caller aborted before the call exists needs a signal to pass")
    if s["cancel"] == "with_deadline" and "signal" not in runtime.cancel:
        raise Unsupported("a caller aborting in the deadline's own step needs a signal to abort")
    call = Call(s, revision)
    args: dict[str, Any] = {"q": "x"} if s["args"] == "ok" else {"q": {1}}
    scope = anyio.CancelScope()
    box: dict[str, Any] = {}
    by_task = runtime.cancel == ["task"]  # the caller cancels the task, once (Task.cancel())
    by_signal = runtime.cancel == ["signal"]  # the runtime's own API (Call.on_abort)

    def abort() -> None:
        if not call.caller_aborted:
            call.caller_aborted = True
            call.first_abort = call.first_abort or "caller"
            if by_signal:
                for fire in list(call.aborters):
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
                box["outcome"] = _raised(call, "the caller's cancel scope", cancelled=True)
        except Unsupported as exc:  # refused inside execute(): as from open(), never a raise
            box["unsupported"] = exc
        except asyncio.CancelledError:  # its task was cancelled, and the call raised that
            if "hung" in box:  # or the driver ended a call that waits for nothing
                box["outcome"] = Outcome(raised=HANG)
            else:
                box["outcome"] = _raised(
                    call, "CancelledError", cancelled=call.caller_aborted and not by_signal
                )
        except AdapterError as exc:
            box["adapter_error"] = exc
        except Exception as exc:  # the runtime let an exception out of the call
            try:
                box["outcome"] = _raised(call, f"{type(exc).__name__}: {exc}", cancelled=False)
            except AdapterError as wrong:
                box["adapter_error"] = wrong
        box["settled"] = call.settled or call.settled_now()

    if s["caller"] == "aborted" or s["cancel"] == "before_entry":
        abort()  # before the call exists: on_abort fires each aborter as it is registered
    async with runtime.open(call) as execute, anyio.create_task_group() as group:
        group.start_soon(caller, execute)
        while True:
            await clock.idle()
            if not call.gates:
                break
            g = next(iter(call.gates))
            expired = g == "body" and s["timeout"] == "timer_first"
            if expired:  # README's loop: this wait's deadline passes, then the gate goes on
                if s["cancel"] == "with_deadline":
                    abort()  # the same synchronous step: the caller's abort first (ours)
                call.expired = True
                call.first_abort = call.first_abort or "timeout"
                clock.advance(call.budget_s + PAST_BUDGET_S)  # type: ignore[operator]
                await clock.idle()
            if s["cancel"] == f"gate:{g}":
                abort()
                await clock.idle()
            if g == "body" and not s["cooperative"] and (call.caller_aborted or expired):
                call.expired = call.expired or call.budget_s is not None  # held past it
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
    for refused in ("unsupported", "adapter_error"):
        if refused in box:
            raise box[refused]
    if by_signal and call.caller_aborted and not call.aborters:
        raise AdapterError(
            "the runtime declares cancel ['signal'] but its adapter registered nothing with "
            "Call.on_abort: the caller aborted and the runtime never heard of it"
        )
    outcome: Outcome | None = box.get("outcome")
    if s["cancel"] == "after":
        abort()
    # A runtime without observers notifies nobody: conform judges notifications only where the
    # hello declares observers.
    observed: dict[str, Any] = {
        "raised": HANG if outcome is None else outcome.raised,
        "notifications": 0,
        "notified_same": True,
        "bodies": [b.seen(call) for b in call.bodies],
        "settled": box.get("settled"),
    }
    if call.budget_s is not None:  # no outer_deadline wrapper: no runtime plays the slot
        observed["deadline"] = {"expired": call.expired, "outer": False}
    if outcome is not None and outcome.cancelled:
        observed["caller_cancelled"] = True
    return {"result": None if outcome is None else outcome.result, "observed": observed}


def not_json(value: object) -> str:
    """How a value that is not JSON is shown in an answer (never dropped: the runtime kept it)."""
    return f"<not JSON: {type(value).__name__}>"


def serve(runtime: Runtime) -> None:
    """Speak protocol 2 on stdin/stdout: the hello, then one answer per vector."""
    loop = asyncio.new_event_loop()
    clock = VirtualClock()
    out = sys.stdout

    def send(message: dict[str, Any]) -> None:
        out.write(json.dumps({"protocol": 2, **message}, default=not_json) + "\n")
        out.flush()

    async def one(line: str) -> None:
        v = json.loads(line)
        try:
            if v.get("type") != "vector":
                raise Unsupported(f"{v.get('type')!r} messages: this runtime has no turns")
            answer = await run_vector(runtime, clock, v["scenario"], v.get("revision", "seed"))
            send({"type": "outcome", "id": v["id"], **answer})
        except Exception as exc:
            send({"type": "error", "id": v.get("id"), "message": f"{type(exc).__name__}: {exc}"})

    with clock.patch_loop(loop):
        send(runtime.hello())
        for line in sys.stdin:
            if line.strip():
                loop.run_until_complete(one(line))
    loop.close()


def main(
    runtime: Runtime, control: Runtime | None = None, argv: Sequence[str] | None = None
) -> None:
    """An adapter script's entry point: serve ``runtime``, or with ``--control`` its control
    (toolcancel's own registry behind the same mapping, :mod:`toolcancel.runtimes.control`);
    ``--undriven`` prints :attr:`Runtime.undriven`, :attr:`Runtime.absent` and
    :attr:`Runtime.unmeasured` (``{"stages": ..., "absent": ..., "configurations": ...}``)."""
    parser = argparse.ArgumentParser(description=runtime.implementation)
    parser.add_argument(
        "--control", action="store_true", help="serve toolcancel's registry through this mapping"
    )
    parser.add_argument(
        "--undriven",
        action="store_true",
        help="print the stages the runtime has that this adapter does not drive, and the "
        "configurations no row measures (JSON), and exit",
    )
    args = parser.parse_args(argv)
    if args.undriven:
        unknown = sorted((set(runtime.undriven) | set(runtime.absent)) - set(STAGES))
        if unknown:
            parser.error(f"undriven or absent names no stage of the hello: {', '.join(unknown)}")
        declared = sorted(k for k in runtime.absent if runtime.capabilities.get(k))
        if declared:
            parser.error(f"absent names a stage the hello declares: {', '.join(declared)}")
        said = {"stages": runtime.undriven, "absent": runtime.absent,
                "configurations": runtime.unmeasured}  # fmt: skip
        print(json.dumps(said, sort_keys=True))
        return
    if args.control and control is None:
        parser.error("this adapter has no control")
    serve(control if args.control and control is not None else runtime)
