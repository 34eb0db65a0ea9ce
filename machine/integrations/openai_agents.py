"""The OpenAI Agents SDK's function tools run through a :class:`~toolcancel.ToolRegistry`.

Needs the ``openai-agents`` extra.  A :class:`ToolCalls` is made per run and wraps an existing
agent (:meth:`ToolCalls.agent`): each ``FunctionTool``'s ``on_invoke_tool`` -- the SDK's public
field for what a tool call runs -- becomes one registry call whose body is the tool's own
invocation, unchanged (its argument parsing, its ``failure_error_function``).  Then:

* **the caller's signal** is the run's cancellation: the tool's task cancelled by the SDK (a run
  whose task is cancelled, ``RunResultStreaming.cancel("immediate")``) aborts the call, and so
  does :meth:`ToolCalls.cancel` (``cancel(run, "after_turn")`` tells the tools the SDK lets run
  on); the body sees it as a Python tool sees cancellation, its task cancelled
  (:func:`~toolcancel.cancellable`);
* **quiescence**: a cancelled call still awaits its body, and publishes only when it stopped;
* **a tool's failure**: the SDK's own invocation turns a tool's exception into output text
  (its ``failure_error_function``) before the registry sees it, so the registry sees a success;
  a tool made with ``failure_error_function=None`` lets its failure reach the registry, which
  keeps it over a cancel (R19);
* **a late success is ABORTED**: what the model and the run's history get for the call is the
  published result -- the tool's own output for a success, the contract's text otherwise, its
  error code in the output item's ``custom_data`` (:data:`ERROR_KEY`);
* **an unknown tool** is answered by the registry (:meth:`ToolCalls.run_config`: the SDK's
  ``tool_not_found_behavior="return_error_to_model"`` with a ``tool_error_formatter`` that asks
  the registry), not by ending the run.

**Where the SDK cannot wait.**  A run cancelled by its task, or by ``cancel("immediate")``,
ends at once and detaches the tool's task (the SDK's design: it cancels the task and attaches a
done callback).  The call still runs to its published result; :meth:`ToolCalls.settled` waits
for every call the run started and returns what each published, and :meth:`ToolCalls.run`
awaits a run so that it ends only then.  :data:`LIMITS` names what the SDK's structure still
breaks.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import Any, Final, Literal, TypeVar

from agents import Agent, FunctionTool, RunConfig, RunResultStreaming, ToolErrorFormatterArgs
from agents.tool import FunctionToolCustomDataContext
from agents.tool_context import ToolContext

from ..contract.results import text_block
from ..runtime.cooperate import cancellable
from ..runtime.execution import Execution
from .boundary import Calls, Published

__all__ = ["ERROR_KEY", "LIMITS", "Published", "ToolCalls"]

T = TypeVar("T")

_STOPPED_BY_CANCEL: Final = (
    "the SDK tells a tool to stop only by cancelling its task, so a Python tool that stops "
    "leaves with CancelledError -- the cancellation itself, published as ABORTED -- and a tool "
    "that is to fail after the stop must catch it and raise its own error (which survives); the "
    "conformance adapter's cooperative body does not, so the vectors whose body fails after the "
    "stop cite R15 (seed) or R19 and R29 (revised): a limit of that mapping, which the control's "
    "signal-driven body does not share"
)
_FAILURE_TEXT: Final = (
    "the SDK's own invocation turns a tool's exception into its failure_error_function's text "
    "before the registry sees it, so the model reads the SDK's words, not the contract's "
    "'Error: <message>' (text only)"
)
_GUARDRAILS_OUTSIDE: Final = (
    "the SDK runs a tool's input and output guardrails (the rows' pre- and post-execute) "
    "outside on_invoke_tool, the seam the integration wraps, and none for an unknown tool: a "
    "cancellation while a guardrail runs meets the guardrail's own decision (a denial, a block) "
    "or a call that already published its success, not the registry's checkpoints, and an "
    "unknown tool's answer passes no post-execute; putting the guardrails inside the registry "
    "as its pre- and post-execute policies is not done yet"
)
_SDK_TIMEOUT: Final = (
    "a function tool's timeout is the SDK's asyncio.wait_for around on_invoke_tool, the seam "
    "the integration wraps: it cancels the call's task from outside, which the registry sees "
    "as a cancellation (ABORTED, the body stopped by it even where the caller aborted in that "
    "step), not as its own deadline (TOOL_TIMEOUT); giving the tool's budget to the registry's "
    "timeout policy instead is not done yet"
)
LIMITS: Final[Mapping[str, str]] = {
    "R3": _FAILURE_TEXT,
    "R5": _GUARDRAILS_OUTSIDE,
    "R7": _GUARDRAILS_OUTSIDE,
    "R11": _GUARDRAILS_OUTSIDE,
    "R13": _GUARDRAILS_OUTSIDE,
    "R20": _GUARDRAILS_OUTSIDE,
    "R28": _GUARDRAILS_OUTSIDE,
    "R6": "the SDK makes an unknown tool's output item itself, from the formatter's text alone, "
    "so the registry's UNKNOWN_TOOL answer reaches the model without its error code (text only)",
    "R15": _STOPPED_BY_CANCEL,
    "R18": _FAILURE_TEXT,
    "R19": _STOPPED_BY_CANCEL,
    "R29": _STOPPED_BY_CANCEL,
    "R31": "a run cancelled before the model asked for the tool never makes the call, so there "
    "is no call to publish a result for: the SDK stops before its tool step",
    "R34": _SDK_TIMEOUT,
    "R21": _SDK_TIMEOUT,
    "R41": _SDK_TIMEOUT,
}
"""Rule id -> why the SDK's structure keeps that rule broken with the integration."""

