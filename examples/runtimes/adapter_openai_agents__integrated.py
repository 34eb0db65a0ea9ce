"""The OpenAI Agents SDK with ``toolcancel.integrations.openai_agents``, cancelled by its task.

    toolcancel conform --revision seed --adapter python \\
        examples/runtimes/adapter_openai_agents__integrated.py

adapter_openai_agents.py's row (the caller cancels the task awaiting ``Runner.run``) with the
agent's tools run through a ``ToolRegistry`` of the vector's revision: each line that puts the
integration in ends with ``# integration``, and without those lines this is the plain row.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from adapter_openai_agents import OpenAiAgents
from toolcancel import ToolRegistry
from toolcancel import runtimes as kit
from toolcancel.integrations.openai_agents import ToolCalls  # integration


class Integrated(OpenAiAgents):
    implementation = (
        f"openai-agents {version('openai-agents')} (ScriptedModel, task cancel)"
        " + toolcancel.integrations.openai_agents"
    )

    def integration(self, call: kit.Call) -> Any:
        glue = super().integration(call)
        glue = ToolCalls(ToolRegistry(revision=call.revision))  # integration
        return glue


if __name__ == "__main__":
    kit.main(Integrated(), kit.RegistryControl(Integrated))
