"""``toolcancel where``: every place that concerns a rule, a transition or an outcome."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ...contract.loader import load_contract
from ...teaching.where import WhereError, where
from ..main import CliError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "where",
        help="everything that concerns a rule, transition or outcome (rows, checks, tests, ...)",
        description="Print the precedence rows, transitions, judge checks, mutants, spec "
        "mutants, deviations and shipped vectors that concern SUBJECT, read from the code and "
        "contract.toml; in a source checkout also the tests and prose lines that name it.",
        epilog="SUBJECT: a rule id (R28), a transition id (late_success_aborted) or an outcome "
        "(tool_timeout). Exit codes: 0 found, 2 unknown subject.",
    )
    p.add_argument("subject", help="R28, a transition id or an outcome name")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root = Path()
    checkout = (root / "spec" / "contract.toml").is_file() and (root / "tests").is_dir()
    try:
        sections = where(load_contract(), args.subject, root if checkout else None)
    except WhereError as e:
        raise CliError(str(e)) from None
    for section in sections:
        print(f"== {section.title}" + ("" if section.lines else ": none"))
        for line in section.lines:
            print(f"   {line}")
    if not checkout:
        print("(not in a source checkout: tests and prose not searched)")
    return 0
