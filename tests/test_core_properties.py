"""The pure core's contracts, checked exhaustively over its whole finite domain.

``core.seed_step`` states its properties as PEP 316 conditions, which CrossHair explores
symbolically (a bounded search).  The domain is finite -- every state, caller kind, flag, wrapper
depth up to 3, outcome and event of the seed table -- so here the *same* condition lines are
evaluated for every point of it: where CrossHair may only say "not confirmed", this says "holds
everywhere"."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from toolcancel import core

CONDITIONS = re.findall(r"^\s*(pre|post): (.+)$", core.seed_step.__doc__ or "", flags=re.M)
PRE = [compile(text, "pre", "eval") for kind, text in CONDITIONS if kind == "pre"]
POST = [(text, compile(text, "post", "eval")) for kind, text in CONDITIONS if kind == "post"]


def test_the_docstring_states_the_conditions_we_check() -> None:
    assert len(PRE) >= 4 and len(POST) >= 5
    assert any("body" in text for text, _ in POST)  # no late start (R28)
    assert any("_late_success" in text for text, _ in POST)  # no late success (R28)


@pytest.mark.rules("R28", "R12", "R17", "R19", "R20")
def test_every_condition_holds_for_every_state_and_event() -> None:
    names = ("state_i", "caller_i", "caller_aborted", "depth", "outcome_i", "invoked",
             "event_i", "slot_aborted", "tool_found", "is_error", "passthrough")
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
    scope: dict[str, Any] = vars(core)
    checked = steps = 0
    for values in itertools.product(*domains):
        env = dict(zip(names, values, strict=True))
        if not all(eval(c, scope, env) for c in PRE):
            continue
        result = core.seed_step(*values)
        checked += 1
        steps += result is not None
        env["__return__"] = result
        for text, code in POST:
            assert eval(code, scope, env), f"{text} fails for {env}"
    assert checked > 500_000 and steps > 10_000
