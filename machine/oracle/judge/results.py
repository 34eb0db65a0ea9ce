"""The result checks: whether a published result agrees with the outcome a possible state holds.

The trace checker (:mod:`toolcancel.oracle.judge.checker`) asks these of every ``result`` line, for
each
state the contract allows the call to be in (:func:`result_death`); a state whose outcome the
result does not fit dies with the first broken rule.  They are step checks (the one registry's
``step`` vantage, on ``result`` steps), asked in order: the outcome's kind (error
or success, its code), then its shape -- the registry's exact texts, ``meta``, contexts on the final
route, and the error shape of the revision.

A trace does not say whether a post-execute ``accept`` supplied content, so once one has
(``Branch.free``) the content is not compared with the registry's text; the revised contract's
``error.message`` survives an accept, so there the text is still checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from ...contract.loader import Transition
from ...contract.results import block_message, canonical_json
from .registry import CONTRACT, STEP, check
from .steps import Branch, Death, Replay, judge_step

__all__ = ["describe", "describe_outcome", "result_death"]

CANCEL_CODES: Final = frozenset({"ABORTED", "ABORTED_BEFORE_DISPATCH"})
_REGISTRY_AUTHORED: Final = frozenset({"denied", "blocked", "args_error", "serialization_error"})
_THROWN: Final = frozenset({"body_error", "pre_error", "around_error", "post_error"})
_WRAPPER: Final = frozenset({"wrapper_success", "wrapper_error"})
_META_OK: Final = frozenset({"body_success", *_WRAPPER})
_EXACT: Final = {
    "aborted": "aborted",
    "aborted_before_dispatch": "aborted_before_dispatch",
    "args_error": "args_not_serializable",
    "serialization_error": "result_not_serializable",
}
_JS_NUMBER: Final = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:e[+-][0-9]+)?"


def result_death(replay: Replay, b: Branch, res: Mapping[str, Any]) -> Death | None:
    """Whether the published result agrees with the outcome ``b`` holds (None: it does)."""
    return judge_step(replay, "result", b, res)


# ------------------------------------------------------------------------------------------------
# The outcome's kind
# ------------------------------------------------------------------------------------------------


@check("R31", STEP, "result")
def has_an_outcome(replay: Replay, b: Branch, res: Mapping[str, Any]) -> str | None:
    """A result is published only once the contract decided an outcome (total for foreign
    contracts: the machine publishes only with one)."""
    if b.cs.outcome is None:
        return "A result was published although the contract decided no outcome."
    return None


def _mismatch(replay: Replay, b: Branch, res: Mapping[str, Any]) -> bool:
    kind = replay.outcomes[b.cs.outcome or ""]
    code = error_code(res, replay.revised)
    mismatch = res.get("isError") is not kind.is_error
    if kind.code is not None:
        return mismatch or code != kind.code
    # a result the registry authors without a code carries none
    return mismatch or (b.cs.outcome in _REGISTRY_AUTHORED and code is not None)


@check(CONTRACT, STEP, "result")
def of_the_decided_kind(replay: Replay, b: Branch, res: Mapping[str, Any]) -> Death | None:
    """The result is of the kind (error or success, and its code) the contract decided: cite
    the rule of the decision that made it, or the outcome's rule."""
    if not _mismatch(replay, b, res):
        return None
    kind = replay.outcomes[b.cs.outcome or ""]
    t = replay.transitions.get(b.decided)
    seen_cancel = error_code(res, replay.revised) in CANCEL_CODES
    expected_cancel = kind.code in CANCEL_CODES
    seen_success = res.get("isError") is False
    over = published_over(replay, b)
    rule = (
        decisive_rule(replay, t, seen_cancel, expected_cancel, seen_success, over)
        if t
        else kind.rule
    )
    where = f"decided at {b.decided_event}{produced_at(replay, b)}" if t else "the outcome"
    return Death(
        rule,
        f"The contract's outcome for this call is {describe_outcome(kind)}, {where} "
        f"({rule}: {replay.summary(rule)}); the published result is {describe(res)}.",
    )


def published_over(replay: Replay, b: Branch) -> str | None:
    """The contract's ``publishes_over_rule`` when the step that decided ``b``'s outcome
    published a cancellation over a failure the call held, and its transition carries that rule
    (C3, C4 where a cancellation replaces any result: which results it replaces is that rule's
    data, ``publishes_over``); else ``None``, and the result checks cite as they always did."""
    t = replay.transitions.get(b.decided)
    rule = replay.contract.publishes_over_rule
    over = b.decided_over
    if t is None or over is None or t.outcome not in replay.table.cancellations:
        return None
    if not replay.table.outcome_is_error.get(over, False):
        return None
    return rule if rule in t.rules else None


