"""Declared deviations (``[[deviation]]`` of spec/contract.toml): data that means what it says.

Why these tests exist:

* A deviation names a known way real registries depart from rules; an adapter declares it by
  name.  Each entry must cite rules that exist, a scope in the scenario vocabulary that touches
  vectors of every revision it is declared for, and a modelling mutant that exists.
* CONTRACT.md's table ("What revised is") is the data's table, rendered, never typed.
* A count CONTRACT.md quotes is derived here where our own registry can behave so: the D13
  mutant fails exactly as many seed vectors as a registry faithful to the original was measured
  to (175), every one of them in D13's scope -- and the JavaScript example, switched to classify
  by code, fails the very same vectors: two implementations of D13 agree on what it touches.
* A hello that declares an unknown deviation is refused in one line, before any vector runs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import run_cli, write_sample
from toolcancel import scenario as vocabulary
from toolcancel.conform import _hello_problem
from toolcancel.contract import load_contract
from toolcancel.deviations import markdown_table
from toolcancel.vectors import scenario_data, shipped_vectors

ROOT = Path(__file__).resolve().parent.parent
JS_OUTCOME = ROOT / "examples" / "js" / "adapter-outcome.js"
VALUES = {
    "wrappers": vocabulary.WRAPPERS,
    "body": vocabulary.BODIES,
    "pre": vocabulary.PRE,
    "post": vocabulary.POSTS,
    "timeout": vocabulary.TIMEOUTS,
}
HELLO = {"protocol": 2, "type": "hello", "revisions": ["seed"], "retry": "cursor"}


def test_contract_md_carries_the_generated_table() -> None:
    text = (ROOT / "spec" / "CONTRACT.md").read_text(encoding="utf-8")
    assert markdown_table() in text


def test_every_deviation_cites_rules_a_scope_and_a_model_that_exist() -> None:
    import model_tests.mutants as mutants

    contract = load_contract()
    names = {m.name for m in mutants.MUTANTS}
    assert contract.deviations, "the contract names at least D13 and the later source's"
    for d in contract.deviations:
        assert all(contract.rule(r) for r in d.departs_from)
        for key, values in d.scope.items():
            assert set(values) <= set(VALUES[key]), (d.name, key)
        for revision in d.revisions:
            touched = [v for v in shipped_vectors(revision) if d.touches(scenario_data(v.scenario))]
            assert touched, f"{d.name} touches no {revision} vector"
        assert d.model is None or d.model in names, d.model


@pytest.mark.parametrize(
    ("declared", "problem"),
    [
        (["D13"], None),
        ([], None),
        (["D99"], "the adapter's hello declares the unknown deviation 'D99'; the contract's "
                  "deviations are D13, pre-R44-error, E7-wrapper-results, E7-meta "
                  "(spec/contract.toml)"),
        ("D13", "the adapter's hello declares deviations \"D13\"; a list of names of the "
                "contract's deviations (D13, pre-R44-error, E7-wrapper-results, E7-meta), or none"),
        (["D13", "D13"], "the adapter's hello declares a deviation twice: [\"D13\", \"D13\"]"),
    ],
)  # fmt: skip
def test_a_hello_declares_known_deviations_only(declared: object, problem: str | None) -> None:
    assert _hello_problem({**HELLO, "deviations": declared}) == problem


def test_an_unknown_deviation_stops_conform_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_sample(tmp_path, shipped_vectors("seed")[:1])
    hello = json.dumps({**HELLO, "deviations": ["D99"]})
    adapter = [sys.executable, "-c", f"print({hello!r}, flush=True); import sys; sys.stdin.read()"]
    code, out, err = run_cli(["--vectors", str(path), "--adapter", *adapter], capsys)
    assert (code, out, err.count("\n")) == (2, "", 1)
    assert err.startswith("toolcancel conform: the adapter's hello declares the unknown deviation")


def _d13_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], adapter: list[str]
) -> set[str]:
    """The ids of the seed vectors in D13's scope that the adapter fails."""
    d13 = load_contract().deviation("D13")
    scoped = [v for v in shipped_vectors("seed") if d13.touches(scenario_data(v.scenario))]
    path = write_sample(tmp_path, scoped)
    code, data, _ = run_cli(["--vectors", str(path), "--json", "--adapter", *adapter], capsys)
    assert code == 1
    return {f["id"] for f in data["failures"]}


def test_the_d13_count_is_derived_and_two_implementations_agree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d13 = load_contract().deviation("D13")
    measured = {m.source: m.vectors for m in d13.measured}
    assert d13.model is not None
    mutant = [sys.executable, "-m", "toolcancel.adapter", "--level", "outcome", "--mutant"]
    failed = _d13_failures(tmp_path, capsys, [*mutant, d13.model])
    # Measured outside on the seed vectors shipped then, seed-00001 to seed-05164; vectors are
    # only ever appended (toolcancel.vectors numbers new dimensions after the old), so those ids
    # are still exactly that set.  The vectors added since touch D13 too: they count beyond it.
    then = {i for i in failed if i <= "seed-05164"}
    assert len(then) == measured["seed commit"]
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not found: the JavaScript half of this test needs Node.js >= 20")
    js = [node, str(JS_OUTCOME), "--classify-by-code", "--undeclared"]
    assert _d13_failures(tmp_path, capsys, js) == failed


def test_the_javascript_example_declares_d13_when_it_classifies_by_code() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not found: install Node.js >= 20 to run examples/js")
    hellos = {}
    for flags in ((), ("--classify-by-code",), ("--classify-by-code", "--undeclared")):
        run = subprocess.run(
            [node, str(JS_OUTCOME), *flags], input="", capture_output=True, text=True,
            timeout=60, check=True, cwd=ROOT,
        )  # fmt: skip
        hellos[flags] = json.loads(run.stdout.splitlines()[0]).get("deviations")
    assert list(hellos.values()) == [None, ["D13"], None]
