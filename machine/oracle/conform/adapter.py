"""One adapter process for ``toolcancel conform``: started, read, stopped and reaped.

The adapter is a child process (an argument list, never a shell).  :class:`Adapter` reads its
hello, sends vector lines and reads answer lines, each read bounded (``--hello-timeout``,
``--timeout``) only so that a hung adapter cannot hang the run: an exit is seen at once, even when
a child of the adapter still holds its stdout.  Stopping kills the adapter's whole session and
every process marked as started by it (:mod:`toolcancel.oracle.conform.reaper`: the runner is their
subreaper), closes the transport before the event loop closes, and reaps them all.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
from collections.abc import Sequence
from typing import Any, Final

from ...contract.loader import load_contract
from . import reaper
from .capabilities import Capabilities
from .protocol import PROTOCOL, AdapterDied, ConformError, hello_problem, quote

LINE_LIMIT: Final = 64 << 20
"""Longest answer line read (64 MiB); a longer one is a protocol failure."""
HELLO_TIMEOUT: Final = 60.0
"""Default seconds to wait for the hello (start-up), separate from the per-answer timeout."""
EXIT_GRACE: Final = 0.5
"""Seconds an exited adapter's last line may take to arrive before its exit counts."""
REAP_TIMEOUT: Final = 5.0
"""Seconds to wait for a killed adapter's pipes to close before closing them on our side."""

CHUNK: Final = 1 << 16
"""Bytes of the adapter's stdout asked for at once (:meth:`Adapter.readline` splits them)."""
STDERR_TAIL: Final = 4096
"""How much of the adapter's stderr is kept (its last line is quoted when the adapter dies)."""


