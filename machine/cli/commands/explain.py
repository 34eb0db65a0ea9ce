"""``toolcancel explain``: a call's path step by step, with the rules and the deciding row."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...contract.fileio import (
    STRICT,
    check_destination,
    decode_json,
    is_stream,
    read_bytes,
    show,
    source_name,
    utf8_text,
    write_text,
)
from ...contract.loader import load_contract
from ...contract.results import canonical_json
from ...contract.trace import MAX_DEPTH
from ...oracle.scenario_language import Scenario, ScenarioError
from ...selfcheck.harness import run_scenario
from ...teaching.explain import Explanation, shipped_vectors
from ...teaching.explain import render_verdict as render
from ..main import CliError, UsageError, complain

if TYPE_CHECKING:
    from ...oracle.judge.checker import Verdict

_VECTOR_ID = re.compile(r"^(?P<revision>[a-z]+)-\d+$")
MAX_INPUT = 1 << 20
"""Largest scenario or trace file ``explain`` reads (1 MiB: one scenario, or a few calls)."""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "explain",
        help="explain a call step by step: a vector id, a scenario file, or a recorded trace",
        description="Print a call's path: every state, event and transition with the rules it "
        "applies (id and one line of text), then the outcome and the precedence row that "
        "decided it. TARGET is a vector id (e.g. seed-00042), a scenario JSON file, or a trace "
        "JSONL file (use --call to pick one call). A recorded call is also checked: one that "
        "does not conform gets the first violation exactly as `toolcancel check` shows it. "
        "Exit 0 explained, 1 the call violates the contract, 2 unusable input.",
    )
    p.add_argument(
        "target", help="vector id, scenario .json file, or trace .jsonl file (- for stdin)"
    )
    p.add_argument("--call", help="the call id to explain, for a trace with several calls")
    p.add_argument("--svg", metavar="FILE",
                   help="also draw the contract diagram with this path highlighted, as SVG "
                   "(needs Graphviz's dot; - for stdout)")
    p.add_argument("--mermaid", metavar="FILE",
                   help="also write the highlighted diagram as Mermaid text (- for stdout)")
    p.add_argument(
        "--retry",
        choices=load_contract().retry_names,
        help="for a vector id or scenario: the retry behaviour of next() to run it under (D11; "
        "default: the contract's default); a trace says its own on call_entry",
    )
    p.add_argument("--json", action="store_true", help="print the explanation as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if is_stream(args.svg) and is_stream(args.mermaid):
        raise UsageError("only one of --svg and --mermaid can be - (stdout)")
    for out in (args.svg, args.mermaid):
        if out is not None:
            check_destination(out)  # before any work: a bad path is one line, nothing written
    if args.svg is not None:
        from ...teaching.diagrams import GraphvizMissing, have_dot

        if not have_dot():
            raise GraphvizMissing()
    header, explanation, result, verdict = _resolve(args)
    # With a drawing on stdout, the explanation goes to stderr so stdout holds only the drawing.
    report = sys.stderr if is_stream(args.svg) or is_stream(args.mermaid) else sys.stdout
    violation = verdict is not None and not verdict.conforming
    if args.json:
        data: dict[str, Any] = (
            explanation.to_data() if explanation is not None else {"steps": None}
        )
        data["target"] = header
        data["result"] = json.loads(result) if result else None
        data["verdict"] = verdict.to_json() if verdict is not None else None
        data["cooperative_stop"] = (
            explanation is not None and explanation.cooperative_stop(result)
        )
        print(json.dumps(data, indent=2), file=report)
    else:
        print(header, file=report)
        if violation:  # what matters most comes first; the steps show how the call got there
            assert verdict is not None
            print("This call does NOT conform to the contract; `toolcancel check` reports:",
                  file=report)  # fmt: skip
            print(render(verdict), file=report)
            if explanation is not None:
                print("\nThe call's events, step by step:", file=report)
        if explanation is not None:
            print("\n".join(explanation.lines(result=result)), file=report)
        if result:
            print(f"Result: {result}", file=report)
    if args.svg or args.mermaid:
        if explanation is None:
            complain(
                "explain",
                "nothing drawn: the call's events are not a path of the contract",
            )
        else:
            from ...teaching.diagrams import draw

            drawing = draw(explanation.table, explanation.path)
            if args.svg:
                write_text(args.svg, drawing.svg())
            if args.mermaid:
                write_text(args.mermaid, drawing.mermaid)
    return 1 if violation else 0


Resolved = tuple[str, "Explanation | None", "str | None", "Verdict | None"]
"""Header, the step-by-step explanation (None: the events are no path of the contract), the
result, and the checker's verdict (for a recorded trace; None otherwise)."""


