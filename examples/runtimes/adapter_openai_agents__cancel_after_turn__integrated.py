"""The OpenAI Agents SDK with ``toolcancel.integrations.openai_agents``, cancelled by its run's
``cancel(mode="after_turn")``.

    toolcancel conform --revision seed --adapter python \\
        examples/runtimes/adapter_openai_agents__cancel_after_turn__integrated.py

adapter_openai_agents__cancel_after_turn.py's row with adapter_openai_agents__integrated.py's
integration: the one line that puts it in ends with ``# integration``.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any, ClassVar, Literal

from adapter_openai_agents import OpenAiAgents
from toolcancel import ToolRegistry
from toolcancel import runtimes as kit
from toolcancel.integrations.openai_agents import ToolCalls  # integration


class Integrated(OpenAiAgents):
    implementation = (
        f"openai-agents {version('openai-agents')} (ScriptedModel, run_streamed"
        " cancel('after_turn')) + toolcancel.integrations.openai_agents"
    )
    cancel: ClassVar[list[str]] = ["signal"]
    streamed: ClassVar[Literal["immediate", "after_turn"] | None] = "after_turn"

    def integration(self, call: kit.Call) -> Any:
        glue = super().integration(call)
        glue = ToolCalls(ToolRegistry(revision=call.revision))  # integration
        return glue


if __name__ == "__main__":
    kit.main(Integrated(), kit.RegistryControl(Integrated))
