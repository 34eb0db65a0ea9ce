"""The control row: toolcancel's own registry behind a runtime adapter's mapping.

A verdict is a claim about someone else's work, so our reference goes through the same mapping
first.  :class:`RegistryControl` copies what a runtime's adapter declares -- its stages and
channels (``capabilities``) and how its caller cancels (``cancel``) -- and plays each vector with
:class:`~toolcancel.ToolRegistry` in the runtime's place: the call is ``registry.execute`` with
a caller signal the caller cancels only as the runtime's caller does -- never, where that
caller cancels its task or its cancel scope; through :meth:`~toolcancel.runtimes.Call.on_abort`
where it uses the runtime's own cancellation API (``signal``: ours is the caller's
``AbortController``); the result is the registry's :class:`~toolcancel.ToolResult` as R1's
keys; a call that raised is answered by the same driver rules.  The body is the scenario's
(:meth:`~toolcancel.runtimes.Call.body`) and sees cancellation as a tool of our registry does:
the view's signal, a cooperative body stopping when it aborts.  A mapping that drives
the runtime's around stage (``around``) gets the scenario's wrappers as the registry's own
around hooks (:func:`control_wrapper`), one that drives its pre- or post-execute stage
(``pre_policy``, ``post_policy``) the scenario's listeners (:func:`control_pre`,
:func:`control_post`), on the same gates; one that gives the runtime's tool timeout the
scenario's budget (``timeout_policy``) the registry's own timeout policy with that budget
(:func:`~toolcancel.install_timeout_policy`, innermost, as the scenario says).

The control must pass every vector conform sends it.  Where it fails, the mapping (or the
judge's reading of it) is wrong, and a runtime failing the same vector the same way has not
shown a defect of its own (:mod:`toolcancel.teaching.realworld` publishes it as the mapping's).

For a runtime whose registry sits behind a wire protocol (MCP), the adapter builds its control
itself -- toolcancel's server (:func:`~toolcancel.runtime.mcp.build_server`) behind the same
client -- with :func:`control_server` (or :func:`registry_for` and :func:`control_body`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Any, ClassVar

import anyio

from ..contract.results import ToolError as ContractToolError
from ..contract.results import ToolOutput, ToolResult, text_block
from ..oracle.scenario_language import (
    BLOCK_CONTEXT,
    BLOCK_TEXT,
    POST_CONTEXT,
    POST_FAILURE,
    REWRITTEN,
)
from ..runtime.execution import Execution
from ..runtime.hooks import (
    Accept,
    Allow,
    Approval,
    ApprovalRequest,
    AroundHook,
    Ask,
    Block,
    Deny,
    Next,
    PostDecision,
    PostHook,
    PreDecision,
    PreHook,
)
from ..runtime.signals import AbortController, AbortSignal
from ..runtime.timeout_policy import TOOL_TIMEOUT, install_timeout_policy
from ..runtime.toolregistry import ToolRegistry
from .call import WRAPPERS, Call, Execute, Outcome, Signal, ToolError, Unsupported
from .driver import Runtime


def _version() -> str:
    try:
        return version("toolcancel")
    except PackageNotFoundError:  # a source tree on sys.path, not installed
        return "source"


def control_body(call: Call) -> Callable[[Any, Execution], Any]:
    """The scenario's body as a tool of toolcancel's registry: its signal is the view's, a
    cooperative body stops waiting when that signal aborts (and then does what the scenario
    says: returns, or throws -- a failure that must survive the abort), an uncooperative one
    ignores it (:meth:`~toolcancel.runtimes.Call.held`), and its value becomes a
    :class:`~toolcancel.ToolOutput` or the contract's ``ToolError``."""

    async def body(args: Any, view: Execution) -> Any:
        del args
        watched = view.signal
        stop = anyio.Event()

        def signal() -> Signal:
            s = view.signal
            if s is None or not s.aborted:
                return {"aborted": False, "reason": None}
            timer = getattr(s.reason, "code", None) == TOOL_TIMEOUT
            return {"aborted": True, "reason": "timeout" if timer else "caller"}

        def heard(_: AbortSignal) -> None:
            stop.set()

        if watched is not None:
            if watched.aborted:
                stop.set()
            else:
                watched.add_listener(heard)
        try:
            value = await call.body(signal, stop)
        except ToolError as exc:
            raise ContractToolError(str(exc), code=exc.code) from None
        finally:
            if watched is not None:
                watched.remove_listener(heard)
        if isinstance(value, dict):
            return ToolOutput(value["content"], meta=value["meta"])
        return value

    return body


def control_wrapper(call: Call, i: int, kind: str) -> AroundHook:
    """Wrapper ``i`` of the scenario as an around hook of toolcancel's registry
    (:meth:`~toolcancel.runtimes.Call.wrap`, on the kit's gates as a runtime adapter's wrapper).
    Raises :class:`~toolcancel.runtimes.Unsupported` for a wrapper that needs the signal slot."""
    if kind not in WRAPPERS:
        raise Unsupported(f"wrapper {kind!r}: the control plays no signal-slot wrapper")

    def answer(text: str, is_error: bool) -> ToolResult:
        return ToolResult((text_block(text),), is_error=is_error)

    async def around(view: Execution, nxt: Next) -> ToolResult:
        del view
        return await call.wrap(i, kind, nxt, answer)

    return around


