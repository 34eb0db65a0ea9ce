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
whether the SDK took its tool-failure path for the call (or a guardrail rejected it, below).

Capabilities: ``pre_policy``, a tool input guardrail on the tool (``tool_input_guardrails``):
it waits at gate ``pre``, then ``allow`` is ``ToolGuardrailFunctionOutput.allow()``, ``deny``
its ``reject_content("Error: policy refused the call")`` (the model gets that message instead of
running the tool), ``throw``/``throw_structured`` raise; ``ask`` is refused (no approval is
driven).  ``post_policy``, a tool output guardrail (``tool_output_guardrails``): it waits at gate
``post``, then ``accept`` is ``allow()``, ``block`` ``reject_content("Error: blocked by
post-execute")``, ``throw`` raises; ``accept_content`` and ``accept_contexts`` are refused (an
output guardrail replaces an output only by rejecting it, and has no contexts).  A rejection
carries no error flag; the SDK records it as the guardrail's ``reject_content`` behaviour in
the run's ``tool_input_guardrail_results``/``tool_output_guardrail_results``, which is what
``isError`` reads for it (as it reads the tool-failure path below).  ``timeout_policy``: the
function tool's own ``timeout`` (``timeout_seconds``) is the scenario's budget
(``kit.Call.budget_s``); the SDK runs the tool under ``asyncio.wait_for`` and, past it, answers
with its ``timeout_error_function`` -- here one returning the SDK's own
``default_tool_timeout_error_message`` unchanged, noting the flag and telling the kit
(``kit.Call.timed_out``).  The SDK's other stages -- ``needs_approval``, ``RunHooks`` -- are
not driven (``undriven`` says why).  A function tool's output has no metadata
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
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    ToolOutputGuardrailData,
    ToolTimeoutError,
    default_tool_error_function,
    function_tool,
    tool_input_guardrail,
    tool_output_guardrail,
)
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from agents.tool import default_tool_timeout_error_message
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


def refused(call: kit.Call) -> str | None:
    """Why the guardrails cannot play ``call``'s pre- or post-execute decision, if they cannot."""
    if call.scenario["pre"] == "ask":
        return "pre 'ask': an input guardrail has no approval to ask (needs_approval is not driven)"
    if call.scenario["post"] in ("accept_content", "accept_contexts"):
        return (
            f"post {call.scenario['post']!r}: a tool output guardrail replaces an output only by "
            "reject_content, which the SDK records as a rejection, and has no contexts"
        )
    return None


class OpenAiAgents(kit.Runtime):
    implementation = f"openai-agents {version('openai-agents')} (ScriptedModel, task cancel)"
    capabilities: ClassVar[dict[str, bool]] = {
        "body_signal": True,  # see the docstring
        "pre_policy": True,
        "post_policy": True,
        "timeout_policy": True,
        "meta": False,
        "raw_args": False,
    }
    cancel: ClassVar[list[str]] = ["task"]
    undriven: ClassVar[dict[str, str]] = {
        "approval": "needs_approval: an approval interrupts the run (RunResult.interruptions) "
        "and resumes it from its RunState in another Runner.run, which the protocol's one call "
        "cannot hold",
        "observers": "RunHooks.on_tool_start/on_tool_end are told of the tool, not handed its "
        "result to observe once, frozen: nothing of R22/R29 to map them onto",
    }
    absent: ClassVar[dict[str, str]] = {
        "around": "nothing wraps a function tool's invocation: tool input and output "
        "guardrails run before and after it (driven as pre_policy and post_policy), RunHooks "
        "are told of it -- so no wrapper, and no signal slot, R16-R19's and R23's stage",
        "guards": "a tool input guardrail is the SDK's one check before a tool runs, driven "
        "as pre_policy; nothing checks the call again once it allowed it",
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

        def flagged() -> bool:
            """The SDK took its tool-failure path, a guardrail rejected the call, or the call's
            published result is an error."""
            published = glue.result_of("c1")
            return (
                "failed" in box
                or "rejected" in box
                or (published is not None and published.is_error)
            )

        def failure(ctx: RunContextWrapper[Any], error: Exception) -> str:
            # The SDK's own answer to a failing tool, unchanged; seeing it called is the flag.
            box["failed"] = True
            return default_tool_error_function(ctx, error)

        def timed_out(ctx: RunContextWrapper[Any], error: Exception) -> str:
            # The SDK's own answer to a tool past its timeout, unchanged: the flag, and the kit
            # told that the runtime's timeout ended the call.
            assert isinstance(error, ToolTimeoutError)
            box["failed"] = True
            call.timed_out()
            return default_tool_timeout_error_message(
                tool_name=error.tool_name, timeout_seconds=error.timeout_seconds
            )

        @tool_input_guardrail
        async def pre(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
            del data
            await call.gate("pre")
            decision = call.scenario["pre"]
            if decision == "allow":
                return ToolGuardrailFunctionOutput.allow()
            if decision == "deny":
                box["rejected"] = True
                return ToolGuardrailFunctionOutput.reject_content("Error: policy refused the call")
            if decision == "throw":
                raise RuntimeError("pre-execute policy failed")
            raise kit.ToolError("policy store unavailable", "POLICY_DOWN")

        @tool_output_guardrail
        async def post(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
            del data
            await call.gate("post")
            decision = call.scenario["post"]
            if decision == "accept":
                return ToolGuardrailFunctionOutput.allow()
            if decision == "block":
                box["rejected"] = True
                return ToolGuardrailFunctionOutput.reject_content("Error: blocked by post-execute")
            raise RuntimeError("post-execute policy failed")

        @function_tool(
            name_override="tool",
            failure_error_function=failure,
            timeout=call.budget_s,
            timeout_error_function=timed_out,
            tool_input_guardrails=[pre],
            tool_output_guardrails=[post],
        )
        async def tool(q: str) -> str:
            del q
            value = await call.body(kit.task_signal, None)
            return " ".join(c["text"] for c in value)

        async def execute(args: dict[str, Any]) -> kit.Outcome:
            if (why := refused(call)) is not None:
                raise kit.Unsupported(why)
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
                        return kit.Outcome(result=as_result(kept[0], flagged(), error))
                    if published:
                        return kit.Outcome(result=published[0].result.to_data())
                    return kit.Outcome(raised="the cancelled run ended with no output for the call")
                items = run.new_items
            call.settled_at(box["settled"])
            return kit.Outcome(result=as_result(received[0], flagged(), history_error(items)))

        yield execute


if __name__ == "__main__":
    kit.main(OpenAiAgents(), kit.RegistryControl(OpenAiAgents))
