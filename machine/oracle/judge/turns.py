"""The turn checks: the scheduler's rules over what an environment sees of a turn, each
registered once under its rule id in the one registry (the ``turn`` vantage,
:mod:`toolcancel.oracle.judge.registry`)."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ...contract.results import canonical_json, same_json
from .record import Record, env_line
from .registry import TURN, check, of, rule_of, rules

# ------------------------------------------------------------------------------------------------
# Turn checks: the scheduler's rules over what an environment sees of a turn
# ------------------------------------------------------------------------------------------------
# A turn's record is its events (``abort``; ``pre``, ``body_start``, ``body_settle``, ``post`` of
# a call ``c0``..; ``notify`` with the result an observer received), its log and when
# ``run_turn`` returned.  ``verify`` judges the reference's turns with these checks
# (:mod:`toolcancel.selfcheck.turncheck`), ``conform``
# another scheduler's answers to the turn vectors
# (:mod:`toolcancel.oracle.vectors.turns`).  Written from CONTRACT.md's rules, not from the
# reference's grouping (a MAY): any scheduler that keeps the rules passes, one call at a time or
# many.


@dataclass(frozen=True)
class TurnRecord:
    """What an environment saw of one turn of ``n`` calls ``c0``..: its events, its log, the
    number of events when ``run_turn`` returned (None: it never did), the revision's
    synthetic result for a call that never started, and whether the environment saw the turn
    hang (neither finish nor wait at a gate)."""

    n: int
    events: Sequence[Mapping[str, Any]]
    log: Sequence[Mapping[str, Any]]
    returned: int | None
    skipped: Mapping[str, Any]
    hung: bool = False

    @property
    def ids(self) -> list[str]:
        return [f"c{i}" for i in range(self.n)]

    def first(self) -> Mapping[str, tuple[int, str]]:
        """Each call's first event (index, name): a call started once any of it ran."""
        return self._first

    @functools.cached_property
    def _first(self) -> Mapping[str, tuple[int, str]]:  # every turn check asks: worked out once
        out: dict[str, tuple[int, str]] = {}
        for i, e in enumerate(self.events):
            if "call" in e:
                out.setdefault(e["call"], (i, e["event"]))
        return out

    def paired(self) -> bool:
        """Whether the log has one ``tool/call`` and one ``tool/result`` per model call."""
        return self._paired

    @functools.cached_property
    def _paired(self) -> bool:
        calls = sorted(e["callId"] for e in self.log if e["kind"] == "tool/call")
        results = sorted(e["callId"] for e in self.log if e["kind"] == "tool/result")
        return calls == self.ids and results == self.ids




def turn_problems(turn: TurnRecord) -> list[tuple[str, str]]:
    """Every turn check's problems, (rule, explanation), in the order they show.  A turn that
    never returned is that alone; a log without one pair per model call is judged no further
    than that."""
    if turn.returned is None:
        how = "neither finished nor waited at a gate" if turn.hung else "never returned"
        return [(TURN_DRAINS, f"run_turn {how}: a started call was never drained")]
    paired = turn.paired()
    found = [
        (at, c.rule, why)
        for c in of(TURN)
        if paired or not c.paired
        for at, why in c.judge(turn)
    ]
    found.sort(key=lambda x: x[0])
    return [(rule, why) for _, rule, why in found]


@check("R36", TURN, "turn")
def no_start_after_turn_abort(turn: TurnRecord) -> list[tuple[float, str]]:
    """No call starts (none of its hooks or body runs) after the turn signal aborted."""
    abort = next((i for i, e in enumerate(turn.events) if e["event"] == "abort"), None)
    if abort is None:
        return []
    return [
        (1.0, f"{c} was started after the turn signal aborted (its first event, {what}, came "
         "after the abort)")
        for c, (i, what) in turn.first().items()
        if i > abort
    ]


