"""Helpers for the rule tests: gates that order a race, and a recording harness.

Why gates: every interesting case of the contract is a race -- the caller aborts *while* a
pre-execute listener waits, *after* the body started, *between* the body settling and the wrapper
returning.  A test makes the race happen in one chosen order: a hook stops at a :class:`Gate`,
the test waits until the gate is reached, does its move (usually aborting the caller), then opens
the gate.  Nothing depends on how long anything takes.

Why a harness: most assertions need the same evidence -- which stages ran in which order, whether
the body started, which signal it saw, the path the call's machine took, and the single
notification the call published.  :class:`Harness` records all of it around a real
:class:`~toolcancel.ToolRegistry`, and checks on every call that exactly one notification was
published and that it carried the very object ``execute()`` returned (R31), so no test can
forget to.

Expected results are written as canonical JSON built here with the standard library, not with
the implementation's own serializer, so a test compares against the contract's bytes.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import anyio
from toolcancel import (
    AbortController,
    AbortSignal,
    Execution,
    PathStep,
    ToolRegistry,
    ToolResult,
)

Next = Callable[[], Awaitable[Any]]
"""The ``next()`` thunk a waterfall listener receives."""

ROOT = Path(__file__).resolve().parent.parent
"""The source checkout the tests run in."""


def mutants() -> Any:
    """The deliberately broken registries (``toolcancel.selfcheck.mutants``), imported on
    first use: importing them loads the registry."""
    return importlib.import_module("toolcancel.selfcheck.mutants")


def mutant(name: str) -> Any:
    """The registry mutant of ``machine/selfcheck/mutants.py`` called ``name``."""
    return next(m for m in mutants().MUTANTS if m.name == name)

# ------------------------------------------------------------------------------------------------
# Expected results, in canonical JSON
# ------------------------------------------------------------------------------------------------


def canon(data: Any) -> str:
    """Canonical JSON as the contract defines it: sorted keys, no whitespace, UTF-8 as is."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def text(s: str) -> dict[str, str]:
    """One text content block."""
    return {"type": "text", "text": s}


def expected(
    message: str,
    *,
    is_error: bool = True,
    error: dict[str, Any] | None = None,
    contexts: Sequence[Any] = (),
    meta: Any = None,
) -> str:
    """The canonical JSON of a one-text-block result, with absent keys omitted (R1)."""
    data: dict[str, Any] = {"content": [text(message)], "isError": is_error}
    if error is not None:
        data["error"] = error
    if contexts:
        data["additionalContexts"] = list(contexts)
    if meta is not None:
        data["meta"] = meta
    return canon(data)


def ok(message: str = "ok", **kwargs: Any) -> str:
    """The canonical JSON of a one-text-block success."""
    return expected(message, is_error=False, **kwargs)


ABORTED_ERROR = {"name": "AbortError", "code": "ABORTED"}


def aborted(contexts: Sequence[Any] = ()) -> str:
    """The canonical seed ABORTED (R4), optionally carrying contexts."""
    return expected("Error: tool call aborted", error=ABORTED_ERROR, contexts=contexts)


# ------------------------------------------------------------------------------------------------
# Gates and idleness
# ------------------------------------------------------------------------------------------------


class Gate:
    """A point where a hook or body stops until the test opens it.

    ``await gate.passage()`` inside the hook marks the gate reached and waits; the test does
    ``await gate.reached()``, makes its move, then ``gate.open()``.
    """

    def __init__(self, name: str = "gate") -> None:
        self.name = name
        self._reached = anyio.Event()
        self._opened = anyio.Event()
        self.passed = False

    async def passage(self) -> None:
        self._reached.set()
        await self._opened.wait()
        self.passed = True

    async def reached(self) -> None:
        await self._reached.wait()

    @property
    def is_reached(self) -> bool:
        return self._reached.is_set()

    def open(self) -> None:
        self._opened.set()

    def __repr__(self) -> str:
        return f"<Gate {self.name} reached={self.is_reached} passed={self.passed}>"


