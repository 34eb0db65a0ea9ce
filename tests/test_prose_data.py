"""CONTRACT.md's prose about the precedence table is held to the data: every row R39 names is
read back from ``[[precedence]]`` of contract.toml, so a row that moves, changes its rule or its
route makes this test fail rather than leaving the normative text to contradict the table."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from toolcancel.contract.loader import Contract, RevisionContract, load_contract, load_contract_file

ROOT = Path(__file__).resolve().parents[1]
CONTRACT_MD = (ROOT / "spec" / "CONTRACT.md").read_text("utf-8")


def _r39() -> str:
    return CONTRACT_MD.split("### R39 — ", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]


def _revised_sentence(text: str) -> str:
    return " ".join(text.split("Revised: ", 1)[1].split("\n\n", 1)[0].split())


def _seed_sentence(text: str) -> str:
    return " ".join(text.split("\nSeed: ", 1)[1].split(" Revised: ", 1)[0].split())


def _rows(table: RevisionContract) -> dict[int, str]:
    return {p.row: p.situation for p in table.precedence}


def problems(contract: Contract, text: str) -> list[str]:
    """Each statement of R39's text ``text`` that ``contract``'s precedence rows contradict."""
    seed, revised = contract.revision("seed"), contract.revision("revised")
    found: list[str] = []
    flat = " ".join(text.split())
    # "row 10 (...) overrides rows 8 and 9"
    for row, over in re.findall(r"row (\d+) \([^)]*\) overrides rows ([\d, and]+?) \(", flat):
        for table in (seed, revised):
            beats = table.precedence_row(int(row)).beats
            if f"overrides rows {over}" not in beats:
                found.append(f"{table.name} row {row} does not override rows {over}")
    # "rows 1, 4 and 6 (revised: also ... row 2) end the call on the final route"
    final_route = r"rows ([\d, and]+) \(revised: also [^)]*row (\d+)\) end the call on the final"
    m = re.search(final_route, flat)
    if m is None:
        found.append("R39 no longer says which rows end on the final route")
    else:
        final = [int(n) for n in re.findall(r"\d+", m.group(1))]
        for table, rows in ((seed, final), (revised, [*final, int(m.group(2))])):
            for n in rows:
                if "(FINAL)" not in table.precedence_row(n).outcome:
                    found.append(f"{table.name} row {n} does not end on the final route")
    said = _revised_sentence(text)
    # "row 3 is ... (R43 a)", "(row 5, R43 b)", "row 7 is ... (R43 c)": the row says so itself
    for row, part in re.findall(r"row (\d+)[^;]*?R43 \(?([abc])\)?", said):
        situation = _rows(revised).get(int(row), "")
        if f"R43 {part}" not in situation:
            found.append(f"revised row {row} is not R43 ({part}): {situation!r}")
    for row, rule in re.findall(r"row (\d+) is the [^;(]*\((R\d+)\)", said):
        if rule not in revised.precedence_row(int(row)).rules:
            found.append(f"revised row {row} does not cite {rule}")
    for rows in re.findall(r"((?:rows? \d+(?:,| and) )*rows? \d+) do(?:es)? not exist", said):
        for row in re.findall(r"\d+", rows):
            if int(row) in _rows(revised):
                found.append(f"revised row {row} exists")
    m = re.search(r"rows ([\d, and]+) choose the code by (R\d+)", said)
    if m is None:
        found.append("R39 no longer says which revised rows choose the code")
    else:
        for n in re.findall(r"\d+", m.group(1)):
            if m.group(2) not in revised.precedence_row(int(n)).rules:
                found.append(f"revised row {n} does not cite {m.group(2)}")
    seed_said = _seed_sentence(text)
    m = re.search(r"row (\d+) switches off rows ([\d, and]+) for", seed_said)
    if m is None:
        found.append("R39 no longer says which seed rows a pre-aborted entry switches off")
    else:
        beats = seed.precedence_row(int(m.group(1))).beats
        if f"rows {m.group(2)} do not apply" not in beats:
            found.append(f"seed row {m.group(1)} does not switch off rows {m.group(2)}")
    return found


def test_r39_states_the_precedence_rows_the_data_holds() -> None:
    assert problems(load_contract(), _r39()) == []


def test_r39_cites_rows_of_both_revisions() -> None:
    said = _revised_sentence(_r39())
    assert len(re.findall(r"R43 \(?[abc]\)?", said)) == 3, said


@pytest.mark.parametrize(
    ("old", "new", "complaint"),
    [  # the round's own confusion: R43 (c) said to be row 2, row 3 said not to exist
        ("(R43 a)", "(R43 x)", "revised row 3 is not R43 (a)"),
        ("Caller aborted when pre-policy, approval and guards settle without a denial (R43 c)",
         "Caller aborted when the pre-stages settle", "revised row 7 is not R43 (c)"),
        ("rows 2, 3, 7, 9, 12 and 15 do not apply", "rows 2, 3, 7 and 9 do not apply",
         "seed row 17 does not switch off"),
        ('outcome = "aborted_before_dispatch (FINAL)"', 'outcome = "aborted_before_dispatch"',
         "revised row 2 does not end on the final route"),
    ],
)
def test_a_changed_precedence_row_makes_the_prose_wrong(
    tmp_path: Path, old: str, new: str, complaint: str
) -> None:
    text = (ROOT / "spec" / "contract.toml").read_text("utf-8")
    assert old in text
    copy = tmp_path / "contract.toml"
    copy.write_text(text.replace(old, new, 1), "utf-8")
    found = problems(load_contract_file(copy), _r39())
    assert any(complaint in p for p in found), found


def test_the_r39_text_that_contradicted_the_table_is_caught() -> None:
    """The sentence issue 42 found wrong: R43 (c) put in row 2, and row 3 said not to exist."""
    wrong = _r39().split("Revised: ", 1)[0] + (
        "Revised: row 2 is the\npre-aborted short-circuit and R43 (c); denials (row 5) and "
        "pre-stage failures (row 4) beat\ncancellation; row 3 and row 17 do not exist; rows 7, 12 "
        "and 15 choose the code by R41.\n"
    )
    found = problems(load_contract(), wrong)
    assert "revised row 3 exists" in found
    assert any(p.startswith("revised row 2 is not R43 (c)") for p in found), found


# ------------------------------------------------------------------------------------------------
# Every other precedence row the normative text cites, and the other data facts it states
# ------------------------------------------------------------------------------------------------


def row_citations(contract: Contract, text: str) -> list[str]:
    """Each "row N" a rule's or an open point's section of CONTRACT.md cites that does not cite
    that rule back: in a rule section ``### Rk``, row N must list Rk in some revision; in an open
    point ``#### Dk``, one of the rules named in the same bullet (R39, which states the table
    itself, is :func:`problems`' business; "R21's table" has rows of its own)."""
    found: list[str] = []
    tables = [contract.revision(r) for r in contract.revisions]
    for section in re.split(r"\n(?=#{2,4} )", text):
        head = re.match(r"#+ (R\d+|D\d+) ", section)
        if head is None or head.group(1) == "R39":
            continue
        for bullet in re.split(r"\n(?=\s*[*\d]+[.)]? )", section):
            flat = " ".join(bullet.split())
            for m in re.finditer(r"\brows? ([\d, and–]+?)(?= of R21|[);.:]| \(|$)", flat):
                if flat[m.end():].startswith(" of R21"):
                    continue
                named = {head.group(1)} if head.group(1).startswith("R") else set(
                    re.findall(r"\bR\d+\b", flat))
                for n in map(int, re.findall(r"\d+", m.group(1))):
                    rules = {r for t in tables for p in t.precedence if p.row == n for r in p.rules}
                    if not rules:
                        found.append(f"{head.group(1)} cites row {n}, which no revision has")
                    elif not rules & named:
                        found.append(f"{head.group(1)} cites row {n}, whose rules are "
                                     f"{sorted(rules)}")
    return found


