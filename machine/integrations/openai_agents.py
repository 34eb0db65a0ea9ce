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
* **a tool's timeout is the registry's deadline**: a tool's ``timeout_seconds`` becomes its
  registry budget (``timeout_ms``; the integration installs
  :func:`~toolcancel.install_timeout_policy` once per registry -- do not install it again) and
  the SDK gets the tool without a timeout of its own, whose ``asyncio.wait_for`` would cancel
  the call from outside (an ``ABORTED`` to the registry): the deadline stops the body, the call
  publishes TOOL_TIMEOUT once the body stopped (R34, R35), and the model reads what the SDK's
  timeout path says (its ``timeout_error_function``'s text or default message;
  ``timeout_behavior="raise_exception"`` raises ``ToolTimeoutError`` once the call published);
  an output guardrail, the registry's post-execute, sees the registry's timeout text;
* **an unknown tool** is answered by the registry (:meth:`ToolCalls.run_config`: the SDK's
  ``tool_not_found_behavior="return_error_to_model"`` with a ``tool_error_formatter`` that asks
  the registry), not by ending the run;
* **the tool's guardrails are the registry's policies**: the wrapped tool's
  ``tool_input_guardrails`` run as a pre-execute policy and its ``tool_output_guardrails`` as a
  post-execute policy of the registry (the SDK's own ``guardrail.run``, in the SDK's order), so
  a cancellation while a guardrail runs meets the registry's checkpoints: ``reject_content`` is
  a denial (``Deny``; the model reads the guardrail's message, ``Error: `` before it unless it
  starts so) or a block (``Block``: the model reads the message); a guardrail that raises is
  the contract's failing policy; ``raise_exception`` is that failure too, and once the call
  published, its tripwire (``ToolInputGuardrailTripwireTriggered``, ``...Output...``) is raised
  out of the tool call, ending the run as the SDK's would.  The run's
  ``tool_input_guardrail_results`` / ``tool_output_guardrail_results`` no longer list them: the
  SDK fills those lists only for the guardrails it runs itself.

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
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Literal, TypeVar, cast

from agents import (
    Agent,
    FunctionTool,
    RunConfig,
    RunResultStreaming,
    ToolErrorFormatterArgs,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
    ToolInputGuardrailTripwireTriggered,
    ToolOutputGuardrail,
    ToolOutputGuardrailData,
    ToolOutputGuardrailTripwireTriggered,
    ToolTimeoutError,
)
from agents.tool import FunctionToolCustomDataContext, default_tool_timeout_error_message
from agents.tool_context import ToolContext

from ..contract.results import ToolResult, text_block
from ..runtime.execution import Execution
from ..runtime.hooks import (
    Accept,
    Allow,
    Block,
    Deny,
    Next,
    PostDecision,
    PostHook,
    PreDecision,
    PreHook,
)
from ..runtime.timeout_policy import TOOL_TIMEOUT, install_timeout_policy
from ..runtime.toolregistry import ToolRegistry
from .boundary import Calls, Published, context_of

__all__ = ["ERROR_KEY", "LIMITS", "Published", "ToolCalls"]

T = TypeVar("T")

_FAILED_LATE: Final = (
    "the SDK's own invocation turns a tool's exception into its failure_error_function's text "
    "before the registry sees it, so a tool that fails after the cancel reaches the registry as "
    "a late success, published ABORTED (a tool made with failure_error_function=None keeps its "
    "failure)"
)
_FAILURE_TEXT: Final = (
    "the SDK's own invocation turns a tool's exception into its failure_error_function's text "
    "before the registry sees it, so the model reads the SDK's words, not the contract's "
    "'Error: <message>' (text only)"
)
_NO_GUARDRAILS_UNKNOWN: Final = (
    "the SDK's guardrails belong to a tool: an unknown tool has none, so nothing stands at "
    "post-execute for the registry's UNKNOWN_TOOL answer, which no block or failing policy can "
    "replace (the rows' post-execute is the known tool's output guardrail)"
)
_SDK_TIMEOUT_TEXT: Final = (
    "the registry decides TOOL_TIMEOUT with its own deadline (the tool's timeout is its budget), "
    "but the model reads what the SDK's timeout path says (the tool's timeout_error_function, "
    "else 'Tool ... timed out after N seconds.'), kept so a program's timeout answer does not "
    "change: not the contract's 'Error: tool call timed out after <ms>ms' (text only; the code "
    "is in the output item's custom_data)"
)
LIMITS: Final[Mapping[str, str]] = {
    "R3": _FAILURE_TEXT,
    "R6": "the SDK makes an unknown tool's output item itself, from the formatter's text alone, "
    "so the registry's UNKNOWN_TOOL answer reaches the model without its error code (text only)",
    "R7": _NO_GUARDRAILS_UNKNOWN,
    "R15": _FAILED_LATE,
    "R18": _FAILURE_TEXT,
    "R19": _FAILED_LATE,
    "R20": _NO_GUARDRAILS_UNKNOWN,
    "R29": "a function tool's output item holds the output alone: the SDK has no field for the "
    "additionalContexts a post-execute block adds (a guardrail's reject_content carries a "
    "message only); and where the body is to fail after the cancel, R15's reason: the SDK hands "
    "the registry that failure as text, a late success",
    "R31": "a run cancelled before the model asked for the tool never makes the call, so there "
    "is no call to publish a result for: the SDK stops before its tool step",
    "R34": _SDK_TIMEOUT_TEXT,
}
"""Rule id -> why the SDK's structure keeps that rule broken with the integration."""

