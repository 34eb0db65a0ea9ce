"""The checks of a call: what each rule observably means of one call's record.

Registered in the judge's registry (:mod:`toolcancel.oracle.judge`) under the rule each decides, in
the contract's rule order; ``import toolcancel.oracle.judge`` imports this module, so every check is
registered wherever the judge is.  Each reads the record (the registry's trace and what the
environment observed) and, where it compares with what the contract allows, the vector
(:class:`~toolcancel.oracle.judge.Want`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ...contract.results import canonical_json
from .record import SLOT_WRAPPERS, Failure, Record, Want
from .registry import RECORD, check, rule_of

if TYPE_CHECKING:
    from ..scenario_language import Scenario


def _signal_text(signals: Sequence[Mapping[str, Any]]) -> str:
    if not signals:
        return "(no body ran)"
    return ", ".join(
        f"aborted by {s.get('reason') or 'nobody'}" if s.get("aborted") else "live" for s in signals
    )


def _signal(line: Mapping[str, Any]) -> dict[str, Any]:
    return {"aborted": bool(line["aborted"]), "reason": line.get("reason")}


@check("R27", RECORD, "quiescence", reads=("settled",))
def quiescent(record: Record, want: Want | None) -> Failure | None:
    """execute() settles only once every body it started has settled, and starts none after."""
    (i,) = record.at("settled")[:1]
    settled = record.lines[i]
    started, done = settled["bodies_started"], settled["bodies_settled"]
    if started > done:
        return Failure.of(
            quiescent,
            i,
            "quiescence",
            f"execute() settled while {started - done} tool body invocation(s) were still "
            "running; the registry must await the body to quiescence.",
            "no body running when execute() settled",
            f"{started - done} body running",
        )
    starts = record.starts()
    if len(starts) > started:
        return Failure.of(
            quiescent,
            starts[started],
            "quiescence",
            f"a body started after execute() settled ({len(starts)} started in all, {started} "
            "before it settled): the call must be quiescent when it settles.",
            f"{started} body start(s) in all",
            f"{len(starts)} body start(s)",
        )
    return None


@check("R27", RECORD, "quiescence")
def settles(record: Record, want: Want | None) -> Failure | None:
    """execute() settles: it neither hangs nor leaves the call waiting on nothing."""
    if record.has("settled") or record.has("returned"):
        return None
    raised = record.of("raised")
    what = raised[0]["error"] if raised else "it neither returned nor raised"
    return Failure.of(
        settles,
        record.end(),
        "quiescence",
        f"execute() never settled ({what}): the call neither finished nor waited at a gate.",
        "execute() settles",
        "never settled",
    )


@check("R31", RECORD, "result")
def returns_a_result(record: Record, want: Want | None) -> Failure | None:
    """Every call publishes a result: execute() returns it, never raises -- unless what it
    raised is the caller's own cancellation coming back to a caller that gave up while the call
    ran (``observed.caller_cancelled`` with ``raised``: MCP never answers a request its caller
    cancelled; a runtime re-raises in the task its caller cancelled).  No return is owed then;
    the result the call published is judged where it shows (the notifications)."""
    if record.has("returned") or not record.has("settled"):
        return None  # no settle: that is settles' failure
    raised = record.of("raised")
    if (
        raised
        and raised[0].get("cancellation")
        and want is not None
        and cancels_awaiting_task(want.scenario)
    ):
        return None
    what = raised[0]["error"] if raised else "nothing"
    return Failure.of(
        returns_a_result,
        record.at("raised")[0] if raised else record.end(),
        "result",
        f"execute() did not return a result: it raised {what}.",
        "a result",
        f"raised {what}",
    )


def cancels_awaiting_task(s: Scenario) -> bool:
    """Whether the caller of ``s`` gives up after entry where a task can be cancelled -- right
    after ``execute()`` returned, or while the call waits at a gate -- so that a caller which
    cancels the task awaiting the call may see ``CancelledError`` there (Python binding P2)."""
    return s.entry_caller == "live" and (s.cancel == "after_call" or s.cancel.startswith("gate:"))


@check("R31", RECORD, "result", reads=("caller_cancelled",))
def cancelled_after_publication(record: Record, want: Want | None) -> Failure | None:
    """A caller that cancelled the task awaiting the call may get ``CancelledError`` instead of
    the result, but only once the call published exactly one result (``returned`` holds it, and
    every other check judges it as the caller's abort it was), and only when it did cancel."""
    (i,) = record.at("caller_cancelled")[:1]
    notified = record.of("notified")
    if want is not None and not cancels_awaiting_task(want.scenario):
        why = "its caller never cancelled the task awaiting it after entry"
    elif not record.has("returned"):
        why = "no result was published before it"
    elif notified and notified[0]["count"] != 1:
        why = f"{notified[0]['count']} notifications were published, not exactly one"
    else:
        return None
    return Failure.of(
        cancelled_after_publication,
        i,
        "result",
        f"execute() raised CancelledError to its caller, but {why}: a cancelled caller may see "
        "CancelledError only after the call published exactly one result.",
        "a result (or CancelledError after exactly one, to a caller that cancelled its task)",
        f"CancelledError: {why}",
    )


def _not_seed_pre_aborted(record: Record, want: Want | None) -> bool:
    return not (record.caller == "aborted" and record.revision == "seed")


@check(
    "R17",
    RECORD,
    "body_start_signals",
    reads=("body_signal",),
    levels=frozenset({"outcome"}),
    when=(_not_seed_pre_aborted, "a body started, unless the seed's pre-aborted entry"),
)
def c2_invokes_live(record: Record, want: Want | None) -> Failure | None:
    """Checkpoint C2 invokes a body only with a live fused signal (the seed's pre-aborted entry
    aside: it disables every replacement, R25)."""
    if not _not_seed_pre_aborted(record, want):
        return None
    starts = record.body_signals("start")
    for k, (i, line) in enumerate(starts):
        if line["aborted"] or line.get("reason") is not None:
            return Failure.of(
                c2_invokes_live,
                i,
                "body_start_signals",
                f"body invocation {k + 1} started with a signal {_signal_text([line])}; checkpoint "
                "C2 does not invoke the body once its signal is aborted.",
                "live",
                _signal_text([_signal(x) for _, x in starts]),
            )
    return None


def _seed_pre_aborted(record: Record, want: Want | None) -> bool:
    return not _not_seed_pre_aborted(record, want)


@check(
    "R25",
    RECORD,
    "body_start_signals",
    reads=("body_signal",),
    levels=frozenset({"outcome"}),
    when=(_seed_pre_aborted, "the seed's pre-aborted entry, and a body started"),
    needs_vector=True,
    outcome=True,  # asked with the result: a body's signal is seen before what follows it
)
def pre_aborted_body_signal(record: Record, want: Want | None) -> Failure | None:
    """A caller aborted at entry (seed) runs every stage and hands the body its aborted signal:
    each body starts aborted exactly when it settles aborted (whose reason it carries is
    fusion's, R21)."""
    assert want is not None and want.expectation is not None
    if not _seed_pre_aborted(record, want):
        return None
    starts = record.body_signals("start")
    wanted = [dict(b) for b in want.expectation.body_signals]
    got = [_signal(x) for _, x in starts]
    if len(got) != len(wanted):
        return None
    differ = [
        k for k, (x, y) in enumerate(zip(got, wanted, strict=True)) if x["aborted"] != y["aborted"]
    ]
    if not differ:
        return None
    k = differ[0]
    return Failure.of(
        pre_aborted_body_signal,
        starts[k][0],
        "body_start_signals",
        f"body invocation {k + 1} started with a signal {_signal_text([got[k]])}; it must start "
        f"{_signal_text([wanted[k]])} (a caller aborted at entry runs every stage and hands the "
        "body its aborted signal).",
        _signal_text(wanted),
        _signal_text(got),
    )


@check("R18", RECORD, "body_starts", needs_vector=True)
def body_starts(record: Record, want: Want | None) -> Failure | None:
    """The body is invoked exactly as often as the contract's path invokes it (one per dispatch
    the contract lets through; a late start is R28's)."""
    assert want is not None and want.expectation is not None
    exp = want.expectation
    starts = record.starts()
    settles = record.body_signals("settle")
    if len(starts) == exp.body_starts and len(settles) == len(starts):
        return None
    late = len(starts) > exp.body_starts and want.aborted_before_dispatch()
    at = starts[exp.body_starts] if len(starts) > exp.body_starts else record.end()
    seen = "by the trace" if record.trace else "by the adapter's report"
    return Failure.of(
        no_late_start_or_success if late else body_starts,
        at,
        "body_starts",
        f"the body started {len(starts)} time(s) {seen} and {len(settles)} by the adapter's "
        f"observation; the contract starts it {exp.body_starts} time(s) here.",
        exp.body_starts,
        len(starts),
    )


@check("R21", RECORD, "body_signals", reads=("body_signal",), needs_vector=True, outcome=True)
# asked with the result, earliest evidence first: what the body's signal showed when it settled
# comes before what post-execute received and the result, which it may explain
def fused_signal(record: Record, want: Want | None) -> Failure | None:
    """The body's fused signal aborts when the caller's or the slot's does, with the first
    source's reason (what it showed when the body settled)."""
    assert want is not None and want.expectation is not None
    settles = record.body_signals("settle")
    got = [_signal(x) for _, x in settles]
    wanted = [dict(b) for b in want.expectation.body_signals]
    if got == wanted or len(got) != len(wanted):
        return None  # a count that differs is body_starts'
    k = next(k for k, (x, y) in enumerate(zip(got, wanted, strict=True)) if x != y)
    return Failure.of(
        fused_signal,
        settles[k][0],
        "body_signals",
        f"when the body settled its signal was {_signal_text(got)}; the fused signal must be "
        f"{_signal_text(wanted)} (it aborts when the caller or the slot's signal does, with the "
        "first source's reason).",
        _signal_text(wanted),
        _signal_text(got),
    )


@check("R31", RECORD, "notifications", reads=("notified",))
def notified_once(record: Record, want: Want | None) -> Failure | None:
    """Observers are notified exactly once per call (as often as the contract notifies)."""
    expected = 1 if want is None or want.expectation is None else want.expectation.notifications
    i = record.at("notified")[0]
    count = record.lines[i]["count"]
    if count == expected:
        return None
    return Failure.of(
        notified_once,
        i,
        "notifications",
        f"observers were notified {count} time(s); the contract notifies exactly "
        f"{expected} time(s).",
        expected,
        count,
    )


@check("R31", RECORD, "notified_same", reads=("notified",))
def notified_same(record: Record, want: Want | None) -> Failure | None:
    """Observers get the very object execute() returns."""
    i = record.at("notified")[0]
    if record.lines[i].get("same") is not False:
        return None
    return Failure.of(
        notified_same,
        i,
        "notified_same",
        "an observer was notified with another object than the one execute() returned; the "
        "contract notifies the very result it returns.",
        "the returned object",
        "another object",
    )


@check("R30", RECORD, "frozen", reads=("frozen",))
def result_frozen(record: Record, want: Want | None) -> Failure | None:
    """The published result is deep-frozen before any observer sees it."""
    i = record.at("frozen")[0]
    if record.lines[i]["result"]:
        return None
    return Failure.of(
        result_frozen,
        i,
        "frozen",
        "an observer could write into the published result; it must be deep-frozen "
        "(snapshotted and frozen exactly once, before any observer sees it).",
        "a deep-frozen result",
        "a result that accepted a write",
    )


@check("R31", RECORD, "frozen", reads=("frozen",))
def view_frozen(record: Record, want: Want | None) -> Failure | None:
    """The execution view is frozen immediately before observers are notified."""
    i = record.at("frozen")[0]
    if record.lines[i]["view"]:
        return None
    return Failure.of(
        view_frozen,
        i,
        "frozen",
        "an observer could write the execution view's signal slot; the registry must freeze "
        "the view immediately before notifying.",
        "a frozen view",
        "a slot that accepted a write",
    )


@check("R24", RECORD, "approval_signal", reads=("approval_signal",))
def approval_signal(record: Record, want: Want | None) -> Failure | None:
    """The approval seam receives the slot's signal as pre-execute left it."""
    i = record.at("approval_signal")[0]
    if record.lines[i]["signal"] == "pre_slot":
        return None
    return Failure.of(
        approval_signal,
        i,
        "approval_signal",
        "the approval seam received another signal than the one pre-execute found in the slot; "
        "it must receive the slot's signal as it is when approval is asked (C itself, by "
        "identity, unless a pre-execute listener changed the slot).",
        "pre_slot",
        "other",
    )


@check("R23", RECORD, "slot_after_next", reads=("slot_after_next",))
def slot_restored(record: Record, want: Want | None) -> Failure | None:
    """After next() settles, a wrapper finds in the slot the signal it handed on."""
    for k, i in enumerate(record.at("slot_after_next")):
        if not record.lines[i]["same"]:
            return Failure.of(
                slot_restored,
                i,
                "slot_after_next",
                f"after next() number {k + 1} settled, its wrapper found another signal in the "
                "slot than the one it handed on; after the body the slot holds what the wrappers "
                "left (W), and each inner wrapper restores what it found.",
                "the slot as the wrapper left it",
                f"another signal after next() {k + 1}",
            )
    return None


def _post_failure(record: Record, want: Want | None) -> tuple[int, Any, Any] | None:
    """Where what post-execute received differs from every allowed expectation's, if it does."""
    assert want is not None and want.expectation is not None
    exp = want.expectation
    if exp.post_received is ...:
        return None
    i = record.at("post_received")[0]
    got = record.lines[i].get("result")
    if got == exp.post_received:  # the common case: equal data, no canonical text needed
        return None
    mine = canonical_json(got)
    if mine == canonical_json(exp.post_received):
        return None
    result = exp.result_json
    for e in want.expectations:  # a MAY path to the same result may hand it another one
        if e.post_received is not ... and e.result_json == result:
            if canonical_json(e.post_received) == mine:
                return None
    return i, got, exp.post_received


def _received(why: str, rule: str, found: tuple[int, Any, Any]) -> Failure:
    i, got, want = found
    return Failure(
        rule,
        i,
        "post_received",
        f"post-execute received {canonical_json(got)}; the contract hands it "
        f"{canonical_json(want)} here{why}",
        canonical_json(want),
        canonical_json(got),
    )


def _stated(record: Record, want: Want | None) -> bool:
    return (
        want is not None
        and want.expectation is not None
        and want.expectation.post_received is not ...
    )


@check(
    "R10",
    RECORD,
    "post_received",
    reads=("post_received",),
    when=(_stated, "the vector states what post-execute receives"),
    needs_vector=True,
    outcome=True,
)
def post_runs(record: Record, want: Want | None) -> Failure | None:
    """Post-execute runs exactly where the contract's stage order runs it."""
    found = _post_failure(record, want)
    if found is None or (found[1] is not None and found[2] is not None):
        return None
    return _received(".", rule_of(post_runs), found)


def _received_something(record: Record, want: Want | None) -> bool:
    return (
        want is not None
        and want.expectation is not None
        and want.expectation.post_received not in (None, ...)
    )


@check(
    "R20",
    RECORD,
    "post_received",
    reads=("post_received",),
    when=(_received_something, "post-execute runs"),
    needs_vector=True,
    outcome=True,
)
def post_sees_the_decided_result(record: Record, want: Want | None) -> Failure | None:
    """Post-execute receives every post-route result as the call decided it: the around
    chain's, replaced by checkpoint C3 when a late success meets a cancelled caller.  A wrong
    one cites the rule of the decision that made it (:attr:`Want.post_rule`)."""
    assert want is not None
    found = _post_failure(record, want)
    if found is None or found[1] is None or found[2] is None:
        return None
    own = rule_of(post_sees_the_decided_result)
    rule = want.post_rule(found[1]) if want.post_rule is not None else own
    return _received(".", rule, found)


def relay_on_live_caller(s: Scenario, body_starts: int, caller_aborts: bool) -> bool:
    """Whether a listener the registry leaves on the caller's signal would show in listener
    counts after the call: the caller is live at entry and never aborts (its abort consumes a
    once-listener before anything counts it), and the registry put one there -- a relay of the
    caller's and another signal, built for a body while a wrapper or the timeout policy had put
    that other signal in the slot.  ``toolcancel vectors`` keeps such runs for it (R22)."""
    if s.entry_caller != "live" or s.cancel != "never" or caller_aborts:
        return False
    return body_starts > 0 and (s.timeout != "absent" or bool(SLOT_WRAPPERS & set(s.wrappers)))


def _leak_visible(record: Record, want: Want | None) -> bool:
    if record.caller != "live" or want is None or want.expectation is None:
        return False
    return relay_on_live_caller(want.scenario, want.expectation.body_starts, want.caller_aborts)


@check(
    "R22",
    RECORD,
    "listeners",
    reads=("listener_count",),
    levels=frozenset({"outcome"}),
    when=(_leak_visible, "a relay was built on a caller that stays live"),
)
def no_listener_left(record: Record, want: Want | None) -> Failure | None:
    """The registry removes every listener it added to the caller's signal."""
    i = record.at("listener_count")[0]
    counts = record.lines[i]
    if counts["after"] == counts["before"]:
        return None
    return Failure.of(
        no_listener_left,
        i,
        "listeners",
        f"the caller's signal had {counts['before']} listener(s) before execute() and "
        f"{counts['after']} after it settled; the registry must remove every listener it added.",
        counts["before"],
        counts["after"],
    )


def error_code(result: Any) -> Any:
    """The code of a result's error (the revised contract's ``error.info``), if any."""
    error = result.get("error") if isinstance(result, dict) else None
    if not isinstance(error, dict):
        return None
    info = error.get("info")
    return (info if isinstance(info, dict) else error).get("code")


def _own_deadline_never_first(record: Record, want: Want | None) -> bool:
    return not record.of("deadline")[0]["expired"]


@check(
    "R35",
    RECORD,
    "timeout_identity",
    reads=("deadline",),
    when=(_own_deadline_never_first, "the tool's own deadline never expired first"),
)
def timeout_by_identity(record: Record, want: Want | None) -> Failure | None:
    """The timeout policy reports TOOL_TIMEOUT only when its *own* deadline expired first: by
    identity, not by code (D13).  Where it never did, neither post-execute nor the caller gets a
    TOOL_TIMEOUT: not when the caller or a wrapper aborted, and not when an enclosing deadline of
    the same code expired (ordinary cancellation)."""
    deadline = record.of("deadline")[0]
    if deadline["expired"]:
        return None
    for event, what in (("post_received", "post-execute received"), ("returned", "the caller got")):
        for i in record.at(event):
            if error_code(record.lines[i].get("result")) == "TOOL_TIMEOUT":
                outer = " (the outer deadline expired: ordinary cancellation, D13)" * bool(
                    deadline["outer"]
                )
                return Failure.of(
                    timeout_by_identity,
                    i,
                    "timeout_identity",
                    f"the tool's own deadline never fired first, yet {what} TOOL_TIMEOUT{outer}",
                    "no TOOL_TIMEOUT",
                    "TOOL_TIMEOUT",
                )
    return None


AFTER_THE_PATH: Final = frozenset(
    {"late_start", "late_success", "pre_stage", "fused_signal", "post_received", "post_decision",
     "contexts"}
)
"""Steps of checks whose evidence is what a departure from the contract's path led to (a body
that started, a success that was published after the caller aborted, how the pre-policy stage
ended, which signal a body got, what post-execute received, what the caller then got and its
contexts): a judge that replays the path (verify) asks them after it, so the departure itself
-- the checkpoint that missed the abort -- is the first broken rule where the path shows one."""


@check("R28", RECORD, "late_start", reads=("caller_aborted",))
def no_late_start_or_success(record: Record, want: Want | None) -> Failure | None:
    """Once the caller aborted after entry, no body starts past checkpoint C2, and no success
    reaches the caller past checkpoint C4 (an abort before post-execute ran)."""
    i = record.at("caller_aborted")[0]
    aborted = record.lines[i]
    late = aborted["bodies_after"]
    if late:
        # the evidence is the first body that started after the abort, where the record shows
        # it: a check that decides that start (C2's, R17) is the departure there, not this
        starts = record.starts()
        at = starts[len(starts) - late] if late <= len(starts) else i
        return Failure.of(
            no_late_start_or_success,
            at,
            "late_start",
            "a body started although the caller aborted before checkpoint C2",
            "no body start",
            f"{aborted['bodies_after']} body start(s)",
        )
    for j in record.at("returned"):
        result = record.lines[j]["result"]
        if aborted["before_post"] and not result.get("isError"):
            return Failure.of(
                no_late_start_or_success,
                j,
                "late_success",
                "the caller aborted before checkpoint C4, yet the result is a success",
                "an error result",
                "a success",
            )
    return None
