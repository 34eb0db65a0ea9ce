"""The build's one option: ``TOOLCANCEL_COMPILE=1`` compiles the registry's driver with mypyc.

    TOOLCANCEL_COMPILE=1 pip install .          # or: python -m build --wheel

builds the package as usual, then compiles ``toolcancel/registry.py`` (the per-call driver) with
mypyc into the wheel beside its source, as black and mypy ship their compiled builds: Python
imports the compiled module (extension modules come first), ``registry.py`` stays in the wheel as
its reference, and the wheel is tagged for the platform.  Unset, the build is pure Python -- the
default, and what the mutants and CrossHair run.  Nothing is compiled at run time and nothing is
written into the installed package.  Everything else is declared in pyproject.toml.

mypy (which brings mypyc) is asked of the build environment only when compiling
(``setup_requires``, which the build backend reports as a build requirement); mypyc's own build
needs a C compiler.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

COMPILE = os.environ.get("TOOLCANCEL_COMPILE", "") not in ("", "0")
MYPY = "mypy==2.4.1"  # the version the dev extra pins: the one the driver is type-checked with


class CompiledDistribution(Distribution):
    def has_ext_modules(self) -> bool:  # a platform wheel when it carries the compiled driver
        return COMPILE or super().has_ext_modules()


class BuildPy(build_py):
    """Build the package, then (when compiling) the driver's extension modules beside it."""

    def run(self) -> None:
        super().run()
        if COMPILE and not getattr(self, "editable_mode", False):
            self._compile(os.path.join(self.build_lib, "toolcancel"))

    def _compile(self, package: str) -> None:
        # mypyc type-checks the module against the package it imports from, by name: compile a
        # copy of the built package named toolcancel, then keep the two libraries it made.
        with tempfile.TemporaryDirectory(prefix="toolcancel-mypyc-") as tmp:
            shutil.copytree(package, os.path.join(tmp, "toolcancel"))
            done = subprocess.run(
                [sys.executable, "-m", "mypyc", "toolcancel/registry.py"], cwd=tmp, check=False
            )
            built = glob.glob(os.path.join(tmp, "toolcancel", "registry*.so")) + glob.glob(
                os.path.join(tmp, "toolcancel", "registry*.pyd")
            )
            if done.returncode or len(built) != 2:
                raise SystemExit(
                    "TOOLCANCEL_COMPILE=1: mypyc could not compile toolcancel/registry.py "
                    "(it needs a C compiler); unset TOOLCANCEL_COMPILE for the pure build"
                )
            for library in built:
                shutil.copy2(library, package)


setup(
    distclass=CompiledDistribution,
    cmdclass={"build_py": BuildPy},
    setup_requires=[MYPY] if COMPILE else [],
)
