"""``toolcancel verify``: the exhaustive bounded model check of the real registry."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ...contract.loader import load_contract
from ...selfcheck import cluster
from ...selfcheck.space import MAX_CALLS, MAX_WRAPPERS
from ...selfcheck.verifier import Report, verify
from ..main import MAX_WORKERS, CliError, Progress, UsageError, default_workers, revision_option


def register(sub: Any) -> None:
    p = sub.add_parser(
        "verify",
        help="check every bounded configuration and cancellation point against the contract",
        description="Enumerate every configuration within bounds, cross it with every "
        "cancellation point, run each schedule against the real asyncio registry and check "
        "it against the pure machine and every rule. Exit 1 on any violation.",
    )
    p.add_argument(
        "--revision",
        default=None,
        type=revision_option,
        help="contract revision: seed (default) or revised",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument(
        "--workers",
        type=int,
        default=default_workers(),
        help=f"worker processes (default: the CPUs available, here {default_workers()})",
    )
    p.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="run the schedules on the Dask distributed cluster whose scheduler is at ADDRESS "
        "(e.g. tcp://10.0.0.5:8786; its workers need this toolcancel installed, with the "
        "cluster extra) instead of --workers local processes; the results are the same",
    )
    p.add_argument(
        "--max-wrappers",
        type=int,
        default=None,
        choices=range(0, 4),
        metavar="N",
        help=f"bound on around wrappers per call (0-3, default {MAX_WRAPPERS}; "
        "0 with --spec-mutants)",
    )
    p.add_argument(
        "--max-calls",
        type=int,
        default=MAX_CALLS,
        choices=range(1, 4),
        metavar="N",
        help=f"bound on concurrent model calls per turn batch (1-3, default {MAX_CALLS})",
    )
    p.add_argument(
        "--no-deep",
        dest="deep",
        action="store_false",
        help="leave out the deeper family run after the bounded space (three-wrapper retry "
        "stacks under each retry behaviour, and what only a cursor retry reaches past a "
        "short-circuit): the bounded space alone",
    )
    p.add_argument(
        "--mutants",
        action="store_true",
        help="instead, check that every deliberately broken registry of "
        "machine/selfcheck/mutants.py is caught (run from a source checkout)",
    )
    p.add_argument(
        "--spec-mutants",
        action="store_true",
        help="instead, perturb the contract's transition table one row at a time and report "
        "every perturbation no table-independent check notices (both revisions unless "
        "--revision is given; default bound --max-wrappers 0)",
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
    load_contract().revision(args.revision)  # an unknown revision is one clear line, exit 2
    revisions = [args.revision] if args.revision else ["seed", "revised"]
    if args.revision is None:
        args.revision = "seed"
    args.revisions = revisions
    if args.max_wrappers is None:
        args.max_wrappers = 0 if args.spec_mutants else MAX_WRAPPERS
    if args.workers < 1:
        raise UsageError("--workers must be at least 1")
    if args.workers > MAX_WORKERS:
        raise UsageError(f"--workers must be at most {MAX_WORKERS}")
    if args.cluster is not None and (args.mutants or args.spec_mutants):
        raise UsageError("--cluster runs the model check itself, not --mutants or --spec-mutants")
    if args.mutants:
        return _mutants(args)
    if args.spec_mutants:
        return _spec_mutants(args)
    if args.cluster is not None:
        cluster.quiet()
    with Progress("verify", "configurations", enabled=not (args.json or args.quiet)) as progress:
        report = verify(
            args.revision,
            workers=args.workers,
            max_wrappers=args.max_wrappers,
            max_calls=args.max_calls,
            progress=progress.update,
            cluster=args.cluster,
            deep=args.deep,
        )
        report.seconds = progress.elapsed()  # the progress line's clock, from the same moment
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(_table(report))
    return 1 if report.tally.violation_count else 0


def _table(report: Report) -> str:
    d = report.to_json()
    lines = [
        f"toolcancel verify — {report.revision} contract, real asyncio registry "
        f"({'compiled' if _compiled() else 'interpreted'})",
        f"  bounds                up to {d['max_wrappers']} around wrapper(s) per call, "
        f"{d['max_calls']} call(s) per turn batch",
        f"  configurations        {d['configurations']:>10,}",
        f"  schedules run         {d['schedules']:>10,}"
        f"   (+{d['pruned_equivalent']:,} pruned as equivalent)",
        f"  distinct paths        {d['paths']:>10,}",
        f"  turn batches          {d['turn_batches']:>10,}   ({d['turn_schedules']:,} schedules)",
        "  retry behaviours      "
        + ", ".join(f"{name} {n:,}" for name, n in d["retry_schedules"].items())
        + " schedules (configurations whose wrapper retries, D11)",
        *(
            []
            if report.deeper is None
            else [
                f"  of them, deeper       {d['deeper']['configurations']:>10,} configurations, "
                f"{d['deeper']['schedules']:,} schedules (3-wrapper retry stacks, cursor reach)"
            ]
        ),
        f"  transitions covered   {d['transitions_covered']:>6} of {d['transitions_total']}",
        f"  rules exercised       {d['rules_covered']:>6} of {d['rules_total']}",
        f"  violations            {d['violations']:>10,}",
        f"  time                  {d['seconds']:>9.1f}s "
        + (f"on {d['workers']} worker(s)" if report.cluster is None else f"on {d['engine']}"),
    ]
    if report.missing_transitions:
        lines.append(
            "  transitions never taken: "
            + ", ".join(report.missing_transitions)
        )
    if report.missing_rules:
        lines.append("  rules never exercised: " + ", ".join(report.missing_rules))
    for v in report.tally.violations[:3]:
        lines += ["", f"VIOLATION of {v.rule}: {v.explanation}", "reproduce with:", v.reproducer()]
    return "\n".join(lines)


def _load_mutants() -> Any:
    try:
        from ...selfcheck import mutants
    except ImportError as exc:  # the mutants refuse a compiled registry, in one line
        raise CliError(str(exc)) from None
    return mutants


def _mutants(args: argparse.Namespace) -> int:
    mutants = _load_mutants()
    rows = []
    progress = Progress("verify --mutants", "mutants", enabled=not (args.json or args.quiet))
    applying = [m for m in mutants.MUTANTS if args.revision in m.revisions]
    for i, mutant in enumerate(applying):
        progress.update(i, len(applying), mutant.name)
        with mutant.active() as factory:
            report = verify(
                args.revision,
                workers=args.workers,
                factory=factory,
                max_wrappers=args.max_wrappers,
                max_calls=args.max_calls,
                stop_at_first=True,
                deep=args.deep,
            )
        first = report.tally.violations[0] if report.tally.violations else None
        rule = mutant.rule_in(args.revision)
        rows.append(
            {
                "name": mutant.name,
                "what": mutant.what,
                "killed": first is not None,
                "rule": first.rule if first else None,
                "expected_rule": rule,
                "as_declared": first is not None and first.rule == rule,
                "schedules": report.tally.schedules,
                "explanation": first.explanation if first else None,
            }
        )
    progress.close()
    killed = sum(r["killed"] for r in rows)
    # A mutant killed under another rule than the one it breaks shows a check that cites the
    # wrong rule (or a mutant that breaks more than it says): either is a failure of the oracle.
    astray = [r for r in rows if r["killed"] and not r["as_declared"]]
    if args.json:
        print(
            json.dumps(
                {
                    "revision": args.revision,
                    "mutants": rows,
                    "killed": killed,
                    "killed_under_another_rule": len(astray),
                    "total": len(rows),
                },
                indent=2,
            )
        )
    else:
        print(f"toolcancel verify --mutants — {args.revision} contract")
        print(f"  {'mutant':<26} {'killed':<7} {'rule':<6} {'expected':<9} schedules")
        for r in rows:
            print(
                f"  {r['name']:<26} {'yes' if r['killed'] else 'NO':<7} "
                f"{r['rule'] or '-':<6} {r['expected_rule']:<9} {r['schedules']:,}"
            )
        print(f"  killed {killed} of {len(rows)}")
        for r in astray:
            print(f"  {r['name']}: killed under {r['rule']}, but it declares {r['expected_rule']}")
    return 0 if killed == len(rows) and not astray else 1


def _spec_mutants(args: argparse.Namespace) -> int:
    from ...selfcheck.specmutants import EXPLAINED, run_all, summarize, unexplained

    bound = args.max_wrappers
    with Progress(
        "verify --spec-mutants", "perturbations", enabled=not (args.json or args.quiet)
    ) as progress:
        verdicts = run_all(
            args.revisions, max_wrappers=bound, workers=args.workers, progress=progress.update
        )
        summary = summarize(verdicts, progress.elapsed(), bound)
    data = summary.to_json()
    missing, stale = unexplained(summary)
    data["unexplained"], data["explained_but_not_surviving"] = missing, stale
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        c = data["counts"]
        print(
            f"toolcancel verify --spec-mutants — {', '.join(args.revisions)}; up to {bound} "
            "around wrapper(s) per call; table-independent checks only"
        )
        print(
            f"  perturbations {data['total']}: killed {c['killed']}, stopped {c['stopped']} "
            f"(the registry refused), unreached {c['unreached']}, surviving {c['surviving']}, "
            f"crashed {c['crashed']}"
            f"   ({data['seconds']:.0f} s on {args.workers} worker(s))"
        )
        print(
            f"  killed under a rule the changed rows declare: "
            f"{data['killed_under_a_declared_rule']} of {c['killed']}"
        )
        print(f"  surviving and explained in spec/{EXPLAINED}: "
              f"{c['surviving'] - len(missing)} of {c['surviving']}")
        for row in data["perturbations"]:
            if row["status"] in ("unreached", "crashed"):
                print(f"  {row['status'].upper():<9} {row['revision']:<7} {row['what']}")
            elif row["status"] == "killed" and row["rule"] not in row["declared"]:
                print(f"  CITES {row['rule']:<4} {row['revision']:<7} {row['what']} "
                      f"(declares {', '.join(row['declared'])})")
        for what in missing:
            print(f"  UNEXPLAINED {what}")
        for what in stale:
            print(f"  STALE     explained in spec/{EXPLAINED}, no longer surviving: {what}")
    return 1 if missing or stale or data["counts"]["crashed"] else 0


def _compiled() -> bool:
    """Whether the registry verify runs is the compiled build (``TOOLCANCEL_COMPILE=1``)."""
    from ...runtime.registry import compiled

    return compiled()