def test_every_row_a_rule_cites_cites_that_rule() -> None:
    assert row_citations(load_contract(), CONTRACT_MD) == []
    assert len(re.findall(r"\brows? \d", CONTRACT_MD)) >= 30  # the check reads real citations


def test_a_precedence_row_changed_in_a_scratch_contract_fails_the_prose(tmp_path: Path) -> None:
    """The demonstration the issue asks for: a scratch copy of contract.toml whose row 9 now
    cites R19 instead of R18 makes R18's "(row 9)" wrong, and this check says so."""
    text = (ROOT / "spec" / "contract.toml").read_text("utf-8")
    old = 'row = 9\nsituation = "Body succeeds but F aborted at settle"\noutcome = "aborted"\n' \
          'beats = "the late success"\nrules = ["R18"]'
    assert old in text
    copy = tmp_path / "contract.toml"
    copy.write_text(text.replace(old, old.replace('["R18"]', '["R19"]')), "utf-8")
    assert "R18 cites row 9, whose rules are ['R19']" in row_citations(
        load_contract_file(copy), CONTRACT_MD)


def test_revision_names_and_dates_in_the_prose_are_the_contracts() -> None:
    """Every date the learning and origin pages give is a date of a revision's title or of the
    background decisions ORIGIN.md names; every revision name in backticks is one the data has."""
    contract = load_contract()
    titles = " ".join(contract.revision_info[r]["title"] for r in contract.revisions)
    background = {"2026-07-06", "2026-07-07"}  # the deadline library's and timeout policy's RFCs
    for page in ("spec/CONTRACT.md", "spec/PRIMER.md", "spec/ORIGIN.md", "README.md"):
        text = (ROOT / page).read_text("utf-8")
        for date in re.findall(r"\b20\d\d-\d\d-\d\d\b", text):
            assert date in titles or date in background, f"{page}: {date}"
        for name in re.findall(r"`(\w+)` \(the default\)", text):
            assert name == contract.default_revision, page


