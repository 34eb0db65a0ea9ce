"""Capabilities: which of the contract's stages a runtime has, and which vectors it can run.

Most tool runtimes have only part of the contract's pipeline: no approval seam, no around
wrappers, no post-execute policy, a caller that cancels a task rather than aborting a signal.
An adapter declares what its runtime has in its hello (``capabilities``, spec/vectors/README.md);
``conform`` then sends exactly the vectors that need only those stages and says, loudly, which
rules it could not judge for want of the others.  Declaring nothing declares everything.

What a vector needs is derived from its scenario and what the contract allows it
(:func:`needs`):

* a stage whose scenario field is not the :class:`~toolcancel.oracle.scenario_language.Scenario`
default needs
  that stage (:data:`FIELDS`): the default is what a runtime without it does -- no pre-execute
  listener allows, no guard passes, no post-execute listener accepts, no timeout policy, no
  extra observer, no wrapper;
* a cancellation while the call waits at a stage's gate needs that stage (:data:`GATES`): a
  runtime without it has nothing to wait in;
* the approval seam is needed when some allowed path asks it (an event of a transition leaving
  the contract's ``approval`` state), a wrapper that puts another signal in the slot
  (:data:`toolcancel.oracle.judge.SLOT_WRAPPERS`) needs ``replace_signal``, one that removes it
  ``remove_signal``, a body whose signal must abort on some allowed outcome needs
  ``body_signal``, and a vector some allowed result of which is an error needs ``error_flag``
  (the channel: a result that can say it is one); the body's ``meta`` and arguments that are not
  JSON text need ``meta`` and ``raw_args`` (:data:`FIELDS`);
* the caller: no caller signal needs nothing; a caller aborted before ``execute()`` (``caller =
  aborted``, ``cancel = before_entry``) needs ``signal`` -- neither a task nor a protocol message
  can be cancelled before the call exists -- and so does one that aborts in the step the tool's
  deadline expires (``cancel = with_deadline``: the others land when the call next runs); any
  other caller needs some way to cancel
  (``signal``, ``task`` or ``message``), which the adapter uses at the scenario's cancellation
  point.

An adapter cannot pass by declaring less than it uses: an answer that observes an undeclared
stage at work is a protocol failure naming the capability (:func:`undeclared`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ...contract.loader import load_contract
from ..judge.record import SLOT_WRAPPERS
from ..scenario_language import BLOCK_CONTEXT, BLOCK_TEXT, POST_CONTEXT, REWRITTEN, Scenario

if TYPE_CHECKING:
    from ...contract.loader import RevisionContract
    from ..vectors import Vector

_TABLE: Final = load_contract().capabilities
STAGES: Final = tuple(k.name for k in _TABLE)
"""The stages a hello's ``capabilities`` declares, each ``true`` or ``false`` (every one given):
the contract's ``[[capability]]`` table, in its order."""
CANCELS: Final = ("signal", "task", "message")
"""How a runtime's caller can cancel a call: abort a signal it passed, cancel the task running
the call, send a protocol message (MCP's ``notifications/cancelled``)."""
CANCEL_SIGNAL: Final = "cancel:signal"
"""The need of a caller aborted before ``execute()``: only a signal can be."""
CANCEL_ANY: Final = "cancel"
"""The need of a caller that may cancel during the call: any of :data:`CANCELS`."""
FIELDS: Final = {k.name: (k.field, frozenset(k.values)) for k in _TABLE if k.field is not None}
"""Stage -> the scenario field that needs it, and the values that do (empty: any but the
default)."""
GATES: Final = tuple(
    (re.compile(re.escape(g).replace(re.escape("<i>"), "[0-9]+") + "$"), k.name)
    for k in _TABLE
    for g in k.gates
)
"""(gate pattern, the stage that waits in it): a cancellation there needs the stage."""
STAGE_STATES: Final = {k.name: k.states for k in _TABLE if k.states}
"""Stage -> its contract states.  A trace event leaving them that no allowed path of the vector
has shows the stage at work (a runtime without it writes only the empty stage's event: allow,
pass, accept)."""
BY_PATH: Final = tuple(k.name for k in _TABLE if k.by_path)
"""Stages a vector needs when some allowed path has an event of theirs."""
OPTIONAL: Final = tuple(k.name for k in _TABLE if k.optional)
"""Keys a hello may leave out, declaring it has them: added after hellos listing every other."""
REMOVE_WRAPPER: Final = "remove"
"""The wrapper behaviour that takes the signal out of the slot: it needs ``remove_signal``; every
other of :data:`toolcancel.oracle.judge.SLOT_WRAPPERS` puts another signal there and needs
``replace_signal``."""
REQUIRES: Final = {k.name: k.requires for k in _TABLE if k.requires is not None}
"""Stage -> the stage without which it cannot be declared (replace_signal -> around)."""
OBSERVATIONS: Final = {
    "observers": (
        "an observer was notified",
        (("notified", "notifications"), ("frozen", "frozen")),
    ),
    "post_policy": ("post-execute received a result", (("post_received", "post_received"),)),
    "approval": ("the approval seam was asked", (("approval_signal", "approval_signal"),)),
    "around": (
        "a wrapper's next() was observed (slot_after_next)",
        (("slot_after_next", "slot_after_next"),),
    ),
}
"""Stage -> what only a runtime with it can observe: in words, and each observation as (the
record's environment event, the answer's ``observed`` key).  The one table of them: a runtime
without the stage has them left out of its record (:class:`toolcancel.oracle.conform.judge.Judge`),
and an answer that makes one anyway is a protocol failure (:func:`undeclared`)."""
STAGE_OBSERVATIONS: Final = {
    stage: tuple(event for event, _ in pairs) for stage, (_, pairs) in OBSERVATIONS.items()
}
"""Stage -> the record's environment events only it makes (from :data:`OBSERVATIONS`)."""
_DEFAULT: Final = Scenario()
POLICY_TEXTS: Final = (POST_CONTEXT, BLOCK_CONTEXT, REWRITTEN, BLOCK_TEXT)
"""What only a post-execute listener puts in a result (its contexts, its content)."""


