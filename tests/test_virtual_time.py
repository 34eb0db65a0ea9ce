"""Tests for ``toolcancel.runtime.virtual_time``: asyncio on an autojumping clock.

Every test runs under ``no_real_waits`` (tests/conftest.py): an event loop about to block on
the real clock fails the test at once, so an implementation that falls back to the wall clock
fails instead of hanging -- by structure, the same on an idle or a loaded machine.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from typing import cast

import pytest
from toolcancel.runtime.eventloop import clock_and_timers
from toolcancel.runtime.virtual_time import VirtualClock, run

pytestmark = pytest.mark.usefixtures("no_real_waits")


def test_an_hour_of_sleep_takes_no_real_time() -> None:
    clock = VirtualClock()

    async def main() -> float:
        await asyncio.sleep(3600)
        return asyncio.get_running_loop().time()

    assert run(main(), clock=clock) == 3600.0
    assert clock.time() == 3600.0


def test_sleep_longer_than_the_loops_maximum_select_timeout() -> None:
    # asyncio caps one wait at 24h; longer sleeps take several jumps.
    clock = VirtualClock(start=5.0)
    run(asyncio.sleep(10 * 24 * 3600), clock=clock)
    assert clock.time() == pytest.approx(5.0 + 10 * 24 * 3600)


def test_call_later_ordering_and_times_are_preserved() -> None:
    clock = VirtualClock()
    fired: list[tuple[str, float]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def record(name: str) -> None:
            fired.append((name, loop.time()))

        loop.call_later(3, record, "c")
        loop.call_later(1, record, "a")
        loop.call_at(2.5, record, "b")
        loop.call_later(0.5, record, "first")
        cancelled = loop.call_later(1.5, record, "cancelled")
        cancelled.cancel()
        loop.call_later(4, done.set_result, None)
        await done

    run(main(), clock=clock)
    assert fired == [("first", 0.5), ("a", 1.0), ("b", 2.5), ("c", 3.0)]
    assert clock.time() == 4.0


def test_asyncio_timeout_expires_at_the_virtual_deadline() -> None:
    clock = VirtualClock()

    async def main() -> None:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(10):
                await asyncio.sleep(3600)
        assert asyncio.get_running_loop().time() == 10.0

    run(main(), clock=clock)
    assert clock.time() == 10.0


def test_asyncio_timeout_does_not_fire_when_the_body_finishes_first() -> None:
    clock = VirtualClock()

    async def main() -> str:
        async with asyncio.timeout(10):
            await asyncio.sleep(9.5)
        # And wait_for follows the same clock.
        return await asyncio.wait_for(asyncio.sleep(1, result="ok"), timeout=2)

    assert run(main(), clock=clock) == "ok"
    assert clock.time() == 10.5


def test_ready_callbacks_run_before_time_jumps() -> None:
    clock = VirtualClock()
    fired: list[tuple[str, float]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        done = asyncio.Event()

        def late() -> None:
            fired.append(("late", loop.time()))
            done.set()

        loop.call_later(100, late)
        loop.call_soon(lambda: fired.append(("soon", loop.time())))
        await done.wait()

    run(main(), clock=clock)
    assert fired == [("soon", 0.0), ("late", 100.0)]


def test_ready_io_is_not_delayed_by_a_pending_timer() -> None:
    clock = VirtualClock()

    async def main() -> tuple[bytes, float]:
        loop = asyncio.get_running_loop()
        timer = loop.call_later(100, lambda: None)
        a, b = socket.socketpair()
        with a, b:
            a.setblocking(False)
            b.setblocking(False)
            got: asyncio.Future[tuple[bytes, float]] = loop.create_future()

            def on_readable() -> None:
                got.set_result((b.recv(16), loop.time()))

            loop.add_reader(b.fileno(), on_readable)
            try:
                a.send(b"ping")
                return await got
            finally:
                loop.remove_reader(b.fileno())
                timer.cancel()

    assert run(main(), clock=clock) == (b"ping", 0.0)
    assert clock.time() == 0.0


@pytest.mark.real_io
def test_with_no_timers_the_loop_still_waits_for_real_io() -> None:
    # Nothing scheduled: the loop must block in the real selector until the
    # worker thread / child process wakes it, not spin or jump.
    clock = VirtualClock()

    async def main() -> tuple[int, bytes]:
        loop = asyncio.get_running_loop()
        value = await loop.run_in_executor(None, sum, range(1000))
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "print('hi')",
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await proc.communicate()
        return value, out

    assert run(main(), clock=clock) == (499500, b"hi\n")
    assert clock.time() == 0.0


def test_manual_advance_makes_timers_due_without_jumping() -> None:
    clock = VirtualClock()

    async def main() -> float:
        loop = asyncio.get_running_loop()
        due: asyncio.Future[float] = loop.create_future()
        loop.call_later(5, lambda: due.set_result(loop.time()))
        clock.advance(7)
        return await due

    # Fired at 7, where it was found due, not jumped to at 5.
    assert run(main(), clock=clock) == 7.0


def test_advance_rejects_negative_and_non_finite() -> None:
    clock = VirtualClock(start=1.0)
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            clock.advance(bad)
    assert clock.time() == 1.0
    clock.advance(0)
    clock.advance(2.5)
    assert clock.time() == 3.5
    with pytest.raises(ValueError):
        VirtualClock(start=float("nan"))
    with pytest.raises(ValueError):
        VirtualClock(autojump_threshold=-1)


def test_run_starts_at_the_clock_start_and_closes_the_loop() -> None:
    clock = VirtualClock(start=1000.0)
    loops: list[asyncio.AbstractEventLoop] = []

    async def main() -> float:
        loops.append(asyncio.get_running_loop())
        return asyncio.get_running_loop().time()

    assert run(main(), clock=clock) == 1000.0
    assert loops[0].is_closed()


def test_run_propagates_exceptions() -> None:
    async def main() -> None:
        await asyncio.sleep(1)
        raise KeyError("boom")

    with pytest.raises(KeyError):
        run(main())


def test_tasks_cancelled_at_shutdown_still_use_virtual_time() -> None:
    clock = VirtualClock()
    cleanup: list[float] = []

    async def worker() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(60)
            cleanup.append(asyncio.get_running_loop().time())

    async def main() -> None:
        asyncio.get_running_loop().create_task(worker())
        await asyncio.sleep(1)

    run(main(), clock=clock)
    assert cleanup == [61.0]


def test_patch_loop_restores_the_loop_on_exit() -> None:
    loop = asyncio.new_event_loop()
    try:
        selector = loop._selector  # type: ignore[attr-defined]
        clock = VirtualClock(start=-50.0)
        with clock.patch_loop(loop):
            assert loop.time() == -50.0
            assert loop.run_until_complete(asyncio.sleep(30, result=1)) == 1
            assert loop.time() == -20.0
        assert "time" not in vars(loop)
        assert "select" not in vars(selector)
        assert abs(loop.time() - time.monotonic()) < 60
    finally:
        loop.close()


def test_patch_loop_defaults_to_the_running_loop() -> None:
    async def main() -> float:
        clock = VirtualClock(start=42.0)
        loop = asyncio.get_running_loop()
        with clock.patch_loop():
            assert loop.time() == 42.0
            await asyncio.sleep(8)
            return loop.time()

    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(main()) == 50.0
    finally:
        loop.close()


def test_a_call_takes_the_loops_own_clock_or_monotonic_when_that_is_all_it_is() -> None:
    """What a call reads its time in state from (eventloop.clock_and_timers): asyncio's own
    ``time()`` is ``time.monotonic``, read directly; a virtual clock set on the loop or a loop
    class with a ``time()`` of its own is asked itself."""

    class Shifted(asyncio.SelectorEventLoop):
        def time(self) -> float:
            return 1000.0

    async def taken() -> tuple[object, float]:
        clock, _ = clock_and_timers()
        return clock, clock()

    for make in (asyncio.new_event_loop, Shifted):
        loop = make()
        try:
            clock, now = loop.run_until_complete(taken())
            if make is Shifted:
                assert now == 1000.0
            else:
                assert clock is time.monotonic
            with VirtualClock(start=7.0).patch_loop(loop):
                assert loop.run_until_complete(taken())[1] == 7.0
        finally:
            loop.close()


def test_patch_loop_refuses_a_loop_without_a_selector() -> None:
    not_a_selector_loop = cast("asyncio.AbstractEventLoop", object())
    with pytest.raises(TypeError), VirtualClock().patch_loop(not_a_selector_loop):
        pass


def test_idle_is_done_when_every_task_is_blocked_and_time_has_not_moved() -> None:
    clock = VirtualClock()
    log: list[str] = []

    async def worker(gate: asyncio.Event) -> None:
        for i in range(5):
            log.append(f"step {i}")
            await asyncio.sleep(0)
        await gate.wait()  # blocked from here on
        log.append("released")

    async def main() -> None:
        assert VirtualClock.of(asyncio.get_running_loop()) is clock
        gate = asyncio.Event()
        timer = asyncio.get_running_loop().call_later(5.0, log.append, "timer")
        task = asyncio.ensure_future(worker(gate))
        await clock.idle()
        assert log == [f"step {i}" for i in range(5)] and clock.time() == 0.0
        gate.set()
        await clock.idle()
        assert log[-1] == "released" and task.done() and clock.time() == 0.0
        timer.cancel()

    run(main(), clock=clock)


def test_idle_reports_a_loop_that_never_waits_as_a_livelock() -> None:
    clock = VirtualClock()

    async def spin() -> None:
        while True:
            await asyncio.sleep(0)

    async def main() -> None:
        task = asyncio.ensure_future(spin())
        with pytest.raises(RuntimeError, match="livelock"):
            await clock.idle()
        task.cancel()

    run(main(), clock=clock)


def test_a_loop_on_the_real_clock_fails_the_test_at_once() -> None:
    # The guard every test here runs under: a real wait is refused, not timed.
    from conftest import WallClockWait

    with pytest.raises(WallClockWait, match="about to wait on the real clock"):
        asyncio.run(asyncio.sleep(3600))


def test_io_ready_while_work_is_ready_runs_before_idleness() -> None:
    """A turn with work ready does not poll I/O while someone waits for idleness (a system call
    per turn of the model checker's loop), but I/O that became ready meanwhile still runs before
    the loop is called idle."""
    clock = VirtualClock()
    log: list[str] = []

    async def busy() -> None:
        for i in range(3):
            log.append(f"step {i}")
            await asyncio.sleep(0)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        a, b = socket.socketpair()
        with a, b:
            b.setblocking(False)
            loop.add_reader(b.fileno(), lambda: log.append(f"read {b.recv(16)!r}"))
            try:
                a.send(b"ping")  # ready before the busy turns begin
                task = asyncio.ensure_future(busy())
                await clock.idle()
                assert task.done() and "read b'ping'" in log, log
            finally:
                loop.remove_reader(b.fileno())

    run(main(), clock=clock)
    assert clock.time() == 0.0
