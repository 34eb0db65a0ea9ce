"""Generating the conformance vectors: the verifier's bounded space, run on the reference registry.

The vectors' format is :mod:`toolcancel.oracle.vectors` (the oracle's); this module makes the
shipped files (``toolcancel vectors``, ``toolcancel regen``).

Where vectors come from, and why it is this way:

* **The same space as ``toolcancel verify``.**  :func:`toolcancel.selfcheck.space.configurations`
  enumerates the configurations, the deeper family included; each is crossed with its
  *portable* cancellation points only: ``never`` and ``gate:<name>`` for every gate the
  uncancelled run reaches.  ``step:<k>`` is left
  out because a foreign registry has no transition tap to count with.  ``before_entry`` and
  ``after`` are in the language, but generating them would add nothing: ``before_entry`` is the
  configuration whose caller is already aborted (enumerated anyway), and an abort after the result
  is published cannot change the path or the result, so its key always equals ``never``'s.
* **The reference decides, the table explains.**  Every expectation is what our registry did in
  the harness -- the model checker has already proven that registry against the table -- and the
  allowed paths are its path plus those the table's MAY transitions allow (:func:`alternatives`).
  Where the caller aborts in the step the tool's deadline expires (``with_deadline``), which
  abort runs first is the signal library's (R34): the harness runs the caller first, and the
  timer-first run is an alternative.
* **Small enough to review.**  One vector per distinct (reference path, result JSON, body
  signals, what post-execute received), the first in enumeration order, where the path counts as
  the machine took it: each event with its data and its transition (:func:`dedupe_key`).  Two
  scenarios alike in all of that exercise the same transitions, the same result builders and the
  same signal fusion.  That keeps a few thousand vectors per revision (the line counts of the
  shipped files) out of a few hundred thousand runs.  An uncooperative
  body only differs from a cooperative one while something aborts its signal at the body gate, so
  unless a wrapper signal or the timer does, it is run at ``gate:body`` only (its other runs equal
  its cooperative twin's, which comes first in the enumeration and would win the key anyway).
* **Paths up to when an abort is noticed.**  A listed path has each ``caller_abort`` and
  ``fused_abort`` where the reference notices it, as early as possible; a registry may notice one
  later, or never, while no other event's transition depends on it
  (:meth:`toolcancel.oracle.conform.judge.Judge.noticed_late`), so listing every placement would
  only bloat the files.
* **Deterministic.**  The enumeration order is fixed, workers return their batches in order, ids
  are given after deduplication, and each vector is one JSON line with a fixed key order, so
  ``--check`` can compare bytes.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from ..contract.core import CallState, choices, initial_state
from ..contract.loader import RevisionContract, load_contract
from ..oracle.judge import relay_on_live_caller
from ..oracle.observation import Observation
from ..oracle.scenario_language import APPROVALS, ARGS, BODIES, SAME_STEP, Scenario, entry_caller
from ..oracle.vectors import (
    SCHEMA_NAME,
    Expectation,
    Vector,
    VectorError,
    canonical,
    expectation,
    expectation_data,
    render,
    schema_text,
    stageless_file,
)
from ..runtime.registry import ToolRegistry
from ..runtime.virtual_time import VirtualClock, run
from .harness import Harness, RegistryFactory
from .space import added_later, configurations, same_step_cancels

_BATCH: Final = 500

SKIPPED_STAGE: Final[Mapping[str, str]] = {"approval": "approval"}
"""For a MAY transition that jumps over the state the reference enters next: the scenario field
holding that stage's answer.  (The contract's only MAY transition, D1, skips the approval
question; the other MAY a vector shows, R34's caller and deadline in one step, is the order of
two aborts, not a transition: :func:`_same_step_alternatives`.)"""


async def alternatives(
    obs: Observation, table: RevisionContract, factory: RegistryFactory, clock: VirtualClock
) -> list[Expectation]:
    """The outcomes the MAY transitions along ``obs``'s path allow, each with its path.

    A MAY transition skips a stage the reference runs.  What happens after it cannot depend on
    that stage's answer, so a run of a *sibling* scenario -- the same one with a different answer
    for the skipped stage -- that reaches exactly the state the MAY transition leads to is a
    witness of everything that follows: its remaining events, its result, its body.  The
    alternative path is the reference's prefix, the MAY step, and the witness's suffix.
    """
    s = obs.scenario
    state = _entry_state(table, obs)
    events = [p.event for p in obs.path]
    found: list[Expectation] = []
    for i, step in enumerate(obs.path):
        options = choices(table, state, step.occurrence)
        reference, after = options[-1]
        if reference.index != step.transition:
            raise VectorError(f"{s.as_code()}: step {i + 1} is not the table's reference step")
        for t, alt_state in options[:-1]:
            skipped = SKIPPED_STAGE.get(reference.dest or "")
            if skipped is None:
                raise VectorError(
                    f"MAY transition t{t.index} skips state {reference.dest!r}, which has no "
                    "witness rule in toolcancel.selfcheck.vectorgen.SKIPPED_STAGE"
                )
            witness, j = await _witness(obs, table, factory, clock, i, alt_state, skipped)
            path = events[: i + 1] + [p.event for p in witness.path[j + 1 :]]
            found.append(expectation(witness, [path]))
        state = after
    return found


def _entry_state(table: RevisionContract, obs: Observation) -> CallState:
    """The machine state the registry of ``obs`` began its call in."""
    s = obs.scenario
    return initial_state(
        table,
        entry_caller(s),
        has_agent=s.agent,
        approval_seam=s.approval_seam,
        retry=obs.retry,
        wrappers=s.around_count,
    )


async def _witness(
    obs: Observation,
    table: RevisionContract,
    factory: RegistryFactory,
    clock: VirtualClock,
    i: int,
    target: CallState,
    skipped: str,
) -> tuple[Observation, int]:
    s = obs.scenario
    answers = [getattr(s, skipped)] + [a for a in APPROVALS if a != getattr(s, skipped)]
    for answer in answers:
        sibling = replace(s, **{skipped: answer})
        run_ = obs if sibling == s else await Harness(sibling, factory, clock, obs.retry).run()
        if run_.result is None or run_.problems:
            continue
        head = [p.occurrence for p in run_.path[: i + 1]]
        if head != [p.occurrence for p in obs.path[: i + 1]]:
            continue
        state = _entry_state(table, obs)
        for j, p in enumerate(run_.path):
            state = choices(table, state, p.occurrence)[-1][1]
            if j > i and state == target:
                return run_, j
    raise VectorError(f"{s.as_code()}: no sibling run witnesses the MAY step at {i + 1}")


# ------------------------------------------------------------------------------------------------
# Generation
# ------------------------------------------------------------------------------------------------


def portable_cancels(config: Scenario, uncancelled: Observation) -> list[str]:
    """The cancellation points worth running for ``config`` (see the module docstring)."""
    if config.caller != "live":
        return []
    gates = list(dict.fromkeys(e[1] for e in uncancelled.log if e[0] == "gate"))
    same_step = [SAME_STEP] if same_step_cancels(config, gates) else []
    if not config.cooperative and not _uncooperative_matters(config):
        return ["gate:body"] if "body" in gates else []
    return [f"gate:{g}" for g in gates] + same_step


async def _same_step_alternatives(
    obs: Observation, table: RevisionContract, factory: RegistryFactory, clock: VirtualClock
) -> list[Expectation]:
    """For a caller that aborts in the step the tool's deadline expires (``with_deadline``, run
    by the harness caller first): the run with the timer first, and its MAY alternatives.
    Which of the two a step runs first is the signal library's (R34, D19), so a vector allows
    both."""
    if obs.scenario.same_step is None:
        return []
    timer = obs.scenario.with_cancel(f"{SAME_STEP}:timer")
    other = await Harness(timer, factory, clock, obs.retry).run()
    return [expectation(other), *await alternatives(other, table, factory, clock)]


def _same_step_key(key: Key, alts: Sequence[Expectation]) -> Key:
    """``key`` told apart by what the timer-first order of the same step gives (its first
    alternative), so a vector is kept for it even where the caller-first order is an old one."""
    if not alts:
        return key
    other = alts[0]
    mark = (SAME_STEP, other.result_json, canonical([dict(b) for b in other.body_signals]),
            other.paths)
    return ((*key[0], mark), key[1], key[2])


def _uncooperative_matters(config: Scenario) -> bool:
    """Whether something other than the caller aborts the body's signal at the body gate."""
    return config.timeout == "timer_first" or "replace_aborting" in config.wrappers


