"""docs/REAL-WORLD.md and the real-runtime adapters behind it (examples/runtimes/).

The table is rendered from docs/real-world.json and the reproductions; rendering it again must
give the committed file (cheap, always).  The runtimes themselves need the ``runtimes`` extra
(scripts/dev-env installs it): each reproduction must still show what the table says, and each
adapter, run through conform on the vectors the table cites, must be judged exactly as published
(a bounded subset: a few vectors a runtime).  The full measurement is the slow test.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from toolcancel.runtimes import reproduce
from toolcancel.teaching.realworld import (
    BARE_CONTROLS,
    DATA,
    REVISIONS,
    RUNTIMES_DIR,
    RealWorldError,
    Reproduction,
    controls,
    generate_real_world,
    measure,
    render,
    reproductions,
    runtime_of,
    runtimes,
    text_only,
)

ROOT = Path(__file__).resolve().parent.parent
REQUIRES = {
    "mcp_sdk": "mcp",
    "mcp_sdk__auto": "mcp",
    "pydantic_ai": "pydantic_ai",
    "pydantic_ai__cancellation_token": "pydantic_ai",
    "pydantic_ai__integrated": "pydantic_ai",
    "langgraph": "langgraph",
    "langgraph__handle_tool_errors": "langgraph",
    "langgraph__integrated": "langgraph",
    "openai_agents": "agents",
    "openai_agents__cancel_immediate": "agents",
    "openai_agents__cancel_after_turn": "agents",
    "openai_agents__integrated": "agents",
    "openai_agents__cancel_immediate__integrated": "agents",
    "openai_agents__cancel_after_turn__integrated": "agents",
    "mcp_sdk__integrated": "mcp",
    "mcp_sdk__auto__integrated": "mcp",
    "autogen": "autogen_agentchat",
    "autogen__token": "autogen_agentchat",
    "fastmcp": "fastmcp",
    "fastmcp__no_raise": "fastmcp",
}
"""Row (``adapter_<runtime>[__<configuration>].py``) -> the module its adapter needs (from the
``runtimes`` extra)."""
PUBLISHED = json.loads((ROOT / DATA).read_text(encoding="utf-8"))


def needs_runtime(name: str) -> None:
    if importlib.util.find_spec(REQUIRES[name]) is None:
        pytest.skip(f"{REQUIRES[name]} is not installed: pip install -e '.[runtimes]'")


def test_every_runtime_has_an_adapter_a_reproduction_and_a_published_row() -> None:
    assert runtimes(ROOT) == sorted(REQUIRES) == sorted(PUBLISHED)
    for name in REQUIRES:
        assert reproductions(ROOT, name), name


def test_the_table_is_fresh() -> None:
    assert generate_real_world(ROOT, check=True) == [], "python -m toolcancel.teaching.realworld"


def test_a_family_without_a_reproduction_stops_the_render() -> None:
    data = {"x": {rev: PUBLISHED["mcp_sdk"][rev] for rev in REVISIONS}}
    unrelated = Reproduction("other", ("R1",), "something else", "async def other(): ...")
    with pytest.raises(RealWorldError, match=r"x: the failure family R\d+ .* has no reproduction"):
        render(data, {"x": [unrelated]}, {})


@pytest.mark.parametrize("name", sorted({runtime_of(row) for row in REQUIRES}))
def test_the_reproductions_still_reproduce(name: str) -> None:
    """Once a runtime: its rows (configurations) share its reproductions."""
    needs_runtime(name)
    script = ROOT / RUNTIMES_DIR / f"repro_{name}.py"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_bare_asyncio_controls_still_behave_as_they_say() -> None:
    """The controls an ``inherited`` finding names, shared by every runtime's reproductions."""
    script = ROOT / RUNTIMES_DIR / BARE_CONTROLS
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert controls(ROOT, "autogen")["bare_await_waits_for_the_tool"][1] in script.read_text()


def test_a_reproduction_script_runs_one_or_refuses_an_unknown_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def holds() -> bool:
        return True

    async def changed() -> bool:
        return False

    assert reproduce({"holds": holds, "changed": changed}, ["holds"]) == 0
    assert reproduce({"holds": holds, "changed": changed}, []) == 1
    assert "did not reproduce: changed" in capsys.readouterr().err
    assert reproduce({"holds": holds}, ["nope"]) == 2
    assert capsys.readouterr().err.startswith("no reproduction 'nope'")


