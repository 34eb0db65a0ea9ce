"""The wheel is what users get: it must import, ship the contract, and run a call from a
fresh virtual environment that has nothing but the wheel and its declared dependencies."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

SMOKE = """
import asyncio, importlib.resources as r
import toolcancel
text = r.files("toolcancel.spec").joinpath("contract.toml").read_text("utf-8")
assert "[[transition]]" in text
assert r.files("toolcancel.spec").joinpath("CONTRACT.md").is_file()
reg = toolcancel.ToolRegistry()
async def body(args, call):
    return [{"type": "text", "text": "hi " + args["who"]}]
reg.register("greet", body)
ctl = toolcancel.AbortController()
print(asyncio.run(reg.execute("greet", {"who": "wheel"}, signal=ctl.signal)).to_json())
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
    )
    (found,) = out.glob("toolcancel-*.whl")
    return found


def test_wheel_ships_the_package_and_the_contract_but_not_the_tests(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "toolcancel/__init__.py",
        "toolcancel/py.typed",
        "toolcancel/core.py",
        "toolcancel/commands/verify.py",
        "toolcancel/spec/contract.toml",
        "toolcancel/spec/CONTRACT.md",
    ):
        assert needed in names, needed
    assert not any(n.startswith(("tests/", "model_tests/", "machine/")) for n in names)


def test_fresh_venv_imports_the_wheel_and_runs_a_call(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run([py, "-m", "pip", "install", "-q", str(wheel)], check=True)
    out = subprocess.run([py, "-c", SMOKE], check=True, capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.stdout.strip() == '{"content":[{"text":"hi wheel","type":"text"}],"isError":false}'
    cli = subprocess.run([env_dir / "bin" / "toolcancel", "--help"], capture_output=True,
                         text=True, cwd=tmp_path)
    assert cli.returncode == 0 and "verify" in cli.stdout
