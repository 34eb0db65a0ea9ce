"""The bounded space ``toolcancel verify`` explores: every configuration within bounds, and the
cancellation points of each worth running.

A configuration is one call's whole setup (:class:`~toolcancel.oracle.scenario_language.Scenario`:
every hook's behaviour, the body's, the caller's, the wrapper stack); :func:`configurations` lists
them, :func:`groups` a slice at a time (what the main process sends to workers), and
:func:`schedules` crosses one with the points where its caller can abort.  Dimensions no
cancellation can ever reach are not expanded, so equivalent configurations come once; the deeper
family (:func:`deep_stacks`) reaches one wrapper past the bound where the retry behaviours (D11)
differ.  The vectors are numbered in this order (:func:`added_later`), so the space only grows at
its end.  Running and judging the runs is :mod:`toolcancel.selfcheck.verifier`'s.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, Final

from ..oracle.observation import Observation
from ..oracle.scenario_language import (
    BODIES,
    NESTED,
    POSTS,
    SAME_STEP,
    SAME_STEP_ORDERS,
    TIMEOUTS,
    WRAPPERS,
    Scenario,
)
from ..oracle.turn_language import MAX_CALLS as _TURN_MAX_CALLS

# ------------------------------------------------------------------------------------------------
# The bounded space
# ------------------------------------------------------------------------------------------------

MAX_WRAPPERS = 2
"""Bound on around-dispatch wrappers per call."""

MAX_CALLS = _TURN_MAX_CALLS
"""Bound on the model calls of one turn batch (the calls that run concurrently in a turn)."""

_REACH_BASE = frozenset(WRAPPERS) - {"short_success", "short_error", "throw_before"}

# the nested budgeted call's wrapper (NESTED, D13) is enumerated only as the innermost scenario
# wrapper, just outside the timeout policy, and only under a budget

_PRE_VARIANTS: tuple[dict[str, Any], ...] = (
    {"pre": "allow"},
    {"pre": "deny"},
    {"pre": "throw"},
    {"pre": "throw_structured"},
    {"pre": "ask", "approval_seam": False},
    {"pre": "ask", "agent": False},
    *(
        {"pre": "ask", "approval": a}
        for a in ("approved", "rejected", "cancelled", "unavailable", "throw")
    ),
)


def _wrapper_stacks(n: int) -> Iterator[tuple[str, ...]]:
    yield ()
    if n == 0:
        return
    for w in WRAPPERS:
        if w == NESTED:
            continue  # enumerated by _nested_stacks
        if w in _REACH_BASE:
            for rest in _wrapper_stacks(n - 1):
                yield (w, *rest)
        else:
            yield (w,)  # nothing inside a short-circuit is reached (but by a cursor: DEEP)


Group = Scenario | tuple[Scenario, tuple[str, ...]] | tuple[Scenario, tuple[str, ...], str]
"""A slice of the bounded space: one configuration, or a dispatching base configuration and a
wrapper stack, standing for every configuration of that stack (:func:`expand`) -- or, tagged
:data:`DEEP`, for the deeper family's configurations of it (:func:`deep_stacks`).  Groups are
what the main process enumerates and sends to workers; workers expand them."""

DEEP = "deep"
"""The tag of the deeper family's groups."""

DEEP_REST = "deep-rest"
"""The tag of a deeper group whose stack the bounded space holds without its body (a retry over
an innermost short-circuit): its configuration without a body is left out."""

DEEP_WRAPPERS = 3
"""How many scenario wrappers the deeper family reaches (one past the default bound)."""


def configurations(
    revision: str = "seed", max_wrappers: int = MAX_WRAPPERS, *, deep: bool = False
) -> Iterator[Scenario]:
    """Every scenario within bounds, with ``cancel="never"`` (and with ``deep``, the deeper
    family after them: :func:`deep_stacks`).

    Dimensions a call can never reach under any cancellation are not expanded (a short-circuiting
    wrapper has no inner wrappers unless a retry outside it runs on under ``cursor``, the deeper
    family's; a denied call has no body), so equivalent configurations are enumerated once.
    """
    for group in groups(revision, max_wrappers, deep=deep):
        yield from expand(group)


