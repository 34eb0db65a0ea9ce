"""What hooks, guards, the approval seam and observers exchange with the registry.

The decisions pre- and post-execute hooks return, the approval seam's question and answers, a
registered tool's definition, a row of ``in_flight()``, and the hooks' signatures.  They live
apart from the registry's driver so that every build of it in a process -- the package's, and the
benchmark's copy with its tracing stripped (``bench/untraced.py``) -- takes and returns the same
classes.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..contract.core import PathStep
from ..contract.results import ToolResult
from .signals import AbortSignal

if TYPE_CHECKING:
    from .execution import Execution


@dataclass(frozen=True, slots=True)
class Allow:
    """Pre-execute decision: go on (guards still run and may deny)."""


@dataclass(frozen=True, slots=True)
class Deny:
    """Pre-execute decision: refuse with ``reason`` (the model reads ``Error: <reason>``)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Ask:
    """Pre-execute decision: ask the approval seam (``reason`` is used when no seam is mounted)."""

    reason: str | None = None


PreDecision = Allow | Deny | Ask


@dataclass(frozen=True, slots=True)
class Accept:
    """Post-execute decision: keep the result; optionally replace its content, append contexts."""

    content: Sequence[Any] | None = None
    contexts: Sequence[Any] = ()


@dataclass(frozen=True, slots=True)
class Block:
    """Post-execute decision: replace the result by ``feedback`` as an error (no error key)."""

    feedback: Sequence[Any]
    contexts: Sequence[Any] = ()


PostDecision = Accept | Block


class Approval(enum.Enum):
    """What the approval seam answers."""

    APPROVED = "approved"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What the approval seam is asked: which call, why, and the signal to stop waiting on."""

    call_id: str
    name: str
    arguments: Any
    agent: str
    reason: str | None
    signal: AbortSignal | None
    call_signal: AbortSignal | None = None
    """The call's own signal (P1): task cancellation aborts it even for a call without a caller
    signal, where ``signal`` is absent.  A seam that waits should watch both."""


Next = Callable[[], Awaitable[Any]]
PreHook = Callable[["Execution", Next], Awaitable[PreDecision]]
AroundHook = Callable[["Execution", Next], Awaitable[ToolResult]]
PostHook = Callable[["Execution", ToolResult, Next], Awaitable[PostDecision]]
Guard = Callable[["Execution"], "str | None"]
ApprovalSeam = Callable[[ApprovalRequest], Awaitable[Approval]]
Observer = Callable[["Execution", ToolResult], "Awaitable[None] | None"]
ToolBody = Callable[[Any, "Execution"], Awaitable[Any]]
StepTap = Callable[["Execution", PathStep], None]


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A registered tool.  ``timeout_ms`` is a declared budget; it is never shown to a model."""

    name: str
    body: ToolBody
    timeout_ms: float | None = None
    agent: str | None = None
    description: str = ""
    parallel_safe: bool = False
    """Whether a :class:`~toolcancel.TurnScheduler` may overlap this tool's calls with others."""
    input_schema: Mapping[str, Any] | None = None
    """The JSON Schema of the tool's arguments, as a model is shown it (MCP's ``inputSchema``);
    ``None``: any object."""


@dataclass(frozen=True, slots=True)
class InFlight:
    """One call that has not materialized yet, as :meth:`ToolRegistry.in_flight` reports it."""

    call_id: str
    name: str
    state: str
    """The call machine's state (``draining``: its body has been told to stop and is running)."""
    seconds: float
    """How long the call has been in ``state``, in the event loop's clock."""
    aborted: bool
    """Whether the call's signal, or the signal the body or approval holds, has aborted."""