def test_the_vectors_guide_counts_are_the_shipped_files() -> None:
    """spec/vectors/README.md's vector counts per revision are the shipped files' line counts
    (rounded as the text rounds them), never "four to five thousand" again."""
    guide = (ROOT / "spec" / "vectors" / "README.md").read_text("utf-8")
    assert "four to five thousand" not in guide
    for revision in ("seed", "revised"):
        n = sum(1 for _ in (ROOT / "spec" / "vectors" / f"{revision}.jsonl").open("rb"))
        said_all = re.findall(rf"([\d,]+) {revision} (?:call )?vectors", guide)
        assert said_all, f"the guide no longer says how many {revision} vectors ship"
        for said in said_all:
            assert int(said.replace(",", "")) == n, (revision, said, n)


def _shipped(vid: str) -> dict[str, Any]:
    import json

    revision = vid.split("-")[0]
    with (ROOT / "spec" / "vectors" / f"{revision}.jsonl").open(encoding="utf-8") as f:
        found: dict[str, Any] = next(json.loads(line) for line in f if f'"id":"{vid}"' in line)
    return found


def test_r34s_two_allowed_forms_cite_vectors_of_each_order() -> None:
    """R34 decides a deadline and a caller abort in one synchronous step as a MAY with both forms
    allowed; the same-step vectors it cites allow both (the reference's caller first as expected,
    the timer first as an alternative), and the vectors that abort one source at a time, one set
    per allowed form, show each alone."""
    import json

    r34 = CONTRACT_MD.split("### R34 — ", 1)[1].split("\n### ", 1)[0]
    bullet = r34.split("**Both in one synchronous step**", 1)[1].split("\n* ", 1)[0]
    bullet = " ".join(bullet.split())
    assert "MAY" in bullet and "accepts both forms" in bullet
    same = bullet.split("`with_deadline`", 1)[1].split(")", 1)[0]
    ids = re.findall(r"`((?:seed|revised)-\d{5})`", same)
    assert sorted(vid.split("-")[0] for vid in ids) == ["revised", "seed"], same
    for vid in ids:
        v = _shipped(vid)
        assert (v["scenario"]["timeout"], v["scenario"]["cancel"]) == ("timer_first",
                                                                       "with_deadline"), vid
        alternatives = [a["outcome"] for a in v["expected"].get("alternatives", [])]
        assert (v["expected"]["outcome"], alternatives) == ("aborted", ["tool_timeout"]), vid
    forms = {"timer first": ("timer_first", "tool_timeout"), "caller first": ("budget", "aborted")}
    for form, (timeout, outcome) in forms.items():
        cited = bullet.split(f"{form}: ", 1)[1].split(";")[0]
        ids = re.findall(r"`((?:seed|revised)-\d{5})`", cited)
        assert len(ids) == 2, form
        for vid in ids:
            revision = vid.split("-")[0]
            with (ROOT / "spec" / "vectors" / f"{revision}.jsonl").open(encoding="utf-8") as f:
                v = next(json.loads(line) for line in f if f'"id":"{vid}"' in line)
            assert v["scenario"]["timeout"] == timeout and v["scenario"]["cancel"] == "gate:body"
            assert v["expected"]["outcome"] == outcome, vid


