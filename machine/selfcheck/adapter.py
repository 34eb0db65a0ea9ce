"""``python -m toolcancel.selfcheck.adapter``: our registry behind the conformance adapter protocol.

``toolcancel conform`` drives an implementation it knows nothing about through a small process
protocol (JSON Lines on stdin/stdout, documented field by field in ``spec/vectors/README.md``):
the adapter says hello, then answers each vector with the trace its registry wrote, the result
``execute()`` returned, and what the environment observed.  This module is that adapter for the
reference registry: it interprets each scenario with :class:`toolcancel.selfcheck.harness.Harness`
-- the same interpreter the model checker and the vector generator use -- on a registry built with
``trace=``.  ``toolcancel conform --self`` runs it over the real protocol, so self-conformance
tests the protocol, the trace recording and the checker together, not a shortcut around them.

What the environment observes, besides the registry's own trace (``observed`` in an answer):

* ``notifications`` -- how often the adapter's observer was called (a registry could write one
  ``notify`` line and still notify twice, R31);
* ``body_signals`` -- for each body invocation, whether the signal the body received was aborted
  when it settled, and whose reason it carried (R21: a trace cannot show what the body saw);
* ``settled_at`` -- how many trace lines existed when ``execute()`` settled (R27: a registry that
  races its body settles before the body does);
* ``raised`` -- the error ``execute()`` raised instead of returning a result, if it did;
* and, at both levels, what only an observer of the pipeline sees (:class:`Probes`):
  ``notified_same`` across every observer, ``frozen`` (whether our observer could write into the
  result or the view), ``approval_signal``, ``slot_after_next``, ``post_received`` and
  ``listeners_left`` (listeners left on every signal the harness handed to the registry or got
  from it: a wrapper's own, the view's slot, the body's fused signal -- R22 beyond the caller's);
* and what the harness knows because it drives the call: ``caller_aborted`` (the bodies that
  started after it aborted the caller, whether post-execute was still to come: R28) and
  ``deadline`` (whether the tool's own deadline may have expired first: R35).

``--level outcome`` makes it a black box (protocol 2, level ``outcome``): the registry is built
without a trace, and each answer carries only what a user of the registry sees -- the result or
the exception, each body's signal at start and at settle, what had started and settled when
``execute()`` settled, the notifications and whether each carried the very object returned, and
listener counts on the caller's signal.  ``toolcancel conform --self --level outcome`` runs it.

``--without STAGE`` (repeatable) declares a runtime without that stage in the hello's
``capabilities`` (without ``around``, also without ``replace_signal``) and answers without
observing it (:mod:`toolcancel.oracle.conform.capabilities`): conform then sends only the vectors
that leave
the stage neutral, so our registry plays a runtime that has only part of the pipeline.

``--mutant NAME`` wraps a deliberately broken registry or scheduler of
``machine/selfcheck/mutants.py`` (imported from the current directory, i.e. a source checkout), to
prove that conform catches each one.

Turn messages (``type: "turn"``, announced by ``turns`` in the hello) run a batch of calls through
the real :class:`~toolcancel.TurnScheduler` with
:class:`toolcancel.selfcheck.turncheck.TurnHarness`,
the harness ``toolcancel verify`` checks turns with, and answer with its events and log.

One event loop with a virtual clock serves every vector: creating a loop per vector would cost
more than running the vector.  Reading stdin blocks that loop between vectors, which is fine:
nothing else runs on it then.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import IO, Any, Final, cast

from ..contract.errors import RegistryUsageError, ToolcancelError
from ..contract.loader import load_contract
from ..contract.results import ToolResult
from ..contract.trace import TraceRecorder
from ..oracle.conform.capabilities import CANCELS, OBSERVATIONS, REQUIRES, STAGES
from ..oracle.judge.calls import cancels_awaiting_task
from ..oracle.observation import classify_reason
from ..oracle.scenario_language import NESTED, SAME_STEP, Scenario
from ..oracle.turn_language import Turn
from ..oracle.vectors import REVISIONS, body_signals, post_received
from ..oracle.vectors.turns import parse_turn
from ..runtime.registry import ApprovalRequest, AroundHook, Execution, Next, ToolRegistry
from ..runtime.virtual_time import VirtualClock
from .harness import Harness, RegistryFactory
from .turncheck import TurnHarness

PROTOCOL: Final = 2
"""Version of the adapter protocol this adapter's hello declares (the ``protocol`` field of
every message).  It answers each vector in the version the vector came in, 1 or 2."""
PROTOCOLS: Final = (1, 2)
LEVELS: Final = ("trace", "outcome")


def _implementation() -> str:
    try:
        from importlib.metadata import version

        return f"toolcancel {version('toolcancel')} (Python reference registry)"
    except Exception:  # not installed as a distribution: a bare source tree
        return "toolcancel (Python reference registry)"


IMPLEMENTATION: Final = _implementation()


class AdapterError(ToolcancelError):
    """A message the adapter cannot run (answered with an ``error`` message, never a crash)."""


class Session:
    """Runs vectors one at a time on one virtual-time loop and answers each.

    ``level`` ``trace`` answers with the registry's trace and what the environment saw;
    ``outcome`` answers as a black box: only what a user of the registry observes.  ``retry`` is
    the behaviour of a wrapper's second ``next()`` the registry runs (D11; default: the
    contract's).
    """

    def __init__(
        self,
        factory: RegistryFactory,
        revisions: tuple[str, ...],
        retry: str | None = None,
        level: str = "trace",
        lacks: frozenset[str] = frozenset(),
        cancel: str = "signal",
    ) -> None:
        if level not in LEVELS:
            raise AdapterError(f"level {level!r} is not one of {', '.join(LEVELS)}")
        unknown = sorted(lacks - set(STAGES))
        if unknown:
            raise AdapterError(f"--without {unknown[0]}: not one of {', '.join(STAGES)}")
        if cancel not in ("signal", "task"):
            raise AdapterError(f"--cancel {cancel!r}: not signal or task")
        self.lacks = lacks
        self.cancel = cancel  # task: a caller that gives up after entry cancels its task
        self.factory = factory
        self.revisions = revisions
        self.retry = load_contract().default_retry if retry is None else retry
        self.level = level
        self.clock = VirtualClock()
        self.loop = asyncio.new_event_loop()
        self._patch = self.clock.patch_loop(self.loop)
        self._patch.__enter__()

    def close(self) -> None:
        self._patch.__exit__(None, None, None)
        self.loop.close()

    def hello(self) -> dict[str, Any]:
        return {
            "protocol": PROTOCOL,
            "type": "hello",
            "implementation": IMPLEMENTATION,
            "revisions": list(self.revisions),
            "level": self.level,
            "retry": self.retry,
            "turns": "turns" not in self.lacks,
            **({"capabilities": self.capabilities()} if self.lacks else {}),
        }

    def capabilities(self) -> dict[str, Any]:
        """The hello's ``capabilities``: every stage but those ``--without`` names, every way to
        cancel."""
        lacks = self.lacks | {s for s, needed in REQUIRES.items() if needed in self.lacks}
        return {**{s: s not in lacks for s in STAGES}, "cancel": list(CANCELS)}

    def unobserved(self, answer: dict[str, Any]) -> dict[str, Any]:
        """``answer`` as a runtime without the stages of ``--without`` reports it: no
        observation of them (the vectors conform sends it leave those stages neutral)."""
        observed = answer["observed"]
        for stage, (_, pairs) in OBSERVATIONS.items():
            if stage in self.lacks:
                for _, key in pairs:
                    observed.pop(key, None)
        if "observers" in self.lacks:  # a count every answer carries: nobody was notified
            observed["notifications"] = 0
            observed["notified_same"] = True
        return answer

    def answer(self, line: str) -> dict[str, Any]:
        """The answer to one input line: an ``outcome``, or an ``error`` naming the problem."""
        vid: Any = None
        version = PROTOCOL
        try:
            msg = json.loads(line)
            if not isinstance(msg, dict):
                raise AdapterError("expected a JSON object")
            vid = msg.get("id")
            if msg.get("protocol") in PROTOCOLS:
                version = msg["protocol"]
            if msg.get("type") == "turn":
                answer = self.loop.run_until_complete(self.run_turn(vid, self.parse_turn(msg)))
                answer["protocol"] = version
                return answer
            scenario = self.by_task(self.parse(msg))
            run = self.run if self.level == "trace" else self.run_outcome
            answer = self.loop.run_until_complete(run(vid, scenario))
            answer["protocol"] = version
            return self.unobserved(answer) if self.lacks else answer
        except (ValueError, RecursionError, ToolcancelError) as exc:
            return {"protocol": version, "type": "error", "id": vid, "message": str(exc)}

    def parse(self, msg: Mapping[str, Any]) -> Scenario:
        if msg.get("protocol") not in PROTOCOLS:
            speaks = " or ".join(map(str, PROTOCOLS))
            raise AdapterError(f"protocol {msg.get('protocol')!r}; this adapter speaks {speaks}")
        if msg.get("type") != "vector":
            raise AdapterError(f"message type {msg.get('type')!r}; expected 'vector'")
        if not isinstance(msg.get("id"), str):
            raise AdapterError("a vector message needs a string id")
        revision = msg.get("revision")
        if revision not in self.revisions:
            raise AdapterError(f"revision {revision!r} is not one of {list(self.revisions)}")
        scenario = Scenario.from_data(msg.get("scenario"), "scenario")
        if scenario.revision != revision:
            raise AdapterError("scenario.revision differs from the message's revision")
        if scenario.cancel.startswith("step:"):
            raise AdapterError("cancel step:<k> is not part of the portable language")
        if scenario.cancel.startswith(f"{SAME_STEP}:"):
            raise AdapterError(f"cancel {SAME_STEP}:<first> is not part of the portable language "
                               "(which source a step runs first is the adapter's)")
        return scenario

    def by_task(self, scenario: Scenario) -> Scenario:
        """``scenario`` as this adapter's caller runs it: with ``--cancel task``, a live caller
        that gives up while the call is suspended cancels the task awaiting it instead (caller
        ``task``); an abort before entry or after the call settled has no task to cancel.  Nor
        does it where another source aborts the body's signal at the same gate: a cooperative
        body woken by that abort runs before the cancelled task does, so the cancellation lands
        after the body settled, not where the vector's signal abort does (verify judges that
        order on the environment's own record)."""
        raced = scenario.cancel == "gate:body" and (
            scenario.timeout == "timer_first"
            or any(w in ("replace_aborting", NESTED) for w in scenario.wrappers)
        )
        if self.cancel == "task" and cancels_awaiting_task(scenario) and not raced:
            return replace(scenario, caller="task")
        return scenario

    def parse_turn(self, msg: Mapping[str, Any]) -> Turn:
        if msg.get("protocol") != PROTOCOL:
            raise AdapterError(f"turns are protocol {PROTOCOL}, not {msg.get('protocol')!r}")
        if not isinstance(msg.get("id"), str):
            raise AdapterError("a turn message needs a string id")
        revision = msg.get("revision")
        if revision not in self.revisions:
            raise AdapterError(f"revision {revision!r} is not one of {list(self.revisions)}")
        return parse_turn(msg.get("turn"), revision, "turn")

    async def run_turn(self, vid: str, turn: Turn) -> dict[str, Any]:
        """A turn answer: the turn's log, the events the hooks, bodies and observer recorded, and
        how many there were when ``run_turn`` returned.  The same at both levels: a scheduler is
        observed from outside."""
        obs = await TurnHarness(turn).run()
        return {
            "protocol": PROTOCOL,
            "type": "outcome",
            "id": vid,
            "log": obs.log,
            "observed": {"events": obs.events, "returned": obs.returned},
        }

    async def run_outcome(self, vid: str, scenario: Scenario) -> dict[str, Any]:
        return await _run_outcome(self, vid, scenario)

    async def run(self, vid: str, scenario: Scenario) -> dict[str, Any]:
        recorder = TraceRecorder()
        settled: list[int] = []
        base = self.factory
        probes = Probes()

        def factory(**options: Any) -> ToolRegistry:
            registry = base(trace=recorder, **options)
            probes.install(registry, harness)
            execute = registry.execute

            def timed(*args: Any, **kwargs: Any) -> Any:
                pending = execute(*args, **kwargs)  # entry happens at the call (P0)

                async def settle() -> Any:
                    try:
                        return await pending
                    finally:
                        settled.append(len(recorder))

                return settle()

            registry.execute = timed  # type: ignore[method-assign]
            return registry

        harness = Harness(scenario, factory, self.clock, self.retry)
        held_at: list[int] = []  # trace lines written when the harness began to hold a body
        hold = harness.hold

        async def marked() -> None:
            held_at.append(len(recorder))
            await hold()

        harness.hold = marked  # type: ignore[method-assign]
        obs = await harness.run()
        hung = obs.hung
        raised = None
        if obs.error is not None:
            raised = f"{type(obs.error).__name__}: {obs.error}"
        elif obs.result is None:
            raised = "execute() neither returned nor raised: the call hangs"
        return {
            "protocol": PROTOCOL,
            "type": "outcome",
            "id": vid,
            "trace": recorder.lines,
            "result": None if obs.result is None else obs.result.to_data(),
            "observed": {
                "notifications": len(obs.notified),
                "body_signals": body_signals(obs),
                "settled_at": settled[0] if settled and not hung else None,
                "raised": raised,
                **_cancelled(obs),
                **probes.observed(obs),
                **_held(obs, held_at),
                **_settled(obs),
            },
        }