def groups(
    revision: str = "seed", max_wrappers: int = MAX_WRAPPERS, *, deep: bool = False
) -> Iterator[Group]:
    """The space of :func:`configurations`, in the same order, a group at a time."""
    callers = ("live", "aborted") if revision == "revised" else ("none", "live", "aborted")
    for caller in callers:
        yield Scenario(revision=revision, caller=caller, args="not_serializable")
        for pre in _PRE_VARIANTS:
            base = Scenario(revision=revision, caller=caller, **pre)
            reaches_guards = pre["pre"] == "allow" or pre.get("approval") == "approved"
            guards = ("none", "deny", "throw") if reaches_guards else ("none",)
            for guard in guards:
                if guard != "none" or not reaches_guards:
                    for post in POSTS:
                        yield _replace(base, guard=guard, post=post)
                    continue
                # An approved ask reaches dispatch exactly as an allow does (a cancellation
                # before or during approval never reaches it), so the wrapper subtree is
                # expanded under allow only.
                wrappers = max_wrappers if pre["pre"] == "allow" else 0
                dispatching = _replace(base, guard="none")
                for stack in _wrapper_stacks(wrappers):
                    yield (dispatching, stack)
    # Enumerated after all the rest (:func:`added_later`), so that the vectors found before
    # keep their numbers: an ask with neither a seam nor an agent (R5: the seam's row decides),
    # and nested budgeted calls (D13).
    for caller in callers:
        base = Scenario(revision=revision, caller=caller, pre="ask", approval_seam=False)
        for post in POSTS:
            yield _replace(base, agent=False, post=post)
        for stack in _nested_stacks(max_wrappers):
            yield (Scenario(revision=revision, caller=caller), stack)
    yield from _task_groups(revision, max_wrappers)
    if deep:
        for caller in callers:
            for stack, rest in deep_stacks(max_wrappers):
                tag = DEEP_REST if rest else DEEP
                yield (Scenario(revision=revision, caller=caller), stack, tag)


TASK_WRAPPERS: Final = 1
"""Bound on the wrappers of a ``task`` caller's configurations: one wrapper has every kind of
gate (``w0_before``, ``w0_after``) and of slot a cancellation can meet there."""


def _task_groups(revision: str, max_wrappers: int) -> Iterator[Group]:
    """The configurations of a caller that gives up by cancelling the task awaiting the call
    (``caller="task"``; its schedules: :func:`schedules`), last of the bounded space.

    It differs from a live caller only in how C aborts -- the binding aborts it when the
    cancelled task next runs (P2) -- and where: only where the call is suspended.  So the
    caller dimension is added only where a cancellation reaches the call after entry at a
    gate: every pre-execute variant with no guard (guards are synchronous: no gate), and the
    dispatching ones up to :data:`TASK_WRAPPERS` wrappers; the live caller covers every
    interleaving of the abort itself."""
    for pre in _PRE_VARIANTS:
        base = Scenario(revision=revision, caller="task", **pre)
        if pre["pre"] != "allow":
            for post in POSTS:
                yield _replace(base, post=post)
            continue
        for stack in _wrapper_stacks(min(max_wrappers, TASK_WRAPPERS)):
            yield (base, stack)


def added_later(config: Scenario) -> int:
    """When ``config``'s dimensions joined the space: 0 with the first vectors, 1 with the second
    (nested budgets, an ask with neither seam nor agent), 2 with the deeper family, 3 with the
    caller aborting in the step the tool's deadline expires (``with_deadline``).
    Vectors are numbered in that order, so each addition renumbered none before it."""
    if config.same_step is not None:
        return 3
    w = config.wrappers
    if len(w) > MAX_WRAPPERS or (_deep_only(w) and not (_bounded_shape(w) and _bodiless(config))):
        return 2
    return int(NESTED in config.wrappers or (
        config.pre == "ask" and not config.approval_seam and not config.agent
    ))


