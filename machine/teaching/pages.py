"""The marked blocks of the hand-written pages: where CONTRACT.md, PRIMER.md and the other pages
restate the contract's data, ``toolcancel regen`` writes that part, never a person.

A block is the text between ``<!-- BEGIN GENERATED: <name> -->`` and
``<!-- END GENERATED: <name> -->``; :data:`BLOCKS` says, per page, which blocks it has and the pure
function of the contract that writes each.  The prose around a block stays hand-written and is
held to the data by tests (tests/test_prose_data.py).  A page that loses a block's markers, or
carries a block nobody writes, is refused with one line naming the page and the block: a marker
typed by hand must not silently stop being refilled.

Blocks that read the shipped vectors (the primer's abort matrix) are written by a second pass,
after the vectors (:data:`AFTER_VECTORS`), so regen's order stays "inputs before outputs".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

from ..contract.errors import ToolcancelError
from ..contract.loader import Contract, load_contract

__all__ = [
    "AFTER_VECTORS",
    "BLOCKS",
    "PageError",
    "fill",
    "refresh",
    "revisions_markdown",
    "spec_mutant_space",
]

Writer = Callable[[Contract], str]

_BLOCK = re.compile(
    r"(<!-- BEGIN GENERATED: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)"
    r"(<!-- END GENERATED: (?P=name) -->)",
    re.S,
)
_ANY_BEGIN = re.compile(r"<!-- BEGIN GENERATED: ([\w.-]+) -->")


class PageError(ToolcancelError):
    """A page's markers do not match the blocks it is meant to carry."""


def _ranges(ids: list[int]) -> str:
    """``[1, 2, 3, 5]`` as ``R1–R3, R5``."""
    runs: list[list[int]] = []
    for n in sorted(ids):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"R{r[0]}" if len(r) == 1 else f"R{r[0]}–R{r[-1]}" for r in runs)


def revisions_markdown(contract: Contract) -> str:
    """CONTRACT.md's table of revisions: ``[revision.*]`` of the contract file and the rules
    that hold in each (a rule's ``revisions``)."""
    rows = [
        "| Revision | `contract.toml` name | Caller signal | Rules that hold | Summary |",
        "|---|---|---|---|---|",
    ]
    for name in contract.revisions:
        info = contract.revision_info[name]
        default = " (the default)" if name == contract.default_revision else ""
        rules = _ranges([int(r.id[1:]) for r in contract.rules if name in r.revisions])
        rows.append(
            f"| {info.get('title', name)} | `{name}`{default} | {info.get('caller_signal', '—')} "
            f"| {rules} | {info.get('summary', '—')} |"
        )
    return "\n".join(rows) + "\n"


def _deviations(contract: Contract) -> str:
    from ..oracle.conform.deviations import markdown_table

    return markdown_table(contract.deviations) + "\n"


def _stages(contract: Contract) -> str:
    from .tables import stages_markdown

    return stages_markdown(contract)


def _abort_matrix(contract: Contract) -> str:
    from .abortmatrix import matrix_markdown

    return matrix_markdown(contract)


def spec_mutant_space(contract: Contract) -> str:
    """SPEC-MUTANTS.md's figures of what ``verify --spec-mutants`` runs: the perturbations of
    each revision by kind, and the configurations each perturbation is judged on at the bounds
    the page talks about (0 and 1 wrapper)."""
    from ..selfcheck.space import configurations
    from ..selfcheck.specmutants import KINDS, perturbations

    rows = [
        "| revision | " + " | ".join(KINDS) + " | perturbations | configurations at "
        "`--max-wrappers 0` | at `--max-wrappers 1` |",
        "|---|" + "---:|" * (len(KINDS) + 3),
    ]
    total = 0
    for name in contract.revisions:
        found = perturbations(name, contract)
        total += len(found)
        kinds = " | ".join(str(sum(1 for p in found if p.kind == k)) for k in KINDS)
        spaces = " | ".join(f"{sum(1 for _ in configurations(name, bound)):,}" for bound in (0, 1))
        rows.append(f"| {name} | {kinds} | {len(found)} | {spaces} |")
    return "\n".join(rows) + f"\n\n{total} perturbations in all.\n"


BLOCKS: Mapping[str, Mapping[str, Writer]] = {
    "spec/CONTRACT.md": {
        "revisions": revisions_markdown,
        "deviations": _deviations,
        "stages": _stages,
    },
    "spec/SPEC-MUTANTS.md": {"spec-mutant-space": spec_mutant_space},
}
"""Page (from the checkout's root) -> block name -> the function that writes the block."""

AFTER_VECTORS: Mapping[str, Mapping[str, Writer]] = {
    "spec/PRIMER.md": {"abort-matrix": _abort_matrix},
}
"""Blocks that read the shipped vectors: written after the vectors' generator."""


def fill(page: str, text: str, writers: Mapping[str, Writer], contract: Contract) -> str:
    """``text`` with every block of ``writers`` refilled; :class:`PageError` names the first
    block that is missing or that nobody writes."""
    found = _ANY_BEGIN.findall(text)
    for name in found:
        if name not in writers:
            raise PageError(
                f"{page}: block {name!r} is not one regen writes ({', '.join(writers)})"
            )
    for name in writers:
        if found.count(name) != 1:
            raise PageError(
                f"{page}: needs exactly one block '<!-- BEGIN GENERATED: {name} -->' ... "
                f"'<!-- END GENERATED: {name} -->' (found {found.count(name)})"
            )

    def refill(m: re.Match[str]) -> str:
        return m.group(1) + writers[m.group("name")](contract) + m.group(4)

    out, count = _BLOCK.subn(refill, text)
    if count != len(writers):
        raise PageError(f"{page}: a block's END marker is missing or misnamed")
    return out


def refresh(
    pages: Mapping[str, Mapping[str, Writer]], root: Path = Path(), check: bool = False
) -> list[str]:
    """Refill the blocks of ``pages``; return the pages that changed (with ``check``, that
    would change; nothing is written)."""
    from ..contract.fileio import write_text

    contract = load_contract()
    changed: list[str] = []
    for page, writers in pages.items():
        path = root / page
        text = path.read_text("utf-8")
        new = fill(page, text, writers, contract)
        if new != text:
            changed.append(page)
            if not check:
                write_text(path, new)
    return changed
