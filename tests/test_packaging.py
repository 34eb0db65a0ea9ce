"""The wheel is what users get: it must import, ship the contract, and run a call from a
fresh virtual environment that has nothing but the wheel and its declared dependencies -- and
the documented commands must work there: ``diagram`` (DOT and Mermaid with no system binary),
``explain --mermaid`` without Graphviz's ``dot``, ``explain --svg`` with it (and one line saying
how to get it without).  Building it prints no packaging warning."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
import xml.etree.ElementTree as ET
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


NOISE = re.compile(r"\b[A-Z]\w*Warning\b|^\s*WARNING\b(?!: Location 'file:)")
"""A packaging warning in build output -- a Python warning category (SetuptoolsDeprecationWarning,
BuildBackendWarning) or build's ``WARNING`` lines: what a deprecated license table or an unlisted
package prints.  Not distutils' lowercase log lines ("warning: install_lib: byte-compiling is
disabled"), nor the "WARNING: Location 'file:...' is ignored" of this machine's pip config."""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    noise = [ln for ln in (build.stdout + build.stderr).splitlines() if NOISE.search(ln)]
    assert noise == [], "\n".join(noise)  # e.g. a deprecated license table, a missing package
    (found,) = out.glob("toolcancel-*.whl")
    return found


def fresh_install(wheel: Path, env_dir: Path) -> Path:
    """A fresh virtual environment at ``env_dir`` with ``wheel`` and its dependencies; its bin
    directory.  This venv's pip installs into it (``--python``): bootstrapping a pip of its own
    costs seconds per venv and tests nothing of ours."""
    venv.EnvBuilder(with_pip=False).create(env_dir)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"),
                    "install", "-q", str(wheel)], check=True)  # fmt: skip
    return env_dir / "bin"


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel and its dependencies; its bin directory."""
    return fresh_install(wheel, tmp_path_factory.mktemp("venv"))


def _run(
    bin_dir: Path, cwd: Path, *argv: str, dot: bool = True
) -> subprocess.CompletedProcess[str]:
    """The installed command, from ``cwd``; ``dot=False``: with a PATH that has no Graphviz."""
    path = os.environ["PATH"] if dot else str(bin_dir)
    env = {**os.environ, "PATH": path}
    return subprocess.run([str(bin_dir / "toolcancel"), *argv], capture_output=True, text=True,
                          cwd=cwd, env=env, check=False)  # fmt: skip


def test_the_development_install_of_a_clean_clone_prints_no_packaging_warning(
    tmp_path: Path,
) -> None:
    # What scripts/dev-env runs, minus the dev tools (the point is our project's build):
    # an editable install of a copy of the tracked files into a fresh venv.
    clone = tmp_path / "clone"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    dev_env = (ROOT / "scripts" / "dev-env").read_text("utf-8")
    (line,) = [ln.strip() for ln in dev_env.splitlines() if "pip install --quiet -e" in ln]
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    command = line.replace(".venv/bin/python", str(env_dir / "bin" / "python"))
    command = re.sub(r"-e '\.\[[a-z,]+\]'", "--no-deps -e .", command)
    # as dev-env does first: a current pip shows the build backend's warnings
    subprocess.run([env_dir / "bin" / "python", "-m", "pip", "install", "-q", "--upgrade", "pip"],
                   check=True, capture_output=True)  # fmt: skip
    done = subprocess.run(["bash", "-c", command], cwd=clone, capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    noise = [ln for ln in (done.stdout + done.stderr).splitlines() if NOISE.search(ln)]
    assert noise == [], "\n".join(noise)


def test_wheel_ships_the_package_and_the_contract_but_not_the_tests(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "toolcancel/__init__.py",
        "toolcancel/py.typed",
        "toolcancel/contract/core.py",
        "toolcancel/cli/commands/verify.py",
        "toolcancel/runtimes/driver.py",
        "toolcancel/spec/contract.toml",
        "toolcancel/spec/CONTRACT.md",
        "toolcancel/spec/vectors/seed.jsonl",
        "toolcancel/spec/vectors/revised.jsonl",
        "toolcancel/spec/vectors/README.md",
        "toolcancel/explorer_site/index.html",
        "toolcancel/explorer_site/explorer.js",
        "toolcancel/explorer_site/explorer.css",
    ):
        assert needed in names, needed
    assert not any(n.startswith(("tests/", "model_tests/", "machine/")) for n in names)


def test_fresh_venv_imports_the_wheel_and_runs_a_call(installed: Path, tmp_path: Path) -> None:
    out = subprocess.run([installed / "python", "-c", SMOKE], check=True, capture_output=True,
                         text=True, cwd=tmp_path)  # fmt: skip
    assert out.stdout.strip() == '{"content":[{"text":"hi wheel","type":"text"}],"isError":false}'
    cli = _run(installed, tmp_path, "--help")
    assert cli.returncode == 0 and "verify" in cli.stdout
    version = _run(installed, tmp_path, "--version")
    assert (version.returncode, version.stdout) == (0, "toolcancel 0.1.0\n")


def test_a_runtime_adapter_outside_the_repository_runs_on_the_installed_kit(
    wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """An outsider's adapter (the toy runtime, copied out of the checkout) imports only the
    installed ``toolcancel.runtimes`` (the ``kit`` extra) and is judged by the installed
    conform (21 of the 35 stage-less vectors need only what it has); its control row, our
    registry through its mapping, passes every vector."""
    env_dir = tmp_path_factory.mktemp("kit-venv")
    venv.EnvBuilder(with_pip=False).create(env_dir)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"),
                    "install", "-q", f"{wheel}[kit]"], check=True)  # fmt: skip
    bin_dir = env_dir / "bin"
    work = tmp_path_factory.mktemp("outsider")
    adapter = work / "adapter_toy.py"
    shutil.copy(ROOT / "tests" / "fixtures" / "toy_runtime_adapter.py", adapter)
    vectors = work / "vectors.jsonl"
    shutil.copy(ROOT / "spec" / "vectors" / "stageless-seed.jsonl", vectors)
    for extra, failed in (((), None), (("--control",), 0)):
        done = _run(bin_dir, work, "conform", "--revision", "seed", "--json", "--quiet",
                    "--vectors", str(vectors), "--adapter", str(bin_dir / "python"),
                    str(adapter), *extra)  # fmt: skip
        assert done.returncode in (0, 1), done.stderr
        report = json.loads(done.stdout)
        assert report["vectors"] == 21 and "toy runtime" in report["implementation"], report
        if failed is not None:
            assert report["failed"] == failed, report["families"]
        else:
            assert report["failed"] > 0  # the toy runtime is judged, findings and all


INTEGRATION_EXAMPLES = {
    "pydantic-ai": "pydantic_ai_agent.py",
    "langgraph": "langgraph_agent.py",
    "openai-agents": "openai_agents_agent.py",
    "mcp": "mcp_server.py",
}
"""Each runtime integration's user example (examples/integrations/), by the extra it needs."""


