"""Tests for ``toolcancel.deadline``: timing and classification, nothing else.

Every test runs on the autojumping virtual clock (conftest), so "100 ms later" is exact and free.
"""

from __future__ import annotations

import asyncio
import math

import pytest
from toolcancel import AbortController, AbortSignal, SignalTimeoutError
from toolcancel.runtime.deadline import Deadline, TimeoutReason, checked_hint, deadline, timeout_of


def live_timers() -> list[asyncio.TimerHandle]:
    """The running loop's scheduled, not-cancelled timer handles."""
    scheduled: list[asyncio.TimerHandle] = vars(asyncio.get_running_loop())["_scheduled"]
    return [h for h in scheduled if not h.cancelled()]


async def sleep_ms(ms: float) -> None:
    await asyncio.sleep(ms / 1000)


@pytest.mark.rules("R35")
async def test_bare_timer_fires_after_ms_with_typed_reason() -> None:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    d = deadline(None, 100, "TOOL_TIMEOUT")
    fired_at: list[float] = []
    d.signal.add_listener(lambda s: fired_at.append(loop.time()))
    assert d.armed and not d.signal.aborted
    await sleep_ms(99.999)
    assert not d.signal.aborted and not d.fired_by_own_timer
    await sleep_ms(0.002)
    assert d.signal.aborted and d.fired_by_own_timer and not d.armed
    assert fired_at == [pytest.approx(t0 + 0.1)]
    reason = d.signal.reason
    assert isinstance(reason, TimeoutReason)
    assert isinstance(reason, SignalTimeoutError) and isinstance(reason, TimeoutError)
    assert (reason.code, reason.ms, reason.deadline) == ("TOOL_TIMEOUT", 100, d)
    assert reason.deadline is d


@pytest.mark.rules("R35")
async def test_upstream_first_passes_on_the_same_reason_and_clears_the_timer() -> None:
    c = AbortController()
    before = c.signal.listener_count
    timers_before = len(live_timers())
    d = deadline(c.signal, 100, "TOOL_TIMEOUT")
    assert c.signal.listener_count == before + 1
    assert len(live_timers()) == timers_before + 1
    await sleep_ms(50)
    why = RuntimeError("user pressed stop")
    c.abort(why)
    assert d.signal.aborted and d.signal.reason is why
    assert not d.fired_by_own_timer and not d.armed
    assert c.signal.listener_count == before
    assert len(live_timers()) == timers_before
    await sleep_ms(500)  # the cleared timer never fires late
    assert d.signal.reason is why and not d.fired_by_own_timer
    assert timeout_of(d.signal) is None


@pytest.mark.rules("R35")
async def test_timer_first_keeps_its_reason_after_a_later_upstream_abort() -> None:
    c = AbortController()
    before = c.signal.listener_count
    d = deadline(c.signal, 10, "X")
    await sleep_ms(10)
    assert d.fired_by_own_timer
    reason = d.signal.reason
    assert c.signal.listener_count == before  # unhooked as soon as the timer fired
    c.abort(RuntimeError("late"))
    assert d.signal.reason is reason and d.fired_by_own_timer


@pytest.mark.rules("R35")
async def test_already_aborted_upstream_gives_a_born_aborted_signal_without_timer() -> None:
    why = RuntimeError("gone")
    upstream = AbortSignal.abort(why)
    timers_before = len(live_timers())
    d = deadline(upstream, 100, "TOOL_TIMEOUT")
    assert d.signal.aborted and d.signal.reason is why
    assert d.signal is not upstream
    assert not d.armed and not d.fired_by_own_timer
    assert len(live_timers()) == timers_before
    assert upstream.listener_count == 0


@pytest.mark.rules("R35")
@pytest.mark.parametrize("ms", [0, -1, -0.5])
async def test_non_positive_ms_is_the_no_timer_sentinel(ms: float) -> None:
    c = AbortController()
    timers_before = len(live_timers())
    d = deadline(c.signal, ms, "TOOL_TIMEOUT")
    assert d.signal is c.signal
    assert not d.armed and len(live_timers()) == timers_before
    assert c.signal.listener_count == 0
    bare = deadline(None, ms, "TOOL_TIMEOUT")
    assert isinstance(bare.signal, AbortSignal)
    await sleep_ms(10_000_000)
    assert not bare.signal.aborted and not d.signal.aborted
    bare.dispose()
    d.dispose()
    assert not c.signal.aborted  # disposing the sentinel leaves the upstream alone


