"""The checks that read the call's setup: what the prose says a call of *this* scenario must show.

A vector says what the contract allows for a call; a model check runs calls no vector lists, and
judges them from what it set up (:class:`~toolcancel.oracle.scenario_language.Scenario`: every
hook's behaviour, the body's, the caller's) and the record: the registry's trace, and what the
environment observed -- when it aborted the caller (``caller_aborted``), each body's signal,
what post-execute received, what the caller got.  These checks need the setup
(``needs_setup``: :attr:`Want.scenario <toolcancel.oracle.judge.record.Want>`) and no expectation,
so verify asks them of every run and conform of every vector whose answer holds the events they
read.  They are written from ``spec/CONTRACT.md``, not from the transition table: a perturbed
table (``verify --spec-mutants``) is judged by them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar, cast

from ...contract.loader import RevisionContract, load_contract
from ...contract.results import canonical_json, text_block
from ..scenario_language import (
    BLOCK_CONTEXT,
    BLOCK_TEXT,
    BODY_FAILURE,
    BODY_STRUCTURED_FAILURE,
    BODY_TEXT,
    BUDGET_MS,
    DEFERRED,
    POST_CONTEXT,
    POST_FAILURE,
    REWRITTEN,
)
from .calls import error_code
from .path import path_facts
from .record import Failure, Record, Want
from .registry import RECORD, check

ANY_NAME: Final = "\x00"
"""Stands for the tool's name in an expected text: the record does not name the tool (the
model calls of a turn batch have their own), so ``{name}`` matches any name."""


def same_text(expected: str, got: str) -> bool:
    """Whether ``got`` reads ``expected`` (:data:`ANY_NAME` in it matches any tool name)."""
    return _pattern(expected).fullmatch(got) is not None


@functools.lru_cache(maxsize=256)
def _pattern(expected: str) -> re.Pattern[str]:
    """``expected`` as a pattern, made once per text (verify asks a few texts on every run)."""
    return re.compile(re.escape(expected).replace(re.escape(ANY_NAME), '[^"]*'))


@functools.cache
def revision_table(revision: str) -> RevisionContract:
    return load_contract().revision(revision)


_Antecedent = TypeVar("_Antecedent", bound=Callable[..., bool])


def _once(antecedent: _Antecedent) -> _Antecedent:
    """``antecedent``, worked out once per record (several checks and their coverage ask it; a
    record is judged with one setup)."""
    key = antecedent.__name__

    def once(record: Record, want: Want | None) -> bool:
        found = record.derived.get(key)
        if found is None:
            found = record.derived[key] = antecedent(record, want)
        return bool(found)

    once.__name__ = key
    return cast(_Antecedent, once)


def text(result: Mapping[str, Any] | None) -> str:
    """A result's concatenated text blocks (what a model reads first)."""
    if not isinstance(result, Mapping):
        return ""
    return "".join(
        b["text"]
        for b in result.get("content") or ()
        if isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str)
    )


def is_error(result: Mapping[str, Any] | None) -> bool:
    return isinstance(result, Mapping) and result.get("isError") is True


def entered(record: Record) -> str:
    """The caller's signal at entry, as the registry's ``call_entry`` records it (an abort
    while entry snapshots the arguments makes a pre-aborted entry), else the record's."""
    entry = record.of("call_entry")
    return entry[0]["caller"] if entry else record.caller


def received(record: Record) -> tuple[int, Mapping[str, Any] | None]:
    """Where the record says what post-execute received, and that result (None: it did not
    run)."""
    i = record.at("post_received")[0]
    return i, record.lines[i].get("result")


_EVENTS: dict[str, frozenset[str]] = {}


def contract_events(revision: str) -> frozenset[str]:
    found = _EVENTS.get(revision)
    if found is None:
        found = _EVENTS[revision] = frozenset(
            e.name for e in revision_table(revision).events
        )
    return found


# ------------------------------------------------------------------------------------------------
# Where in the call's transitions a line stands
# ------------------------------------------------------------------------------------------------