ERROR_KEY: Final = "toolcancel/error"
"""The key of a tool output item's ``custom_data`` (SDK-side, never sent to the model) holding
the published result's error (R1's ``error``: its code), which the output text cannot carry."""

Invoke = Callable[[ToolContext[Any], str], Awaitable[Any]]
_INVOCATION: ContextVar[tuple[Invoke, ToolContext[Any], str, list[Any]]] = ContextVar(
    "toolcancel_openai_agents_invocation"
)
"""The SDK's invocation a registry call runs as its body: set around the call's entry, read by
the body in the task the registry runs it in (a task copies its creator's context)."""


async def _body(arguments: Any, view: Execution) -> Any:
    """Every wrapped tool's registry body: the SDK's own invocation of the tool, cancelled (and
    awaited to its end) when the call's signal aborts."""
    del arguments
    invoke, ctx, raw, kept = _INVOCATION.get()
    output = await cancellable(view, invoke(ctx, raw))
    kept.append(output)
    return [text_block(output if isinstance(output, str) else str(output))]


def _arguments(raw: str) -> Any:
    """The call's arguments as the registry sees them: the JSON the model sent, else its text."""
    try:
        return json.loads(raw or "{}")
    except ValueError:
        return raw


class ToolCalls(Calls):
    """One run's tool calls through ``registry`` (the same registry may serve many runs): make
    one per run, :meth:`agent` the run's agent, and cancel the run or await :meth:`run`.

    ``published`` holds what each call published, in order (:class:`Published`, the SDK's
    ``call_id``); :meth:`result_of`, :meth:`abort` and :meth:`settled` are
    :class:`~toolcancel.integrations.boundary.Calls`'."""

    # -- putting it in ---------------------------------------------------------------------

    def tool(self, tool: FunctionTool) -> FunctionTool:
        """A copy of ``tool`` whose invocation is a registry call (its body ``tool``'s own)."""
        invoke = tool.on_invoke_tool
        name = tool.name
        if self.registry.definition(name) is None:
            self.registry.register(name, _body, description=tool.description)

        theirs = tool.custom_data_extractor

        async def on_invoke_tool(ctx: ToolContext[Any], raw: str) -> Any:
            return await self._call(name, invoke, ctx, raw)

        async def custom_data(seen: FunctionToolCustomDataContext) -> Mapping[str, Any] | None:
            said = theirs(seen) if theirs is not None else None
            said = await said if isinstance(said, Awaitable) else said
            result = self.result_of(seen.tool_context.tool_call_id)
            if result is None or result.error is None:
                return said
            return {**(said or {}), ERROR_KEY: result.error.to_data(result.revision)}

        return dataclasses.replace(
            tool, on_invoke_tool=on_invoke_tool, custom_data_extractor=custom_data
        )

    def agent(self, agent: Agent[Any]) -> Agent[Any]:
        """A clone of ``agent`` whose function tools run through the registry (others as they
        were: hosted tools never run here)."""
        tools = [self.tool(t) if isinstance(t, FunctionTool) else t for t in agent.tools]
        return agent.clone(tools=tools)

    def run_config(self, config: RunConfig | None = None) -> RunConfig:
        """``config`` (or a fresh one) whose unknown tool names go to the registry: the model
        gets the registry's UNKNOWN_TOOL result instead of the run ending with
        ``ModelBehaviorError``; other tool errors keep ``config``'s own formatter."""
        config = config or RunConfig()
        theirs = config.tool_error_formatter

        async def formatter(args: ToolErrorFormatterArgs[Any]) -> str | None:
            if args.kind == "tool_not_found" and self.registry.definition(args.tool_name) is None:
                result, cancelled = await self.enter(args.tool_name, None, args.call_id)
                if cancelled is not None:
                    raise cancelled
                return result.text
            if theirs is None:
                return None
            said = theirs(args)
            return await said if isinstance(said, Awaitable) else said

        return dataclasses.replace(
            config, tool_not_found_behavior="return_error_to_model", tool_error_formatter=formatter
        )

    # -- cancelling and waiting ------------------------------------------------------------

    def cancel(self, run: RunResultStreaming, mode: Literal["immediate", "after_turn"]) -> None:
        """``run.cancel(mode)`` that the tools hear: with ``"after_turn"`` the SDK lets the
        turn's tools run on and never tells them; here their calls abort too."""
        run.cancel(mode)
        self.abort()

    async def run(self, running: Awaitable[T]) -> T:
        """Await a run (``Runner.run(...)``) so that however it ends -- returned, raised,
        cancelled -- it ends only once every tool call it started has published."""
        try:
            return await running
        finally:
            await self.settled()

    # -- one call --------------------------------------------------------------------------

    async def _call(self, name: str, invoke: Invoke, ctx: ToolContext[Any], raw: str) -> Any:
        """What the SDK's tool call now runs: the registry call; the tool's own output for a
        success, the published result's text for anything else.  A cancellation (the SDK
        cancelling the tool's task) is raised once the call published -- if the SDK still
        waits; if it stopped waiting, :meth:`settled` is where the result is waited for."""
        kept: list[Any] = []

        def setup() -> Callable[[], None]:
            token = _INVOCATION.set((invoke, ctx, raw, kept))
            return lambda: _INVOCATION.reset(token)

        result, cancelled = await self.enter(name, _arguments(raw), ctx.tool_call_id, setup)
        if cancelled is not None:
            raise cancelled
        if kept and not result.is_error:
            return kept[0]
        return result.text