def test_the_vectors_guide_names_where_the_deeper_family_starts() -> None:
    """The guide's family boundaries: the deeper family starts at the first shipped vector whose
    configuration (its scenario without the cancellation point) is outside verify's bounded
    space, and every later one is too up to the same-step family (``with_deadline``), which
    holds every vector after its first."""
    import json
    from dataclasses import replace

    from toolcancel.oracle.scenario_language import Scenario
    from toolcancel.selfcheck.space import configurations

    guide = " ".join((ROOT / "spec" / "vectors" / "README.md").read_text("utf-8").split())
    said = re.findall(r"seed from `(seed-\d{5})`, revised from `(revised-\d{5})`", guide)
    assert len(said) == 2, "the guide no longer says where the deeper and same-step families start"
    (deep_seed, deep_revised), (same_seed, same_revised) = said
    for revision, first, same in (("seed", deep_seed, same_seed),
                                  ("revised", deep_revised, same_revised)):  # fmt: skip
        bounded = set(configurations(revision))
        path = ROOT / "spec" / "vectors" / f"{revision}.jsonl"
        deep = [
            (v["id"], replace(Scenario.from_data(v["scenario"]), cancel="never") not in bounded,
             v["scenario"]["cancel"] == "with_deadline")
            for v in map(json.loads, path.read_text("utf-8").splitlines())
        ]
        start = next(i for i, (_, outside, _) in enumerate(deep) if outside)
        last = next(i for i, (_, _, step) in enumerate(deep) if step)
        assert deep[start][0] == first, (revision, deep[start][0])
        assert deep[last][0] == same, (revision, deep[last][0])
        assert all(outside for _, outside, _ in deep[start:last]), revision
        assert all(step for _, _, step in deep[last:]), revision


# ------------------------------------------------------------------------------------------------
# ORIGIN.md: the rule ranges, open points and revised changes it names are the contract's
# ------------------------------------------------------------------------------------------------

ORIGIN_MD = (ROOT / "spec" / "ORIGIN.md").read_text("utf-8")


def _flat(text: str) -> str:
    return " ".join(text.split())


def _contract_sections() -> list[tuple[int, int]]:
    """CONTRACT.md's rule sections as (first, last) rule numbers, in order: the ranges their
    headings name, each checked against the rules the section holds, and R39's own section."""
    found = []
    for heading, body in re.findall(r"\n## ([^\n]*)\n(.*?)(?=\n## |\Z)", CONTRACT_MD, re.S):
        held = [int(n) for n in re.findall(r"^### R(\d+) ", body, re.M)]
        if not held or "Identity" in heading:
            continue
        named = re.search(r"\(R(\d+)(?:–R(\d+))?\)", heading)
        first, last = (held[0], held[-1]) if named is None else (
            int(named.group(1)), int(named.group(2) or named.group(1)))  # fmt: skip
        assert held == list(range(first, last + 1)), heading
        found.append((first, last))
    return found