def transition_steps(record: Record) -> list[int]:
    """Per record line, how many contract transitions the call had taken once that line was
    written (the line's own included): the count the environment's ``caller_aborted`` gives as
    ``steps``, so the two can be compared.  The registry's own ``caller_abort`` lines are not
    counted (the environment's abort is put where it happened).  Worked out once per record."""
    found: list[int] | None = record.derived.get("transition_steps")
    if found is None:
        events = contract_events(record.revision)
        found, steps = [], 0
        for x in record.lines:
            event = x["event"]
            if event in events and event != "caller_abort":
                steps += 1
            found.append(steps)
        record.derived["transition_steps"] = found
    return found


def _first_steps(record: Record, event: str, **fields: Any) -> int | None:
    """:func:`transition_steps` at the first ``event`` line with ``fields`` (None: none)."""
    steps = transition_steps(record)
    return next(
        (steps[i] for i in record.at(event)
         if all(record.lines[i].get(k) == v for k, v in fields.items())),
        None,
    )


# ------------------------------------------------------------------------------------------------
# No success past checkpoint C3 once the caller aborted: R28
# ------------------------------------------------------------------------------------------------

def _post_steps(record: Record) -> int | None:
    """How many contract transitions the call had taken when its post-execute stage began (its
    ``stage_enter`` line; None: it never began)."""
    return _first_steps(record, "stage_enter", stage="post")


@_once
def _aborted_before_c3(record: Record, want: Want | None) -> bool:
    """The environment aborted the caller after entry, before the transition into post-execute
    (checkpoint C3 decides there), and post-execute ran."""
    if record.lines[record.at("post_received")[0]].get("result") is None:
        return False
    steps = _post_steps(record)
    at = record.of("caller_aborted")[0].get("steps")  # optional: an adapter may not count them
    return steps is not None and at is not None and at < steps


def _stage(record: Record, state: str) -> str:
    """The title of the stage ``state`` belongs to, as the contract's ``[[stage]]`` data names
    it under the record's revision."""
    table = revision_table(record.revision)
    return next(s.title(table.name) for s in table.contract.stages if state in s.states)


def c3_publishes_over(record: Record) -> str | None:
    """What the cancellation checkpoint C3 publishes for this call publishes over (``success``
    or ``any``: ``publishes_over`` in contract.toml)."""
    return revision_table(record.revision).publishes_over.get(_c4_cancellation(record))


def replaced_at_c3(record: Record, want: Want | None) -> bool:
    """The caller aborted after entry, before checkpoint C3, and the cancellation C3 publishes
    there replaces *any* result the around chain settled with: what the chain returned (a
    deadline's TOOL_TIMEOUT, a body's failure) never reaches post-execute."""
    return (
        record.has("caller_aborted")
        and _aborted_before_c3(record, want)
        and c3_publishes_over(record) == "any"
    )


@check(
    "R28",
    RECORD,
    "late_success",
    reads=("caller_aborted", "post_received", "call_entry"),
    levels=frozenset({"trace"}),
    when=(_aborted_before_c3, "the caller aborted after entry, before checkpoint C3"),
)
def no_success_past_c3(record: Record, want: Want | None) -> Failure | None:
    """Once the caller aborted after entry, nothing the cancellation publishes over reaches
    post-execute past checkpoint C3: no success, or (``publishes_over = "any"``) no result but
    the cancellation itself.  Cites the contract's ``publishes_over_rule`` and the stage."""
    if not _aborted_before_c3(record, want):
        return None
    i, got = received(record)
    over = c3_publishes_over(record)
    cancellation = revision_table(record.revision).texts[_c4_cancellation(record)]
    if is_error(got) and (over != "any" or text(got) == cancellation):
        return None
    stage = _stage(record, "around_after")
    rule = revision_table(record.revision).contract.publishes_over_rule
    if over != "any":
        return Failure(rule, i, "late_success",
                       "the caller aborted before checkpoint C3, yet post-execute received a "
                       f"success ({text(got)!r}) from the stage {stage!r}",
                       "an error", "a success")  # fmt: skip
    return Failure(rule, i, "late_success",
                   "the caller aborted before checkpoint C3, whose cancellation publishes over "
                   f"any result, yet post-execute received {text(got)!r} from the stage "
                   f"{stage!r}", cancellation, text(got))  # fmt: skip


