"""The turn language: a batch of model calls and when the turn is cancelled, as data.

A :class:`Turn` is one batch of one to :data:`MAX_CALLS` calls, each of one kind
(:data:`KINDS`), the point the turn signal aborts at, and the order its gates are released in.
Turn vectors (:mod:`toolcancel.oracle.vectors.turns`) are written in it; the runner that plays a
turn through our scheduler is :mod:`toolcancel.selfcheck.turncheck`.  Nothing here runs a call.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

KINDS = ("ok", "ok_exclusive", "defer", "throw", "denied")
"""What a call of a batch does: succeed; succeed as an exclusive call; defer a context and succeed;
throw; be denied by pre-execute."""
KIND_OUTCOMES: Final = {
    "ok": "body_success",
    "ok_exclusive": "body_success",
    "defer": "body_success",
    "throw": "body_error",
    "denied": "denied",
}
"""The contract's outcome (``spec/contract.toml``) of a call of each kind that nothing cancels."""

MAX_CALLS = 3
RELEASES = ("fifo", "lifo")


@dataclass(frozen=True)
class Turn:
    revision: str
    kinds: tuple[str, ...]
    abort: str  # never | before_turn | gate:<call>:<pre|body|post>
    release: str = "fifo"

    def as_code(self) -> str:
        return f"Turn({self.revision!r}, {self.kinds!r}, {self.abort!r}, {self.release!r})"


def batch_kinds(max_calls: int = MAX_CALLS) -> Iterator[tuple[str, ...]]:
    """Every batch within bounds: one to ``max_calls`` calls, each of every kind."""
    for n in range(1, max_calls + 1):
        yield from itertools.product(KINDS, repeat=n)


def turns(revision: str = "seed", max_calls: int = MAX_CALLS) -> Iterator[Turn]:
    """Every batch within bounds, with every abort point and release order."""
    for kinds in batch_kinds(max_calls):
        yield from turns_of(revision, kinds)


def turns_of(revision: str, kinds: tuple[str, ...]) -> Iterator[Turn]:
    """One batch with every abort point and release order."""
    gates = [
        f"gate:{i}:{g}"
        for i, k in enumerate(kinds)
        for g in (("pre", "post") if k == "denied" else ("pre", "body", "post"))
    ]
    for abort in ("never", "before_turn", *gates):
        for release in RELEASES:
            yield Turn(revision, kinds, abort, release)
