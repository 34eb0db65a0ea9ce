"""``import toolcancel.oracle.conform`` loads neither our registry nor our model checker.

conform is the oracle an implementer runs against *their* registry: judging an answer reads the
contract, the vectors and the trace checker, never runs ours.  Only ``--self`` runs the reference
registry, and it does so in a child process (``python -m toolcancel.selfcheck.adapter``).  So the
runner must not load ``toolcancel.runtime.registry`` (the runtime) or
``toolcancel.selfcheck.verifier`` (the bounded model checker that generates the vectors): each costs
start-up time on every run and would let an oracle verdict lean on the implementation it judges.  A
scenario, a turn vector and a deviation are data until something runs them: the harnesses import the
registry when they run.

Each test imports conform in a fresh interpreter.  The first records every import statement
executed while it loads (``builtins.__import__`` sees each one, even of a module already
loaded), so it names every module-level arrow into a forbidden module, not only the first.
"""

from __future__ import annotations

import json
import subprocess
import sys

FORBIDDEN = (
    "toolcancel.runtime.registry", "toolcancel.selfcheck.verifier", "toolcancel.selfcheck.harness"
)
RECORD = """
import builtins, importlib.util, json, sys
real, edges = builtins.__import__, set()
def spy(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__", "?")
    if level:
        name = importlib.util.resolve_name("." * level + name, globals["__package__"])
    edges.update((importer, t) for t in [name, *(f"{name}.{f}" for f in fromlist or ())])
    return real(name, globals, locals, fromlist, 0)
builtins.__import__ = spy
import toolcancel.oracle.conform
builtins.__import__ = real
print(json.dumps({"edges": sorted(edges), "loaded": sorted(sys.modules)}))
"""


def imports_of_conform() -> tuple[set[tuple[str, str]], set[str]]:
    """(importer, imported) for every import statement run while ``toolcancel.oracle.conform``
    loads, and every module loaded then."""
    proc = subprocess.run(
        [sys.executable, "-c", RECORD], capture_output=True, text=True, timeout=120, check=True
    )
    data = json.loads(proc.stdout)
    return {(a, b) for a, b in data["edges"]}, set(data["loaded"])


def test_no_module_conform_loads_imports_the_registry_or_the_verifier() -> None:
    """Names every arrow into a forbidden module (the importer and what it imported): its judge,
    report, protocol and adapter runner, the scenarios, turn vectors, capabilities, deviations and
    the vectors' format import neither at load time."""
    edges, loaded = imports_of_conform()
    assert "toolcancel.oracle.conform.judge" in loaded  # the recording saw the load
    assert ("toolcancel.oracle.conform", "toolcancel.oracle.conform.judge") in edges
    wrong = sorted((importer, module) for importer, module in edges if module in FORBIDDEN)
    assert not wrong, f"imported at load time by: {wrong}"


def test_conform_loads_neither_the_registry_nor_the_verifier() -> None:
    _, loaded = imports_of_conform()
    assert loaded.isdisjoint(FORBIDDEN), sorted(loaded & set(FORBIDDEN))


def test_importtime_shows_no_runtime_module() -> None:
    """The oracle stands beside the runtime (issue 43): ``python -X importtime -c "import
    toolcancel.oracle.conform"`` lists every module the import loads, and not one is
    ``toolcancel.runtime`` or below it.  The recording is the interpreter's own, so a lazy or
    indirect arrow into the runtime shows as well as a direct one."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import toolcancel.oracle.conform"],
        capture_output=True, text=True, timeout=120, check=True,
    )
    loaded = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
              if line.startswith("import time:") and "|" in line]
    assert "toolcancel.oracle.conform.judge" in loaded  # the recording saw the load
    runtime = [m for m in loaded if m.split(".")[:2] == ["toolcancel", "runtime"]]
    assert not runtime, f"import toolcancel.oracle.conform loads {runtime}"
