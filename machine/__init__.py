"""toolcancel: the cooperative, quiescent tool-cancellation contract, as a Python reference.

A caller hands a tool call to a registry with an abort signal.  Cancellation may arrive while
pre-execute policy or approval waits, while around-dispatch wrappers wait, while the body runs, or
while post-execute policy waits.  The contract (``toolcancel/spec/CONTRACT.md``) says what happens
at each of those moments; :class:`ToolRegistry` implements it over asyncio or trio, driven by a pure
per-call machine compiled from ``toolcancel/spec/contract.toml``.

The package has one subpackage per audience, a *room* (docs/ENGINEERING.md, "Rooms"):
``contract``, ``runtime`` (what an embedder imports), ``oracle``, ``runtimes`` (the runtime
adapter kit), ``selfcheck``, ``teaching`` and ``cli``.  The names below are the public surface:
an embedder imports them from ``toolcancel`` itself, never from a room's module, whose place may
change.

Importing the package is cheap: every public name is imported from its module on first use
(:pep:`562`), so ``import toolcancel`` neither loads asyncio and the trace checker nor compiles
the contract.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .contract.core import CallMachine, CallState, Occurrence, PathStep, choices, step
    from .contract.errors import (
        ContractError,
        ContractViolation,
        NotSerializable,
        RegistryUsageError,
        TaskCancelled,
        ToolcancelError,
    )
    from .contract.loader import Contract, RevisionContract, load_contract, load_contract_file
    from .contract.results import ErrorInfo, FrozenDict, ToolError, ToolOutput, ToolResult
    from .contract.trace import TraceRecorder
    from .contract.trace_reader import TraceError, TraceEvent, read_traces
    from .oracle.judge.checker import Checker, Verdict, check_file, check_lines
    from .runtime.cooperate import aborted, cancellable, throw_if_aborted
    from .runtime.deadline import Deadline, TimeoutReason, checked_hint, deadline, timeout_of
    from .runtime.registry import (
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
    from .runtime.scheduler import LogEntry, ToolCallRequest, TurnLog, TurnScheduler
    from .runtime.signals import AbortController, AbortError, AbortSignal, SignalTimeoutError
    from .runtime.timeout_policy import TOOL_TIMEOUT, install_timeout_policy

_LAZY: dict[str, str] = {
    "Checker": "oracle.judge.checker",
    "Verdict": "oracle.judge.checker",
    "check_file": "oracle.judge.checker",
    "check_lines": "oracle.judge.checker",
    "Contract": "contract.loader",
    "RevisionContract": "contract.loader",
    "load_contract": "contract.loader",
    "load_contract_file": "contract.loader",
    "CallMachine": "contract.core",
    "CallState": "contract.core",
    "Occurrence": "contract.core",
    "PathStep": "contract.core",
    "choices": "contract.core",
    "step": "contract.core",
    "aborted": "runtime.cooperate",
    "cancellable": "runtime.cooperate",
    "throw_if_aborted": "runtime.cooperate",
    "Deadline": "runtime.deadline",
    "TimeoutReason": "runtime.deadline",
    "checked_hint": "runtime.deadline",
    "deadline": "runtime.deadline",
    "timeout_of": "runtime.deadline",
    "ContractError": "contract.errors",
    "ContractViolation": "contract.errors",
    "NotSerializable": "contract.errors",
    "RegistryUsageError": "contract.errors",
    "TaskCancelled": "contract.errors",
    "ToolcancelError": "contract.errors",
    "Accept": "runtime.registry",
    "Allow": "runtime.registry",
    "Approval": "runtime.registry",
    "ApprovalRequest": "runtime.registry",
    "Ask": "runtime.registry",
    "Block": "runtime.registry",
    "Deny": "runtime.registry",
    "Execution": "runtime.registry",
    "InFlight": "runtime.registry",
    "InvalidBudget": "runtime.registry",
    "PendingCall": "runtime.registry",
    "StagedCall": "runtime.registry",
    "ToolDefinition": "runtime.registry",
    "ToolRegistry": "runtime.registry",
    "ErrorInfo": "contract.results",
    "FrozenDict": "contract.results",
    "ToolError": "contract.results",
    "ToolOutput": "contract.results",
    "ToolResult": "contract.results",
    "LogEntry": "runtime.scheduler",
    "ToolCallRequest": "runtime.scheduler",
    "TurnLog": "runtime.scheduler",
    "TurnScheduler": "runtime.scheduler",
    "AbortController": "runtime.signals",
    "AbortError": "runtime.signals",
    "AbortSignal": "runtime.signals",
    "SignalTimeoutError": "runtime.signals",
    "TOOL_TIMEOUT": "runtime.timeout_policy",
    "install_timeout_policy": "runtime.timeout_policy",
    "TraceError": "contract.trace_reader",
    "TraceEvent": "contract.trace_reader",
    "TraceRecorder": "contract.trace",
    "read_traces": "contract.trace_reader",
}
"""Public name -> the module (under ``toolcancel``) that defines it."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        if name == "__version__":
            from .cli.main import version

            return version()
        raise AttributeError(f"module 'toolcancel' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # the next access is a plain global lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
    "aborted",
    "cancellable",
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
    "throw_if_aborted",
    "timeout_of",
]
