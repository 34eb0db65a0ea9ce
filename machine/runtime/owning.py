"""The coroutine a call's task runs: it owns the call's pipeline rather than being it.

Kept out of the compiled group (setup.py's ``COMPILED``) on purpose: when an event loop is closed
with a call still running, the garbage collector closes the task's coroutine, and only an
interpreted coroutine is thrown ``GeneratorExit`` then (a mypyc-compiled one is freed without it),
so only here can the one WARNING line naming the call be said on every build.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from ..contract.results import ToolResult
from .execution import log

if TYPE_CHECKING:
    from .driver import _Call


async def owned(
    call: _Call, pipeline: Coroutine[Any, Any, ToolResult], ended: asyncio.Future[None] | None
) -> ToolResult:
    """``call``'s pipeline as its task's coroutine, setting ``ended`` (if any) as it ends.

    The ways out of the contract end the task quietly: abandoned (P7), the pipeline is closed
    under it (``binding._abandon``) and the task ends cancelled, not with a closed coroutine's
    ``RuntimeError`` for asyncio's runner to report, and likewise when asyncio's teardown
    cancels the task after a second interrupt and the pipeline unwinds; closed with its loop
    (the loop closed while the call still ran), one WARNING line names the call instead of the
    garbage collector's "Exception ignored" traceback."""
    try:
        return await pipeline
    except RuntimeError:
        if call.abandoned:  # its pipeline was closed: nothing more of it runs
            raise asyncio.CancelledError from None
        raise
    except GeneratorExit as exit:
        # the cancellation it unwinds from: its cause, or (mypyc's compiled ``raise ... from``
        # keeps only the context) the exception it was raised while handling
        cause = exit.__cause__ if exit.__cause__ is not None else exit.__context__
        if call.abandoned and isinstance(cause, asyncio.CancelledError):
            # asyncio's teardown cancelled this task after a second interrupt: the pipeline
            # abandoned the call and unwound (stepping's ``failed``); end the task cancelled
            raise asyncio.CancelledError from None
        if not call.abandoned:
            log.warning(
                "call %s (%s): its event loop was closed in state %s: the call was not awaited "
                "to quiescence and no result was published",
                call.call_id,
                call.name,
                call.state,
            )
        raise
    finally:
        if ended is not None and not ended.get_loop().is_closed():
            wake(ended, None)


def wake(waiter: asyncio.Future[None], _: object) -> None:
    """Set ``waiter`` unless it is set already (a done callback's shape: the second argument)."""
    if not waiter.done():
        waiter.set_result(None)
