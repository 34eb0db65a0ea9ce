"""A violation's reproducer (what verify prints under it) is runnable code: pasted into a fresh
interpreter it runs the same scenario on our registry and prints the result and path the
in-process run gives -- a reproducer that no longer imports is no reproducer."""

from __future__ import annotations

import subprocess
import sys

import pytest
from toolcancel.oracle.scenario_language import Scenario
from toolcancel.selfcheck.harness import run_scenario
from toolcancel.selfcheck.verifier import Violation

SCENARIOS = [
    Scenario(caller="live", cancel="gate:body", body="success"),
    Scenario(caller="live", cancel="gate:w0_after", wrappers=("wait_after",), post="block"),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.cancel)
@pytest.mark.parametrize("retry", [None, "cursor"])
def test_a_reproducer_runs_the_scenario_it_names(scenario: Scenario, retry: str | None) -> None:
    code = Violation("R28", scenario, "planted", retry).reproducer()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    obs = run_scenario(scenario) if retry is None else run_scenario(scenario, retry=retry)
    result = obs.result.to_json() if obs.result else obs.error
    path = [(p.source, p.event, p.dest) for p in obs.path]
    assert done.stdout == f"{result}\n{path}\n"