@pytest.mark.rules("R35")
async def test_dispose_clears_timer_and_listener_idempotently_without_aborting() -> None:
    c = AbortController()
    timers_before = len(live_timers())
    d = deadline(c.signal, 100, "TOOL_TIMEOUT")
    d.dispose()
    assert not d.armed and c.signal.listener_count == 0
    assert len(live_timers()) == timers_before
    d.dispose()
    assert not d.signal.aborted
    await sleep_ms(1000)
    assert not d.signal.aborted and not d.fired_by_own_timer
    c.abort()
    assert not d.signal.aborted  # no longer follows the upstream


@pytest.mark.rules("R35")
async def test_dispose_after_firing_keeps_the_reason() -> None:
    d = deadline(None, 1, "X")
    await sleep_ms(1)
    reason = d.signal.reason
    d.dispose()
    d.dispose()
    assert d.signal.reason is reason and d.fired_by_own_timer


@pytest.mark.rules("R35")
async def test_timeout_of_matches_by_code_and_only_timeout_reasons() -> None:
    d = deadline(None, 5, "TOOL_TIMEOUT")
    assert timeout_of(d.signal) is None  # live
    await sleep_ms(5)
    reason = d.signal.reason
    assert timeout_of(d.signal) is reason
    assert timeout_of(d.signal, "TOOL_TIMEOUT") is reason
    assert timeout_of(d.signal, "STEP_TIMEOUT") is None
    assert timeout_of(reason, "TOOL_TIMEOUT") is reason  # a reason works as well as a signal
    assert timeout_of(reason, "OTHER") is None
    assert timeout_of(RuntimeError("x")) is None
    assert timeout_of(AbortSignal.abort()) is None
    assert timeout_of(None) is None
    plain = AbortSignal.timeout(1)
    await sleep_ms(1)
    assert plain.aborted and timeout_of(plain) is None  # a DOM timeout carries no code


@pytest.mark.rules("R35")
async def test_foreign_coded_outer_deadline_reads_as_ordinary_cancellation() -> None:
    outer = deadline(None, 10, "STEP_TIMEOUT")
    inner = deadline(outer.signal, 100, "TOOL_TIMEOUT")
    await sleep_ms(10)
    assert inner.signal.reason is outer.signal.reason
    assert timeout_of(inner.signal, "TOOL_TIMEOUT") is None
    assert not inner.fired_by_own_timer and not inner.armed


@pytest.mark.rules("R35")
async def test_same_coded_outer_expiry_is_told_apart_by_identity() -> None:
    """D13: code classification would call the outer expiry the inner call's own timeout."""
    outer = deadline(None, 10, "TOOL_TIMEOUT")
    inner = deadline(outer.signal, 100, "TOOL_TIMEOUT")
    await sleep_ms(10)
    by_code = timeout_of(inner.signal, "TOOL_TIMEOUT")
    assert by_code is not None and by_code.deadline is outer and by_code.ms == 10
    assert not inner.fired_by_own_timer
    assert outer.fired_by_own_timer


@pytest.mark.rules("R35")
@pytest.mark.parametrize("ms", [math.nan, math.inf, -math.inf, True, "5", None])
def test_deadline_refuses_non_numbers_and_non_finite(ms: object) -> None:
    with pytest.raises(ValueError, match="finite number"):
        deadline(None, ms, "X")  # type: ignore[arg-type]


@pytest.mark.rules("R35")
@pytest.mark.parametrize("hint", [1, 0.5, 1e9])
def test_checked_hint_accepts_positive_finite(hint: float) -> None:
    assert checked_hint(hint) == hint
    assert isinstance(checked_hint(hint), float)


@pytest.mark.rules("R35")
@pytest.mark.parametrize("hint", [0, -1, -0.0, math.inf, math.nan, True, False, "100", None])
def test_checked_hint_refuses_everything_else(hint: object) -> None:
    with pytest.raises(ValueError, match="positive finite"):
        checked_hint(hint, "retry budget")


@pytest.mark.rules("R35")
def test_a_timer_needs_a_running_loop_but_the_sentinels_do_not() -> None:
    assert isinstance(deadline(None, 0, "X"), Deadline)
    assert deadline(AbortSignal.abort(), 5, "X").signal.aborted
    with pytest.raises(RuntimeError):
        deadline(None, 5, "X")
