"""The registry compiled with mypyc: loaded only when it is a build of the source beside it.

Why: a call's own cost is Python plumbing -- coroutine frames, attribute stores, the compiled
contract's steps -- and mypyc turns that into C calls with the same semantics (README,
Performance).  ``registry.py`` stays the one source and the reference: CrossHair, the mutants and
a machine without a C compiler run it interpreted.

How it stays honest:

* ``toolcancel native build`` compiles a copy of ``registry.py`` and puts the result in
  ``_native/<interpreter tag>-<hash of the package's sources>/`` beside it, complete or not at
  all.
* :func:`install` (called by the package on import) puts a finder on ``sys.meta_path`` that loads
  ``toolcancel.registry`` from that folder only when its name carries the hash of the sources
  there *now*.  An edited source therefore runs interpreted until it is rebuilt: a stale build
  can never shadow it.
* ``TOOLCANCEL_PURE=1`` runs the source whatever is built.

:func:`loaded` says which one the process runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .errors import ToolcancelError

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType

__all__ = [
    "NativeBuildError",
    "build",
    "build_dir",
    "compile_variant",
    "complete",
    "install",
    "interpreted",
    "loaded",
]

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
MODULE = "toolcancel.registry"
GROUP = "toolcancel.registry__mypyc"
"""mypyc puts a module's code in a shared library of its own, which the module's stub imports."""

PURE_ENV = "TOOLCANCEL_PURE"

INTERPRETED = "toolcancel._interpreted_registry"
"""Where :func:`interpreted` loads a copy of the source beside the compiled registry."""

# ``import toolcancel`` runs this module (install()), so it imports only what the finder needs
# and that much only when the registry is imported; building imports the rest.


class NativeBuildError(ToolcancelError):
    """The registry could not be compiled (no mypyc, no C compiler, or mypyc refused)."""


def _suffix() -> str:
    import importlib.machinery

    return importlib.machinery.EXTENSION_SUFFIXES[0]


def build_dir(package_dir: str = PACKAGE_DIR) -> str:
    """Where the build of the package's sources as they are now, for this interpreter, goes.

    The name carries a digest of every ``.py`` file of the package, not only ``registry.py``:
    mypyc compiles in what it knows of the modules the registry imports (their constants, say).
    CRC-32 and Adler-32 together (64 bits): this tells an edited source from its build, and zlib
    loads in a fraction of the time hashlib's OpenSSL does, on the registry's first import."""
    import zlib

    crc = adler = 1
    for folder, subfolders, files in os.walk(package_dir):
        subfolders[:] = sorted(d for d in subfolders if d not in ("_native", "__pycache__"))
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            with open(path, "rb") as source:
                data = os.path.relpath(path, package_dir).encode() + b"\0" + source.read()
            crc, adler = zlib.crc32(data, crc), zlib.adler32(data, adler)
    tag = f"{sys.implementation.cache_tag}-{crc:08x}{adler:08x}"
    return os.path.join(package_dir, "_native", tag)


def complete(folder: str, stem: str = "registry") -> dict[str, str] | None:
    """The two libraries of a complete build of ``toolcancel.<stem>`` in ``folder``, by module
    name (the module's, then its code's); None if either is missing."""
    files = {
        f"toolcancel.{stem}": os.path.join(folder, f"{stem}{_suffix()}"),
        f"toolcancel.{stem}__mypyc": os.path.join(folder, f"{stem}__mypyc{_suffix()}"),
    }
    return files if all(os.path.isfile(f) for f in files.values()) else None


def _extension_spec(name: str, location: str) -> ModuleSpec:
    """The spec of the compiled module ``name`` in the library at ``location``."""
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.ExtensionFileLoader(name, location)
    spec = importlib.util.spec_from_file_location(name, location, loader=loader)
    assert spec is not None
    return spec


class _Finder:
    """A ``sys.meta_path`` finder for ``toolcancel.registry`` (and its library) in the build of
    the current source; it finds nothing else, and nothing under ``TOOLCANCEL_PURE=1``."""

    def __init__(self, package_dir: str) -> None:
        self.package_dir = package_dir
        self._looked = False  # the source is hashed once, when the registry is first imported
        self._found: dict[str, str] | None = None

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in (MODULE, GROUP) or os.environ.get(PURE_ENV, "") not in ("", "0"):
            return None
        if not self._looked:
            self._looked = True
            try:
                self._found = complete(build_dir(self.package_dir))
            except OSError:
                self._found = None
        if self._found is None:
            return None
        return _extension_spec(fullname, self._found[fullname])

    def invalidate_caches(self) -> None:
        self._looked = False


def install(package_dir: str = PACKAGE_DIR) -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(package_dir))


def loaded() -> bool:
    """Whether this process runs the compiled registry (importing it if it is not yet)."""
    import importlib

    module: Any = sys.modules.get(MODULE) or importlib.import_module(MODULE)
    return not str(getattr(module, "__file__", "")).endswith(".py")


def interpreted() -> ModuleType:
    """The registry as its source runs: ``toolcancel.registry`` itself when that is interpreted,
    else ``registry.py`` loaded again beside it as ``toolcancel._interpreted_registry`` (once).

    For code that patches the registry's internals -- the deliberately broken registries of
    ``model_tests/mutants.py`` -- which a compiled class refuses.  The copy shares every other
    module of the package, so its hooks, views, results and signals are the package's own.
    """
    import importlib
    import importlib.util

    if not loaded():
        return importlib.import_module(MODULE)
    module = sys.modules.get(INTERPRETED)
    if module is None:
        spec = importlib.util.spec_from_file_location(
            INTERPRETED, os.path.join(PACKAGE_DIR, "registry.py")
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[INTERPRETED] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[INTERPRETED]
            raise
    return module


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def build(package_dir: str = PACKAGE_DIR) -> str:
    """Compile ``package_dir/registry.py`` for this interpreter unless its build exists; drop
    this interpreter's builds of other versions of the source.  Returns the build's folder."""
    import glob
    import shutil

    target = build_dir(package_dir)
    if complete(target) is None:
        _compile(package_dir, target)
    mine = os.path.join(os.path.dirname(target), f"{sys.implementation.cache_tag}-*")
    for other in glob.glob(mine):
        if other != target:
            shutil.rmtree(other, ignore_errors=True)
    return target


def compile_variant(source: str, stem: str, folder: str) -> ModuleType:
    """Compile ``source`` as the module ``toolcancel.<stem>`` into ``folder/<stem>`` and load it.

    For a variant of the registry that must be built the way the registry is to be compared with
    it: the benchmark's registry with its tracing code stripped (``bench/untraced.py``).
    """
    import importlib.util

    target = os.path.join(folder, stem)
    _compile(PACKAGE_DIR, target, stem, source)
    files = complete(target, stem)
    assert files is not None
    module: ModuleType | None = None
    for name in sorted(files, reverse=True):  # its code's library first: the module imports it
        spec = _extension_spec(name, files[name])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        assert spec.loader is not None
        spec.loader.exec_module(module)
    assert module is not None
    return module


def _compile(package_dir: str, target: str, stem: str = "registry", source: str | None = None
             ) -> None:
    import importlib.util
    import shutil
    import subprocess
    import tempfile

    if importlib.util.find_spec("mypyc") is None:
        raise NativeBuildError("mypyc is not installed (it comes with mypy: pip install mypy)")
    if importlib.util.find_spec("setuptools") is None:  # mypyc's build script imports it
        raise NativeBuildError(
            "setuptools is not installed (mypyc builds with it; a venv of Python 3.12 or later "
            "has none by itself): pip install setuptools"
        )
    # Complete or not at all: the files go to a fresh folder beside the target, renamed in.  It
    # is made first, so that a folder that cannot be written is said before a long compile.
    where = os.path.dirname(target)
    try:
        os.makedirs(where, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".building-", dir=where)
    except OSError as exc:  # an installed package's folder may not be writable
        raise NativeBuildError(f"cannot write the build into {where}: {_why(exc)}") from None
    try:
        with tempfile.TemporaryDirectory(prefix="toolcancel-native-") as tmp:
            # mypyc type-checks the module against the package it imports from: compile a copy
            # of the whole package, so that nothing is written beside the source but the build.
            copy = os.path.join(tmp, "toolcancel")
            shutil.copytree(
                package_dir,
                copy,
                ignore=shutil.ignore_patterns("_native", "__pycache__", "*.so", "*.pyd"),
            )
            if source is not None:
                with open(os.path.join(copy, f"{stem}.py"), "w", encoding="utf-8") as out:
                    out.write(source)
            proc = subprocess.run(
                [sys.executable, "-m", "mypyc", f"toolcancel/{stem}.py"],
                cwd=tmp,
                capture_output=True,
                text=True,
            )
            built = complete(copy, stem)
            if proc.returncode or built is None:
                said = (proc.stdout + proc.stderr).strip().splitlines()
                errors = [line for line in said if ": error:" in line] or said[-3:]
                raise NativeBuildError("mypyc failed: " + " | ".join(errors[:5]))
            for path in built.values():
                shutil.copy2(path, staging)
        try:
            os.rename(staging, target)
        except OSError as exc:
            if complete(target) is None:  # not another build that won the race
                raise NativeBuildError(f"cannot write the build {target}: {_why(exc)}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already once renamed