def control_pre(call: Call) -> PreHook:
    """The scenario's one pre-execute listener (spec/vectors/README.md's ``pre``), waiting at the
    kit's gate ``pre`` as a runtime adapter's pre-execute stage does."""

    async def pre(view: Execution, nxt: Next) -> PreDecision:
        del view, nxt
        await call.gate("pre")
        d = call.scenario["pre"]
        if d == "allow":
            return Allow()
        if d == "deny":
            return Deny("policy refused the call")
        if d == "ask":
            return Ask("needs a human")
        if d == "throw":
            raise RuntimeError("pre-execute policy failed")
        raise ContractToolError("policy store unavailable", code="POLICY_DOWN")

    return pre


def control_post(call: Call) -> PostHook:
    """The scenario's one post-execute listener (spec/vectors/README.md's ``post``), waiting at
    the kit's gate ``post`` as a runtime adapter's post-execute stage does."""

    async def post(view: Execution, result: ToolResult, nxt: Next) -> PostDecision:
        del view, result, nxt
        await call.gate("post")
        p = call.scenario["post"]
        if p == "accept":
            return Accept()
        if p == "accept_content":
            return Accept(content=[text_block(REWRITTEN)])
        if p == "accept_contexts":
            return Accept(contexts=[POST_CONTEXT])
        if p == "block":
            return Block([text_block(BLOCK_TEXT)], contexts=[BLOCK_CONTEXT])
        raise RuntimeError(POST_FAILURE)

    return post


async def _unasked(request: ApprovalRequest) -> Approval:
    """The scenario's seam where the mapping drives no approval: mounted, so that an ask the
    call cannot route (no agent) is refused as the contract says, and never asked (the driver
    refuses a scenario whose ask reaches it)."""
    raise Unsupported(f"the approval seam was asked ({request.name!r}): the mapping has none")


def registry_for(call: Call, capabilities: dict[str, bool] | None = None) -> ToolRegistry:
    """A registry of the vector's revision holding the scenario's tool (``tool``; none when the
    scenario's is unknown) inside the scenario's wrappers, outermost first -- and, where the
    mapping's ``capabilities`` declare them, the scenario's pre- and post-execute listeners
    (always mounted then, as the runtime's stage is: an ``allow`` or ``accept`` waits too) and
    the timeout policy with the tool's budget (:attr:`~toolcancel.runtimes.Call.budget_s`)."""
    registry = ToolRegistry(revision=call.revision)
    if (capabilities or {}).get("pre_policy"):
        registry.add_pre_execute(control_pre(call))
        if call.scenario["approval_seam"]:
            registry.set_approval(_unasked)  # an ask without an agent is refused for want of one
    if (capabilities or {}).get("post_policy"):
        registry.add_post_execute(control_post(call))
    for i, kind in enumerate(call.scenario["wrappers"]):
        registry.add_around(control_wrapper(call, i, kind))
    budget = (capabilities or {}).get("timeout_policy") and call.budget_s
    if budget:
        install_timeout_policy(registry)  # after the wrappers: the innermost, as the vector says
    if call.scenario["tool_known"]:
        registry.register("tool", control_body(call), timeout_ms=budget * 1000 if budget else None)
    return registry


def control_server(call: Call, capabilities: dict[str, bool] | None = None) -> Any:
    """toolcancel's MCP server (:func:`~toolcancel.runtime.mcp.build_server`) over
    :func:`registry_for` (with the mapping's ``capabilities``), for the control of a runtime
    behind MCP (needs the ``mcp`` extra)."""
    from ..runtime.mcp import build_server  # the mcp extra: only an MCP control needs it

    return build_server(registry_for(call, capabilities), name="toolcancel-vectors")


class RegistryControl(Runtime):
    """toolcancel's :class:`~toolcancel.ToolRegistry` behind ``mapping``'s declarations."""

    capabilities: ClassVar[dict[str, bool]] = {}
    cancel: ClassVar[list[str]] = []

    def __init__(self, mapping: type[Runtime]) -> None:
        self.capabilities = dict(mapping.capabilities)  # type: ignore[misc]
        self.cancel = list(mapping.cancel)  # type: ignore[misc]
        self.answered = mapping.answered  # type: ignore[misc]
        self.implementation = (  # type: ignore[misc]
            f"toolcancel {_version()} ToolRegistry, control of {mapping.implementation}"
        )

    @asynccontextmanager
    async def open(self, call: Call) -> AsyncIterator[Execute]:
        registry = registry_for(call, self.capabilities)
        name = "tool" if call.scenario["tool_known"] else "no_such_tool"
        published: list[ToolResult] = []
        if self.answered:  # as the mapping's integration does: what the call published
            registry.add_observer(lambda view, result: published.append(result))

        async def execute(args: dict[str, Any]) -> Outcome:
            caller = AbortController()  # the caller's signal, aborted only as the mapping's is
            if self.cancel == ["signal"]:  # the runtime's own API: ours is this controller
                call.on_abort(caller.abort)
            result = await registry.execute(name, args, signal=caller.signal)
            return Outcome(result=result.to_data())

        async def settled() -> ToolResult:
            return published[0]  # the call published before its cancellation came back (P2)

        yield call.answered(execute, settled) if self.answered else execute
