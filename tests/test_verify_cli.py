"""toolcancel verify as users run it: the table, --json, --mutants, bad input."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import mutant, mutants
from toolcancel.contract.loader import load_contract
from toolcancel.oracle.scenario_language import Scenario
from toolcancel.selfcheck.harness import run_scenario
from toolcancel.selfcheck.verifier import check

ROOT = Path(__file__).resolve().parents[1]


def tc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "toolcancel.cli.main", *args], capture_output=True,
                          text=True, cwd=ROOT)


def test_verify_prints_its_summary_table_and_exits_0_on_a_small_bound() -> None:
    proc = tc("verify", "--max-wrappers", "0", "--max-calls", "1", "--no-deep", "--workers", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"bounds +up to 0 around wrapper\(s\) per call, 1 call\(s\) per turn",
                     proc.stdout)  # fmt: skip
    for line in ("configurations", "schedules run", "distinct paths", "turn batches",
                 "transitions covered", "violations"):
        assert line in proc.stdout, line
    assert "deeper" not in proc.stdout  # the bounded space alone (the json test runs the family)
    # coverage is derived from the checks that could have failed: without an around wrapper no
    # next() settles, so the slot check (R23) has nothing to read at this bound
    assert re.search(r"rules exercised +38 of 39", proc.stdout)
    assert "rules never exercised: R23" in proc.stdout
    assert re.search(r"violations +0\n", proc.stdout)


def test_verify_json_has_the_documented_keys() -> None:
    # scripts/test's model check of the revised contract (its step runs the seed): CI's bound, one
    # wrapper and the deeper family, asserting more than an exit status -- every rule reached
    proc = tc("verify", "--max-wrappers", "1", "--json", "--revision", "revised")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    for key in ("configurations", "schedules", "paths", "transitions_covered",
                "transitions_total", "rules_covered", "rules_total", "violations", "seconds"):
        assert key in data, key
    assert data["violations"] == 0 and data["rules_covered"] == data["rules_total"]
    deeper = data["deeper"]  # run whatever the bound: three-wrapper retry stacks, cursor reach
    assert deeper["violations"] == 0 and 0 < deeper["configurations"] < data["configurations"]


@pytest.mark.slow
def test_verify_mutants_kills_every_mutant_and_names_its_own_rule() -> None:
    # one worker: the jobs run in order, so the violation that kills a mutant (and the rule it
    # cites) is the same on every run; two workers race to it (and took 127 s CPU against 120)
    proc = tc("verify", "--mutants", "--max-wrappers", "1", "--workers", "1", "--json")
    data = json.loads(proc.stdout)
    assert proc.returncode == 0, data
    shipped = mutants().MUTANTS
    assert data["killed"] == data["total"] == sum("seed" in m.revisions for m in shipped) == 20
    for row in data["mutants"]:  # ground truth: each mutant declares the rule it breaks
        assert row["killed"] and row["rule"] == row["expected_rule"], row


def test_verify_mutants_fails_a_mutant_killed_under_another_rule_than_it_declares(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # a real mutant (races the body: R27) declared as breaking R28: killed, but under R27, so the
    # run must fail -- a check citing the wrong rule would otherwise pass unnoticed
    from toolcancel.cli.main import main

    shipped, races = mutants(), mutant("races_body")
    wrong = dataclasses.replace(races, rule="R28")
    monkeypatch.setattr(shipped, "MUTANTS", (wrong,))
    argv = ["verify", "--mutants", "--max-wrappers", "0", "--max-calls", "1", "--no-deep",
            "--workers", "1", "--json"]  # fmt: skip
    assert main(argv) == 1
    data = json.loads(capsys.readouterr().out)
    (row,) = data["mutants"]
    assert row["killed"] and row["rule"] == "R27" and not row["as_declared"], row
    assert data["killed_under_another_rule"] == 1
    # the same mutant under the rule it does break passes
    monkeypatch.setattr(shipped, "MUTANTS", (races,))
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["killed_under_another_rule"] == 0


def test_unknown_revision_is_one_line_and_exit_2() -> None:
    proc = tc("verify", "--revision", "tokyo")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "tokyo" in proc.stderr
    assert "Traceback" not in proc.stderr


@functools.cache
def _verify_json(*args: str) -> dict[str, object]:
    """The bounded space alone (the deeper family, the same whatever the bound, left out); each
    run once per test process (each is the whole bounded space: several CPU seconds)."""
    proc = tc("verify", "--max-wrappers", "0", "--no-deep", "--json", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data: dict[str, object] = json.loads(proc.stdout)
    return data


def test_verify_max_calls_bounds_the_turn_batches_only() -> None:
    one = _verify_json("--max-calls", "1", "--workers", "1")
    three = _verify_json("--workers", "1")  # the default, 3: the other test's run
    assert (one["max_calls"], one["turn_batches"], one["turn_schedules"]) == (1, 5, 48)
    assert (three["max_calls"], three["turn_batches"], three["turn_schedules"]) == (3, 155, 3028)
    assert one["configurations"] == three["configurations"]
    assert one["schedules"] == three["schedules"]
    assert one["violations"] == three["violations"] == 0


def test_verify_gives_the_same_tally_on_one_and_two_workers() -> None:
    one = dict(_verify_json("--workers", "1"))
    two = dict(_verify_json("--workers", "2"))
    for data in (one, two):
        data.pop("seconds")
        data.pop("workers")
    assert one == two
    assert one["turn_batches"] == 155 and one["turn_schedules"] == 3028


@pytest.mark.parametrize("value", ["0", "4", "x"])
def test_verify_max_calls_out_of_range_is_one_line_and_exit_2(value: str) -> None:
    proc = tc("verify", "--max-calls", value)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "--max-calls" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "scenario",
    [
        Scenario(cooperative=False, cancel="gate:body"),
        Scenario(cooperative=False, timeout="timer_first"),
        Scenario(cooperative=False, wrappers=("replace_aborting",)),
        Scenario(revision="revised", cooperative=False, cancel="gate:body", timeout="budget"),
    ],
)
def test_the_harness_holds_an_uncooperative_body_a_day_and_sees_a_grace_period(
    scenario: Scenario,
) -> None:
    # Blind spot 1 of issue 14: the harness lets a day of virtual time pass while it holds a
    # body that ignores its aborted signal, so a registry that gives up after 300 s is seen.
    table = load_contract().revision(scenario.revision)
    real = run_scenario(scenario)
    assert real.problems == [] and check(real, table).violations == []
    with mutant("abandons_after_grace").active() as factory:
        broken = run_scenario(scenario, factory)
    found = check(broken, table).violations
    assert found and found[0].rule == "R27", found
    assert "86,400 s" in found[0].explanation


@pytest.mark.slow
@pytest.mark.timeout(300, method="signal")  # raises in a stuck readline: `finally` still reaps
def test_ctrl_c_during_a_verify_with_two_workers_is_one_line_and_status_130() -> None:
    """Ctrl-C reaches the terminal's whole foreground process group: the workers too.  They leave
    it to the parent (toolcancel.selfcheck.workers), which says one line and exits 130."""
    assert interrupted("--workers", "2") == (130, "toolcancel verify: interrupted\n", "")


def interrupted(*options: str) -> tuple[int, str, str]:
    """``toolcancel verify OPTIONS`` (the full bound) given Ctrl-C mid-run, as a terminal gives
    it: SIGINT to its process group.  Its status, stderr and stdout."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolcancel.cli.main", "verify", *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "TOOLCANCEL_PROGRESS": "1"},  # the suite turns it off
        start_new_session=True,  # its own process group, as a terminal's foreground job
        # as a terminal starts it, even when the suite runs as a background job (SIGINT ignored)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        # the gate: the first progress line (two seconds in), written as the workers run jobs;
        # the full bound takes minutes, so the run is still going when the signal arrives
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert first.startswith("toolcancel verify: ") and "configurations" in first, first
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)  # a bound that fails the test, not a wait
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, err, out


def test_the_self_checks_workers_ignore_sigint_from_their_first_instruction() -> None:
    """What makes the one line above certain rather than likely: whenever Ctrl-C lands, a worker
    (verify's, the spec mutants', the vectors' generator's) takes no KeyboardInterrupt."""
    from toolcancel.selfcheck.workers import pool

    parent = signal.getsignal(signal.SIGINT)
    with pool(2) as workers:
        seen = workers.map(_sigint_disposition, range(4), chunksize=1)
    assert seen == [int(signal.SIG_IGN)] * 4
    assert signal.getsignal(signal.SIGINT) is parent  # the parent's own is left as it was


def _sigint_disposition(_: int) -> int:
    return int(signal.getsignal(signal.SIGINT))