Key = tuple[tuple[Any, ...], str, str]


_LISTENER_VISIBLE: Final = ("listener visible",)
"""Marks a run where a relay's leaked listener would show
(:func:`toolcancel.oracle.judge.relay_on_live_caller`)."""


def dedupe_key(obs: Observation, exp: Expectation) -> Key:
    """What makes a vector new: its reference path as the machine took it -- each event with its
    data and the transition it took (a C2 abort read from the caller is not one read from a
    wrapper's signal; a denial for want of an agent is not one for want of a seam) -- its result,
    and what its body's signal showed (path and result alone cannot tell a pre-aborted entry from
    a call without a caller signal, nor a wrapper's reason from the deadline's)."""
    return (
        tuple((p.occurrence, p.transition) for p in obs.path),
        exp.result_json,
        canonical([dict(b) for b in exp.body_signals]),
    )


async def _batch(
    configs: Sequence[Scenario], factory: RegistryFactory, clock: VirtualClock
) -> list[dict[str, Any]]:
    """First occurrence of every key within one batch, in enumeration order.

    A scenario whose wrapper retries is also run under every other retry behaviour (D11); its
    full key is the tuple of every behaviour's key, so two scenarios alike under the default but
    not under another behaviour are both kept."""
    table = load_contract().revision(configs[0].revision)
    contract = table.contract
    others = [b for b in contract.retry_names if b != contract.default_retry]
    seen: set[tuple[Key, ...]] = set()
    out: list[dict[str, Any]] = []
    for config in configs:
        first = await Harness(config, factory, clock).run()
        runs = [first] if config.cooperative or _uncooperative_matters(config) else []
        for cancel in portable_cancels(config, first):
            runs.append(await Harness(config.with_cancel(cancel), factory, clock).run())
        for obs in runs:
            exp = expectation(obs)
            same_step = await _same_step_alternatives(obs, table, factory, clock)
            key = _same_step_key(dedupe_key(obs, exp), same_step)
            # What post-execute received tells vectors apart too; those kept for it alone are
            # numbered after the others (:func:`_number`), so it renumbered nothing.
            full: list[Any] = [(key, canonical(exp.post_received))]
            plain = [key]  # without what post-execute received
            per: list[tuple[str, Expectation, list[Expectation]]] = []
            if obs.scenario.retries:
                for retry in others:
                    other = await Harness(obs.scenario, factory, clock, retry).run()
                    other_exp = expectation(other)
                    other_same = await _same_step_alternatives(other, table, factory, clock)
                    other_key = _same_step_key(dedupe_key(other, other_exp), other_same)
                    full.append((other_key, canonical(other_exp.post_received)))
                    plain.append(other_key)
                    other_alts = await alternatives(other, table, factory, clock)
                    per.append((retry, other_exp, other_alts + other_same))
            bare = tuple(full)
            if relay_on_live_caller(obs.scenario, obs.body_starts, caller_aborts=False):
                # kept apart from its callerless twin (same path and result): only here does a
                # listener the relay leaves on the caller show in the counts (R22)
                full.append(_LISTENER_VISIBLE)
            if tuple(full) in seen:
                continue
            seen.add(tuple(full))
            alts = await alternatives(obs, table, factory, clock) + same_step
            out.append(
                {
                    "key": key,
                    "full": tuple(full),
                    "bare": bare,
                    "plain": tuple(plain),
                    "scenario": obs.scenario,
                    "expected": exp,
                    "alts": alts,
                    "by_retry": per,
                }
            )
    return out


