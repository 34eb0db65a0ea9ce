"""Which signal the first body got, from the call's setup: R21, R34, R35.

A vector says what each body's signal must show (:func:`toolcancel.oracle.judge.calls.fused_signal`
compares); a model check runs calls no vector lists, so it works it out from what it set up and
what the record shows:

* **which sources feed the body.**  The caller's signal always does: it cannot be detached
  (R21).  A wrapper's own signal (or deadline), and the tool's own deadline (the timeout policy,
  the innermost wrapper), feed it only if that wrapper was running around the body and no wrapper
  inside it replaced or removed the slot.  Which wrappers were running comes from the registry's
  trace (``wrapper_enter`` / ``wrapper_returned`` / ``wrapper_raise`` up to the first
  ``body_start``) and the retry behaviour its ``call_entry`` declares (D11): a ``cursor`` hands out
  each wrapper once, in order; otherwise the chain goes on from the delegating wrapper.
* **which source aborted first**: the environment's ``signal_aborted`` lines, in the order it
  aborted them, with how many bodies had settled by then.

From those, the first body's signal must be aborted with the first feeding source's reason
(R21), or born aborted with the slot's reason when the slot already was, else the caller's, for a
pre-aborted entry; a deadline whose upstream (the caller) aborted first carries the caller's
reason (R35); and when the tool's own deadline fired first, the around chain's result is
TOOL_TIMEOUT (R34).  Written from ``spec/CONTRACT.md``, not from the transition table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ...contract.loader import load_contract
from ..scenario_language import NESTED
from .calls import error_code
from .record import SLOT_WRAPPERS, Failure, Record, Want
from .registry import RECORD, check
from .setup import pre_aborted, received, replaced_at_c3, text

_CUT: Final = SLOT_WRAPPERS - {NESTED}
"""Wrappers that put a signal in the slot that does not follow its upstream (or none)."""
_EXITS: Final = frozenset({"wrapper_returned", "wrapper_raise"})
_REPLACING: Final = frozenset({"retry", "throw_after"})
"""Wrappers whose own result replaces the around chain's (a retry's second attempt, a failure
after delegating): a deadline that fired first need not be what the chain returns."""


@dataclass(frozen=True)
class Fusion:
    """What the first body's signal had to show, worked out once per record."""

    settle_at: int  # the record line of the first body's signal when it settled
    signal: Mapping[str, Any]  # that line
    born: str | None  # pre-aborted entry: whose reason the born-aborted signal carries
    first: str | None  # else the first feeding source that aborted before it settled
    wanted: str | None  # the reason it aborts with, classified as the vectors do
    deadline_fed: bool  # the tool's own deadline was running around the body


def _stack(record: Record) -> tuple[int, ...]:
    """The around wrappers (by index: the user's in order, then the timeout policy) running
    when the first body started."""
    entry = record.of("call_entry")[0]
    cursor = entry.get("retry", load_contract().default_retry) == "cursor"
    stack: list[int] = []
    handed = 0
    for line in record.lines:
        event = line["event"]
        if event == "wrapper_enter":
            stack.append(handed if cursor else (stack[-1] + 1 if stack else 0))
            handed += 1
        elif event in _EXITS and stack:  # an unbalanced exit is the trace checker's to judge
            stack.pop()
        elif event == "body_start":
            break
    return tuple(stack)


def _feeds(wrappers: tuple[str, ...], stack: tuple[int, ...], i: int) -> bool:
    """Whether wrapper ``i``'s signal reached the body: it ran around it, and no wrapper inside
    it put a signal in the slot that does not follow its upstream."""
    return i in stack and not any(wrappers[j] in _CUT for j in stack if i < j < len(wrappers))


def fusion(record: Record, want: Want) -> Fusion | None:
    """What the record and the setup say of the first body's signal (None: no body settled)."""
    if "fusion" in record.derived:
        found: Fusion | None = record.derived["fusion"]
        return found
    record.derived["fusion"] = found = _fusion(record, want)
    return found


def _fusion(record: Record, want: Want) -> Fusion | None:
    settles = record.body_signals("settle")
    if not record.starts() or not settles:
        return None
    at, signal = settles[0]
    s = want.scenario
    stack = _stack(record)
    budget = len(s.wrappers)  # the timeout policy is the innermost wrapper
    deadline_fed = s.timeout != "absent" and _feeds(s.wrappers, stack, budget)
    if pre_aborted(want):
        setters = [j for j in stack if j < budget and s.wrappers[j] in _CUT]
        slot_aborted = bool(setters) and s.wrappers[setters[-1]] == "replace_aborted"
        born = "wrapper" if slot_aborted else "caller"
        return Fusion(at, signal, born, None, None, deadline_fed)
    for line in record.of("signal_aborted"):
        if line["bodies_settled"]:
            break
        source = line["source"]
        i = budget if source == "budget" else line.get("wrapper", -1)
        if source == "caller":
            return Fusion(at, signal, None, source, "caller", deadline_fed)
        if 0 <= i <= budget and _feeds(s.wrappers, stack, i):
            # the tool's deadline, and a wrapper's own deadline, abort with a TOOL_TIMEOUT
            timeout = source == "budget" or (i < budget and s.wrappers[i] == NESTED)
            return Fusion(at, signal, None, source, "timeout" if timeout else "wrapper",
                          deadline_fed)
    return Fusion(at, signal, None, None, None, deadline_fed)


def _born(record: Record, want: Want | None) -> bool:
    assert want is not None
    found = fusion(record, want)
    return found is not None and found.born is not None


