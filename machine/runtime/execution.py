"""The execution view: what a call's hooks, wrappers and body see of it.

One per call, made at entry by the registry and frozen when its result is published.  It lives
apart from the registry's driver (whose compiled build cannot express a property with a deleter)
and is shared by every build of the driver in a process (the package's, and the benchmark's copy
with its tracing stripped, ``bench/untraced.py``).
"""

from __future__ import annotations

import itertools
import logging
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Final, Protocol

from ..contract.errors import RegistryUsageError
from .signals import AbortController, AbortSignal

if TYPE_CHECKING:
    from ..contract.core import PathStep

# the registry's rule D4, logged as the registry's
log = logging.getLogger("toolcancel.runtime.registry")

CALL_IDS: Final = itertools.count(1)
"""Where a call's default id (``call-<n>``) comes from: one count for every build of the registry
in the process, so that no two calls share an id."""


class _Call(Protocol):
    """What the view asks of the call it shows (the registry's ``_Call``, in whichever build)."""

    @property
    def state(self) -> str: ...
    @property
    def controller(self) -> AbortController | None: ...
    def own(self) -> AbortController: ...
    def defer(self, context: Any) -> None: ...
    def slot_replaced(self, value: AbortSignal | None) -> None: ...


def drop_late_context(call_id: str) -> None:
    log.warning("call %s: context deferred after dispatch settled is dropped (D4)", call_id)


class Execution:
    """The per-call view that hooks and the tool body receive.

    Everything is read-only except the ``signal`` slot, which around-dispatch wrappers may set,
    replace or delete (``None`` and ``del`` both mean *absent*) to compose deadlines.  Doing so
    never detaches the caller: the registry captured the caller's signal at entry, outside this
    object, and fuses it back in before the body runs.  After the result is materialized the view
    is frozen; touching the slot then raises :class:`RegistryUsageError`.
    """

    __slots__ = (
        "_agent",
        "_arguments",
        "_call",
        "_call_id",
        "_ended_in",
        "_frozen",
        "_name",
        "_own",
        "_parent",
        "_path",
        "_slot",
        "_token",
    )

    def __init__(
        self,
        call: _Call,
        call_id: str,
        name: str,
        arguments: Any,
        agent: str | None,
        parent: str | None,
        slot: AbortSignal | None,
        path: list[PathStep],
    ) -> None:
        self._call_id = call_id
        self._name = name
        self._arguments = arguments
        self._agent = agent
        self._parent = parent
        self._slot = slot  # the mutable signal slot; the caller's signal lives in _call
        self._frozen = False  # set just before notification; the slot is immutable after
        # The call in flight; None once published (:meth:`ended`), so that the call and its view
        # hold no cycle and a finished call is freed at once, not by the garbage collector.
        self._call: _Call | None = call
        self._path = path  # the call's own list of steps, shared
        self._own: AbortController | None = None  # the call signal's controller, once ended
        self._ended_in = ""  # the call's state when it let go of this view

    def hold(self, signal: AbortSignal | None) -> None:
        """The registry's own write of the slot, which no wrapper sees as a replacement: the
        fused F handed to the body as it starts, W again once it settled (R18.5).  (C, the
        slot's first value, is given when the view is made at entry.)"""
        self._slot = signal

    def ended(self, call: _Call) -> None:
        """The call published its result: freeze the slot and let go of the call, keeping
        its final state and the controller of its call signal (``None``: it never made one)."""
        self._frozen = True
        self._own = call.controller
        self._ended_in = call.state
        self._call = None

    @property
    def token(self) -> object:
        """An opaque object unique to this call."""
        try:
            return self._token
        except AttributeError:  # made on first use: most calls never ask
            self._token: object = object()
            return self._token
    # Read-only fields with C getters (operator.attrgetter): hooks, wrappers and bodies read
    # them on every call, and a getter of Python code costs a frame each time.
    call_id = property(attrgetter("_call_id"), doc="The call's id.")
    name = property(attrgetter("_name"), doc="The tool name the call asked for.")
    arguments = property(attrgetter("_arguments"), doc="The deep-frozen arguments.")
    agent = property(attrgetter("_agent"), doc="The calling agent, if any.")
    parent = property(attrgetter("_parent"), doc="The parent call's id, if nested.")

    def _set_signal(self, value: AbortSignal | None) -> None:
        if self._frozen:
            raise RegistryUsageError(
                f"call {self.call_id}: the execution view is frozen once its result is "
                "published; derive signals inside an around-dispatch wrapper instead"
            )
        if value is not None and not isinstance(value, AbortSignal):
            raise RegistryUsageError(
                f"call {self.call_id}: the signal slot takes an AbortSignal or None, "
                f"not {type(value).__name__}"
            )
        self._slot = value
        call = self._call
        if call is not None:
            call.slot_replaced(value)

    def _del_signal(self) -> None:
        self.signal = None  # through the property, as a wrapper's own ``view.signal = None``

    if TYPE_CHECKING:

        @property
        def signal(self) -> AbortSignal | None:
            """The signal slot: the caller's signal, a wrapper's, or during the body the fused
            one."""

        @signal.setter
        def signal(self, value: AbortSignal | None) -> None: ...

        @signal.deleter
        def signal(self) -> None: ...

    else:  # the getter in C, as the fields above
        signal = property(
            attrgetter("_slot"),
            _set_signal,
            _del_signal,
            doc="The signal slot: the caller's signal, a wrapper's, or during the body the fused "
            "one.  A wrapper may set it (an AbortSignal or None) or delete it (None); frozen "
            "once the result is published.",
        )

    @property
    def call_signal(self) -> AbortSignal:
        """The call's own signal (Python binding P1); every call has one.

        It follows the signal passed to ``execute()`` (aborting with its reason) and also aborts,
        with a :class:`~toolcancel.TaskCancelled` reason, when the task awaiting ``execute()`` is
        cancelled.  For a call made with a signal it is what the contract calls the caller's
        signal C, and the slot's initial value.  For a call made without one (seed, R26) it is
        *not* C: the slot starts absent and no checkpoint reads it, but task cancellation still
        aborts it, so a hook or body can stop.  The helpers of :mod:`toolcancel.runtime.cooperate`
        watch it and the slot together when given the view.
        """
        if self._call is not None:
            return self._call.own().signal
        if self._own is None:  # asked first after the call ended: a signal nothing aborts
            self._own = AbortController()
        return self._own.signal

    @property
    def frozen(self) -> bool:
        """Whether the view is frozen: its result was published and the slot is read-only."""
        return self._frozen

    def defer_context(self, context: Any) -> None:
        """Attach a context to this call's result (kept in call order, before wrapper contexts).

        Contexts deferred after the around waterfall settled can no longer be attached; they are
        dropped with a warning (CONTRACT.md, D4).
        """
        if self._call is None:
            drop_late_context(self._call_id)
        else:
            self._call.defer(context)

    @property
    def path(self) -> tuple[PathStep, ...]:
        """The call's path so far: every state, event and rule id (the explanation)."""
        return tuple(self._path)

    @property
    def state(self) -> str:
        return self._ended_in if self._call is None else self._call.state

    def __repr__(self) -> str:
        return f"<Execution {self.call_id} {self.name!r} in {self.state}>"