class Adapter:
    """One running adapter process and its hello."""

    def __init__(
        self, command: Sequence[str], timeout: float, hello_timeout: float = HELLO_TIMEOUT
    ) -> None:
        self.exited: asyncio.Future[Any] = asyncio.Future()  # replaced at each start
        self.command = list(command)
        self.timeout = timeout
        self.hello_timeout = hello_timeout
        self.proc: asyncio.subprocess.Process | None = None
        self.hello: dict[str, Any] = {}
        self.stderr_tail = b""
        self._stderr_task: asyncio.Task[None] | None = None
        self._transport: asyncio.SubprocessTransport | None = None
        # marks every process of the current start (toolcancel.oracle.conform.reaper)
        self._mark = ""
        self.strays = 0  # processes that had left the adapter's session, killed at its stops
        # stdout read but not yet returned by readline: whole lines, then the start of the next
        self._lines: collections.deque[bytes] = collections.deque()
        self._partial = bytearray()

    @property
    def protocol(self) -> int:
        """The protocol version the adapter's hello declared (every message carries it)."""
        return int(self.hello.get("protocol", PROTOCOL))

    @property
    def level(self) -> str:
        """``trace`` or ``outcome``: what the adapter's answers carry (protocol 1: ``trace``)."""
        return str(self.hello.get("level", "trace"))

    @property
    def turns(self) -> bool:
        """Whether the adapter's hello declared ``turns`` (or the capability ``turns``): it runs
        turn vectors through its scheduler (optional; without it R9 and R36-R38 are reported not
        checked)."""
        caps = self.capabilities
        return "turns" in caps.stages if caps.declared else self.hello.get("turns") is True

    @property
    def capabilities(self) -> Capabilities:
        """The stages the adapter's runtime has and how its caller cancels (hello
        ``capabilities``, protocol 2; absent: everything)."""
        if self.protocol == 1:
            return Capabilities()
        return Capabilities.from_hello(self.hello.get("capabilities"))

    @property
    def deviations(self) -> tuple[str, ...]:
        """The deviations the adapter's hello declared (spec/contract.toml ``[[deviation]]``;
        none: judged exactly by the contract)."""
        return tuple(self.hello.get("deviations", ()))

    @property
    def retry(self) -> str:
        """The retry behaviour the adapter declared (protocol 1: the contract's default)."""
        return str(self.hello.get("retry", load_contract().default_retry))

    async def start(self) -> None:
        """Start the adapter (an argument list: no shell ever sees it) and read its hello.

        The hello is awaited ``hello_timeout`` seconds, not the per-answer ``timeout``: starting
        a runtime and importing a registry takes much longer than answering one vector, above
        all on a loaded machine.

        Its stderr is read by the runner, never passed through (an adapter that floods it, or
        prints a traceback, must not break the runner's one-line error promise); the last line
        is quoted when the adapter dies.
        """
        self.stderr_tail = b""
        self._lines.clear()
        self._partial.clear()
        loop = asyncio.get_running_loop()
        self.exited = loop.create_future()
        exited = self.exited
        self._mark = reaper.new_mark()
        try:
            transport, protocol = await loop.subprocess_exec(
                lambda: _Protocol(exited, loop),
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                env={**os.environ, reaper.MARK_VARIABLE: self._mark},
            )
            self._transport = transport
            self.proc = asyncio.subprocess.Process(transport, protocol, loop)
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in an argument
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            name = quote(self.command[0])
            raise ConformError(f"cannot start the adapter {name}: {why}") from None
        assert self.proc.stderr is not None
        self._stderr_task = asyncio.ensure_future(self._read_stderr(self.proc.stderr))
        try:
            line = await self.readline("the hello", self.hello_timeout)
        except AdapterDied as exc:
            await self.stop()
            raise ConformError(f"the adapter sent no hello: {exc}") from None
        except asyncio.CancelledError:  # an interrupted start leaves no adapter behind
            await self.stop()
            raise
        try:
            hello = json.loads(line)
        except (ValueError, RecursionError):
            hello = None
        if not (
            isinstance(hello, dict)
            and hello.get("type") == "hello"
            and isinstance(hello.get("revisions"), list)
        ):
            await self.stop()
            raise ConformError(f"the adapter's first line is not a hello: {quote(line)}")
        problem = hello_problem(hello)
        if problem is not None:
            await self.stop()
            raise ConformError(problem)
        self.hello = hello

    async def _read_stderr(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(1 << 16):
            self.stderr_tail = (self.stderr_tail + chunk)[-STDERR_TAIL:]

    async def _stderr_hint(self) -> str:
        """``; its stderr ends with: '...'`` once the adapter's stderr is closed, or nothing."""
        task = self._stderr_task
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=1.0)
        lines = [ln for ln in self.stderr_tail.splitlines() if ln.strip()]
        return f"; its stderr ends with: {quote(lines[-1])}" if lines else ""

    async def readline(self, what: str, timeout: float | None = None) -> bytes:
        """The adapter's next line (with its newline; the last one may have none), or
        :class:`AdapterDied` naming what went wrong.

        Stdout is read a chunk at a time and split here, so a line that came with an earlier
        one is returned at once, with no task and no turn of the event loop (a seed run through
        the JS example's adapter reads ~17 answers per chunk).  Otherwise it waits up to
        ``timeout`` seconds for the line to complete, or for the adapter's own exit: a child the
        adapter forked may hold its stdout open long after the adapter died, so end of file
        alone would only come with the timeout.
        """
        loop = asyncio.get_running_loop()
        limit = self.timeout if timeout is None else timeout
        deadline = loop.time() + limit
        while not self._lines:
            if len(self._partial) > LINE_LIMIT:
                raise AdapterDied(f"the answer for {what} is longer than {LINE_LIMIT} bytes")
            chunk = await self._chunk(what, limit, deadline - loop.time())
            if not chunk:  # end of file, or exited
                line = bytes(self._partial)
                self._partial.clear()
                if line:
                    return line
                code = await self._exit_code()
                raise AdapterDied(
                    f"the adapter exited{'' if code is None else f' with code {code}'} "
                    f"before answering {what}{await self._stderr_hint()}"
                )
            self._split(chunk)
        line = self._lines.popleft()
        if len(line) > LINE_LIMIT + 1:  # its newline included
            raise AdapterDied(f"the answer for {what} is longer than {LINE_LIMIT} bytes")
        return line

    def _split(self, chunk: bytes) -> None:
        """Add ``chunk`` to the line being read; queue every line it completes."""
        buf = self._partial
        start = len(buf)
        buf += chunk
        end = buf.rfind(b"\n", start)  # (what came before has no newline)
        if end >= 0:
            whole = bytes(buf[: end + 1])
            del buf[: end + 1]
            self._lines.extend(line + b"\n" for line in whole.split(b"\n")[:-1])

    async def _chunk(self, what: str, limit: float, left: float) -> bytes:
        """What the adapter wrote next (``b""``: end of file, or it exited and wrote nothing
        more within :data:`EXIT_GRACE`), within ``left`` seconds of the ``limit`` a line has."""
        assert self.proc is not None and self.proc.stdout is not None
        if left <= 0:
            raise AdapterDied(f"no answer for {what} within {limit:g} s (the adapter hangs?)")
        read: asyncio.Future[bytes] = asyncio.ensure_future(self.proc.stdout.read(CHUNK))
        try:
            done, _ = await asyncio.wait(
                {read, self.exited}, timeout=left, return_when=asyncio.FIRST_COMPLETED
            )
            if read not in done and self.exited.done():  # its last words may still be in flight
                done, _ = await asyncio.wait({read}, timeout=EXIT_GRACE)
            if read in done:
                return read.result()
            if self.exited.done():
                return b""
            raise AdapterDied(f"no answer for {what} within {limit:g} s (the adapter hangs?)")
        finally:
            if not read.done():
                read.cancel()

    async def _exit_code(self) -> int | None:
        """The adapter's exit status, polled for up to a second: not ``wait()``, which (3.11)
        waits for the pipes too, and a child of the adapter may hold them."""
        assert self.proc is not None
        for _ in range(100):
            if self.proc.returncode is not None:
                break
            await asyncio.sleep(0.01)
        return self.proc.returncode

    def send(self, data: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        if not self.proc.stdin.is_closing():
            self.proc.stdin.write(data)

    async def drain(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        with contextlib.suppress(ConnectionError):
            await self.proc.stdin.drain()

    async def stop(self, *, graceful: bool = False) -> None:
        """Close stdin, let the adapter exit (if ``graceful``), then kill every process it
        started -- its session, its descendants, and what carries its mark, wherever it moved
        (:mod:`toolcancel.oracle.conform.reaper`) -- await their exits, reap them, and close the
        transport.

        Everything is closed before this returns, so nothing is left for the garbage collector
        to close after the event loop has closed (asyncio's "Event loop is closed" tracebacks).
        """
        proc, transport = self.proc, self._transport
        if proc is None:
            return
        self.proc = self._transport = None
        if proc.stdin is not None:
            with contextlib.suppress(ConnectionError):
                proc.stdin.close()
        if graceful and proc.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.exited), self.timeout)
        sweep = reaper.kill_all(proc.pid, self._mark, reaped=proc.returncode is not None)
        self.strays += len(sweep.strays)
        await reaper.await_exits(sweep, REAP_TIMEOUT)
        # asyncio (3.11) reports the exit only once every pipe reached EOF, and a stdout paused
        # on an over-long line never does unless someone reads it: read what is left.
        if proc.stdout is not None:
            with contextlib.suppress(TimeoutError, ValueError, ConnectionError):
                await asyncio.wait_for(_discard(proc.stdout), REAP_TIMEOUT)
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), REAP_TIMEOUT)
        except TimeoutError:  # a process we could not kill holds a pipe: stop listening to it
            pass
        assert transport is not None
        transport.close()  # the pipes too; the process is dead, so nothing is signalled
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), REAP_TIMEOUT)
        task, self._stderr_task = self._stderr_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class _Protocol(asyncio.subprocess.SubprocessStreamProtocol):
    """asyncio's stream protocol, plus a future set when the process itself exits (3.11's
    ``Process.wait()`` also waits for the pipes, which a forked child may hold)."""

    def __init__(self, exited: asyncio.Future[Any], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=LINE_LIMIT, loop=loop)
        self._exited = exited

    def process_exited(self) -> None:
        super().process_exited()
        if not self._exited.done():
            self._exited.set_result(None)


async def _discard(stream: asyncio.StreamReader) -> None:
    while await stream.read(1 << 16):
        pass
