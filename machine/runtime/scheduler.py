"""The turn scheduler: one model turn's tool calls, through the registry's staged API (R36-R38).

A model turn asks for several tool calls at once.  Running them one after the other wastes the
time bodies spend waiting; running them all at once would interleave policy (pre-execute,
approval, post-execute) and make the durable log depend on timing.  So the scheduler splits each
call into the registry's three stages (:meth:`ToolRegistry.begin`) and lets only the middle one
overlap:

* **Groups.**  Calls are grouped in model order: consecutive non-exclusive calls form one group
  whose bodies may overlap (at most ``max_concurrency`` dispatches in flight); an exclusive call
  is a group of its own, a barrier that starts after every earlier call is committed and finishes
  before any later call is prepared.  As in the original, a call is exclusive unless its tool was
  registered ``parallel_safe=True`` (the safe default: one at a time); a request's ``exclusive``
  flag, when given, overrides the tool's declaration.
* **One policy lane.**  ``prepare()`` (entry, pre-execute, approval, guards) and ``finalize()``
  (post-execute, materialization, notification) are awaited by the scheduler itself, one call at
  a time: prepares in model order, finalizes in model order.  Only ``dispatch()`` (the around
  chain and the body) runs as a task.
* **Model-order commits.**  A call's ``tool/result`` is committed when it and every earlier call
  of the turn are finalized, whatever order the bodies settled in.
* **No late start.**  The turn signal is every started call's caller signal, and the scheduler
  reads it immediately before preparing each call (so at each group's start, after each
  start or commit, and after each in-flight settlement).  Once it is aborted nothing more is
  prepared and no later group runs, but every started call is drained -- its dispatch awaited
  however long it takes, never abandoned -- and finalized in model order.
* **Balanced log.**  Every call that was never started gets a synthetic ``tool/call`` +
  ``tool/result`` pair (R9) after all started calls' results, in model order.  Those calls never
  touch the registry: no policy, no body, no notification.
* **Contexts last.**  A committed result's ``additionalContexts`` are accepted then, and logged as
  ``context`` entries after all of the turn's results, in commit order; the ``tool/result`` entry
  itself carries none (model APIs want a turn's tool results contiguous).

Cancel a turn through its signal, or by cancelling the task awaiting ``run_turn``
(``task.cancel()``, ``asyncio.timeout``, a ``TaskGroup`` sibling): as for ``execute()``
(CONTRACT.md, Python binding P2), that aborts the turn -- the calls' signal aborts with a
:class:`~toolcancel.TaskCancelled` reason, nothing more is prepared, started calls are drained and
committed, unstarted ones get their synthetic pair -- and only then is ``CancelledError`` re-raised,
with the task's cancellation count untouched. The turn runs in a task of its own behind a shield, so
no hook or body ever sees the awaiting task's cancellation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..contract.errors import NotSerializable, TaskCancelled
from ..contract.results import ToolResult, canonical_json, snapshot
from .eventloop import on_trio, shielded
from .registry import StagedCall, ToolRegistry, drain
from .signals import AbortController, AbortSignal

__all__ = ["LogEntry", "ToolCallRequest", "TurnLog", "TurnScheduler"]

_log = logging.getLogger("toolcancel.runtime.scheduler")

LogKind = Literal["tool/call", "tool/result", "context"]


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """One tool call as the model asked for it.

    ``exclusive`` makes the call a barrier: it runs alone, after every earlier call of the turn
    is committed and before any later call is prepared.  ``None`` (the default) follows the
    tool: exclusive unless it was registered ``parallel_safe=True``; ``False`` lets the call
    overlap whatever its tool declares.
    """

    call_id: str
    name: str
    arguments: Any = None
    exclusive: bool | None = None


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One durable log entry: ``payload`` is deep-frozen JSON data."""

    kind: LogKind
    call_id: str
    payload: Any

    def to_data(self) -> dict[str, Any]:
        return {"kind": self.kind, "callId": self.call_id, "payload": self.payload}

    def to_json(self) -> str:
        """Canonical JSON of the entry (sorted keys, no whitespace)."""
        return canonical_json(self.to_data())


