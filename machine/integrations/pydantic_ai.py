"""pydantic-ai's tool calls through a ToolRegistry: a toolset wrapping the agent's toolsets.

``pip install 'toolcancel[pydantic-ai]'``::

    calls = Toolcancel()                               # a ToolRegistry of its own, or
    calls = Toolcancel(my_registry)                    # yours, with its hooks
    result = await agent.run(prompt, capabilities=[calls])

:class:`Toolcancel` is a capability whose ``wrap_tool_execute`` (pydantic-ai's public hook around
a tool call's whole execution) makes every function tool call the model asks for a call of
:class:`~toolcancel.ToolRegistry` (:class:`~toolcancel.integrations.boundary.Boundary`).  It
declares itself the outermost capability (``get_ordering``), so the run's other capabilities'
tool hooks (``Hooks(tool_execute=...)``, ``before_tool_execute``, ``after_tool_execute``) run
inside the registry call, as part of its body: a cancellation while one of them waits meets the
registry, not a call that already published.  :class:`ToolcancelToolset`, a ``WrapperToolset``
doing the same at ``call_tool``, is for a program that passes toolsets rather than capabilities
(a capability's hooks then run outside it).

Cancellation.  pydantic-ai cancels a run -- ``CancellationToken.cancel()``, ``AgentRun.cancel()``
or the cancellation of the task awaiting ``Agent.run`` -- by cancelling the run's task, which
cancels each tool call's own task and waits for it (``cancel_and_drain``).  That cancellation is
the caller's signal: the registry aborts the call, cancels the tool and awaits it to its end,
and publishes one result.  pydantic-ai keeps in the interrupted request's history the return of
every tool task that *returned* ("so resuming from that history doesn't re-run it"), so this
toolset returns there what the registry published -- a late success replaced by ABORTED, as a
failed tool return (``ToolFailed``) -- instead of re-raising the tool task's ``CancelledError``
(which would leave the call without a return).  The run itself still ends as pydantic-ai
decides (``RunCancelled``, or ``CancelledError``); :meth:`Toolcancel.settled` (by tool
call id) and :attr:`Toolcancel.published` give the program what each call published.

What the model sees.  A success the registry published as the body returned it reaches the
model unchanged (the tool's own value, a ``ToolReturn`` with its metadata); a tool's failure
that pydantic-ai handles itself (``ModelRetry``, ``ToolFailed``, ``CallDeferred``,
``ApprovalRequired``) is raised to it unchanged; any other failure, and every result of the
registry's own (ABORTED, an unserializable result, a hook's answer), is a failed tool return
whose text is the result's -- never an exception out of the run (R31).  A tool's ``timeout``
stays pydantic-ai's own (innermost, around each try of the tool, inside the registry call): the
model reads its retry prompt ("Timed out after N seconds."), as without the integration.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

from pydantic_ai import ToolReturn
from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering
from pydantic_ai.exceptions import (
    ApprovalRequired,
    CallDeferred,
    ModelRetry,
    SkipToolExecution,
    ToolFailed,
    ToolRetryError,
)
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.toolsets import WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import to_jsonable_python

from ..contract.results import ToolOutput, ToolResult, text_block
from ..runtime.toolregistry import ToolRegistry
from .boundary import Boundary, Published, Run

_TEXT_ONLY = (
    "pydantic-ai's failed tool return (what ToolFailed makes) holds text only, so an error result "
    "reaches the model and the history with the contract's text and error flag but without R1's "
    "structured error (its code and name; in the revised contract its message too)."
)
_CHAIN = (
    "pydantic-ai hands the outermost capability's wrap_tool_execute one handler for the rest of "
    "the tool's execution, the other capabilities' tool hooks (the rows' around wrappers) "
    "included, so they run inside the registry call's body and get what the tool did as an "
    "exception -- its failure, its cancellation, its timeout's retry prompt: a hook waiting "
    "before or after the tool is cancelled with the body, published ABORTED, where the "
    "contract's wrapper goes on (to a refused dispatch, ABORTED_BEFORE_DISPATCH, or its own "
    "outcome), and a retrying hook never makes the second try the contract refuses after a "
    "cancel; and pydantic-ai answers a tool name no toolset has before any hook runs, so a "
    "cancel where the vectors' wrappers would wait finds no call."
)
_OWN_TIMEOUT = (
    "pydantic-ai's tool timeout is its own anyio.fail_after in FunctionToolset.call_tool, per try, "
    "inside every capability hook, so inside the registry call: the model reads its retry "
    "prompt ('Timed out after N seconds.') unchanged, and the registry never learns "
    "the deadline expired (a tool outlasting it keeps its failure; a later cancel is ABORTED); "
    "a registry budget would span a hook's retries."
)
_TIMEOUT_RETRY = (
    "pydantic-ai's tool timeout stops a tool only by cancelling its await, so the vectors' "
    "cooperative body, which the contract lets return its success after its deadline, ends "
    "cancelled; the timeout's retry prompt (ModelRetry) reaches a capability's tool_execute hook "
    "as an exception, so a retrying wrapper never makes the second try the contract's result "
    "comes from."
)
LIMITS: Final[Mapping[str, str]] = {
    "R2": _TIMEOUT_RETRY,
    "R3": _TEXT_ONLY,
    "R6": "pydantic-ai answers a tool name no toolset has with its own retry prompt before any "
    "toolset's call_tool runs, so the registry never sees the call.",
    "R11": _TEXT_ONLY,
    "R15": _CHAIN,
    "R16": "a tool's failure reaches a capability's tool_execute hook (the rows' around "
    "wrappers) as an exception, not as a result the hook goes on from, so a wrapper that is to "
    "fail after delegating never runs its own failure; and pydantic-ai answers a tool name no "
    "toolset has before any hook runs, so the wrappers never answer for it.",
    "R17": _CHAIN,
    "R18": _TEXT_ONLY,
    "R19": _CHAIN,
    "R21": _CHAIN,
    "R28": _CHAIN,
    "R29": _CHAIN,
    "R30": _TEXT_ONLY,
    "R31": _TEXT_ONLY,
    "R34": _OWN_TIMEOUT,
    "R41": _CHAIN,
}
"""Rule id -> why pydantic-ai's structure keeps it broken with this toolset (docs/REAL-WORLD.md
shows each beside the rule; the render stops if a broken rule has none, or one names a kept
rule)."""

HANDLED: Final = (ModelRetry, ToolFailed, CallDeferred, ApprovalRequired, SkipToolExecution,
                  ToolRetryError)  # fmt: skip
"""A tool's exceptions pydantic-ai turns into an answer of its own: raised to it unchanged
(``ToolRetryError``: a ``ModelRetry`` as a ``wrap_tool_execute`` hook sees it, documented there)."""


def _blocks(value: Any) -> list[Any]:
    """A tool's return value as content blocks (R1): a list of blocks as it is, a string as one
    text block, anything else as the JSON pydantic-ai would send the model."""
    if isinstance(value, list) and all(isinstance(b, Mapping) and "type" in b for b in value):
        return value
    if isinstance(value, str):
        return [text_block(value)]
    return [text_block(str(to_jsonable_python(value, fallback=repr)))]


def output(value: Any) -> ToolOutput | list[Any]:
    """What the registry is told a pydantic-ai tool returned: its content blocks, with the
    metadata of a ``ToolReturn`` (a value without metadata is its blocks alone: no
    ``ToolOutput`` made per call for nothing)."""
    if isinstance(value, ToolReturn):
        return ToolOutput(_blocks(value.return_value), meta=value.metadata)
    return _blocks(value)


def answer(published: Published) -> Any:
    """What pydantic-ai gets for a call: the tool's own return or handled exception, or the
    registry's result -- a success as a ``ToolReturn``, an error as ``ToolFailed``."""
    if published.own:
        if published.raised is None:
            return published.value
        if isinstance(published.raised, HANDLED):
            raise published.raised
    result = published.result
    if result.is_error:
        raise ToolFailed(result.text)
    data = result.to_data()
    return ToolReturn(return_value=data["content"], metadata=data.get("meta"))


