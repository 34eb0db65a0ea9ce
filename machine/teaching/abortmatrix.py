"""The primer's abort matrix: an abort at each point of the pipeline, per revision, each cell the
outcome our registry gives, the precedence row that decides it and a shipped vector to step.

A point is a scenario (:data:`POINTS`: a plain call, :data:`PLAIN`, changed in a few fields).  Its
cell cites the shipped vector with exactly that scenario; the vectors keep one scenario per
distinct run (:mod:`toolcancel.selfcheck.vectorgen`), so where the point's own scenario was not
kept, the cell cites the closest shipped vector with the point's observable behaviour
(:func:`toolcancel.teaching.explain.equivalent_vector`, as SCENARIOS.md does), marked "same
run".  A point that neither finds is an error: no cell is shown without a vector to step.  Where
the contract allows a point more than one outcome call by call (a MAY: the caller and the
tool's deadline in one synchronous step, R34), the cell names each, the vector's expected one
last (the others are its alternatives).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from ..contract.errors import ToolcancelError
from ..contract.loader import Contract
from ..oracle.scenario_language import SAME_STEP, Scenario
from ..selfcheck.harness import run_scenario
from .explain import Explanation, VectorRef, equivalent_vector, find_vector

__all__ = ["POINTS", "Cell", "Point", "cell", "matrix_markdown"]

PLAIN: Final = Scenario(caller="live")
"""The plain call every point varies: live caller, no wrappers, no budget, a cooperative body
that succeeds, every policy allowing."""


@dataclass(frozen=True)
class Point:
    """One place in the pipeline where something aborts, as the fields that differ from
    :data:`PLAIN`."""

    label: str
    fields: Mapping[str, Any]

    def scenario(self, revision: str) -> Scenario:
        return replace(PLAIN, revision=revision, **self.fields)


POINTS: Final[tuple[Point, ...]] = (
    Point("the caller aborted before entry (pre-aborted)", {"caller": "aborted"}),
    Point("the caller aborts while pre-execute waits; it then allows", {"cancel": "gate:pre"}),
    Point("… it then denies", {"cancel": "gate:pre", "pre": "deny"}),
    Point("… it then throws", {"cancel": "gate:pre", "pre": "throw"}),
    Point("… it allows, and a guard denies", {"cancel": "gate:pre", "guard": "deny"}),
    Point("… it allows, and a guard throws", {"cancel": "gate:pre", "guard": "throw"}),
    *(
        Point(f"the caller aborts while approval waits; the answer: {answer}",
              {"cancel": "gate:approval", "pre": "ask", "approval": answer})
        for answer in ("approved", "rejected", "cancelled", "unavailable", "throw")
    ),
    Point("the caller aborts while a wrapper waits before delegating",
          {"cancel": "gate:w0_before", "wrappers": ("wait_before",)}),
    Point("a wrapper supplies an already-aborted signal (no caller abort)",
          {"wrappers": ("replace_aborted",)}),
    Point("a wrapper-supplied signal aborts while the body runs (no caller abort)",
          {"wrappers": ("replace_aborting",)}),
    Point("the caller aborts while the body runs; it then succeeds", {"cancel": "gate:body"}),
    Point("… it then throws", {"cancel": "gate:body", "body": "throw"}),
    Point("… it ignores its signal, then succeeds",
          {"cancel": "gate:body", "cooperative": False}),
    Point("the timeout policy's timer fires while the body runs (no caller abort)",
          {"timeout": "timer_first"}),
    Point("timer first, then the caller aborts", {"timeout": "timer_first", "cancel": "gate:body"}),
    Point("caller first, under a budget whose timer has not fired",
          {"timeout": "budget", "cancel": "gate:body"}),
    Point("the timer and the caller in one synchronous step (either may be first, R34)",
          {"timeout": "timer_first", "cancel": "with_deadline"}),
    Point("an enclosing call's deadline (same code) fires while the body runs",
          {"timeout": "budget", "wrappers": ("outer_deadline",)}),
    Point("the caller aborts while a wrapper waits after delegating",
          {"cancel": "gate:w0_after", "wrappers": ("wait_after",)}),
    Point("the caller aborts while post-execute waits; it then accepts", {"cancel": "gate:post"}),
    Point("… it then blocks", {"cancel": "gate:post", "post": "block"}),
    Point("… it then throws", {"cancel": "gate:post", "post": "throw"}),
)
"""The rows of the matrix, in pipeline order ("…" continues the row above)."""


class MatrixError(ToolcancelError):
    """A point of the matrix has no shipped vector to step."""


@dataclass(frozen=True)
class Cell:
    """A point's outcome in one revision: the vector to step, whether it is the point's own
    scenario or only the same run, and the precedence row that decides it."""

    vector: str
    outcome: str
    same_run: bool
    row: int | None
    also: tuple[tuple[str, int | None], ...] = ()
    """Other outcomes the contract allows the point, call by call (a MAY), each with its row:
    the vector carries them as alternatives."""


def _decided(contract: Contract, revision: str, scenario: Scenario) -> tuple[str, int | None]:
    """The outcome of the reference's run of ``scenario`` and the precedence row deciding it."""
    obs = run_scenario(scenario)
    decided = Explanation(contract.revision(revision), obs.path).deciding()
    outcome = obs.path[-1].outcome
    assert outcome is not None
    return outcome, None if decided is None or decided[1] is None else decided[1].row


def cell(contract: Contract, revision: str, point: Point) -> Cell:
    """``point``'s cell in ``revision``: :class:`MatrixError` when no shipped vector shows it."""
    scenario = point.scenario(revision)
    obs = run_scenario(scenario)
    outcome, row = _decided(contract, revision, scenario)
    # the same step run timer first: the other classification R34 allows
    also = () if scenario.same_step is None else (
        _decided(contract, revision, scenario.with_cancel(f"{SAME_STEP}:timer")),
    )
    own = find_vector(scenario.to_data(), revision)
    ref = VectorRef(own) if own else equivalent_vector(obs)
    if ref is None:
        raise MatrixError(f"abort matrix: no shipped {revision} vector shows {point.label!r} "
                          f"({scenario.as_code()})")
    return Cell(ref.id, outcome, bool(ref.differs), row, also)


def _cell_text(revision: str, c: Cell) -> str:
    def shown(outcome: str, row: int | None) -> str:
        return f"`{outcome}`" + (f" ({revision} row {row})" if row is not None else "")

    same = " same run" if c.same_run else ""
    allowed = [shown(*other) + " or " for other in c.also]  # the vector's expected one last
    return "".join(allowed) + f"{shown(c.outcome, c.row)}:{same} `{c.vector}`"


def matrix_markdown(contract: Contract) -> str:
    """The matrix as the primer shows it: one row per point, one column per revision."""
    revisions = contract.revisions
    rows = [
        "| What aborts, and when | " + " | ".join(revisions) + " |",
        "|---|" + "---|" * len(revisions),
    ]
    for point in POINTS:
        cells = " | ".join(_cell_text(r, cell(contract, r, point)) for r in revisions)
        rows.append(f"| {point.label} | {cells} |")
    return "\n".join(rows) + "\n"