def produced_at(replay: Replay, b: Branch) -> str:
    """Where the step that decided ``b``'s outcome was taken: `` in the stage <title>``."""
    for stage in replay.contract.stages:
        if b.decided_in in stage.states:
            return f" in the stage {stage.title(replay.table.name)!r}"
    return ""


def decisive_rule(
    replay: Replay,
    t: Transition,
    seen_cancel: bool,
    expected_cancel: bool,
    seen_success: bool,
    over: str | None = None,
) -> str:
    """The rule to cite when the result is of another kind than ``t`` decided (``over``: the
    rule of a cancellation published over an earlier result, :func:`published_over`)."""
    if seen_cancel and expected_cancel:  # the right cancellation with the wrong code
        return replay.code_rule or replay.first_rule(t)
    if over is not None and not seen_cancel:
        return over  # the result the cancellation had to replace was published instead
    row = replay.table.precedence_row(t.precedence) if t.precedence is not None else None
    if seen_cancel and row is not None:
        # A revision-specific rule of the row is the one that ranks this outcome above
        # cancellation (revised: a denial or a pre-stage failure beats it, R43).
        for r in row.rules:
            if r in replay.specific and r in replay.rule_ids:
                return r
    late = replay.contract.publishes_over_rule
    if expected_cancel and seen_success and late in t.rules:
        return late  # a success where cancellation had to prevent one: a late success
    if row is not None:
        for r in t.rules:
            if r in row.rules:
                return r
    return replay.first_rule(t)


# ------------------------------------------------------------------------------------------------
# Its shape
# ------------------------------------------------------------------------------------------------


def _authored_text(replay: Replay, b: Branch) -> bool:
    outcome = b.cs.outcome
    return outcome is not None and not b.free and expected_text(replay, outcome, b) is not None


def _meta_refused(replay: Replay, b: Branch) -> bool:
    return b.cs.outcome not in _META_OK


def _seed_coded(replay: Replay, b: Branch) -> bool:
    kind = replay.outcomes.get(b.cs.outcome or "")
    if kind is None or replay.revised:
        return False
    return kind.code is not None or kind.name in _REGISTRY_AUTHORED


def _seed_thrown(replay: Replay, b: Branch) -> bool:
    return not replay.revised and b.cs.outcome in _THROWN


@check(
    CONTRACT,
    STEP,
    "result",
    when=(_authored_text, "the registry authors the outcome's text and no accept supplied it"),
)
def reads_the_registrys_text(replay: Replay, b: Branch, res: Mapping[str, Any]) -> Death | None:
    """A result the registry authors reads its exact text (the outcome's rule)."""
    outcome = b.cs.outcome or ""
    kind = replay.outcomes[outcome]
    expected = expected_text(replay, outcome, b)
    text = only_text(res)
    if expected is not None and not b.free and (text is None or not expected[0](text)):
        rule = published_over(replay, b) or kind.rule
        return Death(
            rule,
            f"A {outcome} result{produced_at(replay, b)} must read {expected[1]} ({rule}: "
            f"{replay.summary(rule)}); it reads {quote(res)}.",
        )
    return None


@check(
    "R4", STEP, "result", when=(_meta_refused, "the outcome is not a body's or a wrapper's result")
)
def no_meta_on_a_cancellation(replay: Replay, b: Branch, res: Mapping[str, Any]) -> str | None:
    """A cancellation's result carries no meta."""
    outcome = b.cs.outcome or ""
    if "meta" in res and outcome not in _META_OK and replay.outcomes[outcome].code in CANCEL_CODES:
        return f"A {outcome} result carries meta; only a body's success does."
    return None


@check(
    "R1", STEP, "result", when=(_meta_refused, "the outcome is not a body's or a wrapper's result")
)
def meta_only_on_a_bodys_success(
    replay: Replay, b: Branch, res: Mapping[str, Any]
) -> str | None:
    """Only a body's (or a wrapper's) result carries meta."""
    outcome = b.cs.outcome or ""
    if "meta" in res and outcome not in _META_OK:
        return f"A {outcome} result carries meta; only a body's success does."
    return None


@check(
    "R29", STEP, "result", when=(Replay.final_route, "the call is on the final route")
)
def no_contexts_on_the_final_route(
    replay: Replay, b: Branch, res: Mapping[str, Any]
) -> str | None:
    """Contexts never enter final-route results."""
    if "additionalContexts" in res and replay.final_route(b):
        return (
            f"A {b.cs.outcome} result on the final route carries additionalContexts; contexts "
            "never enter final-route results (they are lost on pre-stage, around and post "
            "failures and on a failed snapshot)."
        )
    return None


