"""toolcancel: the cooperative, quiescent tool-cancellation contract, as a Python reference.

A caller hands a tool call to a registry with an abort signal.  Cancellation may arrive while
pre-execute policy or approval waits, while around-dispatch wrappers wait, while the body runs, or
while post-execute policy waits.  The contract (``toolcancel/spec/CONTRACT.md``) says what happens
at each of those moments; :class:`ToolRegistry` implements it over asyncio, driven by a pure
per-call machine compiled from ``toolcancel/spec/contract.toml``.
"""

from .checker import Checker, Verdict, check_file, check_lines
from .contract import Contract, RevisionContract, load_contract, load_contract_file
from .core import CallMachine, CallState, Occurrence, PathStep, choices, step
from .deadline import Deadline, TimeoutReason, checked_hint, deadline, timeout_of
from .errors import (
    ContractError,
    ContractViolation,
    NotSerializable,
    RegistryUsageError,
    TaskCancelled,
    ToolcancelError,
)
from .registry import (
    Accept,
    Allow,
    Approval,
    ApprovalRequest,
    Ask,
    Block,
    Deny,
    Execution,
    InFlight,
    InvalidBudget,
    PendingCall,
    StagedCall,
    ToolDefinition,
    ToolRegistry,
)
from .results import ErrorInfo, FrozenDict, ToolError, ToolOutput, ToolResult
from .scheduler import LogEntry, ToolCallRequest, TurnLog, TurnScheduler
from .signals import AbortController, AbortError, AbortSignal, SignalTimeoutError
from .timeout_policy import TOOL_TIMEOUT, install_timeout_policy
from .trace import TraceError, TraceEvent, TraceRecorder, read_traces

__all__ = [
    "TOOL_TIMEOUT",
    "AbortController",
    "AbortError",
    "AbortSignal",
    "Accept",
    "Allow",
    "Approval",
    "ApprovalRequest",
    "Ask",
    "Block",
    "CallMachine",
    "CallState",
    "Checker",
    "Contract",
    "ContractError",
    "ContractViolation",
    "Deadline",
    "Deny",
    "ErrorInfo",
    "Execution",
    "FrozenDict",
    "InFlight",
    "InvalidBudget",
    "LogEntry",
    "NotSerializable",
    "Occurrence",
    "PathStep",
    "PendingCall",
    "RegistryUsageError",
    "RevisionContract",
    "SignalTimeoutError",
    "StagedCall",
    "TaskCancelled",
    "TimeoutReason",
    "ToolCallRequest",
    "ToolDefinition",
    "ToolError",
    "ToolOutput",
    "ToolRegistry",
    "ToolResult",
    "ToolcancelError",
    "TraceError",
    "TraceEvent",
    "TraceRecorder",
    "TurnLog",
    "TurnScheduler",
    "Verdict",
    "check_file",
    "check_lines",
    "checked_hint",
    "choices",
    "deadline",
    "install_timeout_policy",
    "load_contract",
    "load_contract_file",
    "read_traces",
    "step",
    "timeout_of",
]