@check("R36", TURN, "turn")
def drained_before_return(turn: TurnRecord) -> list[tuple[float, str]]:
    """Every started body settles before the turn returns (drained, never abandoned)."""
    head = turn.events[: turn.returned]
    out = []
    for c in turn.ids:
        starts = sum(1 for e in head if e.get("call") == c and e["event"] == "body_start")
        settles = sum(1 for e in head if e.get("call") == c and e["event"] == "body_settle")
        if starts > settles:
            out.append((2.0, f"the body of {c} was not drained before the turn returned"))
    return out


@check("R38", TURN, "turn")
def hooks_in_model_order(turn: TurnRecord) -> list[tuple[float, str]]:
    """Pre- and post-execute run in model order."""
    ids, out = turn.ids, []
    pres = [e["call"] for e in turn.events if e["event"] == "pre"]
    if pres != ids[: len(pres)]:
        out.append((3.0, f"pre-execute ran in order {pres}, not model order"))
    posts = [e["call"] for e in turn.events if e["event"] == "post"]
    if posts != sorted(posts, key=lambda c: ids.index(c) if c in ids else turn.n):
        out.append((4.0, f"post-execute ran in order {posts}, not model order"))
    return out


@check("R37", TURN, "turn")
def one_call_one_result(turn: TurnRecord) -> list[tuple[float, str]]:
    """Every model call has exactly one ``tool/call`` and one ``tool/result``."""
    if turn.paired():
        return []
    calls = [e["callId"] for e in turn.log if e["kind"] == "tool/call"]
    results = [e["callId"] for e in turn.log if e["kind"] == "tool/result"]
    return [
        (5.0, f"calls {calls} and results {results} are not one pair per model call {turn.ids}")
    ]


def _order(turn: TurnRecord) -> tuple[list[str], list[str]]:
    """The logged results' calls, and of them those that started (committed)."""
    started = turn.first()
    order = [e["callId"] for e in turn.log if e["kind"] == "tool/result"]
    return order, [c for c in order if c in started]


@check("R38", TURN, "turn", paired=True)
def commits_in_model_order(turn: TurnRecord) -> list[tuple[float, str]]:
    """Results commit in model order."""
    _, committed = _order(turn)
    if committed == sorted(committed, key=turn.ids.index):
        return []
    return [(6.0, f"results committed as {committed}, not in model order")]


@check("R37", TURN, "turn", paired=True)
def unstarted_last(turn: TurnRecord) -> list[tuple[float, str]]:
    """Calls that never started get their results after all started calls', in model order."""
    order, committed = _order(turn)
    unstarted = [c for c in turn.ids if c not in turn.first()]
    if order[len(committed) :] == unstarted:
        return []
    return [
        (7.0, f"results logged as {order}: the never-started {unstarted} belong after all "
         "started calls' results, in model order")
    ]


@check("R38", TURN, "turn", paired=True)
def contexts_after_results(turn: TurnRecord) -> list[tuple[float, str]]:
    """Contexts are logged after all of the turn's results."""
    last = max(i for i, e in enumerate(turn.log) if e["kind"] == "tool/result")
    if any(e["kind"] == "context" for e in turn.log[:last]):
        return [(8.0, "a context was logged before the turn's last result")]
    return []


def _results(turn: TurnRecord) -> Iterator[tuple[int, str, Mapping[str, Any]]]:
    """(position, call, entry) of each ``tool/result`` entry, in log order."""
    for k, r in enumerate(e for e in turn.log if e["kind"] == "tool/result"):
        yield k, r["callId"], r


def _notified(turn: TurnRecord) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for e in turn.events:
        if e["event"] == "notify":
            out.setdefault(e["call"], []).append(e["result"])
    return out


@check("R9", TURN, "turn", paired=True)
def synthetic_skipped_result(turn: TurnRecord) -> list[tuple[float, str]]:
    """A call that never started gets the revision's synthetic result."""
    started = turn.first()
    return [
        (9 + k / 1000, f"{c} never started but its result is {r['payload']}")
        for k, c, r in _results(turn)
        if c not in started and not same_json(r["payload"], turn.skipped)
    ]


SKIPPED_RULE: Final = rule_of(synthetic_skipped_result)
"""The synthetic result of a call that never started: a turn exercises it only with one."""


