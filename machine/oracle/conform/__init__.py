"""``toolcancel conform``: run the conformance vectors against any implementation, via an adapter.

The runner starts the adapter as a child process (an argument list, never a shell), reads its
hello -- which declares the protocol version, the conformance level (``trace`` or ``outcome``)
and the retry behaviour -- sends it the vectors of one revision as JSON Lines and judges every
answer against the vector's expectation for that retry behaviour.  At trace level:

1. the answer is a well-formed ``outcome`` for that vector (else a protocol failure);
2. ``execute()`` did not settle while a body was still running (R27, from ``settled_at``);
3. the trace passes the trace checker (:mod:`toolcancel.oracle.judge.checker`), which cites its own
rule;
4. the trace's contract events are one of the vector's allowed paths, up to when aborts are
   noticed (:meth:`Judge.noticed_late`) -- else the rule cited is that of the checkpoint that had
   to see a missing abort, or of the transition the contract takes where the trace first leaves
   the closest allowed path;
5. the result equals the expected result (canonical JSON), the body started as often as expected,
   each body's signal looked as expected when it settled (R21) and the adapter's observer was
   notified exactly as often as expected (R31), with the very result (when reported), and the
   caller's signal kept no listener (R22, when reported).

At outcome level (:meth:`Judge.judge_outcome`) there is no trace: steps 3 and 4 give way to the
body's signal at each start (checkpoint C2, R17; the seed's pre-aborted entry, R25), and R27 is
judged from what had started and settled when ``execute()`` settled.

What a rule observably means is not written here: an answer becomes one record
(:func:`toolcancel.oracle.judge.answer_record`) and the judge's registered checks decide it.  The
vector's verdict is the first broken rule: the trace checker's, then the path's, then a check
that fails on what the record alone shows, then the result difference, then the other
differences from the vector (its rule, the step, expected and observed in brief).  The report
counts, for every rule id, the vectors a check of it could have failed on and that passed, and
the vectors that failed citing it, gives every rule a status derived from those
(:func:`toolcancel.oracle.judge.rule_status`: checked, checked through the result only, not checked
and why), and groups failures into families (:meth:`Report.families`).

Robustness, not timing: the hello is awaited ``--hello-timeout`` (default 60 s: start-up on a
loaded machine is slow) and every answer ``--timeout`` (default 10 s), only so that a hung adapter
cannot hang the run.  A timeout, an exit (seen at once, even when a child of the adapter holds its
stdout) or a line that is not a valid answer fails that one vector with a clear message; the
adapter's whole session is then killed and reaped (the runner is its subreaper) and the adapter
restarted, and the run goes on with the next vector.  Vectors are sent ahead in a small window so
the adapter never waits for the runner; after a restart the unanswered ones are sent again.

This module is the run: which vectors, in what order, judged how.  Its parts live beside it, one
concern each: :mod:`toolcancel.oracle.conform.protocol` (the messages: hello, vector, answer),
:mod:`toolcancel.oracle.conform.adapter` (the adapter process: start, read, stop, reap),
:mod:`toolcancel.oracle.conform.judge` (one answer against one vector) and
:mod:`toolcancel.oracle.conform.report` (the verdicts, counted and rendered).  None of them loads
our registry: ``--self`` runs it in the adapter's own process.

Theory of operation (the conform sub-room): vectors flow out to the adapter's process
(``adapter``, ``jobs`` for several at once, ``reaper`` for what they leave), answers flow back
through the protocol's checks (``protocol``, with the hello's ``capabilities`` and
``deviations``), one at a time into ``judge`` and out as a judgement into ``report``.
Invariants: every vector gets exactly one verdict (a hang, a crash or garbage is a protocol
failure of that vector, never of the run); what a rule means is asked of the one judge
(:mod:`toolcancel.oracle.judge`), never decided here; the run is the subreaper of what it starts.
A contributor may add a protocol field, a capability or a report view; a rule's meaning goes to
the judge.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ...contract.trace_reader import gc_paused
from ..judge.registry import RECORD, by_rule
from ..vectors import (
    Vector,
    load_vectors,
    shipped_dir,
    stageless_file,
    vectors_file,
)
from ..vectors import turns as turnvectors
from ..vectors.turns import TurnVector
from . import jobs as conform_jobs
from . import reaper
from .adapter import HELLO_TIMEOUT, Adapter
from .capabilities import STAGE_OBSERVATIONS, needs
from .deviations import Declared, Model
from .judge import Judge
from .protocol import (
    PROTOCOL_RULE,
    QUOTE,
    AdapterDied,
    ConformError,
    parse_answer,
    vector_message,
)
from .report import Judgement, Report, scenario_of

WINDOW: Final = 32
"""Vectors in flight at once: enough to keep a fast adapter busy, small enough to resend."""


async def run_vectors(
    command: Sequence[str],
    vectors: Sequence[Vector],
    revision: str,
    *,
    timeout: float = 10.0,
    window: int = WINDOW,
    hello_timeout: float = HELLO_TIMEOUT,
    progress: Callable[[int, int], None] | None = None,
    turns: Sequence[TurnVector] = (),
    stageless: Sequence[Vector] = (),
    models: Mapping[str, Model] | None = None,
) -> Report:
    """Send every vector to the adapter, judge every answer; restart the adapter as needed.
    ``progress(judged, total)`` is called after each answer.  The turn vectors ``turns`` are
    sent after the call vectors, if the adapter's hello declares ``turns``; the ``stageless``
    family is added to the call vectors if its hello lacks a capability.

    Runs as the subreaper of the adapters it starts, so that what they leave behind is killed
    and reaped, never orphaned (:meth:`Adapter.stop`)."""
    with reaper.subreaper():
        return await _run_vectors(
            command,
            vectors,
            revision,
            timeout=timeout,
            window=window,
            hello_timeout=hello_timeout,
            progress=progress,
            turns=turns,
            stageless=stageless,
            models=models,
        )


async def _run_vectors(
    command: Sequence[str],
    vectors: Sequence[Vector],
    revision: str,
    *,
    timeout: float,
    window: int,
    hello_timeout: float,
    progress: Callable[[int, int], None] | None,
    turns: Sequence[TurnVector] = (),
    stageless: Sequence[Vector] = (),
    claim: Callable[[int], Sequence[int]] | None = None,
    indices: list[int] | None = None,
    hello: dict[str, Any] | None = None,
    models: Mapping[str, Model] | None = None,
) -> Report:
    """The run on one adapter.  ``claim(total)`` hands out the indices of the run's items this
    adapter is to judge, a few at a time, until it returns none (:mod:`.conform_jobs`: several
    adapters share the items); without it, this adapter judges every item.  The report's
    judgements are in item order either way; ``indices`` receives which items they are, and
    ``hello`` the adapter's hello."""
    if indices is None:
        indices = []
    adapter = Adapter(command, timeout, hello_timeout)
    await adapter.start()
    if hello is not None:
        hello.update(adapter.hello)
    caps = adapter.capabilities
    if caps.declared and not caps.everything:  # one vector per scenario, not per path
        vectors = [*vectors, *stageless]
    judge = Judge(revision, adapter.retry, adapter.level, caps)
    items: list[Vector | TurnVector] = []
    skipped: list[tuple[Vector, frozenset[str]]] = []
    for vector in vectors:
        mine = vector.for_retry(adapter.retry)
        lacks = caps.lacks(needs(mine, judge.table)) if caps.declared else frozenset()
        if lacks:
            skipped.append((mine, lacks))
        else:
            items.append(mine)
    if adapter.turns:
        items += turns
    revisions = adapter.hello.get("revisions", [])
    if revision not in revisions:
        await adapter.stop()
        raise ConformError(
            f"the adapter does not implement the {revision} contract (its hello lists "
            f"{', '.join(map(str, revisions)) or 'no revision'})"
        )
    report = Report(revision, str(adapter.hello.get("implementation", "?")), list(command))
    report.level, report.retry, report.protocol = adapter.level, adapter.retry, adapter.protocol
    declared = Declared(adapter.deviations, revision, adapter.retry, models)
    report.declared = tuple(d.name for d in declared.deviations)
    if declared:  # their models run once, off the loop, before the first answer is judged
        try:
            await asyncio.to_thread(
                declared.prepare, [v for v in items if isinstance(v, Vector)]
            )
        except BaseException:  # cancelled (an interrupt): the adapter is stopped all the same
            await adapter.stop()
            raise
    ran_turns = adapter.turns and bool(turns)  # declared, and the run has turn vectors
    report.turns = ran_turns
    report.capabilities = caps
    unsent = 0 if adapter.turns or not caps.declared else len(turns)
    wants = collections.Counter(c for _, lacks in skipped for c in lacks)
    if unsent:  # turn vectors not sent for want of turns (an older hello: the table says so)
        wants["turns"] = unsent
    report.skipped_total = len(skipped) + unsent
    report.skipped = dict(sorted(wants.items(), key=lambda kv: (-kv[1], kv[0])))
    report.wanting = _wanting(judge, skipped, len(items), unsent)
    report.titles = {**judge.titles, PROTOCOL_RULE: "adapter failures (hang, crash, garbage)"}
    start = time.perf_counter()
    protocol = adapter.protocol  # the first hello's, as a restart is sent the same lines
    if claim is None:
        claim = _everything()
    todo = collections.deque(claim(len(items)))
    pending: collections.deque[int] = collections.deque()
    judged: list[tuple[int, Judgement]] = []
    dead: str | None = None  # why the adapter could not be restarted: the rest fails so
    try:
        while todo or pending:
            if dead is not None:
                for j in todo:
                    judged.append((j, _unrestarted(items[j].id, dead)))
                todo.clear()
                todo.extend(claim(len(items)))
                continue
            if len(pending) <= window // 2 and len(todo) < window:
                todo.extend(claim(len(items)))
            if todo and len(pending) <= window // 2:  # top up in one write, not one per vector
                batch = []
                while todo and len(pending) < window:
                    i = todo.popleft()
                    batch.append(_message(items[i], protocol))
                    pending.append(i)
                adapter.send(b"".join(batch))
                await adapter.drain()
            i = pending[0]
            v = items[i]
            try:
                line = await adapter.readline(f"vector {v.id}")
                answer = parse_answer(line, v.id, adapter.protocol)
            except AdapterDied as exc:
                pending.popleft()
                judged.append(
                    (
                        i,
                        Judgement(
                            v.id,
                            False,
                            rule=PROTOCOL_RULE,
                            explanation=f"{v.id}: {exc}",
                            step="adapter",
                        ),
                    )
                )
                todo.extendleft(reversed(pending))
                pending.clear()
                await adapter.stop()
                report.restarts += 1
                try:
                    await adapter.start()
                except ConformError as exc2:
                    dead = str(exc2)
                continue
            pending.popleft()
            if answer.get("type") == "error":
                why = f"the adapter could not run it: {str(answer.get('message'))[:QUOTE]}"
                judged.append((i, judge.declined(v, why)))
                continue
            judged.append((i, _judged(judge, declared, v, answer)))
            if progress is not None:
                progress(len(judged), len(items))
    except BaseException:  # failed or interrupted: no graceful exit to wait for
        await adapter.stop()
        raise
    finally:
        await adapter.stop(graceful=True)  # nothing left to do if stopped above
    judged.sort(key=lambda ij: ij[0])
    indices[:] = [i for i, _ in judged]
    report.judgements = [j for _, j in judged]
    # of the items this adapter judged only (a job's share: the merge puts them in item order)
    report.scenarios = {items[i].id: scenario_of(items[i]) for i in indices}
    report.seconds = time.perf_counter() - start
    report.strays = adapter.strays
    # "turns" seen: the scheduler could be judged (the hello declares turns), whether or not this
    # run's vectors held any turn vector -- the coverage table says which of the two it was
    report.seen = frozenset(judge.seen | ({"turns"} if adapter.turns else set()))
    return report