def test_origins_rule_ranges_are_contract_mds_sections() -> None:
    """"How the rule numbers came about" groups R1-R39 exactly as CONTRACT.md's sections do,
    and says which rules are the seed's and which the revised contract's, as the data does."""
    told = _flat(ORIGIN_MD.split("## How the rule numbers came about", 1)[1])
    seed_part = told.split(" R40", 1)[0]
    ranges = [(int(a), int(b or a)) for a, b in re.findall(r"\(R(\d+)(?:–R(\d+))?\)", seed_part)]
    sections = _contract_sections()
    revised_only = sorted(int(r.id[1:]) for r in load_contract().rules
                          if r.revisions == frozenset({"revised"}))  # fmt: skip
    seed = [s for s in sections if s[0] not in revised_only]
    assert ranges == seed, (ranges, seed)
    last_seed = max(int(r.id[1:]) for r in load_contract().rules if "seed" in r.revisions)
    assert f"R1–R{last_seed} follow" in told
    assert f"R{revised_only[0]}–R{revised_only[-1]} state" in told
    assert revised_only == list(range(revised_only[0], revised_only[-1] + 1))


def test_origins_open_points_are_contract_mds() -> None:
    points = [int(n) for n in re.findall(r"^#### D(\d+) ", CONTRACT_MD, re.M)]
    assert points == list(range(1, len(points) + 1))
    said = re.findall(r"D1–D(\d+)", ORIGIN_MD)
    assert len(said) >= 3 and {int(n) for n in said} == {len(points)}


def test_origins_changes_are_the_revised_rules_and_revisions() -> None:
    """Each change of "The revised contract" cites rules CONTRACT.md has; the revised contract's
    own rules are one each for the changes ORIGIN says they state; the
    changes it dates to e8 and to later say so in their headings; e8 is the revised title's."""
    contract = load_contract()
    changes = dict(re.findall(r"^### Change (\d+) — [^\n]*\(([^)]*)\)\n(?s:.*?)", ORIGIN_MD,
                              re.M))  # fmt: skip
    bodies = dict(re.findall(r"^### Change (\d+) [^\n]*\n(.*?)(?=^### |^## )", ORIGIN_MD,
                             re.M | re.S))  # fmt: skip
    ids = {r.id for r in contract.rules}
    revised_only = {r.id for r in contract.rules if r.revisions == frozenset({"revised"})}
    stating: dict[str, set[str]] = {}
    for n, body in bodies.items():
        cited = set(re.findall(r"\bR\d+\b", body.split("CONTRACT.md:", 1)[-1]))
        assert cited <= ids, (n, cited - ids)
        for rule in cited & revised_only:
            stating.setdefault(rule, set()).add(n)
    assert set(stating) == revised_only
    flat = _flat(ORIGIN_MD)
    m = re.search(r"R(\d+)–R(\d+) state the revised contract's changes ([\d–, and]+)\.", flat)
    assert m is not None
    listed = set()
    for part in re.split(r", | and ", m.group(3)):
        a, _, b = part.partition("–")
        listed |= {str(k) for k in range(int(a), int(b or a) + 1)}
    # each revised rule states the change that brought it in (the first citing it; change 5
    # takes its code from change 2's R41)
    introduced = {rule: min(ns, key=int) for rule, ns in stating.items()}
    assert set(introduced.values()) == listed and len(listed) == len(introduced), introduced
    m = re.search(r"Changes (\d+)–(\d+) came with the first revision \((\w+)\); ([\d–, and]+) came "
                  r"later", flat)  # fmt: skip
    assert m is not None
    first = {str(k) for k in range(int(m.group(1)), int(m.group(2)) + 1)}
    later = set()
    for part in re.split(r", | and ", m.group(4)):
        a, _, b = part.partition("–")
        later |= {str(k) for k in range(int(a), int(b or a) + 1)}
    assert {n for n, when in changes.items() if when.startswith(m.group(3))} == first, changes
    assert {n for n, when in changes.items() if when.startswith("later")} <= later, changes
    assert f"{m.group(3)} of" in contract.revision_info["revised"]["title"]


