"""WHATWG DOM ``AbortController`` / ``AbortSignal``, in synchronous Python.

This is a port of the abort machinery of the DOM Standard
(https://dom.spec.whatwg.org/#interface-abortsignal), so that cancellation in
this project follows rules that are already specified, implemented by every
browser and by Node, and tested by web-platform-tests (``dom/abort``).

The rules, which the rest of the project may rely on:

1. A signal aborts at most once.  Its reason is fixed at that moment and
   ``reason`` returns that same object for ever after.  Aborting an aborted
   signal, including re-entrantly from inside one of its own listeners, is a
   no-op.
2. Aborting is synchronous: when ``AbortController.abort()`` returns, every
   listener has already run.  Nothing is deferred to an event loop.
3. Before any listener runs, every dependent signal (made by
   ``AbortSignal.any``) is already marked aborted, with the *same* reason
   object.  A listener therefore never observes a half-aborted graph.
4. Order: the aborted signal's own listeners, in registration order, then the
   listeners of each dependent signal, dependents in the order they were
   linked.
5. A listener that raises does not stop the others: the exception is logged
   on the ``toolcancel.runtime.signals`` logger (the DOM "report the exception").
6. Listeners are deduplicated (adding the same callable twice is a no-op);
   ``once=True`` listeners are removed just *before* they are called; a
   listener removed during dispatch by an earlier listener is not called,
   and one added during dispatch is not called by that dispatch.
7. ``any()`` flattens: a dependent signal's sources are never themselves
   dependent, so chains of ``any()`` stay one hop deep.
8. Memory: a source refers to its dependents weakly, and dependents are never
   counted as listeners.  As in the DOM's garbage-collection rule, a
   non-aborted dependent that has listeners is kept alive by its sources, so
   ``AbortSignal.any([...]).add_listener(fn)`` works without the caller
   keeping the signal.  Once a signal aborts it drops its links, because it
   can never abort again.

Like the DOM, this is single-threaded: use a signal from one thread (normally
the event loop's).  ``AbortSignal.timeout`` is the only part that touches the
loop (asyncio's or trio's).
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
import logging
import math
import operator
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final

from ..contract.errors import ToolError
from . import eventloop as runtime

__all__ = [
    "AbortController",
    "AbortError",
    "AbortSignal",
    "Listener",
    "SignalTimeoutError",
]

logger = logging.getLogger("toolcancel.runtime.signals")


class AbortError(ToolError):
    """The default abort reason, like the DOM's ``DOMException("AbortError")``.

    ``throw_if_aborted`` also raises one to carry a reason that is not an
    exception (the DOM can throw any value; Python can only raise
    exceptions).  The original value is then kept in ``reason``.

    It is a structured tool error with the code ``ABORTED``: a tool body that
    raises one publishes an error result carrying ``{name: "AbortError", code:
    "ABORTED"}`` (R3).  The helpers of :mod:`toolcancel.runtime.cooperate` raise it with
    the message ``tool call aborted``, so that result is exactly R4's.
    """

    name = "AbortError"

    def __init__(self, *args: object, reason: object = None) -> None:
        Exception.__init__(self, *args)
        self.code = "ABORTED"
        self.reason = reason


class SignalTimeoutError(TimeoutError):
    """Reason of a signal from ``AbortSignal.timeout``.

    Mirrors ``DOMException("TimeoutError")``: a distinct type, so callers can
    tell "the deadline passed" from "someone cancelled", and still a
    ``TimeoutError`` so ordinary Python handlers catch it.
    """

    name = "TimeoutError"


Listener = Callable[["AbortSignal"], None]


class _Missing:
    """Type of the "no reason given" sentinel (JavaScript's ``undefined``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()

_serials = itertools.count()


class _NoLinks(dict):  # type: ignore[type-arg]
    """The empty link table every signal starts with; reading and emptying it are fine, and
    writing to it is a bug (it is shared), so it refuses."""

    def __setitem__(self, key: object, value: object) -> None:
        raise TypeError("the shared empty link table is read-only")

    def setdefault(self, key: object, default: object = None) -> object:
        raise TypeError("the shared empty link table is read-only")

    def update(self, *args: object, **kwargs: object) -> None:
        raise TypeError("the shared empty link table is read-only")


_NO_LINKS: Final[Any] = _NoLinks()


_Entry = list[Any]
"""One registration in a signal's listener list (a DOM "event listener"): ``[callback, once]``.

Removing it sets ``callback`` to None, which is what lets a dispatch already iterating over a
snapshot of the list skip a listener removed mid-dispatch.  A two-item list, not an object with
named fields: it is made on every call's path, and a list literal costs a quarter as much."""


class _ByEquality:
    """The table key of an unhashable callable: found again by ``==`` (all such keys share one
    hash bucket, which is fine for the rare callable object without ``__hash__``)."""

    __slots__ = ("fn",)

    def __init__(self, fn: object) -> None:
        self.fn = fn

    def __hash__(self) -> int:
        return 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ByEquality) and bool(self.fn == other.fn)


