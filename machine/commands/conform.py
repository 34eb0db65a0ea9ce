"""``toolcancel conform``: run the conformance vectors against an implementation's adapter."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..cli import Progress, UsageError, clip
from ..conform import PROTOCOL_RULE, Report, conform, self_command
from ..contract import load_contract

MAX_TIMEOUT = 86_400
"""Longest ``--timeout`` (a day): a larger one would only hide a hung adapter."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "conform",
        help="run every conformance vector against an implementation through its adapter",
        description="Start the adapter (an argument list, never a shell), send it every vector "
        "of the revision over the JSON Lines protocol of spec/vectors/README.md, check each "
        "answer's trace with the trace checker and compare its result and observations with "
        "the vector. Exit 0 when every vector passes, 1 when any fails, 2 on unusable input.",
    )
    p.add_argument(
        "--revision", default="seed", help="contract revision: seed (default) or revised"
    )
    p.add_argument("--self", dest="self_", action="store_true", help="run our own Python adapter")
    p.add_argument(
        "--retry",
        choices=load_contract().retry_names,
        help="with --self: the retry behaviour our registry runs and declares (D11; default: "
        "the contract's default)",
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
    if not args.timeout > 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if not args.timeout <= MAX_TIMEOUT:
        raise UsageError(f"--timeout must be at most {MAX_TIMEOUT:,} seconds")
    if args.retry and not args.self_:
        raise UsageError("--retry is for --self; an adapter declares its retry behaviour itself")
    command = self_command(args.retry) if args.self_ else list(args.adapter)
    with Progress("conform", "vectors", enabled=not (args.json or args.quiet)) as progress:
        report = conform(
            command,
            args.revision,
            vectors_path=args.vectors,
            timeout=args.timeout,
            progress=progress.update,
        )
    if args.json:
        print(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        print(table(report))
    return 0 if report.failed == 0 else 1


def table(report: Report) -> str:
    d = report.to_json()
    lines = [
        f"toolcancel conform — {report.revision} contract, {d['vectors']:,} vectors",
        f"  adapter: {report.implementation} (declares retry {report.retry})",
        f"  {'rule':<9} {'':<38} {'passed':>7} {'failed':>7}  first failing vector",
    ]
    for rule, t in report.by_rule().items():
        title = clip(report.titles.get(rule, ""), 38)
        lines.append(
            f"  {rule:<9} {title:<38} {t.passed:>7,} {t.failed:>7,}  {t.first_failure or '-'}"
        )
    rate = d["vectors_per_second"]
    lines.append(
        f"  {d['passed']:,} passed, {d['failed']:,} failed"
        f"  ({d['seconds']:.2f} s, {rate or 0:,} vectors/s, {report.restarts} restart(s))"
    )
    failures = [j for j in report.judgements if not j.passed]
    if failures:
        lines += ["", "first failure per rule:"]
        seen: set[str] = set()
        for j in failures:
            rule = j.rule or PROTOCOL_RULE
            if rule in seen:
                continue
            seen.add(rule)
            lines.append(f"  [{rule}] {j.explanation}")
    return "\n".join(lines)
