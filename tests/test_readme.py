"""The README is a promise: its example runs as written and prints what it says, its two
commands exist, and CI runs exactly the test command."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
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


# ------------------------------------------------------------------------------------------------
# Every number in the README's prose is checked here, against the code, the shipped files or the
# test that pins it.  Measured figures (timings, sizes of a run) belong in docs/ENGINEERING.md.
# Fenced blocks are checked by the tests above (the example's code and output, the diagram) and
# by test_the_install_block_shows_the_packaged_version.
# ------------------------------------------------------------------------------------------------

NUMBER = re.compile(r"(?<![\w.-])\d[\d,.]*\d|(?<![\w.-])\d(?![\w])")
NUMBER_WORDS = re.compile(
    r"\b(four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|"
    r"seventeen|eighteen|nineteen|twenty)\b", re.I)


REFERENCE = (ROOT / "docs" / "REFERENCE.md").read_text("utf-8")
"""The reference material the README links to (moved out of it): its numbers are held here too."""


def prose() -> str:
    """README and docs/REFERENCE.md without their fenced blocks, one line per line (blocks
    become blank lines)."""
    return re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"),
                  README + "\n" + REFERENCE, flags=re.S | re.M)


def lines_of(path: str) -> int:
    return sum(1 for line in (ROOT / path).read_text("utf-8").splitlines() if line.strip())


def n(text: str) -> float:
    return float(text.replace(",", ""))


def pyproject() -> dict[str, object]:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))


def defines(test_file: str, name: str) -> bool:
    return f"def {name}(" in (ROOT / "tests" / test_file).read_text("utf-8")


def check_vector_888(m: re.Match[str]) -> bool:
    import json

    for line in (ROOT / "spec/vectors/seed.jsonl").read_text("utf-8").splitlines():
        v = json.loads(line)
        if v["id"] == m.group(1):  # "a caller abort while the body runs"
            return bool(v["scenario"]["cancel"] == "gate:body"
                        and v["expected"]["outcome"] == "aborted")
    return False


def explorer_bytes() -> int:
    return sum(p.stat().st_size for p in (ROOT / "explorer").iterdir() if p.is_file())


def limits() -> dict[str, int]:
    from toolcancel.cli import main as cli
    from toolcancel.cli.commands import conform as conform_cmd
    from toolcancel.cli.commands import explain as explain_cmd
    from toolcancel.contract import fileio, trace
    from toolcancel.contract import loader as contract
    from toolcancel.oracle import vectors
    from toolcancel.oracle.conform import adapter as conform_adapter
    from toolcancel.oracle.conform import protocol as conform_protocol

    return {
        "trace line": trace.MAX_LINE_BYTES, "trace depth": trace.MAX_DEPTH,
        "trace lines": trace.MAX_LINES, "vectors line": vectors.MAX_LINE_BYTES,
        "vectors depth": vectors.MAX_DEPTH, "vectors": vectors.MAX_VECTORS,
        "explain": explain_cmd.MAX_INPUT, "contract bytes": contract.MAX_CONTRACT_BYTES,
        "contract depth": contract.MAX_CONTRACT_DEPTH, "answer line": conform_adapter.LINE_LIMIT,
        "answer depth": conform_protocol.ANSWER_DEPTH, "timeout": conform_cmd.MAX_TIMEOUT,
        "quote": fileio.QUOTE, "workers": cli.MAX_WORKERS,
    }


MiB = 1 << 20

# (pattern matching the number in its sentence, check of what it says).  Each number of the
# prose must fall inside a match of exactly the patterns that check it.
CHECKS: list[tuple[str, Callable[[re.Match[str]], bool]]] = [
    (r"Python (3\.11) to (3\.13) \(what is tested\)", lambda m: pyproject()["project"][
        "requires-python"] == f">={m.group(1)},<3.{int(m.group(2)[2:]) + 1}"),  # type: ignore[index]
    (r"on Python (3\.12) and (3\.13) when pyenv", lambda m: all(
        v in (ROOT / "scripts/test").read_text("utf-8") for v in (m.group(1), m.group(2)))),
    (r"still running (30) s after its signal", lambda m: __import__(
        "toolcancel.runtime.toolregistry").runtime.toolregistry.DRAIN_WARNING == n(m.group(1))),
    (r"SDK, (2\.3\.0)|offers in (2\.3\.0)", lambda m: f"mcp=={m.group(m.lastindex or 1)}"
     in pyproject()["project"]["optional-dependencies"]["mcp"]),  # type: ignore[index]
    (r"vector (seed-00888): a caller abort while the body runs", check_vector_888),
    (r"search all ([\d,]+) by id", lambda m: n(m.group(1))
     == lines_of("spec/vectors/seed.jsonl") + lines_of("spec/vectors/revised.jsonl")),
    (r"the (seven) stages of R10", lambda m: len(__import__(
        "toolcancel.contract.loader").contract.loader.load_contract().stages) == 7),
    (r"fits a (1280)x(720) slide", lambda m: '"width": 1280, "height": 720'
     in (ROOT / "tests/test_explorer_browser.py").read_text("utf-8")),
    (r"about (\d\.\d) MB", lambda m: abs(explorer_bytes() / 1e6 - n(m.group(1))) <= 0.25),
    (r"a plain line every (10) s otherwise", lambda m: __import__(
        "inspect").signature(__import__("toolcancel.cli.main").cli.main.Progress).parameters[
        "every"].default == n(m.group(1))),
    (r"TOOLCANCEL_PROGRESS=(0)", lambda m: 'get("TOOLCANCEL_PROGRESS", "1") != "0"'
     in (ROOT / "machine/cli/main.py").read_text("utf-8")),
    (r"prints the first violation exactly as `check` does and exits (1)",
     lambda m: defines("test_explain.py",
                       "test_explain_on_every_violating_edit_of_the_checker_tests_exits_1_naming_the_rule")),
    (r"Exit codes: (0) conforming, (1) violation,\s+(2) unusable input", lambda m: all(
        defines("test_check_cli.py", t) for t in (
            "test_a_conforming_trace_prints_one_line_per_call_and_exits_0",
            "test_a_violation_prints_rule_place_allowed_seen_and_why_and_exits_1",
            "test_unusable_input_is_one_line_on_stderr_and_exit_2"))),
    (r"([\d,]+) for\s+the seed contract and ([\d,]+) for the revised one", lambda m:
     (n(m.group(1)), n(m.group(2))) == (lines_of("spec/vectors/seed.jsonl"),
                                        lines_of("spec/vectors/revised.jsonl"))),
    (r"Turn vectors\*\* \(([\d,]+) per revision\)", lambda m: all(
        lines_of(f"spec/vectors/turns-{r}.jsonl") - 1 == n(m.group(1))  # a header line, then
        for r in ("seed", "revised"))),                                  # one vector a line
    (r"and exit code (2), never a traceback",
     lambda m: defines("test_check_cli.py",
                       "test_unusable_input_is_one_line_on_stderr_and_exit_2")),
    (r"a line ≤ (1) MiB, JSON nesting ≤ (64) levels, ≤ ([\d,]+) lines", lambda m: (
        limits()["trace line"], limits()["trace depth"], limits()["trace lines"])
     == (n(m.group(1)) * MiB, n(m.group(2)), n(m.group(3)))),
    (r"a line ≤ (1) MiB, nesting ≤ (64), ≤ ([\d,]+) lines", lambda m: (
        limits()["vectors line"], limits()["vectors depth"], limits()["vectors"])
     == (n(m.group(1)) * MiB, n(m.group(2)), n(m.group(3)))),
    (r"UTF-(8)", lambda m: True),  # a name, not a quantity
    (r"≤ (1) MiB in all, nesting ≤ (64)", lambda m: (limits()["explain"], limits()["trace depth"])
     == (n(m.group(1)) * MiB, n(m.group(2)))),
    (r"≤ (4) MiB, nesting ≤ (16) levels, integers ≤ ([\d,]+) digits", lambda m: (
        limits()["contract bytes"], limits()["contract depth"], sys.get_int_max_str_digits())
     == (n(m.group(1)) * MiB, n(m.group(2)), n(m.group(3)))),
    (r"no hello is exit (2); after it, a bad answer fails that vector \(exit (1)\); an answer line "
     r"≤ (64) MiB, nesting ≤ (66);.*?each at most ([\d,]+) s", lambda m: (
         defines("test_conform.py", "test_a_nonexistent_adapter_command_is_one_line_and_exit_2")
         and (limits()["answer line"], limits()["answer depth"], limits()["timeout"])
         == (n(m.group(3)) * MiB, n(m.group(4)), n(m.group(5))))),
    (r"integers ≤ ([\d,]+) digits; no key twice.*?cut at (60) characters", lambda m: (
        sys.get_int_max_str_digits(), limits()["quote"]) == (n(m.group(1)), n(m.group(2)))),
    (r"\| (1) to (256) \|", lambda m: limits()["workers"] == n(m.group(2)) and n(m.group(1)) == 1),
    (r"(0)–(2) around wrappers", lambda m: __import__(
        "toolcancel.selfcheck.space").selfcheck.space.MAX_WRAPPERS == n(m.group(2))),
    (r"schedules/s on (1),\s+(2) and (4) worker processes", lambda m: "ENGINE_WORKERS = (1, 2, 4)"
     in (ROOT / "bench/run.py").read_text("utf-8")),
    (r"so the process exits (0)\.", lambda m: defines(
        "test_mcp.py", "test_a_stop_signal_drains_publishes_once_and_exits_0")),
    (r"The drain has no bound of its own: every (30) s", lambda m: __import__(
        "toolcancel.runtime.mcp").runtime.mcp.DRAIN_REPORT == n(m.group(1))),
    (r"with status (128) \+ the signal's number", lambda m: "code == 128 + signal.SIGINT"
     in (ROOT / "tests/test_mcp.py").read_text("utf-8")),
    (r"stdio client \(mcp (2\.3)\), on\s+leaving, closes the server's stdin, sends SIGTERM to its "
     r"process group (2) s later and SIGKILL (2) s\s+after that, so a body draining longer than "
     r"about (4) s", lambda m: (
         (stdio := __import__("mcp.client.stdio").client.stdio).PROCESS_TERMINATION_TIMEOUT,
         stdio.FORCE_KILL_TIMEOUT) == (n(m.group(2)), n(m.group(3)))
     and n(m.group(2)) + n(m.group(3)) == n(m.group(4))
     and f"mcp=={m.group(1)}." in str(pyproject()["project"]["optional-dependencies"]["mcp"])),
    (r"mcp (2\.3\.0) has", lambda m: f"mcp=={m.group(1)}"
     in pyproject()["project"]["optional-dependencies"]["mcp"]),  # type: ignore[index]
    (r"shows the (seven) stages, every state and every transition number on one (16):(9)",
     lambda m: len(__import__(
         "toolcancel.contract.loader").contract.loader.load_contract().stages) == 7
     and "A 16:9 slide" in (ROOT / "machine/teaching/diagrams.py").read_text("utf-8")),
    (r"`TOOLCANCEL_COMPILE=(1) pip install \.` \(or\s+`TOOLCANCEL_COMPILE=(1) python", lambda m:
     'os.environ.get("TOOLCANCEL_COMPILE", "") not in ("", "0")'
     in (ROOT / "setup.py").read_text("utf-8")),
    (r"Node ≥ (20)", lambda m: 'split(".")[0] < 20' in (ROOT / "scripts/test").read_text("utf-8")),
    (r"against (twenty) deliberately broken registries", lambda m: len(__import__(
        "toolcancel.selfcheck.mutants").selfcheck.mutants.MUTANTS) == 20),
]


def test_every_number_in_the_readme_prose_is_checked_and_true() -> None:
    text = prose()
    covered: list[tuple[int, int]] = []
    for pattern, check in CHECKS:
        matches = list(re.finditer(pattern, text, flags=re.S))
        assert matches, f"tests/test_readme.py checks {pattern!r}, which the README no longer says"
        for m in matches:
            assert check(m), f"README says {m.group(0)!r}, which is no longer true"
            covered += [m.span(g) for g in range(1, (m.lastindex or 0) + 1) if m.group(g)]
    found = [*NUMBER.finditer(text), *NUMBER_WORDS.finditer(text)]
    unchecked = [
        f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}" for m in found
        if not any(a <= m.start() and m.end() <= b for a, b in covered)
    ]
    assert not unchecked, (
        "README numbers no test checks (add a check to CHECKS in tests/test_readme.py, or move "
        "a measured figure to docs/ENGINEERING.md): " + "; ".join(unchecked))


def test_the_install_block_shows_the_packaged_version() -> None:
    shown = re.search(r"^\$ toolcancel --version\ntoolcancel (\S+)$", README, flags=re.M)
    assert shown and shown.group(1) == pyproject()["project"]["version"]  # type: ignore[index]


def test_the_readme_is_a_users_page_of_at_most_500_lines() -> None:
    """Reference material lives in docs/ (REFERENCE.md, ENGINEERING.md), linked from the end."""
    assert README.count("\n") <= 500
    assert "](docs/REFERENCE.md)" in README and "](docs/ENGINEERING.md)" in README
