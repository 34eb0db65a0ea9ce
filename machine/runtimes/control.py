"""The control row: toolcancel's own registry behind a runtime adapter's mapping.

A verdict is a claim about someone else's work, so our reference goes through the same mapping
first.  :class:`RegistryControl` copies what a runtime's adapter declares -- its stages and
channels (``capabilities``) and how its caller cancels (``cancel``) -- and plays each vector with
:class:`~toolcancel.ToolRegistry` in the runtime's place: the call is ``registry.execute`` with
a caller signal the caller never aborts, so the caller can only cancel as the runtime's caller
does (its task, or its cancel scope); the result is the registry's :class:`~toolcancel.ToolResult`
as R1's keys; a call that raised is answered by the same driver rules.  The body is the
scenario's (:meth:`~toolcancel.runtimes.Call.body`) and sees cancellation as a tool of our
registry does: the view's signal, cooperating through :func:`~toolcancel.cancellable`.

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

from ..contract.results import ToolError as ContractToolError
from ..contract.results import ToolOutput
from ..runtime.cooperate import cancellable
from ..runtime.execution import Execution
from ..runtime.signals import AbortController
from ..runtime.toolregistry import ToolRegistry
from .call import Call, Execute, Outcome, Signal, ToolError
from .driver import Runtime


def _version() -> str:
    try:
        return version("toolcancel")
    except PackageNotFoundError:  # a source tree on sys.path, not installed
        return "source"


def control_body(call: Call) -> Callable[[Any, Execution], Any]:
    """The scenario's body as a tool of toolcancel's registry: its signal is the view's, it
    cooperates through :func:`~toolcancel.cancellable` (an uncooperative body ignores the
    cancellation, as :meth:`~toolcancel.runtimes.Call.held` says), and its value becomes a
    :class:`~toolcancel.ToolOutput` or the contract's ``ToolError``."""

    async def body(args: Any, view: Execution) -> Any:
        del args

        def signal() -> Signal:
            s = view.signal
            aborted = s is not None and s.aborted
            return {"aborted": aborted, "reason": "caller" if aborted else None}

        try:
            value = await cancellable(view, call.body(signal, None))
        except ToolError as exc:
            raise ContractToolError(str(exc), code=exc.code) from None
        if isinstance(value, dict):
            return ToolOutput(value["content"], meta=value["meta"])
        return value

    return body


def registry_for(call: Call) -> ToolRegistry:
    """A registry of the vector's revision holding the scenario's tool (``tool``; none when the
    scenario's is unknown)."""
    registry = ToolRegistry(revision=call.revision)
    if call.scenario["tool_known"]:
        registry.register("tool", control_body(call))
    return registry


def control_server(call: Call) -> Any:
    """toolcancel's MCP server (:func:`~toolcancel.runtime.mcp.build_server`) over
    :func:`registry_for`, for the control of a runtime behind MCP (needs the ``mcp`` extra)."""
    from ..runtime.mcp import build_server  # the mcp extra: only an MCP control needs it

    return build_server(registry_for(call), name="toolcancel-vectors")


class RegistryControl(Runtime):
    """toolcancel's :class:`~toolcancel.ToolRegistry` behind ``mapping``'s declarations."""

    capabilities: ClassVar[dict[str, bool]] = {}
    cancel: ClassVar[list[str]] = []

    def __init__(self, mapping: type[Runtime]) -> None:
        self.capabilities = dict(mapping.capabilities)  # type: ignore[misc]
        self.cancel = list(mapping.cancel)  # type: ignore[misc]
        self.implementation = (  # type: ignore[misc]
            f"toolcancel {_version()} ToolRegistry, control of {mapping.implementation}"
        )

    @asynccontextmanager
    async def open(self, call: Call) -> AsyncIterator[Execute]:
        registry = registry_for(call)
        name = "tool" if call.scenario["tool_known"] else "no_such_tool"

        async def execute(args: dict[str, Any]) -> Outcome:
            caller = AbortController()  # never aborted: the caller cancels as the mapping's does
            result = await registry.execute(name, args, signal=caller.signal)
            return Outcome(result=result.to_data())

        yield execute
