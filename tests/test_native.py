"""The compiled registry (toolcancel.native): loaded only when built from the sources beside it.

Why these tests: a compiled module that shadowed an edited ``registry.py`` would make every other
test run yesterday's code, so the finder must answer only for a build whose name carries the hash
of the source there now, and never under ``TOOLCANCEL_PURE=1``; a build must appear complete or
not at all, and a refusal by mypyc must say why in one line.  The suite itself runs the compiled
registry whenever a build of the current source exists (``scripts/test`` builds it first).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from toolcancel import native

ROOT = Path(__file__).resolve().parents[1]


def fake_build(package: Path) -> Path:
    """The two libraries of a build of ``package/registry.py``, as empty files."""
    folder = Path(native.build_dir(str(package)))
    folder.mkdir(parents=True)
    for name in ("registry", "registry__mypyc"):
        (folder / f"{name}{native._suffix()}").write_bytes(b"")
    return folder


@pytest.fixture
def package(tmp_path: Path) -> Path:
    package = tmp_path / "toolcancel"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "registry.py").write_text("def f(x: int) -> int:\n    return x + 1\n")
    return package


def test_the_finder_loads_a_build_of_the_source_as_it_is(
    package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(native.PURE_ENV, raising=False)
    folder = fake_build(package)
    spec = native._Finder(str(package)).find_spec(native.MODULE)
    assert spec is not None and spec.origin == str(folder / f"registry{native._suffix()}")
    group = native._Finder(str(package)).find_spec(native.GROUP)
    assert group is not None and group.origin == str(folder / f"registry__mypyc{native._suffix()}")
    assert native._Finder(str(package)).find_spec("toolcancel.results") is None


def test_an_edited_source_is_never_shadowed_by_its_old_build(
    package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(native.PURE_ENV, raising=False)
    fake_build(package)
    finder = native._Finder(str(package))
    assert finder.find_spec(native.MODULE) is not None
    (package / "registry.py").write_text("def f(x: int) -> int:\n    return x + 2\n")
    finder.invalidate_caches()  # what importlib.invalidate_caches() does
    assert finder.find_spec(native.MODULE) is None
    assert native._Finder(str(package)).find_spec(native.MODULE) is None


def test_an_incomplete_build_or_toolcancel_pure_runs_the_source(
    package: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = fake_build(package)
    monkeypatch.setenv(native.PURE_ENV, "1")
    assert native._Finder(str(package)).find_spec(native.MODULE) is None
    monkeypatch.setenv(native.PURE_ENV, "0")
    assert native._Finder(str(package)).find_spec(native.MODULE) is not None
    (folder / f"registry__mypyc{native._suffix()}").unlink()
    assert native._Finder(str(package)).find_spec(native.MODULE) is None


@pytest.mark.slow
def test_build_compiles_once_per_source_and_drops_older_builds(package: Path) -> None:
    first = Path(native.build(str(package)))
    assert native.complete(str(first))
    made = {p.name: p.stat().st_mtime_ns for p in first.iterdir()}
    assert Path(native.build(str(package))) == first  # up to date: nothing is compiled again
    assert {p.name: p.stat().st_mtime_ns for p in first.iterdir()} == made
    (package / "registry.py").write_text("def f(x: int) -> int:\n    return x + 2\n")
    second = Path(native.build(str(package)))
    assert second != first and native.complete(str(second)) and not first.exists()
    assert [p.name for p in second.parent.iterdir()] == [second.name]  # no staging folder left


@pytest.mark.slow
def test_a_refused_build_says_why_and_leaves_nothing(package: Path) -> None:
    (package / "registry.py").write_text('def f(x: int) -> int:\n    return "x"\n')
    with pytest.raises(native.NativeBuildError) as refused:
        native.build(str(package))
    message = str(refused.value)
    assert message.startswith("mypyc failed: ") and "registry.py:2: error:" in message
    assert "\n" not in message
    assert not (package / "_native").exists() or not any((package / "_native").iterdir())


@pytest.mark.parametrize("missing", ["mypyc", "setuptools"])
def test_a_build_without_its_tools_names_the_missing_one(
    package: Path, monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    """mypyc comes with mypy; its build script imports setuptools, which a venv of Python 3.12
    or later does not hold by itself."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == missing else real(name, *a))  # fmt: skip
    with pytest.raises(native.NativeBuildError, match=f"^{missing} is not installed .*pip install"):
        native.build(str(package))
    assert not (package / "_native").exists() or not any((package / "_native").iterdir())


def test_a_build_that_cannot_be_written_says_where_in_one_line(package: Path) -> None:
    """An installed package's folder may not be writable (root writes anywhere, so the test
    puts a file where the builds' folder goes)."""
    (package / "_native").write_text("not a folder")
    with pytest.raises(native.NativeBuildError) as refused:
        native.build(str(package))
    message = str(refused.value)
    assert message.startswith(f"cannot write the build into {package / '_native'}: ")
    assert "\n" not in message
    assert (package / "_native").read_text() == "not a folder"


def test_the_suite_runs_the_compiled_registry_whenever_it_is_built() -> None:
    if os.environ.get(native.PURE_ENV, "") not in ("", "0"):
        pytest.skip("TOOLCANCEL_PURE is set: this run is of the source")
    if not native.complete(native.build_dir()):
        pytest.skip("no build of this registry.py for this interpreter (toolcancel native build)")
    import toolcancel.registry

    assert native.loaded(), toolcancel.registry.__file__
    assert toolcancel.registry.__file__.endswith(native._suffix())


def test_mutants_patch_a_copy_of_the_source_beside_the_compiled_registry() -> None:
    import toolcancel.registry

    source = native.interpreted()
    assert source.__file__ is not None and source.__file__.endswith("registry.py")
    if native.loaded():
        assert source is not toolcancel.registry and source.__name__ == native.INTERPRETED
        assert source._Call is not toolcancel.registry._Call
    else:
        assert source is toolcancel.registry
    # Both builds take and return the package's own hooks, views and results, and share the
    # registry's face: a registry runs its calls on the driver its class names.
    assert source.Allow is toolcancel.registry.Allow
    assert source.Execution is toolcancel.registry.Execution
    assert source.ToolRegistry is toolcancel.registry.ToolRegistry


def test_a_registry_runs_its_calls_on_the_driver_its_class_names() -> None:
    import asyncio

    import toolcancel.registry
    from toolcancel import AbortController

    source = native.interpreted()

    class OnSource(toolcancel.registry.ToolRegistry):
        _driver = source

    async def body(args: object, view: object) -> list[dict[str, str]]:
        return [{"type": "text", "text": "ok"}]

    for registry, driver in ((toolcancel.registry.ToolRegistry(), toolcancel.registry),
                             (OnSource(), source)):
        registry.register("t", body)
        pending = registry.execute("t", {}, signal=AbortController().signal)
        assert isinstance(pending, driver.PendingCall)
        assert not asyncio.run(pending).is_error


def test_status_names_the_registry_this_interpreter_runs() -> None:
    env = {**os.environ, native.PURE_ENV: "1"}
    done = subprocess.run(
        [sys.executable, "-m", "toolcancel", "native", "status"],
        capture_output=True, text=True, check=True, cwd=ROOT, env=env,
    )  # fmt: skip
    assert done.stdout.startswith("registry: interpreted (TOOLCANCEL_PURE is set);")