def _run_batch(job: tuple[Sequence[Scenario], RegistryFactory]) -> list[dict[str, Any]]:
    clock = VirtualClock()
    return run(_batch(job[0], job[1], clock), clock=clock)


def _merge_alternatives(
    exp: Expectation, alts: Iterable[Expectation]
) -> tuple[Expectation, tuple[Expectation, ...]]:
    """Fold alternatives with the same observables into the expected paths; keep the rest."""
    paths = list(exp.paths)
    others: list[Expectation] = []
    for alt in alts:
        if alt.same_observables(exp):
            paths += [p for p in alt.paths if p not in paths]
            continue
        for k, other in enumerate(others):
            if other.same_observables(alt):
                others[k] = replace(other, paths=other.paths + alt.paths)
                break
        else:
            others.append(alt)
    return replace(exp, paths=tuple(paths)), tuple(others)


def generate(
    revision: str,
    *,
    workers: int = 1,
    factory: RegistryFactory = ToolRegistry,
    configs: Iterable[Scenario] | None = None,
    progress: Callable[[int, int], None] | None = None,
    cluster: str | None = None,
) -> list[Vector]:
    """The vectors of ``revision``: deduplicated, in enumeration order, numbered from 1.
    ``progress(done, total)`` is called with the configurations run so far.  ``cluster``, the
    address of a Dask scheduler, runs the batches there instead of on ``workers`` processes
    (read back in order: the same vectors, :mod:`toolcancel.selfcheck.cluster`)."""
    load_contract().revision(revision)  # an unknown revision fails here, clearly
    # A task caller's vectors are the live caller's, run by an adapter that cancels by task
    # (its hello's capabilities.cancel): the vectors name no caller "task"
    space = list(configurations(revision, deep=True) if configs is None else configs)
    space = [c for c in space if c.caller != "task"]
    batches = [(space[i : i + _BATCH], factory) for i in range(0, len(space), _BATCH)]

    def counted(results: Iterable[list[dict[str, Any]]]) -> Iterator[list[dict[str, Any]]]:
        for i, result in enumerate(results, 1):
            if progress is not None:
                progress(min(i * _BATCH, len(space)), len(space))
            yield result

    if cluster is not None:
        from .cluster import map_in_order

        return _number(revision, counted(map_in_order(cluster, _run_batch, batches)))
    if workers <= 1 or len(batches) <= 1:
        results: Iterable[list[dict[str, Any]]] = map(_run_batch, batches)
        return _number(revision, counted(results))
    from .workers import pool as worker_pool

    with worker_pool(workers) as pool:
        return _number(revision, counted(pool.imap(_run_batch, batches)))


