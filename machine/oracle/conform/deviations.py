"""Declared deviations: the known ways a real implementation departs from the contract.

A deviation is to a rule what a retry behaviour is to D11: a choice an implementation's author
makes once and knows about (the original classifies deadlines by code, D13; the later source
re-normalises what an around wrapper authored, ORIGIN.md change 7, hence the ``E7-`` names).
``spec/contract.toml`` lists each one (``[[deviation]]``) with the rules it departs from, the
vectors it can touch and, where our reference registry can behave so, the mutant that models it.
An adapter declares the ones its registry has in its hello (``deviations``); this module checks
that declaration, judges what it declares, and renders the contract's table of them, so
CONTRACT.md states no count by hand.

How a declared deviation is judged (:meth:`Declared.rejudge`): a deviation is a mask, not an
amnesty.  A vector first meets the contract's expectation through the one judge's checks.  Only
when it fails there, and a declared deviation touches it, is it judged again with the
deviation applied -- every check of the judge asked again:

* a modelled deviation (``expects``, :data:`EXPECTS`) gives an **alternative expectation**: what
  our registry answers when it behaves so (D13: its timeout policy classifying by code), the
  contract's expectation rewritten as the deviation writes results (the seed's error shape), or
  the answer read as the contract's once the deviation's own addition is set aside (a success's
  ``value``);
* a deviation whose exact observations the sources leave open has a **mask** instead
  (``mask``): the answer fields it may change and what each may become (an error, an error of
  one code, post-execute skipped).  Those fields are read as the contract's expectation when
  they are what the mask allows, and everything else is judged as the contract's: a late
  success inside its scope is still a late success.

Several declared deviations may touch one vector; the fewest whose combined alternative the
answer meets are named, and the vector "deviates as declared", never a pass.  Anything else is
an undeclared failure, cited under the rule the remaining difference breaks.  Declaring nothing
judges exactly as the contract does.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from ...contract.errors import ToolcancelError
from ...contract.loader import Deviation, load_contract
from ..judge.calls import error_code
from ..vectors import Expectation, Vector, canonical, scenario_data
from ..vectors.turns import TurnTable, TurnVector

if TYPE_CHECKING:  # conform_report imports the protocol, which checks a hello's deviations here
    from .report import Judgement


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
    return "; ".join(f"{m.source}: {m.vectors:,} (of {m.on})" for m in d.measured) or "—"


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
        model = f"{EXPECTS[d.expects]} (`{d.expects}`)" if d.expects else _mask_words(d.mask)
        if d.model:
            model += f"; mutant `{d.model}` behaves so"
        rows.append(
            f"| `{d.name}` | {', '.join(d.departs_from)} | {d.source}: {d.doc} | {revisions} "
            f"| {scope or 'every vector'} | {_measured(d)} | {model} |"
        )
    return "\n".join(rows)


def _mask_words(mask: Mapping[str, str]) -> str:
    """A mask in words, for the table: each field and what it may become."""
    kinds = {"error": "an error", "skipped": "null (post-execute skipped)"}
    parts = [
        f"`{k}` may be {kinds.get(x) or 'an error with code `' + x.removeprefix('error:') + '`'}"
        for k, x in mask.items()
    ]
    return "the contract's expectation, masked: " + "; ".join(parts) + "; all else judged"


# ------------------------------------------------------------------------------------------------
# Alternative expectations
# ------------------------------------------------------------------------------------------------

Answer = Mapping[str, Any]

class DeviationError(ToolcancelError):
    """A declared deviation this run cannot judge (its model was not handed in)."""


Model = Callable[[str, Sequence[str]], Callable[[Vector], Vector]]
"""A modelled deviation's alternative expectation, for a run's declared retry behaviour and the
rules the deviation departs from: what a registry that behaves so answers to a vector.  A model
runs a registry, and the oracle runs none: whoever runs conform hands its models in by their
``expects`` name (the command line hands in :data:`toolcancel.selfcheck.harness.MODELS`)."""


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


class Declared:
    """The deviations an adapter declared, for one run: each vector they touch gets its
    alternative expectations, and a failed vector is judged again against them."""

    def __init__(
        self,
        names: Sequence[str],
        revision: str,
        retry: str,
        models: Mapping[str, Model] | None = None,
    ) -> None:
        contract = load_contract()
        # a hello serves every revision it lists: a deviation of another one is not this run's
        self.deviations = tuple(
            d for d in contract.deviations if d.name in names and revision in d.revisions
        )
        self.retry = retry
        self.models = models or {}
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
                if d.expects not in self.models:
                    raise DeviationError(
                        f"deviation {d.name} is judged by running a registry that behaves so "
                        f"({d.expects}); run conform from toolcancel's command line, which "
                        "hands that model in"
                    )
                model = self.models[d.expects](self.retry, d.departs_from)
                for v in vectors:
                    if isinstance(v, Vector) and d.touches(scenario_data(v.scenario)):
                        found = model(v)
                        if not found.expected.same_observables(v.expected):
                            self._models[d.name, v.id] = found

    def modelled(self, name: str) -> frozenset[str]:
        """The ids of the vectors where the model of deviation ``name`` expects otherwise than
        the contract (after :meth:`prepare`): the vectors it can be seen to deviate on."""
        return frozenset(vid for n, vid in self._models if n == name)

    def _alternatives(self, d: Deviation, v: Vector, answer: Answer) -> list[tuple[Vector, Answer]]:
        """What ``d`` makes of ``v`` and ``answer``: its modelled alternative, or each way its
        mask reads the answer as one of the vector's expectations; none where it changes
        nothing (the vector's failure is not of its making)."""
        if d.expects == "timeout_by_code":
            found = [(self._models.get((d.name, v.id), v), answer)]
        elif d.expects == "seed_error_shape":
            found = [(_seed_error_shape(v), answer)]
        elif d.expects == "value_key":
            found = [(v, _value_key(answer))]
        elif d.mask:
            found = [
                (replace(v, expected=e, alternatives=()), masked)
                for e in v.expectations()
                if (masked := _masked(d.mask, e, answer)) is not None
            ]
        else:
            raise AssertionError(f"deviation {d.name}: neither expects nor mask")
        return [(w, a) for w, a in found if w is not v or a is not answer]

    def rejudge(
        self,
        v: Vector,
        answer: Answer,
        verdict: Judgement,
        judge: Callable[[Vector, Answer, frozenset[str]], Judgement],
    ) -> Judgement:
        """The verdict on ``v``, which failed the contract (``verdict``), with the declared
        deviations that touch it applied.  The fewest whose combined alternatives ``answer``
        meets -- every check of the judge passing (``judge``: its verdict on a vector and an
        answer, not asking the checks of the rules a modelled deviation departs from: what the
        environment saw of them is its behaviour) -- are named: the vector deviates as declared.
        Else it is an undeclared failure: the contract's, unless that cites a rule the touching
        deviations depart from -- then the first remaining difference under them, which is the
        one they do not explain (a relay's leak under D13 is R22, not D13's R35)."""
        touching = self.touching(v)
        remaining: list[Judgement] = []
        for k in range(1, len(touching) + 1):
            for combo in itertools.combinations(touching, k):
                options = [(v, answer)]
                for d in combo:
                    options = [o for w, a in options for o in self._alternatives(d, w, a)]
                departs = frozenset(r for d in combo if d.expects for r in d.departs_from)
                for alt_v, alt_answer in options:
                    found = judge(alt_v, alt_answer, departs)
                    if found.passed:
                        return replace(verdict, deviations=tuple(d.name for d in combo))
                    remaining.append(found)
        return _unexplained(verdict, touching, remaining)

    def rejudge_turn(
        self,
        v: TurnVector,
        answer: Answer,
        verdict: Judgement,
        judge: Callable[[TurnVector, Answer], Judgement],
    ) -> Judgement:
        """:meth:`rejudge` for a turn vector, which failed the contract (``verdict``): a turn
        has no scenario, so the deviations that reach it are those of every vector (no scope)
        whose alternative rewrites results -- each started call's, and the synthetic result of
        one that never started."""
        reaching = [d for d in self.deviations if not d.scope and d.expects in _TURN_EXPECTS]
        remaining: list[Judgement] = []
        for k in range(1, len(reaching) + 1):
            for combo in itertools.combinations(reaching, k):
                alt_v, alt_answer = v, answer
                for d in combo:
                    alt_v, alt_answer = _turn_alternative(d, alt_v, alt_answer)
                found = judge(alt_v, alt_answer)
                if found.passed:
                    return replace(verdict, deviations=tuple(d.name for d in combo))
                remaining.append(found)
        return _unexplained(verdict, reaching, remaining)


def _unexplained(
    verdict: Judgement, applied: Sequence[Deviation], remaining: Sequence[Judgement]
) -> Judgement:
    """An undeclared failure: the contract's ``verdict``, unless it cites a rule the ``applied``
    deviations depart from -- then the first ``remaining`` difference (a verdict with them
    applied) under a rule they do not explain."""
    explained = {r for d in applied for r in d.departs_from}
    if verdict.rule not in explained:
        return verdict
    return next((j for j in remaining if j.rule not in explained), verdict)


_TURN_EXPECTS: Final = ("seed_error_shape", "value_key")
"""The alternatives a turn vector can take: they rewrite results, which a turn publishes."""


def _turn_alternative(d: Deviation, v: TurnVector, answer: Answer) -> tuple[TurnVector, Answer]:
    """What ``d`` makes of a turn vector and its answer (:data:`_TURN_EXPECTS`)."""
    if d.expects == "seed_error_shape":
        table = v.table
        calls = {
            call: {
                kind: {
                    phase: tuple({**x, "result": _seed_error(x["result"])} for x in variants)
                    for phase, variants in phases.items()
                }
                for kind, phases in kinds.items()
            }
            for call, kinds in table.calls.items()
        }
        rewritten = TurnTable(table.revision, _seed_error(table.skipped), calls)
        return replace(v, table=rewritten), answer
    observed = dict(answer.get("observed") or {})
    observed["events"] = [
        {**e, "result": _without_value(e["result"])} if "result" in e else e
        for e in observed.get("events") or ()
    ]
    log = [
        {**e, "payload": _without_value(e["payload"])} if "payload" in e else e
        for e in answer.get("log") or ()
    ]
    return v, {**answer, "observed": observed, "log": log}


def _meets(kind: str, value: Any, raised: Any = None) -> bool:
    """Whether ``value`` (and, for a result, the error ``raised``) is what a mask of ``kind``
    lets an answer field become (:data:`toolcancel.contract.loader.MASK_KINDS`)."""
    if kind == "skipped":
        return value is None
    if value is None:
        return kind == "error" and raised is not None
    if not isinstance(value, Mapping) or value.get("isError") is not True:
        return False
    return kind == "error" or error_code(value) == kind.removeprefix("error:")


def _masked(mask: Mapping[str, str], exp: Expectation, answer: Answer) -> Answer | None:
    """``answer`` with each field of ``mask`` that differs from ``exp`` read as ``exp``'s, or
    None when one differs otherwise than the mask allows (a late success is never an error)."""
    observed = dict(answer.get("observed") or {})
    out = dict(answer)
    if "result" in mask and canonical(answer.get("result")) != exp.result_json:
        if not _meets(mask["result"], answer.get("result"), observed.get("raised")):
            return None
        out["result"] = exp.result
        observed["raised"] = None
    received = observed.get("post_received", ...)
    want = exp.post_received
    if "post_received" in mask and received is not ... and want is not ...:
        if canonical(received) != canonical(want):
            if not _meets(mask["post_received"], received):
                return None
            observed["post_received"] = want
    out["observed"] = observed
    return out if out != answer else None