def _cancelled(obs: Any) -> dict[str, Any]:
    """``caller_cancelled``: the caller cancelled the task awaiting the call, and its await
    raised CancelledError after the call published the answer's result."""
    return {"caller_cancelled": True} if obs.caller_cancelled else {}


def _held(obs: Any, held_at: list[int]) -> dict[str, Any]:
    """``held`` and ``held_at`` of a trace-level answer: how long the harness held a body that
    ignored its aborted signal, what the call did meanwhile, and how many trace lines existed when
    the hold began (R27: a registry that stops waiting writes body_settle when it stops)."""
    if obs.held is None or not held_at:
        return {}
    seconds, went = obs.held
    held: dict[str, Any] = {"seconds": seconds, **({"went": went} if went else {})}
    return {"held": held, "held_at": held_at[0]}


def _settled(obs: Any) -> dict[str, Any]:
    """``settled`` of a trace-level answer: the bodies the environment saw start and settle by
    the time ``execute()`` settled (a registry that stops waiting claims body_settle early)."""
    if obs.settled is None or obs.hung:
        return {}
    started, done = obs.settled
    return {"settled": {"bodies_started": started, "bodies_settled": done}}


async def _run_outcome(session: Session, vid: str, scenario: Scenario) -> dict[str, Any]:
    """A black-box answer: the result or the exception, each body's signal at start and at
    settle, what had started and settled when ``execute()`` settled, the notifications and
    whether each carried the very object returned, and listener counts on the caller's signal
    before ``execute()`` and after it settled.  No trace: the registry is built without one."""
    starts: list[dict[str, Any]] = []
    settled: list[dict[str, int]] = []
    listeners: dict[str, int] = {}
    base = session.factory
    harness: Harness | None = None
    probes = Probes()

    def settles() -> int:
        assert harness is not None
        return sum(1 for e in harness.obs.log if e[0] == "body_settle")

    def factory(**options: Any) -> ToolRegistry:
        registry = base(**options)
        assert harness is not None
        probes.install(registry, harness)
        execute, register = registry.execute, registry.register

        def timed(*args: Any, **kwargs: Any) -> Any:
            signal = kwargs.get("signal")
            listeners["before"] = signal.listener_count if signal is not None else 0
            pending = execute(*args, **kwargs)  # entry happens at the call (P0)

            async def settle() -> Any:
                try:
                    return await pending
                finally:
                    settled.append({"bodies_started": len(starts), "bodies_settled": settles()})
                    listeners["after"] = signal.listener_count if signal is not None else 0

            return settle()

        def watched(name: str, body: Any, **kw: Any) -> Any:
            async def seen(args: Any, view: Any) -> Any:
                starts.append(signal_state(view.signal))
                return await body(args, view)

            return register(name, seen, **kw)

        registry.execute = timed  # type: ignore[method-assign]
        registry.register = watched  # type: ignore[method-assign]
        return registry

    harness = Harness(scenario, factory, session.clock, session.retry)
    obs = await harness.run()
    hung = obs.hung
    raised = None
    if obs.error is not None:
        raised = f"{type(obs.error).__name__}: {obs.error}"
    elif obs.result is None:
        raised = "execute() neither returned nor raised: the call hangs"
    at_settle = body_signals(obs)
    observed: dict[str, Any] = {
        "raised": raised,
        **_cancelled(obs),
        "notifications": len(obs.notified),
        **probes.observed(obs),
        "bodies": [
            {"start": start, "settle": at_settle[i] if i < len(at_settle) else None}
            for i, start in enumerate(starts)
        ],
        "settled": settled[0] if settled and not hung else None,
    }
    if scenario.caller != "none":
        observed["listeners"] = listeners
    return {
        "protocol": PROTOCOL,
        "type": "outcome",
        "id": vid,
        "result": None if obs.result is None else obs.result.to_data(),
        "observed": observed,
    }


