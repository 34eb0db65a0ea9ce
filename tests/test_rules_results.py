"""Rules R1-R9: the shapes and texts of results.

A result is what a model reads of a call, so its bytes are part of the contract: the same call
must give the same canonical JSON in every implementation.  Each test therefore compares the
whole canonical JSON of a result produced by a real call (not a builder in isolation, except for
the shapes other components own: TOOL_TIMEOUT and the skipped-sibling result), against text
written out here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from support import (
    ABORTED_ERROR,
    Body,
    Gate,
    Harness,
    aborted,
    canon,
    controller,
    expected,
    ok,
    text,
)
from toolcancel import (
    Accept,
    Allow,
    Approval,
    ApprovalRequest,
    Ask,
    Block,
    Deny,
    Execution,
    FrozenDict,
    ToolError,
    ToolOutput,
    ToolRegistry,
    ToolResult,
)

# ------------------------------------------------------------------------------------------------
# R1 envelope, R2 body success
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R1", "R2")
async def test_a_list_return_is_a_success_with_no_optional_keys() -> None:
    h = Harness()
    h.body("t", [text("hello"), {"type": "image", "data": "AA=="}])
    call = await h.call("t")
    assert call.json == canon(
        {"content": [text("hello"), {"type": "image", "data": "AA=="}], "isError": False}
    )
    assert set(call.result.to_data()) == {"content", "isError"}


@pytest.mark.rules("R2")
async def test_a_tuple_return_is_a_list_return() -> None:
    h = Harness()
    h.body("t", (text("a"), text("b")))
    assert (await h.call("t")).json == canon({"content": [text("a"), text("b")], "isError": False})


@pytest.mark.rules("R1", "R2")
async def test_an_output_with_meta_carries_meta_and_without_meta_omits_it() -> None:
    h = Harness()
    h.body("with", ToolOutput([text("x")], meta={"rows": 3, "more": False}))
    h.body("without", ToolOutput([text("y")]))
    assert (await h.call("with")).json == ok("x", meta={"more": False, "rows": 3})
    without = await h.call("without")
    assert without.json == ok("y")
    assert "meta" not in without.result.to_data()


@pytest.mark.rules("R1", "R30")
async def test_the_published_result_is_deep_frozen() -> None:
    h = Harness()
    h.body("t", ToolOutput([{"type": "text", "text": "x", "extra": [1, 2]}], meta={"k": [1]}))
    result = (await h.call("t")).result
    block = result.content[0]
    assert isinstance(result.content, tuple)
    assert isinstance(block, FrozenDict)
    assert block["extra"] == (1, 2)
    with pytest.raises(TypeError):
        block["text"] = "changed"  # type: ignore[index]
    with pytest.raises(AttributeError):
        result.is_error = True  # type: ignore[misc]
    assert isinstance(result.meta, FrozenDict) and result.meta["k"] == (1,)
    assert _is_frozen_json(result.content) and _is_frozen_json(result.meta)


@pytest.mark.rules("R1", "R7")
async def test_empty_contexts_are_omitted_not_empty_lists() -> None:
    h = Harness()
    h.body("t")

    async def accept_nothing(view: Execution, result: ToolResult) -> Accept:
        return Accept(contexts=())

    h.post(accept_nothing)
    call = await h.call("t")
    assert call.json == ok()
    assert "additionalContexts" not in call.result.to_data()


@pytest.mark.rules("R2")
async def test_a_body_returning_something_else_is_a_tool_error() -> None:
    """A body that returns neither a list nor a ToolOutput broke its contract: that is its own
    failure, normalized like a throw (the model sees why)."""
    h = Harness()
    h.body("t", "just a string")
    call = await h.call("t")
    assert call.result.is_error
    assert call.result.text.startswith("Error: a tool body must return a list")
    assert call.step("body_raise").outcome == "body_error"


# ------------------------------------------------------------------------------------------------
# R3 thrown-value normalization
# ------------------------------------------------------------------------------------------------


class QuotaExceeded(ToolError):
    """A structured failure of some capability: its class name is the error name."""


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class UnprintableStructured(ToolError):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class UninspectableCode(ToolError):
    """A structured error whose code cannot even be read."""

    @property  # type: ignore[override]
    def code(self) -> str:
        raise RuntimeError("the code is a mystery")

    @code.setter
    def code(self, value: str) -> None:
        pass


class CodeNeverSet(ToolError):
    """A structured error whose constructor never set a code."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)