ERROR_KEY: Final = "toolcancel/error"
"""The key of a tool output item's ``custom_data`` (SDK-side, never sent to the model) holding
the published result's error (R1's ``error``: its code), which the output text cannot carry."""

Invoke = Callable[[ToolContext[Any], str], Awaitable[Any]]


@dataclasses.dataclass(slots=True)
class _Invocation:
    """One SDK tool call as its registry call sees it (the call's context, :meth:`Boundary.
    context`): the SDK's invocation of the tool, the tool's guardrails (taken off the tool, run
    by the registry), the SDK's answer to the tool's timeout (``timed_out``, for a tool with
    one), what the tool returned (``value``, if ``returned``) and the first guardrail tripwire
    (raised once the call published)."""

    invoke: Invoke
    ctx: ToolContext[Any]
    raw: str
    inputs: list[ToolInputGuardrail[Any]]
    outputs: list[ToolOutputGuardrail[Any]]
    timed_out: Invoke | None
    returned: bool = False
    value: Any = None
    tripped: Exception | None = None

    def run(self) -> Awaitable[Any]:
        """The SDK's own invocation of the tool: the registry call's body."""
        return self.invoke(self.ctx, self.raw)

    def output(self, value: Any) -> list[Any]:
        """What the registry is told the tool returned: its output as text (kept as it is for
        the output guardrails)."""
        self.returned, self.value = True, value
        return [text_block(value if isinstance(value, str) else str(value))]


_GUARDED: weakref.WeakSet[ToolRegistry] = weakref.WeakSet()
"""The registries whose pre- and post-execute policies include the guardrails' (mounted once
per registry, however many runs share it)."""

_TIMED: weakref.WeakSet[ToolRegistry] = weakref.WeakSet()
"""The registries whose around chain holds the timeout policy the integration installed (once
per registry, for the first tool with a timeout)."""


def _verdict(said: ToolGuardrailFunctionOutput, inv: _Invocation, trip: Exception) -> str | None:
    """A guardrail's ``reject_content`` message, or None for ``allow``; ``raise_exception`` is
    kept as ``inv``'s tripwire (unless one tripped before) and raised here (the registry
    publishes a failing policy)."""
    behavior = said.behavior
    if behavior["type"] == "raise_exception":
        if inv.tripped is None:
            inv.tripped = trip
        raise trip
    if behavior["type"] == "reject_content":
        message: str = behavior["message"]
        return message
    return None


def _agent(inv: _Invocation) -> Agent[Any]:
    """The agent running the call, as the SDK hands it to a guardrail."""
    agent: Any = inv.ctx.agent
    return cast(Agent[Any], agent)


def _guardrails(context: Callable[[Execution], Any]) -> tuple[PreHook, PostHook]:
    """The registry's pre- and post-execute policies running a call's tool guardrails, the call
    found by ``context`` (every run's over the registry: :func:`~toolcancel.integrations.
    boundary.context_of`); a registry call not made here has none."""

    async def inputs(view: Execution, nxt: Next) -> PreDecision:
        """The call's tool input guardrails, in order; the first rejection denies the call."""
        del nxt
        inv = context(view)
        if not isinstance(inv, _Invocation):
            return Allow()
        for guardrail in inv.inputs:
            said = await guardrail.run(ToolInputGuardrailData(context=inv.ctx, agent=_agent(inv)))
            message = _verdict(said, inv, ToolInputGuardrailTripwireTriggered(guardrail, said))
            if message is not None:
                return Deny(message.removeprefix("Error: "))
        return Allow()

    async def outputs(view: Execution, result: ToolResult, nxt: Next) -> PostDecision:
        """The call's tool output guardrails, in order; the first rejection blocks the result.
        Each is shown what the model would read: the tool's own output for its success, else the
        result's text (a cancellation's included: what post-execute sees is the registry's
        result)."""
        del nxt
        inv = context(view)
        if not isinstance(inv, _Invocation):
            return Accept()
        output = inv.value if inv.returned and not result.is_error else result.text
        for guardrail in inv.outputs:
            data = ToolOutputGuardrailData(context=inv.ctx, agent=_agent(inv), output=output)
            said = await guardrail.run(data)
            message = _verdict(said, inv, ToolOutputGuardrailTripwireTriggered(guardrail, said))
            if message is not None:
                return Block([text_block(message)])
        return Accept()

    return inputs, outputs


