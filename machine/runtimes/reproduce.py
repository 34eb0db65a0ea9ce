"""The runner of a reproduction script: ``repro_<runtime>.py``'s ``main``, written once.

A reproduction (docs/REAL-WORLD.md) is an async function that prints what a runtime did and
returns True when the behaviour reproduces; a script holds them in ``REPRODUCTIONS`` and ends
with ``sys.exit(reproduce(REPRODUCTIONS))``, importing this runner inside its ``__main__`` block
so that each reproduction still pastes into an issue without toolcancel.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence

import anyio

Reproduction = Callable[[], Awaitable[bool]]
"""Prints what the runtime did; True when the behaviour reproduces."""


def reproduce(
    reproductions: Mapping[str, Reproduction], argv: Sequence[str] | None = None
) -> int:
    """Run the reproductions named in ``argv`` (default: the command line; none named: all), each
    on a fresh asyncio loop; 0 if every one reproduced, 1 if one did not (the runtime changed:
    regenerate docs/REAL-WORLD.md), 2 for a name the script does not hold."""
    names = list(sys.argv[1:] if argv is None else argv) or list(reproductions)
    unknown = [n for n in names if n not in reproductions]
    if unknown:
        print(f"no reproduction {', '.join(map(repr, unknown))}: the script holds "
              f"{', '.join(reproductions)}", file=sys.stderr)  # fmt: skip
        return 2
    failed = []
    for name in names:
        print(f"{name}: ", end="", flush=True)
        if not anyio.run(reproductions[name]):
            failed.append(name)
    if failed:
        print(f"did not reproduce: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0
