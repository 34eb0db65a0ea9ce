"""``toolcancel conform``: run the conformance vectors against any implementation, via an adapter.

The runner starts the adapter as a child process (an argument list, never a shell), reads its
hello, sends it the vectors of one revision as JSON Lines and judges every answer:

1. the answer is a well-formed ``outcome`` for that vector (else a protocol failure);
2. ``execute()`` did not settle while a body was still running (R27, from ``settled_at``);
3. the trace passes the trace checker (:mod:`toolcancel.checker`), which cites its own rule;
4. the trace's contract events are one of the vector's allowed paths, up to when aborts are
   noticed (:meth:`Judge.noticed_late`) -- else the rule cited is that of the checkpoint that had
   to see a missing abort, or of the transition the contract takes where the trace first leaves
   the closest allowed path;
5. the result equals the expected result (canonical JSON), the body started as often as expected,
   each body's signal looked as expected when it settled (R21) and the adapter's observer was
   notified exactly as often as expected (R31).

The first failing step is the vector's verdict.  The report counts, for every rule id, the vectors
that exercised it and passed and the vectors that failed citing it, with the first failing vector.

Robustness, not timing: every answer is awaited with a timeout (``--timeout``, default 10 s) only
so that a hung adapter cannot hang the run.  A timeout, an exit or a line that is not a valid
answer fails that one vector with a clear message; the adapter is then killed and restarted, and
the run goes on with the next vector.  Vectors are sent ahead in a small window so the adapter
never waits for the runner; after a restart the unanswered ones are sent again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .checker import Checker
from .contract import RevisionContract, Transition, load_contract
from .core import CallState, Occurrence, choices, initial_state
from .errors import ToolcancelError
from .fileio import STRICT
from .scenario import Scenario
from .trace import MAX_DEPTH, TraceError, json_depth
from .vectors import (
    Expectation,
    Vector,
    entry_caller,
    load_vectors,
    scenario_data,
    shipped_dir,
    vectors_file,
)

PROTOCOL: Final = 2
"""The adapter protocol this runner speaks; it also accepts an adapter of :data:`PROTOCOLS`."""
PROTOCOLS: Final = (1, 2)
"""Version 2 added the hello's ``retry`` (D11); a version-1 adapter is judged as declaring the
contract's default retry behaviour, which is what version-1 vectors assumed."""
WINDOW: Final = 32
"""Vectors in flight at once: enough to keep a fast adapter busy, small enough to resend."""
LINE_LIMIT: Final = 64 << 20
"""Longest answer line read (64 MiB); a longer one is a protocol failure."""
ANSWER_DEPTH: Final = MAX_DEPTH + 2
"""Deepest JSON nesting of an answer: its trace lines (two levels down) nest at most
:data:`toolcancel.trace.MAX_DEPTH` levels themselves."""
QUOTE: Final = 200
"""How much of an unusable line an error message quotes."""
STDERR_TAIL: Final = 4096
"""How much of the adapter's stderr is kept (its last line is quoted when the adapter dies)."""
_CANCEL_GUARDS: Final = frozenset({"cancelled_after_entry", "caller_aborted", "fused_aborted"})
"""Guards that read an abort: a transition with one of them wanted true is a checkpoint."""
_CANCEL_EVENTS: Final = ("caller_abort", "fused_abort")
_ENTRY_RULE: Final = {"none": "R26", "live": "R12", "aborted": "R25"}
PROTOCOL_RULE: Final = "protocol"
"""The pseudo rule id under which adapter failures (hang, crash, garbage, refusal) count."""


class ConformError(ToolcancelError):
    """The run cannot start or go on: a bad adapter command, no hello, an unknown revision."""


# ------------------------------------------------------------------------------------------------
# Verdicts and the report
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Judgement:
    """The verdict on one vector: passed, or the rule it fails and a sentence saying why."""

    id: str
    passed: bool
    rules: frozenset[str] = frozenset()  # rules the vector exercised (when it passed)
    rule: str | None = None
    explanation: str = ""


@dataclass
class RuleTally:
    passed: int = 0
    failed: int = 0
    first_failure: str | None = None


