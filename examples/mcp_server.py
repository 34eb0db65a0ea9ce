"""An MCP server with quiescent cancellation: ``python examples/mcp_server.py [--trio]``.

It speaks MCP on stdin/stdout (point any MCP client at this command) and serves three tools of a
:class:`toolcancel.ToolRegistry`:

* ``echo`` returns its ``text``;
* ``wait`` reports progress, then waits ``seconds`` or until the client cancels it -- it
  watches its signal, so a cancel stops it at once (a cooperative body);
* ``stubborn`` ignores its signal and waits ``seconds`` anyway: cancel it and the server still
  waits for it (R27) before the call's one result is published.

Every published result is logged to stderr as one JSON line (``published <call id> <result>``):
a cancelled request is never answered on the wire, but its result is still published -- here,
to this log.  Ctrl-C (or SIGTERM) stops it: the calls in flight are cancelled and drained, their
results published, and it exits 0; a second one abandons them (toolcancel.runtime.mcp, "Stopping").

Requires the ``mcp`` extra, from your clone: ``pip install './toolcancel[mcp]'`` (``[mcp,trio]``
for ``--trio``).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from toolcancel import Execution, ToolRegistry, ToolResult, aborted

try:
    from toolcancel.runtime.mcp import report_progress, serve_stdio
except ModuleNotFoundError as missing:  # without the mcp extra: its one line, no traceback
    sys.exit(f"mcp_server.py: {missing}")

import anyio  # the mcp extra brings it

log = logging.getLogger("mcp_server")

SECONDS = {"type": "object", "properties": {"seconds": {"type": "number"}}}


def registry() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool(
        description="Return the text it is given.",
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    )
    async def echo(arguments: Any, view: Execution) -> list[dict[str, str]]:
        return [{"type": "text", "text": str(arguments["text"])}]

    @tools.tool(description="Wait, or stop as soon as the call is cancelled.", input_schema=SECONDS)
    async def wait(arguments: Any, view: Execution) -> list[dict[str, str]]:
        await report_progress(view, 0, message="waiting")
        with anyio.move_on_after(float(arguments.get("seconds", 3600))):
            await aborted(view)
        # Returned after a cancel, this success is published as ABORTED (R18).
        return [{"type": "text", "text": "waited"}]

    @tools.tool(description="Wait, whatever happens.", input_schema=SECONDS)
    async def stubborn(arguments: Any, view: Execution) -> list[dict[str, str]]:
        await report_progress(view, 0, message="waiting, whatever happens")
        await anyio.sleep(float(arguments.get("seconds", 1)))
        return [{"type": "text", "text": "done anyway"}]

    def published(view: Execution, result: ToolResult) -> None:
        print("published", view.call_id, result.to_json(), file=sys.stderr, flush=True)

    tools.add_observer(published)
    return tools


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    backend = "trio" if "--trio" in sys.argv[1:] else "asyncio"
    if backend == "trio":
        try:
            import trio  # noqa: F401
        except ModuleNotFoundError:
            sys.exit("mcp_server.py: --trio needs trio: pip install './toolcancel[mcp,trio]'")
    anyio.run(serve_stdio, registry(), backend=backend)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # Ctrl-C while starting, before serve_stdio took the signal over
        sys.exit(130)
