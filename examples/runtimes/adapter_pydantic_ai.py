"""pydantic-ai's agent loop at outcome level: a ``FunctionModel`` calls the scenario's tool once.

    toolcancel conform --revision seed --adapter python examples/runtimes/adapter_pydantic_ai.py

Each vector builds an ``Agent`` whose model is a ``FunctionModel`` (pydantic-ai's own test model:
no network, no key): its first response calls the tool (``tool``, or ``no_such_tool`` when the
scenario's tool is unknown) with the scenario's arguments, its second ends the run with text.
The call the contract calls ``execute()`` is that tool call, seen from the model: its result is
the part the model receives next -- a ``ToolReturnPart`` (``content`` the tool's return value,
``meta`` its ``ToolReturn`` metadata, ``isError`` false) or a ``RetryPromptPart`` (the text
pydantic-ai sends the model instead, ``isError`` true).  The call settles when that part reaches
the model, or when ``Agent.run`` raises.  The caller's signal, a row each: here the caller
cancels the task that awaits ``Agent.run`` (``cancel: ["task"]``); in
``adapter_pydantic_ai__cancellation_token.py`` it is pydantic-ai's own ``CancellationToken``
passed to ``Agent.run(..., cancellation_token=...)``, cancelled when the caller aborts --
already cancelled when it aborted before the call (``cancel: ["signal"]``; the run then raises
``RunCancelled``).

Capabilities: ``around``, pydantic-ai's ``wrap_tool_execute`` hook (``Hooks(tool_execute=...)``
in the agent's ``capabilities``) -- the scenario's wrappers composed into that one hook, outermost
first, each as spec/vectors/README.md says (``delegate`` awaits ``handler(args)``, ``retry``
awaits it twice, ``short_success`` returns its own value, which becomes the tool's return); a
hook gets no signal to replace or remove (``replace_signal``, ``remove_signal`` false), and it
has no error result to answer with -- a tool's error is an exception the run counts as a retry
(``ModelRetry``) or raises -- so ``short_error`` is refused (``Unsupported``).  The other stages
pydantic-ai has are not driven, each for the reason ``undriven`` gives (published on the page):
``before_tool_execute`` and ``after_tool_execute`` can rewrite arguments and results but have no
decision of their own (allow, deny, ask; accept, block), so the contract's pre- and post-execute
policies have nothing to map onto; an approval (``requires_approval``) ends the run with a
``DeferredToolRequests`` and resumes in another run, which the protocol's one call cannot hold.
``timeout_policy``: the tool's own ``timeout`` (``tool_plain(timeout=...)``) is the scenario's
budget (``kit.Call.budget_s``); pydantic-ai enforces it with ``anyio.fail_after`` around the tool
and, when it passes, sends the model a retry prompt ("Timed out after 0.1 seconds.") -- the
result the call gets, with the tool's default retries -- which the adapter reports to the kit
(``kit.Call.timed_out``).  The tool gets no cancellation signal object
(its ``RunContext`` can request a cancellation, not observe one); it gets, as every Python body
does, the cancellation of its task -- its await interrupted, ``Task.cancelling()`` positive
(``toolcancel.runtimes.task_signal``) -- which is what ``body_signal`` declares.

Where ``toolcancel.integrations.pydantic_ai`` goes in (a capability of the run):
:meth:`PydanticAi.integration`, none here; ``adapter_pydantic_ai__integrated.py`` puts one there.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any, ClassVar

from pydantic_ai import Agent, CancellationToken, ToolReturn
from pydantic_ai.capabilities import Hooks
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from toolcancel import runtimes as kit


def as_result(part: ToolReturnPart | RetryPromptPart) -> dict[str, Any]:
    """The contract's result (R1's keys) for what the model received for the tool call."""
    if isinstance(part, RetryPromptPart):
        message = part.content if isinstance(part.content, str) else part.model_response()
        return {"content": [kit.text(message)], "isError": True}
    content = [kit.text(part.content)] if isinstance(part.content, str) else part.content
    result: dict[str, Any] = {"content": content, "isError": part.outcome != "success"}
    if part.metadata is not None:
        result["meta"] = part.metadata
    return result


Handler = Callable[[Any], Awaitable[Any]]


def timed_out(part: RetryPromptPart) -> bool:
    """The retry prompt pydantic-ai sends for a tool that exceeded its ``timeout``
    (``FunctionToolset.call_tool``: ``ModelRetry(f'Timed out after {timeout} seconds.')``)."""
    return isinstance(part.content, str) and part.content.startswith("Timed out after ")


def wrapper(call: kit.Call, i: int, kind: str) -> Callable[[Any, Handler], Awaitable[Any]]:
    """Wrapper ``i`` of the scenario around ``handler`` (``kit.Call.wrap``); a short success is
    the hook's own return value."""
    if kind not in kit.WRAPPERS or kind == "short_error":
        raise kit.Unsupported(
            f"wrapper {kind!r}: a tool_execute hook has no signal slot and no error result"
        )

    async def wrap(args: Any, handler: Handler) -> Any:
        return await call.wrap(i, kind, lambda: handler(args), lambda text, is_error: text)

    return wrap


