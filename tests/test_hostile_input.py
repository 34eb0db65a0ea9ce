"""Hostile input to every command: one line on stderr, exit code 2, no traceback, no partial file.

Why these tests: every command reads what somebody else wrote -- traces, vectors, scenarios,
copies of the contract -- or talks to a program somebody else wrote (an adapter).  Whatever those
hold (nothing, a directory, binary garbage, a cut-off line, the wrong schema, a line of megabytes,
JSON nested a hundred thousand deep, Latin-1), the promise of ``toolcancel.cli.main`` is exactly one
line on stderr naming the file (and the line, where there is one), exit code 2, never a
traceback, and no output file left half-written or written at all.

* A table runs every command over every hostile case in-process, with the output options of the
  commands that write files pointed at an empty directory that must stay empty.
* One real subprocess per command (``python -m toolcancel``) proves no traceback reaches a
  terminal, including an adapter's own traceback.
* Adapters: missing, not executable, a shell line (run without a shell: nothing happens), dying,
  printing garbage, flooding stdout or stderr -- one line, exit 2, before the first vector.
* Writes are atomic: when moving the finished file into place fails, the old file is intact and
  no temporary file is left.
* Hypothesis fuzzes the trace reader, the vector reader, the judge of adapter answers and
  ``toolcancel check`` end to end, on arbitrary bytes and on structured mutations of valid input
  (truncation, field deletion, type swaps, deep nesting): each either accepts the input or raises
  the library's error naming the file and line -- never anything else.  The ``ci`` profile of
  ``conftest.py`` makes them derandomized; ``thorough`` runs ten times more, randomized.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import functools
import io
import json
import operator
import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import shipped_vectors
from toolcancel.cli.main import main
from toolcancel.contract.loader import MAX_CONTRACT_BYTES, MAX_CONTRACT_DEPTH
from toolcancel.contract.trace import MAX_DEPTH, MAX_LINE_BYTES, TraceRecorder
from toolcancel.contract.trace_reader import TraceError, read_traces
from toolcancel.oracle.conform import adapter as conform_adapter
from toolcancel.oracle.conform.judge import Judge
from toolcancel.oracle.conform.protocol import AdapterDied, parse_answer
from toolcancel.oracle.scenario_language import Scenario
from toolcancel.oracle.vectors import (
    MAX_LINE_BYTES as MAX_VECTOR_LINE_BYTES,
)
from toolcancel.oracle.vectors import (
    REVISIONS,
    VectorError,
    load_vectors,
)
from toolcancel.runtime.registry import ToolRegistry
from toolcancel.runtime.virtual_time import VirtualClock, run
from toolcancel.selfcheck.adapter import Session
from toolcancel.selfcheck.harness import Harness

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable

# ------------------------------------------------------------------------------------------------
# Valid inputs, to start the hostile ones from
# ------------------------------------------------------------------------------------------------


def _record(scenario: Scenario) -> list[dict[str, Any]]:
    recorder = TraceRecorder()
    clock = VirtualClock()
    run(
        Harness(scenario, functools.partial(ToolRegistry, trace=recorder), clock).run(),
        clock=clock,
    )
    return recorder.lines


@functools.cache
def trace_lines() -> list[dict[str, Any]]:
    """A rich valid trace: a wrapper replacing the signal, cancelled while the body runs."""
    return _record(Scenario(wrappers=("replace_live",), cancel="gate:body"))


def trace_text(lines: list[dict[str, Any]] | None = None) -> str:
    return "".join(json.dumps(line) + "\n" for line in (lines or trace_lines()))


@functools.cache
def vector_lines() -> tuple[str, ...]:
    """Two valid vector lines: a plain one and one with an alternative outcome."""
    seed = shipped_vectors("seed")
    alternative = next(v for v in shipped_vectors("revised") if v.alternatives)
    return (seed[1].to_line(), alternative.to_line())


CONTRACT = (ROOT / "spec" / "contract.toml").read_text("utf-8")
SCENARIO = '{\n  "pre": "ask",\n  "cancel": "gate:approval"\n}\n'


# ------------------------------------------------------------------------------------------------
# The table: every command x every hostile case
# ------------------------------------------------------------------------------------------------

Build = Callable[[Path], bytes | None]
"""The bytes of a hostile file (None: the path is made a directory; ``MISSING``: no file)."""

MISSING = b"<missing>"
DEEP = 100_000


def _json_cases(valid: Callable[[], str]) -> dict[str, tuple[Build, int | None]]:
    """Hostile variants of a JSON Lines file whose valid text is ``valid()``, each with the line
    the error must name (None: the file as a whole)."""

    def first() -> str:
        return valid().splitlines()[0]

    return {
        "missing": (lambda _: MISSING, None),
        "directory": (lambda _: None, None),
        "empty": (lambda _: b"", None),
        "blank lines": (lambda _: b"\n  \n\t\n", None),
        "binary garbage": (lambda _: bytes(range(256)) * 16, 1),
        "non-UTF-8 on line 2": (
            lambda _: (first() + "\n").encode() + b'{"caf\xe9": 1}\n',
            2,
        ),
        "truncated": (lambda _: first()[: len(first()) // 2].encode(), 1),
        "invalid JSON on line 2": (lambda _: (first() + "\n{not json}\n").encode(), 2),
        "wrong schema": (lambda _: b'{"hello": "world"}\n', 1),
        "an array": (lambda _: b"[1, 2, 3]\n", 1),
        "NaN": (lambda _: b'{"x": NaN}\n', 1),
        "a 5,000-digit number": (lambda _: b'{"x": ' + b"9" * 5000 + b"}\n", 1),
        "an enormous line": (
            lambda _: b'{"x": "' + b"a" * (MAX_LINE_BYTES + 10) + b'"}\n',
            1,
        ),
        "deeply nested": (lambda _: b"[" * DEEP + b"]" * DEEP + b"\n", 1),
        "deeply nested object": (
            lambda _: b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"\n",
            1,
        ),
    }


TRACE_CASES = _json_cases(trace_text)
VECTOR_CASES = _json_cases(lambda: vector_lines()[0] + "\n")
_SHARED = _json_cases(lambda: SCENARIO)
SCENARIO_CASES: dict[str, tuple[Build, int | None]] = {
    # explain reads a scenario as one JSON document: only UTF-8 and syntax errors have a line
    **{
        name: (_SHARED[name][0], line)
        for name, line in (
            ("missing", None),
            ("directory", None),
            ("empty", None),
            ("blank lines", None),
            ("binary garbage", 2),  # where the first byte that is not UTF-8 is
            ("an array", None),
            ("NaN", None),
            ("a 5,000-digit number", None),
            ("an enormous line", None),
            ("deeply nested", None),
            ("deeply nested object", None),
        )
    },
    "non-UTF-8 on line 2": (lambda _: b'{\n  "pre": "caf\xe9"\n}\n', 2),
    "invalid JSON on line 3": (lambda _: b'{\n  "pre": "ask",\n  oops\n}\n', 3),
    "truncated": (lambda _: SCENARIO[:20].encode(), None),
    "wrong schema": (lambda _: b'{"pre": "maybe"}\n', None),
    "a trace cut short": (lambda _: trace_text()[:300].encode(), None),
    "wrong types": (lambda _: b'{"wrappers": "delegate"}\n', None),
    "huge step": (lambda _: b'{"cancel": "step:' + b"9" * 5000 + b'"}\n', None),
    "unicode digit step": (lambda _: '{"cancel": "step:²"}\n'.encode(), None),
}

def _after_a_trace_line(line: bytes) -> Build:
    return lambda _: (trace_text().splitlines()[0] + "\n").encode() + line


EXPLAIN_TRACE_CASES: dict[str, tuple[Build, int | None]] = {
    "non-UTF-8 on line 2": (_after_a_trace_line(b'{"caf\xe9": 1}\n'), 2),
    "invalid JSON on line 2": (_after_a_trace_line(b"{not json}\n"), 2),
    "truncated on line 2": (_after_a_trace_line(trace_text().splitlines()[1][:20].encode()), 2),
    "an unknown event on line 2": (
        _after_a_trace_line(b'{"trace": 1, "call": "c1", "event": "teleport"}\n'),
        2,
    ),
    "a field of the wrong type on line 2": (
        _after_a_trace_line(b'{"trace": 1, "call": "c1", "event": "args_valid", "x": 1}\n'),
        2,
    ),
    "an array on line 2": (_after_a_trace_line(b"[1, 2]\n"), 2),
    "NaN on line 2": (_after_a_trace_line(b'{"trace": NaN}\n'), 2),
    "deeply nested on line 2": (_after_a_trace_line(b"[" * DEEP + b"]" * DEEP + b"\n"), 2),
    "a 5,000-digit number on line 2": (_after_a_trace_line(b"[" + b"7" * 5000 + b"]\n"), 2),
    "an enormous file": (_after_a_trace_line(b" " * (1 << 20) + b"\n"), None),
    "a call that does not start with call_entry": (
        lambda _: (json.dumps({**trace_lines()[1], "call": "zz"}) + "\n").encode(),
        1,
    ),
}
CONTRACT_CASES: dict[str, tuple[Build, int | None]] = {
    "missing": (lambda _: MISSING, None),
    "directory": (lambda _: None, None),
    "empty": (lambda _: b"", None),
    "binary garbage": (lambda _: bytes(range(256)) * 16, None),
    "non-UTF-8 on line 3": (lambda _: b"# a\n# b\n[contract] # caf\xe9\n", 3),
    "truncated": (lambda _: CONTRACT[: len(CONTRACT) // 2].encode(), None),
    "invalid TOML": (lambda _: b"[contract\nrevisions = = 1\n", None),
    "wrong schema": (lambda _: CONTRACT.replace('"!in_wrapper"', "[1, 2]", 1).encode(), None),
    "wrong types": (lambda _: CONTRACT.replace("depth = 1", 'depth = "deep"', 1).encode(), None),
    "JSON instead": (lambda _: trace_text().encode(), None),
    "enormous": (lambda _: b"# " + b"x" * MAX_CONTRACT_BYTES + b"\n", None),
    "deeply nested": (lambda _: b"a = " + b"[" * DEEP + b"]" * DEEP + b"\n", None),
    "nested past the limit": (
        lambda _: b"a = " + b"[" * (MAX_CONTRACT_DEPTH + 1) + b"]" * (MAX_CONTRACT_DEPTH + 1),
        None,
    ),
}


def _argv_check(target: Path, out: Path) -> list[str]:
    return ["check", str(target)]


def _argv_conform(target: Path, out: Path) -> list[str]:
    return ["conform", "--self", "--vectors", str(target), "--timeout", "5"]


def _argv_explain(target: Path, out: Path) -> list[str]:
    return ["explain", str(target), "--svg", str(out / "x.svg"), "--mermaid", str(out / "x.mmd")]


def _argv_diagram(target: Path, out: Path) -> list[str]:
    return ["diagram", "--contract", str(target), "--out", str(out), "--precedence",
            str(out / "PRECEDENCE.md")]  # fmt: skip


def _argv_explain_trace(target: Path, out: Path) -> list[str]:
    return ["explain", str(target), "--mermaid", str(out / "x.mmd")]


COMMAND_CASES: dict[str, tuple[Callable[[Path, Path], list[str]], dict[str, Any], str]] = {
    "check": (_argv_check, TRACE_CASES, "trace.jsonl"),
    "conform --vectors": (_argv_conform, VECTOR_CASES, "vectors.jsonl"),
    "explain (scenario)": (_argv_explain, SCENARIO_CASES, "scenario.json"),
    "explain (trace)": (_argv_explain_trace, EXPLAIN_TRACE_CASES, "trace.jsonl"),
    "diagram --contract": (_argv_diagram, CONTRACT_CASES, "contract.toml"),
}
TABLE = [
    pytest.param(command, case, id=f"{command}: {case}")
    for command, (_, cases, _) in COMMAND_CASES.items()
    for case in cases
]


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``main(argv)`` in-process: its exit code (argparse's SystemExit included), stdout, stderr."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    return code, out, err


def the_line(err: str) -> str:
    """The one line on stderr (asserting there is exactly one, non-empty, and no traceback)."""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].strip(), err
    assert err.endswith("\n")
    assert "Traceback" not in err and "internal error" not in err, err
    return lines[0]


def leftovers(directory: Path) -> list[str]:
    """Every file under ``directory`` (written outputs and temporary files alike)."""
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


def make(path: Path, content: bytes | None) -> Path:
    if content is None:
        path.mkdir()
    elif content is not MISSING:
        path.write_bytes(content)
    return path


@pytest.mark.parametrize(("command", "case"), TABLE)
def test_every_command_answers_hostile_input_with_one_line_and_exit_2(
    command: str,
    case: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    argv_for, cases, name = COMMAND_CASES[command]
    build, line = cases[case]
    monkeypatch.chdir(tmp_path)  # diagram would refill ./README.md; there is none here
    target = make(tmp_path / name, build(tmp_path))
    out = tmp_path / "out"
    out.mkdir()
    code, stdout, err = run_main(argv_for(target, out), capsys)
    assert code == 2, (stdout, err)
    message = the_line(err)
    assert message.startswith(f"toolcancel {command.split()[0]}: "), message
    assert str(target) in message
    if line is not None:
        assert f"{target}:{line}:" in message, message
    assert leftovers(out) == []  # nothing written, not even a temporary file


def test_a_trace_the_contract_does_not_allow_is_a_violation_for_explain_not_unusable_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "trace.jsonl"
    target.write_text(trace_text(trace_lines()[:2] + trace_lines()[4:]), "utf-8")
    out = tmp_path / "out"
    out.mkdir()
    code, stdout, err = run_main(_argv_explain_trace(target, out), capsys)
    assert code == 1, (stdout, err)  # what check says: a violation, with its rule
    assert "does NOT conform" in stdout and "violation of R" in stdout
    assert the_line(err).startswith("toolcancel explain: nothing drawn")
    assert leftovers(out) == []


# ------------------------------------------------------------------------------------------------
# Unknown revisions and bad option values
# ------------------------------------------------------------------------------------------------


def _files(tmp_path: Path) -> dict[str, str]:
    """Placeholders of the option table, made real under ``tmp_path``."""
    trace = tmp_path / "trace.jsonl"
    trace.write_text(trace_text(), "utf-8")
    two = tmp_path / "two.jsonl"
    two.write_text(trace_text() + trace_text().replace('"c1"', '"c2"'), "utf-8")
    badrev = tmp_path / "badrev.jsonl"
    badrev.write_text(trace_text().replace('"revision": "seed"', '"revision": "tokyo"'), "utf-8")
    scenario = tmp_path / "scenario.json"
    scenario.write_text(SCENARIO, "utf-8")
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory", "utf-8")
    out = tmp_path / "out"
    out.mkdir()
    return {"TRACE": str(trace), "TWO": str(two), "BADREV": str(badrev),
            "SCENARIO": str(scenario), "FILE": str(a_file), "OUT": str(out)}  # fmt: skip


BAD_OPTIONS: list[tuple[list[str], str]] = [
    (["verify", "--revision", "tokyo"], "unknown contract revision 'tokyo'"),
    (["verify", "--workers", "0"], "--workers must be at least 1"),
    (["verify", "--workers", "100000"], "--workers must be at most 256"),
    (["verify", "--workers", "many"], "invalid int value: 'many'"),
    (["verify", "--max-wrappers", "9"], "--max-wrappers: invalid choice: 9"),
    (["verify", "--frobnicate"], "unrecognized arguments: --frobnicate"),
    (["check", "--revision", "tokyo", "TRACE"], "unknown contract revision 'tokyo'"),
    (["check"], "check: the following arguments are required"),
    (["vectors", "--revision", "tokyo", "--out", "OUT"], "unknown contract revision 'tokyo'"),
    (["vectors", "--workers", "0", "--out", "OUT"], "--workers must be at least 1"),
    (["vectors", "--workers", "-3", "--out", "OUT"], "--workers must be at least 1"),
    (["vectors", "--out", "FILE"], "FILE: not a directory"),
    (["conform", "--self", "--revision", "tokyo"], "unknown contract revision 'tokyo'"),
    (["conform", "--self", "--timeout", "0"], "--timeout must be a positive number"),
    (["conform", "--self", "--timeout", "nan"], "--timeout must be a positive number"),
    (["conform", "--self", "--timeout", "1e9"], "--timeout must be at most 86,400 seconds"),
    (["conform", "--self", "--timeout", "soon"], "invalid float value: 'soon'"),
    (["conform"], "give exactly one of --self and --adapter"),
    (["diagram", "--revision", "tokyo", "--out", "OUT"], "unknown revision 'tokyo'"),
    (["diagram", "--revision", "seed", "--out", "FILE", "--precedence", "OUT/P.md"],
     "--out FILE: is a regular file, not a directory"),
    (["diagram", "--revision", "seed", "--out", "OUT", "--precedence", "OUT"],
     "OUT: is a directory"),
    (["explain", "seed-99999"], "seed-99999: no such vector"),
    (["explain", "tokyo-00001"], "unknown contract revision 'tokyo'"),
    (["explain", "no-such-file.json"], "no-such-file.json: no such file"),
    (["explain", "TWO"], "TWO: the trace has 2 calls; pick one with --call"),
    (["explain", "TWO", "--call", "zz"], "TWO: no call 'zz'"),
    (["explain", "BADREV"], "BADREV:1: unknown contract revision 'tokyo'"),
    (["explain", "SCENARIO", "--svg", "OUT"], "OUT: is a directory"),
    (["explain", "SCENARIO", "--mermaid", "FILE/x.mmd"],
     "FILE/x.mmd: cannot write there: FILE is not a directory"),
    ([], "the following arguments are required: COMMAND"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"), BAD_OPTIONS, ids=[" ".join(a) for a, _ in BAD_OPTIONS]
)
def test_unknown_revisions_and_bad_option_values_are_one_line_and_exit_2(
    argv: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files = _files(tmp_path)

    def real(text: str) -> str:
        for key in sorted(files, key=len, reverse=True):
            text = re.sub(rf"\b{key}\b", files[key], text)
        return text

    # Were an option not refused, vectors would generate: make that fast, and visible below.
    import toolcancel.cli.commands.vectors as command

    monkeypatch.setattr(
        command, "expected_files", lambda revisions, workers, **_: {"x.jsonl": "x\n"}
    )
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main([real(a) for a in argv], capsys)
    assert code == 2, err
    assert real(message) in the_line(err)
    assert leftovers(Path(files["OUT"])) == []


# ------------------------------------------------------------------------------------------------
# Adapters: run without a shell; any failure before the first vector is one line and exit 2
# ------------------------------------------------------------------------------------------------


def _script(tmp_path: Path, body: str, executable: bool) -> str:
    path = tmp_path / "adapter.py"
    path.write_text(f"#!{PY}\n{body}\n", "utf-8")
    path.chmod(0o755 if executable else 0o644)
    return str(path)


ADAPTERS: list[tuple[str, Callable[[Path], list[str]], str]] = [
    ("missing", lambda d: [str(d / "no-such-adapter")],
     "cannot start the adapter '{d}/no-such-adapter': No such file or directory"),
    ("not executable", lambda d: [_script(d, "print('hi')", executable=False)],
     "cannot start the adapter '{d}/adapter.py': Permission denied"),
    ("a directory", lambda d: [str(d)], "cannot start the adapter '{d}': Permission denied"),
    ("an empty command name", lambda d: [""], "cannot start the adapter ''"),
    ("a NUL byte", lambda d: ["adap\0ter"], "cannot start the adapter 'adap\\x00ter'"),
    ("shell syntax", lambda d: [f"true; touch {d}/PWNED"],
     "cannot start the adapter 'true; touch {d}/PWNED': No such file or directory"),
    ("shell syntax in arguments", lambda d: ["/bin/echo", "$(touch", f"{d}/PWNED)", ";", "touch",
                                             f"{d}/PWNED"],
     "the adapter's first line is not a hello: '$(touch {d}/PWNED) ; touch {d}/PWNED'"),
    ("exits at once", lambda d: [PY, "-c", "raise SystemExit(3)"],
     "the adapter sent no hello: the adapter exited with code 3 before answering the hello"),
    ("dies with a traceback", lambda d: [PY, "-c", "1 / 0"],
     "exited with code 1 before answering the hello; its stderr ends with: "
     "'ZeroDivisionError: division by zero'"),
    ("prints garbage", lambda d: [PY, "-c", "print('garbage')"],
     "the adapter's first line is not a hello: 'garbage'"),
    ("prints binary garbage",
     lambda d: [PY, "-c", "import sys; sys.stdout.buffer.write(b'\\xff\\x00\\n')"],
     "the adapter's first line is not a hello: '\ufffd\\x00'"),
    ("prints deeply nested JSON", lambda d: [PY, "-c", "print('[' * 20000)"],
     "the adapter's first line is not a hello: '[[[["),
    ("speaks another protocol",
     lambda d: [PY, "-c", "print('{\"type\":\"hello\",\"protocol\":9,\"revisions\":[\"seed\"]}')"],
     "the adapter speaks protocol 9; this runner speaks 1"),
    ("floods stdout", lambda d: [PY, "-c", "while True: print('x' * 1000)"],
     "the adapter's first line is not a hello: 'xxxxxxxx"),
    ("floods stderr, then exits",
     lambda d: [PY, "-c", "import sys\nfor i in range(20000): print('noise', i, file=sys.stderr)\n"
                          "raise SystemExit(4)"],
     "exited with code 4 before answering the hello; its stderr ends with: 'noise 19999'"),
    ("writes an endless line", lambda d: [PY, "-c", "import sys; sys.stdout.write('x' * 300000); "
                                                    "sys.stdout.flush(); sys.stdin.read()"],
     "the adapter sent no hello: the answer for the hello is longer than 65536 bytes"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "command", "message"), ADAPTERS, ids=[a[0] for a in ADAPTERS])
def test_an_adapter_that_cannot_serve_is_one_line_and_exit_2(
    name: str,
    command: Callable[[Path], list[str]],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(conform_adapter, "LINE_LIMIT", 1 << 16)
    vectors = tmp_path / "vectors.jsonl"
    vectors.write_text(vector_lines()[0] + "\n", "utf-8")
    argv = ["conform", "--vectors", str(vectors), "--timeout", "30",
            "--adapter", *command(tmp_path)]  # fmt: skip
    code, out, err = run_main(argv, capsys)
    assert (code, out) == (2, ""), err
    assert message.format(d=tmp_path) in the_line(err)
    assert not (tmp_path / "PWNED").exists()  # no shell ever saw the command


def test_after_its_hello_an_adapter_printing_garbage_costs_that_vector_not_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Documented behaviour (README, ``toolcancel.oracle.conform``): once the adapter has said
    hello, a bad answer is a failing vector (exit 1, named in the report), the adapter is restarted,
    and the adapter's own stderr noise never reaches ours."""
    vectors = tmp_path / "vectors.jsonl"
    vectors.write_text(vector_lines()[0] + "\n", "utf-8")
    hello = json.dumps({"protocol": 1, "type": "hello", "revisions": list(REVISIONS)})
    body = (
        "import sys\n"
        f"print({hello!r}, flush=True)\n"
        "sys.stdin.readline()\n"
        "print('Traceback (most recent call last):', file=sys.stderr)\n"
        "print('garbage', flush=True)\n"
    )
    argv = ["conform", "--vectors", str(vectors), "--json", "--adapter", PY, "-c", body]
    code, out, err = run_main(argv, capsys)
    vid = json.loads(vector_lines()[0])["id"]
    assert (code, err) == (1, "")
    assert json.loads(out)["failures"] == [
        {
            "id": vid,
            "rule": "protocol",
            "broken": ["protocol"],
            "step": "adapter",
            "expected": "",
            "observed": "",
            "explanation": f"{vid}: the answer is not JSON: 'garbage'",
        }
    ]


