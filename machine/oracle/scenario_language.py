"""The scenario language: a small, closed vocabulary for one tool call and when it is cancelled.

This is a scenario as data -- what every hook does, what the body does, when the caller aborts,
and the texts and contexts those behaviours produce -- with no way to run one:
:mod:`toolcancel.selfcheck.harness` runs them on our registry (its
:class:`~toolcancel.selfcheck.harness.Harness`).
Split so that what reads a scenario (conform's vectors, the judge's checks that read the call's
setup) loads no asyncio registry driver.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Final

from ..contract.core import CallerSignal
from ..contract.errors import ToolcancelError

# The closed vocabulary.  Every field of a scenario takes one of these values.
CALLERS: Final = ("none", "live", "aborted", "task")
"""The caller: no caller signal (``signal=None``, R26); a live signal it aborts; one aborted
before entry; or ``task`` -- a caller that gives up by cancelling the task awaiting the call
(``task.cancel()``), the other way a Python caller gives up.  Its call is made without
``signal=`` in the seed (the call's own signal is C, and only the task's cancellation aborts it,
Python binding P1/P2) and with a live signal it never aborts in the revised contract (R40
requires one); to the contract's machine it is a live caller either way (:data:`ENTRY_CALLER`)."""
ENTRY_CALLER: Final = {"none": "none", "live": "live", "aborted": "aborted", "task": "live"}
"""The caller signal the contract sees at entry, per scenario caller."""
ARGS: Final = ("ok", "not_serializable")
PRE: Final = ("allow", "deny", "ask", "throw", "throw_structured")
APPROVALS: Final = ("approved", "rejected", "cancelled", "unavailable", "throw")
GUARDS: Final = ("none", "deny", "throw")
WRAPPERS: Final = (
    "delegate",  # call next() and return its result
    "wait_before",  # wait at gate w<i>_before, then delegate
    "wait_after",  # delegate, then wait at gate w<i>_after
    "replace_live",  # put a fresh live signal in the slot, delegate, restore
    "replace_aborting",  # like replace_live, but that signal aborts once the body runs
    "replace_aborted",  # put an already-aborted signal in the slot, delegate, restore
    "remove",  # remove the slot, delegate, restore
    "short_success",  # return a success without calling next()
    "short_error",  # return an error result without calling next()
    "throw_before",  # throw without calling next()
    "throw_after",  # delegate, then throw
    "retry",  # delegate, then call next() again and return the second result (D11)
    "outer_deadline",  # an enclosing call's deadline, same code as the timeout policy's, in
    # the slot; it expires (OUTER_MS) once the body runs: only under a budget (D13)
)
NESTED: Final = "outer_deadline"
"""The wrapper that makes the call a nested budgeted call (D13): its deadline follows its
upstream, so it does not cut an outer abort source off the body."""
TIMEOUTS: Final = ("absent", "budget", "timer_first")
SAME_STEP: Final = "with_deadline"
"""The cancellation point where the caller aborts in the same synchronous step as the tool's own
deadline expires, at the body gate (``timeout = "timer_first"``): nothing awaits in between, so
which reason the deadline carries is the order the signal library runs its abort listeners in
(CONTRACT.md R34, D19), and either classification is allowed.  Alone it is portable (a vector's
adapter takes whichever order its library gives); ``with_deadline:caller`` and
``with_deadline:timer`` fix which of the two the step runs first, for the model checker to run
both (:data:`SAME_STEP_ORDERS`)."""
SAME_STEP_ORDERS: Final = ("caller", "timer")
BODIES: Final = (
    "success",
    "success_meta",
    "bad_meta",  # success whose meta is not JSON: the final snapshot fails (R30)
    "throw",
    "throw_structured",
    "defer_success",  # defers two contexts, then succeeds
    "defer_throw",  # defers two contexts, then throws
)
POSTS: Final = ("accept", "accept_content", "accept_contexts", "block", "throw")
OBSERVERS: Final = ("none", "throws")