def _message(item: Vector | TurnVector, protocol: int) -> bytes:
    """The line that sends ``item``: made when it is sent, so a job encodes only its share."""
    if isinstance(item, TurnVector):
        return item.message(protocol)
    return vector_message(item, protocol)


def _everything() -> Callable[[int], Sequence[int]]:
    """A ``claim`` that hands out every item at its first call, then none."""
    given = False

    def claim(total: int) -> Sequence[int]:
        nonlocal given
        if given:
            return ()
        given = True
        return range(total)

    return claim


def _unrestarted(vid: str, why: str) -> Judgement:
    return Judgement(
        vid,
        False,
        rule=PROTOCOL_RULE,
        explanation=f"{vid}: the adapter could not be restarted: {why}",
        step="adapter",
    )


def _judged(
    judge: Judge, declared: Declared, v: Vector | TurnVector, answer: Mapping[str, Any]
) -> Judgement:
    """The verdict on ``v``, a call or a turn vector: the contract's; when that fails and the
    adapter declared deviations touching ``v``, whether it deviates as declared or what they
    leave unexplained (:meth:`Declared.rejudge`, :meth:`Declared.rejudge_turn`)."""
    if isinstance(v, TurnVector):
        verdict = judge.judge_turn(v, answer)
        if verdict.passed or not declared or verdict.rule == PROTOCOL_RULE:
            return verdict
        return declared.rejudge_turn(v, answer, verdict, judge.judge_turn)
    verdict = judge.judge(v, answer)
    if verdict.passed or not declared or verdict.rule == PROTOCOL_RULE:
        return verdict
    return declared.rejudge(v, answer, verdict, judge.judge)


