"""``toolcancel regen``: one table of generators, one command, and nothing committed twice.

The generators themselves are tested where they live (test_vectors, test_diagrams,
test_explorer, test_trace); here: that ``regen --check`` names what is stale, that its recorded
digests skip only what is provably unchanged, and that no committed file is a byte copy of
another (one source of each file: a copy drifts from its original).
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest
from toolcancel.cli.commands import regen
from toolcancel.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def test_no_committed_file_is_a_copy_of_another() -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    by_digest: dict[str, list[str]] = {}
    for name in filter(None, listed.split("\0")):
        data = (ROOT / name).read_bytes() if (ROOT / name).is_file() else b""
        if data:  # empty marker files (py.typed, __init__.py) are alike by nature
            by_digest.setdefault(hashlib.sha256(data).hexdigest(), []).append(name)
    copies = [names for names in by_digest.values() if len(names) > 1]
    assert copies == [], f"committed byte copies (keep one source): {copies}"


def test_every_generated_output_is_committed_and_named_once() -> None:
    seen: dict[Path, str] = {}
    for g in regen.GENERATORS:
        found = regen.files(g.outputs, ROOT)
        assert found, f"{g.name}: its outputs {g.outputs} match no file"
        for path in found:
            assert path not in seen, f"{path} is written by {seen[path]} and {g.name}"
            seen[path] = g.name


def fake_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """A checkout with one generator writing ``out.txt`` from ``in.txt``; returns the list of
    the generator's runs (True: --check)."""
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "contract.toml").write_text("", "utf-8")
    (tmp_path / "pyproject.toml").write_text("", "utf-8")
    (tmp_path / "in.txt").write_text("one", "utf-8")
    runs: list[bool] = []

    def run(check: bool) -> int:
        runs.append(check)
        want = (tmp_path / "in.txt").read_text("utf-8").upper()
        out = tmp_path / "out.txt"
        if check:
            if not out.is_file() or out.read_text("utf-8") != want:
                print(f"stale: {out.name}")
                return 1
            return 0
        out.write_text(want, "utf-8")
        return 0

    gen = regen.Generator("upper", inputs=("in.txt",), outputs=("out.txt",), run=run)
    monkeypatch.setattr(regen, "GENERATORS", (gen,))
    monkeypatch.chdir(tmp_path)
    return runs


def test_check_names_the_stale_file_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = fake_checkout(tmp_path, monkeypatch)
    assert main(["regen", "--check"]) == 1
    out = capsys.readouterr().out
    assert "stale: out.txt" in out and "stale: upper; run `toolcancel regen`" in out
    assert not (tmp_path / "out.txt").exists() and not (tmp_path / regen.STAMPS).exists()
    assert main(["regen"]) == 0
    assert (tmp_path / "out.txt").read_text("utf-8") == "ONE"
    assert main(["regen", "--check"]) == 0
    assert runs == [True, False]  # the recorded digests matched: no comparison ran


@pytest.mark.parametrize("edit", ["in.txt", "out.txt", "machine/new.py"])
def test_a_changed_input_or_output_is_compared_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: str
) -> None:
    runs = fake_checkout(tmp_path, monkeypatch)
    assert main(["regen"]) == 0
    (tmp_path / edit).parent.mkdir(exist_ok=True)
    (tmp_path / edit).write_text("two", "utf-8")
    code = main(["regen", "--check"])
    assert runs == [False, True]
    assert code == (0 if edit == "machine/new.py" else 1)


def test_full_ignores_the_recorded_digests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = fake_checkout(tmp_path, monkeypatch)
    assert main(["regen"]) == 0
    assert main(["regen", "--check", "--full"]) == 0
    assert runs == [False, True]


def test_outside_a_checkout_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["regen", "--check"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("toolcancel regen: run it in a source checkout")


def test_list_names_every_generator_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["regen", "--list"]) == 0
    names = [line.split(":")[0] for line in capsys.readouterr().out.splitlines()]
    assert names == [g.name for g in regen.GENERATORS]
    assert names.index("vectors") < names.index("explorer")  # the explorer reads the vectors
