"""Explanations: why a call ended as it did, step by step, in the contract's own words.

A call's path (its recorded :class:`~toolcancel.contract.core.PathStep` list, or a trace replayed
through the pure machine) is printed one transition per line: the state it was in, the event, the
state it went to, the outcome it set, and each rule the transition applies with that rule's one-line
summary from the contract file.  The outcome comes last with the precedence row that decided it:
the row cited by the last transition that set the final outcome.  A reviewer pastes this into a
review; a teacher projects it.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..contract.core import PathStep
from ..contract.errors import ToolcancelError
from ..contract.loader import PrecedenceRow, RevisionContract, Transition
from ..oracle.judge import STAGE_ORDER

if TYPE_CHECKING:
    from ..oracle.judge.checker import Verdict


@dataclass(frozen=True)
class Explanation:
    table: RevisionContract
    path: tuple[PathStep, ...]

    @property
    def outcome(self) -> str | None:
        return self.path[-1].outcome if self.path else None

    def deciding(self) -> tuple[Transition, PrecedenceRow | None] | None:
        """The transition that set the final outcome, and the precedence row it cites."""
        final = self.outcome
        transitions = {t.index: t for t in self.table.transitions}
        for step in reversed(self.path):
            t = transitions[step.transition]
            if t.outcome is not None and t.outcome == final:
                row = None if t.precedence is None else self.table.precedence_row(t.precedence)
                return t, row
        return None

    def rules(self) -> tuple[str, ...]:
        """Rules the path shows: those its transitions apply, the rules of the outcomes it set,
        the stage order (R10), and the deciding precedence row with its rules (R39)."""
        contract = self.table.contract
        seen: dict[str, None] = {}
        for step in self.path:
            for r in step.rules:
                seen.setdefault(r, None)
            if step.outcome is not None:
                seen.setdefault(contract.outcome(step.outcome).rule, None)
        if self.path and self.path[-1].dest == "materialized":
            seen.setdefault(STAGE_ORDER, None)
        decided = self.deciding()
        if decided is not None and decided[1] is not None:
            seen.setdefault(contract.precedence_rule, None)  # the table's own rule
            for r in decided[1].rules:
                seen.setdefault(r, None)
        return tuple(seen)

    def cooperative_stop(self, result: str | None) -> bool:
        """Whether the body stopped cooperatively: it raised and the published ``result`` (its
        canonical JSON) is the canonical ABORTED -- what the cooperation helpers' ``AbortError``
        gives under R3 (P8), so the call ended ABORTED although its outcome is ``body_error``."""
        import json

        from ..contract.results import Results

        if self.outcome != "body_error" or result is None:
            return False
        published = json.loads(result)
        canonical = json.loads(Results(self.table).aborted().to_json())
        return all(published.get(k) == canonical[k] for k in ("content", "error", "isError"))

    def lines(self, *, rule_text: bool = True, result: str | None = None) -> list[str]:
        """The explanation, one step per line (each with its rules' summaries if ``rule_text``),
        then the outcome; given the published ``result``, what it means when the names differ."""
        contract = self.table.contract
        out = []
        width = max((len(f"{p.source} --{p.event}--> {p.dest}") for p in self.path), default=0)
        for n, p in enumerate(self.path, 1):
            arrow = f"{p.source} --{p.event}--> {p.dest}"
            t = next(t for t in self.table.transitions if t.index == p.transition)
            extra = []
            if t.guards:
                extra.append(f"[{t.guard_text}]")
            if t.outcome:
                extra.append(f"outcome {t.outcome}")
            out.append(f"{n:>3}. {arrow:<{width}}  {t.id} {' '.join(extra)}".rstrip())
            if rule_text:
                for r in p.rules:
                    rule = contract.rule(r)
                    out.append(f"       {r} {rule.title}: {rule.summary}")
        decided = self.deciding()
        if decided is None:
            out.append(f"Outcome: {self.outcome or 'none'} (the call has not set an outcome)")
        else:
            t, row = decided
            if row is None:
                out.append(
                    f"Outcome: {self.outcome}, set by {t.id}; no competing situation "
                    "(no precedence row applies)"
                )
            else:
                out.append(
                    f"Outcome: {self.outcome}, decided by precedence row {row.row} "
                    f"({t.id}): {row.situation} -> {row.outcome}; beats {row.beats}"
                )
        if self.cooperative_stop(result):
            out.append(
                "The body stopped cooperatively: it raised AbortError (the cooperation helpers' "
                "stop, P8), and R3 makes that exactly R4's canonical ABORTED result -- this call "
                "ended ABORTED. The outcome is named body_error only because the registry keeps "
                "what a body raises (R3, R18); the result is the same."
            )
        return out

    def to_data(self) -> dict[str, Any]:
        decided = self.deciding()
        return {
            "revision": self.table.name,
            "steps": [
                {
                    "source": p.source,
                    "event": p.event,
                    "dest": p.dest,
                    "transition": p.transition,
                    "rules": list(p.rules),
                    "outcome": p.outcome,
                }
                for p in self.path
            ],
            "outcome": self.outcome,
            "precedence_row": decided[1].row if decided and decided[1] else None,
            "rules": list(self.rules()),
        }


@dataclass(frozen=True)
class Story:
    """One curated scenario of ``spec/scenarios.toml``: a title, a story, a scenario."""

    title: str
    story: str
    scenario: dict[str, Any]


def stories() -> list[Story]:
    text = resources.files("toolcancel.spec").joinpath("scenarios.toml").read_text("utf-8")
    data = tomllib.loads(text)
    return [Story(s["title"], s["story"], s["scenario"]) for s in data["scenario"]]


@dataclass(frozen=True)
class VectorRef:
    """The shipped vector a curated scenario is, or the one with its observable behaviour (the
    vectors keep one scenario per behaviour), and the scenario fields in which that one differs."""

    id: str
    differs: tuple[str, ...] = ()
    note: str = ""
    """Why no vector has the scenario itself, where that is not "same behaviour, one kept"."""

    def markdown(self) -> str:
        run = f"run it with `toolcancel explain {self.id}`."
        if not self.differs:
            return f"Vector: `{self.id}` — {run}"
        fields = ", ".join(f"`{f}`" for f in self.differs)
        return (
            f"Vector: `{self.id}`, the same observable behaviour (the vectors keep one scenario "
            f"per behaviour; its scenario differs in {fields}{self.note}) — {run}"
        )


AFTER_NOTE: Final = (
    " -- no vector aborts after the result: such an abort changes no path and no result, so"
    " its vector would be this one, which aborts nothing"
)


def scenarios_markdown(
    entries: Sequence[tuple[Story, Explanation, str, VectorRef | None]], all_rules: Sequence[str]
) -> str:
    """SCENARIOS.md: each story, its path, its outcome and the rules it shows."""
    out = [
        "# The contract in scenarios",
        "",
        "Generated by `toolcancel diagram` from `spec/scenarios.toml`: each scenario is run "
        "through the reference registry and explained from its recorded path, so this page "
        "cannot drift from the contract. Do not edit it by hand.",
        "",
    ]
    touched: dict[str, None] = {}
    for story, ex, result, vector in entries:
        out += [f"## {story.title}", "", story.story, ""]
        code = _scenario_code(ex.table.name, story.scenario)
        out += ["```python", code, "```", ""]
        if vector:
            out += [vector.markdown(), ""]
        out += ["```text", *ex.lines(rule_text=False), "```", ""]
        out += [f"Result: `{result}`", ""]
        rules = ex.rules()
        out += [
            "Rules shown: "
            + ", ".join(f"[{r}](CONTRACT.md#{_anchor(ex.table, r)})" for r in rules),
            "",
        ]
        for r in rules:
            touched.setdefault(r, None)
    missing = [r for r in all_rules if r not in touched]
    out += ["## Rules no scenario above shows", ""]
    if missing:
        out += [
            "Not visible on one call's path above (result envelopes, listener hygiene, "
            "slots, the scheduler, registration, usage errors); their tests and "
            "`toolcancel verify` check them: " + ", ".join(missing) + ".",
            "",
        ]
    else:
        out += ["None: together the scenarios show every rule.", ""]
    return "\n".join(out)


def _scenario_code(revision: str, data: dict[str, Any]) -> str:
    from ..oracle.scenario_language import Scenario

    return Scenario.from_data({"revision": revision, **data}).as_code()


def _anchor(table: RevisionContract, rule_id: str) -> str:
    title = table.contract.rule(rule_id).title.lower()
    # GitHub's heading anchor: word characters (underscore included), hyphens and spaces kept
    slug = "".join(ch for ch in f"{rule_id.lower()} — {title}" if ch.isalnum() or ch in " -_")
    return slug.replace(" ", "-")


def find_vector(scenario_data: dict[str, Any], revision: str) -> str | None:
    """The id of the shipped vector whose scenario equals ``scenario_data``, if there is one."""
    for vector in shipped_vectors(revision):
        if vector.get("scenario") == scenario_data:
            return str(vector["id"])
    return None


def equivalent_vector(obs: Any) -> VectorRef | None:
    """The shipped vector with the observable behaviour of the reference's run ``obs`` (same
    result, outcome, body starts and signals, notifications and post-execute input, and the
    run's path among its allowed ones), closest in scenario; None when no vector has it."""
    from ..oracle.vectors import Expectation, expectation

    mine = expectation(obs)
    data = obs.scenario.to_data()
    best: tuple[int, str, tuple[str, ...]] | None = None
    for v in shipped_vectors(obs.scenario.revision):
        expected = v.get("expected")
        if not isinstance(expected, dict) or "result" not in expected:
            continue
        theirs = Expectation.from_data(expected, str(v["id"]), obs.scenario.revision)
        if not (mine.same_observables(theirs) and mine.paths[0] in theirs.paths):
            continue
        differs = tuple(k for k in data if v["scenario"].get(k) != data[k])
        if best is None or len(differs) < len(best[2]):
            best = (len(differs), str(v["id"]), differs)
    return None if best is None else VectorRef(best[1], best[2])


def cited_vectors(text: str) -> list[str]:
    """Vector ids a story cites (``seed-00969``)."""
    import re

    return re.findall(r"\b(?:seed|revised)-\d{5}\b", text)


def shipped_vectors(revision: str) -> list[dict[str, Any]]:
    """The conformance vectors shipped for ``revision`` (empty when none are shipped).

    Read once per version of the file: SCENARIOS.md looks up every story's vector, and parsing
    the file for each of them cost minutes.  Keyed on the file's size and mtime, so a process that
    regenerates the vectors and then renders what cites them reads the new ones.  The list is
    shared: callers only read it."""
    path = resources.files("toolcancel.spec").joinpath("vectors", f"{revision}.jsonl")
    if not path.is_file():
        return []
    if not isinstance(path, Path):  # inside an archive: nothing to stat, so nothing kept
        return _parse_vectors(path.read_text("utf-8"))
    stat = path.stat()
    return _parsed_vectors(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _parsed_vectors(path: str, size: int, mtime_ns: int) -> list[dict[str, Any]]:
    return _parse_vectors(Path(path).read_text("utf-8"))


def _parse_vectors(text: str) -> list[dict[str, Any]]:
    import json

    return [json.loads(line) for line in text.splitlines() if line.strip()]


def build_scenarios_markdown() -> str:
    """Run every curated story through the reference registry and render SCENARIOS.md."""
    from ..contract.loader import load_contract
    from ..oracle.scenario_language import Scenario
    from ..selfcheck.harness import run_scenario

    contract = load_contract()
    entries = []
    for story in stories():
        scenario = Scenario.from_data({"revision": "seed", **story.scenario})
        obs = run_scenario(scenario)
        if obs.result is None:
            raise RuntimeError(f"scenario {story.title!r} produced no result: {obs.error!r}")
        table = contract.revision(scenario.revision)
        shipped = {str(v["id"]) for r in contract.revisions for v in shipped_vectors(r)}
        for cited in cited_vectors(story.story):
            if cited not in shipped:
                raise RuntimeError(f"scenario {story.title!r} cites {cited}, not a shipped vector")
        found = find_vector(scenario.to_data(), scenario.revision)
        vector = VectorRef(found) if found else equivalent_vector(obs)
        if vector is not None and scenario.cancel == "after":
            vector = replace(vector, note=AFTER_NOTE)
        entries.append((story, Explanation(table, obs.path), obs.result.to_json(), vector))
    every = [r.id for r in contract.rules]
    return scenarios_markdown(entries, every)


class ReplayError(ToolcancelError):
    """A recorded trace whose path cannot be replayed (the command line prints it as one
    line, exit 2)."""


def replay_trace(
    events: Sequence[Any], source: Any
) -> tuple[RevisionContract, list[PathStep], str | None]:
    """A recorded call's path: its contract events replayed through the pure machine.

    Where the contract allows more than one transition (a MAY point), the one under which the
    rest of the trace replays is taken.  A trace the contract does not allow is reported with
    its line, pointing at ``toolcancel check`` for the full verdict.
    """
    from ..contract.core import UNKNOWN, Occurrence, choices, initial_state
    from ..contract.loader import load_contract
    from ..contract.results import canonical_json

    entry = next((e for e in events if e.event == "call_entry"), None)
    if entry is None:
        raise ReplayError(f"{source}: the call has no call_entry line")
    try:
        table = load_contract().revision(entry.data.get("revision", "seed"))
    except ToolcancelError as exc:
        raise ReplayError(f"{source}:{entry.line}: {exc}") from None
    names = {e.name for e in table.events}
    fields = Occurrence._fields[1:]
    moves = [e for e in events if e.event in names]
    result = next((canonical_json(e.data["result"]) for e in events if e.event == "result"), None)
    state = initial_state(
        table,
        entry.data["caller"],
        has_agent=entry.data["agent"],
        approval_seam=entry.data["approval_seam"],
        retry=entry.data.get("retry"),
        wrappers=entry.data.get("wrappers", UNKNOWN),
    )

    def walk(i: int, s: Any) -> list[PathStep] | None:
        if i == len(moves):
            return []
        ev = moves[i]
        occ = Occurrence(ev.event, **{k: ev.data[k] for k in fields if k in ev.data})
        for t, after in choices(table, s, occ):
            rest = walk(i + 1, after)
            if rest is not None:
                return [
                    PathStep(s.state, ev.event, after.state, t.index, t.rules, after.outcome, occ),
                    *rest,
                ]
        return None

    path = walk(0, state)
    if path is None:
        raise ReplayError(
            f"{source}: the contract does not allow this call's events; "
            f"`toolcancel check {source}` says where and why"
        )
    return table, path, result


def render_verdict(v: Verdict, with_file: bool = False) -> str:
    """A verdict of :mod:`toolcancel.oracle.judge.checker` for humans: one line when conforming, a
    short
    block for a violation (``toolcancel check``, ``explain`` and the explorer's examples)."""
    import textwrap

    label = f"{v.source}:{v.call_id}" if with_file else v.call_id
    if v.conforming:
        return f"{label}: conforming"
    allowed = ", ".join(v.allowed) if v.allowed else "nothing more"
    lines = [
        f"{label}: violation of {v.rule} ({v.title})",
        f"  at event {v.event_index} of the call, line {v.line}",
        f"  allowed there: {allowed}",
        f"  seen:          {v.seen}",
    ]
    lines += textwrap.wrap(v.explanation or "", 96, initial_indent="  ", subsequent_indent="  ")
    return "\n".join(lines)
