"""``toolcancel native``: compile the registry with mypyc, or say which registry runs."""

from __future__ import annotations

import argparse
import os
from typing import Any

from .. import native
from ..cli import complain


def register(sub: Any) -> None:
    p = sub.add_parser(
        "native",
        help="compile the registry with mypyc (build), or say which one runs (status)",
        description="`build` compiles toolcancel/registry.py with mypyc (it comes with mypy) into "
        "toolcancel/_native/, where the package loads it from as long as registry.py is the "
        "source it was built from; an edited registry.py runs interpreted until it is built "
        "again. TOOLCANCEL_PURE=1 always runs the source. `status` says which registry this "
        "interpreter runs. Exit 0 done, 1 the build failed.",
    )
    p.add_argument("action", choices=("build", "status"), nargs="?", default="status")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "build":
        try:
            folder = native.build()
        except native.NativeBuildError as exc:
            complain("native", str(exc))
            return 1
        print(f"compiled registry: {folder}")
        return 0
    folder = native.build_dir()
    built = "built" if native.complete(folder) else "not built"
    runs = "compiled" if native.loaded() else "interpreted"
    pure = os.environ.get(native.PURE_ENV, "") not in ("", "0")
    runs += " (TOOLCANCEL_PURE is set)" if pure else ""
    print(f"registry: {runs}; build for this source and interpreter: {built} ({folder})")
    return 0
