"""The import layers of ``.importlinter`` hold, and an arrow that runs back up fails them.

The layers (contract -> runtime -> oracle -> self-verification -> teaching -> cli) and the
ban on import circles are declared once, in ``.importlinter``, and checked by import-linter
(``lint-imports``).  The second test copies the package, adds one import from the contract's
loader up to the command line, and expects the check to name it.
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


def test_an_arrow_back_up_breaks_the_build(tmp_path: Path) -> None:
    package = tmp_path / "toolcancel"
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "machine", package, ignore=skip)
    shutil.copy(ROOT / ".importlinter", tmp_path)
    loader = package / "contract" / "loader.py"
    loader.write_text(loader.read_text("utf-8") + "\nfrom ..cli.main import CliError  # back up\n")
    proc = lint(tmp_path, pythonpath=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "BROKEN" in proc.stdout
    assert "toolcancel.contract.loader -> toolcancel.cli.main" in proc.stdout