# ------------------------------------------------------------------------------------------------
# Writes are atomic: a failed move leaves the old file and no temporary file
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def failing_replace(monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.replace`` fails as a full disk would, once the data is written to the temp file."""

    def replace(src: Any, dst: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(src))

    monkeypatch.setattr(os, "replace", replace)


def test_vectors_writes_atomically(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    failing_replace: None,
) -> None:
    import toolcancel.cli.commands.vectors as command

    monkeypatch.setattr(
        command, "expected_files", lambda revisions, workers, **_: {"seed.jsonl": "new\n" * 1000}
    )
    old = tmp_path / "seed.jsonl"
    old.write_text("old\n", "utf-8")
    code, _, err = run_main(["vectors", "--revision", "seed", "--out", str(tmp_path)], capsys)
    assert code == 2
    assert the_line(err) == f"toolcancel vectors: {old}: cannot write (No space left on device)"
    assert leftovers(tmp_path) == ["seed.jsonl"] and old.read_text("utf-8") == "old\n"


def test_explain_writes_atomically(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], failing_replace: None
) -> None:
    scenario = tmp_path / "scenario.json"
    scenario.write_text(SCENARIO, "utf-8")
    out = tmp_path / "out"
    out.mkdir()
    old = out / "x.mmd"
    old.write_text("old\n", "utf-8")
    code, _, err = run_main(["explain", str(scenario), "--mermaid", str(old)], capsys)
    assert code == 2
    assert the_line(err) == f"toolcancel explain: {old}: cannot write (No space left on device)"
    assert leftovers(out) == ["x.mmd"] and old.read_text("utf-8") == "old\n"


def test_diagram_writes_atomically(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    failing_replace: None,
) -> None:
    monkeypatch.chdir(tmp_path)
    contract = tmp_path / "contract.toml"
    contract.write_text(CONTRACT, "utf-8")
    out = tmp_path / "out"
    out.mkdir()
    old = out / "contract-seed.dot"
    old.write_text("old\n", "utf-8")
    argv = ["diagram", "--contract", str(contract), "--revision", "seed", "--out", str(out),
            "--precedence", str(out / "PRECEDENCE.md")]  # fmt: skip
    code, _, err = run_main(argv, capsys)
    assert code == 2
    assert the_line(err) == f"toolcancel diagram: {old}: cannot write (No space left on device)"
    assert leftovers(out) == ["contract-seed.dot"] and old.read_text("utf-8") == "old\n"


# ------------------------------------------------------------------------------------------------
# The installed command: no traceback ever reaches a terminal
# ------------------------------------------------------------------------------------------------


def _subprocess_cases(d: Path) -> list[tuple[list[str], str]]:
    garbage = make(d / "garbage.jsonl", bytes(range(256)) * 64)
    deep = make(d / "deep.json", b"[" * DEEP + b"]" * DEEP)
    latin1 = make(d / "latin1.toml", b"[contract] # caf\xe9\n")
    vectors = make(d / "vectors.jsonl", (vector_lines()[0] + "\n").encode())
    a_file = make(d / "a_file", b"x")
    return [
        (["verify", "--workers", "0"], "toolcancel verify: --workers must be at least 1"),
        (["check", str(garbage)], f"toolcancel check: {garbage}:1: "),
        (["vectors", "--out", str(a_file)], f"toolcancel vectors: {a_file}: not a directory"),
        (["conform", "--vectors", str(vectors), "--adapter", PY, "-c", "1 / 0"],
         "toolcancel conform: the adapter sent no hello"),  # its traceback stays its own
        (["diagram", "--check", "--contract", str(latin1)],
         f"toolcancel diagram: {latin1}:1: not UTF-8 text"),
        (["explain", str(deep)], f"toolcancel explain: {deep}: JSON nested deeper than 64 levels"),
    ]  # fmt: skip


def test_the_real_command_never_prints_a_traceback(tmp_path: Path) -> None:
    cases = _subprocess_cases(tmp_path)
    assert sorted(argv[0] for argv, _ in cases) == sorted(
        ("verify", "check", "vectors", "conform", "diagram", "explain")
    )
    for argv, start in cases:
        done = subprocess.run(
            [PY, "-m", "toolcancel", *argv],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=tmp_path,
        )
        assert done.returncode == 2, (argv, done.stderr)
        assert done.stdout == ""
        assert the_line(done.stderr).startswith(start), done.stderr


# ------------------------------------------------------------------------------------------------
# Fuzzing the readers
# ------------------------------------------------------------------------------------------------

FUZZ = settings(
    max_examples=max(50, settings.default.max_examples // 8),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""Derandomized under the ``ci`` profile (tests/conftest.py), about 125 examples per test."""

SWAPS: tuple[Any, ...] = (None, True, False, 0, -1, 2**70, 1.5, "", "x", "\u2028", [], {}, [1])


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if prefix:
        yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


def _nest(value: Any, depth: int) -> Any:
    for i in range(depth):
        value = [value] if i % 2 else {"x_": value}
    return value


@st.composite
def mutated(draw: st.DrawFn, doc: Any) -> Any:
    """``doc`` with one to three structured mutations: a field (or line) deleted, a value of
    another type, a value nested deeply (around and past the readers' depth limit), or an item
    of a list (a trace line, a path) repeated."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = functools.reduce(operator.getitem, path[:-1], doc)
        how = draw(st.sampled_from(("delete", "swap", "nest", "duplicate")))
        if how == "delete":
            del parent[path[-1]]
        elif how == "duplicate" and isinstance(parent, list):  # a line twice, say
            parent.insert(path[-1], copy.deepcopy(parent[path[-1]]))
        elif how == "swap":
            parent[path[-1]] = copy.deepcopy(draw(st.sampled_from(SWAPS)))
        else:
            depth = draw(st.sampled_from((1, 8, MAX_DEPTH - 3, MAX_DEPTH, MAX_DEPTH + 1, 300)))
            parent[path[-1]] = _nest(parent[path[-1]], depth)
    return doc


@st.composite
def damaged(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` truncated, and maybe with a few bytes (say, not UTF-8) spliced in."""
    if draw(st.booleans()):
        data = data[: draw(st.integers(0, len(data)))]
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
    return data


JSONISH = st.text(alphabet='{}[]":,0123456789.-eE ntrufalsNI\n\\\xe9x', max_size=300)


def trace_bytes() -> st.SearchStrategy[bytes]:
    structured = mutated(trace_lines()).map(
        lambda lines: "".join(json.dumps(x) + "\n" for x in lines).encode()
    )
    return st.one_of(
        st.binary(max_size=600),
        JSONISH.map(str.encode),
        structured,
        structured.flatmap(damaged),
        st.integers(0, 3000).map(lambda n: b'{"trace":1,"x_":' + b"[" * n + b"\n"),
    )


def vector_bytes() -> st.SearchStrategy[bytes]:
    docs = st.sampled_from(vector_lines()).map(json.loads)
    structured = docs.flatmap(mutated).map(lambda v: (json.dumps(v) + "\n").encode())
    return st.one_of(
        st.binary(max_size=600),
        JSONISH.map(str.encode),
        structured,
        structured.flatmap(damaged),
        st.integers(0, 3000).map(lambda n: b'{"vector":1,"id":' + b"[" * n + b"\n"),
    )


@pytest.fixture(scope="module")
def fuzz_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "input.jsonl"


def _location(message: str, path: Path, data: bytes) -> None:
    """The error names the file first, then (if anywhere) a line that exists (or the one after
    the last, for a file cut off), and fits on one line."""
    assert message.startswith(str(path)), message
    assert len(message.splitlines()) == 1, message
    m = re.match(r":(\d+)\b", message[len(str(path)) :])
    if m is not None:
        assert 1 <= int(m.group(1)) <= data.count(b"\n") + 1, message


@FUZZ
@given(data=trace_bytes())
def test_fuzz_the_trace_reader_parses_or_names_file_and_line(fuzz_file: Path, data: bytes) -> None:
    fuzz_file.write_bytes(data)
    try:
        read_traces(fuzz_file)
    except TraceError as exc:
        assert exc.source == str(fuzz_file)
        assert exc.line is None or exc.line >= 1
        _location(str(exc), fuzz_file, data)


@FUZZ
@given(data=vector_bytes())
def test_fuzz_the_vector_reader_parses_or_names_file_and_line(
    fuzz_file: Path, data: bytes
) -> None:
    fuzz_file.write_bytes(data)
    try:
        vectors = load_vectors(fuzz_file)
    except VectorError as exc:
        _location(str(exc), fuzz_file, data)
    else:
        assert vectors and all(v.expected.paths for v in vectors)


@FUZZ
@given(data=trace_bytes())
def test_fuzz_check_end_to_end(fuzz_file: Path, data: bytes) -> None:
    fuzz_file.write_bytes(data)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["check", str(fuzz_file)])
    if code == 2:
        line = the_line(err.getvalue())
        assert line.startswith(f"toolcancel check: {fuzz_file}")
        _location(line.removeprefix("toolcancel check: "), fuzz_file, data)
    else:
        assert code in (0, 1) and err.getvalue() == ""
        assert out.getvalue().rstrip().endswith(("conforming", "violations", "violation"))


