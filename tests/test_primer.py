"""The learning pages cite the contract, never paraphrase it wrongly: every vector, rule, open
point, precedence row and transition that spec/PRIMER.md cites exists, every outcome it predicts
is the vector's expected outcome, and every row it names is the row the reference's run of that
vector is decided by.  The docs cite no vector that is not shipped and nothing a reader of this
repository cannot open."""

from __future__ import annotations

import json
import re
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from toolcancel.contract.loader import load_contract
from toolcancel.oracle.scenario_language import Scenario
from toolcancel.selfcheck.harness import run_scenario
from toolcancel.teaching.explain import Explanation, shipped_vectors

ROOT = Path(__file__).resolve().parents[1]
PRIMER = (ROOT / "spec" / "PRIMER.md").read_text("utf-8")
VECTOR_ID = re.compile(r"\b(seed|revised)-(\d{5})\b")


@cache
def vectors(revision: str) -> dict[str, dict[str, Any]]:
    return {str(v["id"]): v for v in shipped_vectors(revision)}


def vector(vid: str) -> dict[str, Any]:
    revision = vid.split("-")[0]
    assert vid in vectors(revision), f"{vid} is not a shipped vector"
    return vectors(revision)[vid]


@cache
def deciding_row(vid: str) -> int | None:
    """The precedence row that decides the reference registry's run of vector ``vid``."""
    v = vector(vid)
    scenario = Scenario.from_data(v["scenario"])
    obs = run_scenario(scenario)
    table = load_contract().revision(scenario.revision)
    decided = Explanation(table, obs.path).deciding()
    return None if decided is None or decided[1] is None else decided[1].row


@pytest.mark.parametrize("page", ["spec/PRIMER.md", "spec/SCENARIOS.md", "spec/CONTRACT.md",
                                  "spec/ORIGIN.md", "README.md", "spec/vectors/README.md"])
def test_every_vector_the_docs_cite_is_shipped(page: str) -> None:
    text = (ROOT / page).read_text("utf-8")
    for m in VECTOR_ID.finditer(text):
        vector(m.group(0))


def test_every_outcome_the_primer_states_for_a_vector_is_the_vectors() -> None:
    # "`seed-00887` (`aborted`)" in prose and tables
    pairs = re.findall(r"`((?:seed|revised)-\d{5})` \(`(\w+)`\)", PRIMER)
    # the abort matrix: "`aborted` (seed row 2): `seed-00887`"
    pairs += [(v, o) for o, v in re.findall(
        r"`(\w+)` \((?:seed|revised) row \d+\):(?: same run)? `((?:seed|revised)-\d{5})`", PRIMER)]
    assert len(pairs) >= 40
    for vid, outcome in pairs:
        assert vector(vid)["expected"]["outcome"] == outcome, vid


def test_the_exercises_answers_are_the_vectors_outcomes() -> None:
    rows = re.findall(r"^\| `((?:seed|revised)-\d{5})` \| [^|]+ \| ([^|]+) \|$", PRIMER, re.M)
    assert len(rows) >= 12
    for vid, answer in rows:
        (first,) = re.findall(r"`(\w+)`", answer)[:1]
        assert vector(vid)["expected"]["outcome"] == first, f"exercise {vid}: answer {answer!r}"


def test_each_timeline_cell_names_the_row_that_decides_its_vector() -> None:
    table = PRIMER.split("## One call on a timeline", 1)[1].split("\n## ", 1)[0]
    cells = [c for line in table.splitlines() if line.startswith("| ")
             for c in line.strip("|").split(" | ")]
    checked = 0
    for cell in cells:
        rows = re.findall(r"\b(seed|revised) row (\d+)", cell)
        ids = VECTOR_ID.findall(cell)
        if rows and ids:
            # a MAY cell names the other allowed outcomes first: the vector's expected one last
            (revision, row) = rows[-1]
            ((vrev, num),) = ids
            assert vrev == revision, cell
            assert deciding_row(f"{vrev}-{num}") == int(row), cell
            checked += 1
    assert checked >= 12


def test_every_rule_open_point_row_and_transition_the_primer_cites_exists() -> None:
    contract = load_contract()
    rules = {r.id for r in contract.rules}
    for r in re.findall(r"\bR(\d+)\b", PRIMER):
        assert f"R{r}" in rules, f"R{r}"
    for r in re.findall(r"\bR(\d+)–R(\d+)\b", PRIMER):
        assert {f"R{r[0]}", f"R{r[1]}"} <= rules
    contract_md = (ROOT / "spec" / "CONTRACT.md").read_text("utf-8")
    for a, b in re.findall(r"\bD(\d+)–D(\d+)\b", PRIMER):
        for d in range(int(a), int(b) + 1):
            assert f"#### D{d} — " in contract_md, f"D{d}"
    assert f"#### D{int(b) + 1} — " not in contract_md
    for revision, row in re.findall(r"\b(seed|revised) row (\d+)", PRIMER):
        contract.revision(revision).precedence_row(int(row))
    seed = {t.id: t for t in contract.revision("seed").transitions}
    for name, event in re.findall(r"\(`(\w+)` on `(\w+)`\)", PRIMER):
        assert event in seed[name].events, f"{name} is not {event}"


