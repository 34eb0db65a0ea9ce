"""What a cancellation publishes over an earlier result is contract data, and only data.

Why this test exists: revised R28 ("only failures survive a cancellation") used to be restated in
the registry's driver three times (and once in examples/js), so changing the rule in
contract.toml was not enough, and verify then blamed R18 with no place named.  Now an outcome's
``publishes_over`` says it, the loader holds the rows to it, and the driver publishes whatever
cancellation the contract's step decided.  The scratch-clone exercise is planted here: a copy of
the package whose contract.toml lets revised ABORTED replace a failure too.

* our registry, given the changed contract, publishes ABORTED over a failure: nothing but
  contract.toml changed, and verify under the changed contract passes it -- the judge reads the
  rule from the same data (R28's check at C3 expects the cancellation over any result, R34's
  deadline check steps aside where the caller's cancellation replaced the TOOL_TIMEOUT);
* a registry that still follows the old rule fails verify, and the first failure cites R28 (the
  rule the changed transitions carry) and names the stage that produced the result.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from toolcancel.contract.errors import ContractError
from toolcancel.contract.loader import load_contract, parse_contract
from toolcancel.runtime.registry import ToolRegistry
from toolcancel.runtime.signals import AbortController

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = ROOT / "spec" / "contract.toml"
CHANGED = ("c3_aborted_after_body", "c4_aborted_after_body")
"""The revised rows that replace a success only; the exercise lets them replace any result."""


def _edited(text: str) -> str:
    """contract.toml with revised ABORTED published over any result (R28 changed)."""
    old = 'name = "aborted"\ncancellation = true\npublishes_over = "success"\n'
    assert old in text
    text = text.replace(
        old,
        'name = "aborted"\ncancellation = true\n'
        'publishes_over = { seed = "success", revised = "any" }\n',
    )
    for row in CHANGED:
        start = text.index(f'id = "{row}"')
        end = text.index("[[transition]]", start)
        block = text[start:end]
        assert ', "!result_is_error"' in block
        text = text[:start] + block.replace(', "!result_is_error"', "") + text[end:]
    return text


def _load(text: str) -> object:
    return parse_contract(tomllib.loads(text), "contract.toml")


def test_each_cancellation_says_what_it_publishes_over() -> None:
    contract = load_contract()
    for name in ("seed", "revised"):
        table = contract.revision(name)
        assert table.publishes_over == {c: "success" for c in table.cancellations}
    assert contract.publishes_over_rule == "R28"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda t: t.replace('publishes_over = "success"\n', 'publishes_over = "all"\n', 1),
            "publishes_over must be 'success' or 'any', got 'all'",
        ),
        (
            lambda t: t.replace('publishes_over = "success"\n', "", 1),
            "outcome 'aborted': a cancellation says what it publishes over",
        ),
        (
            lambda t: t.replace(
                'publishes_over = "success"\n', 'publishes_over = { seed = "success" }\n', 1
            ),
            "publishes_over names seed; it needs exactly the outcome's revisions",
        ),
        (
            # the field changed, the rows not: the loader names the first row to change
            lambda t: t.replace(
                'publishes_over = "success"\n',
                'publishes_over = { seed = "success", revised = "any" }\n',
                1,
            ),
            "transition 'c3_aborted_after_body' (revised) publishes 'aborted', which publishes "
            "over 'any': drop its '!result_is_error' guard",
        ),
    ],
)
def test_a_wrong_publishes_over_is_one_line_naming_it(edit: object, message: str) -> None:
    text = CONTRACT.read_text("utf-8")
    edited = edit(text)  # type: ignore[operator]
    assert edited != text
    with pytest.raises(ContractError) as info:
        _load(edited)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_the_exercise_changes_contract_toml_only_and_loads() -> None:
    contract = _load(_edited(CONTRACT.read_text("utf-8")))
    assert contract.revision("revised").publishes_over["aborted"] == "any"  # type: ignore[attr-defined]
    assert contract.revision("seed").publishes_over["aborted"] == "success"  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package as installed, its contract.toml changed as the exercise says."""
    root = tmp_path_factory.mktemp("scratch")
    package = root / "toolcancel"
    shutil.copytree(ROOT / "machine", package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "spec", package / "spec", ignore=shutil.ignore_patterns("vectors"))
    path = package / "spec" / "contract.toml"
    path.write_text(_edited(path.read_text("utf-8")), "utf-8")
    return root


def _verify_in(scratch: Path, factory: str) -> dict[str, object]:
    """verify, revised, at the smallest bound, in a process that imports the scratch copy;
    ``factory`` is Python for the registry factory it checks."""
    program = f"""
import json
from functools import partial
from toolcancel.contract.loader import load_contract_file
from toolcancel.runtime.registry import ToolRegistry
from toolcancel.selfcheck.verifier import verify
assert ToolRegistry.__module__.startswith("toolcancel"), ToolRegistry
report = verify("revised", workers=1, max_wrappers=0, deep=False, factory={factory})
first = report.tally.violations[0] if report.tally.violations else None
print(json.dumps({{
    "violations": report.tally.violation_count,
    "rule": first and first.rule,
    "why": first and first.explanation,
    "where": __import__("toolcancel").__file__,
}}))
"""
    env = {**os.environ, "PYTHONPATH": str(scratch), "TOOLCANCEL_PROGRESS": "0"}
    run = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        env=env,
        cwd=scratch,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out: dict[str, object] = json.loads(run.stdout.strip().splitlines()[-1])
    assert str(out["where"]).startswith(str(scratch))  # the scratch copy, not the checkout
    return out


def test_our_registry_follows_the_changed_rule_with_nothing_else_changed() -> None:
    """A body that fails while the caller aborts: ABORTED under the changed contract, the body's
    failure under the shipped one -- the same registry code, only contract.toml differs."""
    changed = _load(_edited(CONTRACT.read_text("utf-8")))

    async def run(contract: object) -> str:
        registry = ToolRegistry(revision="revised", contract=contract)  # type: ignore[arg-type]
        started, release = asyncio.Event(), asyncio.Event()

        async def body(args: object, view: object) -> list[object]:
            started.set()
            await release.wait()
            raise RuntimeError("the tool broke")

        registry.register("t", body)
        caller = AbortController()
        task = asyncio.ensure_future(registry.execute("t", {}, signal=caller.signal))
        await asyncio.wait_for(started.wait(), 30)
        caller.abort()
        release.set()
        result = await asyncio.wait_for(task, 30)
        return result.text

    assert asyncio.run(run(load_contract())) == "Error: the tool broke"
    assert asyncio.run(run(changed)) == "Error: tool call aborted"


@pytest.mark.rules("R28", "R34")
def test_verify_passes_our_registry_under_the_changed_rule(scratch: Path) -> None:
    """The coherent change: the judge reads what a cancellation publishes over from the same
    data as the registry, so no check restates the old rule (before, R34's deadline check cited
    315 runs where the caller's cancellation had replaced the TOOL_TIMEOUT at C3)."""
    found = _verify_in(scratch, "ToolRegistry")
    assert found["violations"] == 0, found


@pytest.mark.rules("R28")
def test_a_registry_keeping_the_old_rule_is_cited_under_r28_in_its_stage(scratch: Path) -> None:
    old = f"partial(ToolRegistry, contract=load_contract_file({str(CONTRACT)!r}))"
    found = _verify_in(scratch, old)
    assert found["violations"], found
    assert found["rule"] == "R28", found
    why = str(found["why"])
    assert "in the stage 'post-execute · C4'" in why or "in the stage 'around dispatch" in why
