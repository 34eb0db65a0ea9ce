"""pydantic-ai's agent loop with ``toolcancel.integrations.pydantic_ai``: adapter_pydantic_ai.py's
row with the ``Toolcancel`` capability in the run.

    toolcancel conform --revision seed --adapter python \\
        examples/runtimes/adapter_pydantic_ai__integrated.py

The tool call is a call of toolcancel's ``ToolRegistry``: the caller cancelling the task that
awaits ``Agent.run`` aborts the call, the tool is cancelled and awaited, and what the registry
published is what pydantic-ai records for the call (a late success as ABORTED).  The run still
ends with the cancellation; the caller waits for the call's published result
(``Toolcancel.settled``), and that is its answer.  Everything else is the plain row's
(``toolcancel.runtimes.integrated``); the lines that put the integration in end with
``# integration``, and without them this is the plain row.
"""

from __future__ import annotations

from typing import Any

from adapter_pydantic_ai import PydanticAi
from toolcancel import runtimes as kit
from toolcancel.integrations.pydantic_ai import Toolcancel  # integration


def install(call: kit.Call, plain: Any) -> Any:
    """The run's capability: toolcancel's, on a registry of the vector's revision."""
    glue = plain
    glue = Toolcancel(revision=call.revision)  # integration
    return glue


Integrated = kit.integrated(
    PydanticAi, install, "toolcancel.integrations.pydantic_ai",
    settled=lambda glue: glue.settled("c1"),
)  # fmt: skip

if __name__ == "__main__":
    kit.main(Integrated(), kit.RegistryControl(Integrated))