async def _through(boundary: Boundary, name: str, args: Any, key: str, run: Run) -> Any:
    """pydantic-ai's tool call ``run`` (its call ``key``) as a registry call: what pydantic-ai
    gets for it (:func:`answer`)."""
    # A cancellation of this call's own task comes back with what the call published: pydantic-ai
    # records the return of a task that returned, so that goes there, never a late success.  A
    # call abandoned unpublished (P7) has nothing to say: enter() raises its cancellation.
    published, _ = await boundary.enter(name, args, key, run, output)
    return answer(published)


@dataclass
class ToolcancelToolset(WrapperToolset[Any]):
    """``wrapped``'s tools, each call made through ``boundary``'s registry (see the module).

    Every copy pydantic-ai makes of it for a run (``for_run``) shares its boundary."""

    boundary: Boundary = field(default_factory=partial(Boundary, ordered=False))

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        def run() -> Any:
            return self.wrapped.call_tool(name, tool_args, ctx, tool)

        return await _through(self.boundary, name, tool_args, ctx.tool_call_id or name, run)


@dataclass
class Toolcancel(AbstractCapability[Any]):
    """The capability that puts every function tool call of a run through the registry::

        calls = Toolcancel()                       # or Toolcancel(my_registry)
        agent = Agent(model, capabilities=[calls])  # or agent.run(..., capabilities=[calls])

    The outermost capability, it wraps each function tool call's execution (output tools
    aside), the other capabilities' tool hooks included; every run shares one boundary:
    :meth:`settled` and :attr:`published` see every call."""

    registry: ToolRegistry | None = None
    """The caller's registry (its hooks apply to every call), or ``None`` for a new one."""
    revision: str = "seed"
    """The contract revision of the new registry (when ``registry`` is ``None``)."""
    boundary: Boundary = field(init=False)

    def __post_init__(self) -> None:
        self.boundary = Boundary(self.registry, revision=self.revision, ordered=False)

    def get_ordering(self) -> CapabilityOrdering:
        return CapabilityOrdering(position="outermost")

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        handler: Callable[[dict[str, Any]], Awaitable[Any]],
    ) -> Any:
        def run() -> Any:
            return handler(args)

        return await _through(self.boundary, call.tool_name, args, call.tool_call_id, run)

    @property
    def published(self) -> dict[str, Published]:
        """Tool call id -> what that call published."""
        return self.boundary.published

    async def settled(self, tool_call_id: str) -> ToolResult:
        """Wait until the call ``tool_call_id`` published (its tool stopped first) and return its
        result: for a program whose run ended (``RunCancelled``) or whose task was cancelled."""
        return (await self.boundary.settled(tool_call_id)).result
