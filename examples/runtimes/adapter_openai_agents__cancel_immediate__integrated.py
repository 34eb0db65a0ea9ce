"""The OpenAI Agents SDK with ``toolcancel.integrations.openai_agents``:
adapter_openai_agents__cancel_immediate.py's row (the caller's signal is the run's own
``cancel(mode="immediate")``).

    toolcancel conform --revision seed --adapter python \\
        examples/runtimes/adapter_openai_agents__cancel_immediate__integrated.py

A ``ToolCalls`` on a registry of the vector's revision stands at the plain row's integration
points (the agent, the run's configuration, awaiting the run, its cancellation, the call's
result).  Everything else is the plain row's (``toolcancel.runtimes.integrated``); the line
that puts the integration in ends with ``# integration``, and without it this is the plain row.
"""

from __future__ import annotations

from typing import Any

from adapter_openai_agents__cancel_immediate import CancelRun
from toolcancel import ToolRegistry
from toolcancel import runtimes as kit
from toolcancel.integrations.openai_agents import ToolCalls  # integration


def install(call: kit.Call, plain: Any) -> Any:
    """The run's tool calls through toolcancel's registry."""
    glue = plain
    glue = ToolCalls(ToolRegistry(revision=call.revision))  # integration
    return glue


Integrated = kit.integrated(CancelRun, install, "toolcancel.integrations.openai_agents")

if __name__ == "__main__":
    kit.main(Integrated(), kit.RegistryControl(Integrated))