async def until_idle() -> None:
    """Return once every other task is blocked on something (a gate, a future).

    The tests run on an autojumping virtual clock (see ``conftest.py``): virtual time moves only
    when the event loop has nothing ready to run.  So a virtual-time wait returns exactly when all
    other tasks are stuck -- the moment to assert that a call has *not* settled.  It costs no real
    time and gives the same answer on every run.
    """
    await anyio.sleep(1.0)


async def yield_to_others() -> None:
    """Let every task that is ready run once before going on (one trip round the event loop).

    Hooks use it to give concurrent calls a chance to interleave at a known point, without any
    notion of time.
    """
    if asyncio._get_running_loop() is None:  # trio: a checkpoint is one trip round the loop
        await anyio.lowlevel.checkpoint()
        return
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()
    loop.call_soon(future.set_result, None)
    await future


T = TypeVar("T")

NURSERY: contextvars.ContextVar[Any] = contextvars.ContextVar("NURSERY")
"""The trio nursery of the running test (conftest.py opens it): where :func:`spawn` starts tasks."""


class TrioTask(Generic[T]):
    """What :func:`spawn` returns on trio: asyncio's task, as far as the tests use one."""

    def __init__(self, work: Awaitable[T]) -> None:
        self._done = anyio.Event()
        self._result: T | None = None
        self._error: BaseException | None = None
        NURSERY.get().start_soon(self._run, work)

    async def _run(self, work: Awaitable[T]) -> None:
        try:
            self._result = await work
        except Exception as exc:  # handed to whoever awaits the task, as asyncio does
            self._error = exc
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def __await__(self) -> Generator[Any, None, T]:
        yield from self._done.wait().__await__()
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]


def spawn(work: Awaitable[T]) -> asyncio.Task[T] | TrioTask[T]:
    """Run ``work`` as a task of its own, on whichever loop the test runs (see conftest.py)."""
    if asyncio._get_running_loop() is None:
        return TrioTask(work)
    return asyncio.ensure_future(work)


# ------------------------------------------------------------------------------------------------
# A recording tool body
# ------------------------------------------------------------------------------------------------


class Body:
    """A tool body that records what the registry handed it.

    ``returns`` is what it returns (default: one ``ok`` text block); ``raises`` is thrown instead;
    ``gate`` makes it wait; ``defer`` lists contexts it defers before waiting; ``on_start`` runs
    synchronously when it starts (to abort something at exactly that moment).
    """

    def __init__(
        self,
        returns: Any = None,
        *,
        raises: BaseException | None = None,
        gate: Gate | None = None,
        defer: Iterable[Any] = (),
        on_start: Callable[[Execution], None] | None = None,
        log: list[str] | None = None,
        label: str = "body",
    ) -> None:
        self.returns = [text("ok")] if returns is None else returns
        self.raises = raises
        self.gate = gate
        self.defer = tuple(defer)
        self.on_start = on_start
        self.log = log
        self.label = label
        self.calls = 0
        self.finished = 0
        self.signals: list[AbortSignal | None] = []
        self.call_signals: list[AbortSignal | None] = []  # C, the call signal (Python binding)
        self.arguments: list[Any] = []
        self.aborted_at_settle: list[bool] = []

    @property
    def started(self) -> bool:
        return self.calls > 0

    @property
    def signal(self) -> AbortSignal | None:
        """The signal the (only) invocation saw."""
        assert self.calls == 1, f"the body ran {self.calls} times"
        return self.signals[0]

    @property
    def call_signal(self) -> AbortSignal | None:
        """The call's signal C during the (only) invocation."""
        assert self.calls == 1, f"the body ran {self.calls} times"
        return self.call_signals[0]

    async def __call__(self, arguments: Any, view: Execution) -> Any:
        self.calls += 1
        self.signals.append(view.signal)
        self.call_signals.append(view.call_signal)
        self.arguments.append(arguments)
        if self.log is not None:
            self.log.append(self.label)
        if self.on_start is not None:
            self.on_start(view)
        for context in self.defer:
            view.defer_context(context)
        if self.gate is not None:
            await self.gate.passage()
        signal = view.signal
        self.aborted_at_settle.append(signal is not None and signal.aborted)
        self.finished += 1
        if self.raises is not None:
            raise self.raises
        return self.returns


