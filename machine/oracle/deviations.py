"""Declared deviations: the known ways a real implementation departs from the contract.

A deviation is to a rule what a retry behaviour is to D11: a choice an implementation's author
makes once and knows about (the original classifies deadlines by code, D13; the later source
re-normalises what an around wrapper authored, E.7).  ``spec/contract.toml`` lists each one
(``[[deviation]]``) with the rules it departs from, the vectors it can touch and, where our
reference registry can behave so, the mutant that models it.  An adapter declares the ones its
registry has in its hello (``deviations``); this module checks that declaration, judges what it
declares, and renders the contract's table of them, so CONTRACT.md states no count by hand.

How a declared deviation is judged (:class:`Declared`): a vector first meets the contract's
expectation through the one judge's checks.  Only when it fails there, and a declared deviation
touches it, is it judged again against the deviation's **alternative expectation** -- the same
checks, another expectation (``expects`` of the contract data, :data:`EXPECTS`): what our registry
answers when it behaves so (D13: its timeout policy classifying by code), the contract's
expectation rewritten as the deviation writes results (the seed's error shape), or the answer
read as the contract's once the deviation's own addition is set aside (a success's ``value``).
Several declared deviations may touch one vector; the fewest whose combined expectation the
answer meets are named.  A vector judged so is "deviates as declared", never a pass.  A deviation
with no model (``expects`` none) cannot be verified: a failure in its scope is reported as
"deviates as declared, not verified".  Declaring nothing judges exactly as the contract does.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from ..contract.loader import Deviation, load_contract
from ..runtime.virtual_time import VirtualClock, run
from .scenario import Harness
from .vectors import Expectation, Vector, expectation, scenario_data


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
    original), and what a vector it touches is judged against when it is declared."""
    rows = [
        "| declare | departs from | what the implementation does | revisions | can touch "
        "| failed undeclared (measured against faithful registries) | declared, judged against |",
        "|---|---|---|---|---|---|---|",
    ]
    contract = load_contract()
    for d in contract.deviations if deviations is None else deviations:
        scope = "; ".join(f"`{k}`: {', '.join(f'`{v}`' for v in vs)}" for k, vs in d.scope.items())
        revisions = ", ".join(r for r in contract.revisions if r in d.revisions)
        model = (
            f"{EXPECTS[d.expects]} (`{d.expects}`)"
            if d.expects
            else "nothing: not modelled, a failure in its scope is named \"not verified\""
        )
        if d.model:
            model += f"; mutant `{d.model}` behaves so"
        rows.append(
            f"| `{d.name}` | {', '.join(d.departs_from)} | {d.source}: {d.doc} | {revisions} "
            f"| {scope or 'every vector'} | {_measured(d)} | {model} |"
        )
    return "\n".join(rows)


# ------------------------------------------------------------------------------------------------
# Alternative expectations
# ------------------------------------------------------------------------------------------------

Answer = Mapping[str, Any]


def _timeout_by_code(retry: str, departs_from: Sequence[str]) -> Callable[[Vector], Vector]:
    """D13's model: what our registry answers with its timeout policy classifying by code
    (:func:`toolcancel.runtime.timeout_policy.install_timeout_policy`), under the declared retry
    behaviour.  Its scope holds no MAY point (tests/test_deviations.py checks it), so the model's
    one run is the whole expectation.  The run breaks the rules the deviation departs from, as
    it must (the judge's checks in the harness say so); any other breach still refuses it."""

    def model(v: Vector) -> Vector:
        default = load_contract().default_retry
        clock = VirtualClock()
        chosen = None if retry == default else retry
        harness = Harness(v.scenario, None, clock, chosen, classify="code")  # our registry
        obs = run(harness.run(), clock=clock)
        return replace(v, expected=expectation(obs, departs_from=departs_from), alternatives=())

    return model


def _seed_error(result: Any) -> Any:
    """A revised result with its error field in the seed's shape: ``{name, code}`` from
    ``info``, none where the revised error has only a message."""
    if not isinstance(result, Mapping) or not isinstance(result.get("error"), Mapping):
        return result
    info = result["error"].get("info")
    out = {k: x for k, x in result.items() if k != "error"}
    if isinstance(info, Mapping):
        out["error"] = dict(info)
    return out


def _seed_error_shape(v: Vector) -> Vector:
    def rewrite(e: Expectation) -> Expectation:
        received = e.post_received if e.post_received is ... else _seed_error(e.post_received)
        return replace(e, result=_seed_error(e.result), post_received=received)

    return replace(
        v, expected=rewrite(v.expected), alternatives=tuple(map(rewrite, v.alternatives))
    )