def _number(revision: str, batches: Iterable[list[dict[str, Any]]]) -> list[Vector]:
    """Number the vectors in enumeration order.  A vector kept only because a retry behaviour
    other than the default tells it apart (its default key was seen) is numbered after all the
    others, and one kept only for what post-execute received after those, so adding retry
    behaviours or that observation never renumbered the vectors that were already there; the
    vectors of dimensions added later still (:func:`~toolcancel.selfcheck.space.added_later`)
    come after all of those, in the same three parts."""
    seen: set[Key] = set()
    seen_plain: set[tuple[Any, ...]] = set()
    seen_full: set[tuple[Any, ...]] = set()
    # (when added, 0 first / 1 told apart by a retry behaviour / 2 by what post received);
    # (when added, 3): kept only because a relay's leaked listener shows there (R22), after the
    # three parts of the vectors added with it (those of the first space after the later ones)
    parts: dict[tuple[int, int], list[dict[str, Any]]] = collections.defaultdict(list)
    for batch in batches:
        for item in batch:
            if item["full"] in seen_full:
                continue
            seen_full.add(item["full"])
            later = added_later(item["scenario"])
            if item["full"] != item["bare"]:  # a relay on a caller that stays live
                if item["bare"] in seen_full:
                    parts[max(later, 1), 3].append(item)
                    continue
                seen_full.add(item["bare"])
            if item["plain"] in seen_plain:
                parts[later, 2].append(item)
                continue
            seen_plain.add(item["plain"])
            if item["key"] in seen:
                parts[later, 1].append(item)
                continue
            seen.add(item["key"])
            parts[later, 0].append(item)
    out: list[Vector] = []
    for item in [i for part in sorted(parts) for i in parts[part]]:
        expected, others = _merge_alternatives(item["expected"], item["alts"])
        default = expectation_data(expected, others)
        by_retry = []
        for retry, exp, alts in item["by_retry"]:
            mine, my_others = _merge_alternatives(exp, alts)
            if expectation_data(mine, my_others) != default:
                by_retry.append((retry, mine, my_others))
        out.append(
            Vector(
                f"{revision}-{len(out) + 1:05d}",
                revision,
                item["scenario"],
                expected,
                others,
                tuple(by_retry),
            )
        )
    return out



