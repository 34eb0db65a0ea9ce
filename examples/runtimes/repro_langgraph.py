"""Minimal reproductions of what conform found in LangGraph's prebuilt ``ToolNode``.

    python examples/runtimes/repro_langgraph.py                # every reproduction
    python examples/runtimes/repro_langgraph.py tool_exception # one

Each function below is self-contained (LangGraph, LangChain core and asyncio only, no toolcancel,
no network, no model), prints what the runtime did, and returns True when the behaviour
reproduces; the script exits 1 if one does not (the runtime changed: regenerate
docs/REAL-WORLD.md).  Paste one into an issue as it is.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode


def tools_graph(*tools: Any) -> Any:
    """START -> a ToolNode over ``tools`` -> END."""
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode(list(tools)))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    return graph.compile()


def wrapped_graph(tool: Any, wrapper: Any, **options: Any) -> Any:
    """START -> a ToolNode over ``tool`` whose ``awrap_tool_call`` is ``wrapper`` -> END."""
    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([tool], awrap_tool_call=wrapper, **options))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    return graph.compile()


def calling(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "messages": [AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "c1"}])]
    }


async def ignored_cancel_late_failure() -> bool:
    """R3/R31 [cancelled=true, cooperative=false, body=throw, row=langgraph]: a run cancelled
    while its tool
    finishes work that cannot stop half-way waits for the tool, and when the tool then fails,
    the tool's exception leaves ``ainvoke`` in place of the cancellation: the caller that
    cancelled sees a tool error, and no ToolMessage answers the call.

    Kind: inherited -- a bare asyncio task whose coroutine ignores its cancellation and then
    raises ends with that exception, not ``CancelledError``: Python's rule, which LangGraph's
    ``ainvoke`` passes on as it is. Control: ``bare_task_late_failure``.
    With ``ToolNode(..., handle_tool_errors=True)`` the node catches the tool's exception and
    the cancelled ``ainvoke`` raises ``CancelledError``, as its caller expects."""
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def write_file() -> str:
        """Writes."""
        started.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            await release.wait()  # the write cannot stop half-way: finish it first
        raise RuntimeError("disk full")

    run = asyncio.ensure_future(tools_graph(write_file).ainvoke(calling("write_file", {})))
    await started.wait()
    run.cancel()
    await asyncio.wait({run}, timeout=0.5)
    release.set()
    try:
        await run
    except asyncio.CancelledError:
        print("ainvoke raised CancelledError")
        return False
    except RuntimeError as exc:
        print(f"the cancelled ainvoke raised {exc!r}")
        return str(exc) == "disk full"
    return False



async def handled_late_failure() -> bool:
    """R31 [cancelled=true, cooperative=false, body=throw, row=langgraph__handle_tool_errors]: with
    ``ToolNode(handle_tool_errors=True)`` a run cancelled while its tool finishes work that cannot
    stop half-way waits for the tool, and when the tool then fails, ``ainvoke`` raises the
    cancellation: the tool's failure is dropped, and no ToolMessage answers the call.

    Kind: mapping -- what comes back is the caller's own cancellation
    (``observed.caller_cancelled``); toolcancel's registry through the same mapping raises
    ``CancelledError`` to the task its caller cancelled too (the Python binding's P2)."""
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def write_file() -> str:
        """Writes."""
        started.set()
        try:
            await release.wait()
        except asyncio.CancelledError:
            await release.wait()  # the write cannot stop half-way: finish it first
        raise RuntimeError("disk full")

    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([write_file], handle_tool_errors=True))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    run = asyncio.ensure_future(graph.compile().ainvoke(calling("write_file", {})))
    await started.wait()
    run.cancel()
    await asyncio.wait({run}, timeout=0.5)
    waited = not run.done()
    release.set()
    try:
        await run
    except asyncio.CancelledError:
        print(f"ainvoke waited for the tool: {waited}; then raised CancelledError")
        return waited
    except RuntimeError as exc:
        print(f"the cancelled ainvoke raised {exc!r}")
    return False


async def handled_tool_exception() -> bool:
    """R3/R18 [row=langgraph__handle_tool_errors]: with ``ToolNode(handle_tool_errors=True)`` a
    tool's exception becomes an error ToolMessage (right) whose text is the exception's ``repr``
    and an instruction to the model, not the exception's message: a text-only difference.

    Kind: design -- ``handle_tool_errors``: "``True``: Catch all errors and return a
    ``ToolMessage`` with the default error template containing the exception details."
    (langgraph/prebuilt/tool_node.py)."""

    @tool
    async def failing() -> str:
        """Fails."""
        raise RuntimeError("tool failed")

    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([failing], handle_tool_errors=True))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    out = await graph.compile().ainvoke(calling("failing", {}))
    message = out["messages"][-1]
    print(f"status={message.status} content={message.content!r}")
    return message.status == "error" and message.content == (
        "Error: RuntimeError('tool failed')\n Please fix your mistakes."
    )


