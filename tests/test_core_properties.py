"""The pure core's contracts, checked exhaustively over its whole finite domain.

``core.seed_step`` states its properties as PEP 316 conditions, which CrossHair explores
symbolically (a bounded search).  The domain is finite -- every state, caller kind, flag, wrapper
depth up to 3, outcome and event of the seed table -- so here the *same* condition lines are
evaluated for every point of it: where CrossHair may only say "not confirmed", this says "holds
everywhere"."""

from __future__ import annotations

import inspect
import itertools
import re
from typing import Any

import pytest
from toolcancel.contract import core

CONDITIONS = re.findall(r"^\s*(pre|post): (.+)$", core.seed_step.__doc__ or "", flags=re.M)
PRE = [text for kind, text in CONDITIONS if kind == "pre"]
POST = [text for kind, text in CONDITIONS if kind == "post"]
NAMES = tuple(inspect.signature(core.seed_step).parameters)


def _function(texts: list[str], *extra: str) -> Any:
    """The conjunction of condition lines as one function of seed_step's arguments (and
    ``extra``), its names looked up in the core module as CrossHair does: one call per point
    instead of an ``eval`` of each line with a fresh namespace."""
    source = f"lambda {', '.join(NAMES + extra)}: " + " and ".join(f"({t})" for t in texts)
    return eval(compile(source, "conditions", "eval"), vars(core))


def test_the_docstring_states_the_conditions_we_check() -> None:
    assert len(PRE) >= 4 and len(POST) >= 5
    assert any("body" in text for text in POST)  # no late start (R28)
    assert any("_late_success" in text for text in POST)  # no late success (R28)


@pytest.mark.rules("R28", "R12", "R17", "R19", "R20")
def test_every_condition_holds_for_every_state_and_event() -> None:
    """Every state, caller, outcome and event; the retry dimensions (D11) -- behaviour, wrapper
    count, cursor position, a pending hand-out -- in full where they are read (the around
    waterfall's states and events), else at their defaults."""
    names = ("state_i", "caller_i", "caller_aborted", "depth", "outcome_i", "invoked",
             "retry_i", "wrappers", "handed", "handing",
             "event_i", "slot_aborted", "tool_found", "is_error", "passthrough")  # fmt: skip
    domains = (
        range(len(core._STATES)),
        range(3),
        (False, True),
        range(4),
        range(-1, len(core._OUTCOMES)),
        (False, True),
        range(len(core._EVENTS)),
        (False, True),
        (False, True),
        (False, True),
        (False, True),
    )
    around = {core._STATES.index(s) for s in ("around_before", "around_after")}
    read_by = ("wrapper_enter", "base_dispatch", "redelegate", "wrapper_returned", "wrapper_raise")
    waterfall = {core._EVENTS.index(e) for e in read_by}
    cursor = core._RETRIES.index("cursor")
    retrying = {  # per depth: the retry dimensions the preconditions allow (checked again below)
        depth: [
            (r, w, h, handing)
            for r, w, h, handing in itertools.product(
                range(len(core._RETRIES)), range(-1, 4), range(4), (False, True)
            )
            if (w == -1 or (h <= w and depth <= w)) and (depth <= h if r == cursor else h == 0)
        ]
        for depth in range(4)
    }
    default = [(0, -1, 0, False)]
    assert names == NAMES  # the order the domains above are listed in
    pre, post = _function(PRE), _function(POST, "__return__")
    checked = steps = 0
    for values in itertools.product(*domains):
        extra = retrying[values[3]] if values[0] in around and values[6] in waterfall else default
        for more in extra:
            full = (*values[:6], *more, *values[6:])
            if not pre(*full):
                continue
            result = core.seed_step(*full)
            checked += 1
            steps += result is not None
            if not post(*full, result):
                env = dict(zip(NAMES, full, strict=True))
                failing = [t for t in POST if not _function([t], "__return__")(*full, result)]
                raise AssertionError(f"{failing[0]} fails for {env}, returning {result}")
    assert checked > 500_000 and steps > 10_000