def test_every_integration_example_is_run_from_the_wheel() -> None:
    shipped = {p.name for p in (ROOT / "examples" / "integrations").glob("*.py")}
    assert shipped == set(INTEGRATION_EXAMPLES.values())


@pytest.mark.parametrize(("extra", "example"), INTEGRATION_EXAMPLES.items())
def test_an_integrations_example_runs_from_the_wheel_with_its_extra(
    wheel: Path, tmp_path_factory: pytest.TempPathFactory, extra: str, example: str
) -> None:
    """The user's example of a runtime integration, copied out of the checkout, runs on a fresh
    install of the wheel with that runtime's extra alone and prints exactly the output files
    beside it hold."""
    env_dir = tmp_path_factory.mktemp(f"{extra}-venv")
    venv.EnvBuilder(with_pip=False).create(env_dir)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"),
                    "install", "-q", f"{wheel}[{extra}]"], check=True)  # fmt: skip
    work = tmp_path_factory.mktemp("user")
    source = ROOT / "examples" / "integrations" / example
    shutil.copy(source, work / example)
    done = subprocess.run([str(env_dir / "bin" / "python"), example], capture_output=True,
                          text=True, cwd=work, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == source.with_suffix(".stdout").read_text(encoding="utf-8")
    assert done.stderr == source.with_suffix(".stderr").read_text(encoding="utf-8")


def test_diagram_from_the_wheel_writes_every_text_format_without_dot(
    installed: Path, tmp_path: Path
) -> None:
    done = _run(installed, tmp_path, "diagram", dot=False)
    assert done.returncode == 0, done.stderr
    drawn = tmp_path / "diagrams"
    names = sorted(p.name for p in drawn.iterdir())
    assert names == sorted(
        [*(f"contract-{r}.{x}" for r in ("seed", "revised") for x in ("dot", "mmd")),
         "PRECEDENCE.md", "SCENARIOS.md"]
    )  # fmt: skip
    assert (drawn / "contract-seed.dot").read_text("utf-8").startswith("// Generated")
    assert "stateDiagram-v2" in (drawn / "contract-seed.mmd").read_text("utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["diagrams"]  # no ./spec/, no README
    line = done.stderr.strip()
    assert done.stderr.count("\n") == 1 and "apt-get install graphviz" in line, done.stderr


def test_explore_from_the_wheel_without_dot_is_one_line_and_writes_nothing(
    installed: Path, tmp_path: Path
) -> None:
    done = _run(installed, tmp_path, "explore", "--out", "site", dot=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "install Graphviz" in done.stderr
    assert not (tmp_path / "site").exists()


def test_explain_from_the_wheel_draws_mermaid_without_dot_and_svg_with_it(
    installed: Path, tmp_path: Path
) -> None:
    mermaid = _run(installed, tmp_path, "explain", "seed-00042", "--mermaid", "path.mmd", dot=False)
    assert mermaid.returncode == 0, mermaid.stderr
    assert "Outcome: " in mermaid.stdout
    assert "stateDiagram-v2" in (tmp_path / "path.mmd").read_text("utf-8")

    no_dot = _run(installed, tmp_path, "explain", "seed-00042", "--svg", "path.svg", dot=False)
    assert no_dot.returncode == 2 and no_dot.stdout == ""
    assert no_dot.stderr.count("\n") == 1 and "install Graphviz" in no_dot.stderr
    assert not (tmp_path / "path.svg").exists()

    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed here (scripts/dev-env installs it)")
    svg = _run(installed, tmp_path, "explain", "seed-00042", "--svg", "path.svg")
    assert svg.returncode == 0, svg.stderr
    root = ET.fromstring((tmp_path / "path.svg").read_bytes())
    assert root.tag == "{http://www.w3.org/2000/svg}svg"


def test_vectors_from_the_wheel_never_write_into_the_installed_package(
    installed: Path, tmp_path: Path
) -> None:
    done = _run(installed, tmp_path, "vectors", "--revision", "seed")
    assert done.returncode == 2 and "give --out DIR" in done.stderr
    assert done.stderr.count("\n") == 1


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder``: its size and modification time."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def _package_dir(bin_dir: Path) -> Path:
    where = subprocess.run([bin_dir / "python", "-c", "import toolcancel, os; "
                            "print(os.path.dirname(toolcancel.__file__))"],
                           check=True, capture_output=True, text=True)  # fmt: skip
    return Path(where.stdout.strip())


def _use(bin_dir: Path, cwd: Path) -> str:
    """Import the package, run a call, ``verify`` at its smallest bound and ``diagram``; which
    registry the install runs (``compiled`` or ``interpreted``, as ``verify`` says it)."""
    subprocess.run([bin_dir / "python", "-c", SMOKE], check=True, capture_output=True, cwd=cwd)
    assert _run(bin_dir, cwd, "diagram", "--out", str(cwd / "drawn"), dot=False).returncode == 0
    verified = _run(bin_dir, cwd, "verify", "--max-wrappers", "0", "--no-deep", "--workers", "1")
    assert verified.returncode == 0, verified.stderr
    return verified.stdout.splitlines()[0]


def test_the_installed_package_writes_nothing_into_its_own_folder(
    installed: Path, tmp_path: Path
) -> None:
    package = _package_dir(installed)
    before = _tree(package)
    assert "registry (interpreted)" in _use(installed, tmp_path)  # the default build is pure
    assert _tree(package) == before


def test_the_compiled_build_is_a_build_option_and_runs_compiled(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """``TOOLCANCEL_COMPILE=1`` at build time: a platform wheel whose driver is mypyc's, which
    the installed package imports as it is and never writes beside.

    The compile costs minutes, so under ``scripts/test`` this takes the wheel its compiled build
    step made of the same checkout (``TOOLCANCEL_COMPILED_WHEEL``, scripts/compiled-env); run
    alone, it builds one."""
    given = os.environ.get("TOOLCANCEL_COMPILED_WHEEL")
    out = Path(given) if given else tmp_path_factory.mktemp("compiled")
    if not given:
        env = {**os.environ, "TOOLCANCEL_COMPILE": "1"}
        build = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out),
                                str(ROOT)], capture_output=True, text=True, env=env,
                               check=False)  # fmt: skip
        assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    (wheel,) = out.glob("toolcancel-*.whl")
    assert not wheel.name.endswith("-py3-none-any.whl"), wheel.name  # a platform wheel
    names = zipfile.ZipFile(wheel).namelist()
    for module in ("stepping", "driver", "binding"):  # setup.py's COMPILED
        library = rf"toolcancel/runtime/{module}\.[^/]+\.so"
        assert [n for n in names if re.fullmatch(library, n)], module
        assert f"toolcancel/runtime/{module}.py" in names  # the reference stays beside it
    assert [n for n in names if re.fullmatch(r"[0-9a-f]+__mypyc\.[^/]+\.so", n)]  # their code
    bin_dir = fresh_install(wheel, tmp_path_factory.mktemp("compiled-venv"))
    package = _package_dir(bin_dir)
    before = _tree(package)
    cwd = tmp_path_factory.mktemp("use")
    assert "registry (compiled)" in _use(bin_dir, cwd)
    assert _tree(package) == before
