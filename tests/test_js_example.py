"""The JavaScript worked example (``examples/js``) conforms: every vector of both revisions passes
through each of its adapters (trace level and outcome level).

Why this test exists: ``examples/js/registry.js`` is a second implementation of the contract,
written from CONTRACT.md in another language, and ``toolcancel conform`` is the oracle other
implementations are judged by.  Running the full vector set through the example's adapter, over
the real protocol, keeps the two honest with each other: a vector the example fails is either a
bug in the example or a place where the vectors and the contract disagree.

It also runs the example's own ``node --test`` unit tests (the API edges no vector reaches).
It needs Node.js >= 20 on PATH and is skipped, saying so, without it.  The whole set takes a few
seconds (the adapter runs well over a thousand vectors per second).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support import shipped_vectors
from toolcancel.cli.main import main
from toolcancel.oracle.vectors import REVISIONS, shipped_dir
from toolcancel.oracle.vectors.turns import load_turn_vectors, turn_file

ROOT = Path(__file__).resolve().parent.parent
ADAPTER = ROOT / "examples" / "js" / "adapter-trace.js"
LEVELS = ("trace", "outcome")


def node() -> str:
    """The ``node`` executable, or skip the test with the reason."""
    found = shutil.which("node")
    if found is None:
        pytest.skip("node not found: install Node.js >= 20 (on PATH as `node`) to run examples/js")
    version = subprocess.run(
        [found, "--version"], capture_output=True, text=True, check=True, timeout=30
    ).stdout.strip()
    major = version.lstrip("v").split(".")[0]
    if not major.isdigit() or int(major) < 20:
        pytest.skip(f"node {version} found at {found}: examples/js needs Node.js >= 20")
    return found


def test_the_javascript_registry_passes_its_own_unit_tests() -> None:
    """``node --test`` on ``examples/js``: the API edges the vectors cannot see (usage errors,
    snapshot refusals, listener hygiene, observer containment, concurrent ``next()``)."""
    run = subprocess.run(
        [node(), "--test", str(ADAPTER.parent)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("revision", REVISIONS)
def test_the_javascript_example_passes_every_vector(
    revision: str, level: str, capsys: pytest.CaptureFixture[str]
) -> None:
    adapter = ADAPTER.with_name(f"adapter-{level}.js")
    command = ["conform", "--revision", revision, "--json", "--adapter", node(), str(adapter)]
    code = main(command)
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert (code, report["failed"], report["failures"]) == (0, 0, []), err
    assert report["passed"] == report["vectors"] == len(shipped_vectors(revision)) + len(
        load_turn_vectors(turn_file(shipped_dir(), revision))
    )
    assert report["level"] == level
    assert report["restarts"] == 0  # the adapter never hung, crashed or wrote garbage


def test_the_first_revisions_error_shape_declared_deviates_on_turn_vectors_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``adapter-outcome.js --first-revision-errors`` keeps the seed's error shape in revised
    calls and turns, as the first revised commit does, and declares ``pre-R44-error``: every
    vector passes or deviates as declared -- turn vectors included, which publish the same
    errors -- and undeclared, exactly those vectors fail."""
    adapter = [node(), str(ADAPTER.with_name("adapter-outcome.js")), "--first-revision-errors"]
    command = ["conform", "--revision", "revised", "--json", "--quiet", "--adapter", *adapter]
    reports = []
    for extra in ((), ("--undeclared",)):
        code = main([*command, *extra])
        reports.append((code, json.loads(capsys.readouterr().out)))
    (code, declared), (strict_code, strict) = reports
    assert (code, declared["failed"]) == (0, 0), declared["failures"][:3]
    assert declared["deviations"]["deviated"].keys() == {"pre-R44-error"}
    deviated = {d["id"] for d in declared["deviated"]}
    turns = {t.id for t in load_turn_vectors(turn_file(shipped_dir(), "revised"))}
    assert deviated & turns and deviated - turns  # turns and calls alike
    assert strict_code == 1
    assert {f["id"] for f in strict["failures"]} == deviated