@dataclass
class Report:
    revision: str
    implementation: str
    command: list[str]
    judgements: list[Judgement] = field(default_factory=list)
    seconds: float = 0.0
    restarts: int = 0
    titles: dict[str, str] = field(default_factory=dict)
    retry: str = ""  # the retry behaviour the adapter declared (D11)

    @property
    def passed(self) -> int:
        return sum(j.passed for j in self.judgements)

    @property
    def failed(self) -> int:
        return len(self.judgements) - self.passed

    def by_rule(self) -> dict[str, RuleTally]:
        tally: dict[str, RuleTally] = {}
        for j in self.judgements:
            if j.passed:
                for r in j.rules:
                    tally.setdefault(r, RuleTally()).passed += 1
            else:
                t = tally.setdefault(j.rule or PROTOCOL_RULE, RuleTally())
                t.failed += 1
                if t.first_failure is None:
                    t.first_failure = j.id
        return dict(sorted(tally.items(), key=lambda kv: _rule_order(kv[0])))

    def to_json(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "implementation": self.implementation,
            "retry": self.retry,
            "vectors": len(self.judgements),
            "passed": self.passed,
            "failed": self.failed,
            "by_rule": {
                r: {
                    "title": self.titles.get(r, ""),
                    "passed": t.passed,
                    "failed": t.failed,
                    "first_failure": t.first_failure,
                }
                for r, t in self.by_rule().items()
            },
            "failures": [
                {"id": j.id, "rule": j.rule, "explanation": j.explanation}
                for j in self.judgements
                if not j.passed
            ][:20],
            "restarts": self.restarts,
            "seconds": round(self.seconds, 3),
            "vectors_per_second": round(len(self.judgements) / self.seconds)
            if self.seconds
            else None,
        }


def _rule_order(rule: str) -> tuple[int, int, str]:
    if rule.startswith("R") and rule[1:].isdigit():
        return (0, int(rule[1:]), rule)
    return (1, 0, rule)


# ------------------------------------------------------------------------------------------------
# Judging one answer
# ------------------------------------------------------------------------------------------------