@check(
    CONTRACT,
    STEP,
    "result",
    when=(_seed_coded, "seed: the outcome has a code, or the registry authors it"),
)
def seed_error_of_the_outcome(
    replay: Replay, b: Branch, res: Mapping[str, Any]
) -> Death | None:
    """Seed: a coded outcome carries error {name, code}; a result the registry authors without a
    code carries no error key (the outcome's rule)."""
    if replay.revised:
        return None
    outcome = b.cs.outcome or ""
    kind, error = replay.outcomes[outcome], res.get("error")
    if kind.code is not None:
        if not (
            isinstance(error, dict)
            and error.keys() == {"name", "code"}
            and isinstance(error["name"], str)
        ):
            return Death(
                kind.rule,
                f"A {outcome} result carries error {{name, code: {kind.code}}}; "
                f"it has {quote_error(error)}.",
            )
    elif outcome in _REGISTRY_AUTHORED and error is not None:
        return Death(
            kind.rule,
            f"A {outcome} result has no error key in the seed contract "
            f"({kind.rule}: {replay.summary(kind.rule)}); it has {quote_error(error)}.",
        )
    return None


@check(
    "R3", STEP, "result", when=(_seed_thrown, "seed: the outcome is a thrown value's")
)
def seed_thrown_error(replay: Replay, b: Branch, res: Mapping[str, Any]) -> str | None:
    """Seed: a thrown value's error key is {name, code} of a structured error."""
    error = res.get("error")
    if replay.revised or b.cs.outcome not in _THROWN or error is None or _seed_error_ok(error):
        return None
    return (
        f"A thrown value's error key is {{name, code}} of a structured error; "
        f"it is {quote_error(error)}."
    )


def _revised_error(replay: Replay, b: Branch) -> bool:
    """Whether the revised error shape applies: a registry-authored error result."""
    kind = replay.outcomes.get(b.cs.outcome or "")
    return replay.revised and kind is not None and kind.name not in _WRAPPER and kind.is_error


def _message(res: Mapping[str, Any]) -> str | None:
    error = res.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        message: str = error["message"]
        return message
    return None


@check(
    "R44", STEP, "result", when=(_revised_error, "revised: a registry-authored error result")
)
def revised_error_shape(replay: Replay, b: Branch, res: Mapping[str, Any]) -> str | None:
    """Revised: every error result the registry authors carries error {message, info?}, info
    {name, code} exactly where the outcome has a code."""
    if not _revised_error(replay, b):
        return None
    outcome = b.cs.outcome or ""
    kind, error = replay.outcomes[outcome], res.get("error")
    if _message(res) is None:
        return (
            f"In the revised contract every error result the registry authors carries error "
            f"{{message, info?}}; this {outcome} result has {quote_error(error)}."
        )
    assert isinstance(error, dict)
    info = error.get("info")
    if set(error) - {"message", "info"}:
        return f"error has unknown keys: {quote_error(error)}."
    if kind.code is not None:
        if not (
            isinstance(info, dict)
            and info.keys() == {"name", "code"}
            and isinstance(info["name"], str)
        ):
            return (
                f"A {outcome} result carries error.info {{name, code: {kind.code}}}; it has "
                f"{quote_error(error)}."
            )
    elif outcome in _REGISTRY_AUTHORED and info is not None:
        return f"A {outcome} result has no error.info; it has {info!r}."
    return None


@check(
    CONTRACT, STEP, "result", when=(_revised_error, "revised: a registry-authored error result")
)
def revised_message_reads_the_text(
    replay: Replay, b: Branch, res: Mapping[str, Any]
) -> Death | None:
    """Revised: error.message is the registry's text without 'Error: ' (the outcome's rule)."""
    message = _message(res)
    if not _revised_error(replay, b) or message is None:
        return None
    outcome = b.cs.outcome or ""
    kind = replay.outcomes[outcome]
    expected = expected_text(replay, outcome, b)
    if expected is not None and not expected[0]("Error: " + message):
        return Death(
            kind.rule,
            f"A {outcome} result must read {expected[1]}, so its error.message is that text "
            f"without 'Error: ' ({kind.rule}: {replay.summary(kind.rule)}); it is "
            f"{short(message)!r}.",
        )
    return None


