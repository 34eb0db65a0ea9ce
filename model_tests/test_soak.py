"""The soak at CI size (the full 10,000 calls is ``bench/soak.py``)."""

from __future__ import annotations

import pytest

from model_tests.soak import soak


@pytest.mark.rules("R27", "R31", "R22")
def test_a_thousand_concurrent_calls_lose_and_leak_nothing() -> None:
    report = soak(1000, seed=7)
    assert report.problems == []
    assert report.task_cancellations > 100  # the awaiting task was cancelled this often
    # a cancelled task re-raises CancelledError (after its call published): not "finished"
    assert report.finished + report.task_cancellations == 1000
    # every kind of ending happened, so the soak exercised what it claims to
    for outcome in ("body_success", "body_error", "denied", "aborted", "tool_timeout"):
        assert report.outcomes.get(outcome, 0) > 10, report.outcomes
    assert report.leaked_bytes < 64 * 1024, report.leaked_bytes
