"""Declared deviations: the known ways a real implementation departs from the contract.

A deviation is to a rule what a retry behaviour is to D11: a choice an implementation's author
makes once and knows about (the original classifies deadlines by code, D13; the later source
re-normalises what an around wrapper authored, E.7).  ``spec/contract.toml`` lists each one
(``[[deviation]]``) with the rules it departs from, the vectors it can touch and, where our
reference registry can behave so, the mutant that models it.  An adapter declares the ones its
registry has in its hello (``deviations``); this module checks that declaration and renders the
contract's table of them, so CONTRACT.md states no count by hand.

How a declared deviation is to be judged (the conformance runner's business; not built yet:
today a declaration is validated and every vector judged by the contract): a vector the deviation
touches is judged against the deviation's own expectation -- what the modelling mutant answers --
and reported as "deviates as declared", never as a pass; where there is no model, a failing
vector in scope is reported as declared but unverified; every undeclared failure is listed first.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .contract import Deviation, load_contract


def problem(declared: Any) -> str | None:
    """Why a hello's ``deviations`` cannot be used, or None: a list of distinct names of the
    contract's deviations."""
    known = [d.name for d in load_contract().deviations]
    names = ", ".join(known)
    if not (isinstance(declared, list) and all(isinstance(n, str) for n in declared)):
        shown = json.dumps(declared, ensure_ascii=False)[:200]
        return (
            f"the adapter's hello declares deviations {shown}; a list of names of the "
            f"contract's deviations ({names}), or none"
        )
    for name in declared:
        if name not in known:
            return (
                f"the adapter's hello declares the unknown deviation {name[:200]!r}; the "
                f"contract's deviations are {names} (spec/contract.toml)"
            )
    if len(set(declared)) != len(declared):
        return f"the adapter's hello declares a deviation twice: {json.dumps(declared)[:200]}"
    return None


def _measured(d: Deviation) -> str:
    return "; ".join(f"{m.source}: {m.vectors:,}" for m in d.measured) or "—"


def markdown_table(deviations: Sequence[Deviation] | None = None) -> str:
    """The contract's deviations as the Markdown table CONTRACT.md carries ("What revised
    is"): name to declare, rules departed from, what the implementation does, the vectors it
    can touch, what it failed undeclared (measured outside, by registries faithful to the
    original), whether it is modelled."""
    rows = [
        "| declare | departs from | what the implementation does | revisions | can touch "
        "| failed undeclared (measured against faithful registries) | modelled by |",
        "|---|---|---|---|---|---|---|",
    ]
    contract = load_contract()
    for d in contract.deviations if deviations is None else deviations:
        scope = "; ".join(f"`{k}`: {', '.join(f'`{v}`' for v in vs)}" for k, vs in d.scope.items())
        revisions = ", ".join(r for r in contract.revisions if r in d.revisions)
        model = f"mutant `{d.model}`" if d.model else "— (named, not modelled)"
        rows.append(
            f"| `{d.name}` | {', '.join(d.departs_from)} | {d.source}: {d.doc} | {revisions} "
            f"| {scope or 'every vector'} | {_measured(d)} | {model} |"
        )
    return "\n".join(rows)
