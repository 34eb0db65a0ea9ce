"""``toolcancel check``: verdicts for humans and machines, and exit codes scripts can trust.

Why these tests: the command is what a reviewer and a CI job see.  A conforming trace gives one
line per call and exit 0; a violation gives the rule, where, what was allowed, what was seen and a
sentence to paste, and exit 1; anything unusable gives exactly one line on stderr naming the file
(and line) and exit 2 -- never a traceback, whatever the bytes.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from toolcancel.cli.main import main
from toolcancel.contract.trace import TraceRecorder, encode_line
from toolcancel.oracle.scenario_language import Scenario
from toolcancel.runtime.registry import ToolRegistry
from toolcancel.runtime.virtual_time import VirtualClock, run
from toolcancel.selfcheck.harness import Harness


def record(scenario: Scenario) -> list[dict[str, Any]]:
    recorder = TraceRecorder()
    clock = VirtualClock()
    run(
        Harness(scenario, functools.partial(ToolRegistry, trace=recorder), clock).run(), clock=clock
    )
    return recorder.lines


def write(path: Path, lines: list[dict[str, Any]], call: str = "c1") -> Path:
    path.write_text("".join(encode_line({**ln, "call": call}) + "\n" for ln in lines), "utf-8")
    return path


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(["check", *args])
    except SystemExit as exc:  # a usage error, said by argparse
        code = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    return code, out, err


def denial_instead_of_aborted() -> list[dict[str, Any]]:
    lines = record(Scenario(pre="deny", cancel="gate:pre"))
    for ln in lines:
        if ln["event"] == "result":
            ln["result"] = {
                "content": [{"type": "text", "text": "Error: policy refused the call"}],
                "isError": True,
            }
    return lines


def test_a_conforming_trace_prints_one_line_per_call_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ok.jsonl"
    text = "".join(
        encode_line({**ln, "call": call}) + "\n"
        for call, scenario in (("a", Scenario()), ("b", Scenario(cancel="gate:body")))
        for ln in record(scenario)
    )
    path.write_text(text, "utf-8")
    code, out, err = check(capsys, str(path))
    assert (code, err) == (0, "")
    assert out == "a: conforming\nb: conforming\n2 calls: 2 conforming, 0 violations\n"


def test_summary_lists_only_violations_and_the_summary_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trace of 20,000 calls must not print 20,000 lines to say they conform."""
    ok = record(Scenario())
    text = "".join(encode_line({**ln, "call": f"c{n}"}) + "\n" for n in range(50) for ln in ok)
    text += "".join(encode_line({**ln, "call": "bad"}) + "\n" for ln in denial_instead_of_aborted())
    path = tmp_path / "many.jsonl"
    path.write_text(text, "utf-8")
    code, out, err = check(capsys, "--summary", str(path))
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[0] == "bad: violation of R13 (Checkpoint C1)"
    assert lines[-1] == "51 calls: 50 conforming, 1 violation"
    assert not any("conforming" in line for line in lines[:-1])
    code, out, _ = check(capsys, "-s", "--json", str(path))
    assert code == 1 and [json.loads(x)["call_id"] for x in out.splitlines()] == ["bad"]


@pytest.mark.rules("R13")
def test_a_violation_prints_rule_place_allowed_seen_and_why_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "bad.jsonl", denial_instead_of_aborted())
    code, out, err = check(capsys, str(path))
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[0] == "c1: violation of R13 (Checkpoint C1)"
    assert lines[1] == "  at event 8 of the call, line 9"
    assert lines[2] == "  allowed there: result of outcome aborted (an error with code ABORTED)"
    assert lines[3] == "  seen:          result: an error ('Error: policy refused the call')"
    assert "decided at pre_deny" in " ".join(x.strip() for x in lines[4:-1])
    assert lines[-1] == "1 call: 0 conforming, 1 violation"


def test_json_prints_one_object_per_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path / "bad.jsonl", denial_instead_of_aborted())
    good = write(tmp_path / "good.jsonl", record(Scenario(revision="seed")), call="g")
    code, out, _ = check(capsys, "--json", str(bad), str(good))
    assert code == 1
    rows = [json.loads(x) for x in out.splitlines()]
    assert rows[1] == {"call_id": "g", "verdict": "conforming", "file": str(good)}
    assert {k: rows[0][k] for k in ("call_id", "verdict", "rule", "event_index", "line")} == {
        "call_id": "c1",
        "verdict": "violation",
        "rule": "R13",
        "event_index": 8,
        "line": 9,
    }
    assert rows[0]["explanation"].startswith("The contract's outcome for this call is aborted")


def test_several_files_label_calls_with_their_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = write(tmp_path / "one.jsonl", record(Scenario()))
    two = write(tmp_path / "two.jsonl", record(Scenario()))
    code, out, _ = check(capsys, str(one), str(two))
    assert code == 0
    assert out.splitlines()[:2] == [f"{one}:c1: conforming", f"{two}:c1: conforming"]


