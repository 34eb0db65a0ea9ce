"""The line checks: the rules the trace checker (:mod:`toolcancel.oracle.judge.checker`) asks of a
call's own lines, each registered once under its rule id in the one registry (the ``line``
vantage, :mod:`toolcancel.oracle.judge.registry`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Protocol

from .registry import LINE, Check, check, on

# ------------------------------------------------------------------------------------------------
# Line checks: the rules the trace checker (toolcancel.oracle.judge.checker) asks of a call's own
# lines
# ------------------------------------------------------------------------------------------------
# The checker replays the contract events through the machine (its automaton says where a step
# leaves every allowed path); the lines no transition carries -- listener, slot, result, notify
# and the end of the call -- are judged here, each rule once, as the checker meets them.


class Ledger(Protocol):
    """What the checker has counted of one call when it meets a line: whether the call has
    published, has a result line, has notified, and the listeners it holds on the caller's
    and on the slot's signal."""

    published: bool
    resulted: bool
    notified: bool
    caller_slot: int
    slot_slot: int


LINES: Final = on(LINE)
"""The line checks by the line they judge, in the order the checker asks them (the registry's
live index: the call-level lines the checker counts are its keys)."""


def judge_line(
    ledger: Ledger, event: str, data: Mapping[str, Any]
) -> tuple[Check, str] | None:
    """The first line check ``event``'s line fails, and why (None: every one holds)."""
    for c in LINES.get(event, ()):
        why = c.judge(ledger, data)
        if why is not None:
            return c, why
    return None


@check("R22", LINE, "listener")
def no_listener_after_result(ledger: Ledger, data: Mapping[str, Any]) -> str | None:
    """A call keeps no listener once its result is published."""
    if not ledger.resulted:
        return None
    verb = "added" if data["action"] == "add" else "removed"
    return (
        f"The registry {verb} a listener on the {data['signal']} signal after the call published "
        "its result; the call keeps no listener once it is done."
    )


@check("R22", LINE, "listener")
def removes_only_what_it_added(ledger: Ledger, data: Mapping[str, Any]) -> str | None:
    """A listener removed was added before."""
    held = ledger.caller_slot if data["signal"] == "caller" else ledger.slot_slot
    if data["action"] == "add" or held:
        return None
    return f"The registry removed a listener from the {data['signal']} signal that it never added."


@check("R23", LINE, "slot")
def slot_fixed_once_published(ledger: Ledger, data: Mapping[str, Any]) -> str | None:
    """The slot never changes once the result is published (the view is frozen)."""
    if not ledger.published:
        return None
    return (
        "The signal slot changed after the result was published; the execution view is frozen "
        "before the notification."
    )


@check("R31", LINE, "result")
def published_once(ledger: Ledger, data: Mapping[str, Any]) -> str | None:
    """Exactly one result, after the registry published it."""
    if ledger.resulted:
        return "A second result line: a call publishes exactly once."
    if not ledger.published:
        return (
            "A result before the registry published it (no publish line before it): the result "
            "is materialized, then notified."
        )
    return None


@check("R1", LINE, "result")
def result_envelope(ledger: Ledger, data: Mapping[str, Any]) -> str | None:
    """The result object's envelope, whatever its outcome."""
    return envelope_problem(data["result"])


def _held(ledger: Ledger) -> list[tuple[str, int]]:
    return [(s, n) for s, n in (("caller", ledger.caller_slot), ("slot", ledger.slot_slot)) if n]


def _removals(ledger: Ledger) -> list[str]:
    return [f'listener(action="remove", signal="{s}")' for s, _ in _held(ledger)]


@check("R22", LINE, "result", allowed=_removals)
def listeners_removed_by_publication(ledger: Ledger, data: Mapping[str, Any]) -> str | None:
    """Every listener the registry added is removed by the time the result is published."""
    left = _held(ledger)
    if not left:
        return None
    where = " and ".join(f"{n} on the {s} signal" for s, n in left)
    return (
        f"When the call published its result the registry still had listeners ({where}); "
        "relay listeners are removed when the body settles or C2 short-circuits."
    )


@check("R31", LINE, "notify")
def notifies_once_after_result(ledger: Ledger, data: Mapping[str, Any]) -> str | None:
    """Observers are notified exactly once, with the materialized result."""
    if ledger.notified:
        return "A second notify line: observers are notified exactly once."
    if not ledger.resulted:
        return (
            "Observers were notified before the result line: the notification carries the "
            "materialized result."
        )
    return None


@check("R31", LINE, "end")
def ends_published(ledger: Ledger, data: Mapping[str, Any]) -> str | None:
    """A call's trace ends after its result and its notification (``data``: ``line``, the last
    line's number, and ``states``, where the call may be)."""
    if not ledger.resulted:
        return (
            f"The call never published a result: its trace ends at line {data['line']} with the "
            f"call in {' or '.join(data['states'])}."
        )
    if not ledger.notified:
        return (
            "The call published its result but never notified observers (no notify line after "
            f"line {data['line']})."
        )
    return None


def _with_a_caller(ledger: Ledger) -> list[str]:
    return ["call_entry(caller=live)", "call_entry(caller=aborted)"]


@check("R40", LINE, "call_entry", allowed=_with_a_caller)
def caller_signal_when_required(ledger: Ledger, data: Mapping[str, Any]) -> str | None:
    """A call under a revision that requires a caller signal has one (``data``: the call_entry
    line and ``caller_signal``, what its revision says of the caller's signal)."""
    if data["caller"] == "none" and data["caller_signal"] == "required":
        return (
            f"The call has no caller signal, but the {data['revision']} contract requires one "
            "(R40)."
        )
    return None


def envelope_problem(res: Any) -> str | None:
    """What is wrong with a result object's envelope (R1), whatever its outcome."""
    if not isinstance(res, dict):
        return "The result is not a JSON object."
    extra = set(res) - {"content", "isError", "error", "additionalContexts", "meta"}
    if extra:
        return f"The result has keys the envelope does not define: {sorted(extra)}."
    if not isinstance(res.get("content"), list) or not all(
        isinstance(b, dict) for b in res["content"]
    ):
        return "The result's content must be a list of content block objects."
    if not isinstance(res.get("isError"), bool):
        return "The result's isError must be a boolean."
    for key in ("error", "additionalContexts", "meta"):
        if key in res and res[key] is None:
            return f"The result sets {key} to null; absent keys are omitted."
    if "error" in res and not isinstance(res["error"], dict):
        return "The result's error must be an object."
    contexts = res.get("additionalContexts")
    if "additionalContexts" in res and (not isinstance(contexts, list) or not contexts):
        return "additionalContexts must be a non-empty list; an empty one is omitted."
    return None