# ------------------------------------------------------------------------------------------------
# A call nothing cancels ends as its body says: R2, R3, R6, R7
# ------------------------------------------------------------------------------------------------

_THROWING: Final = frozenset({"throw", "throw_structured", "defer_throw"})


@_once
def _untouched(record: Record, want: Want | None) -> bool:
    """Nothing can cancel the call or stand between it and its body: no abort before
    publication, no wrapper, no timer, pre-execute allows and the guard passes."""
    assert want is not None
    s = want.scenario
    return (
        s.entry_caller in ("none", "live")
        and s.cancel in ("never", "after")
        and not s.wrappers
        and s.timeout != "timer_first"
        and s.pre == "allow"
        and s.guard == "none"
        and s.args == "ok"
    )


def _body_says(record: Record, want: Want | None) -> tuple[str, str | None, bool]:
    """The rule (its outcome's), text (None: any) and error flag of what the body (or an
    unknown tool) says."""
    assert want is not None
    s = want.scenario
    table = revision_table(record.revision)
    if not s.tool_known:
        said = table.texts["unknown_tool"].format(name=ANY_NAME)
        return table.contract.outcome("unknown_tool").rule, said, True
    if s.body in _THROWING:  # its text is the body error's own check
        return table.contract.outcome("body_error").rule, None, True
    return table.contract.outcome("body_success").rule, BODY_TEXT, False


_CALLER_PREDICATE: Final = {"seed": "cancelled_after_entry", "revised": "caller_aborted"}
"""The guard C1, C3 and C4 read (and the revised entry): the caller cancelled."""


def _imposed(record: Record, want: Want | None, got: Mapping[str, Any] | None) -> str | None:
    """Where a call nothing cancelled shows a result only the registry authors -- a
    cancellation, or the unknown tool's error for a known tool -- the rule of the predicate that
    wrongly held: the fused signal's at base dispatch when no body started past it (C2), else
    the caller's (entry, C1, C3, C4); the unknown tool's outcome's own rule.  None: another
    result, the body's rule's to judge.  A cancellation after the body ran reads the same
    whether the body's settle or C3 imposed it; the caller's predicate is cited."""
    assert want is not None
    if not want.scenario.tool_known:
        return None  # the lookup's outcome is what the call must end with: R6's own
    table = revision_table(record.revision)
    said = text(got)
    if same_text(table.texts["unknown_tool"].format(name=ANY_NAME), said):
        return table.contract.outcome("unknown_tool").rule
    if said not in _cancellations(record.revision):
        return None
    at_dispatch = record.has("base_dispatch") and not record.starts()
    guard = "fused_aborted" if at_dispatch else _CALLER_PREDICATE[record.revision]
    return next(g.rule for g in table.contract.guards if g.name == guard)


@check(
    "R2",
    RECORD,
    "post_received",
    reads=("post_received", "call_entry"),
    levels=frozenset({"trace"}),
    when=(_untouched, "nothing can cancel the call nor stand before its body"),
    needs_setup=True,
)
def uncancelled_call_ends_as_its_body_says(record: Record, want: Want | None) -> Failure | None:
    """A call nothing cancels, with no wrapper, hands post-execute what its body said: its
    success (R2), its error (R3), or the unknown tool's error (R6).  A result only the registry
    authors there is the predicate's that wrongly held (:func:`_imposed`)."""
    if not _untouched(record, want):
        return None
    rule, body, error = _body_says(record, want)
    i, got = received(record)
    if got is None:
        returned = record.of("returned")
        shown = returned[0]["result"] if returned else None
        return Failure(_imposed(record, want, shown) or rule, i, "post_received",
                       "nothing cancelled the call, yet post-execute did not run",
                       "post-execute runs", "it did not")  # fmt: skip
    if error != is_error(got) or (body is not None and not same_text(body, text(got))):
        return Failure(
            _imposed(record, want, got) or rule,
            i,
            "post_received",
            f"nothing cancelled the call, yet post-execute received {text(got)!r} "
            f"(error: {is_error(got)})",
            body,
            text(got),
        )
    return None


