"""The build's one option: ``TOOLCANCEL_COMPILE=1`` compiles the registry's driver with mypyc.

    TOOLCANCEL_COMPILE=1 pip install .          # or: python -m build --wheel

builds the package as usual, then compiles the registry's per-call driver (:data:`COMPILED`) with
mypyc into the wheel beside its source, as black and mypy ship their compiled builds: Python
imports the compiled modules (extension modules come first), their sources stay in the wheel as
the reference, and the wheel is tagged for the platform.  Unset, the build is pure Python -- the
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
COMPILED = ("stepping", "driver", "binding")
# The modules mypyc compiles, as one group: the registry's per-call driver, the call it extends
# and the binding that runs it in a task (toolcancel.runtime.registry says which does what).
# What compiling them asks of the code -- the one place it is written; the modules point here:
#   * Types are trusted: mypyc checks each annotation at run time and trusts mypy's narrowing, so
#     a variable another coroutine changes while this one is suspended is typed Any (driver's
#     ``running``), and a value from user code is checked before it is narrowed.
#   * Native classes: the group's classes have fixed __slots__, no property with a deleter (the
#     view, runtime/execution.py, stays outside), and are patched by the mutants only in the pure
#     build (selfcheck/mutants.py refuses a compiled one).
#   * What must be interpreted stays outside: a coroutine the garbage collector must throw
#     GeneratorExit into (runtime/owning.py: a compiled one is freed without it), and every class
#     an embedder may subclass or patch on an instance (ToolRegistry, runtime/toolregistry.py;
#     the call's plan, runtime/plan.py).
#   * The group imports only the contract room and runtime modules outside it, never the reverse
#     by type (plan.py, not toolregistry, is what the call knows of its registry).


class CompiledDistribution(Distribution):
    def has_ext_modules(self) -> bool:  # a platform wheel when it carries the compiled driver
        return COMPILE or super().has_ext_modules()


class BuildPy(build_py):
    """Build the package, then (when compiling) the driver's extension modules beside it."""

    def run(self) -> None:
        # An in-tree build reuses its build folder: the libraries of an earlier compiled build
        # must not reach this wheel (they would shadow the sources they were built from).
        for stale in glob.glob(os.path.join(self.build_lib, "*__mypyc.*")) + glob.glob(
            os.path.join(self.build_lib, "toolcancel", "runtime", "*.*")
        ):
            if stale.endswith((".so", ".pyd")):
                os.remove(stale)
        super().run()
        if COMPILE and not getattr(self, "editable_mode", False):
            self._compile(self.build_lib)

    def _compile(self, build_lib: str) -> None:
        # mypyc type-checks the modules against the package they import from, by name: compile a
        # copy of the built package named toolcancel, then keep the libraries it made -- one per
        # module beside its source (in the runtime room), and the group's code: inside the
        # package for one module, at the top level (named after a hash of the modules) for several.
        with tempfile.TemporaryDirectory(prefix="toolcancel-mypyc-") as tmp:
            shutil.copytree(os.path.join(build_lib, "toolcancel"), os.path.join(tmp, "toolcancel"))
            # The build environment has none of the optional dependencies (trio, Dask) that other
            # modules import where they are used: mypy takes what it cannot find as Any.
            done = subprocess.run(
                [sys.executable, "-m", "mypyc", "--ignore-missing-imports"]
                + [f"toolcancel/runtime/{module}.py" for module in COMPILED],
                cwd=tmp,
                check=False,
            )
            built = [
                os.path.relpath(path, tmp)
                for pattern in ("*", os.path.join("toolcancel", "runtime", "*"))
                for path in glob.glob(os.path.join(tmp, pattern))
                if path.endswith((".so", ".pyd"))
            ]
            if done.returncode or len(built) != len(COMPILED) + 1:
                raise SystemExit(
                    f"TOOLCANCEL_COMPILE=1: mypyc could not compile {', '.join(COMPILED)} (what "
                    "it said is above; it needs a C compiler); unset TOOLCANCEL_COMPILE for the "
                    "pure build"
                )
            for library in built:
                shutil.copy2(os.path.join(tmp, library), os.path.join(build_lib, library))


setup(
    distclass=CompiledDistribution,
    cmdclass={"build_py": BuildPy},
    setup_requires=[MYPY] if COMPILE else [],
)