# ------------------------------------------------------------------------------------------------
# The deeper family: three-wrapper retry stacks, and what only a cursor reaches
# ------------------------------------------------------------------------------------------------
#
# Retry bugs live past the default bound: which wrapper a second next() hands out (D11) matters
# only with wrappers on both sides of the retrying one, and under ``cursor`` a retry outside a
# short-circuit runs on into the wrappers the short-circuit never delegated to -- a part of the
# space the bounded enumeration above leaves out at any bound ("nothing inside a short-circuit is
# ever reached" holds for reenter and reject only).  The whole space one wrapper deeper is 8.4x
# the default one; this family is the part of it where the retry behaviours differ, with the
# dispatch dimensions that do not touch the around waterfall held to one value each.

_DEEP_AROUND: Final = ("delegate", "replace_aborted", "remove", "retry")
"""What stands beside a retry in a three-wrapper stack: a wrapper that only delegates, one that
puts an aborted signal in the slot (a skipped one lets a retried body run), one that removes the
slot, and another retry (two cursors over one list)."""

_SHORTS: Final = ("short_success", "short_error")

_AFTER_SHORT: Final = tuple(w for w in WRAPPERS if w != NESTED)
"""What may stand inside a short-circuit that a retry outside it runs on into (cursor)."""


def deep_stacks(max_wrappers: int = MAX_WRAPPERS) -> Iterator[tuple[tuple[str, ...], bool]]:
    """The deeper family's wrapper stacks not already in the space at ``max_wrappers``: every
    stack of up to :data:`DEEP_WRAPPERS` whose body only a ``cursor`` retry reaches (a retry, a
    short-circuit, then anything), and the three-wrapper stacks with a retry at each position
    beside :data:`_DEEP_AROUND` and an innermost short-circuit.  Each comes with whether the
    bounded space holds it already, without its body."""
    seen: set[tuple[str, ...]] = set()
    candidates: list[tuple[str, ...]] = [("retry", s) for s in _SHORTS]
    candidates += [("retry", s, w) for s in _SHORTS for w in _AFTER_SHORT]
    pairs = [(a, b) for a in _DEEP_AROUND for b in (*_DEEP_AROUND, *_SHORTS)]
    candidates += [("retry", a, b) for a, b in pairs]
    candidates += [(a, "retry", b) for a, b in pairs]
    candidates += [(a, b, "retry") for a in _DEEP_AROUND for b in _DEEP_AROUND]
    for stack in candidates:
        bounded = len(stack) <= max_wrappers and _bounded_shape(stack)
        if stack in seen or (bounded and not _deep_only(stack)):
            continue  # already enumerated, or all of it is in the space at this bound
        seen.add(stack)
        yield stack, bounded


def _deep_only(stack: tuple[str, ...]) -> bool:
    """Whether only a cursor reaches ``stack``'s body (the bounded space never expands it)."""
    return not _classic_reach(stack) and _cursor_reaches_base(stack)


def _classic_reach(stack: tuple[str, ...]) -> bool:
    return all(w in _REACH_BASE for w in stack)


def _bodiless(config: Scenario) -> bool:
    """Whether ``config`` is the one dispatch variant the bounded space gives a stack whose body
    no behaviour but ``cursor`` reaches (:func:`_dispatch_variants`)."""
    return (config.timeout, config.tool_known, config.body, config.cooperative) == (
        "absent", True, "success", True
    )


def _bounded_shape(stack: tuple[str, ...]) -> bool:
    """Whether :func:`_wrapper_stacks` builds ``stack`` (a short-circuit innermost at most)."""
    return _classic_reach(stack[:-1]) and stack[-1] != NESTED