def _wanting(
    judge: Judge, skipped: Sequence[tuple[Vector, frozenset[str]]], ran: int, unsent: int
) -> dict[str, dict[str, int]]:
    """Rule -> capability -> how many vectors exercising the rule (its expected behaviour's
    rules, :meth:`Judge.static_rules`) were skipped for want of it, most first; the rules whose
    every check reads what only a missing stage observes, with the ``ran`` vectors of the run;
    the turn rules with the ``unsent`` turn vectors, for want of ``turns``."""
    out: dict[str, collections.Counter[str]] = {}
    for v, missing in skipped:
        for rule in judge.static_rules(v):
            out.setdefault(rule, collections.Counter()).update(missing)
    caps = judge.capabilities
    if caps.declared and unsent:
        for rule in turnvectors.RULES:
            out.setdefault(rule, collections.Counter())["turns"] += unsent
    # every check reads what a lacking stage cannot show
    for rule, found in by_rule(RECORD).items():
        asked = [c for c in found if judge.level in c.levels]
        blind = [
            {st for st, events in STAGE_OBSERVATIONS.items() if c.reads & set(events)}
            - caps.stages
            for c in asked
        ]
        if asked and all(blind):
            for stage in set().union(*blind):
                out.setdefault(rule, collections.Counter())[stage] += ran
    return {
        r: dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))) for r, c in out.items() if c
    }