@pytest.mark.parametrize("name", sorted(REQUIRES))
def test_the_adapter_is_judged_as_published(
    name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Conform on the vectors the table cites (one per behaviour of each failure family): each
    fails with the family's rule at the family's step.

    The cheap stand-in of :func:`test_the_measurement_is_fresh`, which runs every vector these
    are drawn from and compares every family, its rule, step and examples, with the published
    data: where a run holds that test (scripts/test does), this one stands aside."""
    if any(item.name == "test_the_measurement_is_fresh" for item in request.session.items):
        pytest.skip("test_the_measurement_is_fresh runs too: it judges these vectors among all")
    needs_runtime(name)
    for rev in REVISIONS:
        families = PUBLISHED[name][rev]["families"]
        if not families:
            continue
        ids = {e["id"] for f in families for e in f["examples"]}
        vectors = tmp_path / f"{rev}-vectors.jsonl"
        cited = []
        for file in (f"{rev}.jsonl", f"stageless-{rev}.jsonl"):  # the family: a limited hello's
            with (ROOT / "spec" / "vectors" / file).open(encoding="utf-8") as lines:
                cited += [x for x in lines if json.loads(x).get("id") in ids]
        vectors.write_text("".join(cited))
        report = tmp_path / f"{rev}.jsonl"
        command = [sys.executable, "-m", "toolcancel", "conform", "--revision", rev, "--quiet",
                   "--report", str(report), "--vectors", str(vectors), "--adapter",
                   sys.executable, str(ROOT / RUNTIMES_DIR / f"adapter_{name}.py")]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode in (0, 1), done.stderr
        verdicts = {}
        for line in report.read_text(encoding="utf-8").splitlines():
            v = json.loads(line)
            verdicts[v["id"]] = (v.get("rule"), v.get("step"))
        for f in families:
            for e in f["examples"]:
                assert verdicts[e["id"]] == (f["rule"], f["step"]), (name, rev, e["id"])


@pytest.mark.slow
def test_the_measurement_is_fresh() -> None:
    """Every runtime and row, both revisions, every applicable vector, the stage-less family
    included, each row beside its control (13 plain rows and 13 controls, 7,483 vectors a side
    since the tool-timeout stage is driven, the integrated rows besides: 16 min wall on a 2-core
    machine at load 15; one adapter process per conform run, two runs at once)."""
    for name in REQUIRES:
        needs_runtime(name)
    assert generate_real_world(ROOT, run=True, check=True) == [], (
        "python -m toolcancel.teaching.realworld --run"
    )


MAPPING_FAILS = {
    # call_tool(raise_on_error=True), FastMCP's default, raises an error result as
    # ToolError(its first text): read back as that error result, it has lost its `error` field
    # (seed: the code; revised: every error's message) -- toolcancel's own server's too, its
    # TOOL_TIMEOUT (R34) among them; the row fastmcp__no_raise (raise_on_error=False) reads the
    # whole result
    "fastmcp": {"seed": {"R6", "R18", "R34"}, "revised": {"R6", "R16", "R18", "R31", "R34"}},
}
"""Rows whose mapping itself breaks a rule -- the control fails there, and only there, by that
rule -- so that those failures are published as the mapping's (the configuration's)."""


def test_every_published_control_row_passes_every_vector_it_was_sent() -> None:
    """toolcancel's registry through each runtime's mapping (``--control``) fails nothing: a
    verdict the reference earns through the same mapping would be the mapping's.  A row whose
    configuration is itself the cause (:data:`MAPPING_FAILS`) fails by those rules only."""
    for name, by_rev in PUBLISHED.items():
        for rev in REVISIONS:
            control = by_rev[rev]["control"]
            assert control["vectors"] == by_rev[rev]["vectors"], (name, rev)
            if name in MAPPING_FAILS:
                assert control["failed"] > 0, (name, rev, "the mapping's fault is gone: drop it")
                assert {f["rule"] for f in control["failures"]} == MAPPING_FAILS[name][rev]
            else:
                assert control["failed"] == 0 and control["failures"] == [], (name, rev)


def test_a_failure_the_control_shares_is_published_as_the_mappings() -> None:
    """Plant the control failing the vector of a runtime finding: the row moves to the
    mapping's kind and out of what a maintainer could act on."""
    data = json.loads(json.dumps({"mcp_sdk": PUBLISHED["mcp_sdk"]}))
    repros = {"mcp_sdk": reproductions(ROOT, "mcp_sdk")}
    before = render(data, repros, {})
    assert "could act on as it stands: [`unserializable_meta`]" in before
    for rev in REVISIONS:
        for f in data["mcp_sdk"][rev]["families"]:
            if f["rule"] == "R31":
                data["mcp_sdk"][rev]["control"]["failures"] += [
                    {"id": e["id"], "rule": "R31", "step": f["step"]} for e in f["examples"]
                ]
    after = render(data, repros, {})
    assert "could act on as it stands: nothing." in after
    assert "| control fails too | R31 " in after


def test_a_reproduction_without_a_kind_stops_the_render(tmp_path: Path) -> None:
    folder = tmp_path / RUNTIMES_DIR
    folder.mkdir(parents=True)
    (folder / "repro_x.py").write_text(
        'async def late() -> bool:\n    """R27: a finding nobody classified."""\n    return True\n'
    )
    with pytest.raises(RealWorldError, match="late needs one paragraph 'Kind: <runtime"):
        reproductions(tmp_path, "x")
    (folder / "repro_x.py").write_text(
        'async def late() -> bool:\n    """R27: inherited, it says.\n\n    Kind: inherited -- '
        'asyncio does it too."""\n    return True\n'
    )
    with pytest.raises(RealWorldError, match="names no bare-asyncio control"):
        reproductions(tmp_path, "x")


def test_a_difference_in_words_only_is_told_apart_from_one_in_behaviour() -> None:
    contract = (
        '{"content":[{"text":"Error: unknown tool","type":"text"}],"error":{"code":"U"},'
        '"isError":true}'
    )
    assert text_only(contract, '{"content":[{"text":"No such tool","type":"text"}],"isError":true}')
    assert not text_only(contract, '{"content":[{"text":"done","type":"text"}],"isError":false}')
    assert not text_only(contract, "raised RuntimeError: tool failed")


def test_an_adapter_without_a_control_stops_the_measurement(tmp_path: Path) -> None:
    """An adapter that serves the runtime whatever its arguments would be its own control --
    every finding then "shared" and published as the mapping's: the measurement refuses it."""
    toy = (ROOT / "tests" / "fixtures" / "toy_runtime_adapter.py").read_text(encoding="utf-8")
    head, _, _ = toy.partition('if __name__ == "__main__":')
    folder = tmp_path / RUNTIMES_DIR
    folder.mkdir(parents=True)
    (folder / "adapter_toy.py").write_text(
        head + 'if __name__ == "__main__":\n    kit.serve(Toy())\n', encoding="utf-8"
    )
    with pytest.raises(RealWorldError, match="--control served the runtime itself"):
        measure(tmp_path, "toy", "seed")
