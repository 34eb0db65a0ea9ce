"""``toolcancel explain``: a call's path step by step, with the rules and the deciding row."""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from ..cli import CliError
from ..contract import load_contract
from ..explain import Explanation, shipped_vectors
from ..scenario import Scenario, ScenarioError, run_scenario
from ..trace import MAX_DEPTH, json_depth, json_error_text, value_error_text

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
        "JSONL file (use --call to pick one call). Exit 2 on unusable input.",
    )
    p.add_argument("target", help="vector id, scenario .json file, or trace .jsonl file")
    p.add_argument("--call", help="the call id to explain, for a trace with several calls")
    p.add_argument("--svg", type=Path, metavar="FILE",
                   help="also draw the contract diagram with this path highlighted, as SVG")
    p.add_argument("--mermaid", type=Path, metavar="FILE",
                   help="also write the highlighted diagram as Mermaid text")
    p.add_argument(
        "--retry",
        choices=load_contract().retry_names,
        help="for a vector id or scenario: the retry behaviour of next() to run it under (D11; "
        "default: the contract's default); a trace says its own on call_entry",
    )
    p.add_argument("--json", action="store_true", help="print the explanation as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    for out in (args.svg, args.mermaid):
        if out is not None:
            _check_destination(out)  # before any work: a bad path is one line, nothing written
    header, explanation, result = _resolve(args)
    if args.json:
        data = explanation.to_data()
        data["target"] = header
        data["result"] = json.loads(result) if result else None
        print(json.dumps(data, indent=2))
    else:
        print(header)
        print("\n".join(explanation.lines()))
        if result:
            print(f"Result: {result}")
    if args.svg or args.mermaid:
        from ..diagrams import draw

        drawing = draw(explanation.table, explanation.path)
        if args.svg:
            _write(args.svg, drawing.svg())
        if args.mermaid:
            _write(args.mermaid, drawing.mermaid)
    return 0


def _resolve(args: argparse.Namespace) -> tuple[str, Explanation, str | None]:
    path = Path(args.target)
    if path.exists():
        return _from_file(path, args.call, args.retry)
    match = _VECTOR_ID.match(args.target)
    if match is None:
        raise CliError(f"{args.target}: no such file, and not a vector id like seed-00042")
    revision = match["revision"]
    load_contract().revision(revision)
    for vector in shipped_vectors(revision):
        if vector.get("id") == args.target:
            return _from_scenario(vector["scenario"], f"vector {args.target}", args.retry)
    raise CliError(f"{args.target}: no such vector in the shipped {revision} vectors")


def _from_scenario(
    data: Any, where: str, retry: str | None = None
) -> tuple[str, Explanation, str | None]:
    try:
        scenario = Scenario.from_data(data, f"{where}: scenario")
    except ScenarioError as exc:
        raise CliError(str(exc)) from None
    obs = run_scenario(scenario, retry=retry)
    table = load_contract().revision(scenario.revision)
    result = obs.result.to_json() if obs.result is not None else None
    under = f" (retry: {retry})" if retry else ""
    return f"{where}: {scenario.as_code()}{under}", Explanation(table, obs.path), result


def _from_file(
    path: Path, call: str | None, retry: str | None = None
) -> tuple[str, Explanation, str | None]:
    if path.is_dir():
        raise CliError(f"{path}: is a directory, not a scenario or trace file")
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_INPUT + 1)
    except OSError as exc:
        raise CliError(f"{path}: cannot read ({exc.strerror})") from None
    if len(raw) > MAX_INPUT:
        raise CliError(f"{path}: larger than {MAX_INPUT:,} bytes; explain one scenario or call")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise CliError(
            f"{path}:{line}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {column})"
        ) from None
    if not text.strip():
        raise CliError(f"{path}: empty file")
    first = text.lstrip().splitlines()[0]
    try:
        head = json.loads(first, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        head = None
    if isinstance(head, dict) and "trace" in head:
        return _from_trace(path, call)
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise CliError(f"{path}:{exc.lineno}: not JSON ({json_error_text(exc)})") from None
    except ValueError as exc:  # NaN, Infinity, an integer of more than 4,300 digits
        raise CliError(f"{path}: not JSON ({value_error_text(exc)})") from None
    except RecursionError:
        raise CliError(f"{path}: JSON nested deeper than {MAX_DEPTH} levels") from None
    if json_depth(data) > MAX_DEPTH:
        raise CliError(f"{path}: JSON nested deeper than {MAX_DEPTH} levels")
    if isinstance(data, dict) and "scenario" in data:
        return _from_scenario(data["scenario"], f"{path}", retry)
    return _from_scenario(data, f"{path}", retry)


def _from_trace(path: Path, call: str | None) -> tuple[str, Explanation, str | None]:
    from ..explain import replay_trace
    from ..trace import read_traces  # the trace reader names the file and line of bad input

    calls = read_traces(path)
    if not calls:
        raise CliError(f"{path}: the trace has no call")
    if call is None:
        if len(calls) > 1:
            raise CliError(f"{path}: the trace has {len(calls)} calls; pick one with --call "
                           f"({', '.join(list(calls)[:5])}...)")
        call = next(iter(calls))
    if call not in calls:
        raise CliError(f"{path}: no call {call!r} in the trace")
    try:
        table, steps, result = replay_trace(calls[call], path)
    except RecursionError:
        raise CliError(f"{path}: call {call!r} is too long to explain step by step") from None
    return f"{path}, call {call}", Explanation(table, tuple(steps)), result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _check_destination(path: Path) -> None:
    """Refuse an output path that cannot be written, before anything is computed."""
    if path.is_dir():
        raise CliError(f"{path}: is a directory; give a file name")
    if not path.resolve().parent.is_dir():
        raise CliError(f"{path}: no such directory {path.resolve().parent}")


def _write(path: Path, text: str) -> None:
    """Write atomically (a temporary file in the same directory, then ``os.replace``): never a
    half-written file, and the temporary file is removed on failure."""
    _check_destination(path)
    target = path.resolve()
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise CliError(f"{path}: cannot write ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise CliError(f"{path}: cannot write ({exc.strerror})") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

