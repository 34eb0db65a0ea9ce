"""The README is a promise: its example runs as written and prints what it says, its two
commands exist, and CI runs exactly the test command."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text("utf-8")


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", README, flags=re.S | re.M)


def test_the_embedding_example_runs_as_written_and_prints_what_the_readme_says(
    tmp_path: Path,
) -> None:
    """On stdout and on stderr: a cooperative abort is a normal outcome, logged below WARNING,
    so under Python's default logging the example prints nothing else."""
    (example,) = blocks("python")
    assert len(example.splitlines()) <= 22  # "a 20-line embedding example", plus blank lines
    (expected,) = blocks("text")
    script = tmp_path / "example.py"
    script.write_text(example, "utf-8")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         check=True, cwd=tmp_path)
    assert (out.stdout, out.stderr) == (expected, "")
    assert "stderr stays empty" in README  # what the README says next to the expected output


def test_the_readme_names_two_commands_and_ci_runs_exactly_the_test_command() -> None:
    (commands,) = blocks("sh")
    names = [line.split()[0] for line in commands.splitlines() if line.strip()]
    assert names == ["scripts/verify", "scripts/test"]
    for name in names:
        assert (ROOT / name).stat().st_mode & 0o111, f"{name} is not executable"
    ci = (ROOT / ".ci" / "run").read_text("utf-8")
    assert [line for line in ci.splitlines() if line and not line.startswith(("#", "set ", "cd "))
            ] == ["exec scripts/test"]
    assert "toolcancel verify" in (ROOT / "scripts" / "verify").read_text("utf-8")


def test_the_readme_diagram_is_the_generated_one() -> None:
    (mermaid,) = blocks("mermaid")
    assert mermaid == (ROOT / "diagrams" / "contract-seed.mmd").read_text("utf-8")