@pytest.mark.rules("R3")
@pytest.mark.parametrize(
    ("thrown", "want"),
    [
        (RuntimeError("disk full"), expected("Error: disk full")),
        (ValueError(), expected("Error: ")),
        (
            QuotaExceeded("quota exceeded", code="QUOTA"),
            expected("Error: quota exceeded", error={"name": "QuotaExceeded", "code": "QUOTA"}),
        ),
        (
            ToolError("plain structured", code="PLAIN"),
            expected("Error: plain structured", error={"name": "ToolError", "code": "PLAIN"}),
        ),
        (Unprintable(), expected("Error: <unprintable thrown value>")),
        (
            UnprintableStructured("x", code="C"),
            expected(
                "Error: <unprintable thrown value>",
                error={"name": "UnprintableStructured", "code": "C"},
            ),
        ),
        (UninspectableCode("odd", code="C"), expected("Error: odd")),
        (CodeNeverSet("no code"), expected("Error: no code")),
    ],
    ids=[
        "plain",
        "empty-message",
        "structured-subclass",
        "structured-base",
        "unprintable",
        "unprintable-structured",
        "uninspectable-code",
        "code-never-set",
    ],
)
async def test_a_thrown_value_becomes_an_error_result(thrown: Exception, want: str) -> None:
    h = Harness()
    h.body("t", raises=thrown)
    call = await h.call("t")
    assert call.json == want
    assert call.step("body_raise").outcome == "body_error"


@pytest.mark.rules("R3", "R29")
async def test_a_thrown_value_carries_no_meta_and_its_own_contexts_only_come_from_deferral() -> (
    None
):
    h = Harness()
    h.body("t", raises=RuntimeError("boom"), defer=[{"source": "s"}])
    call = await h.call("t")
    assert call.json == expected("Error: boom", contexts=[{"source": "s"}])


# ------------------------------------------------------------------------------------------------
# R4 canonical ABORTED
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R4")
async def test_aborted_is_the_canonical_text_and_code_and_drops_content_and_meta() -> None:
    h = Harness()
    gate = Gate()
    h.body("t", ToolOutput([text("late")], meta={"secret": 1}), gate=gate, defer=[{"n": 1}])
    c, signal = controller()
    task = h.start("t", signal=signal)
    await gate.reached()
    c.abort()
    gate.open()
    call = await task
    assert call.json == (
        '{"additionalContexts":[{"n":1}],"content":[{"text":"Error: tool call aborted",'
        '"type":"text"}],"error":{"code":"ABORTED","name":"AbortError"},"isError":true}'
    )
    assert call.result.meta is None


@pytest.mark.rules("R4", "R17")
async def test_a_wrapper_supplied_abort_gives_the_same_aborted_shape() -> None:
    h = Harness()
    body = h.body("t")

    async def dead_slot(view: Execution, next_: Any) -> ToolResult:
        c, signal = controller()
        c.abort("wrapper deadline")
        view.signal = signal
        return await next_()

    h.registry.add_around(dead_slot)
    call = await h.call("t")
    assert call.json == aborted()
    assert not body.started


# ------------------------------------------------------------------------------------------------
# R5 denial results
# ------------------------------------------------------------------------------------------------


def _asker(reason: str | None = None) -> Any:
    async def decide(view: Execution) -> Ask:
        return Ask(reason)

    return decide


@pytest.mark.rules("R5")
async def test_a_deny_reason_is_the_text_and_there_is_no_error_key() -> None:
    h = Harness()
    body = h.body("t")

    async def deny(view: Execution) -> Deny:
        return Deny("not on Sundays")

    h.pre(deny)
    call = await h.call("t")
    assert call.json == expected("Error: not on Sundays")
    assert "error" not in call.result.to_data()
    assert not body.started


@pytest.mark.rules("R5")
@pytest.mark.parametrize(
    ("reason", "want"),
    [
        ("the admin must approve", "Error: the admin must approve"),
        (None, 'Error: tool "t" requires approval (not yet supported)'),
    ],
)
async def test_ask_without_a_seam_denies(reason: str | None, want: str) -> None:
    h = Harness()
    body = h.body("t")
    h.pre(_asker(reason))
    call = await h.call("t", agent="a1")
    assert call.json == expected(want)
    assert not body.started