# ------------------------------------------------------------------------------------------------
# The harness
# ------------------------------------------------------------------------------------------------


@dataclass
class Notified:
    """One notification: the execution view and the result object an observer received."""

    view: Execution
    result: ToolResult


@dataclass
class Call:
    """A finished call: its result, the view its notification carried, and the path taken."""

    result: ToolResult
    view: Execution
    path: tuple[PathStep, ...] = field(default=())

    @property
    def json(self) -> str:
        return self.result.to_json()

    def events(self) -> list[str]:
        """The events the machine was offered, in order."""
        return [p.event for p in self.path]

    def states(self) -> list[str]:
        """The states the call went through (the first source, then every destination)."""
        return [self.path[0].source, *[p.dest for p in self.path]]

    def step(self, event: str, nth: int = 0) -> PathStep:
        """The ``nth`` step that handled ``event``."""
        found = [p for p in self.path if p.event == event]
        assert len(found) > nth, f"no step #{nth} for {event!r} in {self.events()}"
        return found[nth]

    def outcomes(self) -> list[str | None]:
        """The outcome the call held after each step."""
        return [p.outcome for p in self.path]


class Harness:
    """A registry plus a log of what ran and every notification it published."""

    def __init__(self, revision: str = "seed") -> None:
        self.registry = ToolRegistry(revision=revision)
        self.log: list[str] = []
        self.notified: list[Notified] = []
        self.registry.add_observer(self._observe)

    def _observe(self, view: Execution, result: ToolResult) -> None:
        self.notified.append(Notified(view, result))
        self.log.append("notify")

    # -- building blocks -------------------------------------------------------------------

    def body(self, name: str = "t", *args: Any, **kwargs: Any) -> Body:
        """Register a recording body under ``name`` (it logs ``body`` into the harness log)."""
        kwargs.setdefault("log", self.log)
        b = Body(*args, **kwargs)
        self.registry.register(name, b)
        return b

    def pre(self, decide: Callable[[Execution], Awaitable[Any]], label: str = "pre") -> None:
        """A pre-execute listener that logs, awaits ``decide(view)`` and returns its decision."""

        async def hook(view: Execution, next_: Next) -> Any:
            self.log.append(label)
            return await decide(view)

        self.registry.add_pre_execute(hook)

    def post(self, decide: Callable[[Execution, ToolResult], Awaitable[Any]]) -> None:
        """A post-execute listener that logs, awaits ``decide(view, result)`` and returns it."""

        async def hook(view: Execution, result: ToolResult, next_: Next) -> Any:
            self.log.append("post")
            return await decide(view, result)

        self.registry.add_post_execute(hook)

    # -- running calls ---------------------------------------------------------------------

    def start(
        self, name: str = "t", arguments: Any = None, **kwargs: Any
    ) -> asyncio.Task[Call] | TrioTask[Call]:
        """Start a call as a task (to race it with the test's own moves)."""
        return spawn(self.call(name, arguments, **kwargs))

    async def call(self, name: str = "t", arguments: Any = None, **kwargs: Any) -> Call:
        """Run one call; check it published exactly one notification with the returned object.

        Without ``signal=`` the call has no caller signal (``signal=None``, R26), as the rule
        tests mean it; a call left to make its own is tested in test_rules_task_cancellation."""
        kwargs.setdefault("signal", None)
        result = await self.registry.execute(name, arguments, **kwargs)
        mine = [n for n in self.notified if n.result is result]
        assert len(mine) == 1, (
            f"observers must get the very object execute() returned, once; got it {len(mine)} times"
        )
        view = mine[0].view
        count = sum(n.view is view for n in self.notified)
        assert count == 1, f"the call published {count} notifications, not exactly one"
        return Call(result, view, view.path)