class CapabilityError(ValueError):
    """A hello's ``capabilities`` is not usable (the message names the field)."""


@dataclass(frozen=True)
class Capabilities:
    """What a runtime has: its stages and how its caller cancels.  ``declared``: the hello said
    so (absent, a runtime has everything)."""

    stages: frozenset[str] = frozenset(STAGES)
    cancel: frozenset[str] = frozenset(CANCELS)
    declared: bool = False

    @property
    def everything(self) -> bool:
        return self.stages == frozenset(STAGES) and self.cancel == frozenset(CANCELS)

    def lacks(self, needed: Iterable[str]) -> frozenset[str]:
        """Of ``needed`` (:func:`needs`), what this runtime does not have."""
        out = set()
        for need in needed:
            if need == CANCEL_SIGNAL:
                if "signal" not in self.cancel:
                    out.add(need)
            elif need == CANCEL_ANY:
                if not self.cancel:
                    out.add(need)
            elif need not in self.stages:
                out.add(need)
        return frozenset(out)

    def to_json(self) -> dict[str, Any]:
        cancel = [c for c in CANCELS if c in self.cancel]
        return {**{s: s in self.stages for s in STAGES}, "cancel": cancel}

    @classmethod
    def from_hello(cls, data: Any) -> Capabilities:
        """The hello's ``capabilities`` (``None``: absent, everything), or
        :class:`CapabilityError` with one line naming what is wrong."""
        if data is None:
            return cls()
        where = "the adapter's hello: capabilities"
        if not isinstance(data, dict):
            raise CapabilityError(f"{where} must be an object of stage: true/false and cancel")
        unknown = sorted(k for k in data if k not in (*STAGES, "cancel"))
        if unknown:
            raise CapabilityError(
                f"{where} has an unknown key {unknown[0]!r}; the keys are "
                f"{', '.join(STAGES)} and cancel"
            )
        missing = [k for k in (*STAGES, "cancel") if k not in data and k not in OPTIONAL]
        if missing:
            raise CapabilityError(
                f"{where} lacks {', '.join(missing)} (every key is required but "
                f"{', '.join(OPTIONAL)}, which default to true)"
            )
        # absent, an optional key is true -- unless the stage it needs is declared false
        data = {**{k: data.get(REQUIRES.get(k, ""), True) is True for k in OPTIONAL}, **data}
        wrong = next((k for k in STAGES if type(data[k]) is not bool), None)
        if wrong is not None:
            raise CapabilityError(f"{where}.{wrong} must be true or false, not {data[wrong]!r}")
        cancel = data["cancel"]
        if not (
            isinstance(cancel, list)
            and all(isinstance(c, str) and c in CANCELS for c in cancel)
            and len(set(cancel)) == len(cancel)
        ):
            raise CapabilityError(
                f"{where}.cancel must be a list of distinct {', '.join(CANCELS)}, not {cancel!r}"
            )
        for stage, needed in REQUIRES.items():
            if data[stage] and not data[needed]:
                raise CapabilityError(
                    f"{where}.{stage} is true but {needed} is false: {stage} needs {needed} "
                    f"({_DOCS[stage]})"
                )
        return cls(frozenset(k for k in STAGES if data[k]), frozenset(cancel), True)


def _stage_events(
    table: RevisionContract, stages: Mapping[str, tuple[str, ...]]
) -> dict[str, frozenset[str]]:
    """Stage -> the events of the transitions leaving its states (aborts aside), by the pairs
    the contract declares (:attr:`~toolcancel.contract.loader.Transition.pairs`): ``pre_error``
    leaves ``approval`` only by ``approval_raise``, so a pre-execute failure is not taken for
    the approval seam at work."""
    return {
        stage: frozenset(e for t in table.transitions for s, e in t.pairs if s in states)
        - {"caller_abort", "fused_abort"}
        for stage, states in stages.items()
    }


