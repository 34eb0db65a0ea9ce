"""The integrated rows (examples/runtimes/adapter_*__integrated.py): an integration that is
removed or stubbed makes its row fail, and the page refuses a broken rule without its reason.

The stub is the row with its ``# integration`` lines deleted -- the plain row's behaviour.  It is
run on a few vectors (CI cost: the plain row's published R27/R28/R31 failures whose vector the
integrated row does not cite as a failure, one revision, two conform runs a row): the row must
break none of those three rules on them, the stub must break one again.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from toolcancel.contract.loader import load_contract
from toolcancel.oracle.conform.capabilities import CANCEL_ANY, CANCEL_SIGNAL, needs
from toolcancel.oracle.vectors import load_vectors, shipped_vectors
from toolcancel.teaching import integrated
from toolcancel.teaching.realworld import DATA, PROTOCOL, RUNTIMES_DIR, RealWorldError, runtimes

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED: dict[str, Any] = json.loads((ROOT / DATA).read_text(encoding="utf-8"))
ROWS = [name for name in runtimes(ROOT) if integrated.is_integrated(name)]


def stub(text: str) -> str:
    """The row without the lines that apply its integration."""
    return "".join(ln for ln in text.splitlines(keepends=True)
                   if not ln.rstrip().endswith(integrated.MARK))  # fmt: skip


def test_there_are_integrated_rows() -> None:
    assert {"pydantic_ai__integrated", "langgraph__integrated"} <= set(ROWS)


@pytest.mark.parametrize("name", ROWS)
def test_each_integration_line_is_a_statement_of_its_own(name: str) -> None:
    """Deleting any one line that applies the integration leaves a valid program, and deleting
    them all leaves no trace of the integration."""
    text = (ROOT / RUNTIMES_DIR / f"adapter_{name}.py").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    marked = [i for i, ln in enumerate(lines) if ln.rstrip().endswith(integrated.MARK)]
    assert marked, f"{name}: no line ends with {integrated.MARK!r}"
    for i in marked:
        ast.parse("".join(lines[:i] + lines[i + 1 :]))
    assert not integrated.IMPORT.search(stub(text))


def _runs(caps: dict[str, Any], needs: frozenset[str]) -> bool:
    """Whether a row that declared ``caps`` is sent a vector that ``needs`` these."""
    for need in needs:
        if need == CANCEL_SIGNAL:
            if "signal" not in caps["cancel"]:
                return False
        elif need == CANCEL_ANY:
            if not caps["cancel"]:
                return False
        elif not caps.get(need):
            return False
    return True


def _candidates(name: str) -> tuple[str, list[str]] | None:
    """A revision and the vectors the plain row fails under R27, R28 or R31 there (published
    examples) that the integrated row runs -- None where there are none."""
    plain = PUBLISHED[integrated.plain_row(name)]
    for rev, m in PUBLISHED[name].items():
        table = load_contract().revision(rev)
        stageless = load_vectors(ROOT / "spec" / "vectors" / f"stageless-{rev}.jsonl")
        shipped = {v.id: v for v in [*shipped_vectors(rev), *stageless]}
        ids = [e["id"] for f in plain[rev]["families"] if f["rule"] in integrated.SHOWN
               for e in f["examples"]
               if _runs(m["capabilities"], needs(shipped[e["id"]], table))]  # fmt: skip
        if ids:
            return rev, list(dict.fromkeys(ids))
    return None


CANDIDATES = {name: found for name in ROWS if (found := _candidates(name)) is not None}
"""The integrated rows whose plain row breaks R27, R28 or R31 on a vector the integrated row
runs: where a stub of the integration must show what the integration does."""


def test_every_integration_has_a_row_its_stub_is_tried_on() -> None:
    """An integration none of whose rows has a vector to prove it on would pass stubbed."""
    assert {_module(n) for n in ROWS} == {_module(n) for n in CANDIDATES}


def _conform(adapter: Path, rev: str, ids: list[str], tmp_path: Path) -> dict[str, Any]:
    vectors = tmp_path / f"{adapter.stem}-{rev}.jsonl"
    lines = []
    for file in (f"{rev}.jsonl", f"stageless-{rev}.jsonl"):
        with (ROOT / "spec" / "vectors" / file).open(encoding="utf-8") as f:
            lines += [x for x in f if json.loads(x)["id"] in ids]
    vectors.write_text("".join(lines), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "toolcancel", "conform", "--revision", rev,
                           "--json", "--quiet", "--vectors", str(vectors), "--adapter",
                           sys.executable, str(adapter)], capture_output=True, text=True,
                          timeout=180, check=False,
                          # a planted stub outside the folder still imports its plain row
                          env={**os.environ, "PYTHONPATH": str(ROOT / RUNTIMES_DIR)})  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["vectors"] == len(ids), report
    return report


def _module(name: str) -> str:
    return integrated.module_of(ROOT / RUNTIMES_DIR / f"adapter_{name}.py")


@pytest.mark.parametrize("module", sorted({_module(n) for n in CANDIDATES}))
def test_a_stubbed_integration_makes_its_rows_fail(module: str, tmp_path: Path) -> None:
    """On the vectors where a plain row breaks R27, R28 or R31, the integrated row keeps them on
    some -- on one row of the integration at least: what it is for -- and on every such vector
    the stub (the row without its integration) breaks them again."""
    _installed(module)
    proven = []
    for name in sorted(n for n in CANDIDATES if _module(n) == module):
        rev, ids = CANDIDATES[name]
        row = ROOT / RUNTIMES_DIR / f"adapter_{name}.py"
        fixed = sorted(set(ids) - _breaking(_conform(row, rev, ids, tmp_path)))
        if not fixed:  # the row breaks those rules where its plain row does: LIMITS says why
            continue
        planted = tmp_path / f"adapter_{name}_stub.py"
        planted.write_text(stub(row.read_text(encoding="utf-8")), encoding="utf-8")
        assert _breaking(_conform(planted, rev, fixed, tmp_path)), (name, rev, fixed)
        proven.append(name)
    assert proven, f"{module}: no row keeps R27, R28 or R31 where its plain row breaks them"


def _breaking(report: dict[str, Any]) -> set[str]:
    """The vectors of ``report`` that break R27, R28 or R31 (cited first or not)."""
    return {f["id"] for f in report["failures"] if set(f["broken"]) & set(integrated.SHOWN)}


def test_a_broken_rule_without_its_reason_stops_the_render(tmp_path: Path) -> None:
    data = {"x__integrated": {"seed": {"rules": {"R27": {"verdict": "broken"},
                                                 "R28": {"verdict": "kept"}}}}}  # fmt: skip
    with pytest.raises(integrated.IntegrationError, match=r"x__integrated: R27 stays broken with "
                       r"toolcancel\.integrations\.m, whose LIMITS gives no reason"):  # fmt: skip
        integrated.check(data, {"x__integrated": "m"}, {"m": {}}, PROTOCOL)
    with pytest.raises(integrated.IntegrationError, match=r"LIMITS gives a reason for R28, which "
                       r"x__integrated keeps: drop it"):  # fmt: skip
        integrated.check(data, {"x__integrated": "m"}, {"m": {"R27": "why", "R28": "why"}},
                         PROTOCOL)  # fmt: skip
    integrated.check(data, {"x__integrated": "m"}, {"m": {"R27": "why"}}, PROTOCOL)


def test_limits_are_read_from_the_source_without_importing_the_runtime(tmp_path: Path) -> None:
    folder = tmp_path / integrated.INTEGRATIONS_DIR
    folder.mkdir(parents=True)
    source = 'import absent\nWHY = "a reason"\nLIMITS: X = {"R6": WHY, "R3": "another"}\n'
    (folder / "m.py").write_text(source)
    assert integrated.limits(tmp_path, "m") == {"R6": "a reason", "R3": "another"}
    (folder / "m.py").write_text("LIMITS = dict(R6=reason())\n")
    with pytest.raises(integrated.IntegrationError, match="needs LIMITS, a dict of rule id"):
        integrated.limits(tmp_path, "m")


def test_a_row_whose_integration_has_no_limits_is_refused_in_one_line(tmp_path: Path) -> None:
    from toolcancel.teaching.realworld import integrations_of

    folder = tmp_path / RUNTIMES_DIR
    folder.mkdir(parents=True)
    (folder / "adapter_x__integrated.py").write_text(
        "from toolcancel.integrations.nothing import X  # integration\n"
    )
    with pytest.raises(RealWorldError, match=r"integrations/nothing\.py: missing"):
        integrations_of(tmp_path, {"x__integrated": {}})


async def test_a_row_answers_only_its_callers_cancellation_with_what_was_published() -> None:
    """``Call.answered``: the caller's own cancellation is answered with the published result;
    any other (the driver ending a call that hangs) comes back as it is."""
    import asyncio

    from toolcancel.runtimes import Call, Outcome

    async def cancelled(args: dict[str, Any]) -> Outcome:
        raise asyncio.CancelledError

    async def published() -> dict[str, Any]:
        return {"content": [], "isError": True}

    call = Call({})
    execute = call.answered(cancelled, published)
    with pytest.raises(asyncio.CancelledError):
        await execute({})
    call.caller_aborted = True
    assert await execute({}) == Outcome(result={"content": [], "isError": True})


@pytest.mark.parametrize("name", ROWS)
def test_an_integrated_row_is_built_from_its_plain_row_never_copied(name: str) -> None:
    """The row file is its plain row plus an install step (``kit.integrated``): it defines no
    runtime class of its own, so nothing of the plain row's mapping can drift in a copy."""
    tree = ast.parse((ROOT / RUNTIMES_DIR / f"adapter_{name}.py").read_text(encoding="utf-8"))
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)], name
    built = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr == "integrated"]  # fmt: skip
    assert len(built) == 1, name