def passing_guard(log: list[Any], entry: Any = "guard") -> Callable[[Execution], None]:
    """A guard that records that it ran (appends ``entry`` to ``log``) and never denies."""

    def guard(view: Execution) -> None:
        log.append(entry)

    return guard


def controller() -> tuple[AbortController, AbortSignal]:
    """A fresh caller controller and its signal."""
    c = AbortController()
    return c, c.signal


# ------------------------------------------------------------------------------------------------
# Running ``toolcancel conform`` from a test
# ------------------------------------------------------------------------------------------------


def shipped_vectors(revision: str) -> list[Any]:
    """``toolcancel.oracle.vectors.shipped_vectors``, read once per test process (and again only
    if the file changes): dozens of tests read the committed vectors, a second or so each time.
    Vectors are frozen; the list is the caller's own."""
    from toolcancel.oracle.vectors import shipped_dir, vectors_file

    stat = vectors_file(shipped_dir(), revision).stat()
    return list(_shipped_vectors(revision, stat.st_size, stat.st_mtime_ns))


@functools.lru_cache(maxsize=4)
def _shipped_vectors(revision: str, size: int, mtime_ns: int) -> tuple[Any, ...]:
    from toolcancel.oracle.vectors import shipped_vectors as read

    return tuple(read(revision))


def write_sample(tmp_path: Any, vectors: Sequence[Any], name: str = "sample.jsonl") -> Any:
    """A vectors file of ``vectors`` (toolcancel Vector objects) in ``tmp_path``."""
    path = tmp_path / name
    path.write_text("".join(v.to_line() + "\n" for v in vectors), encoding="utf-8")
    return path


def run_cli(args: list[str], capsys: Any) -> tuple[int, Any, str]:
    """``toolcancel conform ARGS``: its exit code, its stdout (parsed when JSON), its stderr."""
    from toolcancel.cli.main import main

    try:
        code = main(["conform", *args])
    except SystemExit as exit:  # a usage error: argparse exits, as for every command
        code = int(exit.code or 0)
    out, err = capsys.readouterr()
    try:
        data: Any = json.loads(out)
    except ValueError:
        data = out
    return code, data, err


def adapter_answer(v: Any, level: str = "trace") -> dict[str, Any]:
    """Our adapter's answer to vector ``v`` at ``level``, in process (to doctor in a test)."""
    from toolcancel.oracle.vectors import REVISIONS
    from toolcancel.selfcheck.adapter import Session

    session = Session(ToolRegistry, REVISIONS, level=level)
    try:
        line = json.dumps(
            {"protocol": 2, "type": "vector", "id": v.id, "revision": v.revision,
             "scenario": v.scenario.to_data()}
        )  # fmt: skip
        return session.answer(line)
    finally:
        session.close()


MISBEHAVING_ADAPTER = str(Path(__file__).resolve().parent / "fixtures" / "misbehaving_adapter.py")
"""An adapter that misbehaves as its first argument says (tests/fixtures/misbehaving_adapter.py)."""


def conform_process(
    vectors: Path, mode: str, bad: str, pids: Path
) -> subprocess.CompletedProcess[str]:
    """``toolcancel conform --vectors VECTORS --json`` in a process of its own (so that what the
    interpreter prints as it exits is seen too), against the misbehaving adapter in ``mode``,
    crashing at vector ``bad``; the adapter writes the pids of the processes it starts to
    ``pids``."""
    return subprocess.run(
        [sys.executable, "-m", "toolcancel.cli.main", "conform", "--vectors", str(vectors),
         "--json", "--adapter", sys.executable, MISBEHAVING_ADAPTER, mode, bad],
        capture_output=True,
        text=True,
        env={**os.environ, "FORKED_PIDS": str(pids)},
        timeout=300,  # a bound, not a budget: a runner that waits for its strays fails here
        check=False,
    )  # fmt: skip
