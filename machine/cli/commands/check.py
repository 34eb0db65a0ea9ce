"""``toolcancel check``: the verdict of the contract on every call of recorded traces.

Exit codes (documented in ``--help``): 0 every call conforms, 1 some call violates the contract,
2 unusable input (a missing or unreadable file, a malformed or truncated trace, an unknown
revision).  Unusable input wins over violations, so a script never mistakes a trace it could not
read for a checked one.  Each unusable file gets one line on stderr naming the file and line;
the other files are still checked and reported.
"""

from __future__ import annotations

import argparse
import functools
import json
import textwrap
from typing import Any

from ...contract.loader import load_contract
from ...contract.trace_reader import TraceError
from ...oracle.judge.checker import Checker, RecordedRevisionChecker, Verdict
from ...teaching.explain import render_verdict as render
from ..main import Progress, UsageError, complain, revision_option

EPILOG = """\
exit status:
  0  every call of every trace conforms
  1  at least one call violates the contract (the first violation of each call is reported)
  2  unusable input: a file that cannot be read, a line that is not a valid trace line, a file
     cut in the middle of a line, or an unknown revision (one line on stderr per problem)

--json prints one JSON object per call and line: file, call_id, verdict ("conforming" or
"violation") and, for a violation, rule, title, event_index (0-based within the call), line
(1-based in the file), allowed, seen and explanation.
"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "check",
        help="check recorded traces against the contract, call by call",
        description=textwrap.fill(  # the formatter keeps the epilog's layout, so wrap this here
            "Replay each call of each trace (JSON Lines, spec/trace.schema.json) through the "
            "pure machine, accepting every behaviour the contract allows, and report per call: "
            "conforming, or the first violation with its rule id, where it is, what the "
            "contract allowed there, what the trace shows, and why; then one summary line.",
            79,
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "traces", nargs="+", metavar="TRACE", help="trace files (.jsonl; - for stdin)"
    )
    p.add_argument(
        "--revision",
        default=None,
        type=revision_option,
        help="check every call against this contract revision (seed or revised); by default "
        "each call is checked against the revision its call_entry line records",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per call (JSON Lines)")
    p.add_argument(
        "-s",
        "--summary",
        action="store_true",
        help="list only the violations, not a line per conforming call, then the summary line "
        "(for a trace of thousands of calls); with --json, only the violations' objects",
    )
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress on stderr (shown for a trace that takes more than 2 s: a bar on a "
        "terminal, else a line every 10 s; TOOLCANCEL_PROGRESS=0 also turns it off)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.revision is None:
        checker: Checker = RecordedRevisionChecker()
    else:
        load_contract().revision(args.revision)  # an unknown revision: one clear line, exit 2
        checker = Checker(args.revision)
    if args.traces.count("-") > 1:
        raise UsageError("stdin (-) can be read only once")
    unusable = 0
    verdicts: list[Verdict] = []
    several = len(args.traces) > 1
    progress = Progress("check", "MiB", enabled=not args.quiet)
    for path in args.traces:
        try:
            found = checker.check_file(path, functools.partial(_in_mib, progress, path))
        except TraceError as exc:
            progress.close()
            unusable += 1
            complain("check", str(exc))
            continue
        progress.close()
        verdicts.extend(found)
        for v in found:
            if args.summary and v.conforming:
                continue
            if args.json:
                print(json.dumps(v.to_json(), ensure_ascii=False))
            else:
                print(render(v, several))
    if not args.json and verdicts:
        bad = sum(not v.conforming for v in verdicts)
        calls = "call" if len(verdicts) == 1 else "calls"
        violations = "violation" if bad == 1 else "violations"
        print(f"{len(verdicts)} {calls}: {len(verdicts) - bad} conforming, {bad} {violations}")
    if unusable:
        return 2
    return 0 if all(v.conforming for v in verdicts) else 1


def _in_mib(progress: Progress, path: str, done: int, total: int) -> None:
    progress.update(done >> 20, total >> 20, path)