def _timeout_answer(tool: FunctionTool) -> Invoke | None:
    """What the SDK's own timeout path answers for ``tool`` past its ``timeout_seconds`` (None
    for a tool without one): ``ToolTimeoutError`` raised for ``timeout_behavior=
    "raise_exception"``, else its ``timeout_error_function``'s text, else the SDK's default
    message.  The integration gives it once the registry published TOOL_TIMEOUT."""
    seconds = tool.timeout_seconds
    if seconds is None:
        return None
    name, behavior, formatter = tool.name, tool.timeout_behavior, tool.timeout_error_function

    async def answer(ctx: ToolContext[Any], raw: str) -> Any:
        del raw
        error = ToolTimeoutError(tool_name=name, timeout_seconds=seconds)
        if behavior == "raise_exception":
            raise error
        if formatter is None:
            return default_tool_timeout_error_message(tool_name=name, timeout_seconds=seconds)
        said = formatter(ctx, error)
        return await said if isinstance(said, Awaitable) else said

    return answer


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
        """A copy of ``tool`` whose invocation is a registry call (its body ``tool``'s own, its
        guardrails the registry's policies, its ``timeout_seconds`` the registry's budget for
        it: the copy has no SDK timeout, the registry's timeout policy decides TOOL_TIMEOUT).

        Raises ``ValueError`` if ``registry`` already has a tool of that name with another
        budget: one name has one budget in a registry."""
        invoke = tool.on_invoke_tool
        name = tool.name
        inputs = list(tool.tool_input_guardrails or ())
        outputs = list(tool.tool_output_guardrails or ())
        timed_out = _timeout_answer(tool)
        # in ms, rounded to the nanosecond: 0.3 s is 300 ms, not 300.00000000000006
        ms = None if tool.timeout_seconds is None else round(tool.timeout_seconds * 1000, 6)
        known = self.registry.definition(name)
        if known is None:
            self.boundary.register(name, description=tool.description, timeout_ms=ms)
        elif known.timeout_ms != ms:
            raise ValueError(
                f"tool {name!r}: the registry has it with timeout_ms={known.timeout_ms!r}, the "
                f"FunctionTool's timeout is {ms!r} ms; give both the same budget, or use "
                "another registry"
            )
        if ms is not None and self.registry not in _TIMED:
            install_timeout_policy(self.registry)
            _TIMED.add(self.registry)
        if self.registry not in _GUARDED:
            inputs_policy, outputs_policy = _guardrails(context_of(self.registry))
            self.registry.add_pre_execute(inputs_policy)
            self.registry.add_post_execute(outputs_policy)
            _GUARDED.add(self.registry)

        theirs = tool.custom_data_extractor

        async def on_invoke_tool(ctx: ToolContext[Any], raw: str) -> Any:
            inv = _Invocation(invoke, ctx, raw, inputs, outputs, timed_out)
            return await self._call(name, inv)

        async def custom_data(seen: FunctionToolCustomDataContext) -> Mapping[str, Any] | None:
            said = theirs(seen) if theirs is not None else None
            said = await said if isinstance(said, Awaitable) else said
            result = self.result_of(seen.tool_context.tool_call_id)
            if result is None or result.error is None:
                return said
            return {**(said or {}), ERROR_KEY: result.error.to_data(result.revision)}

        return dataclasses.replace(
            tool,
            on_invoke_tool=on_invoke_tool,
            custom_data_extractor=custom_data,
            tool_input_guardrails=None,  # the registry runs them (_guardrails)
            tool_output_guardrails=None,
            timeout_seconds=None,  # the registry's timeout policy keeps the budget
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

    async def _call(self, name: str, inv: _Invocation) -> Any:
        """What the SDK's tool call now runs: the registry call; the tool's own output for a
        success, the SDK's own answer to a timeout for TOOL_TIMEOUT (:func:`_timeout_answer`),
        the published result's text for anything else.  A cancellation (the SDK
        cancelling the tool's task) is raised once the call published -- if the SDK still
        waits; if it stopped waiting, :meth:`settled` is where the result is waited for.  So is
        a guardrail's tripwire, after a cancellation."""
        published, cancelled = await self.boundary.enter(
            name, _arguments(inv.raw), inv.ctx.tool_call_id, inv.run, inv.output, context=inv
        )
        if cancelled is not None:
            raise cancelled
        if inv.tripped is not None:
            raise inv.tripped
        result = published.result
        if published.returned and not result.is_error:
            return published.value
        if inv.timed_out is not None and result.error is not None:
            if result.error.code == TOOL_TIMEOUT:
                return await inv.timed_out(inv.ctx, inv.raw)
        return result.text