def _resolve(args: argparse.Namespace) -> Resolved:
    path = Path(args.target)
    if is_stream(args.target) or path.exists():
        return _from_file(args.target, args.call, args.retry)
    match = _VECTOR_ID.match(args.target)
    if match is None:
        raise CliError(f"{args.target}: no such file, and not a vector id like seed-00042")
    revision = match["revision"]
    load_contract().revision(revision)
    for vector in shipped_vectors(revision):
        if vector.get("id") == args.target:
            return _from_scenario(vector["scenario"], f"vector {args.target}", args.retry)
    raise CliError(f"{args.target}: no such vector in the shipped {revision} vectors")


def _from_scenario(data: Any, where: str, retry: str | None = None) -> Resolved:
    try:
        scenario = Scenario.from_data(data, f"{where}: scenario")
    except ScenarioError as exc:
        raise CliError(str(exc)) from None
    obs = run_scenario(scenario, retry=retry)
    table = load_contract().revision(scenario.revision)
    result = obs.result.to_json() if obs.result is not None else None
    under = f" (retry: {retry})" if retry else ""
    header = f"{where}: {scenario.as_code()}{under}"
    return header, Explanation(table, obs.path), result, None


def _from_file(target: str, call: str | None, retry: str | None = None) -> Resolved:
    name = source_name(target)
    raw = read_bytes(target, MAX_INPUT, "scenario or call: explain one scenario or call")
    text = utf8_text(raw, name)
    if not text.strip():
        raise CliError(f"{name}: empty file")
    first = text.lstrip().splitlines()[0]
    try:
        head = STRICT.decode(first)
    except (ValueError, RecursionError):
        head = None
    if isinstance(head, dict) and "trace" in head:
        return _from_trace(raw, name, call)
    data = decode_json(text, name, max_depth=MAX_DEPTH)
    if isinstance(data, dict) and "scenario" in data:
        return _from_scenario(data["scenario"], name, retry)
    return _from_scenario(data, name, retry)


def _from_trace(raw: bytes, name: str, call: str | None) -> Resolved:
    from ...contract.trace_reader import (
        read_trace_bytes,  # the trace reader names the file and line of bad input
    )
    from ...oracle.judge.checker import Checker
    from ...teaching.explain import ReplayError, replay_trace

    calls = read_trace_bytes(raw, name)
    if not calls:
        raise CliError(f"{name}: the trace has no call")
    if call is None:
        if len(calls) > 1:
            more = ", ..." if len(calls) > 5 else ""
            raise CliError(f"{name}: the trace has {len(calls)} calls; pick one with --call "
                           f"({', '.join(show(c, 30) for c in list(calls)[:5])}{more})")
        call = next(iter(calls))
    if call not in calls:
        raise CliError(f"{name}: no call {show(call)} in the trace")
    events = calls[call]
    try:
        table, steps, result = replay_trace(events, name)
    except RecursionError:
        raise CliError(f"{name}: call {show(call)} is too long to explain step by step") from None
    except ReplayError:
        if not _known_revision(events):
            raise
        table, steps, result = None, None, None  # not a path of the contract: the verdict says why
    revision = table.name if table is not None else events[0].data["revision"]
    verdict = Checker(revision).check_traces({call: events}, name)[0]
    if steps is None:
        if verdict.conforming:  # cannot happen: the checker accepts only paths of the contract
            raise CliError(f"{name}: call {show(call)} cannot be replayed")
        result = next((canonical_json(e.data["result"]) for e in events if e.event == "result"),
                      None)
        return f"{name}, call {call}", None, result, verdict
    assert table is not None
    return f"{name}, call {call}", Explanation(table, tuple(steps)), result, verdict


def _known_revision(events: Any) -> bool:
    return bool(events) and events[0].data.get("revision") in load_contract().revisions
