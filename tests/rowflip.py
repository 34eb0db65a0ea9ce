"""A pytest plugin: run the tests that name one rule against a contract with one row changed.

Loaded only by tests/test_rule_rows.py, in a pytest of its own (``-p rowflip``, with this folder
on ``PYTHONPATH``), with two variables set:

* ``TOOLCANCEL_ROW_FLIP``: the spec mutant, a JSON object of
  :class:`~toolcancel.selfcheck.specmutants.Perturbation`'s fields.  Before any test is collected,
  :func:`~toolcancel.contract.loader.load_contract` is made to answer the perturbed contract, so
  every registry, judge and expectation built in-process reads the changed row (subprocesses a
  test starts read the shipped file: they cannot fail for it, only cost time);
* ``TOOLCANCEL_ROW_FLIP_RULE``: the rule; every collected test whose ``rules`` marker does not
  name it is deselected -- the rule-to-test map is the markers, read off the collection.

Hypothesis runs 100 examples a test here (the ``rowflip`` profile): a changed row a rule suite
sees fails in its first examples; the full profile is the suite's own run.  It neither shrinks nor
explains the failing example: the question here is only whether a test naming the rule fails,
and shrinking a stateful run was most of the sample's cost (R21: 40 of its 66 CPU seconds).
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import Phase, settings
from toolcancel.contract import loader


def pytest_configure(config: pytest.Config) -> None:
    from toolcancel.selfcheck.specmutants import Perturbation

    fields = json.loads(os.environ["TOOLCANCEL_ROW_FLIP"])
    mutant = Perturbation(**fields).apply(loader.load_contract())
    loader.load_contract.cache_clear()
    parse = loader.parse_contract
    loader.parse_contract = lambda data, source: mutant  # type: ignore[assignment]
    try:
        assert loader.load_contract() is mutant  # cached: every later caller gets the mutant
    finally:
        loader.parse_contract = parse
    settings.register_profile(
        "rowflip",
        parent=settings.get_profile("ci"),
        max_examples=100,
        phases=[p for p in Phase if p not in (Phase.shrink, Phase.explain)],
    )
    settings.load_profile("rowflip")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rule = os.environ["TOOLCANCEL_ROW_FLIP_RULE"]
    keep = [i for i in items if any(rule in m.args for m in i.iter_markers("rules"))]
    kept = {id(i) for i in keep}
    config.hook.pytest_deselected(items=[i for i in items if id(i) not in kept])
    # cheap first (-x stops at the first failure): the rule suites, then the rest, then what
    # runs subprocesses or a stateful model
    keep.sort(key=lambda i: (i.get_closest_marker("slow") is not None,
                             "model_tests" in i.nodeid, "test_rules_" not in i.nodeid))
    items[:] = keep
