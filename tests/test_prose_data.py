"""CONTRACT.md's prose about the precedence table is held to the data: every row R39 names is
read back from ``[[precedence]]`` of contract.toml, so a row that moves, changes its rule or its
route makes this test fail rather than leaving the normative text to contradict the table."""

from __future__ import annotations

import re
from pathlib import Path

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