@check("R31", TURN, "turn", paired=True)
def turn_call_notified_once(turn: TurnRecord) -> list[tuple[float, str]]:
    """Every started call is notified exactly once."""
    started, notified = turn.first(), _notified(turn)
    return [
        (9 + k / 1000, f"{c} was notified {len(notified.get(c, []))} times")
        for k, c, _ in _results(turn)
        if c in started and len(notified.get(c, [])) != 1
    ]


@check("R38", TURN, "turn", paired=True)
def logs_the_published_results(turn: TurnRecord) -> list[tuple[float, str]]:
    """Each ``tool/result`` entry is the published result without its contexts, and exactly the
    committed results' contexts are logged, in commit order."""
    started, notified = turn.first(), _notified(turn)
    out: list[tuple[float, str]] = []
    wanted: list[tuple[str, Any]] = []
    for k, c, r in _results(turn):
        seen = notified.get(c, [])
        if c not in started or len(seen) != 1:
            continue
        published = dict(seen[0])
        contexts = published.pop("additionalContexts", [])
        if not same_json(r["payload"], published):
            out.append(
                (9 + k / 1000, f"{c}'s tool/result entry {canonical_json(r['payload'])} is not "
                 f"the result its observer received without contexts, "
                 f"{canonical_json(published)}")
            )
        wanted += [(c, x) for x in contexts]
    logged = [(e["callId"], e["payload"]) for e in turn.log if e["kind"] == "context"]
    if len(logged) != len(wanted) or not all(
        c == d and same_json(x, y) for (c, x), (d, y) in zip(logged, wanted, strict=True)
    ):
        shown = [[(c, canonical_json(x)) for c, x in pairs] for pairs in (logged, wanted)]
        out.append(
            (10.0, f"the log's contexts {shown[0]} are not the committed results' contexts in "
             f"commit order {shown[1]}")
        )
    return out


# ------------------------------------------------------------------------------------------------
# One call of a turn, as the judge's record
# ------------------------------------------------------------------------------------------------


def turn_call_record(call: str, events: Sequence[Mapping[str, Any]], revision: str) -> Record:
    """What the environment saw of one call of a turn, as the record the call checks read
    (:mod:`toolcancel.oracle.judge.calls`): its body's starts (``body_start``), its observer's
    notifications (``notified``, and the result ``returned`` when there was one), and -- when
    the turn signal, the call's caller signal, aborted after the call had started --
    ``caller_aborted``: how many of its bodies started later, and whether its post-execute was
    still to come.  A turn's hooks run in the scheduler, not in the registry's trace: the record
    is at the outcome level."""
    lines: list[Mapping[str, Any]] = []
    results: list[Mapping[str, Any]] = []
    abort: int | None = None
    started = False
    later = 0
    post_before = False
    for e in events:
        if e["event"] == "abort":
            if started:  # one that starts after it is the scheduler's breach, not the call's
                abort = len(lines)
            continue
        if e.get("call") != call:
            continue
        started = True
        if e["event"] == "body_start":
            lines.append(env_line(call, "body_start"))
            later += abort is not None
        elif e["event"] == "post" and abort is None:
            post_before = True
        elif e["event"] == "notify":
            results.append(e["result"])
    if abort is not None:
        aborted = env_line(call, "caller_aborted", bodies_after=later, before_post=not post_before)
        lines.insert(abort, aborted)
    if len(results) == 1:
        lines.append(env_line(call, "returned", result=results[0]))
    lines.append(env_line(call, "notified", count=len(results)))
    return Record(lines, revision, "live")


TURN_DRAINS: Final = rule_of(drained_before_return)
"""A turn that never returned, or hangs: its started calls were not drained."""
TURN_STARTS: Final = rule_of(no_start_after_turn_abort)
"""What the scheduler prepares once the turn signal aborted: nothing more."""
TURN_HOOKS: Final = rule_of(hooks_in_model_order)
"""Where and in which order the scheduler runs a call's pre- and post-execute."""
TURN_RULES: Final = rules(TURN)
"""The rules the turn checks decide (``conform`` reports them for an adapter that runs turns)."""