class Probes:
    """The optional observations of an answer that the scenario harness does not make itself:
    an observer of our own that checks identity and tries to mutate what it receives, the
    approval request's signal, and the slot each around wrapper finds after its ``next()``
    (what post-execute received the harness logs; :meth:`observed` reports it).

    Installed on the registry the harness builds, before the harness adds its own hooks, by
    wrapping the registry's ``set_approval`` and ``add_around``; nothing here changes what the
    registry decides."""

    def __init__(self) -> None:
        self.notified: list[ToolResult] = []
        self.frozen: dict[str, bool] | None = None
        self.approval_signal: str | None = None
        self.after_next: list[bool] = []

    def install(self, registry: ToolRegistry, harness: Harness) -> None:
        set_approval, add_around = registry.set_approval, registry.add_around

        def approval(seam: Any) -> None:
            async def asked(request: ApprovalRequest) -> Any:
                self.approval_signal = "pre_slot" if request.signal is harness.pre_slot else "other"
                return await seam(request)

            set_approval(None if seam is None else asked)

        def around(hook: AroundHook, *, prepend: bool = False) -> Callable[[], None]:
            async def probed(view: Execution, nxt: Next) -> Any:
                async def watched() -> Any:
                    handed = view.signal
                    result = await nxt()
                    self.after_next.append(view.signal is handed)
                    return result

                return await hook(view, watched)

            return add_around(probed, prepend=prepend)

        registry.set_approval = approval  # type: ignore[method-assign]
        registry.add_around = around  # type: ignore[method-assign]
        registry.add_observer(self.observe)

    def observe(self, view: Execution, result: ToolResult) -> None:
        self.notified.append(result)
        if self.frozen is None:
            self.frozen = {"result": _refuses_mutation(result), "view": _slot_refused(view)}

    def observed(self, obs: Any) -> dict[str, Any]:
        """The fields these probes add to an answer's ``observed``."""
        everyone = [*obs.notified, *self.notified]
        out: dict[str, Any] = {"notified_same": all(r is obs.result for r in everyone)}
        if self.frozen is not None:
            out["frozen"] = self.frozen
        if self.approval_signal is not None:
            out["approval_signal"] = self.approval_signal
        out["slot_after_next"] = self.after_next
        out["post_received"] = post_received(obs)
        left: dict[str, Any] = {"watched": obs.watched, "leaks": len(obs.leaked_signals)}
        if obs.leaked_signals:
            left["first"] = obs.leaked_signals[0]
        out["listeners_left"] = left
        out.update(_driven(obs))
        return out