def test_the_revision_option_selects_the_contract(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "r.jsonl", record(Scenario(revision="revised", cancel="gate:pre")))
    assert check(capsys, "--revision", "revised", str(path))[0] == 0
    assert check(capsys, str(path))[0] == 0  # by default, the revision the call_entry records
    code, out, err = check(capsys, "--revision", "seed", str(path))
    assert (code, out) == (2, "")
    assert err == (
        f"toolcancel check: {path}:1: call 'c1' was recorded under the 'revised' contract, but "
        "this check is against 'seed'; run with --revision revised\n"
    )
    code, _, err = check(capsys, "--revision", "v9", str(path))
    assert code == 2 and err.count("\n") == 1 and "unknown contract revision 'v9'" in err
    assert err.endswith("(see toolcancel check --help)\n")  # a usage error: the hint to --help
    tokyo = tmp_path / "tokyo.jsonl"
    tokyo.write_text(path.read_text("utf-8").replace('"revised"', '"tokyo"'), "utf-8")
    code, _, err = check(capsys, str(tokyo))
    assert code == 2 and err == (
        f"toolcancel check: {tokyo}:1: unknown contract revision 'tokyo' in call_entry; "
        "choose one of seed, revised\n"
    )


def test_a_trace_on_stdin_is_checked(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", record(Scenario(cancel="gate:body")))
    proc = subprocess.run(
        [sys.executable, "-m", "toolcancel", "check", "-"],
        input=path.read_text("utf-8"), capture_output=True, text=True, check=False,
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == "c1: conforming\n1 call: 1 conforming, 0 violations\n"


def test_a_call_with_no_result_is_a_violation_not_unusable_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = record(Scenario())
    path = write(tmp_path / "cut.jsonl", lines[: [ln["event"] for ln in lines].index("publish")])
    code, out, err = check(capsys, str(path))
    assert (code, err) == (1, "")
    assert out.startswith("c1: violation of R31 (Exactly-once notification)\n")
    assert "never published a result" in out


ENTRY = encode_line(record(Scenario())[0])

BAD_INPUT = {
    "empty file": (b"", ": the file holds no trace lines"),
    "binary garbage": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xd8", ":1: not UTF-8 text"),
    "invalid JSON": (f"{ENTRY}\n{{oops\n".encode(), ":2: not valid JSON"),
    "non-object line": (f"{ENTRY}\n[1]\n".encode(), ":2: expected a JSON object, got an array"),
    "unknown event": (
        f'{ENTRY}\n{{"trace":1,"call":"c1","event":"teleport"}}\n'.encode(),
        ":2: unknown event 'teleport'",
    ),
    "wrong field type": (
        f'{ENTRY}\n{{"trace":1,"call":"c1","event":"publish","serializable":1}}\n'.encode(),
        ":2: field 'serializable' of publish must be a boolean, got a number",
    ),
    "version 2": (
        b'{"trace":2,"call":"c1","event":"call_entry"}\n',
        ":1: trace format version 2 is not supported",
    ),
    "truncated final line": (
        f'{ENTRY}\n{{"trace":1,"call":"c1","event":"args_va'.encode(),
        ":2: the file ends in the middle of this line (truncated)",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_unusable_input_is_one_line_on_stderr_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    content, message = BAD_INPUT[case]
    path = tmp_path / "t.jsonl"
    path.write_bytes(content)
    code, out, err = check(capsys, str(path))
    assert (code, out) == (2, "")
    assert err.startswith(f"toolcancel check: {path}{message}"), err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_missing_files_and_directories_are_unusable_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.jsonl"
    code, _, err = check(capsys, str(missing))
    assert code == 2
    assert (
        err == f"toolcancel check: {missing}: cannot read (No such file or directory)\n"
    )
    code, _, err = check(capsys, str(tmp_path))
    assert code == 2
    assert err == f"toolcancel check: {tmp_path}: is a directory, not a file\n"


def test_unusable_input_wins_over_violations_and_the_other_files_are_still_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path / "bad.jsonl", denial_instead_of_aborted())
    missing = tmp_path / "missing.jsonl"
    code, out, err = check(capsys, str(bad), str(missing))
    assert code == 2
    assert err.count("\n") == 1 and str(missing) in err
    assert f"{bad}:c1: violation of R13" in out and out.endswith("0 conforming, 1 violation\n")


def test_help_documents_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["check", "--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0
    for code in ("0  every call", "1  at least one call", "2  unusable input"):
        assert code in out


@pytest.mark.slow
def test_the_installed_command_never_prints_a_traceback(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(bytes(range(256)) * 64)
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"trace":1,"call":"c","event":"call_entry","x_":' + "[" * 50_000 + "\n")
    for path in (garbage, deep, tmp_path):
        done = subprocess.run(
            [sys.executable, "-m", "toolcancel.cli.main", "check", str(path)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert done.stdout == ""
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        assert done.stderr.startswith(f"toolcancel check: {path}")
