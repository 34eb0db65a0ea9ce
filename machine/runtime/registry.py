"""The tool registry: :class:`ToolRegistry`, and every name its hooks, wrappers and callers use.

``await registry.execute(name, arguments, signal=...)`` runs one call through the contract's
pipeline -- pre-execute waterfall, approval, guards, around-dispatch waterfall, the body, post-
execute waterfall, materialization, one frozen notification -- and at every point where the
contract decides something, it offers an event to the call's machine -- the contract compiled
for the call's shape (:mod:`toolcancel.contract.compiled`), which steps exactly as the pure core
(:mod:`toolcancel.contract.core`) does -- and does what the resulting state says.  The registry
observes and performs; the contract table decides.  So the path a call records *is* the
explanation of its result.

What the registry guarantees (see CONTRACT.md for the numbered rules):

* no body starts after a live cancellation (C1, C1', C2);
* the caller's signal can never be detached by a wrapper: the body's signal is fused (R21);
* a started body is awaited to quiescence, never raced, however long it takes (R27);
* a late success becomes ABORTED, more specific failures survive (R18-R20, R39);
* exactly one frozen result is published, to observers and to the caller alike (R31).

Where each part lives, one concern a module:

* :mod:`toolcancel.runtime.toolregistry`: :class:`ToolRegistry` itself (tools, hooks,
  ``execute()`` and ``begin()``);
* :mod:`toolcancel.runtime.plan`: what a call reads of its registry, frozen at entry;
* :mod:`toolcancel.runtime.driver`: the pipeline a call runs, stage by stage;
* :mod:`toolcancel.runtime.stepping`: a call's place in its compiled machine, its call signal and
  the trace lines it writes;
* :mod:`toolcancel.runtime.binding`: how a call runs in the task that awaits it (asyncio, trio);
* :mod:`toolcancel.runtime.hooks` and :mod:`toolcancel.runtime.execution`: what hooks exchange
  with a call, and the view of it they get.

The driver, the call it extends and the binding are compiled with mypyc in a
``TOOLCANCEL_COMPILE=1`` build (``setup.py``); :func:`compiled` says whether this install's are.
"""

from __future__ import annotations

from ..contract.errors import InvalidBudget as InvalidBudget
from . import driver
from .binding import PendingCall as PendingCall
from .binding import drain as drain
from .driver import StagedCall as StagedCall
from .execution import Execution as Execution
from .hooks import Accept as Accept
from .hooks import Allow as Allow
from .hooks import Approval as Approval
from .hooks import ApprovalRequest as ApprovalRequest
from .hooks import ApprovalSeam as ApprovalSeam
from .hooks import AroundHook as AroundHook
from .hooks import Ask as Ask
from .hooks import Block as Block
from .hooks import Deny as Deny
from .hooks import Guard as Guard
from .hooks import InFlight as InFlight
from .hooks import Next as Next
from .hooks import Observer as Observer
from .hooks import PostDecision as PostDecision
from .hooks import PostHook as PostHook
from .hooks import PreDecision as PreDecision
from .hooks import PreHook as PreHook
from .hooks import StepTap as StepTap
from .hooks import ToolBody as ToolBody
from .hooks import ToolDefinition as ToolDefinition
from .toolregistry import DRAIN_WARNING as DRAIN_WARNING
from .toolregistry import ToolRegistry as ToolRegistry


def compiled() -> bool:
    """Whether this install runs the per-call driver mypyc compiled: a ``TOOLCANCEL_COMPILE=1``
    build (``setup.py``).  Every other install -- the default, an editable one -- runs the
    source."""
    return not str(getattr(driver, "__file__", "")).endswith(".py")