@pytest.mark.parametrize("name", ROWS)
def test_an_integrated_row_runs_every_vector_its_plain_row_runs(name: str) -> None:
    plain = PUBLISHED[integrated.plain_row(name)]
    for rev, measured in PUBLISHED[name].items():
        assert measured["vectors"] >= plain[rev]["vectors"], (name, rev)


def test_a_plain_row_without_an_integration_point_is_refused() -> None:
    from toolcancel import runtimes as kit

    class Plain(kit.Runtime):
        pass

    with pytest.raises(AttributeError, match="Plain has no integration"):
        kit.integrated(Plain, lambda call, plain: plain, "m")


def _installed(module: str) -> None:
    """Skip unless the runtime of ``toolcancel.integrations.<module>`` is installed."""
    try:
        importlib.import_module(f"toolcancel.integrations.{module}")
    except ImportError as exc:
        pytest.skip(f"{exc}: pip install -e '.[runtimes]'")


def _run_by(name: str, rev: str, keep: Callable[[Any], bool]) -> list[str]:
    """The ids of ``rev``'s shipped vectors whose scenario ``keep`` takes and the row ``name``
    runs (its published capabilities)."""
    capabilities = PUBLISHED[name][rev]["capabilities"]
    table = load_contract().revision(rev)
    return [v.id for v in shipped_vectors(rev)
            if keep(v.scenario) and _runs(capabilities, needs(v, table))]  # fmt: skip


