"""The runtime adapter kit: put an agent runtime's tool calls behind the adapter protocol.

For maintainers of agent runtimes and anyone judging one with ``toolcancel conform``.  An
adapter is a script holding one :class:`Runtime` subclass -- what the runtime has (its hello's
``capabilities`` and ``cancel``) and how it makes one tool call through its public API
(:meth:`Runtime.open`) -- that ends with ``main(TheRuntime(), RegistryControl(TheRuntime))``::

    toolcancel conform --revision seed --adapter python adapter_myruntime.py
    toolcancel conform --revision seed --adapter python adapter_myruntime.py --control

The kit does the rest: the protocol (:func:`serve`), each vector's gates, virtual clock and
caller (:func:`run_vector`), the scenario's tool body (:meth:`Call.body`), the answer
(:class:`Outcome`), the control row (:class:`RegistryControl`), a configuration's row
(:func:`row`), an integrated row (:func:`integrated`: a plain row with a toolcancel integration
put in) and a reproduction script's runner (:func:`reproduce`): toolcancel's own registry
through the same mapping, which must pass every vector it is sent.  The rules -- for
:class:`Unsupported`, for a call that raised, for each capability -- are in
:mod:`toolcancel.runtimes.driver` and :mod:`toolcancel.runtimes.call`.

May import: the contract, runtime and oracle rooms.  The names below are the kit's API.
"""

from __future__ import annotations

from .call import (
    HANG,
    HOLD_S,
    WRAPPERS,
    Body,
    Call,
    Execute,
    Outcome,
    Signal,
    SignalReader,
    ToolError,
    Unsupported,
    no_signal,
    task_signal,
    text,
)
from .control import (
    RegistryControl,
    control_body,
    control_post,
    control_pre,
    control_server,
    control_wrapper,
    registry_for,
)
from .driver import AdapterError, Runtime, main, needs, not_json, row, run_vector, serve
from .integrated import integrated
from .reproduce import Reproduction, reproduce

__all__ = [
    "HANG",
    "HOLD_S",
    "WRAPPERS",
    "AdapterError",
    "Body",
    "Call",
    "Execute",
    "Outcome",
    "RegistryControl",
    "Reproduction",
    "Runtime",
    "Signal",
    "SignalReader",
    "ToolError",
    "Unsupported",
    "control_body",
    "control_post",
    "control_pre",
    "control_server",
    "control_wrapper",
    "integrated",
    "main",
    "needs",
    "no_signal",
    "not_json",
    "registry_for",
    "reproduce",
    "row",
    "run_vector",
    "serve",
    "task_signal",
    "text",
]
