"""AutoGen's ``AssistantAgent``, the caller's signal its own ``CancellationToken``.

    toolcancel conform --revision seed --adapter python \\
        examples/runtimes/adapter_autogen__token.py

The token passed to ``AssistantAgent.run(..., cancellation_token=...)`` is cancelled when the
caller aborts, and is already cancelled when the caller had aborted before the call
(``cancel: ["signal"]``).  Everything else is adapter_autogen.py's.
"""

from __future__ import annotations

from importlib.metadata import version

from adapter_autogen import AutoGen
from toolcancel import runtimes as kit

AutoGenToken = kit.row(
    AutoGen,
    f"autogen-agentchat {version('autogen-agentchat')} AssistantAgent"
    " (ReplayChatCompletionClient, CancellationToken)",
    cancel=["signal"],
)

if __name__ == "__main__":
    kit.main(AutoGenToken(), kit.RegistryControl(AutoGenToken))
