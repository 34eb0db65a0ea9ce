"""Which registry a process runs is decided when the package is built, never at import.

The compiled registry is a build option (``TOOLCANCEL_COMPILE=1 pip install .``, setup.py): a
platform wheel carries mypyc's driver beside its source, and Python imports it as it imports any
extension module.  So ``import toolcancel`` installs no import hook and loads nothing, and an
install runs compiled exactly when it shipped mypyc's driver.  ``scripts/test`` runs this file in
both of its venvs: .venv (the default build, editable and pure) and .venv-compiled (the compiled
wheel), where it fails if the registry's suites beside it ran the source.
"""

from __future__ import annotations

import site
import subprocess
import sys
from importlib import metadata

import toolcancel.runtime.registry


def test_import_toolcancel_adds_no_import_hook_and_loads_no_module_of_its_own() -> None:
    probe = (
        "import sys; hooks = list(sys.meta_path); import toolcancel; "
        "print(sys.meta_path == hooks, sorted(m for m in sys.modules "
        "if m.startswith('toolcancel.')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert done.stdout.split(None, 1) == ["True", "[]\n"], done.stdout


def test_an_install_runs_compiled_exactly_when_it_ships_the_compiled_driver() -> None:
    # the installed distribution's record (not an egg-info a build left in the working directory)
    (dist,) = metadata.distributions(name="toolcancel", path=sorted(set(site.getsitepackages())))
    files = dist.files
    assert files is not None, "toolcancel has no RECORD: it is not installed by pip"
    shipped = [str(f) for f in files if str(f).startswith("toolcancel/")
               and str(f).endswith((".so", ".pyd"))]  # fmt: skip
    registry = toolcancel.runtime.registry
    assert registry.compiled() == bool(shipped), (shipped, registry.__file__)