async def unserializable_artifact() -> bool:
    """R30/R31 [body=bad_meta]: a tool's artifact that is not JSON is kept as it is in the
    ToolMessage.

    Kind: design -- ``ToolMessage.artifact: Any``, "Artifact of the Tool execution which is not
    meant to be sent to the model" (langchain_core/messages/tool.py): any Python value, never
    serialized by the graph."""

    @tool(response_format="content_and_artifact")
    async def with_artifact() -> tuple[str, dict[str, Any]]:
        """Returns an artifact."""
        return "done", {"handle": len}

    out = await tools_graph(with_artifact).ainvoke(calling("with_artifact", {}))
    message = out["messages"][-1]
    print(f"artifact: {message.artifact!r}")
    return message.artifact == {"handle": len}


async def tool_exception() -> bool:
    """R3/R31 [row=langgraph]: with the default ``handle_tool_errors`` an exception in the tools
    node -- the tool's own, or an ``awrap_tool_call`` wrapper's -- ends the graph run; no
    ToolMessage answers the call.

    Kind: design -- ``_default_handle_tool_errors``: "If the tool is a tool invocation error,
    return its message. Otherwise, raise the error." (langgraph/prebuilt/tool_node.py);
    ``ToolNode(..., handle_tool_errors=True)`` answers the call with an error ToolMessage."""

    @tool
    async def failing() -> str:
        """Fails."""
        raise RuntimeError("tool failed")

    async def wrapper(request: Any, execute: Any) -> Any:
        await execute(request)
        raise RuntimeError("wrapper failed after delegating")

    @tool
    async def echo() -> str:
        """Echoes."""
        return "done"

    raised = []
    for graph, name in ((tools_graph(failing), "failing"), (wrapped_graph(echo, wrapper), "echo")):
        try:
            await graph.ainvoke(calling(name, {}))
        except RuntimeError as exc:
            raised.append(str(exc))
    print(f"ainvoke raised: {raised}")
    return raised == ["tool failed", "wrapper failed after delegating"]


async def handled_wrapper_exception() -> bool:
    """R16 [row=langgraph__handle_tool_errors]: with ``ToolNode(handle_tool_errors=True)`` an
    ``awrap_tool_call`` wrapper's exception becomes an error ToolMessage (right) whose text is the
    exception's ``repr`` and an instruction to the model: a text-only difference.

    Kind: design -- ``handle_tool_errors``: "``True``: Catch all errors and return a
    ``ToolMessage`` with the default error template containing the exception details."
    (langgraph/prebuilt/tool_node.py)."""

    async def wrapper(request: Any, execute: Any) -> Any:
        raise RuntimeError("wrapper failed before delegating")

    @tool
    async def echo() -> str:
        """Echoes."""
        return "done"

    graph = wrapped_graph(echo, wrapper, handle_tool_errors=True)
    message = (await graph.ainvoke(calling("echo", {})))["messages"][-1]
    print(f"status={message.status} content={message.content!r}")
    return message.status == "error" and message.content == (
        "Error: RuntimeError('wrapper failed before delegating')\n Please fix your mistakes."
    )


async def lossy_arguments() -> bool:
    """R11: arguments that are not losslessly JSON (a set) reach the tool.

    Kind: runtime -- the tool call's ``args`` are validated against the tool's signature
    (``q: Any`` takes anything); nothing checks that they are JSON, which a model's tool call
    always is, so only a program building the ``AIMessage`` itself can send such arguments."""
    seen: list[object] = []

    @tool
    async def echo(q: Any) -> str:
        """Echoes."""
        seen.append(q)
        return "done"

    await tools_graph(echo).ainvoke(calling("echo", {"q": {1}}))
    print(f"the tool received q={seen[0]!r}")
    return seen == [{1}]


async def unknown_tool() -> bool:
    """R6: an unknown tool is an error ToolMessage with LangGraph's own text, no error code.

    Kind: design -- ``INVALID_TOOL_NAME_ERROR_TEMPLATE = "Error: {requested_tool} is not a valid
    tool, try one of [{available_tools}]."`` (langgraph/prebuilt/tool_node.py): the text the
    model is meant to read, with no code field in a ToolMessage."""

    @tool
    async def echo() -> str:
        """Echoes."""
        return "done"

    out = await tools_graph(echo).ainvoke(calling("no_such_tool", {}))
    message = out["messages"][-1]
    print(f"status={message.status} content={message.content!r}")
    return message.status == "error" and "no_such_tool is not a valid tool" in message.content


REPRODUCTIONS = {
    f.__name__: f
    for f in (
        ignored_cancel_late_failure,
        handled_late_failure,
        handled_tool_exception,
        unserializable_artifact,
        tool_exception,
        handled_wrapper_exception,
        lossy_arguments,
        unknown_tool,
    )
}


if __name__ == "__main__":
    from toolcancel.runtimes import reproduce  # only the runner: each pastes without it

    sys.exit(reproduce(REPRODUCTIONS))
