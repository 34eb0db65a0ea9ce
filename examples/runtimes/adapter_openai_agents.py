"""The OpenAI Agents SDK's agent loop at outcome level: a ``ScriptedModel`` calls the tool once.

    toolcancel conform --revision seed --adapter python examples/runtimes/adapter_openai_agents.py

Each vector builds an ``Agent`` whose model is the SDK's own deterministic test model
(``agents.testing.ScriptedModel``: no network, no key, tracing off): its first step calls the tool
(``tool``, or ``no_such_tool`` when the scenario's tool is unknown) with the scenario's arguments,
its second ends the run with text.  The tool is a ``@function_tool`` over an async function.  The
call the contract calls ``execute()`` is that tool call, seen from the model: its result is the
``function_call_output`` the model receives next (``content`` its output text).  The call settles
when that output reaches the model, or when the run raises or ends without it.

The caller's signal, one row each (``Variant``):

* ``task`` (this file): the caller cancels the task awaiting ``Runner.run`` -- how an asyncio
  program cancels a run (``cancel: ["task"]``);
* ``streamed`` (``adapter_openai_agents__cancel_immediate.py``, ``..._after_turn.py``): the
  SDK's own run cancellation, ``Runner.run_streamed(...).cancel(mode)`` -- ``"immediate"`` or
  ``"after_turn"`` -- fired when the caller aborts (``cancel: ["signal"]``).  A run the caller
  had cancelled before it began is handed over already cancelled.

``isError``: a function tool's output carries no error flag; a failing tool's output is what its
``failure_error_function`` returns.  The adapter passes one that returns the SDK's own
``default_tool_error_function`` text unchanged and notes that the SDK called it: ``isError`` is
whether the SDK took its tool-failure path for the call.

Capabilities: none of the contract's stages is declared.  The SDK has them -- tool input
guardrails (pre-execute), ``needs_approval`` (an interruption), per-tool ``timeout``, tool output
guardrails (post-execute), ``RunHooks.on_tool_start/on_tool_end`` -- and this adapter drives none
of them yet, so conform sends it only plain tool calls.  A function tool's output has no metadata
channel and its arguments are JSON text: ``meta`` and ``raw_args`` are declared false.  The
tool gets no cancellation signal object; it gets, as every Python body does, the cancellation of
its task (``toolcancel.runtimes.task_signal``), which is what ``body_signal`` declares.

The points where ``toolcancel.integrations.openai_agents`` goes in (the agent, the run's
configuration, awaiting the run, its cancellation, reading the call's result) go through
:meth:`OpenAiAgents.integration`: here :class:`NoIntegration`, the SDK alone; the integrated
rows (``adapter_openai_agents__integrated.py``, ...) put a ``ToolCalls`` there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any, ClassVar, Literal

from agents import (
    Agent,
    RunConfig,
    RunContextWrapper,
    Runner,
    ToolCallOutputItem,
    default_tool_error_function,
    function_tool,
)
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from toolcancel import runtimes as kit

NO_TRACES = RunConfig(tracing_disabled=True)


def as_result(output: object, failed: bool, error: Any = None) -> dict[str, Any]:
    """The contract's result (R1's keys) for the output the model received for the call;
    ``failed``: the SDK routed the call through its tool-failure path; ``error``: R1's error,
    if the run's history item carries one in its ``custom_data`` (an integration puts it
    there: the output text cannot carry it)."""
    result = {"content": [kit.text(str(output))], "isError": failed}
    return result if error is None else {**result, "error": error}


def history_error(items: list[Any]) -> Any:
    """The error the run's history keeps with the call's output item (``custom_data``)."""
    kept = [i.custom_data for i in items if isinstance(i, ToolCallOutputItem) and i.custom_data]
    return kept[0].get("toolcancel/error") if kept else None


class NoIntegration:
    """The plain row's integration: none.  Each method does what the SDK does alone at the point
    where ``toolcancel.integrations.openai_agents.ToolCalls`` (the same methods) changes it."""

    def agent(self, agent: Agent[Any]) -> Agent[Any]:
        return agent

    def run_config(self, config: RunConfig) -> RunConfig:
        return config

    async def run(self, running: Awaitable[Any]) -> Any:
        return await running

    def abort(self) -> None:
        """Only the run's own ``cancel()`` tells anyone."""

    def result_of(self, call_id: str) -> Any:
        return None

    async def settled(self) -> list[Any]:
        return []


