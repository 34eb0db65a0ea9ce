"""Per tool call: pydantic-ai's own vs through ``toolcancel.integrations.pydantic_ai``.

Not a test (timings depend on the machine); run it by hand (the ``pydantic-ai`` extra)::

    python bench/integration_pydantic_ai.py [--rounds N] [--runs M]

One ``Agent.run`` over ``FunctionModel`` whose first response asks for 20 calls of one tool
(pydantic-ai runs them as tasks of their own) and whose second ends the run; per-call
microseconds are a run's CPU time over 20, the model's two turns included in every variant.  A
third variant runs a capability whose ``wrap_tool_execute`` only calls its handler: what
pydantic-ai itself charges for the extension point the integration uses.
"""

from __future__ import annotations

from typing import Any

from integration_timing import compare
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from toolcancel.integrations.pydantic_ai import Toolcancel

CALLS = 20


async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    del info
    if len([m for m in messages if isinstance(m, ModelRequest)]) > 1:
        return ModelResponse(parts=[TextPart("done")])
    return ModelResponse(parts=[ToolCallPart("lookup", {"key": f"k{i}"}, tool_call_id=f"c{i}")
                                for i in range(CALLS)])  # fmt: skip


async def lookup(key: str) -> str:
    return f"value of {key}"


agent = Agent(FunctionModel(model), tools=[lookup])
calls = Toolcancel()
with_calls = Agent(FunctionModel(model), tools=[lookup], capabilities=[calls])  # the one change


class Nothing(AbstractCapability[Any]):
    """A capability around each tool call that does nothing but call it."""

    async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any,
                                handler: Any) -> Any:  # fmt: skip
        return await handler(args)


with_nothing = Agent(FunctionModel(model), tools=[lookup], capabilities=[Nothing()])


async def plain() -> None:
    await agent.run("look them up")


async def capability() -> None:
    await with_nothing.run("look them up")


async def integrated() -> None:
    await with_calls.run("look them up")
    calls.published.clear()  # a long-lived program forgets what it read


if __name__ == "__main__":
    compare("pydantic-ai", plain, integrated, CALLS, beside=("a capability", capability))