def _by_equality(fn: object) -> _ByEquality | None:
    """The table key of ``fn`` if it is unhashable; None if it is hashable."""
    try:
        hash(fn)
    except TypeError:
        return _ByEquality(fn)
    return None


_HANDLER: Final = object()
"""The key of the ``onabort`` entry: equal to no callable, so never deduplicated with one."""


def _default_reason(reason: object) -> object:
    # None is Python's ``undefined``: ``abort(None)`` behaves like
    # ``abort(undefined)`` in the DOM, which keeps "aborted iff reason is not
    # None" true.
    if reason is _MISSING or reason is None:
        return AbortError("signal is aborted without reason")
    return reason


class AbortSignal:
    """Tells an operation that it should stop, and why.

    Obtain one from ``AbortController().signal``, ``AbortSignal.abort()``,
    ``AbortSignal.any()`` or ``AbortSignal.timeout()``.  See the module
    docstring for the rules it follows.
    """

    __slots__ = (
        "__weakref__",
        "_aborted",
        "_dependent",
        "_dependents",
        "_listeners",
        "_onabort",
        "_reason",
        "_retained",
        "_serial",
        "_sources",
    )

    def __init__(self) -> None:
        self._serial = next(_serials)
        self._aborted = False
        self._reason: object = None
        # Registration order, and O(1) deduplication and removal however many listeners a
        # shared signal (a turn's, a caller's) carries: callable (or _HANDLER) -> entry.
        self._listeners: dict[object, _Entry] = {}
        self._onabort: Listener | None = None  # registered under _HANDLER while set
        # DOM "dependent": made by any(); such a signal is never a source.
        self._dependent = False
        # The three link tables start as the shared empty table (most signals never link:
        # three empty dicts would be most of a signal's memory); _own() makes a real one.
        # DOM "source signals" (strong: a dependent needs its sources).
        self._sources: dict[int, AbortSignal] = _NO_LINKS
        # DOM "dependent signals": ordered, weak, keyed by serial.
        self._dependents: dict[int, weakref.ref[AbortSignal]] = _NO_LINKS
        # Dependents with listeners, kept alive by their source (DOM GC rule).
        self._retained: dict[int, AbortSignal] = _NO_LINKS

    def __repr__(self) -> str:
        state = f"aborted reason={self._reason!r}" if self._aborted else "active"
        return f"<AbortSignal #{self._serial} {state}>"

    # -- state -------------------------------------------------------------

    if TYPE_CHECKING:

        @property
        def aborted(self) -> bool:
            """Whether the signal has been aborted.  Never goes back to False."""

    else:  # the same property with a C getter: read many times per call, it is a sixth cheaper
        aborted = property(
            operator.attrgetter("_aborted"),
            doc="Whether the signal has been aborted.  Never goes back to False.",
        )

    @property
    def reason(self) -> object:
        """Why the signal aborted (None while it has not)."""
        return self._reason

    def throw_if_aborted(self) -> None:
        """Raise the abort reason if aborted; otherwise do nothing.

        The DOM throws the reason itself.  An exception instance is raised as
        is (the same object every time); any other value is wrapped in an
        ``AbortError`` whose ``reason`` attribute holds it.
        """
        if not self._aborted:
            return
        reason = self._reason
        if isinstance(reason, BaseException):
            raise reason
        raise AbortError(f"signal is aborted with reason {reason!r}", reason=reason)

    # -- listeners ---------------------------------------------------------

    @property
    def onabort(self) -> Listener | None:
        """Event-handler attribute, like the DOM's ``signal.onabort``.

        Setting it from None registers a listener at the end of the list;
        changing it keeps that position; setting None unregisters it.  So it
        runs in the order it was *first* set, as an HTML event handler does.
        """
        return self._onabort

    @onabort.setter
    def onabort(self, handler: Listener | None) -> None:
        self._onabort = handler
        if handler is None:
            entry = self._listeners.pop(_HANDLER, None)
            if entry is not None:
                entry[0] = None
        elif _HANDLER not in self._listeners:
            self._listeners[_HANDLER] = [self._call_onabort, False]
        if self._sources:
            self._update_retention()

    def _call_onabort(self, signal: AbortSignal) -> None:
        handler = self._onabort
        if handler is not None:
            handler(signal)

    def add_listener(self, fn: Listener, *, once: bool = False) -> None:
        """Call ``fn(signal)`` when the signal aborts.

        Adding a callable that is already registered is a no-op, whatever
        ``once`` says (DOM deduplication).  Callables are compared with
        ``==`` so that a bound method such as ``self.cancel`` matches itself
        even though each attribute access makes a new object.  A listener
        added after the signal aborted is kept but never called, as in the
        DOM.
        """
        entry = [fn, once]
        # One table operation (this is on every call's path); an unhashable callable is then
        # keyed by equality instead.
        try:
            found = self._listeners.setdefault(fn, entry)
        except TypeError:
            key = _by_equality(fn)
            if key is None:
                raise  # fn is hashable: the table's lookup itself failed (an __eq__ raised)
            found = self._listeners.setdefault(key, entry)
        if found is entry and self._sources:
            self._update_retention()

    def remove_listener(self, fn: Listener) -> None:
        """Unregister ``fn``; a no-op if it is not registered."""
        try:
            entry = self._listeners.pop(fn, None)
        except TypeError:  # as in add_listener
            key = _by_equality(fn)
            if key is None:
                raise
            entry = self._listeners.pop(key, None)
        if entry is not None:
            entry[0] = None
            if self._sources:
                self._update_retention()

    @property
    def listener_count(self) -> int:
        """Registered listeners, counting ``onabort`` if set.

        Links to dependent signals are not listeners and are not counted, so
        this stays a faithful measure of leaked callbacks.
        """
        return len(self._listeners)

    @property
    def dependent_count(self) -> int:
        """Live, non-aborted signals made by ``any()`` that follow this one."""
        return len(self._dependents)

    # -- aborting ----------------------------------------------------------

    def _signal_abort(self, reason: object) -> None:
        """DOM "signal abort"."""
        if self._aborted:
            return
        reason = _default_reason(reason)
        self._mark_aborted(reason)
        # Mark every dependent aborted before running anything, so that no
        # listener can observe a dependent that is about to abort but has not.
        to_fire: list[AbortSignal] = []
        for ref in list(self._dependents.values()):
            dependent = ref()
            if dependent is not None and not dependent._aborted:
                dependent._mark_aborted(reason)
                to_fire.append(dependent)
        self._dependents.clear()
        self._retained.clear()
        self._fire_abort()
        for dependent in to_fire:
            dependent._fire_abort()

    def _mark_aborted(self, reason: object) -> None:
        self._aborted = True
        self._reason = reason
        # An aborted signal can never abort again, so its links are dead
        # weight: drop them both ways.
        for source in self._sources.values():
            source._dependents.pop(self._serial, None)
            source._retained.pop(self._serial, None)
        self._sources.clear()

    def _fire_abort(self) -> None:
        """DOM "fire an event named abort", minus the Event object."""
        # Iterate over a snapshot so that additions during dispatch are not
        # called; the ``removed`` flag handles removals.
        for key, entry in list(self._listeners.items()):
            callback, once = entry
            if callback is None:
                continue
            if once:
                entry[0] = None
                del self._listeners[key]
            try:
                callback(self)
            except Exception:
                logger.exception(
                    "abort listener %r raised while %r was aborting",
                    callback,
                    self,
                )

    # -- dependent signals -------------------------------------------------

    def _link(self, source: AbortSignal) -> None:
        """Make ``self`` (dependent) follow ``source`` (not dependent)."""
        if source._serial in self._sources:
            return
        if self._sources is _NO_LINKS:
            self._sources = {}
        self._sources[source._serial] = source
        key = self._serial
        source_ref = weakref.ref(source)

        def forget(_: weakref.ref[AbortSignal]) -> None:
            src = source_ref()
            if src is not None:
                src._dependents.pop(key, None)

        if source._dependents is _NO_LINKS:
            source._dependents = {}
        source._dependents[key] = weakref.ref(self, forget)

    def _update_retention(self) -> None:
        """Apply the DOM GC rule for dependents.

        A non-aborted dependent signal with listeners must stay alive while
        it has sources, even if nobody else refers to it; otherwise its
        listeners would silently never run.  Called only for a signal with sources.
        """
        retain = bool(self._listeners)
        for source in self._sources.values():
            if retain:
                if source._retained is _NO_LINKS:
                    source._retained = {}
                source._retained[self._serial] = self
            else:
                source._retained.pop(self._serial, None)

    # -- factories ---------------------------------------------------------

    @staticmethod
    def abort(reason: object = _MISSING) -> AbortSignal:
        """Return a signal that is already aborted (no event is fired)."""
        signal = AbortSignal()
        signal._mark_aborted(_default_reason(reason))
        return signal

    @staticmethod
    def any(signals: Iterable[AbortSignal]) -> AbortSignal:
        """Return a signal that aborts as soon as any of ``signals`` does.

        DOM "create a dependent abort signal": if one of ``signals`` is
        already aborted the result is too, with the first such reason (the
        same object).  Otherwise the result links to each signal, or, for a
        signal that is itself dependent, to that signal's own sources.
        """
        sources = list(signals)
        for source in sources:
            if source._aborted:
                return AbortSignal.abort(source._reason)
        result = AbortSignal()
        result._dependent = True
        for source in sources:
            if source._dependent:
                for inner in list(source._sources.values()):
                    result._link(inner)
            else:
                result._link(source)
        return result

    @staticmethod
    def timeout(ms: float) -> AbortSignal:
        """Return a signal that aborts with ``SignalTimeoutError`` after ``ms``.

        The timer runs on the running loop (asyncio's or trio's), so it follows
        the loop's clock, virtual or real.  Timeouts fire in deadline order, and those
        with equal deadlines in creation order (as HTML timers do).  ``ms``
        must be finite and non-negative, as the DOM's ``[EnforceRange]
        unsigned long long`` requires.
        """
        if not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms < 0:
            raise ValueError(f"timeout must be a finite number >= 0, got {ms!r}")
        loop = runtime.running_loop()
        signal = AbortSignal()
        if loop is None:  # trio (RuntimeError outside any loop)
            _trio_timeout_queue().add(runtime.clock()() + ms / 1000, signal)
            return signal
        queue = _timeout_queues.get(loop)
        if queue is None:
            queue = _timeout_queues[loop] = _TimeoutQueue(loop)
        queue.add(loop.time() + ms / 1000, signal)
        return signal