def quote(text: str | bytes) -> str:
    """A line for an error message: decoded, stripped, cut at :data:`QUOTE` characters."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.rstrip("\r\n")
    return repr(text if len(text) <= QUOTE else text[:QUOTE] + "…")


class Judge:
    """Judges adapter answers against the vectors of one revision."""

    def __init__(self, revision: str, retry: str | None = None) -> None:
        self.checker = Checker(revision)
        self.retry = retry or self.checker.table.contract.default_retry
        self.table: RevisionContract = self.checker.table
        self.events = frozenset(e.name for e in self.table.events)
        self.data = {e.name: e.data for e in self.table.events}
        self.shape_rules = frozenset(o.rule for o in self.table.outcomes)
        self.outcome_rule = {o.name: o.rule for o in self.table.outcomes}
        self.titles = {r.id: r.title for r in self.table.rules}
        self.revised = "R44" in self.titles
        self._choices: dict[tuple[CallState, Occurrence], list[tuple[Transition, CallState]]] = {}
        self.cancellations = frozenset(
            o.name for o in self.table.outcomes if o.code in ("ABORTED", "ABORTED_BEFORE_DISPATCH")
        )

    def start(self, s: Scenario) -> CallState:
        """The machine state a registry with the declared retry behaviour enters ``s`` in."""
        return initial_state(
            self.table,
            entry_caller(s),
            has_agent=s.agent,
            approval_seam=s.approval_seam,
            retry=self.retry,
            wrappers=s.around_count,
        )

    def fail(self, v: Vector, rule: str, why: str) -> Judgement:
        return Judgement(v.id, False, rule=rule, explanation=f"{v.id}: {why}")

    def judge(self, v: Vector, answer: Mapping[str, Any]) -> Judgement:
        """The verdict on an ``outcome`` answer (its envelope is already checked)."""
        shape = _answer_problem(answer)
        if shape is not None:
            return self.fail(v, PROTOCOL_RULE, shape)
        trace: list[Any] = answer["trace"]
        result = answer["result"]
        observed = answer["observed"]
        starts = sum(1 for line in trace if line.get("event") == "body_start")
        settled_at = observed["settled_at"]
        if settled_at is not None:
            head = trace[:settled_at]
            running = sum(1 for x in head if x.get("event") == "body_start") - sum(
                1 for x in head if x.get("event") == "body_settle"
            )
            if running > 0:
                return self.fail(
                    v,
                    "R27",
                    "execute() settled while the tool body was still running (the trace shows "
                    f"{running} body_start without body_settle before execute() settled at "
                    f"trace line {settled_at}); the registry must await the body to quiescence.",
                )
        if result is None:
            if settled_at is None:
                return self.fail(
                    v,
                    "R27",
                    f"execute() never settled ({observed['raised']}): the call neither finished "
                    "nor waited at a gate.",
                )
            return self.fail(
                v, "R31", f"execute() did not return a result: it raised {observed['raised']}."
            )
        entry = trace[0] if trace and isinstance(trace[0], dict) else {}
        if entry.get("event") == "call_entry":
            declared = entry.get("retry", self.retry)
            if declared != self.retry:
                return self.fail(
                    v,
                    PROTOCOL_RULE,
                    f"the trace's call_entry declares retry {declared!r}, the hello {self.retry!r}",
                )
            trace = [{**entry, "retry": self.retry}, *trace[1:]]
        try:
            verdicts = self.checker.check_lines(trace, f"<{v.id}>")
        except TraceError as exc:
            return self.fail(v, PROTOCOL_RULE, f"the trace is not usable: {exc.message}")
        if len(verdicts) != 1:
            calls = ", ".join(x.call_id for x in verdicts) or "none"
            return self.fail(v, PROTOCOL_RULE, f"the trace must hold one call, it holds: {calls}")
        verdict = verdicts[0]
        if not verdict.conforming:
            return self.fail(
                v,
                verdict.rule or PROTOCOL_RULE,
                f"trace event {verdict.event_index} ({verdict.seen}): {verdict.explanation}",
            )
        occurrences = [self.occurrence(x) for x in trace if x["event"] in self.events]
        path = tuple(o.event for o in occurrences)
        exp = next((e for e in v.expectations() if path in e.paths), None)
        if exp is None:
            exp = self.noticed_late(v, occurrences)
        if exp is None:
            return self.fail(v, *self.diverged(v, path))
        if _canonical(result) != exp.result_json:
            return self.fail(v, *self.result_rule(v, exp, result))
        if starts != exp.body_starts or len(observed["body_signals"]) != starts:
            rule = "R18"
            if starts > exp.body_starts and _aborted_before_dispatch(exp.paths[0]):
                rule = "R28"
            return self.fail(
                v,
                rule,
                f"the body started {starts} time(s) by the trace and "
                f"{len(observed['body_signals'])} by the adapter's observation; the contract "
                f"starts it {exp.body_starts} time(s) here.",
            )
        if [dict(b) for b in exp.body_signals] != observed["body_signals"]:
            return self.fail(
                v,
                "R21",
                f"when the body settled its signal was {_signals(observed['body_signals'])}; "
                f"the fused signal must be {_signals(exp.body_signals)} (it aborts when the "
                "caller or the slot's signal does, with the first source's reason).",
            )
        if observed["notifications"] != exp.notifications:
            return self.fail(
                v,
                "R31",
                f"observers were notified {observed['notifications']} time(s); the contract "
                f"notifies exactly {exp.notifications} time(s).",
            )
        return Judgement(v.id, True, rules=self.exercised(v, trace, starts))

    # -- allowed paths, up to when an abort is noticed ----------------------------------------

    def choices(self, state: CallState, occ: Occurrence) -> list[tuple[Transition, CallState]]:
        """:func:`toolcancel.core.choices`, memoized: vectors revisit the same few states."""
        key = (state, occ)
        found = self._choices.get(key)
        if found is None:
            found = self._choices[key] = choices(self.table, state, occ)
        return found

    def occurrence(self, line: Mapping[str, Any]) -> Occurrence:
        name = line["event"]
        return Occurrence(name, **{f: line[f] for f in self.data[name] if f in line})

    def noticed_late(self, v: Vector, trace: Sequence[Occurrence]) -> Expectation | None:
        """The expectation whose listed path ``trace`` equals up to when aborts were noticed.

        A listed path puts ``caller_abort`` and ``fused_abort`` where the reference registry saw
        them: as early as possible.  A registry may see an abort later (when it next reads the
        signal), or never, as long as every other event still takes the very same transition --
        then nothing it decided depended on the abort yet, and its observables are the same.  It
        may not see one before it happened, nor see one that did not.
        """
        rest = [o for o in trace if o.event not in _CANCEL_EVENTS]
        names = tuple(o.event for o in rest)
        for exp in v.expectations():
            for listed in exp.paths:
                if tuple(e for e in listed if e not in _CANCEL_EVENTS) != names:
                    continue
                if not _not_earlier(listed, [o.event for o in trace]):
                    continue
                data = iter(rest)
                occs = [Occurrence(e) if e in _CANCEL_EVENTS else next(data) for e in listed]
                mine = self._decisions(v, trace)
                if mine & self._decisions(v, occs):
                    return exp
        return None

    def _decisions(self, v: Vector, occs: Sequence[Occurrence]) -> set[tuple[int, ...]]:
        """For each way the machine can take ``occs`` to publication: the transitions of the
        events other than aborts."""
        s = v.scenario
        start = self.start(s)
        branches: list[tuple[CallState, tuple[int, ...]]] = [(start, ())]
        for o in occs:
            cancel = o.event in _CANCEL_EVENTS
            branches = [
                (after, taken if cancel else (*taken, t.index))
                for state, taken in branches
                for t, after in self.choices(state, o)
            ]
        return {taken for state, taken in branches if state.state == "materialized"}

    # -- which rule, and why -----------------------------------------------------------------

    def diverged(self, v: Vector, path: tuple[str, ...]) -> tuple[str, str]:
        """The rule of the step where ``path`` first leaves the closest allowed path.

        When the trace lacks a caller abort the contract has there, the rule is that of the
        checkpoint that had to read the abort: the next transition guarded by the caller's (or
        the fused signal's) abort.  Otherwise it is the rule of the contract's transition there.
        """
        exp, best = max(
            ((e, p) for e in v.expectations() for p in e.paths),
            key=lambda ep: _common(ep[1], path),
        )
        k = _common(best, path)
        seen = path[k] if k < len(path) else "the end of the trace"
        if k == len(best):
            return (
                "R10",
                f"after {' > '.join(best)} (the contract's whole path for this scenario) the "
                f"trace goes on with {seen}.",
            )
        taken = self.transitions(v, best, exp.outcome)
        m = k
        missing = ""
        if best[k] == "caller_abort" and seen != "caller_abort":
            missing = " (the caller's abort is not seen there)"
            m = next(
                (
                    i
                    for i in range(k + 1, len(best))
                    if taken and any(g in _CANCEL_GUARDS and want for g, want in taken[i].guards)
                ),
                min(k + 1, len(best) - 1),
            )
        if taken is None:
            return "R10", f"at contract event {k} the trace has {seen}, the contract {best[k]}."
        t = taken[m]
        rule = next((r for r in t.rules if r != "R28"), t.rules[0])
        return (
            rule,
            f"at contract event {k} the trace has {seen} where the contract has {best[k]}"
            f"{missing}: the contract takes {best[m]} to {t.dest or 'the same state'}"
            f"{' with outcome ' + t.outcome if t.outcome else ''} ({', '.join(t.rules)})."
            f" Allowed path: {' > '.join(best)}.",
        )

    def transitions(self, v: Vector, path: Sequence[str], outcome: str) -> list[Transition] | None:
        """The transitions the contract takes along ``path``, found by replaying the event names
        (every data value tried) and keeping a replay that ends published with ``outcome``."""
        s = v.scenario
        start = self.start(s)
        Step = tuple[CallState | None, Transition | None]
        layers: list[dict[CallState, Step]] = [{start: (None, None)}]
        for name in path:
            nxt: dict[CallState, Step] = {}
            for state in layers[-1]:
                for occ in self._occurrences(name):
                    for t, after in choices(self.table, state, occ):
                        nxt.setdefault(after, (state, t))
            layers.append(nxt)
        ends = [st for st in layers[-1] if st.state == "materialized"]
        ends.sort(key=lambda st: st.outcome != outcome)
        if not ends:
            return None
        out: list[Transition] = []
        at: CallState | None = ends[0]
        for i in range(len(path), 0, -1):
            assert at is not None
            at, took = layers[i][at]
            assert took is not None
            out.append(took)
        return out[::-1]

    def _occurrences(self, name: str) -> Iterator[Occurrence]:
        fields = self.data.get(name, ())
        for values in itertools.product((False, True), repeat=len(fields)):
            yield Occurrence(name, **dict(zip(fields, values, strict=True)))

    def result_rule(
        self, v: Vector, exp: Expectation, result: Mapping[str, Any]
    ) -> tuple[str, str]:
        """The rule a wrong result breaks, as the model checker attributes the same mistake."""
        want, got = exp.result, result
        why = f"the result is {_canonical(got)}; the contract's is {exp.result_json}"
        if got.get("isError") is False and exp.outcome in self.cancellations:
            return "R28", f"{why} -- a success after the caller cancelled before C4."
        rest_w = {k: x for k, x in want.items() if k != "additionalContexts"}
        rest_g = {k: x for k, x in got.items() if k != "additionalContexts"}
        if _canonical(rest_w) == _canonical(rest_g):
            return "R29", f"{why} -- only the contexts differ (kept, ordered and dropped per R29)."
        if v.scenario.timeout == "timer_first" and exp.outcome == "tool_timeout":
            return "R34", f"{why} -- the deadline fired first, so the result is TOOL_TIMEOUT."
        path = exp.paths[0]
        taken = self.transitions(v, path, exp.outcome) or []
        i = next((i for i in reversed(range(len(taken))) if taken[i].outcome is not None), None)
        if i is None:
            return self.table.contract.outcome(exp.outcome).rule, f"{why}."
        t = taken[i]
        rule = next((r for r in t.rules if r not in self.shape_rules), t.rules[0])
        return rule, f"{why} (outcome {exp.outcome}, decided at {path[i]}: {', '.join(t.rules)})."

    def exercised(
        self, v: Vector, trace: Sequence[Mapping[str, Any]], starts: int
    ) -> frozenset[str]:
        """Rule ids of the transitions the trace took, plus the trace rules it was checked on."""
        s = v.scenario
        branches: list[tuple[CallState, frozenset[str]]] = [
            (
                self.start(s),
                frozenset({"R31"}),
            )
        ]
        for line in trace:
            name = line["event"]
            if name not in self.events:
                continue
            occ = Occurrence(name, **{f: line[f] for f in self.data[name] if f in line})
            branches = [
                (after, rules.union(t.rules))
                for state, rules in branches
                for t, after in self.choices(state, occ)
            ]
        rules = branches[0][1] if branches else frozenset()
        # What else was checked: the envelope and stage order (the checker), the entry case, the
        # result's shape (compared with the outcome's), and what the trace and body showed.
        entry = _ENTRY_RULE[entry_caller(s)]
        if self.revised and entry == "R25":
            entry = "R42"  # the revised contract's pre-aborted entry short-circuits
        extra = {"R1", "R10", entry, self.outcome_rule[v.expected.outcome]}
        if starts:
            extra |= {"R21", "R27"}
        if any(line["event"] == "listener" for line in trace):
            extra.add("R22")
        if any(line["event"] == "slot" for line in trace):
            extra.add("R23")
        if self.revised:
            extra.add("R44")  # the revised error shape of every result the checker saw
        return rules | extra


def _answer_problem(answer: Mapping[str, Any]) -> str | None:
    trace, observed = answer.get("trace"), answer.get("observed")
    if not isinstance(trace, list) or not all(isinstance(x, dict) for x in trace):
        return "the answer's trace must be a list of trace-line objects"
    if not all(isinstance(x.get("event"), str) for x in trace):
        return "every trace line needs a string event"
    result = answer.get("result", ...)
    if result is ... or (result is not None and not isinstance(result, dict)):
        return "the answer's result must be a result object (or null if execute() raised)"
    if not isinstance(observed, dict):
        return "the answer needs an observed object"
    n, sigs, at = (
        observed.get("notifications"),
        observed.get("body_signals"),
        observed.get("settled_at", ...),
    )
    if type(n) is not int or n < 0:
        return "observed.notifications must be a non-negative integer"
    if not isinstance(sigs, list) or not all(
        isinstance(b, dict)
        and b.keys() == {"aborted", "reason"}
        and isinstance(b["aborted"], bool)
        and b["reason"] in (None, "caller", "wrapper", "timeout", "other")
        for b in sigs
    ):
        return "observed.body_signals must be a list of {aborted, reason} objects"
    if at is ... or (at is not None and (type(at) is not int or not 0 <= at <= len(trace))):
        return "observed.settled_at must be a trace length (or null if execute() never settled)"
    raised = observed.get("raised", ...)
    if raised is ... or (raised is not None and not isinstance(raised, str)):
        return "observed.raised must be a string or null"
    return None


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _common(a: Sequence[str], b: Sequence[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _not_earlier(listed: Sequence[str], seen: Sequence[str]) -> bool:
    """Whether each abort in ``seen`` comes no earlier (counted in other events before it) than
    the abort of the same kind, in the same order, in ``listed``; none may be extra."""
    for kind in _CANCEL_EVENTS:
        want = [
            sum(e not in _CANCEL_EVENTS for e in listed[:i])
            for i, e in enumerate(listed)
            if e == kind
        ]
        got = [
            sum(e not in _CANCEL_EVENTS for e in seen[:i]) for i, e in enumerate(seen) if e == kind
        ]
        if len(got) > len(want) or any(g < w for g, w in zip(got, want, strict=False)):
            return False
    return True


def _aborted_before_dispatch(path: Sequence[str]) -> bool:
    """Whether the caller aborted before the path's first base dispatch."""
    for name in path:
        if name == "caller_abort":
            return True
        if name == "base_dispatch":
            return False
    return True


