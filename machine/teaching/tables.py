"""The contract's tables in Markdown: the outcome precedence and R10's stages.

``spec/PRECEDENCE.md`` is :func:`precedence_markdown` (written by ``toolcancel diagram``, beside
the drawings of :mod:`toolcancel.teaching.diagrams`), and CONTRACT.md carries
:func:`stages_markdown` below its marker.  Like the drawings, both are pure functions of the
contract file, in file order, so ``--check`` can compare their bytes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..contract.loader import Contract, Transition
from .diagrams import GENERATED

__all__ = ["precedence_markdown", "stages_markdown"]


def _md_cell(text: str) -> str:
    text = " ".join(text.split())
    text = re.sub(r"([\\|*`\[\]<>])", r"\\\1", text)
    return re.sub(r"(?<!\w)_|_(?!\w)", r"\\_", text)


def _outcomes_by_decider(deciding: Sequence[Transition]) -> str:
    """Where a row's transitions end in different outcomes (revised rows 12 and 15: ABORTED or
    ABORTED_BEFORE_DISPATCH by R41), which transition gives which, so the table never shows one
    outcome for a row the machine decides two ways."""
    by: dict[str, list[str]] = {}
    for t in deciding:
        if t.outcome is not None:
            by.setdefault(t.outcome, []).append(t.id)
    if len(by) < 2:
        return ""
    return " (" + "; ".join(f"{o}: {', '.join(ts)}" for o, ts in by.items()) + ")"


def stages_markdown(contract: Contract) -> str:
    """R10's stages as CONTRACT.md lists them: ``[[stage]]`` of the contract file, the one grouping
    of states that the explorer, the diagrams and the prose share (tests/test_diagrams.py checks
    that CONTRACT.md carries exactly this table)."""
    revised = [r for r in contract.revisions if r != "seed"]
    rows = [
        "| # | stage | " + "".join(f"{r} title | " for r in revised) + "states | stated by |",
        "|---|---|" + "---|" * len(revised) + "---|---|",
    ]
    for i, stage in enumerate(contract.stages, 1):
        titles = "".join(
            f"{stage.title(r) if stage.title(r) != stage.name else '(same)'} | " for r in revised
        )
        states = ", ".join(f"`{s}`" for s in stage.states)
        rows.append(f"| {i} | {stage.name} | {titles}{states} | {stage.rule} |")
    return "\n".join(rows) + "\n"


def precedence_markdown(contract: Contract) -> str:
    """``PRECEDENCE.md``: every revision's outcome precedence table, from ``[[precedence]]``."""
    out = [
        f"<!-- {GENERATED} -->",
        "",
        "# Outcome precedence",
        "",
        f"_{GENERATED} Change `contract.toml` and run `toolcancel diagram` instead._",
        "",
        "When situations meet in one call, the row decides which outcome the call ends with (rule "
        "R39). Rows follow pipeline order; *Decided by* lists the transitions (by their stable "
        "ids in contract.toml; `toolcancel where ID` shows one) that cite the row.",
    ]
    for name in contract.revisions:
        table = contract.revision(name)
        title = contract.revision_info[name].get("title", name)
        out += [
            "",
            f"## {_md_cell(title)} — revision `{name}`",
            "",
            "| Row | Situation | Outcome | Beats | Rules | Decided by |",
            "|---:|---|---|---|---|---|",
        ]
        for p in table.precedence:
            deciding = [t for t in table.transitions if t.precedence == p.row]
            deciders = ", ".join(f"`{t.id}`" for t in deciding)
            cells = [
                str(p.row),
                _md_cell(p.situation),
                _md_cell(p.outcome + _outcomes_by_decider(deciding)),
                _md_cell(p.beats),
                ", ".join(p.rules),
                deciders,
            ]
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"