# ------------------------------------------------------------------------------------------------
# Writing and checking the committed files
# ------------------------------------------------------------------------------------------------


# ------------------------------------------------------------------------------------------------
# The stage-less family: kept per scenario, for runtimes without the pipeline's optional stages
# ------------------------------------------------------------------------------------------------


def stageless_configs(revision: str) -> Iterator[Scenario]:
    """Every scenario a runtime without the pipeline's optional stages can run -- each stage's
    field at its default (no pre-execute or post-execute listener, guard, wrapper, timeout or
    observer), approval never asked -- over the dimensions left: the caller, the arguments,
    whether the tool is known, the body and whether it cooperates."""
    callers = ("live", "aborted") if revision == "revised" else ("none", "live", "aborted")
    for caller in callers:  # no "task": its vectors are the live caller's (generate())
        for args in ARGS:
            for tool_known in (True, False):
                for body in BODIES:
                    for cooperative in (True, False):
                        yield Scenario(
                            revision=revision,
                            caller=caller,
                            args=args,
                            tool_known=tool_known,
                            body=body,
                            cooperative=cooperative,
                        )


def stageless_cancels(config: Scenario, uncancelled: Observation) -> list[str]:
    """The cancellation points of ``config`` a stage-less runtime can tell apart: none, and for a
    live caller an abort while the body runs (the only wait such a runtime has) and one after
    the result is published; an uncooperative body differs from a cooperative one only in the
    first (nothing else aborts its signal)."""
    body = "gate:body" in portable_cancels(replace(config, cooperative=True), uncancelled)
    if config.caller != "live":
        return ["never"]
    if not config.cooperative:
        return ["gate:body"] if body else []
    return ["never", *(["gate:body"] if body else []), "after"]


async def _stageless(
    revision: str, taken: set[Scenario], factory: RegistryFactory, clock: VirtualClock
) -> list[tuple[Observation, Expectation, tuple[Expectation, ...]]]:
    """One run per scenario a stage-less runtime can tell apart (:func:`stageless_key`), in
    enumeration order, leaving out the scenarios of ``taken`` (the main vectors have them)."""
    table = load_contract().revision(revision)
    seen: set[tuple[Any, ...]] = set()
    out = []
    for config in stageless_configs(revision):
        first = await Harness(config, factory, clock).run()
        for cancel in stageless_cancels(config, first):
            s = config.with_cancel(cancel)
            obs = first if s == config else await Harness(s, factory, clock).run()
            exp = expectation(obs)
            key = stageless_key(obs, exp)
            if key in seen:
                continue
            seen.add(key)
            if s in taken:
                continue
            alts = await alternatives(obs, table, factory, clock)
            out.append((obs, *_merge_alternatives(exp, alts)))
    return out