def _signals(signals: Sequence[Mapping[str, Any]]) -> str:
    if not signals:
        return "(no body ran)"
    return ", ".join(
        f"aborted with the {b['reason']}'s reason" if b["aborted"] else "not aborted"
        for b in signals
    )


# ------------------------------------------------------------------------------------------------
# The adapter process
# ------------------------------------------------------------------------------------------------


class AdapterDied(Exception):
    """The adapter hung, exited, or wrote a line that is not an answer (message says which)."""


class Adapter:
    """One running adapter process and its hello."""

    def __init__(self, command: Sequence[str], timeout: float) -> None:
        self.command = list(command)
        self.timeout = timeout
        self.proc: asyncio.subprocess.Process | None = None
        self.hello: dict[str, Any] = {}
        self.stderr_tail = b""
        self._stderr_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the adapter (an argument list: no shell ever sees it) and read its hello.

        Its stderr is read by the runner, never passed through (an adapter that floods it, or
        prints a traceback, must not break the runner's one-line error promise); the last line
        is quoted when the adapter dies.
        """
        self.stderr_tail = b""
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                limit=LINE_LIMIT,
                start_new_session=True,
            )
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in an argument
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            name = quote(self.command[0])
            raise ConformError(f"cannot start the adapter {name}: {why}") from None
        assert self.proc.stderr is not None
        self._stderr_task = asyncio.ensure_future(self._read_stderr(self.proc.stderr))
        try:
            line = await self.readline("the hello")
        except AdapterDied as exc:
            await self.stop()
            raise ConformError(f"the adapter sent no hello: {exc}") from None
        try:
            hello = json.loads(line)
        except (ValueError, RecursionError):
            hello = None
        if not (
            isinstance(hello, dict)
            and hello.get("type") == "hello"
            and isinstance(hello.get("revisions"), list)
        ):
            await self.stop()
            raise ConformError(f"the adapter's first line is not a hello: {quote(line)}")
        if hello.get("protocol") not in PROTOCOLS or type(hello.get("protocol")) is not int:
            await self.stop()
            raise ConformError(
                f"the adapter speaks protocol {hello.get('protocol')!r}; this runner speaks "
                f"{' and '.join(map(str, PROTOCOLS))}"
            )
        behaviours = load_contract().retry_names
        if hello["protocol"] >= 2 and hello.get("retry") not in behaviours:
            await self.stop()
            raise ConformError(
                f"the adapter's hello declares retry {hello.get('retry')!r}; a protocol-2 hello "
                f"declares how next() retries: one of {', '.join(behaviours)} (README: D11)"
            )
        self.hello = hello

    @property
    def protocol(self) -> int:
        return int(self.hello.get("protocol", PROTOCOL))

    @property
    def retry(self) -> str:
        """The retry behaviour the adapter declared (protocol 1: the contract's default)."""
        return str(self.hello.get("retry", load_contract().default_retry))

    async def _read_stderr(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(1 << 16):
            self.stderr_tail = (self.stderr_tail + chunk)[-STDERR_TAIL:]

    async def _stderr_hint(self) -> str:
        """``; its stderr ends with: '...'`` once the adapter's stderr is closed, or nothing."""
        task = self._stderr_task
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=1.0)
        lines = [ln for ln in self.stderr_tail.splitlines() if ln.strip()]
        return f"; its stderr ends with: {quote(lines[-1])}" if lines else ""

    async def readline(self, what: str) -> bytes:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            line = await asyncio.wait_for(self.proc.stdout.readline(), self.timeout)
        except TimeoutError:
            raise AdapterDied(
                f"no answer for {what} within {self.timeout:g} s (the adapter hangs?)"
            ) from None
        except (ValueError, asyncio.LimitOverrunError):
            raise AdapterDied(f"the answer for {what} is longer than {LINE_LIMIT} bytes") from None
        if not line:
            code = await self._exit_code()
            raise AdapterDied(
                f"the adapter exited{'' if code is None else f' with code {code}'} "
                f"before answering {what}{await self._stderr_hint()}"
            )
        return line

    async def _exit_code(self) -> int | None:
        assert self.proc is not None
        with contextlib.suppress(TimeoutError):
            return await asyncio.wait_for(self.proc.wait(), 1.0)
        return None

    def send(self, data: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        if not self.proc.stdin.is_closing():
            self.proc.stdin.write(data)

    async def drain(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        with contextlib.suppress(ConnectionError):
            await self.proc.stdin.drain()

    async def stop(self, *, graceful: bool = False) -> None:
        """Close stdin and (unless it exits by itself) kill the adapter's process group."""
        proc = self.proc
        if proc is None:
            return
        self.proc = None
        if proc.stdin is not None:
            with contextlib.suppress(ConnectionError):
                proc.stdin.close()
        if graceful and proc.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), self.timeout)
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        # asyncio (3.11) reports the exit only once every pipe reached EOF, and a stdout paused
        # on an over-long line never does unless someone reads it: read what is left.
        if proc.stdout is not None:
            with contextlib.suppress(TimeoutError, ValueError, ConnectionError):
                await asyncio.wait_for(_discard(proc.stdout), self.timeout)
        await proc.wait()
        task, self._stderr_task = self._stderr_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _discard(stream: asyncio.StreamReader) -> None:
    while await stream.read(1 << 16):
        pass


async def run_vectors(
    command: Sequence[str],
    vectors: Sequence[Vector],
    revision: str,
    *,
    timeout: float = 10.0,
    window: int = WINDOW,
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """Send every vector to the adapter, judge every answer; restart the adapter as needed.
    ``progress(judged, total)`` is called after each answer."""
    adapter = Adapter(command, timeout)
    await adapter.start()
    judge = Judge(revision, adapter.retry)
    vectors = [v.for_retry(adapter.retry) for v in vectors]
    revisions = adapter.hello.get("revisions", [])
    if revision not in revisions:
        await adapter.stop()
        raise ConformError(
            f"the adapter does not implement the {revision} contract (its hello lists "
            f"{', '.join(map(str, revisions)) or 'no revision'})"
        )
    report = Report(revision, str(adapter.hello.get("implementation", "?")), list(command))
    report.retry = adapter.retry
    report.titles = {**judge.titles, PROTOCOL_RULE: "adapter failures (hang, crash, garbage)"}
    start = time.perf_counter()
    lines = [_vector_message(v, adapter.protocol) for v in vectors]
    todo = collections.deque(range(len(vectors)))
    pending: collections.deque[int] = collections.deque()
    try:
        while todo or pending:
            if todo and len(pending) <= window // 2:  # top up in one write, not one per vector
                batch = []
                while todo and len(pending) < window:
                    i = todo.popleft()
                    batch.append(lines[i])
                    pending.append(i)
                adapter.send(b"".join(batch))
                await adapter.drain()
            i = pending[0]
            v = vectors[i]
            try:
                line = await adapter.readline(f"vector {v.id}")
                answer = _parse_answer(line, v.id, adapter.protocol)
            except AdapterDied as exc:
                pending.popleft()
                report.judgements.append(
                    Judgement(v.id, False, rule=PROTOCOL_RULE, explanation=f"{v.id}: {exc}")
                )
                todo.extendleft(reversed(pending))
                pending.clear()
                await adapter.stop()
                report.restarts += 1
                try:
                    await adapter.start()
                except ConformError as exc2:
                    for j in todo:
                        report.judgements.append(
                            Judgement(
                                vectors[j].id,
                                False,
                                rule=PROTOCOL_RULE,
                                explanation=f"{vectors[j].id}: the adapter could not be "
                                f"restarted: {exc2}",
                            )
                        )
                    todo.clear()
                continue
            pending.popleft()
            if answer.get("type") == "error":
                report.judgements.append(
                    Judgement(
                        v.id,
                        False,
                        rule=PROTOCOL_RULE,
                        explanation=f"{v.id}: the adapter could not run it: "
                        f"{str(answer.get('message'))[:QUOTE]}",
                    )
                )
                continue
            report.judgements.append(judge.judge(v, answer))
            if progress is not None:
                progress(len(report.judgements), len(vectors))
    finally:
        await adapter.stop(graceful=True)
    report.seconds = time.perf_counter() - start
    return report


def _vector_message(v: Vector, protocol: int = PROTOCOL) -> bytes:
    msg = {
        "protocol": protocol,
        "type": "vector",
        "id": v.id,
        "revision": v.revision,
        "scenario": scenario_data(v.scenario),
    }
    return (json.dumps(msg, separators=(",", ":")) + "\n").encode()


def _parse_answer(line: bytes, vid: str, protocol: int = PROTOCOL) -> dict[str, Any]:
    try:  # the shared strict reader: no NaN, no key twice in one object
        answer = STRICT.decode(line.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise AdapterDied(f"the answer is not JSON: {quote(line)}") from None
    if json_depth(answer) > ANSWER_DEPTH:
        raise AdapterDied(f"the answer nests deeper than {ANSWER_DEPTH} levels")
    if not isinstance(answer, dict):
        raise AdapterDied(f"the answer is not a JSON object: {quote(line)}")
    if answer.get("protocol") != protocol:
        raise AdapterDied(
            f"the answer has protocol {answer.get('protocol')!r}, not {protocol}: {quote(line)}"
        )
    if answer.get("type") not in ("outcome", "error"):
        raise AdapterDied(f"the answer's type is not outcome or error: {quote(line)}")
    if answer.get("id") != vid:
        raise AdapterDied(f"expected the answer for {vid}, got id {answer.get('id')!r}")
    return answer


def conform(
    command: Sequence[str],
    revision: str,
    *,
    vectors_path: str | Path | None = None,
    timeout: float = 10.0,
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """Run the vectors of ``revision`` (the committed ones unless ``vectors_path``)."""
    path = Path(vectors_path) if vectors_path else vectors_file(shipped_dir(), revision)
    vectors = load_vectors(path)
    wrong = [v.id for v in vectors if v.revision != revision]
    if wrong:
        raise ConformError(f"{path}: vector {wrong[0]} is of another revision than {revision}")
    return asyncio.run(
        run_vectors(command, vectors, revision, timeout=timeout, progress=progress)
    )


def self_command(retry: str | None = None) -> list[str]:
    """The command of our own adapter (``--self``), running retry behaviour ``retry``."""
    return [sys.executable, "-m", "toolcancel.adapter", *(("--retry", retry) if retry else ())]
