"""pydantic-ai's agent loop with ``toolcancel.integrations.pydantic_ai``: adapter_pydantic_ai.py
plus the lines marked ``# integration``.

    toolcancel conform --revision seed --adapter python \\
        examples/runtimes/adapter_pydantic_ai__integrated.py

The run gets the ``Toolcancel`` capability, so its tool call is a call of toolcancel's
``ToolRegistry``: the caller cancelling the task that awaits ``Agent.run`` aborts the call, the
tool is cancelled and awaited, and what the registry published is what pydantic-ai records for
the call (a late success as ABORTED).  pydantic-ai's run then ends with the cancellation; the
caller waits for the call's published result (``Toolcancel.settled``) and that is its answer.
Deleting the ``# integration`` lines leaves adapter_pydantic_ai.py's row (tests/test_integrations.py
plants that stub and sees the row fail).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any, ClassVar

from pydantic_ai import Agent, CancellationToken, ToolReturn
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from toolcancel import runtimes as kit
from toolcancel.integrations.pydantic_ai import Toolcancel  # integration


def as_result(part: ToolReturnPart | RetryPromptPart) -> dict[str, Any]:
    """The contract's result (R1's keys) for what the model received for the tool call."""
    if isinstance(part, RetryPromptPart):
        message = part.content if isinstance(part.content, str) else part.model_response()
        return {"content": [kit.text(message)], "isError": True}
    content = [kit.text(part.content)] if isinstance(part.content, str) else part.content
    result: dict[str, Any] = {"content": content, "isError": part.outcome != "success"}
    if part.metadata is not None:
        result["meta"] = part.metadata
    return result


class PydanticAiIntegrated(kit.Runtime):
    implementation = f"pydantic-ai-slim {version('pydantic-ai-slim')} (FunctionModel, task cancel)"
    implementation += " with toolcancel.integrations.pydantic_ai"  # integration
    answered = True  # integration
    capabilities: ClassVar[dict[str, bool]] = {"body_signal": True}  # see the docstring
    cancel: ClassVar[list[str]] = ["task"]
    undriven: ClassVar[dict[str, str]] = {
        "pre_policy": "Hooks.before_tool_execute: not driven yet (this adapter's work to do)",
        "around": "Hooks.wrap_tool_execute: not driven yet",
        "post_policy": "Hooks.after_tool_execute: not driven yet",
        "approval": "deferred tools (requires_approval): not driven yet -- an approval ends the "
        "run and resumes it in another, which the one-call protocol does not express",
        "timeout_policy": "a tool's timeout: not driven yet",
    }

    @asynccontextmanager
    async def open(self, call: kit.Call) -> AsyncIterator[kit.Execute]:
        name = "tool" if call.scenario["tool_known"] else "no_such_tool"
        token = CancellationToken()
        if self.cancel == ["signal"]:  # pydantic-ai's own: Agent.run(..., cancellation_token=)
            call.on_abort(token.cancel)
        received: list[ToolReturnPart | RetryPromptPart] = []
        box: dict[str, Any] = {}

        async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            del info
            last = messages[-1]
            parts = [
                p
                for p in (last.parts if isinstance(last, ModelRequest) else ())
                if isinstance(p, ToolReturnPart | RetryPromptPart) and p.tool_call_id == "c1"
            ]
            if not parts:
                return ModelResponse(
                    parts=[ToolCallPart(tool_name=name, args=box["args"], tool_call_id="c1")]
                )
            received.append(parts[0])
            box["settled"] = call.settled_now()
            return ModelResponse(parts=[TextPart("finished")])

        agent = Agent(FunctionModel(model))
        options: dict[str, Any] = {}
        calls = Toolcancel(revision=call.revision)  # integration
        options["capabilities"] = [calls]  # integration
        if call.scenario["tool_known"]:

            @agent.tool_plain(name="tool", retries=0)
            async def tool(q: Any) -> Any:
                del q
                value = await call.body(kit.task_signal, None)
                if isinstance(value, dict):
                    return ToolReturn(return_value=value["content"], metadata=value["meta"])
                return value

        async def execute(args: dict[str, Any]) -> kit.Outcome:
            box["args"] = args
            try:
                await agent.run("call the tool", cancellation_token=token, **options)
            except Exception as exc:
                # The run raised: that is the call's answer (a cancellation the kit reads
                # itself).  What the run may have recorded for the call in its message history
                # is not what the caller got: pydantic-ai keeps a tool's late success there by
                # design, so that resuming from the history does not run it again.
                call.outcome = kit.Outcome(raised=f"Agent.run raised {type(exc).__name__}: {exc}")
                raise
            call.settled_at(box["settled"])
            return kit.Outcome(result=as_result(received[0]))

        execute = call.answered(execute, lambda: calls.settled("c1"))  # integration
        yield execute


if __name__ == "__main__":
    kit.main(PydanticAiIntegrated(), kit.RegistryControl(PydanticAiIntegrated))
