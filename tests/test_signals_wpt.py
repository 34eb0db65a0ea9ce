"""Port of web-platform-tests ``dom/abort`` to ``toolcancel.runtime.signals``.

Each WPT case becomes one test named after it, with the WPT file and case
title in the docstring.  The cases are rewritten for Python, not copied:

* a DOM ``Event`` is replaced by the listener receiving the signal (the
  event's target);
* ``undefined`` is ``None``; the DOM's ``null`` reason has no Python
  counterpart, so that case checks falsy reasons instead;
* brand checks (calling methods on non-signals) have no Python analogue and
  are not ported;
* timers run on ``toolcancel.runtime.virtual_time``, never on the wall clock, and the
  garbage-collection cases use ``weakref`` + ``gc.collect()`` instead of
  ``FinalizationRegistry``.

Tests beyond WPT (listener bookkeeping, leak counters, a model-based check of
abort propagation) are at the end.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import weakref
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcancel.runtime.signals import (
    AbortController,
    AbortError,
    AbortSignal,
    SignalTimeoutError,
)
from toolcancel.runtime.virtual_time import VirtualClock, run

pytestmark = pytest.mark.usefixtures("no_real_waits")


def recorder(log: list[Any], value: Any) -> Callable[[AbortSignal], None]:
    def listener(_: AbortSignal) -> None:
        log.append(value)

    return listener


def collected(ref: weakref.ref[Any]) -> bool:
    gc.collect()
    return ref() is None


# --------------------------------------------------------------------------
# event.any.js
# --------------------------------------------------------------------------


def test_abortcontroller_abort_should_fire_event_synchronously() -> None:
    """WPT dom/abort/event.any.js:

    AbortController abort() should fire event synchronously
    """
    c = AbortController()
    s = c.signal
    state = ["begin"]
    assert not s.aborted
    assert s.reason is None

    def listener(target: AbortSignal) -> None:
        assert state == ["begin"]
        state[0] = "aborted"

    s.add_listener(listener)
    c.abort()
    assert state == ["aborted"]
    assert s.aborted
    assert isinstance(s.reason, AbortError)
    assert s.reason.name == "AbortError"
    c.abort()
    assert state == ["aborted"]


def test_controller_signal_should_always_return_the_same_object() -> None:
    """WPT dom/abort/event.any.js:

    controller.signal should always return the same object
    """
    controller = AbortController()
    signal = controller.signal
    assert controller.signal is signal
    controller.abort()
    assert controller.signal is signal


def test_controller_abort_should_do_nothing_the_second_time_it_is_called() -> None:
    """WPT dom/abort/event.any.js:

    controller.abort() should do nothing the second time it is called
    """
    controller = AbortController()
    signal = controller.signal
    calls: list[int] = []
    signal.onabort = recorder(calls, 1)
    controller.abort("first")
    assert signal.aborted
    assert calls == [1]
    controller.abort("second")
    assert signal.aborted
    assert calls == [1]
    assert signal.reason == "first"


def test_event_handler_should_not_be_called_if_added_after_controller_abort() -> None:
    """WPT dom/abort/event.any.js:

    event handler should not be called if added after controller.abort()
    """
    controller = AbortController()
    controller.abort()
    calls: list[int] = []
    controller.signal.onabort = recorder(calls, 1)
    controller.signal.add_listener(recorder(calls, 2))
    controller.abort()
    assert calls == []


def test_the_abort_event_should_have_the_right_properties() -> None:
    """WPT dom/abort/event.any.js: the abort event should have the right properties

    Python listeners get the event target (the signal) instead of an Event.
    """
    controller = AbortController()
    signal = controller.signal
    targets: list[AbortSignal] = []
    signal.onabort = targets.append
    signal.add_listener(targets.append)
    controller.abort()
    assert len(targets) == 2
    assert all(t is signal for t in targets)


def test_abortcontroller_abort_reason_should_set_signal_reason() -> None:
    """WPT dom/abort/event.any.js:

    AbortController abort(reason) should set signal.reason
    """
    controller = AbortController()
    signal = controller.signal
    assert signal.reason is None
    reason = Exception("hello")
    controller.abort(reason)
    assert signal.aborted
    assert signal.reason is reason


def test_aborting_abortcontroller_without_reason_creates_an_aborterror() -> None:
    """WPT dom/abort/event.any.js:

    aborting AbortController without reason creates an "AbortError" DOMException
    """
    controller = AbortController()
    signal = controller.signal
    assert signal.reason is None
    controller.abort()
    assert signal.aborted
    assert isinstance(signal.reason, AbortError)
    assert signal.reason.name == "AbortError"
    assert str(signal.reason) == "signal is aborted without reason"


def test_abortcontroller_abort_undefined_creates_an_aborterror() -> None:
    """WPT dom/abort/event.any.js:

    AbortController abort(undefined) creates an "AbortError" DOMException

    Python has one "no value", None, and it plays the part of undefined.
    """
    controller = AbortController()
    controller.abort(None)
    assert controller.signal.aborted
    assert isinstance(controller.signal.reason, AbortError)


@pytest.mark.parametrize("reason", [0, "", False, 0.0, (), []])
def test_abortcontroller_abort_null_should_set_signal_reason(reason: object) -> None:
    """WPT dom/abort/event.any.js: AbortController abort(null) should set signal.reason

    Adapted: there is no null distinct from None, so check that falsy but
    present reasons are kept as given rather than replaced by the default.
    """
    controller = AbortController()
    controller.abort(reason)
    assert controller.signal.aborted
    assert controller.signal.reason is reason


def test_the_abortsignal_abort_static_returns_an_already_aborted_signal() -> None:
    """WPT dom/abort/event.any.js / WPT dom/abort/AbortSignal.any.js:

    the AbortSignal.abort() static returns an already aborted signal
    """
    signal = AbortSignal.abort()
    assert isinstance(signal, AbortSignal)
    assert signal.aborted


def test_static_aborting_signal_should_have_right_properties() -> None:
    """WPT dom/abort/event.any.js:

    static aborting signal should have right properties
    """
    signal = AbortSignal.abort()
    assert signal.aborted
    assert isinstance(signal.reason, AbortError)
    assert signal.reason.name == "AbortError"


def test_static_aborting_signal_with_reason_should_set_signal_reason() -> None:
    """WPT dom/abort/event.any.js:

    static aborting signal with reason should set signal.reason
    """
    reason = Exception("hello")
    signal = AbortSignal.abort(reason)
    assert signal.aborted
    assert signal.reason is reason


def test_throwifaborted_should_throw_abort_reason_if_signal_aborted() -> None:
    """WPT dom/abort/event.any.js:

    throwIfAborted() should throw abort.reason if signal aborted
    """
    reason = ValueError("boom")
    signal = AbortSignal.abort(reason)
    assert signal.aborted
    with pytest.raises(ValueError) as info:
        signal.throw_if_aborted()
    assert info.value is reason
    assert reason.args == ("boom",), "throw_if_aborted() must not change the reason"
    # The same object every time, not a copy.
    with pytest.raises(ValueError) as again:
        signal.throw_if_aborted()
    assert again.value is reason


def test_throwifaborted_should_throw_base_exception_reason_as_is() -> None:
    """WPT dom/abort/event.any.js:

    throwIfAborted() should throw abort.reason if signal aborted

    Python extension: any BaseException instance (here CancelledError) is
    raised itself, not wrapped.
    """
    reason = asyncio.CancelledError("stop")
    signal = AbortSignal.abort(reason)
    with pytest.raises(asyncio.CancelledError) as info:
        signal.throw_if_aborted()
    assert info.value is reason


@pytest.mark.parametrize("reason", ["hello", 42, ValueError, {"why": "x"}])
def test_throwifaborted_should_throw_primitive_abort_reason_if_signal_aborted(
    reason: object,
) -> None:
    """WPT dom/abort/event.any.js:

    throwIfAborted() should throw primitive abort.reason if signal aborted

    Python can only raise exceptions: a non-exception reason (including an
    exception *class*) is carried by an AbortError in its ``reason``.
    """
    signal = AbortSignal.abort(reason)
    assert signal.aborted
    with pytest.raises(AbortError) as info:
        signal.throw_if_aborted()
    assert info.value.reason is reason
    assert signal.reason is reason


def test_throwifaborted_should_not_throw_if_signal_not_aborted() -> None:
    """WPT dom/abort/event.any.js:

    throwIfAborted() should not throw if signal not aborted
    """
    controller = AbortController()
    assert not controller.signal.aborted
    controller.signal.throw_if_aborted()


def test_abortsignal_reason_returns_the_same_domexception() -> None:
    """WPT dom/abort/event.any.js: AbortSignal.reason returns the same DOMException"""
    signal = AbortSignal.abort()
    assert isinstance(signal.reason, AbortError)
    assert signal.reason is signal.reason
    # Two static signals get two distinct default reasons.
    assert AbortSignal.abort().reason is not signal.reason


def test_abortcontroller_signal_reason_returns_the_same_domexception() -> None:
    """WPT dom/abort/event.any.js:

    AbortController.signal.reason returns the same DOMException
    """
    controller = AbortController()
    controller.abort()
    first = controller.signal.reason
    assert isinstance(first, AbortError)
    assert controller.signal.reason is first
    controller.abort()
    assert controller.signal.reason is first


# DOM event-dispatch rules (dom/events) that event.any.js relies on.


def test_abort_fires_listeners_and_handler_in_registration_order() -> None:
    """WPT dom/abort/event.any.js:

    listeners run in order; onabort sits where it was first set
    """
    controller = AbortController()
    signal = controller.signal
    log: list[str] = []
    signal.add_listener(recorder(log, "a"))
    signal.onabort = recorder(log, "handler-1")
    signal.add_listener(recorder(log, "b"))
    signal.onabort = recorder(log, "handler-2")  # keeps its slot
    controller.abort()
    assert log == ["a", "handler-2", "b"]


def test_onabort_cleared_and_set_again_moves_to_the_end() -> None:
    """WPT dom/abort/event.any.js:

    setting onabort to None deactivates it; setting again re-adds
    """
    controller = AbortController()
    signal = controller.signal
    log: list[str] = []
    signal.onabort = recorder(log, "old")
    signal.add_listener(recorder(log, "a"))
    signal.onabort = None
    assert signal.onabort is None
    assert signal.listener_count == 1
    handler = recorder(log, "new")
    signal.onabort = handler
    assert signal.onabort is handler
    controller.abort()
    assert log == ["a", "new"]


def test_listener_removed_during_dispatch_is_not_called() -> None:
    """WPT dom/abort/event.any.js:

    a listener removed by an earlier listener does not run
    """
    controller = AbortController()
    signal = controller.signal
    log: list[str] = []
    second = recorder(log, "second")
    third = recorder(log, "third")

    def first(s: AbortSignal) -> None:
        log.append("first")
        s.remove_listener(second)
        # Removing and re-adding makes a new registration, which this
        # dispatch must not see either.
        s.remove_listener(third)
        s.add_listener(third)

    signal.add_listener(first)
    signal.add_listener(second)
    signal.add_listener(third)
    controller.abort()
    assert log == ["first"]


def test_onabort_cleared_during_dispatch_is_not_called() -> None:
    """WPT dom/abort/event.any.js:

    an event handler deactivated during dispatch does not run
    """
    controller = AbortController()
    signal = controller.signal
    log: list[str] = []

    def first(s: AbortSignal) -> None:
        log.append("first")
        s.onabort = None

    signal.add_listener(first)
    signal.onabort = recorder(log, "handler")
    controller.abort()
    assert log == ["first"]


def test_listener_added_during_dispatch_is_not_called() -> None:
    """WPT dom/abort/event.any.js:

    listeners added during dispatch wait for an event that never comes
    """
    controller = AbortController()
    signal = controller.signal
    log: list[str] = []

    def first(s: AbortSignal) -> None:
        log.append("first")
        s.add_listener(recorder(log, "late"))

    signal.add_listener(first)
    controller.abort()
    assert log == ["first"]
    assert signal.listener_count == 2


def test_reentrant_abort_of_the_same_controller_fires_once() -> None:
    """WPT dom/abort/event.any.js:

    controller.abort() should do nothing the second time it is called

    ...including when the second call comes from inside a listener.
    """
    controller = AbortController()
    signal = controller.signal
    log: list[object] = []

    def again(s: AbortSignal) -> None:
        log.append(s.reason)
        controller.abort("second")

    signal.add_listener(again)
    signal.onabort = lambda s: log.append("handler")
    controller.abort("first")
    assert log == ["first", "handler"]
    assert signal.reason == "first"


def test_listener_exception_is_reported_and_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """WPT dom/abort/event.any.js:

    a throwing listener is reported; the dispatch goes on
    """
    controller = AbortController()
    signal = controller.signal
    dependent = AbortSignal.any([signal])
    log: list[str] = []

    def broken(_: AbortSignal) -> None:
        raise RuntimeError("listener bug")

    signal.add_listener(broken)
    signal.add_listener(recorder(log, "after"))
    dependent.add_listener(recorder(log, "dependent"))
    with caplog.at_level(logging.ERROR, logger="toolcancel.runtime.signals"):
        controller.abort()
    assert log == ["after", "dependent"]
    records = [r for r in caplog.records if r.name == "toolcancel.runtime.signals"]
    assert len(records) == 1
    assert records[0].levelno == logging.ERROR
    assert records[0].exc_info is not None
    assert isinstance(records[0].exc_info[1], RuntimeError)


def test_signal_returned_by_abortsignal_abort_should_not_fire_abort_event() -> None:
    """WPT dom/abort/AbortSignal.any.js:

    signal returned by AbortSignal.abort() should not fire abort event
    """
    calls: list[int] = []

    async def main() -> None:
        s = AbortSignal.abort()
        s.add_listener(recorder(calls, 1))
        s.onabort = recorder(calls, 2)
        await asyncio.sleep(2)

    run(main())
    assert calls == []


# --------------------------------------------------------------------------
# AbortSignal.any.js: AbortSignal.timeout
# --------------------------------------------------------------------------


def test_abortsignal_timeout_returns_a_non_aborted_signal() -> None:
    """WPT dom/abort/AbortSignal.any.js:

    AbortSignal.timeout() returns a non-aborted signal
    """

    async def main() -> None:
        signal = AbortSignal.timeout(0)
        assert isinstance(signal, AbortSignal)
        assert not signal.aborted
        assert signal.reason is None

    run(main())


def test_signal_returned_by_abortsignal_timeout_times_out() -> None:
    """WPT dom/abort/AbortSignal.any.js:

    Signal returned by AbortSignal.timeout() times out
    """
    clock = VirtualClock()

    async def main() -> AbortSignal:
        fired: asyncio.Future[AbortSignal] = asyncio.get_running_loop().create_future()
        signal = AbortSignal.timeout(5)
        signal.onabort = fired.set_result
        assert await fired is signal
        return signal

    signal = run(main(), clock=clock)
    assert clock.time() == pytest.approx(0.005)
    assert signal.aborted
    assert isinstance(signal.reason, SignalTimeoutError)
    assert isinstance(signal.reason, TimeoutError)
    assert signal.reason.name == "TimeoutError"
    with pytest.raises(SignalTimeoutError):
        signal.throw_if_aborted()


def test_abortsignal_timeout_is_not_aborted_before_its_time() -> None:
    """WPT dom/abort/AbortSignal.any.js:

    Signal returned by AbortSignal.timeout() times out (not early)
    """
    clock = VirtualClock()

    async def main() -> None:
        signal = AbortSignal.timeout(1000)
        await asyncio.sleep(0.999)
        assert not signal.aborted
        await asyncio.sleep(0.002)
        assert signal.aborted

    run(main(), clock=clock)
    assert clock.time() == pytest.approx(1.001)


def test_abortsignal_timeouts_fire_in_order() -> None:
    """WPT dom/abort/AbortSignal.any.js: AbortSignal timeouts fire in order"""
    log: list[str] = []

    async def main() -> None:
        done = asyncio.get_running_loop().create_future()
        for value in ["1", "2", "3"]:
            AbortSignal.timeout(5).onabort = recorder(log, value)
        AbortSignal.timeout(5).onabort = lambda s: done.set_result("".join(log))
        assert await done == "123"

    run(main())
    assert log == ["1", "2", "3"]


def test_abortsignal_timeouts_fire_in_deadline_order() -> None:
    """WPT dom/abort/AbortSignal.any.js: AbortSignal timeouts fire in order

    With different delays, the shorter fires first whatever the creation
    order, each at its own virtual time; a timeout created by a listener
    fires later, never in the same callback.
    """
    clock = VirtualClock()
    log: list[tuple[str, float]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        done = asyncio.Event()

        def note(name: str) -> Callable[[AbortSignal], None]:
            return lambda s: log.append((name, loop.time()))

        def chain(s: AbortSignal) -> None:
            log.append(("10", loop.time()))
            nested = AbortSignal.timeout(0)
            nested.add_listener(note("nested"))
            assert not nested.aborted

        AbortSignal.timeout(100).add_listener(note("100"))
        AbortSignal.timeout(10).add_listener(chain)
        AbortSignal.timeout(50).add_listener(note("50"))
        AbortSignal.timeout(100).add_listener(lambda s: done.set())
        await done.wait()

    run(main(), clock=clock)
    assert [name for name, _ in log] == ["10", "nested", "50", "100"]
    assert [when for _, when in log] == pytest.approx([0.010, 0.010, 0.050, 0.100])


def test_abortsignal_timeout_zero_fires_on_the_next_loop_iteration() -> None:
    """WPT dom/abort/AbortSignal.any.js:

    AbortSignal.timeout() returns a non-aborted signal (ms=0)

    A zero timeout is still a timer: never synchronous, due at once.
    """
    clock = VirtualClock(start=10.0)

    async def main() -> None:
        fired = asyncio.Event()
        signal = AbortSignal.timeout(0)
        signal.add_listener(lambda s: fired.set())
        assert not signal.aborted
        await fired.wait()
        assert isinstance(signal.reason, SignalTimeoutError)

    run(main(), clock=clock)
    assert clock.time() == 10.0


def test_abortsignal_timeout_does_not_keep_the_event_loop_alive() -> None:
    """WPT dom/abort/AbortSignal.any.js: Signal returned by AbortSignal.timeout()
    times out (Python: the per-loop timer bookkeeping must not leak loops).
    """
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []

    async def main() -> None:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        AbortSignal.timeout(5)
        AbortSignal.timeout(3600_000)  # still pending when the loop closes

    run(main())
    assert collected(loops[0])


@pytest.mark.parametrize("ms", [-1, -0.5, math.inf, -math.inf, math.nan])
def test_abortsignal_timeout_rejects_out_of_range(ms: float) -> None:
    """WPT dom/abort/AbortSignal.any.js:

    AbortSignal.timeout(ms) takes an [EnforceRange] unsigned long long
    """
    with pytest.raises(ValueError):
        AbortSignal.timeout(ms)

    async def main() -> None:
        with pytest.raises(ValueError):
            AbortSignal.timeout(ms)

    run(main())


def test_abortsignal_timeout_needs_a_running_loop() -> None:
    """WPT dom/abort/AbortSignal.any.js:

    AbortSignal.timeout() (Python: timers live on the running loop)
    """
    with pytest.raises(RuntimeError):
        AbortSignal.timeout(5)


# --------------------------------------------------------------------------
# resources/abort-signal-any-tests.js
# --------------------------------------------------------------------------


def test_abortsignal_any_works_with_an_empty_array_of_signals() -> None:
    """WPT dom/abort/resources/abort-signal-any-tests.js:

    AbortSignal.any() works with an empty array of signals
    """
    signal = AbortSignal.any([])
    assert not signal.aborted
    assert signal.reason is None


def test_abortsignal_any_follows_a_single_signal() -> None:
    """WPT dom/abort/resources/abort-signal-any-tests.js:

    AbortSignal.any() follows a single signal (using AbortController)
    """
    controller = AbortController()
    signal = controller.signal
    clone = AbortSignal.any([signal])
    assert not clone.aborted
    assert clone.reason is None
    assert clone is not signal

    targets: list[AbortSignal] = []
    clone.onabort = targets.append
    controller.abort("reason string")
    assert signal.aborted
    assert clone.aborted
    assert targets == [clone]
    assert clone.reason == "reason string"


@pytest.mark.parametrize("i", range(3))
def test_abortsignal_any_follows_multiple_signals(i: int) -> None:
    """WPT dom/abort/resources/abort-signal-any-tests.js:

    AbortSignal.any() follows multiple signals (using AbortController)
    """
    controllers = [AbortController() for _ in range(3)]
    combined = AbortSignal.any(c.signal for c in controllers)
    targets: list[AbortSignal] = []
    combined.onabort = targets.append
    controllers[i].abort()
    assert targets == [combined]
    assert combined.aborted
    assert isinstance(combined.reason, AbortError)
    assert combined.reason is controllers[i].signal.reason


def test_abortsignal_any_returns_an_aborted_signal_if_passed_an_aborted_signal() -> (
    None
):
    """WPT dom/abort/resources/abort-signal-any-tests.js:

    AbortSignal.any() returns an aborted signal if passed an aborted signal
    """
    controllers = [AbortController() for _ in range(3)]
    controllers[1].abort("reason 1")
    controllers[2].abort("reason 2")
    signal = AbortSignal.any([c.signal for c in controllers])
    assert signal.aborted
    assert signal.reason == "reason 1"
    # Already aborted: no links are made.
    assert controllers[0].signal.dependent_count == 0


def test_abortsignal_any_can_be_passed_the_same_signal_more_than_once() -> None:
    """WPT dom/abort/resources/abort-signal-any-tests.js:

    AbortSignal.any() can be passed the same signal more than once
    """
    controller = AbortController()
    signal = AbortSignal.any([controller.signal, controller.signal])
    assert not signal.aborted
    assert controller.signal.dependent_count == 1
    fired: list[int] = []
    signal.add_listener(recorder(fired, 1))
    controller.abort("reason")
    assert signal.aborted
    assert signal.reason == "reason"
    assert fired == [1]


def test_abortsignal_any_uses_the_first_instance_of_a_duplicate_signal() -> None:
    """WPT dom/abort/resources/abort-signal-any-tests.js:

    AbortSignal.any() uses the first instance of a duplicate signal
    """
    controller1 = AbortController()
    controller1.abort("reason 1")
    controller2 = AbortController()
    controller2.abort("reason 2")
    signal = AbortSignal.any(
        [controller1.signal, controller2.signal, controller1.signal]
    )
    assert signal.aborted
    assert signal.reason == "reason 1"


@pytest.mark.parametrize("i", range(3))
def test_abortsignal_any_signals_are_composable(i: int) -> None:
    """WPT dom/abort/resources/abort-signal-any-tests.js:

    AbortSignal.any() signals are composable (using AbortController)
    """
    controllers = [AbortController() for _ in range(3)]
    combined1 = AbortSignal.any([controllers[0].signal, controllers[1].signal])
    combined2 = AbortSignal.any([combined1, controllers[2].signal])
    fired: list[int] = []
    combined2.onabort = recorder(fired, 1)
    controllers[i].abort()
    assert fired == [1]
    assert combined2.aborted
    assert isinstance(combined2.reason, AbortError)
    assert combined2.reason.name == "AbortError"
    # Aborting one source never aborts a sibling source.
    for j, other in enumerate(controllers):
        assert other.signal.aborted == (i == j)


def test_abortsignal_any_works_with_signals_returned_by_abortsignal_timeout() -> None:
    """WPT dom/abort/resources/abort-signal-any-tests.js:

    AbortSignal.any() works with signals returned by AbortSignal.timeout()
    """
    clock = VirtualClock()

    async def main() -> AbortSignal:
        loop = asyncio.get_running_loop()
        controller = AbortController()
        combined = AbortSignal.any([controller.signal, AbortSignal.timeout(5)])
        done: asyncio.Future[AbortSignal] = loop.create_future()
        guard = loop.call_later(0.010, done.set_exception, AssertionError("late"))
        combined.onabort = done.set_result
        assert await done is combined
        guard.cancel()
        assert not controller.signal.aborted
        return combined

    combined = run(main(), clock=clock)
    assert clock.time() == pytest.approx(0.005)
    assert isinstance(combined.reason, SignalTimeoutError)
    assert combined.reason.name == "TimeoutError"


def test_abortsignal_any_works_with_intermediate_signals() -> None:
    """WPT dom/abort/resources/abort-signal-any-tests.js:

    AbortSignal.any() works with intermediate signals
    """
    controller = AbortController()
    combined = AbortSignal.any([controller.signal])
    combined = AbortSignal.any([combined])
    combined = AbortSignal.any([combined])
    combined = AbortSignal.any([combined])
    fired: list[int] = []
    combined.onabort = recorder(fired, 1)
    assert fired == []
    assert not combined.aborted
    controller.abort("the reason")
    assert fired == [1]
    assert combined.aborted
    assert combined.reason == "the reason"


def test_abort_events_for_abortsignal_any_signals_fire_in_the_right_order() -> None:
    """WPT dom/abort/resources/abort-signal-any-tests.js:

    Abort events for AbortSignal.any() signals fire in the right order
    """
    controller = AbortController()
    signals = [controller.signal]
    signals.append(AbortSignal.any([controller.signal]))
    signals.append(AbortSignal.any([controller.signal]))
    signals.append(AbortSignal.any([signals[0]]))
    signals.append(AbortSignal.any([signals[1]]))  # flattened onto signals[0]
    result: list[int] = []
    for i, signal in enumerate(signals):
        signal.add_listener(recorder(result, i))
    controller.abort()
    assert result == [0, 1, 2, 3, 4]


def test_dependent_signals_are_marked_aborted_before_abort_events_fire() -> None:
    """WPT dom/abort/resources/abort-signal-any-tests.js:

    Dependent signals for AbortSignal.any() are marked aborted before abort events fire
    """
    controller = AbortController()
    signal1 = AbortSignal.any([controller.signal])
    signal2 = AbortSignal.any([signal1])
    fired: list[int] = []

    def check(_: AbortSignal) -> None:
        signal3 = AbortSignal.any([signal2])
        assert controller.signal.aborted
        assert signal1.aborted
        assert signal2.aborted
        assert signal3.aborted
        assert signal1.reason is signal2.reason is signal3.reason
        fired.append(1)

    controller.signal.add_listener(check)
    controller.abort()
    assert fired == [1], "event fired"


def test_dependent_signals_are_aborted_correctly_for_reentrant_aborts() -> None:
    """WPT dom/abort/resources/abort-signal-any-tests.js:

    Dependent signals for AbortSignal.any() are aborted correctly for reentrant aborts
    """
    controller1 = AbortController()
    controller2 = AbortController()
    signal = AbortSignal.any([controller1.signal, controller2.signal])
    count: list[int] = []
    controller1.signal.add_listener(lambda s: controller2.abort("reason 2"))
    signal.add_listener(recorder(count, 1))
    controller1.abort("reason 1")
    assert count == [1]
    assert signal.aborted
    assert signal.reason == "reason 1"
    assert controller2.signal.reason == "reason 2"


def test_dependents_use_the_same_reason_as_an_already_aborted_source() -> None:
    """WPT dom/abort/resources/abort-signal-any-tests.js:

    Dependent signals for AbortSignal.any() should use the same DOMException
    instance from the already aborted source signal
    """
    source = AbortSignal.abort()
    dependent = AbortSignal.any([source])
    assert isinstance(source.reason, AbortError)
    assert dependent.reason is source.reason


def test_dependents_use_the_same_reason_as_a_source_aborted_later() -> None:
    """WPT dom/abort/resources/abort-signal-any-tests.js:

    Dependent signals for AbortSignal.any() should use the same DOMException
    instance from the source signal being aborted later
    """
    controller = AbortController()
    source = controller.signal
    dependent = AbortSignal.any([source])
    nested = AbortSignal.any([dependent])
    controller.abort()
    assert isinstance(source.reason, AbortError)
    assert dependent.reason is source.reason
    assert nested.reason is source.reason


# --------------------------------------------------------------------------
# abort-signal-any-memory-tests.js (GC), with weakref instead of
# FinalizationRegistry
# --------------------------------------------------------------------------


def test_controllers_can_be_gced_when_their_signals_are_being_followed() -> None:
    """Blink wpt_internal dom/abort/resources/abort-signal-any-memory-tests.js:

    Controllers can be GCed when their signals are being followed
    """
    controller1 = AbortController()
    controller2 = AbortController()
    kept = [controller1.signal, controller2.signal]
    kept.append(AbortSignal.any(kept))
    refs = [weakref.ref(controller1), weakref.ref(controller2)]
    del controller1, controller2
    assert all(collected(r) for r in refs)
    assert not kept[2].aborted


def test_signals_can_be_gced_when_all_abort_sources_have_been_gced() -> None:
    """Blink wpt_internal dom/abort/resources/abort-signal-any-memory-tests.js:

    Signals can be GCed when all abort sources have been GCed
    """
    controller1 = AbortController()
    controller2 = AbortController()
    signal = AbortSignal.any([controller1.signal, controller2.signal])
    signal.onabort = lambda s: None  # listeners do not pin it once sources go
    refs: list[weakref.ref[Any]] = [
        weakref.ref(controller1),
        weakref.ref(controller2),
        weakref.ref(signal),
    ]
    del controller1, controller2, signal
    assert all(collected(r) for r in refs)


def test_signals_can_be_gced_when_they_have_no_references_or_event_listeners() -> None:
    """Blink wpt_internal dom/abort/resources/abort-signal-any-memory-tests.js:

    Signals can be GCed when they have no references or event listeners
    """
    controller = AbortController()
    signal1 = AbortSignal.any([controller.signal])
    signal2 = AbortSignal.any([signal1])
    assert controller.signal.dependent_count == 2
    refs = [weakref.ref(signal1), weakref.ref(signal2)]
    del signal1, signal2
    assert all(collected(r) for r in refs)
    assert not controller.signal.aborted
    assert controller.signal.dependent_count == 0
    assert controller.signal.listener_count == 0


def test_signals_can_be_gced_when_all_abort_event_listeners_have_been_removed() -> None:
    """Blink wpt_internal dom/abort/resources/abort-signal-any-memory-tests.js:

    Signals can be GCed when all abort event listeners have been removed
    """
    controller = AbortController()
    signal1 = AbortSignal.any([controller.signal])
    signal2 = AbortSignal.any([signal1])

    def callback1(_: AbortSignal) -> None: ...

    def callback2(_: AbortSignal) -> None: ...

    def churn(s: AbortSignal) -> None:
        s.add_listener(callback1)
        s.add_listener(callback2)
        s.onabort = callback1
        s.remove_listener(callback1)
        s.remove_listener(callback2)
        s.onabort = None

    churn(signal1)
    churn(signal2)
    refs = [weakref.ref(signal1), weakref.ref(signal2)]
    del signal1, signal2
    assert all(collected(r) for r in refs)
    assert controller.signal.dependent_count == 0


def test_signals_with_listeners_are_not_gced_before_controller_abort() -> None:
    """Blink wpt_internal dom/abort/resources/abort-signal-any-memory-tests.js:

    Signals are not GCed before being aborted by a controller when they have abort
    event listeners
    """
    controller = AbortController()
    fired: list[bool] = []
    signal = AbortSignal.any([controller.signal])
    signal.onabort = lambda s: fired.append(s.aborted)
    ref = weakref.ref(signal)
    del signal
    assert not collected(ref)
    controller.abort()
    assert fired == [True]
    assert collected(ref), "an aborted signal is no longer pinned by its source"


def test_composite_signals_with_listeners_are_not_gced_before_timeout() -> None:
    """Blink wpt_internal dom/abort/resources/abort-signal-any-memory-tests.js:

    Composite signals are not GCed before being aborted by timeout when they have
    abort event listeners
    """
    fired: list[bool] = []
    refs: list[weakref.ref[AbortSignal]] = []

    async def main() -> None:
        def setup() -> None:
            signal = AbortSignal.any([AbortSignal.timeout(20)])
            signal.onabort = lambda s: fired.append(True)
            refs.append(weakref.ref(signal))

        setup()
        assert not collected(refs[0])
        await asyncio.sleep(0.030)

    run(main())
    assert fired == [True]
    assert collected(refs[0])


def test_temporary_composite_signals_can_be_gced() -> None:
    """Blink wpt_internal dom/abort/resources/abort-signal-any-memory-tests.js:

    Temporary composite signals used for constructing other composite signals can be
    GCed
    """
    controller = AbortController()
    fired: list[bool] = []
    temp = AbortSignal.any([controller.signal])
    composite = AbortSignal.any([temp])
    composite.onabort = lambda s: fired.append(True)
    temp_ref, composite_ref = weakref.ref(temp), weakref.ref(composite)
    del temp, composite
    assert collected(temp_ref)
    assert not collected(composite_ref)
    assert fired == []
    controller.abort()
    assert fired == [True]
    assert collected(composite_ref)


def test_nested_and_intermediate_composite_signals_can_be_gced_when_expected() -> None:
    """Blink wpt_internal dom/abort/resources/abort-signal-any-memory-tests.js:

    Nested and intermediate composite signals can be GCed when expected
    """
    fired: list[bool] = []
    controller1 = AbortController()
    controller2 = AbortController()
    temps: list[weakref.ref[AbortSignal]] = []
    keep: list[weakref.ref[AbortSignal]] = []

    async def main() -> None:
        def setup() -> None:
            signal1 = AbortSignal.any([controller1.signal])
            signal2 = AbortSignal.any([controller2.signal])
            signal3 = AbortSignal.any([signal1, signal2])
            timeout_signal = AbortSignal.timeout(20)
            test_signal = AbortSignal.any([signal3, timeout_signal])
            test_signal.onabort = lambda s: fired.append(True)
            temps.extend(weakref.ref(s) for s in (signal1, signal2, signal3))
            keep.extend(weakref.ref(s) for s in (timeout_signal, test_signal))

        setup()
        assert all(collected(r) for r in temps)
        assert not any(collected(r) for r in keep)
        assert fired == []
        await asyncio.sleep(0.030)
        assert fired == [True]

    run(main())
    assert all(collected(r) for r in keep)


# --------------------------------------------------------------------------
# Beyond WPT: listener bookkeeping and leak counters
# --------------------------------------------------------------------------


def test_listener_count_tracks_add_remove_and_onabort() -> None:
    signal = AbortController().signal
    a = recorder([], "a")
    b = recorder([], "b")
    assert signal.listener_count == 0
    signal.add_listener(a)
    signal.add_listener(b, once=True)
    assert signal.listener_count == 2
    signal.onabort = a  # a handler is separate from a listener, even if equal
    assert signal.listener_count == 3
    signal.onabort = b
    assert signal.listener_count == 3
    signal.remove_listener(a)
    signal.remove_listener(a)  # idempotent
    signal.remove_listener(recorder([], "never added"))
    assert signal.listener_count == 2
    signal.onabort = None
    signal.onabort = None
    signal.remove_listener(b)
    assert signal.listener_count == 0


def test_adding_the_same_listener_twice_is_a_no_op() -> None:
    controller = AbortController()
    calls: list[int] = []
    listener = recorder(calls, 1)
    controller.signal.add_listener(listener)
    controller.signal.add_listener(listener)
    controller.signal.add_listener(listener, once=True)  # still the first one
    assert controller.signal.listener_count == 1
    controller.abort()
    assert calls == [1]
    assert controller.signal.listener_count == 1, "not once: still registered"


def test_bound_methods_are_deduplicated_and_removable() -> None:
    class Task:
        def __init__(self) -> None:
            self.cancelled = 0

        def cancel(self, _: AbortSignal) -> None:
            self.cancelled += 1

    controller = AbortController()
    task = Task()
    controller.signal.add_listener(task.cancel)
    controller.signal.add_listener(task.cancel)
    assert controller.signal.listener_count == 1
    other = Task()
    controller.signal.add_listener(other.cancel)
    assert controller.signal.listener_count == 2
    controller.signal.remove_listener(other.cancel)
    assert controller.signal.listener_count == 1
    controller.abort()
    assert (task.cancelled, other.cancelled) == (1, 0)


def test_unhashable_callables_are_deduplicated_and_removed_by_equality() -> None:
    class Callback:  # equal by name; __eq__ without __hash__ makes it unhashable
        def __init__(self, name: str, calls: list[str]) -> None:
            self.name, self.calls = name, calls

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Callback) and other.name == self.name

        def __call__(self, _: AbortSignal) -> None:
            self.calls.append(self.name)

    controller = AbortController()
    signal = controller.signal
    calls: list[str] = []
    signal.add_listener(Callback("a", calls))
    signal.add_listener(Callback("a", calls))  # an equal one: a no-op
    signal.add_listener(Callback("b", calls))
    signal.add_listener(Callback("c", calls), once=True)
    assert signal.listener_count == 3
    signal.remove_listener(Callback("b", calls))  # found by equality
    assert signal.listener_count == 2
    controller.abort()
    assert calls == ["a", "c"]
    assert signal.listener_count == 1, "the once listener is gone, the other stays"


def test_once_listener_is_removed_before_it_is_called() -> None:
    controller = AbortController()
    signal = controller.signal
    seen: list[int] = []
    signal.add_listener(lambda s: seen.append(s.listener_count), once=True)
    signal.add_listener(recorder([], "stays"))
    assert signal.listener_count == 2
    controller.abort()
    assert seen == [1]
    assert signal.listener_count == 1


def test_same_callable_as_listener_and_handler_runs_twice() -> None:
    controller = AbortController()
    calls: list[int] = []
    listener = recorder(calls, 1)
    controller.signal.add_listener(listener)
    controller.signal.onabort = listener
    controller.signal.remove_listener(listener)  # does not touch the handler
    assert controller.signal.listener_count == 1
    controller.signal.add_listener(listener)
    controller.abort()
    assert calls == [1, 1]


def test_dependents_are_not_listeners() -> None:
    controller = AbortController()
    dependents = [AbortSignal.any([controller.signal]) for _ in range(5)]
    assert controller.signal.listener_count == 0
    assert controller.signal.dependent_count == 5
    for d in dependents:
        d.add_listener(recorder([], "x"))
    assert controller.signal.listener_count == 0
    assert all(d.listener_count == 1 for d in dependents)


def test_any_flattens_so_dependents_never_have_dependents() -> None:
    controller1 = AbortController()
    controller2 = AbortController()
    inner = AbortSignal.any([controller1.signal, controller2.signal])
    outer = AbortSignal.any([inner])
    outer2 = AbortSignal.any([inner, outer, controller1.signal])
    empty = AbortSignal.any([])
    from_empty = AbortSignal.any([empty])
    assert inner.dependent_count == 0
    assert outer.dependent_count == 0
    assert empty.dependent_count == 0
    assert controller1.signal.dependent_count == 3
    assert controller2.signal.dependent_count == 3
    controller2.abort("two")
    assert inner.reason == outer.reason == outer2.reason == "two"
    assert not controller1.signal.aborted
    assert not from_empty.aborted


def test_aborted_dependents_are_unlinked_from_their_other_sources() -> None:
    long_lived = AbortController()
    calls = [AbortController() for _ in range(4)]
    dependents = [AbortSignal.any([long_lived.signal, c.signal]) for c in calls]
    assert long_lived.signal.dependent_count == 4
    calls[0].abort()
    calls[2].abort()
    assert [d.aborted for d in dependents] == [True, False, True, False]
    assert long_lived.signal.dependent_count == 2
    assert calls[0].signal.dependent_count == 0
    long_lived.abort("shutdown")
    assert long_lived.signal.dependent_count == 0
    assert [d.reason for d in dependents][1::2] == ["shutdown", "shutdown"]
    assert isinstance(dependents[0].reason, AbortError)


def test_an_aborted_dependent_does_not_keep_its_other_sources_alive() -> None:
    controller1 = AbortController()
    controller2 = AbortController()
    dependent = AbortSignal.any([controller1.signal, controller2.signal])
    dependent.add_listener(recorder([], "x"))
    controller1.abort()
    ref = weakref.ref(controller2.signal)
    del controller2
    assert collected(ref)
    assert dependent.aborted


def test_many_short_lived_dependents_do_not_grow_the_source() -> None:
    controller = AbortController()
    for _ in range(1000):
        AbortSignal.any([controller.signal]).add_listener(recorder([], "x"))
        # A dependent with listeners is pinned until its listeners go.
    assert controller.signal.dependent_count == 1000
    controller.abort()
    assert controller.signal.dependent_count == 0
    other = AbortController()
    for _ in range(1000):
        AbortSignal.any([other.signal])
    gc.collect()
    assert other.signal.dependent_count == 0
    assert other.signal.listener_count == 0


# --------------------------------------------------------------------------
# Beyond WPT: model-based check of abort propagation
# --------------------------------------------------------------------------


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[int, list[list[int]], list[int]]:
    """Roots, dependents built from earlier signals, and an abort order."""
    n_roots = draw(st.integers(1, 4))
    graph: list[list[int]] = []
    for k in range(draw(st.integers(0, 6))):
        pool = n_roots + k
        graph.append(draw(st.lists(st.integers(0, pool - 1), max_size=4)))
    order = draw(st.lists(st.integers(0, n_roots - 1), max_size=6))
    return n_roots, graph, order


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_abort_propagation_matches_a_reference_model(
    scenario: tuple[int, list[list[int]], list[int]],
) -> None:
    n_roots, graph, order = scenario
    controllers = [AbortController() for _ in range(n_roots)]
    signals: list[AbortSignal] = [c.signal for c in controllers]
    roots: list[set[int]] = [{i} for i in range(n_roots)]
    for parents in graph:
        signals.append(AbortSignal.any([signals[p] for p in parents]))
        roots.append(set().union(*(roots[p] for p in parents)))

    fired: list[int] = []
    aborted_roots: list[int] = []

    def watcher(index: int) -> Callable[[AbortSignal], None]:
        def listener(s: AbortSignal) -> None:
            # Every signal this abort reaches is already marked aborted.
            for j, other in enumerate(signals):
                assert other.aborted == bool(roots[j] & set(aborted_roots))
            fired.append(index)

        return listener

    for i, s in enumerate(signals):
        s.add_listener(watcher(i))

    for r in order:
        if r not in aborted_roots:
            aborted_roots.append(r)
        controllers[r].abort(f"reason {r}")

    assert len(fired) == len(set(fired)), "a signal fired twice"
    for j, s in enumerate(signals):
        hit = [r for r in aborted_roots if r in roots[j]]
        assert s.aborted == bool(hit)
        assert s.reason == (f"reason {hit[0]}" if hit else None)
        assert (j in fired) == bool(hit)
        if j < n_roots:
            live = [k for k in range(n_roots, len(signals)) if j in roots[k]]
            expected = sum(1 for k in live if not signals[k].aborted)
            assert s.dependent_count == (0 if s.aborted else expected)