@_once
def _accepted_untouched(record: Record, want: Want | None) -> bool:
    assert want is not None
    return (
        _untouched(record, want)
        and want.scenario.post == "accept"
        and want.scenario.body != "bad_meta"  # its snapshot fails after post-execute (R30)
        and record.lines[record.at("post_received")[0]].get("result") is not None
    )


@check(
    "R7",
    RECORD,
    "post_decision",
    reads=("post_received", "returned", "call_entry"),
    levels=frozenset({"trace"}),
    when=(_accepted_untouched, "post-execute accepted an uncancelled call's result"),
    needs_setup=True,
)
def accepted_result_reaches_the_caller(record: Record, want: Want | None) -> Failure | None:
    """A result post-execute accepts as it is reaches the caller unchanged."""
    if not _accepted_untouched(record, want):
        return None
    _, got = received(record)
    j = record.at("returned")[0]
    returned = record.lines[j]["result"]
    if text(returned) == text(got):
        return None
    return Failure.of(
        accepted_result_reaches_the_caller,
        j,
        "post_decision",
        f"post-execute accepted {text(got)!r}, the caller got {text(returned)!r}",
        text(got),
        text(returned),
    )


# ------------------------------------------------------------------------------------------------
# What post-execute received, and what the caller then got: R2-R8, R20, R28 (C4)
# ------------------------------------------------------------------------------------------------


def _known_text(record: Record, want: Want, outcome: str) -> str | None:
    """The text a result of ``outcome`` must read, where the setup says it."""
    texts = revision_table(record.revision).texts
    s = want.scenario
    if outcome in ("aborted", "aborted_before_dispatch"):
        return texts[outcome]
    if outcome == "tool_timeout":
        return texts["tool_timeout"].format(ms=BUDGET_MS)
    if outcome == "unknown_tool":
        return texts["unknown_tool"].format(name=ANY_NAME)
    if outcome == "body_success":
        return BODY_TEXT
    if outcome == "body_error":
        failure = BODY_STRUCTURED_FAILURE if s.body == "throw_structured" else BODY_FAILURE
        return "Error: " + failure
    return None


@_once
def _entering(record: Record, want: Want | None) -> bool:
    """Post-execute ran, and the replayed path says which outcome the call held then."""
    return (
        received(record)[1] is not None
        and any(o is not None for o in path_facts(record).entering_post)
    )


def _fits(record: Record, want: Want, outcome: str, got: Mapping[str, Any]) -> bool:
    kind = revision_table(record.revision).contract.outcome(outcome)
    expected = _known_text(record, want, outcome)
    return not (
        kind.is_error != is_error(got)
        or (kind.code is not None and error_code(got) != kind.code)
        or (expected is not None and not same_text(expected, text(got)))
    )


@check(
    "R20",
    RECORD,
    "post_received",
    reads=("post_received", "call_entry"),
    levels=frozenset({"trace"}),
    when=(_entering, "post-execute ran"),
    needs_setup=True,
)
def post_receives_the_outcome_held(record: Record, want: Want | None) -> Failure | None:
    """Post-execute receives the result the outcome the call held on entering post-policy
    stands for -- its error flag, its code, and the text the setup knows for it (the contract's
    texts, the body's own) -- whatever events the registry offered on the way.  Cites the
    outcome's rule.  (conform's :func:`~toolcancel.oracle.judge.calls.post_sees_the_decided_result`
    compares with the vector's expectation instead: a run no vector lists is judged here.)"""
    if not _entering(record, want):
        return None
    assert want is not None
    i, got = received(record)
    assert got is not None
    held = sorted(o for o in path_facts(record).entering_post if o is not None)
    if any(_fits(record, want, o, got) for o in held):
        return None
    if not is_error(got) and record.has("caller_aborted") and _aborted_before_c3(record, want):
        return None  # a success past C3 after the caller aborted: no_success_past_c3's
    rule = revision_table(record.revision).contract.outcome(held[0]).rule
    return Failure(
        rule,
        i,
        "post_received",
        f"the call entered post-policy with outcome {held[0]}, but post-execute received "
        f"{text(got)!r} (error: {is_error(got)}, code {error_code(got)})",
        held[0],
        text(got),
    )