@functools.cache
def _cursor_reaches_base(stack: tuple[str, ...]) -> bool:
    """Whether the base dispatch runs, under ``cursor``, for the call that nothing cancels: the
    scenario wrappers walked as one listener list (D11), a short-circuit returning, a throw
    unwinding to the caller (no scenario wrapper catches)."""
    cursor = 0
    reached = False

    def hand_out() -> bool:  # False: a throw unwinds
        nonlocal cursor, reached
        if cursor >= len(stack):
            reached = True
            return True
        i, cursor = cursor, cursor + 1
        w = stack[i]
        if w in _SHORTS:
            return True
        if w == "throw_before":
            return False
        if not hand_out():
            return False
        if w == "retry" and not hand_out():
            return False
        return w != "throw_after"

    hand_out()
    return reached


def _deep_variants(stack: tuple[str, ...], rest: bool = False) -> Iterator[dict[str, Any]]:
    """The deeper family's dispatch dimensions: the timeout policy absent, budgeted or firing
    first (under ``cursor`` a retried attempt may skip it); an unknown tool; bodies that succeed,
    throw, or defer contexts (each attempt's accumulate, R29), cooperative or not; post-execute
    accepting (its decision reads only what the waterfall returned).  ``rest``: without the
    configuration the bounded space has (no timeout, a known tool, a plain cooperative body)."""
    if not (_classic_reach(stack) or _cursor_reaches_base(stack)):
        yield {}  # no behaviour reaches the body: its dimensions change nothing
        return
    for timeout in TIMEOUTS:
        for tool_known in (True, False) if timeout == "absent" else (True,):
            for body in ("success", "throw", "defer_success") if tool_known else ("success",):
                for cooperative in (True, False) if tool_known else (True,):
                    changes: dict[str, Any] = {
                        "timeout": timeout,
                        "tool_known": tool_known,
                        "body": body,
                        "cooperative": cooperative,
                        "post": "accept",
                    }
                    if not (rest and _bodiless(Scenario(**changes))):
                        yield changes


def _nested_stacks(n: int) -> Iterator[tuple[str, ...]]:
    """The stacks of a nested budgeted call: an enclosing call's deadline innermost (right
    outside the timeout policy), under at most one other wrapper that reaches the base."""
    if n >= 1:
        yield (NESTED,)
    if n >= 2:
        for w in WRAPPERS:
            if w in _REACH_BASE and w != NESTED:
                yield (w, NESTED)


def expand(group: Group) -> Iterator[Scenario]:
    """The configurations a group stands for."""
    if isinstance(group, Scenario):
        yield group
        return
    base, stack = group[0], group[1]
    tag = group[2] if len(group) > 2 else None
    for changes in _variants(stack, tag):
        yield _replace(base, wrappers=stack, **changes)


def group_size(group: Group) -> int:
    """How many configurations :func:`expand` gives, without building them."""
    if isinstance(group, Scenario):
        return 1
    return _stack_size(group[1], group[2] if len(group) > 2 else None)


@functools.cache
def _stack_size(stack: tuple[str, ...], tag: str | None = None) -> int:
    return sum(1 for _ in _variants(stack, tag))


def _variants(stack: tuple[str, ...], tag: str | None) -> Iterator[dict[str, Any]]:
    if tag is None:
        return _dispatch_variants(stack)
    return _deep_variants(stack, rest=tag == DEEP_REST)