def around(call: kit.Call) -> Hooks[Any]:
    """The scenario's wrappers as one ``tool_execute`` hook, outermost first."""
    chain = [wrapper(call, i, kind) for i, kind in enumerate(call.scenario["wrappers"])]

    async def tool_execute(ctx: Any, *, call: Any, tool_def: Any, args: Any,
                           handler: Handler) -> Any:  # fmt: skip
        del ctx, call, tool_def
        inner = handler
        for wrap in reversed(chain):
            inner = functools.partial(wrap, handler=inner)
        return await inner(args)

    return Hooks(tool_execute=tool_execute)


class PydanticAi(kit.Runtime):
    implementation = f"pydantic-ai-slim {version('pydantic-ai-slim')} (FunctionModel, task cancel)"
    capabilities: ClassVar[dict[str, bool]] = {  # see the docstring
        "body_signal": True,
        "around": True,
        "replace_signal": False,
        "remove_signal": False,
        "timeout_policy": True,
    }
    cancel: ClassVar[list[str]] = ["task"]
    undriven: ClassVar[dict[str, str]] = {
        "pre_policy": "Hooks.before_tool_execute rewrites the arguments; it has no decision "
        "(allow, deny, ask) for the contract's pre-execute policy to map onto -- a hook that "
        "raises ends the run, which the body's failure already shows",
        "post_policy": "Hooks.after_tool_execute rewrites the result; it has no accept or block "
        "decision, and none of its own contexts, for the contract's post-execute policy",
        "approval": "deferred tools (requires_approval): an approval ends the run with "
        "DeferredToolRequests and resumes it in another run, which the protocol's one call "
        "cannot hold",
    }

    absent: ClassVar[dict[str, str]] = {
        "guards": "nothing checks a call after it is allowed and before it runs: a tool's "
        "prepare function decides whether the model sees the tool at all, before any call",
        "replace_signal": "no signal slot: Hooks(tool_execute=...) gets the call, the tool "
        "definition, the arguments and the handler; a tool's one cancellation is its task's",
        "remove_signal": "no signal slot (see replace_signal)",
    }

    def integration(self, call: kit.Call) -> Any:
        """The capability an integration adds to the run (``toolcancel.runtimes.integrated``):
        none here."""
        return None

    @asynccontextmanager
    async def open(self, call: kit.Call) -> AsyncIterator[kit.Execute]:
        name = "tool" if call.scenario["tool_known"] else "no_such_tool"
        glue = self.integration(call)
        token = CancellationToken()
        if self.cancel == ["signal"]:  # pydantic-ai's own: Agent.run(..., cancellation_token=)
            call.on_abort(token.cancel)
        received: list[ToolReturnPart | RetryPromptPart] = []
        box: dict[str, Any] = {}

        async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            del info
            last = messages[-1]
            parts = [
                p
                for p in (last.parts if isinstance(last, ModelRequest) else ())
                if isinstance(p, ToolReturnPart | RetryPromptPart) and p.tool_call_id == "c1"
            ]
            if not parts:
                return ModelResponse(
                    parts=[ToolCallPart(tool_name=name, args=box["args"], tool_call_id="c1")]
                )
            received.append(parts[0])
            if isinstance(parts[0], RetryPromptPart) and timed_out(parts[0]):
                call.timed_out()
            box["settled"] = call.settled_now()
            return ModelResponse(parts=[TextPart("finished")])

        hooks = [around(call)] if call.scenario["wrappers"] else []
        agent = Agent(FunctionModel(model), capabilities=[*hooks, *([glue] if glue else [])])
        if call.scenario["tool_known"]:

            @agent.tool_plain(name="tool", timeout=call.budget_s)
            async def tool(q: Any) -> Any:
                del q
                value = await call.body(kit.task_signal, None)
                if isinstance(value, dict):
                    return ToolReturn(return_value=value["content"], metadata=value["meta"])
                return value

        async def execute(args: dict[str, Any]) -> kit.Outcome:
            box["args"] = args
            try:
                await agent.run("call the tool", cancellation_token=token)
            except Exception as exc:
                # The run raised: that is the call's answer (a cancellation the kit reads
                # itself).  What the run may have recorded for the call in its message history
                # is not what the caller got: pydantic-ai keeps a tool's late success there by
                # design, so that resuming from the history does not run it again.
                call.outcome = kit.Outcome(raised=f"Agent.run raised {type(exc).__name__}: {exc}")
                raise
            call.settled_at(box["settled"])
            return kit.Outcome(result=as_result(received[0]))

        yield execute


if __name__ == "__main__":
    kit.main(PydanticAi(), kit.RegistryControl(PydanticAi))
