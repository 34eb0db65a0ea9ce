"""The ``rules`` marker for the model tests (Hypothesis profiles: the root ``conftest.py``)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rules(*ids): contract rule ids this test pins")