class TurnLog:
    """An append-only log of tool calls, results and accepted contexts.

    Entries are snapshotted when appended, so what was logged cannot change afterwards.  A log
    may be passed to several turns to keep one session's record.
    """

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: list[LogEntry] = []

    def append(self, kind: LogKind, call_id: str, payload: Any) -> LogEntry:
        """Append one entry (raises :class:`NotSerializable` if ``payload`` is not JSON)."""
        entry = LogEntry(kind, call_id, snapshot(payload, f"$.{kind}"))
        self._entries.append(entry)
        return entry

    @property
    def entries(self) -> tuple[LogEntry, ...]:
        return tuple(self._entries)

    def of_kind(self, kind: LogKind) -> list[LogEntry]:
        return [e for e in self._entries if e.kind == kind]

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[LogEntry]:
        return iter(tuple(self._entries))

    def to_jsonl(self) -> str:
        """One canonical JSON object per line, in append order."""
        return "".join(e.to_json() + "\n" for e in self._entries)

    def __repr__(self) -> str:
        """How many entries, and the last few as ``kind call_id`` (a result says whether it is
        an error): enough to see in a debugger or a failing test where a turn got to."""
        shown = self._entries[-_REPR_ENTRIES:]
        parts = []
        for e in shown:
            error = e.kind == "tool/result" and isinstance(e.payload, Mapping)
            flag = f" isError={e.payload.get('isError')}" if error else ""
            parts.append(f"{e.kind} {e.call_id}{flag}")
        n = len(self._entries)
        head = f"{n} entr{'y' if n == 1 else 'ies'}"
        if n > len(shown):
            head += f", the last {len(shown)}"
        return f"<TurnLog {head}{': ' if parts else ''}{', '.join(parts)}>"


_REPR_ENTRIES = 6
"""Entries a :class:`TurnLog`'s ``repr`` names (the latest)."""


def result_payload(result: ToolResult) -> dict[str, Any]:
    """A result as its ``tool/result`` payload: the canonical data without contexts."""
    data = result.to_data()
    data.pop("additionalContexts", None)
    return data


def call_payload(request: ToolCallRequest) -> dict[str, Any]:
    """A request as its ``tool/call`` payload.

    Arguments that are not losslessly JSON-serializable cannot be logged as they are; the entry
    then says why instead, and the registry answers the call with its R11 error.
    """
    try:
        return {"name": request.name, "arguments": snapshot(request.arguments, "$.arguments")}
    except (NotSerializable, RecursionError) as exc:
        return {"name": request.name, "argumentsError": str(exc)}


def group_calls(
    calls: Sequence[ToolCallRequest], exclusive: Sequence[bool] | None = None
) -> list[list[int]]:
    """Indices of ``calls`` grouped in model order: runs of non-exclusive calls, and each
    exclusive call alone.  ``exclusive[i]`` says whether call ``i`` is (default: its flag)."""
    groups: list[list[int]] = []
    run: list[int] = []
    for i, call in enumerate(calls):
        if call.exclusive if exclusive is None else exclusive[i]:
            if run:
                groups.append(run)
                run = []
            groups.append([i])
        else:
            run.append(i)
    if run:
        groups.append(run)
    return groups