def test_origins_timeout_decisions_are_contract_mds_timeout_section() -> None:
    m = re.search(r"CONTRACT\.md states both as R(\d+)–R(\d+)", _flat(ORIGIN_MD))
    assert m is not None
    section = re.search(r"## Timeout policy \(R(\d+)–R(\d+)\)", CONTRACT_MD)
    assert section is not None and m.groups() == section.groups()


# ------------------------------------------------------------------------------------------------
# SPEC-MUTANTS.md: its figures and the checks it names are the code's
# ------------------------------------------------------------------------------------------------

SPEC_MUTANTS_MD = (ROOT / "spec" / "SPEC-MUTANTS.md").read_text("utf-8")


def test_spec_mutants_figures_each_judge_every_perturbation() -> None:
    """Every dated run's verdicts add up to the perturbations the table has now (the generated
    block counts them), and the figures table's perturbation row says that number."""
    from toolcancel.selfcheck.specmutants import perturbations

    total = sum(len(perturbations(r)) for r in load_contract().revisions)
    assert f"\n{total} perturbations in all.\n" in SPEC_MUTANTS_MD, "run toolcancel regen"
    table = SPEC_MUTANTS_MD.split("## Figures", 1)[1].split("\n\n", 2)[1]
    cells = {line.split("|")[1].strip().strip("*"): [
        int(c.strip().strip("*")) for c in line.strip().strip("|").split("|")[1:]]
        for line in table.splitlines()[2:] if "run time" not in line}  # fmt: skip
    assert cells["perturbations"] == [total] * len(cells["perturbations"])
    parts = ("killed", "stopped (no applying candidate)", "unreached at bound 0", "surviving")
    for k in range(len(cells["perturbations"])):
        assert sum(cells[p][k] for p in parts) == total, k
    runs = re.findall(r"killed (\d+), stopped (\d+), unreached (\d+), surviving (\d+)",
                      _flat(SPEC_MUTANTS_MD))  # fmt: skip
    assert len(runs) >= 3
    for run in runs:
        assert sum(map(int, run)) == total, run


def test_the_checks_spec_mutants_names_are_the_judges() -> None:
    """The checks SPEC-MUTANTS.md says kill perturbations exist in the oracle, by name (a
    module or a function of one), wherever the oracle keeps them."""
    import importlib
    import pkgutil

    import toolcancel.oracle as oracle

    modules = [importlib.import_module(m.name) for m in
               pkgutil.walk_packages(oracle.__path__, "toolcancel.oracle.")]  # fmt: skip
    known = {m.__name__.rsplit(".", 1)[1] for m in modules}
    known |= {name for m in modules for name in vars(m)}
    text = SPEC_MUTANTS_MD.split("The checks that kill", 1)[1].split("The example that", 1)[0]
    named = set(re.findall(r"`(\w+)`", text))
    assert len(named) >= 10 and named <= known, named - known


def test_the_js_examples_vector_counts_are_the_shipped_files() -> None:
    """examples/js/README.md's "every vector passes" names the call and turn vectors of each
    revision and their sums: the shipped files' counts."""
    from toolcancel.oracle.vectors import shipped_dir, shipped_vectors
    from toolcancel.oracle.vectors.turns import load_turn_vectors, turn_file

    said = _flat((ROOT / "examples" / "js" / "README.md").read_text("utf-8"))
    m = re.search(r"seed ([\d,]+) call vectors and ([\d,]+) turn vectors \(([\d,]+) / ([\d,]+)\), "
                  r"revised ([\d,]+) and ([\d,]+) \(([\d,]+) / ([\d,]+)\)", said)  # fmt: skip
    assert m is not None, "the js example's README no longer says how many vectors pass"
    n = [int(x.replace(",", "")) for x in m.groups()]
    for revision, (calls, turns, total, passed) in (("seed", n[:4]), ("revised", n[4:])):
        shipped = len(shipped_vectors(revision))
        turned = len(load_turn_vectors(turn_file(shipped_dir(), revision)))
        assert (calls, turns, total, passed) == (shipped, turned, shipped + turned,
                                                 shipped + turned), revision
