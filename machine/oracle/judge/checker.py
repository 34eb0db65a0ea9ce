"""The trace checker: replays each call of a trace through the pure machine, gives a verdict.

A trace (:mod:`toolcancel.contract.trace`) from any registry, in any language, is checked call by
call. The call's **contract events** are offered to the machine of :mod:`toolcancel.contract.core`
as a
*nondeterministic* automaton: the checker keeps every state the contract allows the call to be in,
and for each event takes :func:`toolcancel.contract.core.choices` from each of them -- the
reference's transition and every MAY alternative the contract marks (``alternative = true``).  So
every behaviour the contract allows is accepted, and the first event no possible state allows is the
violation.  A ``caller_abort`` is a contract event like any other: where it appears is when the
registry saw the caller's signal abort.

The **observation events** and the result are judged by the one judge, each rule once: before
a possible state takes a line, the automaton asks the judge's step checks
(:mod:`toolcancel.oracle.judge.steps`: the body's phases, the stages, the fused signal, an event the
contract has no transition for; :mod:`toolcancel.oracle.judge.results`: whether the result agrees
with the outcome the contract decided), and the lines no transition carries (the call's entry,
listener, slot, result, notify and its end) go to its trace checks
(:mod:`toolcancel.oracle.judge.lines`).  The first check that fails names the broken rule; this
module parses, replays and counts, and decides nothing itself.

What a trace must hold, beyond the contract events: a ``call_entry`` first; a ``stage_enter``
before each stage's decision; a ``fused`` line, then ``body_start``, right after a
``base_dispatch`` that invokes the body, and a ``body_settle`` before its ``body_ok`` or
``body_raise``; ``result`` and ``notify`` after ``publish``.  ``slot`` lines are optional and
``listener`` lines are only checked for balance, so a registry that adds no listener writes none.
A trace does not say whether a post-execute ``accept`` replaced the content, so after one the
content is not compared with the registry's texts (the revised ``error.message`` still is).

Why an automaton over interned state sets: a trace of millions of events must be checked in
linear time.  Each distinct set of possible states is interned once; the step from a set on an
event is computed once and cached, so checking an event costs one dict lookup.  Explanations are
computed only for the one event that fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ...contract.core import (
    UNKNOWN,
    CallerSignal,
    Occurrence,
    choices,
    initial_state,
    revision_table,
)
from ...contract.loader import Contract, RevisionContract
from ...contract.results import canonical_json
from ...contract.trace import ENVIRONMENT
from ...contract.trace_reader import (
    TraceError,
    TraceEvent,
    Traces,
    entry_error,
    gc_paused,
    iter_batches,
    parse_lines,
)
from .lines import LINES, judge_line
from .registry import CONTRACT
from .results import describe, describe_outcome, result_death
from .steps import (
    BODY_REPORTS,
    DECISION_STAGE,
    DISPATCHED,
    DISPATCHED_ABORTED,
    FUSED,
    IDLE,
    RUNNING,
    SETTLED_OK,
    SETTLED_RAISE,
    STAGE_STATE,
    Branch,
    Death,
    Replay,
    judge_step,
)

# ------------------------------------------------------------------------------------------------
# Verdicts
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """The verdict on one call: conforming, or the first violation and why."""

    call_id: str
    verdict: str  # "conforming" or "violation"
    source: str = "<trace>"
    rule: str | None = None
    title: str | None = None
    event_index: int | None = None  # 0-based within the call
    line: int | None = None  # 1-based line in the file
    allowed: tuple[str, ...] = ()
    seen: str | None = None
    explanation: str | None = None

    @property
    def conforming(self) -> bool:
        return self.verdict == "conforming"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"call_id": self.call_id, "verdict": self.verdict}
        out["file"] = self.source
        if not self.conforming:
            out.update(
                rule=self.rule,
                title=self.title,
                event_index=self.event_index,
                line=self.line,
                allowed=list(self.allowed),
                seen=self.seen,
                explanation=self.explanation,
            )
        return out


# ------------------------------------------------------------------------------------------------
# Possible states of a call
# ------------------------------------------------------------------------------------------------

EventKey = str | tuple[Any, ...]
"""An event as the automaton sees it: its name alone when it carries no data, else a tuple of
its name and its data values in a fixed order."""


# ------------------------------------------------------------------------------------------------
# The automaton of one revision
# ------------------------------------------------------------------------------------------------


class Automaton(Replay):
    """Interned sets of possible states of one contract revision, and the steps between them.

    ``step(config, key)`` is a dict lookup once computed; -1 means no possible state takes the
    event (the violation: :meth:`death` says which rule the judge's step checks found broken).
    """

    def __init__(self, table: RevisionContract) -> None:
        super().__init__(table)
        self.configs: list[tuple[Branch, ...]] = []
        self._config_ids: dict[tuple[Branch, ...], int] = {}
        self.rows: list[dict[EventKey, int]] = []  # per configuration: event key -> next
        self._starts: dict[tuple[str, bool, bool, str | None, int], int] = {}
        self._allowed: dict[tuple[int, bool, bool, bool], list[str]] = {}
        self._deaths: dict[tuple[int, EventKey], Death] = {}
        self._results: dict[tuple[int, str], tuple[int, Death | None, frozenset[str]]] = {}
        self.data_fields: dict[str, tuple[str, ...]] = {e.name: e.data for e in table.events}
        self.contract_events: frozenset[str] = frozenset(self.data_fields)

    # -- configurations ----------------------------------------------------------------------

    def start(
        self,
        caller: CallerSignal,
        agent: bool,
        approval_seam: bool,
        retry: str | None = None,
        wrappers: int = UNKNOWN,
    ) -> int:
        """The configuration a call begins in, given what its call_entry line says."""
        key = (caller, agent, approval_seam, retry, wrappers)
        found = self._starts.get(key)
        if found is None:
            cs = initial_state(
                self.table,
                caller,
                has_agent=agent,
                approval_seam=approval_seam,
                retry=retry,
                wrappers=wrappers,
            )
            found = self._starts[key] = self._intern([Branch(cs)])
        return found

    def _intern(self, branches: Iterable[Branch]) -> int:
        kept: dict[tuple[Any, ...], Branch] = {}
        for b in branches:
            kept.setdefault((b.cs, b.phase, b.stage, b.free), b)
        key = tuple(kept.values())
        found = self._config_ids.get(key)
        if found is None:
            found = len(self.configs)
            self.configs.append(key)
            self.rows.append({})
            self._config_ids[key] = found
        return found

    def step(self, config: int, key: EventKey) -> int:
        """The configuration after ``key`` (cached), or -1 if no possible state takes it."""
        row = self.rows[config]
        found = row.get(key)
        if found is not None:
            return found
        survivors: list[Branch] = []
        first: Death | None = None
        for b in self.configs[config]:
            nxt, death = self.successors(b, key)
            survivors.extend(nxt)
            if death is not None and first is None:
                first = death
        if survivors:
            found = self._intern(survivors)
        else:
            found = -1
            assert first is not None
            self._deaths[(config, key)] = first
        row[key] = found
        return found

    def result_rules(self, config: int) -> frozenset[str]:
        """The rules the result checks asked in ``config`` could fail (each branch's, the
        contract's own rule standing for its outcome's): what a checked result covers."""
        rules: set[str] = set()
        for b in self.configs[config]:
            asked = self.asked.get(("result", b), ())
            for rule, _ in asked:
                if rule != CONTRACT:
                    rules.add(rule)
                elif b.cs.outcome is not None:
                    rules.add(self.outcomes[b.cs.outcome].rule)
        return frozenset(rules)

    def death(self, config: int, key: EventKey) -> Death:
        """Why the event ``key`` is a violation in ``config`` (after :meth:`step` said -1)."""
        return self._deaths[(config, key)]

    def filter(self, config: int, keep: Iterable[Branch]) -> int:
        return self._intern(keep)

    # -- one possible state, one event ---------------------------------------------------------

    def occurrence(self, key: tuple[Any, ...]) -> Occurrence:
        name = key[0]
        return Occurrence(name, **dict(zip(self.data_fields[name], key[1:], strict=True)))

    def successors(self, b: Branch, key: EventKey) -> tuple[list[Branch], Death | None]:
        """The branches ``b`` becomes on ``key``, or the judge's reason it cannot take it."""
        if isinstance(key, str):
            key = (key,)
        name = key[0]
        if name in self.contract_events:
            return self._contract_event(b, key)
        death = judge_step(self, name, b, key[1:] if name == "fused" else key[-1])
        if death is not None:
            return [], death
        if name == "stage_enter":
            return [b._replace(stage=key[1])], None
        if name == "fused":
            return [b._replace(phase=FUSED)], None
        if name == "body_start":
            return [b._replace(phase=RUNNING)], None
        if name == "body_settle":
            return [b._replace(phase=SETTLED_OK if key[1] == "ok" else SETTLED_RAISE)], None
        raise AssertionError(f"not an automaton event: {name}")

    def _contract_event(self, b: Branch, key: tuple[Any, ...]) -> tuple[list[Branch], Death | None]:
        name = key[0]
        death = judge_step(self, "event", b, name)
        if death is not None:
            return [], death
        occ = self.occurrence(key)
        allowed = choices(self.table, b.cs, occ)
        if not allowed:
            death = judge_step(self, "machine", b, occ)
            assert death is not None  # the last machine check always fails
            return [], death
        death = judge_step(self, "decision", b, name)
        if death is not None:
            return [], death
        decides = name in DECISION_STAGE
        out = []
        for t, cs in reversed(allowed):  # the reference's transition first
            nb = b._replace(cs=cs, stage=None if decides else b.stage)
            if t.invoke:
                nb = nb._replace(phase=DISPATCHED_ABORTED if cs.state == "draining" else DISPATCHED)
            elif name in BODY_REPORTS:
                nb = nb._replace(phase=IDLE)
            if t.outcome is not None:
                nb = nb._replace(
                    free=False,
                    decided=t.index,
                    decided_event=name,
                    decided_in=b.cs.state,
                    decided_over=b.cs.outcome,
                )
            elif name == "post_accept":
                nb = nb._replace(free=True)
            if t.dest is not None or name == "redelegate":
                # (a rejected retry stays in its state, but the next event is judged after it)
                nb = nb._replace(last=t.index, before=b.cs, last_event=occ)
            out.append(nb)
        return out, None

    # -- what was allowed ----------------------------------------------------------------------

    def allowed(self, config: int, published: bool, resulted: bool, notified: bool) -> list[str]:
        """Event names some possible state accepts next (listener and slot lines aside).

        Cached per configuration, so a trace full of violations stays linear too."""
        memo = (config, published, resulted, notified)
        found = self._allowed.get(memo)
        if found is None:
            found = self._allowed[memo] = self._probe(config, published, resulted, notified)
        return list(found)

    def _probe(self, config: int, published: bool, resulted: bool, notified: bool) -> list[str]:
        names: list[str] = []
        probes: list[tuple[str, EventKey]] = []
        for e in self.table.events:
            probes.append((e.name, (e.name, *(d in _TRUE_BY_DEFAULT for d in e.data))))
        for stage in STAGE_STATE:
            probes.append((f"stage_enter({stage})", ("stage_enter", stage)))
        for kind in ("none", "caller", "slot", "relay"):
            for aborted in (False, True):
                probes.append(("fused", ("fused", kind, aborted)))
        probes.append(("body_start", ("body_start",)))
        probes.append(("body_settle(ok)", ("body_settle", "ok")))
        probes.append(("body_settle(raise)", ("body_settle", "raise")))
        for label, key in probes:
            if label in names:
                continue
            if any(self.successors(b, key)[0] for b in self.configs[config]):
                names.append(label)
        if published and not resulted:
            names.append("result")
        if resulted and not notified:
            names.append("notify")
        return names

_TRUE_BY_DEFAULT: Final = frozenset({"tool_found", "serializable"})


class _Lazy:
    """The last line of a call checked by :meth:`Checker.check_record`: only its number is
    read (by :meth:`Checker.finish`)."""

    __slots__ = ("line",)
    event = "end"
    data: Mapping[str, Any] = {}

    def __init__(self, line: int) -> None:
        self.line = line


# ------------------------------------------------------------------------------------------------
# Checking calls
# ------------------------------------------------------------------------------------------------


def _key_function(name: str, fields: tuple[tuple[str, Any], ...]) -> Any:
    """A function building the automaton key of a ``name`` line from its data (fast: no loop)."""
    if len(fields) == 1:
        ((f0, d0),) = fields
        return lambda d: (name, d.get(f0, d0))
    if len(fields) == 2:
        (f0, d0), (f1, d1) = fields
        return lambda d: (name, d.get(f0, d0), d.get(f1, d1))
    if len(fields) == 3:
        (f0, d0), (f1, d1), (f2, d2) = fields
        return lambda d: (name, d.get(f0, d0), d.get(f1, d1), d.get(f2, d2))
    return lambda d: (name, *(d.get(f, default) for f, default in fields))


_AUTOMATA: dict[int, tuple[RevisionContract, Automaton]] = {}


def automaton(table: RevisionContract) -> Automaton:
    """The (shared, growing) automaton of one revision table."""
    hit = _AUTOMATA.get(id(table))
    if hit is None or hit[0] is not table:
        hit = (table, Automaton(table))
        _AUTOMATA[id(table)] = hit
    return hit[1]


def _seen(ev: TraceEvent) -> str:
    data = ev.data
    fields = [k for k in data if k not in ("trace", "call", "event") and not k.startswith("x_")]
    if ev.event == "result":
        return "result: " + describe(data["result"])
    if not fields:
        return ev.event
    inside = ", ".join(f"{k}={canonical_json(data[k])}" for k in sorted(fields))
    return f"{ev.event}({inside})"


class CallRun:
    """One call being checked, event by event: where its automaton stands and what it has seen.

    Calls are checked incrementally, so a trace file is checked in one pass over its lines with
    memory proportional to its calls, not its events.
    """

    __slots__ = (
        "call_id",
        "caller_slot",
        "config",
        "entry",
        "index",
        "last",
        "notified",
        "published",
        "result_rules",
        "resulted",
        "row",
        "slot_slot",
        "source",
        "verdict",
    )

    def __init__(self, call_id: str, entry: TraceEvent, source: str) -> None:
        self.call_id = call_id
        self.entry = entry
        self.source = source
        self.config = 0
        self.row: dict[EventKey, int] = {}
        self.index = 0  # of the last event fed, within the call
        self.last = entry
        self.published = False
        self.resulted = False
        self.notified = False
        self.caller_slot = 0  # listeners the registry holds on the caller's signal
        self.slot_slot = 0  # ... and on the slot's signal
        self.verdict: Verdict | None = None  # set at the first violation
        self.result_rules: frozenset[str] = frozenset()  # the result checks asked of it


@dataclass
class Checker:
    """Checks calls against one revision of the contract (default: the contract's default)."""

    revision: str | None = None
    contract: Contract | None = None
    table: RevisionContract = field(init=False)
    auto: Automaton = field(init=False)

    def __post_init__(self) -> None:
        self.table = revision_table(self.revision, self.contract)
        self.revision = self.table.name
        self.auto = automaton(self.table)
        fields: dict[str, tuple[tuple[str, Any], ...]] = {
            e.name: tuple((d, d in _TRUE_BY_DEFAULT) for d in e.data) for e in self.table.events
        }
        fields.update(
            stage_enter=(("stage", None),),
            fused=(("kind", None), ("aborted", None)),
            body_start=(),
            body_settle=(("how", None),),
        )
        # Events without data are their own key (a str: its hash is cached); the others get a
        # function that builds the key from the line.
        self._plain: dict[str, str] = {name: name for name, f in fields.items() if not f}
        self._keyed = {name: _key_function(name, f) for name, f in fields.items() if f}
        self._caller_signal = self.table.contract.revision_info[self.table.name].get(
            "caller_signal"
        )

    # -- one call, incrementally ---------------------------------------------------------------

    def begin(self, entry: TraceEvent, source: str, call_id: str | None = None) -> CallRun:
        """Start checking the call whose ``call_entry`` line is ``entry``."""
        data = entry.data
        run = CallRun(data["call"] if call_id is None else call_id, entry, source)
        if data["revision"] != self.table.name:
            raise TraceError(
                source,
                entry.line,
                f"call {run.call_id!r} was recorded under the {data['revision']!r} contract, but "
                f"this check is against {self.table.name!r}; run with --revision "
                f"{data['revision']}",
            )
        found = judge_line(run, "call_entry", {**data, "caller_signal": self._caller_signal})
        if found is not None:
            check, why = found
            allowed = check.allowed(run) if check.allowed is not None else []
            run.verdict = self._violation(run, entry, Death(check.rule, why), allowed)
            return run
        run.config = self.auto.start(
            data["caller"],
            data["agent"],
            data["approval_seam"],
            data.get("retry"),
            data.get("wrappers", UNKNOWN),
        )
        run.row = self.auto.rows[run.config]
        return run

    def feed(self, run: CallRun, ev: TraceEvent) -> None:
        """Check the call's next event (nothing happens once the call has a verdict)."""
        if run.verdict is not None:
            return
        run.index += 1
        run.last = ev
        name = ev.event
        key: EventKey | None = self._plain.get(name)
        if key is None:
            make = self._keyed.get(name)
            if make is None:
                self._call_level(run, ev)
                return
            key = make(ev.data)
        nxt = run.row.get(key)
        if nxt is None:
            nxt = self.auto.step(run.config, key)
        if nxt < 0:
            allowed = self.auto.allowed(run.config, run.published, run.resulted, run.notified)
            run.verdict = self._violation(run, ev, self.auto.death(run.config, key), allowed)
            return
        if nxt != run.config:
            run.config = nxt
            run.row = self.auto.rows[nxt]
        if name == "publish":
            run.published = True

    def _call_level(self, run: CallRun, ev: TraceEvent) -> None:
        """listener, slot, result and notify lines: counted and ordered, not automaton steps;
        the judge's trace checks (:func:`toolcancel.oracle.judge.lines.judge_line`) decide each."""
        name, data = ev.event, ev.data
        if name in ENVIRONMENT:
            return  # what a harness saw: judged by toolcancel.oracle.judge, not by the automaton
        if name not in LINES or name == "call_entry":  # the readers refuse a second entry
            raise AssertionError(f"{name} inside a call")
        found = judge_line(run, name, data)
        death: Death | None = None
        allowed: list[str] | None = None
        if found is not None:
            death = Death(found[0].rule, found[1])
            if found[0].allowed is not None:
                allowed = found[0].allowed(run)
        elif name == "result":
            death = self._check_result(run, data["result"])
        if name == "listener" and death is None:
            attr = "caller_slot" if data["signal"] == "caller" else "slot_slot"
            setattr(run, attr, getattr(run, attr) + (1 if data["action"] == "add" else -1))
        elif name == "result":
            if death is not None and allowed is None:
                allowed = [
                    f"result of outcome {describe_outcome(self.auto.outcomes[o])}"
                    for o in dict.fromkeys(b.cs.outcome for b in self.auto.configs[run.config])
                    if o is not None
                ]
            run.resulted = True
        elif name == "notify":
            run.notified = True
        if death is not None:
            if allowed is None:
                resulted = run.resulted and name != "result"
                notified = run.notified and name != "notify"
                allowed = self.auto.allowed(run.config, run.published, resulted, notified)
            run.verdict = self._violation(run, ev, death, allowed)

    def finish(self, run: CallRun) -> Verdict:
        """The call's verdict once its trace has ended."""
        if run.verdict is not None:
            return run.verdict
        states = sorted({b.cs.state for b in self.auto.configs[run.config]})
        found = judge_line(run, "end", {"line": run.last.line, "states": states})
        if found is None:
            return Verdict(run.call_id, "conforming", run.source)
        allowed = (
            self.auto.allowed(run.config, run.published, run.resulted, run.notified)
            if not run.resulted
            else ["notify"]
        )
        return self._violation(
            run,
            run.last,
            Death(found[0].rule, found[1]),
            allowed,
            seen="end of the call's trace",
        )

    def check_call(self, call_id: str, events: Sequence[TraceEvent], source: str) -> Verdict:
        """The verdict on one call (``events[0]`` is its ``call_entry``)."""
        run = self.begin(events[0], source, call_id)
        feed = self.feed
        for ev in events[1:]:
            if run.verdict is not None:
                break
            feed(run, ev)
        return self.finish(run)

    def check_record(
        self, lines: Sequence[Mapping[str, Any]], abort_after: int | None, source: str = "<run>"
    ) -> tuple[Verdict, frozenset[str], tuple[frozenset[str | None], frozenset[str | None]]]:
        """The verdict on one call's in-memory lines (``lines[0]`` its ``call_entry``; the
        environment's observations are passed over), with the caller's abort where an
        environment that aborted it saw it: after the ``abort_after``-th contract event, the
        registry's own ``caller_abort`` lines left out (None: the trace's own, as they are).

        :meth:`check_call` in one loop over the lines as they are, for a model check that
        judges every run it makes: no line is copied, and an event is built only for the line a
        verdict names.  With the verdict: the rules the checks asked of its result could fail,
        and the outcomes the possible states held when the post-execute stage began and when the
        result was published (empty where the call never got there)."""
        entry = lines[0]
        run = self.begin(TraceEvent(1, "call_entry", dict(entry)), source, entry["call"])
        plain, keyed, contract = self._plain, self._keyed, self.auto.contract_events
        steps = 0
        feed = self.feed
        post = result = -1  # the configurations there
        for n in range(1, len(lines)):
            if run.verdict is not None:
                break
            data = lines[n]
            name = data["event"]
            if name in ENVIRONMENT:
                continue
            if name == "result":
                result = run.config
            elif name == "stage_enter" and post < 0 and data["stage"] == "post":
                post = run.config
            if name in contract:
                if name == "caller_abort":
                    if abort_after is not None:
                        continue
                else:
                    steps += 1
            key = plain.get(name)
            if key is None and name in keyed:
                key = keyed[name](data)
            if key is None:
                feed(run, TraceEvent(n + 1, name, data))  # type: ignore[arg-type]
            else:
                run.index += 1
                nxt = run.row.get(key)
                if nxt is None or nxt < 0:
                    run.index -= 1
                    feed(run, TraceEvent(n + 1, name, data))  # type: ignore[arg-type]
                else:
                    if nxt != run.config:
                        run.config = nxt
                        run.row = self.auto.rows[nxt]
                    if name == "publish":
                        run.published = True
                    run.last = _Lazy(n + 1)  # type: ignore[assignment]
            if steps == abort_after and name in contract and name != "caller_abort":
                abort = {"trace": data["trace"], "call": data["call"], "event": "caller_abort"}
                feed(run, TraceEvent(n + 1, "caller_abort", abort))
        return self.finish(run), run.result_rules, (self._outcomes(post), self._outcomes(result))

    def _outcomes(self, config: int) -> frozenset[str | None]:
        if config < 0:
            return frozenset()
        return frozenset(b.cs.outcome for b in self.auto.configs[config])

    def _check_result(self, run: CallRun, res: Mapping[str, Any]) -> Death | None:
        """Keep the possible states whose outcome the result agrees with (None: some do).

        Cached per configuration and result (its ``repr``: equal only for equal JSON data), as
        the automaton caches its steps: a model check publishes the same few results from the
        same few configurations hundreds of thousands of times."""
        auto = self.auto
        memo = (run.config, repr(res))
        found = auto._results.get(memo)
        if found is None:
            keep = []
            first: Death | None = None
            for b in auto.configs[run.config]:
                death = result_death(auto, b, res)
                if death is None:
                    keep.append(b)
                elif first is None:
                    first = death
            found = auto._results[memo] = (
                -1 if not keep else auto.filter(run.config, keep),
                first if not keep else None,
                auto.result_rules(run.config),
            )
        config, death, run.result_rules = found
        if config < 0:
            return death
        run.config = config
        run.row = auto.rows[config]
        return None

    def _violation(
        self,
        run: CallRun,
        ev: TraceEvent,
        death: Death,
        allowed: Sequence[str],
        seen: str | None = None,
    ) -> Verdict:
        return Verdict(
            run.call_id,
            "violation",
            run.source,
            rule=death.rule,
            title=self.auto.title(death.rule),
            event_index=run.index,
            line=ev.line,
            allowed=tuple(allowed),
            seen=seen or _seen(ev),
            explanation=death.explanation,
        )

    # -- whole traces ----------------------------------------------------------------------------

    def check_traces(self, traces: Traces, source: str = "<trace>") -> list[Verdict]:
        return [self.check_call(call, events, source) for call, events in traces.items()]

    def check_file(
        self, path: str | Path, progress: Callable[[int, int], None] | None = None
    ) -> list[Verdict]:
        """Read and check a trace file in one pass (``TraceError`` for unusable input).

        Verdicts come in the order the calls first appear.  Memory grows with the number of
        calls, not of events; the garbage collector is paused (see :func:`gc_paused`).
        """
        source = "<stdin>" if str(path) == "-" else str(path)
        runs: dict[str, CallRun] = {}
        begin, feed = self.begin, self.feed
        with gc_paused():
            for batch in iter_batches(path, self.table.contract, progress):
                for ev in batch:
                    call = ev.data["call"]
                    run = runs.get(call)
                    if run is None or ev.event == "call_entry":
                        if run is not None or ev.event != "call_entry":
                            raise entry_error(source, ev, run.entry.line if run else None)
                        runs[call] = begin(ev, source)
                    elif run.verdict is None:
                        feed(run, ev)
        return [self.finish(run) for run in runs.values()]

    def check_lines(self, lines: Sequence[Any], source: str = "<trace>") -> list[Verdict]:
        """Check in-memory trace lines (decoded JSON objects, e.g. an adapter's answer)."""
        return self.check_traces(parse_lines(lines, source, self.table.contract), source)


class RecordedRevisionChecker(Checker):
    """Checks each call against the revision its own ``call_entry`` records (``toolcancel check``
    without ``--revision``); an unknown revision there is unusable input naming the line."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._checkers: dict[str, Checker] = {self.table.name: self}
        self._owner: dict[int, Checker] = {}

    def begin(self, entry: TraceEvent, source: str, call_id: str | None = None) -> CallRun:
        revision = entry.data["revision"]
        checker = self._checkers.get(revision)
        if checker is None:
            if revision not in self.table.contract.revisions:
                raise TraceError(
                    source,
                    entry.line,
                    f"unknown contract revision {revision!r} in call_entry; choose one of "
                    f"{', '.join(self.table.contract.revisions)}",
                )
            checker = self._checkers[revision] = Checker(revision, self.table.contract)
        run = Checker.begin(checker, entry, source, call_id)
        self._owner[id(run)] = checker
        return run

    def feed(self, run: CallRun, ev: TraceEvent) -> None:
        Checker.feed(self._owner[id(run)], run, ev)

    def finish(self, run: CallRun) -> Verdict:
        return Checker.finish(self._owner.pop(id(run)), run)


def check_file(path: str | Path, revision: str | None = None) -> list[Verdict]:
    """The verdict on every call of a trace file, against ``revision`` (default: seed)."""
    return Checker(revision).check_file(path)


def check_lines(
    lines: Sequence[Any], revision: str | None = None, source: str = "<trace>"
) -> list[Verdict]:
    """The verdict on every call of in-memory trace lines."""
    return Checker(revision).check_lines(lines, source)


__all__ = [
    "Automaton",
    "Checker",
    "Death",
    "RecordedRevisionChecker",
    "Verdict",
    "check_file",
    "check_lines",
    "describe",
]
