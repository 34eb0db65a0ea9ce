"""What no call shows: a tool's declared budget (R32) and a revised call without a caller
signal (R40), judged on the record of an environment that probed the registry.

A call's record starts at ``call_entry``; these two rules are decided before any call exists --
at registration, and when ``begin()`` refuses a call it must not make.  So the environment (verify)
registers tools declaring budgets, begins a call with no caller signal, and writes what it saw as
observation lines of the same trace format (``registered``, ``begun_without_caller``); the checks
here read them.  They need the probe's setup -- the environment chose which budgets to declare --
and no vector: no adapter is sent such a probe, so conform never asks them (``needs_setup``).
"""

from __future__ import annotations

import re
from typing import Final

from .record import Failure, Record, Want
from .registry import RECORD, check

REGISTRATION: Final = "registration"
"""The step of these checks: a probe's record is judged by them alone."""
REFUSAL: Final = re.compile(r'tool ".*" (timeoutMs|timeout_ms) must be a positive finite number')
"""R32's message (the contract names the budget ``timeoutMs``; a binding may spell it its own
way: Python's ``timeout_ms``)."""


@check("R32", RECORD, REGISTRATION, reads=("registered",), needs_setup=True)
def budget_declared_positive_and_finite(record: Record, want: Want | None) -> Failure | None:
    """Registering a tool whose declared budget is not a positive finite number fails with the
    contract's type error (``tool "{name}" timeout_ms must be a positive finite number``);
    a positive finite budget is accepted."""
    for i in record.at("registered"):
        line = record.lines[i]
        declared, error = line["timeout_ms"], line.get("error", "")
        if line["valid"] and not line["accepted"]:
            why = f"timeout_ms={declared} is positive and finite, yet it was refused: {error}"
        elif line["valid"] or (
            not line["accepted"] and line["type_error"] and REFUSAL.search(error)
        ):
            continue
        elif line["accepted"]:
            why = f"timeout_ms={declared} is not a positive finite number, yet it was accepted"
        else:
            why = (f"timeout_ms={declared} was refused with {error}, not the contract's type "
                   'error (tool "{name}" timeout_ms must be a positive finite number)')
        return Failure.of(budget_declared_positive_and_finite, i, REGISTRATION, why,
                          "refused with R32's type error", error)  # fmt: skip
    return None


@check("R40", RECORD, REGISTRATION, reads=("begun_without_caller",), needs_setup=True)
def revised_call_needs_a_caller_signal(record: Record, want: Want | None) -> Failure | None:
    """Revised: a call without a caller signal is a usage error, raised before the call exists
    (never a result)."""
    i = record.at("begun_without_caller")[0]
    if record.lines[i]["refused"]:
        return None
    return Failure.of(revised_call_needs_a_caller_signal, i, REGISTRATION,
                      "the revised registry began a call without a caller signal; it must refuse "
                      "it as a usage error", "a usage error", "a call")  # fmt: skip