def _fed(record: Record, want: Want | None) -> bool:
    assert want is not None
    found = fusion(record, want)
    return found is not None and found.first is not None


def _caller_through_deadline(record: Record, want: Want | None) -> bool:
    assert want is not None
    found = fusion(record, want)
    return found is not None and found.first == "caller" and found.deadline_fed


@check(
    "R21",
    RECORD,
    "fused_signal",
    reads=("body_signal", "call_entry"),
    levels=frozenset({"trace"}),
    when=(_born, "a body ran for an entry whose caller was already aborted"),
    needs_setup=True,
)
def pre_aborted_body_is_born_aborted(record: Record, want: Want | None) -> Failure | None:
    """A pre-aborted entry's body gets a signal born aborted (the caller cannot be detached),
    with the slot's reason when the slot already was aborted -- the wrapper's beats the
    caller's there -- else the caller's."""
    if not _born(record, want):
        return None
    assert want is not None
    found = fusion(record, want)
    assert found is not None and found.born is not None
    aborted, reason = bool(found.signal["aborted"]), found.signal.get("reason")
    if not aborted:
        why = "the caller was aborted at entry, yet the body's signal was live"
    elif reason != found.born:
        why = (f"the body's signal was born aborted; its reason must be the {found.born}'s "
               f"(the slot's first when both are aborted), it carries {reason!r}")
    else:
        return None
    return Failure.of(pre_aborted_body_is_born_aborted, found.settle_at, "fused_signal", why,
                      found.born, reason)  # fmt: skip


@check(
    "R21",
    RECORD,
    "fused_signal",
    reads=("body_signal", "signal_aborted", "call_entry"),
    levels=frozenset({"trace"}),
    when=(_fed, "a source that feeds the body aborted before it settled"),
    needs_setup=True,
)
def first_source_aborts_the_body(record: Record, want: Want | None) -> Failure | None:
    """The body's fused signal aborts when any source that feeds it aborts, with the first
    one's reason."""
    if not _fed(record, want):
        return None
    assert want is not None
    found = fusion(record, want)
    assert found is not None and found.first is not None
    aborted, reason = bool(found.signal["aborted"]), found.signal.get("reason")
    source = found.first
    whose = "the tool's deadline" if source == "budget" else f"the {source}"
    if not aborted:
        why = f"{whose} aborted while the body ran, but the body's signal was not aborted"
    elif reason == found.wanted or (source == "caller" and found.deadline_fed):
        return None  # a deadline that carried another reason than its upstream's is R35's
    else:
        why = f"{whose} aborted first, but the body's signal carries {reason!r}"
    return Failure.of(first_source_aborts_the_body, found.settle_at, "fused_signal", why,
                      found.wanted, reason)  # fmt: skip


@check(
    "R35",
    RECORD,
    "fused_signal",
    reads=("body_signal", "signal_aborted", "call_entry"),
    levels=frozenset({"trace"}),
    when=(_caller_through_deadline, "the caller aborted first, with the tool's deadline around "
          "the body"),
    needs_setup=True,
)
def deadline_carries_its_upstreams_reason(record: Record, want: Want | None) -> Failure | None:
    """A deadline whose upstream aborts aborts with that reason: when the caller aborted first,
    the body under the tool's own deadline sees the caller's reason, not a TOOL_TIMEOUT."""
    if not _caller_through_deadline(record, want):
        return None
    assert want is not None
    found = fusion(record, want)
    assert found is not None
    reason = found.signal.get("reason")
    if not found.signal["aborted"] or reason == "caller":
        return None  # a body's signal left live is R21's
    return Failure.of(deadline_carries_its_upstreams_reason, found.settle_at, "fused_signal",
                      "the caller aborted first and the tool's deadline (the caller its upstream) "
                      f"was around the body: the deadline aborts with the caller's reason, the "
                      f"body's signal carries {reason!r}", "caller", reason)  # fmt: skip


def _budget_first(record: Record, want: Want | None) -> bool:
    assert want is not None
    found = fusion(record, want)
    return (
        found is not None
        and found.first == "budget"
        and want.scenario.timeout == "timer_first"
        and not any(w in _REPLACING for w in want.scenario.wrappers)
        and received(record)[1] is not None
        and not replaced_at_c3(record, want)  # the caller's cancellation replaced it at C3
    )


@check(
    "R34",
    RECORD,
    "post_received",
    reads=("body_signal", "signal_aborted", "post_received", "call_entry"),
    levels=frozenset({"trace"}),
    when=(_budget_first, "the tool's own deadline fired first, no wrapper replacing the chain's "
          "result"),
    needs_setup=True,
)
def deadline_first_is_tool_timeout(record: Record, want: Want | None) -> Failure | None:
    """When the tool's own deadline fired before any other source that feeds the body, the
    around chain's result is TOOL_TIMEOUT, even if the caller aborts later -- what post-execute
    receives, unless the caller's cancellation publishes over any result and replaced it at C3
    (``publishes_over``: :func:`~toolcancel.oracle.judge.setup.no_success_past_c3` judges that)."""
    if not _budget_first(record, want):
        return None
    i, post_in = received(record)
    code = error_code(post_in)
    if code == "TOOL_TIMEOUT":
        return None
    return Failure.of(deadline_first_is_tool_timeout, i, "post_received",
                      "the deadline fired first, but the result is not TOOL_TIMEOUT "
                      f"({text(post_in)!r}, code {code})", "TOOL_TIMEOUT", code)  # fmt: skip
