"""The per-call machine: pure, sans-IO, stepped through the contract's own table.

A tool call is an explicit state machine.  The registry (or the trace checker, or the model
checker) *offers* it occurrences of events -- "pre-execute settled with deny", "the caller
aborted", "the body returned" -- and the machine answers with the transition the contract takes:
the next state (which says what the driver must do next), the outcome the call now holds, and the
rule ids that justify it.  The machine never performs I/O, never awaits, never looks at a clock.

Rules of the machine (the table itself is in ``spec/contract.toml``):

* Candidates for ``(state, event)`` are tried in file order; the first whose guards hold and that
  is not an *alternative* is what the reference does (:func:`step`).
* Alternatives are behaviours the contract also allows (MAY points).  :func:`choices` returns
  every applying candidate, so a checker can accept all of them.
* No applying candidate means the occurrence violates the contract (:class:`ContractViolation`).
* A ``caller_abort`` occurrence marks the caller signal aborted in the call's state; the
  checkpoints read that mark live, exactly like the registry reads ``signal.aborted``.

Why not a ``transitions`` model per call: building one costs ~170 us here against a ~6 us task
switch.  The same table also builds a ``transitions`` statechart
(:mod:`toolcancel.teaching.statechart`) for diagrams and teaching, and a test proves both step alike
over every enumerated path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal, NamedTuple, cast

from .errors import ContractViolation
from .loader import Contract, RevisionContract, Transition, load_contract

CallerSignal = Literal["none", "live", "aborted"]
"""What the registry captured at entry: no caller signal, a live one, or one already aborted."""

UNKNOWN: int = -1
"""``CallState.wrappers`` when the call's around-wrapper count is not known (a version-1 trace):
the listener guards then accept both hand-outs, so only the declared-count case is exact."""


class CallState(NamedTuple):
    """Everything the contract's guards may read about one call.

    Invariants (kept by :func:`apply`): ``depth >= 0``; ``caller_aborted`` never goes back to
    False; ``caller == "aborted"`` implies ``caller_aborted``; ``caller == "none"`` implies not
    ``caller_aborted``; ``invoked`` never goes back to False; ``handed`` never decreases.

    ``retry`` (the declared D11 behaviour) and ``wrappers`` (the around listeners the call was
    given at entry, or :data:`UNKNOWN`) are fixed for the call; under the ``cursor`` behaviour
    ``handed`` counts the wrappers the waterfall has handed out -- where the cursor stands -- and
    stays 0 otherwise (there the delegating wrapper's ``depth`` says where the chain goes on).
    ``handing`` is set by a ``hand_out`` transition (a retried ``next()``) and holds until the
    waterfall has handed something out: no wrapper can settle in between.
    """

    state: str
    caller: CallerSignal = "live"
    caller_aborted: bool = False
    has_agent: bool = True
    approval_seam: bool = True
    depth: int = 0
    outcome: str | None = None
    invoked: bool = False
    retry: str = "reenter"
    wrappers: int = UNKNOWN
    handed: int = 0
    handing: bool = False


class Occurrence(NamedTuple):
    """An event offered to a call, with the observations its guards may read."""

    event: str
    slot_aborted: bool = False
    tool_found: bool = True
    passthrough: bool = False
    is_error: bool = False
    timeout: bool = False
    serializable: bool = True


def initial_state(
    table: RevisionContract,
    caller: CallerSignal,
    *,
    has_agent: bool = False,
    approval_seam: bool = False,
    retry: str | None = None,
    wrappers: int = UNKNOWN,
) -> CallState:
    """The state a call is in when the registry begins entry (``retry`` defaults to the
    contract's ``default_retry``)."""
    return CallState(
        state=table.initial,
        caller=caller,
        caller_aborted=caller == "aborted",
        has_agent=has_agent,
        approval_seam=approval_seam,
        retry=table.contract.default_retry if retry is None else retry,
        wrappers=wrappers,
    )


GuardFn = Callable[[CallState, Occurrence, RevisionContract], bool]


def _is_error(s: CallState, table: RevisionContract) -> bool:
    return s.outcome is not None and table.outcome_is_error[s.outcome]


def _listener_left(s: CallState) -> bool:
    """Whether the around waterfall's next hand-out is a wrapper (D11).  A ``cursor`` stands
    after the wrappers handed out so far; otherwise the delegating wrapper's depth says where."""
    if s.wrappers == UNKNOWN:
        return True
    return (s.handed if s.retry == "cursor" else s.depth) < s.wrappers


def _listeners_done(s: CallState) -> bool:
    return s.wrappers == UNKNOWN or not _listener_left(s)


GUARDS: Mapping[str, GuardFn] = {
    "cancelled_after_entry": lambda s, o, t: s.caller == "live" and s.caller_aborted,
    "caller_aborted": lambda s, o, t: s.caller != "none" and s.caller_aborted,
    "aborted_at_entry": lambda s, o, t: s.caller == "aborted",
    "approval_seam": lambda s, o, t: s.approval_seam,
    "has_agent": lambda s, o, t: s.has_agent,
    "fused_aborted": lambda s, o, t: (s.caller != "none" and s.caller_aborted) or o.slot_aborted,
    "tool_found": lambda s, o, t: o.tool_found,
    "result_is_error": lambda s, o, t: _is_error(s, t),
    "passthrough": lambda s, o, t: o.passthrough,
    "returned_error": lambda s, o, t: o.is_error,
    "returned_timeout": lambda s, o, t: o.timeout and o.is_error,
    "in_wrapper": lambda s, o, t: s.depth > 0,
    "exception_pending": lambda s, o, t: s.outcome == "around_error",
    "listener_left": lambda s, o, t: _listener_left(s),
    "listeners_done": lambda s, o, t: _listeners_done(s),
    "handing_out": lambda s, o, t: s.handing,
    "retry_rejected": lambda s, o, t: s.retry == "reject",
    "body_invoked": lambda s, o, t: s.invoked,
    "serializable": lambda s, o, t: o.serializable,
}
"""The one implementation of every guard the contract names (a test checks the names match)."""


def guards_hold(t: Transition, s: CallState, o: Occurrence, table: RevisionContract) -> bool:
    """Whether every guard of ``t`` has its wanted truth value."""
    for name, want in t.guards:
        if GUARDS[name](s, o, table) is not want:
            return False
    return True


def apply(t: Transition, s: CallState, o: Occurrence) -> CallState:
    """The state after taking ``t`` on ``o`` (its invariants are checked on :func:`seed_step`)."""
    return CallState(
        s.state if t.dest is None else t.dest,
        s.caller,
        s.caller_aborted or (o.event == "caller_abort" and s.caller != "none"),
        s.has_agent,
        s.approval_seam,
        s.depth + t.depth,
        s.outcome if t.outcome is None else t.outcome,
        s.invoked or t.invoke,
        s.retry,
        s.wrappers,
        s.handed + (t.depth > 0 and s.retry == "cursor"),
        t.hand_out or (s.handing and t.dest is None and t.depth == 0),
    )


def choices(
    table: RevisionContract, s: CallState, o: Occurrence
) -> list[tuple[Transition, CallState]]:
    """Every transition the contract allows for ``o`` in ``s``, each with the state it leads to.

    That is the first applying ordinary transition (the reference's, listed last) and every
    applying alternative placed before it in the file: an alternative after it is shadowed,
    exactly as an ordinary transition after it is.
    """
    allowed: list[tuple[Transition, CallState]] = []
    for t in table.candidates.get((s.state, o.event), ()):
        if guards_hold(t, s, o, table):
            allowed.append((t, apply(t, s, o)))
            if not t.alternative:
                return allowed
    return allowed


def step(table: RevisionContract, s: CallState, o: Occurrence) -> tuple[Transition, CallState]:
    """The transition the reference takes for ``o`` in ``s``, and the state after it.

    Raises :class:`ContractViolation` when the contract allows no transition.  Answers are
    memoized per table: a call's states and occurrences are few and hashable, and a checker
    steps every call through the same ones.  (The registry steps the same answers precomputed:
    :mod:`toolcancel.contract.compiled`.)
    """
    t, after, _ = _recorded_step(table, s, o)
    return t, after


def _recorded_step(
    table: RevisionContract, s: CallState, o: Occurrence
) -> tuple[Transition, CallState, PathStep]:
    """:func:`step` plus the :class:`PathStep` recording it, memoized together: the record is a
    function of ``(s, o)`` too, so every call taking the same step shares one immutable record
    (an in-flight call's path then costs a list slot per step)."""
    key = (s, o)
    hit = table.step_cache.get(key)
    if hit is not None:
        return cast("tuple[Transition, CallState, PathStep]", hit)
    t, after = decide(table, s, o)
    answer = (t, after, PathStep(s.state, o.event, after.state, t.index, t.rules, after.outcome, o))
    if len(table.step_cache) >= _STEP_CACHE_LIMIT:
        table.step_cache.clear()
    table.step_cache[key] = answer
    return answer


def decide(table: RevisionContract, s: CallState, o: Occurrence) -> tuple[Transition, CallState]:
    """:func:`step` without the memo: the pure function its contracts are stated on."""
    for t in table.candidates.get((s.state, o.event), ()):
        if not t.alternative and guards_hold(t, s, o, table):
            return t, apply(t, s, o)
    raise ContractViolation(s.state, o.event, table.events_allowed_in(s.state))


_STEP_CACHE_LIMIT = 1 << 16


class PathStep(NamedTuple):
    """One recorded step of a call: where it was, what happened, where it went, and why.

    ``occurrence`` keeps the event's observations, so a path can be replayed through :func:`step`.
    """

    source: str
    event: str
    dest: str
    transition: int
    rules: tuple[str, ...]
    outcome: str | None
    occurrence: Occurrence


class CallMachine:
    """A call's machine plus the path it has taken: the explanation of its outcome.

    This is the only mutable part of the core, and it holds no I/O: :meth:`offer` is :func:`step`
    plus a record.
    """

    __slots__ = ("current", "path", "table")

    def __init__(
        self,
        table: RevisionContract,
        caller: CallerSignal,
        *,
        has_agent: bool = False,
        approval_seam: bool = False,
        retry: str | None = None,
        wrappers: int = UNKNOWN,
    ) -> None:
        self.table = table
        self.current = initial_state(
            table,
            caller,
            has_agent=has_agent,
            approval_seam=approval_seam,
            retry=retry,
            wrappers=wrappers,
        )
        self.path: list[PathStep] = []

    @property
    def state(self) -> str:
        return self.current.state

    @property
    def outcome(self) -> str | None:
        return self.current.outcome

    def offer(self, o: Occurrence) -> Transition:
        """Take the reference's transition for ``o`` and record it."""
        hit = self.table.step_cache.get((self.current, o))  # the memo, without a call
        t: Transition
        t, self.current, record = hit or _recorded_step(self.table, self.current, o)
        self.path.append(record)
        return t


def revision_table(
    revision: str | None = None, contract: Contract | None = None
) -> RevisionContract:
    """The compiled table of one revision of the shipped (or given) contract."""
    return (contract or load_contract()).revision(revision)


def _late_success(before: CallState, after: CallState, table: RevisionContract) -> bool:
    """A step that lets a success through checkpoint C3 (around_after to post_policy) or C4
    (post_policy to finalizing) although the caller aborted after entry."""
    cancelled = before.caller == "live" and after.caller_aborted
    through = (before.state, after.state) in _CHECKPOINTS
    return cancelled and through and not _is_error(after, table)


_CHECKPOINTS = frozenset({("around_after", "post_policy"), ("post_policy", "finalizing")})


def seed_step(
    state_i: int,
    caller_i: int,
    caller_aborted: bool,
    depth: int,
    outcome_i: int,
    invoked: bool,
    retry_i: int,
    wrappers: int,
    handed: int,
    handing: bool,
    event_i: int,
    slot_aborted: bool,
    tool_found: bool,
    is_error: bool,
    passthrough: bool,
) -> CallState | None:
    """One step of the seed contract, with the properties it must have stated as contracts.

    States, callers, outcomes, retry behaviours and events are indices into the contract's own
    lists (-1: no outcome yet), so CrossHair explores every one of them.  The conditions:
    invariants are kept, no body starts while the caller is cancelled after entry (R28), no
    success passes C3 or C4 then (R28), and the waterfall never hands out more wrappers than the
    call has (D11, under every retry behaviour).  ``None``: the contract allows no step.

    pre: 0 <= state_i < len(_STATES) and 0 <= event_i < len(_EVENTS)
    pre: 0 <= caller_i < 3 and -1 <= outcome_i < len(_OUTCOMES) and 0 <= depth <= 3
    pre: 0 <= retry_i < len(_RETRIES) and -1 <= wrappers <= 3 and 0 <= handed <= 3
    pre: wrappers == -1 or (handed <= wrappers and depth <= wrappers)
    pre: (_RETRIES[retry_i] == "cursor" and depth <= handed) or (_RETRIES[retry_i] != "cursor" and handed == 0)
    pre: caller_i != 2 or caller_aborted
    pre: caller_i != 0 or not caller_aborted
    post: __return__ is None or __return__.depth >= 0
    post: __return__ is None or __return__.caller_aborted or not caller_aborted
    post: __return__ is None or __return__.invoked or not invoked
    post: __return__ is None or __return__.handed >= handed
    post: __return__ is None or wrappers == -1 or __return__.handed <= wrappers
    post: __return__ is None or wrappers == -1 or __return__.depth <= wrappers
    post: __return__ is None or not (__return__.state == "body" and _STATES[state_i] != "body" and caller_i == 1 and __return__.caller_aborted)
    post: __return__ is None or not _late_success(_state(state_i, caller_i, caller_aborted, depth, outcome_i, invoked), __return__, _SEED)
    """  # noqa: E501 - CrossHair reads one condition per line
    s = _state(state_i, caller_i, caller_aborted, depth, outcome_i, invoked,
               _RETRIES[retry_i], wrappers, handed, handing)  # fmt: skip
    o = Occurrence(_EVENTS[event_i], slot_aborted, tool_found, passthrough, is_error, is_error)
    try:
        return decide(_SEED, s, o)[1]
    except ContractViolation:
        return None


def _state(
    state_i: int,
    caller_i: int,
    caller_aborted: bool,
    depth: int,
    outcome_i: int,
    invoked: bool,
    retry: str = "reenter",
    wrappers: int = UNKNOWN,
    handed: int = 0,
    handing: bool = False,
) -> CallState:
    """The call state the indices name (the retry dimensions at :class:`CallState`'s defaults
    unless given), built in one go: the exhaustive check builds millions of them."""
    caller: CallerSignal = ("none", "live", "aborted")[caller_i]
    outcome = None if outcome_i < 0 else _OUTCOMES[outcome_i]
    return CallState(
        _STATES[state_i], caller, caller_aborted, True, True, depth, outcome, invoked,
        retry, wrappers, handed, handing,
    )  # fmt: skip


_SEED = load_contract().revision("seed")
_STATES = tuple(st.name for st in _SEED.states)
_EVENTS = tuple(e.name for e in _SEED.events)
_OUTCOMES = tuple(o.name for o in _SEED.outcomes)
_RETRIES = _SEED.contract.retry_names
