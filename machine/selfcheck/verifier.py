"""The bounded model checker behind ``toolcancel verify``.

It takes every scenario within bounds and every cancellation point each can have (the bounded
space: :mod:`toolcancel.selfcheck.space`), runs each schedule against the **real** asyncio
registry through the scenario harness, and checks what happened (:func:`check`):

* **the path, replayed.**  The harness records the registry's canonical trace, then what the
  environment observed, as one record (:func:`toolcancel.oracle.judge.environment_record`).  The
  trace checker replays it through the contract's machine with the caller's abort put back
  where the *environment* saw it happen (:mod:`toolcancel.oracle.judge.path`): a registry that
  misses a recheck, keeps a late success or mislabels an outcome leaves every allowed path
  there, and the step names the rule.
* **rules the machine cannot see**, decided by the judge's registered checks on the same record
  (:func:`toolcancel.oracle.judge.environment_judgement`; those that read the call's setup are
  :mod:`toolcancel.oracle.judge.setup`'s): quiescence and the hold (R27), one notification of
  the frozen result and view (R30, R31), listeners (R22), the slot (R23), the approval seam's
  signal (R24), TOOL_TIMEOUT by identity (R35), no late start or success (R28), what
  post-execute received and what the caller then got, contexts (R29), which cancellation a
  result is (R17, R25, R41), a late success at body level (R18: the harness writes what each
  body's signal showed when it settled, ``body_signal``), what the pre-policy stage ends in
  (R5, R13-R15, R42, R43: :mod:`toolcancel.oracle.judge.stage`), and which signal the first
  body got (R21, R34, R35: the harness writes which sources it aborted, ``signal_aborted``;
  :mod:`toolcancel.oracle.judge.fusion`).
* **what no call shows**: the registry probed at registration and at a revised ``begin()``
  without a caller signal (:func:`registration_record`), its record judged by
  :mod:`toolcancel.oracle.judge.registration` (R32, R40).

Exploration lives here; every judgement is the judge's.

Violations come with a reproducer that runs as written.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import math
import operator
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Final

from ..contract.core import PathStep
from ..contract.errors import ContractViolation, RegistryUsageError
from ..contract.loader import RevisionContract, load_contract
from ..oracle.judge import Record, Want, environment_judgement, environment_record, rule_of
from ..oracle.judge.calls import AFTER_THE_PATH, returns_a_result
from ..oracle.judge.path import path_judgement, refused_rule, transition_rules, unreplayed
from ..oracle.judge.record import env_line
from ..oracle.judge.registration import REGISTRATION
from ..oracle.observation import Observation
from ..oracle.scenario_language import Scenario
from ..oracle.turn_language import batch_kinds
from ..runtime.registry import ToolRegistry
from ..runtime.virtual_time import VirtualClock, run
from .harness import Harness, RegistryFactory
from .space import (
    MAX_CALLS,
    MAX_WRAPPERS,
    Group,
    expand,
    group_size,
    groups,
    schedules,
    uncancelled_matters,
)
from .turncheck import TurnTally, verify_turns

# ------------------------------------------------------------------------------------------------
# Checking one run
# ------------------------------------------------------------------------------------------------

NO_RESULT = rule_of(returns_a_result)
"""The rule of a call that published no result (the judge's check of it)."""


@dataclass(frozen=True)
class Violation:
    rule: str
    scenario: Scenario
    explanation: str
    retry: str | None = None  # the registry's retry behaviour in that run (D11)

    def reproducer(self) -> str:
        retry = "" if self.retry is None else f", retry={self.retry!r}"
        return (
            "from toolcancel.oracle.scenario_language import Scenario\n"
            "from toolcancel.selfcheck.harness import run_scenario\n"
            f"obs = run_scenario({self.scenario.as_code()}{retry})\n"
            "print(obs.result.to_json() if obs.result else obs.error)\n"
            "print([(p.source, p.event, p.dest) for p in obs.path])"
        )


@dataclass
class Checked:
    violations: list[Violation] = field(default_factory=list)
    rules: set[str] = field(default_factory=set)

    retry: str | None = None

    def fail(self, rule: str, scenario: Scenario, why: str) -> None:
        self.violations.append(Violation(rule, scenario, why, self.retry))


def check(obs: Observation, table: RevisionContract, *, replay: bool = True) -> Checked:
    """Every check of the module docstring, for one observed run (recorded with its trace):
    first what the judge's record checks find before the path, then the path replayed, then
    what a departure from it led to (:data:`~toolcancel.oracle.judge.calls.AFTER_THE_PATH`).
    ``replay=False`` leaves out everything that reads the
    contract's machine -- the replay and the checks that read what it makes of the record
    (``verify --spec-mutants`` judges a registry driven by a perturbed table with the others)."""
    out = Checked(retry=obs.retry)
    s = obs.scenario
    record = environment_record(obs)
    if replay and not record.trace:
        raise ValueError("check() replays the registry's trace: run the harness with trace=True")
    if not replay:
        unreplayed(record)
    failures, could_fail = environment_judgement(record, Want(s))
    if obs.error is not None or obs.result is None:
        # what the harness saw of a call that returned no result: a body left running first,
        # then the step its own machine refused, then the missing result
        waited = next((f for f in failures if f.step == "quiescence"), None)
        if waited is None and isinstance(obs.error, ContractViolation):
            # which guard the step lacked is the contract's machine's to say: without the
            # replay, the call simply published no result
            why = f"the registry's machine refused: {obs.error}"
            rule = refused_rule(table, obs.error) if replay else NO_RESULT
            out.fail(rule, s, why)
            return out
        found = waited or next((f for f in failures if f.step == "result"), failures[0])
        out.fail(found.rule, s, found.why)
        return out
    for found in failures:
        if found.step not in AFTER_THE_PATH:
            out.fail(found.rule, s, found.why)
    out.rules |= could_fail
    if replay:
        departed, rules = path_judgement(record)
        if departed is not None:
            out.fail(departed.rule, s, departed.why)
        out.rules |= rules
    for found in failures:
        if found.step in AFTER_THE_PATH:
            out.fail(found.rule, s, found.why)
    return out


# ------------------------------------------------------------------------------------------------
# Running the space
# ------------------------------------------------------------------------------------------------


@dataclass
class Tally:
    """What a batch of configurations added up to (merged across workers)."""

    configurations: int = 0
    schedules: int = 0
    pruned: int = 0
    paths: set[tuple[tuple[str, str], ...]] = field(default_factory=set)
    """The distinct paths taken, each step as its (event, destination)."""
    transitions: set[int] = field(default_factory=set)
    rules: set[str] = field(default_factory=set)
    violations: list[Violation] = field(default_factory=list)
    violation_count: int = 0
    turn_batches: int = 0
    turn_schedules: int = 0
    by_retry: collections.Counter[str] = field(default_factory=collections.Counter)
    """Schedules run per retry behaviour, for the configurations where a wrapper retries."""
    deep: bool = False
    """A job's tally: whether the job was of the deeper family (not merged)."""

    def merge(self, other: Tally) -> None:
        self.configurations += other.configurations
        self.schedules += other.schedules
        self.pruned += other.pruned
        self.paths |= other.paths
        self.transitions |= other.transitions
        self.rules |= other.rules
        self.violation_count += other.violation_count
        self.violations.extend(other.violations[: max(0, 20 - len(self.violations))])
        self.turn_batches += other.turn_batches
        self.turn_schedules += other.turn_schedules
        self.by_retry.update(other.by_retry)


_EVENT_DEST: Final = operator.attrgetter("event", "dest")
_TRANSITION: Final = operator.attrgetter("transition")
_KIN: Final = operator.attrgetter(
    *(f.name for f in fields(Scenario) if f.name not in ("cooperative", "post"))
)
"""A configuration's family: every field but whether its body cooperates and what post-execute
decides."""


async def _run_configs(
    configs: Sequence[Scenario],
    factory: RegistryFactory,
    clock: VirtualClock,
    retries: Sequence[str] | None = None,
    replay: bool = True,
) -> Tally:
    """Check ``configs``; a configuration whose wrapper retries is checked under each of
    ``retries`` (default: every retry behaviour of the contract, D11), the others once."""
    table = load_contract().revision(configs[0].revision) if configs else None
    behaviours = tuple(retries or load_contract().retry_names)
    tally = Tally()
    # The uncancelled runs of the cooperative configurations that differ from the current one in
    # their post-execute decision at most (configurations() gives an uncooperative one after
    # its cooperative twins), per post-execute decision and retry behaviour.  A family is named
    # by every other field (:data:`_KIN`): a tuple of words, where a dataclass ``replace`` and a
    # scenario's hash cost tens of microseconds per configuration.
    twins: dict[tuple[str, str | None], Observation] = {}
    # The paths already counted, by their steps' identities: the registry's machine hands out
    # the same step objects, and a tuple of ints hashes in a fraction of the time a tuple of
    # steps or of (event, destination) pairs takes.  Each path is held, so no id is reused.
    taken: dict[tuple[int, ...], tuple[PathStep, ...]] = {}
    family: tuple[Any, ...] | None = None
    for config in configs:
        tally.configurations += 1
        matters = uncancelled_matters(config)
        kin = _KIN(config)
        if config.cooperative and kin != family:
            twins.clear()
            family = kin
        # whether this one may reuse its cooperative twin's uncancelled run (the family's run
        # with its own post-execute decision)
        reuses = not (config.cooperative or matters) and kin == family
        for retry in behaviours if config.retries else (None,):
            twin = twins.get((config.post, retry)) if reuses else None
            if twin is not None:
                # Nothing aborts in its uncancelled run, so it has its twin's gates and path, and
                # it is used only to choose the schedules.  (When something does abort -- the
                # timer, an aborting wrapper signal -- an uncooperative body changes the path.)
                first = twin
            else:
                first = await Harness(config, factory, clock, retry, trace=True).run()
            if config.cooperative:
                twins[(config.post, retry)] = first
            runs = [first] if matters else []
            tally.pruned += 0 if runs else 1
            kept, pruned = schedules(config, first)
            tally.pruned += pruned
            for cancel in kept:
                run_ = Harness(config.with_cancel(cancel), factory, clock, retry, trace=True)
                runs.append(await run_.run())
            if retry is not None:
                tally.by_retry[retry] += len(runs)
            for obs in runs:
                assert table is not None
                tally.schedules += 1
                result = check(obs, table, replay=replay)
                steps = tuple(map(id, obs.path))
                if steps not in taken:
                    taken[steps] = obs.path
                    tally.paths.add(tuple(map(_EVENT_DEST, obs.path)))
                    tally.transitions.update(map(_TRANSITION, obs.path))
                tally.rules |= result.rules
                tally.violation_count += len(result.violations)
                if len(tally.violations) < 20:
                    tally.violations.extend(result.violations[:1])
    if replay and table is not None:
        tally.rules |= transition_rules(table, tally.transitions)
    return tally


def run_batch(
    configs: Sequence[Scenario], factory: RegistryFactory = ToolRegistry, *, replay: bool = True
) -> Tally:
    """Check a batch of configurations on one virtual-time loop (``replay``: see :func:`check`)."""
    clock = VirtualClock()
    with rare_collections():
        return run(_run_configs(configs, factory, clock, replay=replay), clock=clock)


YOUNG_COLLECTION: Final = 10_000
"""Allocations between two young collections while schedules run (Python's default: 700)."""


@contextlib.contextmanager
def rare_collections() -> Generator[None, None, None]:
    """Run the cycle collector's young collection every :data:`YOUNG_COLLECTION` allocations
    instead of every 700, and restore the thresholds after.  A schedule allocates a few hundred
    objects and the reference counts free them (the harness lets go of its cycles), so at the
    default nearly every collection scans only live objects for nothing: about 5-8 % of a
    batch's CPU time."""
    before = gc.get_threshold()
    young = max(before[0], YOUNG_COLLECTION) if before[0] else 0  # 0: collection is off
    gc.set_threshold(young, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


JOB_CONFIGURATIONS = 200
"""About how many configurations one job of :func:`plan` holds (a few tenths of a second)."""

JOB_TURN_BATCHES = 16
"""How many turn batches (kinds of calls) one job holds."""


@dataclass(frozen=True)
class Job:
    """One unit of work for a worker: groups of configurations to expand and check, or turn
    batches to run.  Small to pickle: a job names its configurations, it does not hold them."""

    revision: str
    groups: tuple[Group, ...] = ()
    turn_kinds: tuple[tuple[str, ...], ...] = ()
    size: int = 0  # configurations
    deep: bool = False  # of the deeper family (:func:`deep_stacks`)

    def run(self, factory: RegistryFactory = ToolRegistry) -> Tally:
        if self.turn_kinds:
            return _turn_tally(verify_turns(self.revision, kinds=self.turn_kinds), self.revision)
        tally = run_batch([c for g in self.groups for c in expand(g)], factory)
        tally.deep = self.deep
        return tally


def plan(
    revision: str = "seed",
    max_wrappers: int = MAX_WRAPPERS,
    max_calls: int = MAX_CALLS,
    *,
    turns: bool = True,
    deep: bool = False,
) -> list[Job]:
    """The bounded space cut into jobs: the turn batches first (so they never end a run), then
    the configurations in :func:`configurations` order, ``JOB_CONFIGURATIONS`` or so a job (with
    ``deep``, the deeper family's in jobs of their own, last).

    Only groups are enumerated here; each worker expands its own, so the serial part of a run is
    the cheap enumeration of groups."""
    jobs: list[Job] = []
    if turns:
        kinds = list(batch_kinds(max_calls))
        for i in range(0, len(kinds), JOB_TURN_BATCHES):
            jobs.append(Job(revision, turn_kinds=tuple(kinds[i : i + JOB_TURN_BATCHES])))
    pending: list[Group] = []
    size = 0
    family = False
    for group in groups(revision, max_wrappers, deep=deep):
        in_family = not isinstance(group, Scenario) and len(group) > 2
        if in_family != family and pending:
            jobs.append(Job(revision, tuple(pending), size=size, deep=family))
            pending, size = [], 0
        family = in_family
        pending.append(group)
        size += group_size(group)
        if size >= JOB_CONFIGURATIONS:
            jobs.append(Job(revision, tuple(pending), size=size, deep=family))
            pending, size = [], 0
    if pending:
        jobs.append(Job(revision, tuple(pending), size=size, deep=family))
    return jobs


def run_jobs(
    jobs: Sequence[Job],
    factory: RegistryFactory = ToolRegistry,
    workers: int = 1,
    cluster: str | None = None,
) -> Generator[Tally, None, None]:
    """Each job's tally, as jobs finish (in order with one worker, and on a ``cluster``: the
    address of a Dask scheduler).  Closing the iterator early stops the workers."""
    if cluster is not None:
        from .cluster import map_in_order

        yield from map_in_order(cluster, _worker, [(job, factory) for job in jobs])
        return
    if workers <= 1:
        for job in jobs:
            yield job.run(factory)
        return
    from .workers import pool as worker_pool

    with worker_pool(workers) as pool:
        # One job per task: a job is a few tenths of a second, so the tail is short and the
        # pickling is small (a job names its configurations; the factory pickles by reference).
        yield from pool.imap_unordered(_worker, [(job, factory) for job in jobs], chunksize=1)


@dataclass
class Report:
    revision: str
    tally: Tally
    transitions_total: int
    rules_total: int
    seconds: float
    workers: int

    table: RevisionContract | None = None
    max_wrappers: int = MAX_WRAPPERS
    max_calls: int = MAX_CALLS
    cluster: str | None = None
    deeper: Tally | None = None
    """The deeper family's share of ``tally`` (:func:`deep_stacks`); None when it did not run."""

    @property
    def engine(self) -> str:
        """Where the schedules ran: local processes, or the Dask cluster at an address."""
        return "local processes" if self.cluster is None else f"dask.distributed at {self.cluster}"

    @property
    def missing_transitions(self) -> list[str]:
        """The ids of the reference's transitions no schedule took."""
        if self.table is None:
            return []
        return [
            t.id
            for t in self.table.transitions
            if not t.alternative and t.index not in self.tally.transitions
        ]

    @property
    def rule_ids(self) -> set[str]:
        return set() if self.table is None else {r.id for r in self.table.rules}

    @property
    def missing_rules(self) -> list[str]:
        if self.table is None:
            return []
        return [r.id for r in self.table.rules if r.id not in self.tally.rules]

    def to_json(self) -> dict[str, Any]:
        t = self.tally
        return {
            "revision": self.revision,
            "configurations": t.configurations,
            "schedules": t.schedules,
            "pruned_equivalent": t.pruned,
            "paths": len(t.paths),
            "turn_batches": t.turn_batches,
            "turn_schedules": t.turn_schedules,
            "transitions_covered": len(t.transitions),
            "transitions_total": self.transitions_total,
            "rules_covered": len(t.rules & self.rule_ids),
            "rules_total": self.rules_total,
            "violations": t.violation_count,
            "missing_transitions": self.missing_transitions,
            "missing_rules": self.missing_rules,
            "first_violations": [
                {"rule": v.rule, "explanation": v.explanation, "scenario": v.scenario.to_data()}
                for v in t.violations[:5]
            ],
            "seconds": round(self.seconds, 2),
            "workers": self.workers,
            "engine": self.engine,
            "retry_schedules": dict(sorted(t.by_retry.items())),
            "max_wrappers": self.max_wrappers,
            "max_calls": self.max_calls,
            "deeper": None
            if self.deeper is None
            else {
                "configurations": self.deeper.configurations,
                "schedules": self.deeper.schedules,
                "pruned_equivalent": self.deeper.pruned,
                "violations": self.deeper.violation_count,
            },
        }


def verify(
    revision: str = "seed",
    *,
    workers: int = 2,
    factory: RegistryFactory = ToolRegistry,
    max_wrappers: int = MAX_WRAPPERS,
    max_calls: int = MAX_CALLS,
    progress: Callable[[int, int], None] | None = None,
    stop_at_first: bool = False,
    cluster: str | None = None,
    deep: bool = True,
) -> Report:
    """Check the whole bounded space of ``revision``; use ``workers`` processes, or the Dask
    cluster whose scheduler is at ``cluster`` (the same totals, paths and violations as one
    local process: :mod:`toolcancel.selfcheck.cluster`).

    The bounds: ``max_wrappers`` around wrappers per call, ``max_calls`` concurrent model calls
    per turn batch.  With ``deep`` the deeper family (:func:`deep_stacks`) runs after the bounded
    space: three-wrapper retry stacks and what only a ``cursor`` retry reaches, whatever the bound
    (the part of it the bound holds already is left out).  With ``stop_at_first`` the check ends
    at the first job that shows a violation (used to kill mutants quickly); the turn batches then
    run last, and only if none did."""
    if max_wrappers < 0:
        raise ValueError(f"max_wrappers must be at least 0, not {max_wrappers}")
    if max_calls < 1:
        raise ValueError(f"max_calls must be at least 1, not {max_calls}")
    start = time.perf_counter()
    table = load_contract().revision(revision)
    jobs = plan(revision, max_wrappers, max_calls, turns=not stop_at_first, deep=deep)
    configs = sum(job.size for job in jobs)
    total = Tally()
    deeper = Tally() if deep else None
    done = 0
    with contextlib.closing(run_jobs(jobs, factory, workers, cluster)) as tallies:
        for tally in tallies:
            total.merge(tally)
            if deeper is not None and tally.deep:
                deeper.merge(tally)
            done += tally.configurations
            if progress:
                progress(done, configs)
            if stop_at_first and total.violation_count:
                break
    if not (stop_at_first and total.violation_count):
        if stop_at_first:
            total.merge(_turn_tally(verify_turns(revision, max_calls), revision))
        _add_registration(total, revision, factory)
    return Report(
        revision,
        total,
        len(table.transitions),
        len(table.rules),
        time.perf_counter() - start,
        workers,
        table,
        max_wrappers,
        max_calls,
        cluster,
        deeper,
    )


def _turn_tally(turns: TurnTally, revision: str) -> Tally:
    """What the turn batches add (R9, R36-R38, through the real scheduler), as a tally."""
    out = Tally(
        rules=set(turns.rules),
        violation_count=turns.violation_count,
        turn_batches=turns.batches,
        turn_schedules=turns.schedules,
    )
    for rule, why, turn in turns.violations[:20]:
        where = f"{why} -- in {turn.as_code()} (toolcancel.selfcheck.turncheck)"
        out.violations.append(Violation(rule, Scenario(revision=revision), where))
    return out


def _add_registration(total: Tally, revision: str, factory: RegistryFactory) -> None:
    """The part of the contract no call shows (budget declaration, a revised call without a
    caller signal): the registry probed, its record judged."""
    record = registration_record(revision, factory)
    setup = Want(Scenario(revision=revision))
    failures, could_fail = environment_judgement(record, setup, step=REGISTRATION)
    for found in failures:
        total.violation_count += 1
        total.violations.append(Violation(found.rule, Scenario(revision=revision), found.why))
    total.rules |= could_fail


BUDGETS: Final = (0, -1, float("inf"), float("-inf"), float("nan"), True, 1.5)
"""The budgets the probe declares: every kind R32 refuses (zero, negative, infinite, NaN, and a
boolean, which is no number), then a positive finite one it must accept."""


def registration_record(revision: str, factory: RegistryFactory = ToolRegistry) -> Record:
    """Register a tool under each of :data:`BUDGETS` and, revised, begin a call without a
    caller signal; what the registry did, as the environment's record (``registered``,
    ``begun_without_caller``: :mod:`toolcancel.oracle.judge.registration` judges it)."""

    async def body(args: Any, view: Any) -> Any:
        return []

    lines: list[dict[str, Any]] = []
    registry = factory(revision=revision)
    for budget in BUDGETS:
        valid = not isinstance(budget, bool) and math.isfinite(budget) and budget > 0
        seen: dict[str, Any] = {"accepted": True, "type_error": False}
        try:
            registry.register(f"t{len(lines)}", body, timeout_ms=budget)
        except Exception as exc:  # what it refused with is the observation
            seen = {"accepted": False, "type_error": isinstance(exc, TypeError),
                    "error": f"{type(exc).__name__}: {exc}"}  # fmt: skip
        lines.append(env_line("registration", "registered", timeout_ms=repr(budget),
                              valid=valid, **seen))  # fmt: skip
    if revision == "revised":
        try:
            factory(revision=revision).begin("t0", {})
        except RegistryUsageError:
            refused = True
        else:
            refused = False
        lines.append(env_line("registration", "begun_without_caller", refused=refused))
    return Record(lines, revision, "none")


def _worker(task: tuple[Job, RegistryFactory]) -> Tally:
    job, factory = task
    return job.run(factory)