@_once
def _decided(record: Record, want: Want | None) -> bool:
    """Post-execute decided on what it received (the harness's hook always decides once
    called), and the call did not end in a failed snapshot (the contract's text for it)."""
    if received(record)[1] is None or not record.has("returned"):
        return False
    texts = revision_table(record.revision).texts
    return text(record.of("returned")[0]["result"]) != texts["result_not_serializable"]


def _decision(record: Record, want: Want | None, decided: str) -> bool:
    assert want is not None
    return want.scenario.post == decided and _decided(record, want)


@_once
def _post_failure_text(record: Record, want: Want | None) -> bool:
    return _decision(record, want, "throw")


@check(
    "R20",
    RECORD,
    "post_decision",
    reads=("post_received", "returned", "call_entry"),
    levels=frozenset({"trace"}),
    when=(_post_failure_text, "post-execute threw"),
    needs_setup=True,
)
def post_failure_reaches_the_caller(record: Record, want: Want | None) -> Failure | None:
    """A post-execute that throws makes the call's result that failure."""
    if not _post_failure_text(record, want):
        return None
    j = record.at("returned")[0]
    got = record.lines[j]["result"]
    if is_error(got) and text(got) == "Error: " + POST_FAILURE:
        return None
    return Failure.of(post_failure_reaches_the_caller, j, "post_decision",
                      f"post-execute threw, the caller got {text(got)!r}",
                      "Error: " + POST_FAILURE, text(got))  # fmt: skip


def _c4_cancellation(record: Record) -> str:
    """The cancellation outcome checkpoint C4 publishes: ABORTED once the body was invoked, else
    (revised) ABORTED_BEFORE_DISPATCH."""
    invoked = record.revision == "seed" or bool(record.starts())
    return "aborted" if invoked else "aborted_before_dispatch"


@_once
def _c4(record: Record, want: Want | None) -> bool:
    """The caller aborted after entry, before post-execute decided, on a result the
    cancellation publishes over (a success, or any: ``publishes_over`` in contract.toml)."""
    if not _decided(record, want) or not record.has("caller_aborted"):
        return False
    assert want is not None
    _, got = received(record)
    over = revision_table(record.revision).publishes_over.get(_c4_cancellation(record))
    return (
        want.scenario.post not in ("block", "throw")
        and record.of("caller_aborted")[0]["before_post"]
        and (over == "any" or not is_error(got))
    )


@check(
    "R28",
    RECORD,
    "post_decision",
    reads=("post_received", "returned", "caller_aborted", "call_entry"),
    levels=frozenset({"trace"}),
    when=(_c4, "the caller aborted before post-execute accepted a success"),
    needs_setup=True,
)
def c4_replaces_an_accepted_success(record: Record, want: Want | None) -> Failure | None:
    """A success post-execute accepted after the caller aborted (after entry) is replaced by
    the cancellation at checkpoint C4: ABORTED once the body was invoked, else (revised)
    ABORTED_BEFORE_DISPATCH."""
    if not _c4(record, want):
        return None
    expected = revision_table(record.revision).texts[_c4_cancellation(record)]
    j = record.at("returned")[0]
    got = record.lines[j]["result"]
    if is_error(got) and text(got) == expected:
        return None
    return Failure.of(c4_replaces_an_accepted_success, j, "post_decision",
                      "the caller aborted before checkpoint C4 and post-execute accepted a "
                      f"result the cancellation publishes over (stage 'post-execute · C4'): the "
                      f"caller must get {expected!r}, got {text(got)!r}",
                      expected, text(got))  # fmt: skip