class OpenAiAgents(kit.Runtime):
    implementation = f"openai-agents {version('openai-agents')} (ScriptedModel, task cancel)"
    capabilities: ClassVar[dict[str, bool]] = {
        "body_signal": True,  # see the docstring
        "meta": False,
        "raw_args": False,
    }
    cancel: ClassVar[list[str]] = ["task"]
    undriven: ClassVar[dict[str, str]] = {
        "pre_policy": "tool input guardrails: not driven yet (this adapter's work to do)",
        "post_policy": "tool output guardrails: not driven yet",
        "approval": "needs_approval: not driven yet -- an approval interrupts the run and "
        "resumes it from its state, which the one-call protocol does not express",
        "timeout_policy": "a function tool's timeout: not driven yet",
        "observers": "RunHooks.on_tool_start/on_tool_end: not driven yet",
    }
    streamed: ClassVar[Literal["immediate", "after_turn"] | None] = None
    """The run's own cancellation mode, for a ``cancel: ["signal"]`` variant."""

    def integration(self, call: kit.Call) -> Any:
        """What stands at the integration's points for this vector (:class:`NoIntegration`)."""
        return NoIntegration()

    @asynccontextmanager
    async def open(self, call: kit.Call) -> AsyncIterator[kit.Execute]:
        name = "tool" if call.scenario["tool_known"] else "no_such_tool"
        glue = self.integration(call)
        received: list[object] = []
        box: dict[str, Any] = {}

        def reply(seen: ModelCall) -> list[Any]:
            outputs = [
                i.get("output")
                for i in seen.input
                if isinstance(i, dict)
                and i.get("type") == "function_call_output"
                and i.get("call_id") == "c1"
            ]
            received.append(outputs[0])
            box["settled"] = call.settled_now()
            return [assistant_message("finished")]

        def failed(glue: Any) -> bool:
            """The SDK took its tool-failure path, or the call's published result is an error."""
            published = glue.result_of("c1")
            return "failed" in box or (published is not None and published.is_error)

        def failure(ctx: RunContextWrapper[Any], error: Exception) -> str:
            # The SDK's own answer to a failing tool, unchanged; seeing it called is the flag.
            box["failed"] = True
            return default_tool_error_function(ctx, error)

        @function_tool(name_override="tool", failure_error_function=failure)
        async def tool(q: str) -> str:
            del q
            value = await call.body(kit.task_signal, None)
            return " ".join(c["text"] for c in value)

        async def execute(args: dict[str, Any]) -> kit.Outcome:
            model = ScriptedModel(
                [[function_call(name, args, call_id="c1")], ModelStep.respond(reply)]
            )
            agent = glue.agent(Agent(name="agent", model=model, tools=[tool]))
            config = glue.run_config(NO_TRACES)
            if self.streamed is None:
                done = await glue.run(Runner.run(agent, "call the tool", run_config=config))
                items = done.new_items
            else:
                run = Runner.run_streamed(agent, "call the tool", run_config=config)
                mode = self.streamed
                call.on_abort(lambda: run.cancel(mode))
                call.on_abort(glue.abort)
                async for _ in run.stream_events():
                    pass
                if not received:
                    # The cancelled run ended without calling the model again: what it kept of
                    # the call is the output item in its history, if the tool got that far;
                    # else what the call published, if the program can wait for that.
                    published = await glue.settled()
                    kept = [i.output for i in run.new_items if isinstance(i, ToolCallOutputItem)]
                    if kept:
                        error = history_error(run.new_items)
                        return kit.Outcome(result=as_result(kept[0], failed(glue), error))
                    if published:
                        return kit.Outcome(result=published[0].result.to_data())
                    return kit.Outcome(raised="the cancelled run ended with no output for the call")
                items = run.new_items
            call.settled_at(box["settled"])
            return kit.Outcome(result=as_result(received[0], failed(glue), history_error(items)))

        yield execute


if __name__ == "__main__":
    kit.main(OpenAiAgents(), kit.RegistryControl(OpenAiAgents))