class TurnScheduler:
    """Runs each model turn's batch of tool calls through ``registry`` (see the module doc)."""

    def __init__(self, registry: ToolRegistry, *, max_concurrency: int = 4) -> None:
        if (
            isinstance(max_concurrency, bool)
            or not isinstance(max_concurrency, int)
            or max_concurrency < 1
        ):
            raise ValueError(f"max_concurrency must be an int >= 1, got {max_concurrency!r}")
        self.registry = registry
        self.max_concurrency = max_concurrency

    async def run_turn(
        self,
        calls: Iterable[ToolCallRequest],
        *,
        signal: AbortSignal,
        agent: str | None = None,
        log: TurnLog | None = None,
    ) -> TurnLog:
        """Run one turn's calls under the turn ``signal``; return the log they were appended to.

        Returns only when every started call is finalized.  ``log`` (default: a new one) lets a
        session keep one log across turns, and lets a watcher see commits as they happen.
        """
        batch = tuple(calls)
        ids = [c.call_id for c in batch]
        if len(set(ids)) != len(ids):
            raise ValueError(f"call ids of a turn must be unique: {ids!r}")
        if not isinstance(signal, AbortSignal):
            raise TypeError(f"signal must be an AbortSignal, not {type(signal).__name__}")
        stop = AbortController()  # the turn's own signal: follows ``signal``, and task cancellation

        def follow(given: AbortSignal) -> None:
            stop.abort(given.reason)

        if signal.aborted:
            stop.abort(signal.reason)
        else:
            signal.add_listener(follow)
        turn = _Turn(self, batch, stop.signal, agent, TurnLog() if log is None else log)

        def task_cancelled(message: str | None) -> None:
            stop.abort(TaskCancelled("turn", message))

        if on_trio():  # structured cancellation: behind a shield
            try:
                await shielded(turn.run, task_cancelled)
            finally:
                signal.remove_listener(follow)
            return turn.log

        def abandon(interrupt: BaseException) -> None:  # a second interrupt (P7): stop waiting
            _log.error(
                "turn abandoned after a second interrupt (%r): its started calls "
                "are abandoned with it (Python binding P7)",
                interrupt,
            )

        inner = asyncio.ensure_future(turn.run())
        try:
            cancelled = await drain(inner, task_cancelled, abandon)
        finally:
            signal.remove_listener(follow)
        inner.result()  # the turn's own failure, if any (a bug)
        if cancelled is not None:
            raise cancelled
        return turn.log


class _Turn:
    """The state of one running turn."""

    def __init__(
        self,
        scheduler: TurnScheduler,
        calls: tuple[ToolCallRequest, ...],
        signal: AbortSignal,
        agent: str | None,
        log: TurnLog,
    ) -> None:
        self.registry = scheduler.registry
        self.cap = scheduler.max_concurrency
        self.calls = calls
        self.signal = signal
        self.agent = agent
        self.log = log
        self.started: set[int] = set()
        self.accepted: list[tuple[str, Any]] = []

    def exclusive(self, request: ToolCallRequest) -> bool:
        """Whether ``request`` runs alone: its own flag, else its tool's declaration."""
        if request.exclusive is not None:
            return request.exclusive
        tool = self.registry.definition(request.name, self.agent)
        return tool is None or not tool.parallel_safe

    async def run(self) -> None:
        for group in group_calls(self.calls, [self.exclusive(c) for c in self.calls]):
            await self.run_group(group)  # prepares nothing once the turn is aborted
        skipped = self.registry.results.skipped()
        for i, request in enumerate(self.calls):
            if i not in self.started:
                self.log.append("tool/call", request.call_id, call_payload(request))
                self.log.append("tool/result", request.call_id, result_payload(skipped))
        for call_id, context in self.accepted:
            self.log.append("context", call_id, context)

    async def run_group(self, group: list[int]) -> None:
        """Start, drain and commit one group (see the module doc for the order of things)."""
        if not on_trio():
            await self.run_lane(group, _AsyncioLane())
            return
        import trio

        failure: BaseException | None = None
        async with trio.open_nursery() as nursery:
            try:
                await self.run_lane(group, _TrioLane(nursery))
            except BaseException as exc:  # raised outside the nursery: not in an ExceptionGroup
                failure = exc
        if failure is not None:
            raise failure

    async def run_lane(self, group: list[int], lane: _Lane) -> None:
        staged: list[StagedCall] = []
        tasks: list[_Dispatch | None] = []  # the dispatch of staged[k], if it has one
        committed = 0
        stopped = False
        try:
            while True:
                if committed < len(staged):
                    task = tasks[committed]
                    if task is None or task.done():
                        if task is not None:
                            task.result()  # a dispatch never fails; if it does, it is a bug
                        await self.commit(staged[committed])
                        committed += 1
                        continue
                running = [t for t in tasks if t is not None and not t.done()]
                if not stopped and len(staged) < len(group) and len(running) < self.cap:
                    if self.signal.aborted:  # no late start (R36)
                        stopped = True
                        continue
                    call, dispatching = await self.start(group[len(staged)])
                    staged.append(call)
                    tasks.append(lane.spawn(call.dispatch) if dispatching else None)
                    continue
                if not running:
                    return
                await lane.wait_any(running)
        except BaseException:
            await lane.drain(tasks)
            raise

    async def start(self, index: int) -> tuple[StagedCall, bool]:
        request = self.calls[index]
        self.started.add(index)
        self.log.append("tool/call", request.call_id, call_payload(request))
        call = self.registry.begin(
            request.name,
            request.arguments,
            signal=self.signal,
            call_id=request.call_id,
            agent=self.agent,
        )
        return call, await call.prepare()

    async def commit(self, call: StagedCall) -> None:
        result = await call.finalize()
        self.log.append("tool/result", call.call_id, result_payload(result))
        self.accepted.extend((call.call_id, context) for context in result.contexts)