DRIVEN: Final = {
    "caller_aborted": ("bodies_after", "before_post"),
    "deadline": ("expired", "outer"),
}
"""What the harness knows because it drives the call (its own lines of the record, R28 and R35),
as an answer's ``observed`` carries it: the fields an adapter can count without the registry's
internals (not ``steps``, the transitions taken, which only a registry's trace shows)."""


def _driven(obs: Any) -> dict[str, Any]:
    """``caller_aborted`` (the caller was aborted after entry: the bodies that started later,
    whether post-execute was still to be called) and ``deadline`` (the tool's own deadline: whether
    it may have expired first, whether an enclosing one of the same code ran), from the harness's
    own record of the run, where it has them (neither without a budget or a live caller that
    cancels: the record is not built then, which every other vector would pay for)."""
    s = obs.scenario
    if s.timeout != "budget" and (s.caller != "live" or s.cancel == "never"):
        return {}
    return {
        line["event"]: {k: line[k] for k in DRIVEN[line["event"]]}
        for line in obs.lines()
        if line["event"] in DRIVEN
    }


def _refused(attempt: Callable[[], object]) -> bool:
    """Whether ``attempt`` (a write that changes nothing if it succeeds) raised."""
    try:
        attempt()
    except (AttributeError, TypeError, ValueError, RegistryUsageError):
        return True
    return False


