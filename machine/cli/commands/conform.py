"""``toolcancel conform``: run the conformance vectors against an implementation's adapter."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ...contract.fileio import check_destination
from ...contract.loader import load_contract
from ...oracle.conform import conform, self_command
from ...oracle.conform.adapter import HELLO_TIMEOUT
from ...oracle.conform.jobs import available
from ...oracle.conform.protocol import LEVELS, PROTOCOL_RULE
from ...oracle.conform.report import NOT_JUDGED, STATE_WORDS, Report
from ...oracle.judge import CHECKED, NONE, OUTCOME
from ...oracle.vectors.turns import RULES as TURN_RULES
from ...selfcheck.models import MODELS
from ..main import Progress, UsageError, clip, revision_option

MAX_TIMEOUT = 86_400
"""Longest ``--timeout`` (a day): a larger one would only hide a hung adapter."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "conform",
        help="run every conformance vector against an implementation through its adapter",
        description="Start the adapter (an argument list, never a shell), send it every vector "
        "of the revision over the JSON Lines protocol of spec/vectors/README.md, check each "
        "answer's trace with the trace checker and compare its result and observations with "
        "the vector. Exit 0 when every vector passes (or deviates as a deviation the adapter's "
        "hello declares), 1 when any fails, 2 on unusable input.",
    )
    p.add_argument(
        "--revision",
        default="seed",
        type=revision_option,
        help="contract revision: seed (default) or revised",
    )
    p.add_argument("--self", dest="self_", action="store_true", help="run our own Python adapter")
    p.add_argument(
        "--retry",
        choices=load_contract().retry_names,
        help="with --self: the retry behaviour our registry runs and declares (D11; default: "
        "the contract's default)",
    )
    p.add_argument(
        "--cancel",
        choices=("signal", "task"),
        default="signal",
        help="with --self: how our caller gives up after entry -- abort its signal (default), or "
        "cancel the task awaiting the call where it waits (answered with "
        "observed.caller_cancelled)",
    )
    p.add_argument(
        "--vectors", metavar="FILE", help="a vectors file (- for stdin; default: the shipped ones)"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds to wait for each answer before the adapter counts as hung (default 10)",
    )
    p.add_argument(
        "--hello-timeout",
        type=float,
        default=HELLO_TIMEOUT,
        metavar="S",
        help="seconds to wait for the adapter's hello at each start (default "
        f"{HELLO_TIMEOUT:g}); --timeout is for answers only",
    )
    p.add_argument(
        "--level",
        choices=LEVELS,
        default="trace",
        help="with --self: run our adapter at this conformance level (default trace); an "
        "--adapter declares its level in its hello",
    )
    p.add_argument(
        "--only",
        nargs="+",
        metavar="RULE|ID",
        help="run only these vectors (ids) and the vectors that exercise these rules",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=available(),
        metavar="N",
        help="run N adapter processes at once, sharing the vectors (default: the CPUs "
        f"available, here {available()}); the report is the same as with --jobs 1",
    )
    p.add_argument(
        "--report",
        metavar="FILE",
        help="write one JSON line per vector (id, verdict, rule, failing step, expected and "
        "observed in brief) to FILE",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument(
        "--adapter",
        nargs=argparse.REMAINDER,
        metavar="CMD",
        help="the adapter command and its arguments; must come last",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress on stderr (shown by default: a bar on a terminal, else a line every "
        "10 s; TOOLCANCEL_PROGRESS=0 in the environment also turns it off)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    load_contract().revision(args.revision)  # an unknown revision: one line, exit 2
    if args.self_ == bool(args.adapter):
        raise UsageError("give exactly one of --self and --adapter CMD [ARGS...]")
    for name in ("timeout", "hello_timeout"):
        value = getattr(args, name)
        option = "--" + name.replace("_", "-")
        if not value > 0:
            raise UsageError(f"{option} must be a positive number of seconds")
        if not value <= MAX_TIMEOUT:
            raise UsageError(f"{option} must be at most {MAX_TIMEOUT:,} seconds")
    if args.retry and not args.self_:
        raise UsageError("--retry is for --self; an adapter declares its retry behaviour itself")
    if args.adapter and args.cancel != "signal":
        raise UsageError("--cancel is for --self; an adapter cancels as its caller does")
    if args.adapter and args.level != "trace":
        raise UsageError("--level is for --self; an adapter declares its level in its hello")
    if not args.jobs >= 1:
        raise UsageError("--jobs must be at least 1")
    if args.report:
        check_destination(args.report)  # refused before the run, not after it
    command = (
        self_command(args.retry, args.level, args.cancel) if args.self_ else list(args.adapter)
    )
    with Progress("conform", "vectors", enabled=not (args.json or args.quiet)) as progress:
        report = conform(
            command,
            args.revision,
            vectors_path=args.vectors,
            timeout=args.timeout,
            hello_timeout=args.hello_timeout,
            only=args.only or (),
            progress=progress.update,
            jobs=args.jobs,
            models=MODELS,
        )
        report.seconds = progress.elapsed()  # the progress line's clock, from the same moment
    if report.strays:  # one line: the adapter's business, but its user should know
        print(
            f"toolcancel conform: note: the adapter started {report.strays} process"
            f"{'es' if report.strays != 1 else ''} that left its session; killed and reaped",
            file=sys.stderr,
        )
    if args.report:
        report.write_report(args.report)
    if args.json:
        print(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        print(table(report))
    return 0 if report.failed == 0 else 1


STATUS = {CHECKED: "checked", OUTCOME: "outcome level only", NONE: "not checked"}


def table(report: Report) -> str:
    d = report.to_json()
    tally = report.by_rule()
    coverage = report.coverage()
    states = report.states()
    lines = [
        f"toolcancel conform — {report.revision} contract, {d['vectors']:,} vectors, "
        f"{report.level} level",
        f"  adapter: {report.implementation} (protocol {report.protocol}, retry {report.retry}"
        f"{', deviations ' + ', '.join(report.declared) if report.declared else ''})",
        f"  {'rule':<9} {'':<38} {'passed':>7} {'failed':>7}  status",
    ]
    unjudged = report.unjudged()
    for rule, (status, why) in coverage.items():
        title = clip(report.titles.get(rule, ""), 38)
        t = tally.get(rule)
        passed, failed = (t.passed, t.failed) if t else (0, 0)
        said = STATE_WORDS[states.get(rule, NOT_JUDGED)] + "; " + STATUS[status]
        said += f" ({why})" if why else ""
        if rule in unjudged:
            said = f"NOT JUDGED: needs {' or '.join(unjudged[rule])} (the hello lacks it)"
        lines.append(f"  {rule:<9} {title:<38} {passed:>7,} {failed:>7,}  {said}")
    rate = d["vectors_per_second"]
    unchecked = len(d["unchecked"])
    rules = sum(1 for r in coverage if r != PROTOCOL_RULE)
    deviated = f", {report.deviated:,} deviate as declared" if report.declared else ""
    lines.append(
        f"  {d['passed']:,} passed, {d['failed']:,} failed{deviated}; {unchecked} of {rules} "
        f"rules not checked  ({d['seconds']:.2f} s, {rate or 0:,} vectors/s, "
        f"{report.jobs} adapter process{'es' if report.jobs != 1 else ''} at once, "
        f"{report.restarts} restart(s))"
    )
    if report.capabilities.declared:
        caps = report.capabilities.to_json()
        has = [k for k, x in caps.items() if x is True]
        lacks = [k for k, x in caps.items() if x is False]
        lines.append(
            f"  capabilities: {', '.join(has) or 'no stage'}; cancel by "
            f"{', '.join(caps['cancel']) or 'nothing'}; lacks {', '.join(lacks) or 'nothing'}"
        )
    if report.skipped_total:
        by = ", ".join(f"{c} {n:,}" for c, n in report.skipped.items())
        lines.append(
            f"  SKIPPED: {report.skipped_total:,} vectors need a capability the hello does not "
            f"declare ({by}; a vector may need several)"
        )
    if unjudged:
        said = "; ".join(
            f"{r} ({', '.join(f'{c} {n:,}' for c, n in caps.items())})"
            for r, caps in unjudged.items()
        )
        lines.append(
            f"  NOT JUDGED for want of a capability: {len(unjudged)} rule"
            f"{'s' if len(unjudged) != 1 else ''}: {said}"
        )
    if not report.turns and not unjudged.keys() & TURN_RULES:
        why = (
            "this run has no turn vectors (--vectors names a file of call vectors)"
            if "turns" in report.seen
            else "the adapter's hello does not declare turns (spec/vectors/README.md: Turns)"
        )
        lines.append(f"  NOT CHECKED: the turn scheduler (R9, R36-R38) -- {why}")
    families = report.families()
    if families:
        lines += ["", f"failures in {len(families)} famil{'y' if len(families) == 1 else 'ies'}:"]
        lines += [f"  {f.line()}" for f in families]
    counts = report.deviation_counts()
    if counts:  # after every undeclared failure: those are the ones to read first
        lines += ["", "declared deviations (neither passed nor failed):"]
        lines += [
            f"  deviates as declared ({names}): {n:,} vector{'s' if n != 1 else ''}"
            for names, n in counts.items()
        ]
    if report.report_path:
        lines += ["", f"every verdict: {report.report_path}"]
    return "\n".join(lines)