def test_the_worked_call_is_the_vectors_path_and_result() -> None:
    part = PRIMER.split("## A worked call", 1)[1].split("\n## ", 1)[0]
    (vid,) = set(re.findall(r"`((?:seed)-\d{5})` \(`", part))
    v = vector(vid)
    obs = run_scenario(Scenario.from_data(v["scenario"]))
    taken = [step.transition for step in obs.path]
    names = {t.index: t.id for t in load_contract().transitions}
    taken = [names[i] for i in taken]
    ids = set(names.values())
    cited = [t for t in re.findall(r"\(`([a-z0-9_]+)`[,) ]", part) if t in ids]
    assert cited == taken, "the steps cite the transitions of the run, in order"
    (shown,) = re.findall(r"`(\{\"additionalContexts\".*?)`", part)
    assert json.loads(shown) == v["expected"]["result"]


def test_the_readme_links_the_primer_before_any_other_page() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    pages = re.findall(r"\]\(([^)#]+\.md)", readme)
    assert pages and pages[0] == "spec/PRIMER.md"
    contract_md = (ROOT / "spec" / "CONTRACT.md").read_text("utf-8")
    assert "](PRIMER.md)" in contract_md.split("## Result shapes", 1)[0]


def test_the_docs_cite_nothing_a_reader_cannot_open() -> None:
    """The contract's unpublished working notes, the project's issue tracker and notes sections
    are not in the repository; nothing a reader is given may send them there."""
    found = subprocess.run(
        ["grep", "-rnIE", "--exclude-dir=__pycache__", "--exclude-dir=node_modules",
         r"contract-notes|notes section|[Ii]ssue [0-9]+|notes [A-E]\.?[0-9]",
         "spec", "README.md", "docs", "examples", "machine", "bench", "model_tests"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    ).stdout
    assert found == ""


def test_every_worked_scenario_names_a_vector_to_step() -> None:
    scenarios = (ROOT / "spec" / "SCENARIOS.md").read_text("utf-8")
    sections = scenarios.split("\n## ")[1:-1]  # the last lists the rules no scenario shows
    assert sections
    for section in sections:
        assert re.search(r"^Vector: `(seed|revised)-\d{5}`", section, re.M), section.split("\n")[0]


def test_the_primers_counts_and_dates_are_the_contracts() -> None:
    guarantees = PRIMER.split("## The five guarantees", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^(\d)\. \*\*", guarantees, re.M) == ["1", "2", "3", "4", "5"]
    titles = " ".join(load_contract().revision_info[r]["title"] for r in ("seed", "revised"))
    for date in re.findall(r"\b20\d\d-\d\d-\d\d\b", PRIMER):
        assert date in titles, date
    v = vector("seed-00917")
    deferred = len(v["expected"]["result"]["additionalContexts"])
    assert "defers two contexts" in PRIMER and deferred == 2
    revised = {r.id for r in load_contract().rules if r.revisions == frozenset({"revised"})}
    assert revised == {f"R{n}" for n in range(40, 45)}  # "R40–R44" are the revised rules


def test_the_abort_matrix_is_generated_and_each_cell_is_its_vectors_run() -> None:
    """The matrix is what regen writes, and each cell's vector is the point's own scenario (or,
    marked "same run", shows the point's run): its outcome, and the row that decides it."""
    from toolcancel.teaching.abortmatrix import POINTS, matrix_markdown

    contract = load_contract()
    block = PRIMER.split("<!-- BEGIN GENERATED: abort-matrix -->\n", 1)[1]
    block = block.split("<!-- END GENERATED: abort-matrix -->", 1)[0]
    assert block == matrix_markdown(contract), "run toolcancel regen"
    lines = block.splitlines()[2:]
    assert len(lines) == len(POINTS) >= 20
    for point, line in zip(POINTS, lines, strict=True):
        cells = line.strip("|").split(" | ")[1:]
        assert len(cells) == len(contract.revisions)
        for revision, text in zip(contract.revisions, cells, strict=True):
            ((outcome, row, same, vid),) = re.findall(
                r"`(\w+)` \(\w+ row (\d+)\):( same run)? `([\w-]+)`", text)
            scenario = point.scenario(revision)
            v = vector(vid)
            if not same:
                assert Scenario.from_data(v["scenario"]) == scenario, (point.label, revision)
            run = run_scenario(scenario)
            assert run.path[-1].outcome == outcome == v["expected"]["outcome"], text
            assert deciding_row(vid) == int(row), text
            assert [p.event for p in run.path] in [list(p) for p in v["expected"]["paths"]], text
            # the other outcomes a MAY allows: the vector's alternatives, each the run of the
            # step taken the other way round, decided by the row the cell names
            others = re.findall(r"`(\w+)` \(\w+ row (\d+)\) or ", text)
            alternatives = v["expected"].get("alternatives", [])
            if scenario.same_step is None:
                assert not others, text
            else:
                assert [o for o, _ in others] == [a["outcome"] for a in alternatives], text
                other = run_scenario(scenario.with_cancel("with_deadline:timer"))
                table = contract.revision(revision)
                decided = Explanation(table, other.path).deciding()
                assert decided is not None and decided[1] is not None
                assert (other.path[-1].outcome, decided[1].row) == (others[0][0],
                                                                     int(others[0][1])), text
                assert [p.event for p in other.path] in [list(p) for p in alternatives[0]["paths"]]