def _failing_after_cancel(name: str, rev: str) -> list[str]:
    """The vectors of ``rev`` the row runs where a cooperative tool, alone (no wrapper, no
    deadline), fails after its caller cancelled: the contract keeps that failure (R15, R19)."""
    return _run_by(name, rev, lambda s: s.body in ("throw", "throw_structured")
                   and s.cooperative and s.cancel == "gate:body" and not s.wrappers
                   and s.timeout == "absent" and s.caller == "live")  # fmt: skip


@pytest.mark.parametrize("name", ROWS)
def test_a_tool_that_fails_after_its_callers_cancel_keeps_its_failure(
    name: str, tmp_path: Path
) -> None:
    """Where the runtime hands the registry the tool's own failure, the integrated row publishes
    it, not ABORTED (R15, R19): the body the registry awaits is the tool's own outcome, never
    the cancellation of a task around it.  Whatever else the row breaks there, its
    integration's LIMITS explains -- and only the OpenAI SDK, which turns a tool's failure into
    text before the registry sees it, loses the failure itself."""
    module = _module(name)
    _installed(module)
    ids = _failing_after_cancel(name, "revised")
    assert ids, name
    report = _conform(ROOT / RUNTIMES_DIR / f"adapter_{name}.py", "revised", ids, tmp_path)
    judged = [f for f in report["failures"] if f["rule"] != PROTOCOL]  # refused: not run
    assert {f["rule"] for f in judged} <= set(integrated.limits(ROOT, module)), (name, judged)
    if module != "openai_agents":
        lost = [f["id"] for f in judged if {"R15", "R19"} & set(f["broken"])]
        assert not lost, (name, lost)


def _answered_in_full(name: str, rev: str) -> list[str]:
    """A cheap subset of ``rev``'s vectors both rows run, where no caller's cancellation can
    come back instead of an answer (no cancel while the call runs): the plain row's answer is
    judged in full there, never excused as a re-raised cancellation (P2)."""
    return _run_by(name, rev, lambda s: not s.wrappers and s.timeout == "absent"
                   and not s.cancel.startswith(("gate:", "with_")))  # fmt: skip


@pytest.mark.parametrize("name", ROWS)
def test_an_integrated_row_loses_no_vector_its_plain_row_answers_and_passes(
    name: str, tmp_path: Path
) -> None:
    """Where the plain row is judged on its answer (no cancellation came back in its place),
    adding the integration loses nothing the plain row passes.  Under a cancel while the call
    runs, a task-cancel plain row re-raises the cancellation and gives no result to judge:
    those vectors compare nothing (the integrated row answers them, judged in full)."""
    module = _module(name)
    _installed(module)
    ids = _answered_in_full(name, "revised")
    assert ids, name
    rows = {n: ROOT / RUNTIMES_DIR / f"adapter_{n}.py" for n in (integrated.plain_row(name), name)}
    plain, mine = (_conform(path, "revised", ids, tmp_path) for path in rows.values())
    failed = {f["id"] for f in plain["failures"]}
    lost = [f["id"] for f in mine["failures"] if f["id"] not in failed]
    assert not lost, (name, lost)
