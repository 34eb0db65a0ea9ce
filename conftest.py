"""Hypothesis profiles for tests/ and model_tests/, registered once.

Profiles (choose with the ``HYPOTHESIS_PROFILE`` environment variable; default ``ci``):

* ``ci`` -- derandomized, so every run tries the same examples and a red build is reproducible
  from the log alone; sized to finish well inside the CI budget, and large enough that the
  stateful test reaches every cell of the cancellation matrix and kills every mutant.
* ``thorough`` -- many more examples and longer runs, randomized (new interleavings each run),
  with the example database on so a failure found once is replayed first next time.

``too_slow`` is suppressed because a stateful step drives a real event loop; ``data_too_large``
because long runs of many calls are the point.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile(
    "ci",
    max_examples=1000,
    stateful_step_count=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=_SUPPRESSED,
)
settings.register_profile(
    "thorough",
    max_examples=10_000,
    stateful_step_count=100,
    deadline=None,
    suppress_health_check=_SUPPRESSED,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Progress lines (``toolcancel.cli.main.Progress``) depend on how fast the machine is, so commands
# run by the tests show none and every stderr a test compares is the same on a loaded machine; the
# tests of the progress display itself drive it with their own clock and stream.
os.environ.setdefault("TOOLCANCEL_PROGRESS", "0")