def _refuses_mutation(result: ToolResult) -> bool:
    """Whether the published result refuses every write an observer could try: its fields, and
    every container inside it (the result must be deep-frozen, R30).  A write that succeeds is
    undone at once, so a mutable result is reported, not corrupted."""
    if not _refused(lambda: setattr(result, "is_error", result.is_error)):
        return False
    return all(_deep_refuses(v) for v in (result.content, result.contexts, result.meta))


def _deep_refuses(value: Any) -> bool:
    if isinstance(value, (list, dict)):
        return False  # a plain list or dict accepts writes: not frozen
    if isinstance(value, Mapping):
        if not _refused(lambda: cast(Any, value).__setitem__("probe", None)):
            return False
        return all(_deep_refuses(v) for v in value.values())
    if isinstance(value, tuple):
        return all(_deep_refuses(v) for v in value)
    return True


def _slot_refused(view: Execution) -> bool:
    """Whether the view's slot refuses a write once the result is published (R31)."""
    return _refused(lambda: setattr(view, "signal", view.signal))


def signal_state(signal: Any) -> dict[str, Any]:
    """``{"aborted", "reason"}`` of a body's signal now (``reason`` classified, null when the
    signal is absent or not aborted)."""
    aborted = signal is not None and bool(signal.aborted)
    return {"aborted": aborted, "reason": classify_reason(signal.reason) if aborted else None}


