"""The tool-call timeout policy: a zero-configuration around-dispatch wrapper (R32-R35).

A tool *declares* a budget (``timeout_ms`` on its definition, validated at registration, R32, and
never shown to a model).  This wrapper turns the declaration into a deadline for each call of
that tool, and nothing else:

* It composes through the signal slot, the one mechanism the registry gives wrappers.  The
  deadline is derived from whatever the slot holds (the caller's signal, or an outer wrapper's),
  put in the slot *by mutation* because ``next()`` takes no arguments, and the upstream value is
  put back in a ``finally`` so post-execute and observers see the caller's signal again.  The
  registry still fuses the caller back in before the body (R21), so the deadline can only add a
  reason to stop, never remove one.
* It never races.  Declaring a budget asserts that the tool cooperates with its signal; the
  wrapper awaits ``next()`` however long the body takes, and reports ``TOOL_TIMEOUT`` only once
  the body has settled (R27).  An uncooperative body keeps the call pending past its budget --
  visible, rather than hidden behind an early result while its work goes on.
* It claims only its own expiry.  ``TOOL_TIMEOUT`` replaces the inner result exactly when *this
  call's* deadline timer fired first, decided by identity rather than by code (CONTRACT.md D13): a
  nested budgeted call running under an outer ``TOOL_TIMEOUT`` deadline sees the outer expiry as
  its upstream's abort, i.e. ordinary cancellation, and must not report its own budget for it.

``classify="code"`` makes the wrapper claim any expiry whose reason carries its code, as the
original does (declared deviation D13): our vectors judge a registry that declares D13 against a
run of this policy so (:mod:`toolcancel.oracle.conform.deviations`); nothing else should use it.

Wrapper order decides composition (e.g. a retry wrapper inside the timeout wrapper means "the
budget covers all retries"; outside it, "each try has the budget"); ``prepend`` chooses the end of
the around chain the wrapper joins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from ..contract.results import ToolResult
from .deadline import deadline

if TYPE_CHECKING:  # annotations only: the data (TOOL_TIMEOUT) loads without the registry
    from .execution import Execution
    from .hooks import Next
    from .registry import ToolRegistry

__all__ = ["TOOL_TIMEOUT", "install_timeout_policy"]

TOOL_TIMEOUT = "TOOL_TIMEOUT"
"""The code of the timeout policy's deadlines and of its result (R8)."""


def install_timeout_policy(
    registry: ToolRegistry,
    *,
    prepend: bool = False,
    classify: Literal["identity", "code"] = "identity",
) -> Callable[[], None]:
    """Add the timeout wrapper to ``registry``'s around chain; return the uninstaller.
    ``classify``: how it tells its own expiry, by the deadline's identity (the contract) or by
    the reason's code (the original's D13).

    After uninstalling, calls of budgeted tools run without a deadline and the body sees the
    caller's signal itself again.
    """

    if classify not in ("identity", "code"):
        raise ValueError(f"classify must be 'identity' or 'code', not {classify!r}")
    by_code = classify == "code"

    async def timeout_policy(view: Execution, next_: Next) -> ToolResult:
        definition = registry.definition(view.name, view.agent)
        if definition is None or definition.timeout_ms is None:
            result: ToolResult = await next_()
            return result
        ms = definition.timeout_ms
        upstream = view.signal
        d = deadline(upstream, ms, TOOL_TIMEOUT)
        view.signal = d.signal
        try:
            result = await next_()
            code = getattr(d.signal.reason, "code", None) if by_code else None
            if d.fired_by_own_timer or code == TOOL_TIMEOUT:
                return registry.results.timeout(ms)
            return result
        finally:
            view.signal = upstream
            d.dispose()

    return registry.add_around(timeout_policy, prepend=prepend)
