"""Moved: the runtime adapter kit is ``toolcancel.runtimes`` (installed with toolcancel).

This module re-exports its names for adapters written against it; import ``toolcancel.runtimes``
instead.  It goes once no adapter here imports it.
"""

from __future__ import annotations

from toolcancel.runtimes import *  # noqa: F403
from toolcancel.runtimes import __all__ as __all__