@pytest.mark.rules("R5")
async def test_ask_without_an_agent_denies_and_never_asks_the_seam() -> None:
    h = Harness()
    body = h.body("t")
    asked: list[ApprovalRequest] = []

    async def seam(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return Approval.APPROVED

    h.registry.set_approval(seam)
    h.pre(_asker("please"))
    call = await h.call("t")
    assert call.json == expected(
        'Error: tool "t" requires approval, but the call has no agent to route it through'
    )
    assert asked == []
    assert not body.started


@pytest.mark.rules("R5")
@pytest.mark.parametrize(
    ("answer", "want"),
    [
        (Approval.REJECTED, 'Error: the user rejected tool "t"'),
        (Approval.CANCELLED, 'Error: approval for tool "t" was cancelled'),
        (
            Approval.UNAVAILABLE,
            'Error: tool "t" requires approval, but no approval channel is available',
        ),
    ],
)
async def test_approval_denials(answer: Approval, want: str) -> None:
    h = Harness()
    body = h.body("t")
    asked: list[ApprovalRequest] = []

    async def seam(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return answer

    h.registry.set_approval(seam)
    h.pre(_asker("why not"))
    call = await h.call("t", {"x": 1}, agent="a1", call_id="c-7")
    assert call.json == expected(want)
    assert not body.started
    [request] = asked
    assert (request.call_id, request.name, request.agent, request.reason) == (
        "c-7",
        "t",
        "a1",
        "why not",
    )
    assert request.arguments == {"x": 1}


@pytest.mark.rules("R5")
async def test_approval_approved_runs_the_body() -> None:
    h = Harness()
    body = h.body("t")

    async def seam(request: ApprovalRequest) -> Approval:
        return Approval.APPROVED

    h.registry.set_approval(seam)
    h.pre(_asker())
    assert (await h.call("t", agent="a1")).json == ok()
    assert body.started


@pytest.mark.rules("R5", "R14")
async def test_an_unknown_approval_answer_is_a_final_pre_stage_failure() -> None:
    h = Harness()
    body = h.body("t")

    async def seam(request: ApprovalRequest) -> Any:
        return "maybe"

    async def post(view: Execution, result: ToolResult) -> Accept:
        return Accept()

    h.registry.set_approval(seam)
    h.pre(_asker())
    h.post(post)
    call = await h.call("t", agent="a1")
    assert call.json == expected('Error: unreachable variant in ApprovalOutcome: "maybe"')
    assert "post" not in h.log
    assert not body.started
    assert call.step("approval_raise").outcome == "pre_error"


@pytest.mark.rules("R5", "R15")
async def test_a_guard_reason_is_the_denial_text() -> None:
    h = Harness()
    body = h.body("t")
    h.registry.add_guard(lambda view: "rate limited")
    call = await h.call("t")
    assert call.json == expected("Error: rate limited")
    assert not body.started


# ------------------------------------------------------------------------------------------------
# R6 unknown tool
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R6")
async def test_an_unknown_name_passes_pre_around_and_post_and_reports_unknown_tool() -> None:
    h = Harness()
    ran: list[str] = []

    async def pre(view: Execution) -> Allow:
        ran.append("pre")
        return Allow()

    async def wrapper(view: Execution, next_: Any) -> ToolResult:
        ran.append("around")
        result: ToolResult = await next_()
        ran.append("around:after")
        return result

    async def post(view: Execution, result: ToolResult) -> Accept:
        ran.append("post:" + result.text)
        return Accept()

    h.pre(pre)
    h.registry.add_around(wrapper)
    h.post(post)
    call = await h.call("nope")
    assert call.json == expected(
        'Error: unknown tool "nope"', error={"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"}
    )
    assert ran == ["pre", "around", "around:after", 'post:Error: unknown tool "nope"']
    assert call.step("base_dispatch").outcome == "unknown_tool"


@pytest.mark.rules("R6")
async def test_a_tool_of_another_agent_is_unknown_to_this_one() -> None:
    h = Harness()
    mine = Body([text("mine")])
    h.registry.register("t", mine, agent="a1")
    other = await h.call("t", agent="a2")
    assert other.json == expected(
        'Error: unknown tool "t"', error={"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"}
    )
    assert not mine.started
    assert (await h.call("t", agent="a1")).json == ok("mine")


# ------------------------------------------------------------------------------------------------
# R7 post-execute decisions
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R7")
async def test_accept_with_content_replaces_content_and_keeps_error_and_appends_contexts() -> None:
    h = Harness()
    h.body("t", raises=QuotaExceeded("over", code="QUOTA"), defer=[{"d": 1}])

    async def post(view: Execution, result: ToolResult) -> Accept:
        return Accept(content=[text("rewritten")], contexts=[{"p": 1}])

    h.post(post)
    call = await h.call("t")
    assert call.json == expected(
        "rewritten",
        error={"name": "QuotaExceeded", "code": "QUOTA"},
        contexts=[{"d": 1}, {"p": 1}],
    )


@pytest.mark.rules("R7")
async def test_accept_without_content_keeps_content_and_meta() -> None:
    h = Harness()
    h.body("t", ToolOutput([text("x")], meta={"m": 1}))

    async def post(view: Execution, result: ToolResult) -> Accept:
        return Accept(contexts=[{"p": 2}])

    h.post(post)
    assert (await h.call("t")).json == ok("x", meta={"m": 1}, contexts=[{"p": 2}])


@pytest.mark.rules("R7", "R29")
async def test_block_gives_the_feedback_only_its_own_contexts_and_no_error_key() -> None:
    h = Harness()
    h.body("t", ToolOutput([text("x")], meta={"m": 1}), defer=[{"d": 1}])

    async def post(view: Execution, result: ToolResult) -> Block:
        return Block([text("not allowed to see that")], contexts=[{"b": 1}])

    h.post(post)
    call = await h.call("t")
    assert call.json == canon(
        {
            "content": [text("not allowed to see that")],
            "isError": True,
            "additionalContexts": [{"b": 1}],
        }
    )


@pytest.mark.rules("R7", "R20")
async def test_a_post_hook_returning_something_else_is_a_post_failure() -> None:
    h = Harness()
    h.body("t")

    async def post(view: Execution, result: ToolResult) -> Any:
        return "fine"

    h.post(post)
    call = await h.call("t")
    assert call.json == expected("Error: post-execute returned 'fine'; expected Accept or Block")
    assert call.step("post_raise").outcome == "post_error"


# ------------------------------------------------------------------------------------------------
# R8 TOOL_TIMEOUT, R9 skipped sibling (shapes owned by the timeout wrapper and the scheduler)
# ------------------------------------------------------------------------------------------------


@pytest.mark.rules("R8")
@pytest.mark.parametrize(
    ("ms", "shown"), [(100, "100"), (1.5, "1.5"), (100.0, "100"), (1e21, "1e+21")]
)
def test_tool_timeout_shape_writes_the_budget_as_javascript_does(ms: float, shown: str) -> None:
    result = ToolRegistry().results.timeout(ms)
    assert result.to_json() == expected(
        f"Error: tool call timed out after {shown}ms",
        error={"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"},
    )


@pytest.mark.rules("R8", "R16")
async def test_a_wrapper_returning_tool_timeout_is_recorded_as_tool_timeout() -> None:
    h = Harness()
    h.body("t")
    timeout = h.registry.results.timeout(250)

    async def wrapper(view: Execution, next_: Any) -> ToolResult:
        await next_()
        return timeout

    h.registry.add_around(wrapper)
    call = await h.call("t")
    assert call.json == expected(
        "Error: tool call timed out after 250ms",
        error={"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"},
    )
    assert call.step("wrapper_returned").outcome == "tool_timeout"


@pytest.mark.rules("R9")
def test_skipped_sibling_shape_seed_differs_from_aborted_only_in_text() -> None:
    skipped = ToolRegistry().results.skipped().to_json()
    assert skipped == expected(
        "Error: tool call skipped because the step was aborted before execution",
        error=ABORTED_ERROR,
    )
    assert skipped != aborted()


@pytest.mark.rules("R9", "R41")
def test_skipped_sibling_shape_revised_is_aborted_before_dispatch() -> None:
    skipped = ToolRegistry(revision="revised").results.skipped().to_json()
    assert skipped == canon(
        {
            "content": [text("Error: tool call aborted before dispatch")],
            "isError": True,
            "error": {
                "message": "tool call aborted before dispatch",
                "info": {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"},
            },
        }
    )


def _is_frozen_json(value: Any) -> bool:
    if isinstance(value, Mapping):
        return isinstance(value, FrozenDict) and all(_is_frozen_json(v) for v in value.values())
    if isinstance(value, list):
        return False
    if isinstance(value, tuple):
        return all(_is_frozen_json(v) for v in value)
    return True