@_once
def _abort_known(record: Record, want: Want) -> bool:
    """Whether the record says when the caller aborted after entry, if it did: the setup aborts
    it never after entry, or the environment says when (``caller_aborted``)."""
    s = want.scenario
    never = s.entry_caller != "live" or s.cancel in ("never", "before_entry", "in_entry")
    return never or record.has("caller_aborted")


@_once
def _applied(record: Record, want: Want | None) -> bool:
    assert want is not None
    return (
        want.scenario.post in ("block", "accept", "accept_content", "accept_contexts")
        and _decided(record, want)
        and _abort_known(record, want)
        and not _c4(record, want)
    )


@check(
    "R7",
    RECORD,
    "post_decision",
    reads=("post_received", "returned", "call_entry"),
    levels=frozenset({"trace"}),
    when=(_applied, "post-execute blocked or accepted"),
    needs_setup=True,
)
def post_decision_applied(record: Record, want: Want | None) -> Failure | None:
    """The caller gets what post-execute decided on the result it received: a block's
    feedback, or that result accepted (its content rewritten, if post-execute rewrote it)."""
    if not _applied(record, want):
        return None
    assert want is not None
    decided = want.scenario.post
    j = record.at("returned")[0]
    got = record.lines[j]["result"]
    if decided == "block":
        if is_error(got) and text(got) == BLOCK_TEXT:
            return None
        return Failure.of(post_decision_applied, j, "post_decision",
                          f"post-execute blocked, the caller got {text(got)!r}",
                          BLOCK_TEXT, text(got))  # fmt: skip
    _, post_in = received(record)
    assert post_in is not None
    content = (
        [dict(text_block(REWRITTEN))] if decided == "accept_content" else post_in.get("content")
    )
    if (
        got.get("content") == content
        and is_error(got) == is_error(post_in)
        and got.get("error") == post_in.get("error")
    ):
        return None
    rewrote = " and rewrote" * (decided == "accept_content")
    return Failure.of(
        post_decision_applied,
        j,
        "post_decision",
        f"post-execute accepted{rewrote} {text(post_in)!r} (error: {is_error(post_in)}), the "
        f"caller got {canonical_json(got)}",
        canonical_json(content),
        canonical_json(got.get("content")),
    )


# ------------------------------------------------------------------------------------------------
# Contexts: R29
# ------------------------------------------------------------------------------------------------

_WITHOUT_CONTEXTS: Final = frozenset(
    {"args_error", "pre_error", "around_error", "post_error", "serialization_error"}
)
"""Outcomes whose result R29 says carries no context at all: the final-route errors, a
post-execute throw and a failed final snapshot (the contract file has no field for this)."""


@_once
def _published(record: Record, want: Want | None) -> bool:
    return any(o is not None for o in path_facts(record).published)


def _expected_contexts(record: Record, want: Want, outcome: str) -> list[Any]:
    """The contexts R29 gives a result of ``outcome`` in this setup: a block's own; none on the
    final route; else what each body run deferred once the call reached checkpoint C3, then
    what post-execute added when it accepted."""
    s = want.scenario
    if outcome == "blocked":
        return [BLOCK_CONTEXT]
    if outcome in _WITHOUT_CONTEXTS:
        return []
    out: list[Any] = []
    if record.has("around_settled") and s.body.startswith("defer_"):
        out += list(DEFERRED) * len(record.starts())
    if record.has("post_accept") and s.post == "accept_contexts":
        out.append(POST_CONTEXT)
    return out


