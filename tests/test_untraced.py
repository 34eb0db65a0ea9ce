"""The benchmark's registry without tracing code (bench/untraced.py) is built from the sources
as they are now.

Why these tests: "tracing off costs nothing measurable" is judged against that stripped registry,
so it must stay buildable from today's registry (the stripper refuses wiring it does not know,
and CI would otherwise learn of it only when someone runs the benchmark), keep no tracing code,
and still do what the shipped registry does.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from toolcancel import AbortController, ToolRegistry

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def untraced() -> Any:
    spec = importlib.util.spec_from_file_location("untraced", ROOT / "bench" / "untraced.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["untraced"] = module
    spec.loader.exec_module(module)
    return module


def test_todays_registry_strips_to_code_without_a_trace_sink(untraced: Any) -> None:
    sources = {name: path.read_text("utf-8") for name, path in untraced.SOURCES.items()}
    stripped = untraced.strip(sources)
    for name, text in stripped.source.items():  # no code names tracing (docstrings may)
        names = {
            n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else n.arg
            for n in ast.walk(ast.parse(text)) if isinstance(n, (ast.Name, ast.Attribute, ast.arg))
        }  # fmt: skip
        left = {n for n in names if ("trace" in n and "traceback" not in n) or "emit" in n}
        assert not left, (name, left)
    for what, least in untraced.EXPECTED.items():
        assert stripped.removed[what] >= least, what
    assert stripped.removed["trace-only module table"] == 1  # the line templates


def test_an_unknown_wiring_of_the_sink_is_refused(untraced: Any) -> None:
    sources = {name: path.read_text("utf-8") for name, path in untraced.SOURCES.items()}
    sources["driver"] += "\n\ndef leak(call):\n    return call.trace\n"
    with pytest.raises(untraced.StripError, match=r"survived: line \d+: \.trace"):
        untraced.strip(sources)


def test_the_stripped_registry_gives_the_shipped_registrys_results(untraced: Any) -> None:
    stripped = untraced.strip(
        {name: path.read_text("utf-8") for name, path in untraced.SOURCES.items()},
        suffix="_untraced_test",
    )
    face = untraced.run_interpreted(stripped, untraced.SOURCES, "_untraced_test")

    async def body(args: Any, view: Any) -> list[dict[str, str]]:
        if args.get("abort"):
            caller.abort("stop")
        return [{"type": "text", "text": "ok"}]

    async def around(view: Any, nxt: Any) -> Any:
        upstream = view.signal
        view.signal = AbortController().signal
        try:
            return await nxt()
        finally:
            view.signal = upstream

    results = []
    for factory in (ToolRegistry, face.ToolRegistry):
        for arguments in ({}, {"abort": True}):
            caller = AbortController()
            registry = factory()
            registry.register("t", body)
            registry.add_around(around)
            results.append(asyncio.run(registry.execute("t", arguments, signal=caller.signal)))
    shipped, stripped_results = results[:2], results[2:]
    assert [r.to_json() for r in shipped] == [r.to_json() for r in stripped_results]
    assert shipped[1].is_error  # the caller's abort during the body: ABORTED, not success