def serve(session: Session, stdin: IO[str], stdout: IO[str]) -> None:
    """Say hello, then answer every input line until stdin closes."""
    write = stdout.write
    write(json.dumps(session.hello()) + "\n")
    stdout.flush()
    for line in stdin:
        if not line.strip():
            continue
        write(json.dumps(session.answer(line), ensure_ascii=False, separators=(",", ":")) + "\n")
        stdout.flush()


@contextlib.contextmanager
def _mutant(name: str) -> Iterator[Callable[..., ToolRegistry]]:
    try:
        from . import mutants as module
    except ImportError as exc:  # the mutants refuse a compiled registry, in one line
        raise AdapterError(str(exc)) from None
    lists = ("MUTANTS", "TURN_MUTANTS", "OBSERVATION_MUTANTS")
    found = {m.name: m for name in lists for m in getattr(module, name, ())}
    if name not in found:
        raise AdapterError(f"no mutant {name!r}; known: {', '.join(found)}")
    with found[name].active() as factory:
        yield factory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m toolcancel.selfcheck.adapter",
        description="Serve the toolcancel reference registry over the conformance adapter "
        "protocol (JSON Lines on stdin/stdout; see spec/vectors/README.md).",
    )
    parser.add_argument(
        "--revision",
        choices=(*REVISIONS, "all"),
        default="all",
        help="contract revision(s) to offer in the hello (default: all)",
    )
    parser.add_argument(
        "--mutant", metavar="NAME", help="serve a mutant of toolcancel.selfcheck.mutants"
    )
    parser.add_argument(
        "--retry",
        choices=load_contract().retry_names,
        help="the retry behaviour of next() the registry runs and the hello declares (D11)",
    )
    parser.add_argument(
        "--level",
        choices=LEVELS,
        default="trace",
        help="conformance level to declare and answer at (default trace; outcome: a black box)",
    )
    parser.add_argument(
        "--without",
        metavar="STAGE",
        action="append",
        choices=STAGES,
        default=[],
        help="declare a runtime without this stage (hello capabilities; repeatable) and answer "
        "without observing it -- how a runtime that has only part of the pipeline is judged",
    )
    parser.add_argument(
        "--cancel",
        choices=("signal", "task"),
        default="signal",
        help="how the caller gives up after entry: abort its signal (default), or cancel the "
        "task awaiting the call where it is suspended (task.cancel(); answers with "
        "observed.caller_cancelled)",
    )
    args = parser.parse_args(argv)
    revisions = REVISIONS if args.revision == "all" else (args.revision,)
    try:
        with contextlib.ExitStack() as stack:
            factory: RegistryFactory = ToolRegistry
            if args.mutant:
                factory = stack.enter_context(_mutant(args.mutant))
            session = Session(
                factory, revisions, args.retry, args.level, frozenset(args.without), args.cancel
            )
            stack.callback(session.close)
            serve(session, sys.stdin, sys.stdout)
    except AdapterError as exc:
        print(f"toolcancel adapter: {exc}", file=sys.stderr)
        return 2
    except (BrokenPipeError, KeyboardInterrupt):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