@check(
    "R29",
    RECORD,
    "contexts",
    reads=("returned", "call_entry"),
    levels=frozenset({"trace"}),
    when=(_published, "the call published a result"),
    needs_setup=True,
)
def contexts_kept_ordered_and_dropped(record: Record, want: Want | None) -> Failure | None:
    """The result's ``additionalContexts`` are what R29 keeps, orders and drops for the outcome
    the call published."""
    if not _published(record, want):
        return None
    assert want is not None
    j = record.at("returned")[0]
    got = list(record.lines[j]["result"].get("additionalContexts") or ())
    published = sorted(o for o in path_facts(record).published if o is not None)
    wanted = [_expected_contexts(record, want, o) for o in published]
    if got in wanted:
        return None
    return Failure.of(contexts_kept_ordered_and_dropped, j, "contexts",
                      f"contexts {got}, the contract says {wanted[0]}", wanted[0], got)  # fmt: skip


# ------------------------------------------------------------------------------------------------
# Which cancellation a result is, where it is the registry's: R17, R25, R41
# ------------------------------------------------------------------------------------------------

PRE_ABORTING: Final = frozenset({"before_entry", "in_entry"})
"""Cancellation points that make a pre-aborted entry: entry captures the caller signal after
the argument snapshot (R11), so an abort during the snapshot is seen as one."""


def pre_aborted(want: Want) -> bool:
    """The setup aborts the caller before entry captured its signal."""
    s = want.scenario
    return s.caller == "aborted" or s.cancel in PRE_ABORTING


@functools.cache
def _cancellations(revision: str) -> frozenset[str]:
    """The texts of the revision's cancellation outcomes (``cancellation = true`` in
    contract.toml)."""
    table = revision_table(revision)
    return frozenset(table.texts[o.name] for o in table.outcomes if o.cancellation)


@_once
def _seed_pre_aborted_entry(record: Record, want: Want | None) -> bool:
    assert want is not None
    return record.revision == "seed" and pre_aborted(want) and want.scenario.args == "ok"


@check(
    "R25",
    RECORD,
    "post_received",
    reads=("post_received", "returned", "call_entry"),
    levels=frozenset({"trace"}),
    when=(_seed_pre_aborted_entry, "the seed's pre-aborted entry, with arguments it can take"),
    needs_setup=True,
)
def pre_aborted_entry_gets_no_cancellation(record: Record, want: Want | None) -> Failure | None:
    """A call entered with its caller already aborted (seed) runs every stage: none of the
    registry's cancellations replaces what it produced -- neither what post-execute receives
    nor what the caller gets."""
    if not _seed_pre_aborted_entry(record, want):
        return None
    mine = _cancellations(record.revision)
    i, post_in = received(record)
    j = record.at("returned")[0] if record.has("returned") else None
    got = None if j is None else record.lines[j]["result"]
    for what, at, result in (("post-execute received", i, post_in), ("the caller got", j, got)):
        if at is not None and result is not None and text(result) in mine:
            return Failure.of(pre_aborted_entry_gets_no_cancellation, at, "post_received",
                              f"a pre-aborted entry gets none of the registry's cancellations "
                              f"(seed), yet {what} {text(result)!r}",
                              "no cancellation", text(result))  # fmt: skip
    return None


def _dispatch_steps(record: Record) -> int | None:
    """How many contract transitions the call had taken when it took its first base dispatch,
    that one included (None: it never dispatched)."""
    return _first_steps(record, "base_dispatch")


@_once
def _aborted_before_dispatch(record: Record, want: Want | None) -> bool:
    """The environment aborted the caller after entry, before the call's first base dispatch
    (checkpoint C2 reads the fused signal there, before the tool is looked up)."""
    assert want is not None
    s = want.scenario
    if s.entry_caller != "live" or pre_aborted(want) or not record.has("caller_aborted"):
        return False
    at = record.of("caller_aborted")[0].get("steps")  # optional: an adapter may not count them
    dispatched = _dispatch_steps(record)
    return at is not None and dispatched is not None and at < dispatched