def _without_value(result: Any) -> Any:
    if isinstance(result, Mapping) and result.get("isError") is False and "value" in result:
        return {k: x for k, x in result.items() if k != "value"}
    return result


def _value_key(answer: Answer) -> Answer:
    """The answer with the value a success carries set aside, in its result and in what
    post-execute received: the rest is judged as the contract's."""
    observed = dict(answer.get("observed") or {})
    if "post_received" in observed:
        observed["post_received"] = _without_value(observed["post_received"])
    return {**answer, "result": _without_value(answer.get("result")), "observed": observed}


EXPECTS: Final[Mapping[str, str]] = {
    "timeout_by_code": "our registry's run with its timeout policy classifying by code",
    "seed_error_shape": "the contract's expectation with every error field in the seed's shape",
    "value_key": "the contract's expectation; a success result may carry a `value` key",
}
"""The kinds of alternative expectation a deviation's ``expects`` may name, in words."""


@dataclass(frozen=True)
class Verdict:
    """Which declared deviations explain a failed vector, and whether a model verified it."""

    names: tuple[str, ...]
    verified: bool


class Declared:
    """The deviations an adapter declared, for one run: each vector they touch gets its
    alternative expectations, and a failed vector is judged again against them."""

    def __init__(self, names: Sequence[str], revision: str, retry: str) -> None:
        contract = load_contract()
        # a hello serves every revision it lists: a deviation of another one is not this run's
        self.deviations = tuple(
            d for d in contract.deviations if d.name in names and revision in d.revisions
        )
        self.retry = retry
        self._models: dict[tuple[str, str], Vector] = {}  # only where the model differs

    def __bool__(self) -> bool:
        return bool(self.deviations)

    def touching(self, v: Vector) -> tuple[Deviation, ...]:
        data = scenario_data(v.scenario)
        return tuple(d for d in self.deviations if d.touches(data))

    def prepare(self, vectors: Sequence[Vector]) -> None:
        """Run the models of the vectors the declared deviations touch (blocking: each is a run
        of our registry on its own virtual clock; conform calls it in a thread, before judging)."""
        for d in self.deviations:
            if d.expects == "timeout_by_code":
                model = _timeout_by_code(self.retry, d.departs_from)
                for v in vectors:
                    if isinstance(v, Vector) and d.touches(scenario_data(v.scenario)):
                        found = model(v)
                        if not found.expected.same_observables(v.expected):
                            self._models[d.name, v.id] = found

    def modelled(self, name: str) -> frozenset[str]:
        """The ids of the vectors where the model of deviation ``name`` expects otherwise than
        the contract (after :meth:`prepare`): the vectors it can be seen to deviate on."""
        return frozenset(vid for n, vid in self._models if n == name)

    def _alternative(self, d: Deviation, v: Vector, answer: Answer) -> tuple[Vector, Answer]:
        if d.expects == "timeout_by_code":
            return self._models.get((d.name, v.id), v), answer
        if d.expects == "seed_error_shape":
            return _seed_error_shape(v), answer
        if d.expects == "value_key":
            return v, _value_key(answer)
        raise AssertionError(f"deviation {d.name}: no alternative for expects {d.expects!r}")

    def rejudge(
        self,
        v: Vector,
        answer: Answer,
        passes: Callable[[Vector, Answer, frozenset[str]], bool],
    ) -> Verdict | None:
        """The fewest declared deviations whose combined alternative expectation ``answer``
        meets (``passes``: the one judge's verdict on a vector and answer, not asking the checks
        of the rules the deviations depart from: what the environment saw of them -- a
        deadline's identity, D13 -- is their behaviour), or -- when none does
        -- the unmodelled deviations whose scope holds ``v``; None: an ordinary failure."""
        touching = self.touching(v)
        modelled = [d for d in touching if d.expects is not None]
        for k in range(1, len(modelled) + 1):
            for combo in itertools.combinations(modelled, k):
                alt_v, alt_answer = v, answer
                for d in combo:
                    alt_v, alt_answer = self._alternative(d, alt_v, alt_answer)
                if alt_v is v and alt_answer is answer:
                    continue
                departs = frozenset(r for d in combo for r in d.departs_from)
                if passes(alt_v, alt_answer, departs):
                    return Verdict(tuple(d.name for d in combo), True)
        unmodelled = tuple(d.name for d in touching if d.expects is None)
        return Verdict(unmodelled, False) if unmodelled else None
