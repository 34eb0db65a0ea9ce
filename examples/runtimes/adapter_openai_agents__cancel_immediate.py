"""The OpenAI Agents SDK, the caller's signal its run's own ``cancel(mode="immediate")``.

    toolcancel conform --revision seed --adapter python \\
        examples/runtimes/adapter_openai_agents__cancel_immediate.py

The run is ``Runner.run_streamed``; when the caller aborts, the adapter calls the run's
``cancel(mode="immediate")`` (``cancel: ["signal"]``).  Everything else is
adapter_openai_agents.py's.
"""

from __future__ import annotations

from importlib.metadata import version

from adapter_openai_agents import OpenAiAgents
from toolcancel import runtimes as kit

CancelRun = kit.row(
    OpenAiAgents,
    f"openai-agents {version('openai-agents')} (ScriptedModel, run_streamed cancel('immediate'))",
    cancel=["signal"],
    streamed="immediate",
)

if __name__ == "__main__":
    kit.main(CancelRun(), kit.RegistryControl(CancelRun))