def select(
    vectors: Sequence[Vector],
    only: Sequence[str],
    revision: str,
    turns: Sequence[TurnVector] = (),
) -> tuple[list[Vector], list[TurnVector]]:
    """The call and turn vectors ``--only`` names: a vector id picks that vector, a rule id
    every vector whose expected behaviour exercises the rule (the transitions of its paths, the
    result's rule and what every answer is checked on; a turn vector's rules are R9 and
    R36-R38).  An id or rule that selects nothing is an error."""
    ids = {v.id for v in vectors} | {t.id for t in turns}
    judge = Judge(revision)
    wanted: set[str] = set()
    for item in only:
        if item in ids:
            wanted.add(item)
            continue
        if item not in judge.titles:
            raise ConformError(f"--only {item}: neither a vector id of the run nor a rule id")
        picked = {v.id for v in vectors if item in judge.static_rules(v)}
        picked |= {t.id for t in turns if item in t.rules}
        if not picked:
            raise ConformError(f"--only {item}: no vector of the run exercises {item}")
        wanted |= picked
    return [v for v in vectors if v.id in wanted], [t for t in turns if t.id in wanted]


def conform(
    command: Sequence[str],
    revision: str,
    *,
    vectors_path: str | Path | None = None,
    timeout: float = 10.0,
    hello_timeout: float = HELLO_TIMEOUT,
    only: Sequence[str] = (),
    progress: Callable[[int, int], None] | None = None,
    jobs: int = 1,
    models: Mapping[str, Model] | None = None,
) -> Report:
    """Run the vectors of ``revision`` (the committed ones, call and turn vectors and the
    stage-less family for a hello that lacks a capability, unless ``vectors_path`` names a call
    vectors file), or only those ``only`` selects (:func:`select`), on ``jobs`` adapter
    processes at once (:mod:`.conform_jobs`; as many as the vectors keep busy)."""
    path = Path(vectors_path) if vectors_path else vectors_file(shipped_dir(), revision)
    # The vectors live as long as the run.  Read with the collector paused (they are acyclic:
    # the collections their allocation triggers only cost time), then frozen: left out of the
    # collections made while the run judges (each full one walked them all: about a third of a
    # second per seed run), and untouched in a job forked from this process, so their pages
    # stay shared instead of being copied into every job.
    with gc_paused():
        vectors = load_vectors(path)
        wrong = [v.id for v in vectors if v.revision != revision]
        if wrong:
            raise ConformError(
                f"{path}: vector {wrong[0]} is of another revision than {revision}"
            )
        turns: list[TurnVector] = []
        stageless: list[Vector] = []
        if not vectors_path:
            turns = turnvectors.load_turn_vectors(turnvectors.turn_file(shipped_dir(), revision))
            stageless = load_vectors(stageless_file(shipped_dir(), revision))
        if only:
            picked, turns = select([*vectors, *stageless], only, revision, turns)
            family = {v.id for v in stageless}
            vectors = [v for v in picked if v.id not in family]
            stageless = [v for v in picked if v.id in family]
        # a caller that froze its own objects keeps them frozen: unfreeze is all or nothing
        ours = gc.get_freeze_count() == 0
        if ours:
            gc.freeze()
    try:
        jobs = conform_jobs.useful(jobs, len(vectors) + len(turns) + len(stageless))
        if jobs > 1:
            return conform_jobs.run_jobs(
                jobs,
                _run_vectors,
                command,
                vectors,
                revision,
                timeout=timeout,
                window=WINDOW,
                hello_timeout=hello_timeout,
                progress=progress,
                turns=turns,
                stageless=stageless,
                models=models,
            )
        return asyncio.run(
            run_vectors(
                command,
                vectors,
                revision,
                timeout=timeout,
                hello_timeout=hello_timeout,
                progress=progress,
                turns=turns,
                stageless=stageless,
                models=models,
            )
        )
    finally:
        if ours:
            gc.unfreeze()


def self_command(
    retry: str | None = None, level: str = "trace", cancel: str = "signal"
) -> list[str]:
    """The command of our own adapter (``--self``), running retry behaviour ``retry`` (default:
    the contract's), at conformance level ``level``, its caller giving up by ``cancel``."""
    retrying = ("--retry", retry) if retry else ()
    command = [sys.executable, "-m", "toolcancel.selfcheck.adapter", *retrying]
    if cancel != "signal":
        command += ["--cancel", cancel]
    return command if level == "trace" else [*command, "--level", level]
