"""The import layers of ``.importlinter`` hold, and an arrow that runs back up fails them.

The layers (contract -> runtime | oracle -> ... -> self-verification -> teaching -> cli), the
independence of the oracle and the runtime, and the ban on import circles are declared once, in
``.importlinter``, and checked by import-linter (``lint-imports``).  The other tests copy the
package, add one import that breaks a contract, and expect the check to name it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [str(LINT), "--no-logo", "--no-cache", "--config", str(cwd / ".importlinter")],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_package_keeps_its_layers() -> None:
    proc = lint(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 3 kept, 0 broken." in proc.stdout


def planted(tmp_path: Path, module: str, line: str) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on a copy of the package whose ``module`` (a path under the package)
    ends with ``line``."""
    package = tmp_path / "toolcancel"
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "machine", package, ignore=skip)
    shutil.copy(ROOT / ".importlinter", tmp_path)
    source = package / module
    source.write_text(source.read_text("utf-8") + f"\n{line}\n")
    return lint(tmp_path, pythonpath=tmp_path)


def test_an_arrow_back_up_breaks_the_build(tmp_path: Path) -> None:
    proc = planted(tmp_path, "contract/loader.py", "from ..cli.main import CliError  # back up")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "BROKEN" in proc.stdout
    assert "toolcancel.contract.loader -> toolcancel.cli.main" in proc.stdout


def test_an_oracle_that_runs_the_runtime_breaks_the_build(tmp_path: Path) -> None:
    """Even a lazy import, inside a function, of the runtime from the judge breaks the
    independence contract, which names it."""
    line = "def _run() -> None:\n    from ...runtime.signals import AbortController  # noqa"
    proc = planted(tmp_path, "oracle/judge/record.py", line)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "The oracle and the runtime are independent: neither imports the other BROKEN" in (
        proc.stdout.replace("\n", " ")
    )
    assert "toolcancel.oracle.judge.record -> toolcancel.runtime.signals" in proc.stdout