class _Dispatch(Protocol):
    """A dispatch running as a task of its own."""

    def done(self) -> bool: ...
    def result(self) -> None: ...


class _Lane(Protocol):
    """Where a group's dispatches run as tasks: asyncio's, or a trio nursery."""

    def spawn(self, dispatch: Callable[[], Awaitable[None]]) -> _Dispatch: ...
    async def wait_any(self, running: list[_Dispatch]) -> None: ...
    async def drain(self, tasks: Sequence[_Dispatch | None]) -> None: ...


class _AsyncioLane:
    def spawn(self, dispatch: Callable[[], Awaitable[None]]) -> _Dispatch:
        return asyncio.ensure_future(dispatch())

    async def wait_any(self, running: list[_Dispatch]) -> None:
        await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)  # type: ignore[type-var]

    async def drain(self, tasks: Sequence[_Dispatch | None]) -> None:
        """Await every started dispatch (never cancel one: quiescence), then collect failures
        so asyncio does not report them as never retrieved."""
        pending = [t for t in tasks if isinstance(t, asyncio.Task)]
        if pending:
            await asyncio.wait(pending)
        for t in pending:
            if not t.cancelled():
                t.exception()


class _TrioLane:
    """Dispatches as tasks of a nursery, each behind a shield: a dispatch is never cancelled
    (quiescence), and the nursery waits for every one of them."""

    def __init__(self, nursery: Any) -> None:
        import trio

        self.nursery = nursery
        self.settled = trio.Event()

    def spawn(self, dispatch: Callable[[], Awaitable[None]]) -> _Dispatch:
        task = _TrioDispatch()
        self.nursery.start_soon(self.run, task, dispatch)
        return task

    async def run(self, task: _TrioDispatch, dispatch: Callable[[], Awaitable[None]]) -> None:
        import trio

        with trio.CancelScope(shield=True):
            try:
                await dispatch()
            except BaseException as exc:  # handed to whoever reads the result, as asyncio does
                task.failure = exc
            finally:
                task.finished = True
                self.settled.set()

    async def wait_any(self, running: list[_Dispatch]) -> None:
        import trio

        if not any(t.done() for t in running):
            self.settled = trio.Event()
            await self.settled.wait()

    async def drain(self, tasks: Sequence[_Dispatch | None]) -> None:
        """The nursery awaits every dispatch as it closes."""


class _TrioDispatch:
    def __init__(self) -> None:
        self.finished = False
        self.failure: BaseException | None = None

    def done(self) -> bool:
        return self.finished

    def result(self) -> None:
        if self.failure is not None:
            raise self.failure
