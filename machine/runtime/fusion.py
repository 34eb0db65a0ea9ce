"""Fusing the caller's signal with the wrapper-supplied slot, just before the body runs.

Around-dispatch wrappers may put any signal in the execution view's ``signal`` slot, or remove it;
that is how deadlines compose.  The caller's signal C was captured at entry, out of their reach.
At base dispatch the registry hands the body a fused signal F built from C and the slot's value W
(rule R21), so that **no wrapper can detach the caller**: F is aborted whenever C or W is.

F is a *relay*, not ``AbortSignal.any``: its two listeners are removed when either source fires
and unconditionally when the body settles (R22), so a caller abort that comes after the body
settled does not reach the F that body saw, and the caller keeps no listener after the call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal, NamedTuple, get_args

from .signals import AbortSignal

FusionKind = Literal["none", "caller", "slot", "relay"]


class FusionPlan(NamedTuple):
    """Which signal the body gets, and whether (and from where) it is born aborted."""

    kind: FusionKind
    born_aborted_from: Literal["caller", "slot"] | None


def plan_fusion(
    c_present: bool,
    w_present: bool,
    same: bool,
    c_aborted: bool,
    w_aborted: bool,
) -> FusionPlan:
    """R21 as a pure function of C (the caller's signal) and W (the slot's value).

    ``same`` means W is C itself.  The conditions CrossHair checks say: a relay exactly when two
    distinct signals exist; no signal only when neither does; W alone only without C; and the
    caller is never detached -- F is born aborted exactly when C or W already is (W's reason first).

    pre: not same or (c_present and w_present and c_aborted == w_aborted)
    post: (__return__.kind == "relay") == (c_present and w_present and not same)
    post: (__return__.kind == "none") == (not c_present and not w_present)
    post: (__return__.kind != "slot") or not c_present
    post: (__return__[1] is not None) == ((c_present and c_aborted) or (w_present and w_aborted))
    post: __return__.born_aborted_from != "caller" or same or not (w_present and w_aborted)
    """
    caller_dead = c_present and c_aborted
    slot_dead = w_present and w_aborted
    if not c_present:
        return _PLANS["slot" if w_present else "none", "slot" if slot_dead else None]
    if not w_present or same:
        return _PLANS["caller", "caller" if caller_dead else None]
    if slot_dead:  # W's reason wins when both already are aborted
        return _PLANS["relay", "slot"]
    return _PLANS["relay", "caller" if caller_dead else None]


_PLANS: Final = {
    (kind, born): FusionPlan(kind, born)
    for kind in get_args(FusionKind)
    for born in (None, "caller", "slot")
}
"""Every plan, made once: a plan is immutable, and making a NamedTuple costs more than the
decision (this runs at every base dispatch whose slot a wrapper replaced)."""


class Fusion:
    """The fused signal of one base dispatch, and the means to unhook it.

    A relay is its own listener on C and W (see :meth:`__call__`): an object hashed by identity
    is found in a signal's listener table faster than a bound method made for each operation."""

    __slots__ = ("_sources", "on_listener", "plan", "signal")

    def __init__(self, caller: AbortSignal | None, slot: AbortSignal | None) -> None:
        self.on_listener: Callable[[str, str], None] | None = None
        """Told ``(signal, "remove")`` when the relay takes its listener off the caller's
        (``"caller"``) or the slot's (``"slot"``) signal; the trace's listener lines.  (The
        constructor adds them before anyone can set this: see :attr:`relaying`.)"""
        self.plan = plan = plan_fusion(
            caller is not None,
            slot is not None,
            caller is not None and slot is caller,
            caller is not None and caller.aborted,
            slot is not None and slot.aborted,
        )
        self._sources: tuple[AbortSignal, ...] = ()
        kind, born = plan
        if kind != "relay":
            self.signal: AbortSignal | None = (
                caller if kind == "caller" else slot if kind == "slot" else None
            )
            return
        assert caller is not None and slot is not None
        # F is the registry's own: aborted only from here, so it needs no controller.
        self.signal = fused = AbortSignal()
        if born is None:
            self._sources = (caller, slot)
            caller.add_listener(self)
            slot.add_listener(self)
        else:
            fused._signal_abort((slot if born == "slot" else caller).reason)

    def __call__(self, source: AbortSignal) -> None:
        """The relay: ``source`` (C or W) aborted, so F does, with its reason."""
        self.dispose()
        assert self.signal is not None
        self.signal._signal_abort(source.reason)

    @property
    def relaying(self) -> bool:
        """Whether the relay's listeners are on C and W right now."""
        return bool(self._sources)

    def dispose(self) -> None:
        """Remove the relay's listeners from both sources (idempotent)."""
        sources = self._sources
        if sources:
            caller, slot = sources
            caller.remove_listener(self)
            slot.remove_listener(self)
            if self.on_listener is not None:
                self.on_listener("caller", "remove")
                self.on_listener("slot", "remove")
            self._sources = ()
