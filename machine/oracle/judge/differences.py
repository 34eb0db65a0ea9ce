"""The result checks: which rule a result, or post-execute's input, that differs from the vector's
breaks by itself -- the rules conform's attribution (:mod:`toolcancel.oracle.judge.attribution`)
cites before it falls back on the contract's transitions.

Each is a check of the one registry from the ``result`` vantage (on ``result``: the published
result; on ``post``: what post-execute received), handed a :class:`Difference`.  Its antecedent
reads only what the contract gives (never what the call got): where it holds, a wrong result
could cite the rule, so coverage counts the rule there (:meth:`Attribution.result_attributions`).
The first check, in registration order, whose antecedent holds and that finds the difference is
its own, names the rule; none: the contract's decision along the path does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .calls import error_code
from .registry import RESULT, check
from .results import CANCEL_CODES

if TYPE_CHECKING:
    from ..scenario_language import Scenario

@dataclass(frozen=True)
class Difference:
    """A result (or post-execute's input) the call got that is not the one the contract gives."""

    scenario: Scenario
    outcome: str  # the contract's outcome for the call
    cancels: bool  # ... is a cancellation
    wanted: Any  # the result (or post-execute's input) the contract gives
    got: Any = None  # what the call showed (None where only the antecedents are asked)


def _contexts_only(d: Difference) -> bool:
    """Whether ``got`` and ``wanted`` are results equal but for their contexts."""
    if not (isinstance(d.got, dict) and isinstance(d.wanted, dict)):
        return False
    rest_w = {k: x for k, x in d.wanted.items() if k != "additionalContexts"}
    rest_g = {k: x for k, x in d.got.items() if k != "additionalContexts"}
    return _json(rest_w) == _json(rest_g)


def _json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def foreign_deadline(d: Difference) -> bool:
    """A deadline that is not the registry's own (a wrapper's) is in the chain where the
    contract gives another result than TOOL_TIMEOUT: where a result can show that deadline
    classified by its code."""
    return error_code(d.wanted) != "TOOL_TIMEOUT" and "outer_deadline" in d.scenario.wrappers


def _misclassified(d: Difference) -> bool:
    return error_code(d.got) == "TOOL_TIMEOUT" and foreign_deadline(d)


def _cancels(d: Difference) -> bool:
    return d.cancels


def _timer_first(d: Difference) -> bool:
    return d.scenario.timeout == "timer_first" and d.outcome == "tool_timeout"


# ------------------------------------------------------------------------------------------------
# The published result
# ------------------------------------------------------------------------------------------------


@check("R28", RESULT, "result", when=(_cancels, "the contract's outcome is a cancellation"))
def no_late_success(d: Difference) -> str | None:
    """A success where the contract cancels the call: a late success, published after the
    caller cancelled before C4."""
    if isinstance(d.got, dict) and d.got.get("isError") is False:
        return "a success after the caller cancelled before C4."
    return None


@check(
    "R35",
    RESULT,
    "result",
    when=(foreign_deadline, "a wrapper's deadline is in the chain and the result is not a timeout"),
)
def deadline_by_identity(d: Difference) -> str | None:
    """A TOOL_TIMEOUT where the contract gives another result although a wrapper's deadline is in
    the chain: that deadline was classified by its code, not its identity."""
    return "a wrapper's deadline classified by its code." if _misclassified(d) else None


@check("R29", RESULT, "result")
def contexts_kept_ordered_dropped(d: Difference) -> str | None:
    """A result that differs only in its contexts: what ``additionalContexts`` keeps, orders and
    drops."""
    if _contexts_only(d):
        return "only the contexts differ (kept, ordered and dropped per R29)."
    return None


@check("R34", RESULT, "result", when=(_timer_first, "the tool's deadline fires first"))
def deadline_fired_first(d: Difference) -> str | None:
    """The deadline fired first: the around chain's result is TOOL_TIMEOUT."""
    return "the deadline fired first: the result is TOOL_TIMEOUT."


# ------------------------------------------------------------------------------------------------
# What post-execute received
# ------------------------------------------------------------------------------------------------


@check("R29", RESULT, "post")
def post_contexts(d: Difference) -> str | None:
    """Post-execute received the result but for its contexts (kept, ordered and dropped)."""
    return "only the contexts differ" if _contexts_only(d) else None


@check("R20", RESULT, "post")
def post_handed_the_result(d: Difference) -> str | None:
    """Post-execute received a result of the kind the contract decided (an error with the same
    code, or a success), not the one decided: what it was handed."""
    if not (isinstance(d.got, dict) and isinstance(d.wanted, dict)):
        return None
    same = (d.got.get("isError"), error_code(d.got)) == (
        d.wanted.get("isError"),
        error_code(d.wanted),
    )
    return "another result of the decided kind" if same else None


@check("R35", RESULT, "post")
def post_deadline_by_identity(d: Difference) -> str | None:
    """A wrapper's deadline handed to post-execute as the registry's own TOOL_TIMEOUT."""
    return "a wrapper's deadline classified as the registry's own" if _misclassified(d) else None


@check("R34", RESULT, "post")
def post_deadline_first(d: Difference) -> str | None:
    """The deadline fired first: the around chain's result, post-execute's input, is
    TOOL_TIMEOUT."""
    timer = d.scenario.timeout == "timer_first" and error_code(d.wanted) == "TOOL_TIMEOUT"
    return "the deadline fired first" if timer else None


@check("R19", RESULT, "post")
def post_after_c3(d: Difference) -> str | None:
    """Checkpoint C3 replaces a late success by ABORTED before post-execute."""
    late = isinstance(d.got, dict) and d.got.get("isError") is False
    if late and error_code(d.wanted) in CANCEL_CODES:
        return "a late success not replaced at C3"
    return None