@check(
    "R44", STEP, "result", when=(_revised_error, "revised: a registry-authored error result")
)
def revised_message_is_the_feedback(
    replay: Replay, b: Branch, res: Mapping[str, Any]
) -> str | None:
    """Revised: a block's error.message is its feedback; any other's is the result's text
    without 'Error: '."""
    message = _message(res)
    if not _revised_error(replay, b) or message is None:
        return None
    outcome, text = b.cs.outcome, only_text(res)
    if outcome == "blocked" and isinstance(res.get("content"), list):
        want = block_message(res["content"], replay.contract.texts)
        if message != want:
            return (
                f"A block's error.message is its feedback, a line per block (a text block's "
                f"text, any other '[<type> content]'), nothing stripped: {short(want)!r}; "
                f"it is {short(message)!r}."
            )
    if not b.free and outcome != "blocked" and text is not None:
        if message != text.removeprefix("Error: "):
            return (
                f"error.message is the result's text without 'Error: ' "
                f"({short(text.removeprefix('Error: '))!r}); it is {short(message)!r}."
            )
    return None


# ------------------------------------------------------------------------------------------------
# The registry's texts
# ------------------------------------------------------------------------------------------------

def expected_text(
    replay: Replay, outcome: str, b: Branch
) -> tuple[Callable[[str], bool], str] | None:
    """How the registry's text for ``outcome`` must read: a test and its description."""
    texts = replay.contract.texts
    want = _EXACT.get(outcome)
    if want is not None:
        exact = texts[want]
        return (lambda t: t == exact), f"exactly {exact!r}"
    build = _PATTERNS.get(outcome)
    if outcome == "denied":
        build = _DENIAL_PATTERNS.get(b.decided_event, _any_error)
    if build is None:
        return None
    pattern = replay.patterns.get(build)
    if pattern is None:
        pattern = replay.patterns[build] = build(texts)
    return (lambda t: pattern.fullmatch(t) is not None), _pattern_text(outcome, b, texts)


def _template(key: str, prefix: str = "") -> Any:
    def build(texts: Mapping[str, str]) -> re.Pattern[str]:
        parts = re.split(r"(\{\w+\})", texts[key])
        regex = "".join(
            (_JS_NUMBER if p == "{ms}" else ".*") if p.startswith("{") else re.escape(p)
            for p in parts
        )
        return re.compile(re.escape(prefix) + regex, re.DOTALL)

    return build


def _any_error(texts: Mapping[str, str]) -> re.Pattern[str]:
    return re.compile(r"Error: .*", re.DOTALL)


_PATTERNS: Final = {
    "unknown_tool": _template("unknown_tool"),
    "tool_timeout": _template("tool_timeout"),
    **dict.fromkeys(_THROWN, _any_error),
}
_DENIAL_PATTERNS: Final = {
    "approval_rejected": _template("approval_rejected", "Error: "),
    "approval_cancelled": _template("approval_cancelled", "Error: "),
    "approval_unavailable": _template("approval_unavailable", "Error: "),
}


def _pattern_text(outcome: str, b: Branch, texts: Mapping[str, str]) -> str:
    if outcome == "denied" and b.decided_event in _DENIAL_PATTERNS:
        return repr("Error: " + texts[b.decided_event])
    if outcome in ("unknown_tool", "tool_timeout"):
        return repr(texts[outcome])
    return "'Error: <message>'"


def _seed_error_ok(error: Any) -> bool:
    return (
        isinstance(error, dict)
        and error.keys() == {"name", "code"}
        and all(isinstance(v, str) for v in error.values())
    )


# ------------------------------------------------------------------------------------------------
# Describing a result
# ------------------------------------------------------------------------------------------------


def error_code(res: Mapping[str, Any], revised: bool) -> str | None:
    error = res.get("error")
    if not isinstance(error, dict):
        return None
    if revised:
        error = error.get("info")
        if not isinstance(error, dict):
            return None
    code = error.get("code")
    return code if isinstance(code, str) else None


def only_text(res: Mapping[str, Any]) -> str | None:
    content = res.get("content")
    if (
        isinstance(content, list)
        and len(content) == 1
        and isinstance(content[0], dict)
        and content[0].get("type") == "text"
        and isinstance(content[0].get("text"), str)
    ):
        text: str = content[0]["text"]
        return text
    return None


def quote(res: Mapping[str, Any]) -> str:
    text = only_text(res)
    if text is None:
        return "content " + short(canonical_json(res.get("content")))
    return repr(short(text))


def quote_error(error: Any) -> str:
    if error is None:
        return "no error key"
    try:
        return "error " + short(canonical_json(error))
    except Exception:
        return f"error {error!r}"


def short(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def describe_outcome(kind: Any) -> str:
    what = "an error" if kind.is_error else "a success"
    code = f" with code {kind.code}" if kind.code else ""
    return f"{kind.name} ({what}{code})"


def describe(res: Mapping[str, Any]) -> str:
    """A short description of a result object for explanations."""
    is_error = res.get("isError")
    what = "an error" if is_error is True else "a success" if is_error is False else "a result"
    code = error_code(res, False) or error_code(res, True)
    return f"{what}{' with code ' + code if code else ''} ({quote(res)})"