class _TimeoutQueue:
    """The pending ``AbortSignal.timeout`` signals of one event loop.

    asyncio does not promise that timers with equal deadlines run in the order
    they were scheduled, but HTML's "run steps after a timeout" does: a timeout
    waits for earlier ones with a shorter or equal delay.  So timeouts are
    kept in one heap ordered by (deadline, creation) and fired from loop
    timers in that order.

    Nothing here refers to the loop strongly, not even a ``TimerHandle``
    (which holds its loop): this object is the value of a
    ``WeakKeyDictionary`` keyed by the loop, and any path back to the key
    would keep every loop alive for ever.  So timers are never cancelled; a
    timer that finds nothing due does nothing.
    """

    __slots__ = ("_heap", "_loop", "_pending")

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        # None on trio: the queue is the run's (a RunVar), and so are its timers.
        self._loop = None if loop is None else weakref.ref(loop)
        self._heap: list[tuple[float, int, AbortSignal]] = []
        # Deadlines of loop timers that have been scheduled and not yet run.
        self._pending: set[float] = set()

    def add(self, when: float, signal: AbortSignal) -> None:
        heapq.heappush(self._heap, (when, signal._serial, signal))
        self._ensure_timer()

    def _ensure_timer(self) -> None:
        if not self._heap:
            return
        when = self._heap[0][0]
        if self._pending and min(self._pending) <= when:
            return
        if self._loop is None:
            runtime.call_at(when, functools.partial(self._fire, when))
            self._pending.add(when)
            return
        loop = self._loop()
        if loop is not None:
            loop.call_at(when, self._fire, when)
            self._pending.add(when)

    def _fire(self, deadline: float) -> None:
        self._pending.discard(deadline)
        # Take every due signal first, so that a timeout created by one of
        # their listeners cannot run in this same callback.
        due: list[AbortSignal] = []
        while self._heap and self._heap[0][0] <= deadline:
            due.append(heapq.heappop(self._heap)[2])
        self._ensure_timer()
        for signal in due:
            signal._signal_abort(SignalTimeoutError("signal timed out"))


