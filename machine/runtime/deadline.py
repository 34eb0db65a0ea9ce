"""Deadlines: a signal that aborts on its upstream's abort or on its own timer, whichever is first.

The timeout/deadline decision behind the contract (spec/ORIGIN.md) gives a deadline library two
jobs only, *timing* and *classification*: it never terminates anything.  Stopping work is
the duty of the capability that owns the work, reached through the signal; a deadline only says
"now" and, afterwards, "that was me".  That is why there is no ``with_timeout(awaitable)`` here:
racing an awaitable against a timer reports completion while the losing work keeps running.

Rules this module keeps:

* The first reason is the only reason.  An upstream abort is passed on with upstream's reason
  object itself; the timer aborts with a fresh :class:`TimeoutReason` carrying the code, the
  budget and the deadline that produced it.
* ``ms <= 0`` is the internal "no timer" sentinel: the upstream signal itself comes back, or a
  signal that never aborts.  Externally supplied budgets are checked by :func:`checked_hint`
  instead, so a 0 from a user is an error, never a silent "no timeout".
* Classification by *code* (:func:`timeout_of`) cannot tell two deadlines with the same code
  apart (CONTRACT.md D13: an outer ``TOOL_TIMEOUT`` expiry reaches a nested call as its upstream's
  reason).  So the reason refers to its deadline, and :attr:`Deadline.fired_by_own_timer` answers
  the question a wrapper actually has -- did *my* timer fire first -- by identity.
* Disposing clears the timer and unhooks the upstream listener, idempotently, and never aborts:
  a deadline that outlives its scope must neither fire late nor keep the upstream's listener list
  growing.

The timer is an ordinary ``loop.call_later`` handle, so a virtual clock drives it in tests.
"""

from __future__ import annotations

import math

from .eventloop import Timer, call_later
from .signals import AbortController, AbortSignal, SignalTimeoutError

__all__ = ["Deadline", "TimeoutReason", "checked_hint", "deadline", "timeout_of"]


class TimeoutReason(SignalTimeoutError):
    """The abort reason of a deadline whose own timer fired.

    ``code`` says which policy's budget ran out (``"TOOL_TIMEOUT"`` for the tool-call timeout
    policy), ``ms`` the budget, and ``deadline`` the very :class:`Deadline` whose timer fired, so
    that a holder of several same-coded deadlines can tell its own expiry from an upstream one.
    """

    def __init__(self, code: str, ms: float, deadline: Deadline) -> None:
        super().__init__(f"{code}: deadline of {ms}ms expired")
        self.code = code
        self.ms = ms
        self.deadline = deadline


def checked_hint(ms: object, what: str = "timeout hint") -> float:
    """An externally supplied budget in milliseconds, or ``ValueError``.

    Hints from users, configuration or other processes must be positive and finite: the
    "``<= 0`` means no timer" convention of :func:`deadline` is internal and must not be
    reachable by accident (a 0 read from a config file is a mistake, not "unlimited").
    """
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms <= 0:
        raise ValueError(f"{what} must be a positive finite number of milliseconds, got {ms!r}")
    return float(ms)


class Deadline:
    """One deadline: its signal, whether its own timer fired first, and the means to dispose it.

    Made by :func:`deadline`; see there for the cases.
    """

    __slots__ = ("_controller", "_fired", "_handle", "_upstream", "code", "ms", "signal")

    def __init__(self, signal: AbortSignal, code: str, ms: float) -> None:
        self.signal = signal
        self.code = code
        self.ms = ms
        self._controller: AbortController | None = None
        self._handle: Timer | None = None
        self._upstream: AbortSignal | None = None
        self._fired = False

    def __repr__(self) -> str:
        state = "fired" if self._fired else ("armed" if self._handle is not None else "idle")
        return f"<Deadline {self.code} {self.ms}ms {state} signal={self.signal!r}>"

    @property
    def fired_by_own_timer(self) -> bool:
        """True only if this deadline's timer aborted its signal (before anything else did)."""
        return self._fired

    @property
    def armed(self) -> bool:
        """True while the timer is scheduled (not fired, not cleared)."""
        return self._handle is not None

    def _arm(self, upstream: AbortSignal | None, delay_s: float) -> None:
        self._controller = AbortController()
        self.signal = self._controller.signal
        if upstream is not None:
            self._upstream = upstream
            upstream.add_listener(self._on_upstream)
        self._handle = call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        self._handle = None
        self._unhook()
        self._fired = True
        assert self._controller is not None
        self._controller.abort(TimeoutReason(self.code, self.ms, self))

    def _on_upstream(self, upstream: AbortSignal) -> None:
        self.dispose()
        assert self._controller is not None
        self._controller.abort(upstream.reason)

    def _unhook(self) -> None:
        if self._upstream is not None:
            self._upstream.remove_listener(self._on_upstream)
            self._upstream = None

    def dispose(self) -> None:
        """Clear the timer and remove the upstream listener.  Idempotent; never aborts."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._unhook()


def deadline(upstream: AbortSignal | None, ms: float, code: str) -> Deadline:
    """A deadline ``ms`` milliseconds from now under ``upstream``, classified by ``code``.

    * ``ms <= 0`` (internal "no timer"): the signal is ``upstream`` itself, or one that never
      aborts when there is no upstream.
    * ``upstream`` already aborted: the signal is born aborted with upstream's reason, no timer.
    * otherwise a fresh signal aborting on upstream's abort (its reason, the same object) or on
      the timer (a :class:`TimeoutReason`); with no upstream, the bare timer signal.

    ``ms`` must be a number and not NaN or infinite; externally supplied budgets go through
    :func:`checked_hint` first.  Needs a running event loop only when a timer is armed.
    """
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not math.isfinite(ms):
        raise ValueError(f"deadline ms must be a finite number, got {ms!r}")
    if ms <= 0:
        return Deadline(upstream if upstream is not None else AbortSignal(), code, ms)
    if upstream is not None and upstream.aborted:
        return Deadline(AbortSignal.abort(upstream.reason), code, ms)
    d = Deadline(AbortSignal(), code, ms)
    d._arm(upstream, ms / 1000)
    return d


def timeout_of(
    signal_or_reason: AbortSignal | object, code: str | None = None
) -> TimeoutReason | None:
    """The timeout reason of an aborted signal (or of a reason), if its code is ``code``.

    Any code matches when ``code`` is None.  A live signal, a foreign reason, or a timeout reason
    with another code gives None: a foreign-coded outer deadline reads as ordinary cancellation.
    """
    if isinstance(signal_or_reason, AbortSignal):
        if not signal_or_reason.aborted:
            return None
        reason = signal_or_reason.reason
    else:
        reason = signal_or_reason
    if isinstance(reason, TimeoutReason) and (code is None or reason.code == code):
        return reason
    return None