TOOL_NAME: Final = "tool"
BUDGET_MS: Final = 100
OUTER_MS: Final = 50
"""The budget of an ``outer_deadline`` wrapper's deadline: shorter than :data:`BUDGET_MS`, so it
expires first when the harness moves the clock at the body's gate."""
HOLD_S: Final = 86_400.0
"""Virtual seconds an uncooperative body is held at its gate after its signal aborted (a day):
longer than any grace period a registry might give a body before abandoning it, which R27
forbids.  The registry's drain warning (30 s by default) fires within it and only logs."""
DEFERRED: Final = ({"type": "note", "text": "deferred 1"}, {"type": "note", "text": "deferred 2"})
POST_CONTEXT: Final = {"type": "note", "text": "from post-execute"}
BLOCK_CONTEXT: Final = {"type": "note", "text": "from block"}
BODY_TEXT: Final = "done"
BODY_FAILURE: Final = "tool failed"
BODY_STRUCTURED_FAILURE: Final = "disk full"
REWRITTEN: Final = "rewritten by post-execute"
BLOCK_TEXT: Final = "Error: blocked by post-execute"
POST_FAILURE: Final = "post-execute policy failed"


class ScenarioError(ToolcancelError):
    """A scenario does not fit the language (names the field and the allowed values)."""


