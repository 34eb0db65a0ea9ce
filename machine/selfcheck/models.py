"""The modelled deviations' models: what our registry answers when it behaves as a declared
deviation says (``expects`` in ``spec/contract.toml``'s ``[[deviation]]`` table).

conform judges a vector a declared deviation touches against the model's answer
(:class:`toolcancel.oracle.conform.deviations.Declared`); a model runs a registry and the oracle
runs none, so the command line hands :data:`MODELS` in.  Importing this module loads no registry:
a model loads the harness when it is first built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from ..contract.loader import load_contract
from ..oracle.vectors import Vector, expectation

if TYPE_CHECKING:
    from ..oracle.conform.deviations import Model


def timeout_by_code(retry: str, departs_from: Sequence[str]) -> Callable[[Vector], Vector]:
    """D13's model: what our registry answers with its timeout policy classifying by code
    (:func:`toolcancel.runtime.timeout_policy.install_timeout_policy`), under the declared retry
    behaviour.  Its scope holds no MAY point (tests/test_deviations.py checks it), so the model's
    one run is the whole expectation.  The run breaks the rules the deviation departs from, as
    it must (the judge's checks in the harness say so); any other breach still refuses it."""

    # our registry and its clock: loaded only where the deviation is declared
    from ..runtime.virtual_time import VirtualClock, run
    from .harness import Harness

    def model(v: Vector) -> Vector:
        default = load_contract().default_retry
        clock = VirtualClock()
        chosen = None if retry == default else retry
        harness = Harness(v.scenario, None, clock, chosen, classify="code")  # our registry
        obs = run(harness.run(), clock=clock)
        return replace(v, expected=expectation(obs, departs_from=departs_from), alternatives=())

    return model


MODELS: Final[Mapping[str, Model]] = {"timeout_by_code": timeout_by_code}
"""Each model by its ``expects`` name."""