def _trio_timeout_queue() -> _TimeoutQueue:
    """The pending timeouts of the running trio run (one queue per run, as per asyncio loop)."""
    import trio

    global _trio_queues
    if _trio_queues is None:
        _trio_queues = trio.lowlevel.RunVar("toolcancel timeouts")
    try:
        queue: _TimeoutQueue = _trio_queues.get()
    except LookupError:
        queue = _TimeoutQueue(None)
        _trio_queues.set(queue)
    return queue


_trio_queues: Any = None  # the RunVar, made on first use (trio is not imported before)

_timeout_queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _TimeoutQueue] = (
    weakref.WeakKeyDictionary()
)


class AbortController:
    """Owns a signal and is the only way (besides a timeout) to abort it."""

    __slots__ = ("__weakref__", "_signal")

    def __init__(self) -> None:
        self._signal = AbortSignal()

    def __repr__(self) -> str:
        return f"<AbortController signal={self._signal!r}>"

    if TYPE_CHECKING:

        @property
        def signal(self) -> AbortSignal:
            """The controlled signal; always the same object."""

    else:  # a C getter, as AbortSignal.aborted: every call with a signal reads it at entry
        signal = property(
            operator.attrgetter("_signal"), doc="The controlled signal; always the same object."
        )

    def abort(self, reason: object = _MISSING) -> None:
        """Abort the signal with ``reason`` (default: a new ``AbortError``).

        A no-op if the signal is already aborted: the first reason wins.
        """
        self._signal._signal_abort(reason)