_EVENTS: dict[str, dict[str, frozenset[str]]] = {}


def needs(v: Vector, table: RevisionContract) -> frozenset[str]:
    """What running ``v`` needs of a runtime: stage names and :data:`CANCEL_SIGNAL` or
    :data:`CANCEL_ANY` (the module's docstring gives the derivation)."""
    s = v.scenario
    out: set[str] = set()
    for stage, (name, values) in FIELDS.items():
        value = getattr(s, name)
        if value in values if values else value != getattr(_DEFAULT, name):
            out.add(stage)
    if s.cancel.startswith("gate:"):
        gate = s.cancel.removeprefix("gate:")
        out.update(stage for pattern, stage in GATES if pattern.match(gate))
    events = _EVENTS.get(table.name)
    if events is None:
        events = _EVENTS[table.name] = _stage_events(
            table, {k: STAGE_STATES[k] for k in BY_PATH}
        )
    exps = list(v.expectations())
    for stage, names in events.items():
        if any(names & set(p) for e in exps for p in e.paths):
            out.add(stage)
    if (SLOT_WRAPPERS - {REMOVE_WRAPPER}) & set(s.wrappers):
        out.add("replace_signal")
    if REMOVE_WRAPPER in s.wrappers:
        out.add("remove_signal")
    if any(b.get("aborted") for e in exps for b in e.body_signals):
        out.add("body_signal")
    if any(e.result.get("isError") for e in exps):
        out.add("error_flag")
    if s.caller == "aborted" or s.cancel == "before_entry" or s.same_step:
        out.add(CANCEL_SIGNAL)
    elif s.caller != "none":
        out.add(CANCEL_ANY)
    return frozenset(out)


def undeclared(
    caps: Capabilities, answer: Mapping[str, Any], allowed: Iterable[Iterable[str]] = ()
) -> str | None:
    """The protocol failure of an answer that shows an undeclared stage at work, or None:
    post-execute received something or put its contexts or content in the result, the approval
    seam was asked, a wrapper's ``next()`` was observed, an observer was notified or inspected the
    result, a body's signal aborted -- or the trace has an event of an undeclared stage that no
    allowed path of the vector has (``allowed``)."""
    if caps.everything:
        return None
    observed = answer.get("observed") or {}
    found = [
        (stage, what)
        for stage, (what, pairs) in OBSERVATIONS.items()
        if any(_shows(observed.get(key)) for _, key in pairs)
    ]
    result = answer.get("result")
    if isinstance(result, dict):
        blocks = [*(result.get("additionalContexts") or ()), *(result.get("content") or ())]
        if any(b in POLICY_TEXTS or (isinstance(b, dict) and b.get("text") in POLICY_TEXTS)
               for b in blocks):  # fmt: skip
            found.append(("post_policy", "the result carries post-execute's contexts or content"))
    signals = [
        *(observed.get("body_signals") or ()),
        *(x for b in observed.get("bodies") or () for x in (b.get("start"), b.get("settle"))),
    ]
    if any(isinstance(x, dict) and x.get("aborted") for x in signals):
        found.append(("body_signal", "a body's signal aborted"))
    trace = answer.get("trace") or ()
    if trace:
        paths = {e for p in allowed for e in p}
        for line in trace:
            event = line.get("event") if isinstance(line, dict) else None
            stage = _EVENT_STAGE.get(event) if isinstance(event, str) else None
            if stage is not None and event not in paths:
                found.append((stage, f"the trace has {event}"))
                break
    for stage, what in found:
        if stage not in caps.stages:
            return (
                f"{what}, but the hello does not declare {stage}: an adapter must declare every "
                "stage its runtime uses (capabilities)"
            )
    return None


def _shows(value: Any) -> bool:
    """Whether an observation's value shows its stage at work: present, and not the nothing a
    runtime without the stage may report (no notifications, no wrapper's ``next()``)."""
    return value is not None and not (type(value) is int and value == 0) and value != []


def _event_stages() -> dict[str, str]:
    """Contract event -> the stage whose states it leaves (:data:`STAGE_STATES`), both
    revisions."""
    contract = load_contract()
    out: dict[str, str] = {}
    for name in contract.revisions:
        for stage, events in _stage_events(contract.revision(name), STAGE_STATES).items():
            out.update(dict.fromkeys(events, stage))
    return out


_EVENT_STAGE: Final = _event_stages()
_DOCS: Final = {k.name: k.doc for k in _TABLE}

__all__ = ["CANCELS", "STAGES", "Capabilities", "CapabilityError", "needs", "undeclared"]