def stageless_key(obs: Observation, exp: Expectation) -> tuple[Any, ...]:
    """What tells two stage-less scenarios apart: the vector key (:func:`dedupe_key`) and what
    post-execute received, and the scenario as far as the runtime meets it -- the caller, when
    it cancels, the body when one started, whether it cooperates when its signal aborted."""
    s = obs.scenario
    aborted = any(b["aborted"] for b in exp.body_signals)
    return (
        dedupe_key(obs, exp),
        canonical(exp.post_received),
        s.caller,
        s.cancel,
        s.body if obs.body_starts else None,
        s.cooperative if aborted else None,
    )


def generate_stageless(
    revision: str, main: Iterable[Vector], *, factory: RegistryFactory = ToolRegistry
) -> list[Vector]:
    """The stage-less family of ``revision``: one vector per scenario a runtime without the
    optional stages can tell apart (:func:`stageless_key`) that the ``main`` vectors -- one per
    path -- do not already hold, numbered ``<revision>-s00001`` on.  The main vectors keep one
    scenario per path, and without stages an uncooperative body's path, a late success's, a
    body ignoring the abort's, is a cooperative one's: a runtime that has only the body is
    judged on these too (conform sends them to a hello that lacks a stage)."""
    taken = {v.scenario for v in main}
    clock = VirtualClock()
    runs = run(_stageless(revision, taken, factory, clock), clock=clock)
    return [
        Vector(f"{revision}-s{n:05d}", revision, obs.scenario, exp, alts)
        for n, (obs, exp, alts) in enumerate(runs, 1)
    ]


def expected_files(
    revisions: Sequence[str],
    workers: int,
    progress: Callable[[int, int, str], None] | None = None,
    cluster: str | None = None,
) -> dict[str, str]:
    """File name -> fresh text, for every file ``toolcancel vectors`` owns.
    ``progress(done, total, revision)`` follows each revision's generation."""
    files = {SCHEMA_NAME: schema_text()}
    for revision in revisions:
        step = None if progress is None else functools.partial(_tell, progress, revision)
        vectors = generate(revision, workers=workers, progress=step, cluster=cluster)
        files[f"{revision}.jsonl"] = render(vectors)
        files[stageless_file(".", revision).name] = render(generate_stageless(revision, vectors))
    from ..oracle.vectors import turns as turnvectors
    from .turncheck import turn_vectors  # runs our scheduler

    for revision in revisions:
        files[turnvectors.turn_file(".", revision).name] = turnvectors.render(
            turn_vectors(revision)
        )
    return files


def _tell(progress: Callable[[int, int, str], None], revision: str, done: int, total: int) -> None:
    progress(done, total, revision)


def write(directory: str | Path, files: Mapping[str, str]) -> list[Path]:
    """Write every file atomically with :func:`toolcancel.contract.fileio.write_text` (each file old
    or new, never half-written; a device or FIFO in the way is refused, ``OutputError``)."""
    from ..contract.fileio import write_text

    d = Path(directory)
    written = []
    for name, text in files.items():
        write_text(d / name, text, mkdir=True)
        written.append(d / name)
    return written


def compare(directory: str | Path, files: Mapping[str, str]) -> list[str]:
    """One line per committed file that differs from ``files`` (first differing line named)."""
    problems = []
    for name, fresh in files.items():
        path = Path(directory) / name
        try:
            committed = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            problems.append(f"{path}: missing (run `toolcancel vectors` to write it)")
            continue
        except OSError as exc:
            problems.append(f"{path}: cannot read ({exc.strerror}); regenerate it")
            continue
        except UnicodeDecodeError:
            problems.append(f"{path}: not UTF-8 text; regenerate with `toolcancel vectors`")
            continue
        if committed == fresh:
            continue
        old, new = committed.splitlines(), fresh.splitlines()
        n = next((k for k, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), None)
        where = f"line {n + 1}" if n is not None else f"length ({len(old)} vs {len(new)} lines)"
        problems.append(f"{path}: stale at {where}; regenerate with `toolcancel vectors`")
    return problems