def _show(value: Any) -> str:
    """A value for an error message: its repr, cut so that a message stays one short line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_CHOICES: Final[Mapping[str, tuple[str, ...]]] = {
    "revision": ("seed", "revised"),
    "caller": CALLERS,
    "args": ARGS,
    "pre": PRE,
    "approval": APPROVALS,
    "guard": GUARDS,
    "timeout": TIMEOUTS,
    "body": BODIES,
    "post": POSTS,
    "observer": OBSERVERS,
}
"""Each field of a scenario that takes one word of the vocabulary, and its words (checked as a
scenario is made: verify makes one per schedule)."""


@dataclass(frozen=True)
class Scenario:
    """One call, every hook's behaviour, and when it is cancelled."""

    revision: str = "seed"
    caller: str = "live"
    args: str = "ok"
    agent: bool = True
    approval_seam: bool = True
    tool_known: bool = True
    pre: str = "allow"
    approval: str = "approved"
    guard: str = "none"
    wrappers: tuple[str, ...] = ()
    timeout: str = "absent"
    body: str = "success"
    cooperative: bool = True
    post: str = "accept"
    observer: str = "none"
    cancel: str = "never"

    def __post_init__(self) -> None:
        for name, allowed in _CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ScenarioError(
                    f"{name}: {_show(getattr(self, name))} is not one of {', '.join(allowed)}"
                )
        for i, w in enumerate(self.wrappers):
            if w not in WRAPPERS:
                raise ScenarioError(
                    f"wrappers[{i}]: {_show(w)} is not one of {', '.join(WRAPPERS)}"
                )
        if "outer_deadline" in self.wrappers and self.timeout != "budget":
            raise ScenarioError("wrappers: outer_deadline is a nested call's upstream deadline "
                                "and needs timeout budget (D13)")
        if self.revision == "revised" and self.caller == "none":
            raise ScenarioError("caller: the revised contract requires a caller signal (R40)")
        self._check_cancel()

    def _check_cancel(self) -> None:
        """The checks that read ``cancel`` (:meth:`with_cancel` changes nothing else)."""
        kind = _parse_cancel(self.cancel)[0]
        if kind == SAME_STEP and (self.caller != "live" or self.timeout != "timer_first"):
            raise ScenarioError(f"cancel: {_show(self.cancel)} -- the caller aborts in the step "
                                "the tool's deadline expires: needs caller live and timeout "
                                "timer_first")
        if self.caller == "task" and self.cancel != "never" and kind not in ("after_call", "gate"):
            raise ScenarioError(f"cancel: {_show(self.cancel)} -- a task caller cancels only "
                                "after_call or at a gate:<name> (where the call is suspended)")

    @property
    def entry_caller(self) -> str:
        """The caller signal at entry as the contract sees it (none, live or aborted)."""
        return ENTRY_CALLER[self.caller]

    @property
    def same_step(self) -> str | None:
        """For a caller that aborts in the step the tool's deadline expires (:data:`SAME_STEP`):
        which of the two the step runs first, ``caller`` when the scenario leaves it open; else
        None."""
        kind, first = _parse_cancel(self.cancel)
        return None if kind != SAME_STEP else str(first or "caller")

    @property
    def around_count(self) -> int:
        """How many around wrappers the call has: the scenario's, then the timeout policy."""
        return len(self.wrappers) + (self.timeout != "absent")

    @property
    def retries(self) -> bool:
        """Whether a wrapper calls ``next()`` twice, so the retry behaviour (D11) matters."""
        return "retry" in self.wrappers

    def with_cancel(self, cancel: str) -> Scenario:
        """This scenario, cancelled at ``cancel``.  Only what reads ``cancel`` is checked again:
        the rest was checked when this one was made (verify makes one per schedule, and a
        dataclass ``replace`` costs 20-40 us)."""
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        object.__setattr__(copy, "cancel", cancel)
        copy._check_cancel()
        return copy

    def to_data(self) -> dict[str, Any]:
        data = asdict(self)
        data["wrappers"] = list(self.wrappers)
        return data

    @classmethod
    def from_data(cls, data: Any, where: str = "scenario") -> Scenario:
        """Build a scenario from JSON data, refusing unknown or ill-typed fields."""
        if not isinstance(data, Mapping):
            raise ScenarioError(f"{where}: expected a JSON object")
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            kind = _FIELD_TYPES.get(key)
            if kind is None:
                raise ScenarioError(f"{where}: unknown field {_show(key)}")
            if key == "wrappers":
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ScenarioError(f"{where}.wrappers: expected a list of strings")
                value = tuple(value)
            elif type(value) is not kind:
                raise ScenarioError(
                    f"{where}.{key}: expected a {kind.__name__}, got {_show(value)}"
                )
            kwargs[key] = value
        try:
            return cls(**kwargs)
        except ScenarioError as exc:
            raise ScenarioError(f"{where}.{exc}") from None

    def as_code(self) -> str:
        """The scenario as a runnable Python expression (differences from the defaults only)."""
        default = Scenario()
        parts = [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if getattr(self, f.name) != getattr(default, f.name)
        ]
        return f"Scenario({', '.join(parts)})"


_FIELD_TYPES: Final[Mapping[str, type]] = {f.name: type(f.default) for f in fields(Scenario)}
"""Field name -> the type of its default: what :meth:`Scenario.from_data` accepts, worked out
once (a vectors file or a conform run parses thousands of scenarios)."""


def _parse_cancel(cancel: str) -> tuple[str, str | int | None]:
    if cancel in ("never", "before_entry", "in_entry", "after_call", "after", SAME_STEP):
        return cancel, None
    kind, _, arg = cancel.partition(":")
    if kind == "gate" and arg:
        return kind, arg
    if kind == SAME_STEP and arg in SAME_STEP_ORDERS:
        return kind, arg
    if kind == "step" and arg.isascii() and arg.isdigit() and len(arg) <= 9 and int(arg) >= 1:
        return kind, int(arg)
    raise ScenarioError(
        f"cancel: {_show(cancel)} is not never, before_entry, in_entry, after_call, after, "
        f"gate:<name>, step:<k> or {SAME_STEP}[:caller|:timer]"
    )


def entry_caller(s: Scenario) -> CallerSignal:
    """The caller state the registry captures at entry."""
    if s.cancel == "before_entry" or s.caller == "aborted":
        return "aborted"
    return "none" if s.caller == "none" else "live"
