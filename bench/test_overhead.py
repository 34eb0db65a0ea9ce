"""The benchmark's call shapes, and tracing off against tracing stripped out (pytest-benchmark).

``plain`` and ``hooked`` are the two shapes every per-call figure is taken on (``per_call.py``
times them, interleaved, against a bare task and through the minimal pipeline; ``accounting.py``
splits them item by item).

``test_tracing_off`` compares the registry as shipped, with ``trace=None``, against the same
registry with every line of tracing code removed (``untraced.py`` builds it from the registry's
modules when the first of those tests runs).  Shipped and stripped alternate, several
repetitions of each, so that drift on a noisy machine falls on both; ``bench/run.py`` reports
the ratio of each adjacent pair.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest
import untraced
from toolcancel import AbortController, Accept, ToolRegistry

BATCH = 2000
TRACING_OFF_REPEATS = int(os.environ.get("TOOLCANCEL_BENCH_TRACING_REPEATS", "6"))



@functools.cache
def stripped() -> tuple[Any, Any]:
    """The registry without tracing code and what was cut (built once, by the first test that
    needs it: the per-call tests alone, ``-k "not tracing_off"``, never build it)."""
    return untraced.load()



async def body(args: Any, call: Any) -> list[dict[str, str]]:
    return [{"type": "text", "text": "ok"}]


def plain(factory: Callable[..., Any] = ToolRegistry, **options: Any) -> Any:
    reg = factory(**options)
    reg.register("t", body)
    return reg


def hooked(factory: Callable[..., Any] = ToolRegistry, **options: Any) -> Any:
    """One pre-execute hook, one around wrapper that replaces the signal, one post-execute
    hook and one observer: the issue's second shape."""
    reg = factory(**options)
    reg.register("t", body)

    async def pre(view: Any, nxt: Callable[[], Any]) -> Any:
        return await nxt()

    async def around(view: Any, nxt: Callable[[], Any]) -> Any:
        upstream = view.signal
        view.signal = AbortController().signal
        try:
            return await nxt()
        finally:
            view.signal = upstream

    async def post(view: Any, result: Any, nxt: Callable[[], Any]) -> Any:
        return Accept()

    reg.add_pre_execute(pre)
    reg.add_around(around)
    reg.add_post_execute(post)
    reg.add_observer(lambda view, result: None)
    return reg


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def bench(benchmark: Any, loop: asyncio.AbstractEventLoop,
          batch: Callable[[], Coroutine[Any, Any, None]]) -> None:
    benchmark.extra_info["batch"] = BATCH
    benchmark.pedantic(lambda: loop.run_until_complete(batch()), rounds=15, warmup_rounds=2)


@pytest.mark.benchmark(group="tracing_off")
@pytest.mark.parametrize(
    ("shape", "rep", "variant"),
    [
        (shape, rep, variant)
        for shape in ("plain", "hooked")
        for rep in range(TRACING_OFF_REPEATS)
        for variant in ("shipped", "stripped")
    ],
)
def test_tracing_off(
    benchmark: Any, loop: asyncio.AbstractEventLoop, shape: str, rep: int, variant: str
) -> None:
    module, cut = stripped()
    factory = ToolRegistry if variant == "shipped" else module.ToolRegistry
    reg = plain(factory) if shape == "plain" else hooked(factory)
    signal = AbortController().signal

    async def batch() -> None:
        for _ in range(BATCH):
            await reg.execute("t", {"q": 1}, signal=signal)

    benchmark.extra_info.update(shape=shape, rep=rep, variant=variant,
                                stripped=cut.summary())
    bench(benchmark, loop, batch)
    # Both registries must have taken the same, successful path (not a timing assertion).
    result = loop.run_until_complete(reg.execute("t", {"q": 1}, signal=signal))
    assert not result.is_error, result.to_json()
