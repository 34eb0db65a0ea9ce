"""pydantic-ai's agent loop, the caller's signal its own ``CancellationToken``.

    toolcancel conform --revision seed --adapter python \\
        examples/runtimes/adapter_pydantic_ai__cancellation_token.py

The token passed to ``Agent.run(..., cancellation_token=...)`` is cancelled when the caller aborts,
and is already cancelled when the caller had aborted before the call (``cancel: ["signal"]``).
Everything else is adapter_pydantic_ai.py's.
"""

from __future__ import annotations

from importlib.metadata import version

from adapter_pydantic_ai import PydanticAi
from toolcancel import runtimes as kit

PydanticAiToken = kit.row(
    PydanticAi,
    f"pydantic-ai-slim {version('pydantic-ai-slim')} (FunctionModel, CancellationToken)",
    cancel=["signal"],
)

if __name__ == "__main__":
    kit.main(PydanticAiToken(), kit.RegistryControl(PydanticAiToken))