def _dispatch_variants(stack: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    reaches_body = all(w in _REACH_BASE for w in stack)
    timeouts = ("absent", "budget", "timer_first") if reaches_body else ("absent",)
    for timeout in ("budget",) if NESTED in stack else timeouts:
        for tool_known in (True, False) if reaches_body and timeout == "absent" else (True,):
            bodies = BODIES if reaches_body and tool_known else ("success",)
            for body in bodies:
                modes = (True, False) if reaches_body and tool_known else (True,)
                for cooperative in modes:
                    for post in POSTS:
                        yield {
                            "timeout": timeout,
                            "tool_known": tool_known,
                            "body": body,
                            "cooperative": cooperative,
                            "post": post,
                        }


def _replace(s: Scenario, **changes: Any) -> Scenario:
    if "wrappers" in changes:
        changes["wrappers"] = tuple(changes["wrappers"])
    return replace(s, **changes)  # the constructor validates every field, as from_data does


def schedules(config: Scenario, uncancelled: Observation) -> tuple[list[str], int]:
    """The cancellation points of ``config`` worth running, and how many were pruned.

    Every point is ``step:k`` (after each transition of the uncancelled path), ``gate:<name>``
    for every gate it reached, ``before_entry``, ``in_entry`` (an abort while entry snapshots the
    arguments), ``after_call`` (an abort between ``execute()`` returning -- entry, ``begin()`` --
    and its first await, ``prepare()``), ``after``, and under ``timer_first`` an abort in the
    step the tool's deadline expires, in both orders (:func:`same_step_cancels`).  Three kinds
    are pruned because they cannot be told apart from a point that is run (same observable
    interleaving):

    * ``gate:X`` for a gate other than the body's equals ``step:k`` with k the transitions taken
      before X was reached: between the two the only code that runs is the hook's own, which never
      reads the caller signal, and the registry next reads it at the same checkpoint;
    * ``before_entry`` equals the configuration whose caller signal is already aborted;
    * an uncooperative body differs from a cooperative one only while something aborts during
      the body, so it keeps only ``gate:body`` (and its uncancelled run when a wrapper signal or
      the timer aborts during the body).

    A ``task`` caller (it cancels the task awaiting the call) has ``after_call`` and a
    ``gate:<name>`` for every gate reached: a cancelled task reaches the call only when it next
    runs, so no ``step:<k>``; no task exists before entry; nothing is cancelled after the call
    settled.
    """
    if config.caller == "task":  # where the call is suspended (scenario_language.CALLERS)
        gates = list(dict.fromkeys(e[1] for e in uncancelled.log if e[0] == "gate"))
        kept = ["after_call"] + [f"gate:{g}" for g in gates]
        if not config.cooperative:  # as a live caller's: only an abort during the body differs
            kept = ["gate:body"] if "body" in gates else []
        return kept, 1 + len(gates) - len(kept)
    if config.caller != "live":
        return [], 0
    steps = sum(1 for p in uncancelled.path if p.event != "caller_abort")
    gates = list(dict.fromkeys(e[1] for e in uncancelled.log if e[0] == "gate"))
    same_step = same_step_cancels(config, gates)
    every = 4 + len(gates) + steps + len(same_step)
    if not config.cooperative:
        kept = ["gate:body"] if "body" in gates else []
    else:
        kept = (
            ["in_entry", "after_call"]
            + (["gate:body"] if "body" in gates else [])
            + [f"step:{k}" for k in range(1, steps + 1)]
            + ["after"]
        )
    return kept + same_step, every - len(kept) - len(same_step)


def same_step_cancels(config: Scenario, gates: list[str]) -> list[str]:
    """A live caller's abort in the same synchronous step as the tool's own deadline expires
    (``timer_first``, at the body gate), once in each order (CONTRACT.md R34: either is allowed,
    so both are judged); none where the call never reaches its body, nor where a wrapper's own
    signal aborts at that gate first (``replace_aborting``: the body it wakes runs before the
    timer, so no step holds the two)."""
    if config.caller != "live" or config.timeout != "timer_first" or "body" not in gates:
        return []
    if "replace_aborting" in config.wrappers:
        return []
    return [f"{SAME_STEP}:{first}" for first in SAME_STEP_ORDERS]


def uncancelled_matters(config: Scenario) -> bool:
    """Whether the ``never`` run of a configuration is not a copy of another one's."""
    if config.cooperative:
        return True
    return config.timeout == "timer_first" or "replace_aborting" in config.wrappers