@check(
    "R17",
    RECORD,
    "post_received",
    reads=("post_received", "caller_aborted", "call_entry"),
    levels=frozenset({"trace"}),
    when=(_aborted_before_dispatch, "the caller aborted after entry, before base dispatch"),
    needs_setup=True,
)
def c2_cancels_before_the_tool_is_looked_up(record: Record, want: Want | None) -> Failure | None:
    """Once the caller aborted before base dispatch, what reaches post-execute from dispatch
    is the cancellation: not UNKNOWN_TOOL, nor anything a body could say."""
    if not _aborted_before_dispatch(record, want):
        return None
    i, post_in = received(record)
    if post_in is None or text(post_in) in _cancellations(record.revision):
        return None
    return Failure.of(c2_cancels_before_the_tool_is_looked_up, i, "post_received",
                      "the caller aborted before base dispatch, yet post-execute received "
                      f"{text(post_in)!r}, not the cancellation",
                      "the cancellation", text(post_in))  # fmt: skip


@_once
def _revised_cancellation(record: Record, want: Want | None) -> bool:
    """Revised, no wrapper retrying, and post-execute received one of the cancellations."""
    assert want is not None
    if record.revision != "revised" or want.scenario.retries:
        return False
    post_in = received(record)[1]
    return post_in is not None and text(post_in) in _cancellations(record.revision)


@check(
    "R41",
    RECORD,
    "post_received",
    reads=("post_received", "call_entry"),
    levels=frozenset({"trace"}),
    when=(_revised_cancellation, "revised: post-execute received a cancellation"),
    needs_setup=True,
)
def cancellation_says_whether_the_body_ran(record: Record, want: Want | None) -> Failure | None:
    """Revised: the cancellation is ABORTED exactly when the body was invoked, otherwise
    ABORTED_BEFORE_DISPATCH."""
    if not _revised_cancellation(record, want):
        return None
    i, post_in = received(record)
    invoked = bool(record.starts())
    texts = revision_table(record.revision).texts
    wanted = texts["aborted" if invoked else "aborted_before_dispatch"]
    if text(post_in) == wanted:
        return None
    return Failure.of(cancellation_says_whether_the_body_ran, i, "post_received",
                      f"the body was {'' if invoked else 'not '}invoked: the cancellation is "
                      f"{wanted!r}, post-execute received {text(post_in)!r}",
                      wanted, text(post_in))  # fmt: skip


# ------------------------------------------------------------------------------------------------
# A late success at body level: R18
# ------------------------------------------------------------------------------------------------

SUCCEEDING: Final = frozenset({"success", "success_meta", "bad_meta", "defer_success"})
"""Bodies that return a success when they settle."""


@_once
def _settled_aborted(record: Record, want: Want | None) -> bool:
    """A body that succeeds settled once its signal had aborted (the environment saw it), and
    no wrapper retries (a later attempt may succeed) nor did the seed's pre-aborted entry (R25
    disables every replacement).  Where the replayed path says which outcome the call held on
    entering post-policy, :func:`post_receives_the_outcome_held` judges what post-execute
    received (citing that outcome's rule); this check is the judgement without the contract's
    machine (a perturbed table, ``verify --spec-mutants``)."""
    assert want is not None
    s = want.scenario
    if s.body not in SUCCEEDING or s.retries or pre_aborted(want) or _entering(record, want):
        return False
    return any(line["aborted"] for _, line in record.body_signals("settle"))


@check(
    "R18",
    RECORD,
    "post_received",
    reads=("body_signal", "post_received", "call_entry"),
    levels=frozenset({"trace"}),
    when=(_settled_aborted, "a body succeeded after its signal aborted"),
    needs_setup=True,
)
def late_body_success_is_aborted(record: Record, want: Want | None) -> Failure | None:
    """A body success that settles after its fused signal aborted becomes ABORTED at body level,
    so what comes out of the around chain is an error -- that ABORTED, TOOL_TIMEOUT, or a
    wrapper's failure on the final route -- and post-execute never receives a success."""
    if not _settled_aborted(record, want):
        return None
    i, post_in = received(record)
    if post_in is None or is_error(post_in):
        return None
    return Failure.of(late_body_success_is_aborted, i, "post_received",
                      "the body succeeded after its signal aborted, yet post-execute received a "
                      f"success ({text(post_in)!r}), not ABORTED",
                      "an error", text(post_in))  # fmt: skip