@functools.cache
def _answers(level: str = "trace") -> tuple[Judge, list[tuple[Any, dict[str, Any]]]]:
    """A judge, and valid adapter answers from our own adapter for a few vectors (protocol 1 at
    trace level, 2 at outcome level)."""
    session = Session(ToolRegistry, REVISIONS, level=level)
    protocol = 1 if level == "trace" else 2
    try:
        vectors = shipped_vectors("seed")[:40:8]
        found = []
        for v in vectors:
            message = {"protocol": protocol, "type": "vector", "id": v.id,
                       "revision": v.revision, "scenario": v.scenario.to_data()}  # fmt: skip
            found.append((v, session.answer(json.dumps(message))))
    finally:
        session.close()
    return Judge("seed", level=level), found


@FUZZ
@given(data=st.data(), level=st.sampled_from(["trace", "outcome"]))
def test_fuzz_the_judge_of_adapter_answers_never_crashes(data: st.DataObject, level: str) -> None:
    """What an adapter prints after its hello: a protocol failure or a verdict, never a crash."""
    judge, answers = _answers(level)
    vector, answer = data.draw(st.sampled_from(answers))
    doc = data.draw(mutated(answer))
    line = data.draw(damaged((json.dumps(doc) + "\n").encode()))
    try:
        parsed = parse_answer(line, vector.id, 1 if level == "trace" else 2)
    except AdapterDied as exc:
        assert "\n" not in str(exc)
        return
    if parsed.get("type") == "outcome":
        verdict = judge.judge(vector, parsed)
        assert verdict.passed or verdict.rule, verdict


def test_the_reference_lists_the_limits_the_code_enforces() -> None:
    readme = (ROOT / "docs" / "REFERENCE.md").read_text("utf-8")  # the README links it
    section = readme.split("## Input limits", 1)[1].split("\n## ", 1)[0]
    assert MAX_LINE_BYTES == MAX_VECTOR_LINE_BYTES == 1 << 20
    for fact in ("a line ≤ 1 MiB", f"nesting ≤ {MAX_DEPTH}", "≤ 10,000,000 lines",
                 "≤ 1,000,000 lines", "≤ 4 MiB", f"nesting ≤ {MAX_CONTRACT_DEPTH} levels",
                 "≤ 64 MiB", "86,400 s", "1 to 256"):  # fmt: skip
        assert fact in section, fact
    assert stat.S_ISREG((ROOT / "machine" / "__main__.py").stat().st_mode)  # python -m toolcancel
