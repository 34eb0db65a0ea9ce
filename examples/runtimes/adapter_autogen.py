"""AutoGen's ``AssistantAgent`` at outcome level: a replayed model turn calls the tool once.

    toolcancel conform --revision seed --adapter python examples/runtimes/adapter_autogen.py

Each vector builds an ``AssistantAgent`` (autogen-agentchat) whose model client is AutoGen's own
``ReplayChatCompletionClient`` (autogen-ext: no network, no key), replaying one turn that calls the
tool (``tool``, or ``no_such_tool`` when the scenario's tool is unknown) with the scenario's
arguments.  The tool is a ``FunctionTool`` over an async function that takes AutoGen's
``CancellationToken`` -- AutoGen hands a tool the run's token when its signature asks for one.
The call the contract calls ``execute()`` is that tool call inside ``AssistantAgent.run``; its
result is the ``FunctionExecutionResult`` the run records (``content`` its text, ``isError`` its
``is_error``).  With ``reflect_on_tool_use`` at its default (off) the run ends with the tool call,
so the call settles when ``run`` returns or raises.

The caller's signal, one row each:

* ``task`` (this file): the caller cancels the task awaiting ``run`` (``cancel: ["task"]``);
* ``token`` (``adapter_autogen__token.py``): AutoGen's own cancellation API, the
  ``CancellationToken`` passed to ``run(..., cancellation_token=...)``, cancelled when the caller
  aborts -- already cancelled when the caller had aborted before the call (``cancel: ["signal"]``).

The body's signal is the token AutoGen hands the tool (``body_signal``), and, as in every Python
runtime, the cancellation of its task: a cooperative body stops when either says so.  Capabilities:
none of the contract's stages -- ``AssistantAgent`` has no tool-call policy, approval, timeout or
wrapper seam of its own (a ``Workbench`` wraps the tool set, not one call's dispatch, and is not
driven here); a ``FunctionExecutionResult`` has no metadata channel and arguments are JSON text:
``meta`` and ``raw_args`` are declared false.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any, ClassVar

import anyio
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import ToolCallExecutionEvent
from autogen_core import CancellationToken, FunctionCall
from autogen_core.models import CreateResult, ModelInfo, RequestUsage
from autogen_core.tools import FunctionTool
from autogen_ext.models.replay import ReplayChatCompletionClient
from toolcancel import runtimes as kit

MODEL = ModelInfo(
    vision=False, function_calling=True, json_output=False, family="unknown",
    structured_output=False,
)  # fmt: skip


def calling(name: str, args: dict[str, Any]) -> ReplayChatCompletionClient:
    """A model client whose one turn calls ``name`` with ``args``."""
    turn = CreateResult(
        finish_reason="function_calls",
        content=[FunctionCall(id="c1", name=name, arguments=json.dumps(args))],
        usage=RequestUsage(prompt_tokens=0, completion_tokens=0),
        cached=False,
    )
    return ReplayChatCompletionClient([turn], model_info=MODEL)


class AutoGen(kit.Runtime):
    implementation = (
        f"autogen-agentchat {version('autogen-agentchat')} AssistantAgent"
        f" (ReplayChatCompletionClient, task cancel)"
    )
    capabilities: ClassVar[dict[str, bool]] = {
        "body_signal": True,  # the CancellationToken (see the docstring)
        "meta": False,
        "raw_args": False,
    }
    cancel: ClassVar[list[str]] = ["task"]
    undriven: ClassVar[dict[str, str]] = {
        "around": "a Workbench wraps the tool set, not one call's dispatch: not driven",
    }

    absent: ClassVar[dict[str, str]] = {
        "approval": "AssistantAgent runs the model's tool calls through its Workbench with no "
        "approval step (autogen-agentchat's approval_func belongs to CodeExecutorAgent's code "
        "blocks, not to tool calls)",
        "pre_policy": "no decision before a tool call: a Workbench lists and calls tools (see "
        "around)",
        "timeout_policy": "FunctionTool has no timeout of its own",
    }

    @asynccontextmanager
    async def open(self, call: kit.Call) -> AsyncIterator[kit.Execute]:
        token = CancellationToken()
        if self.cancel == ["signal"]:
            call.on_abort(token.cancel)

        async def body(q: str, cancellation_token: CancellationToken) -> str:
            del q
            stop = anyio.Event()
            cancellation_token.add_callback(stop.set)

            def signal() -> dict[str, Any]:
                if cancellation_token.is_cancelled():
                    return {"aborted": True, "reason": "caller"}
                return kit.task_signal()

            value = await call.body(signal, stop)
            return " ".join(c["text"] for c in value)

        tool = FunctionTool(body, name="tool", description="the scenario's tool")
        name = "tool" if call.scenario["tool_known"] else "no_such_tool"

        async def execute(args: dict[str, Any]) -> kit.Outcome:
            agent = AssistantAgent("agent", model_client=calling(name, args), tools=[tool])
            run = await agent.run(task="call the tool", cancellation_token=token)
            results = [
                r
                for m in run.messages
                if isinstance(m, ToolCallExecutionEvent)
                for r in m.content
                if r.call_id == "c1"
            ]
            if not results:
                return kit.Outcome(raised="the run ended with no result for the call")
            got = results[0]
            return kit.Outcome(
                result={"content": [kit.text(got.content)], "isError": bool(got.is_error)}
            )

        yield execute


if __name__ == "__main__":
    kit.main(AutoGen(), kit.RegistryControl(AutoGen))
