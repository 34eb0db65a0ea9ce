"""What a Python user sees of the hooks: each ``add_*`` documents its hook's signature, the README
documents them too, and a :class:`TurnLog` says what it holds when printed (issue 32)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from toolcancel import ToolRegistry
from toolcancel.runtime.scheduler import TurnLog

README = Path(__file__).resolve().parents[1] / "README.md"

SIGNATURES = {
    "add_pre_execute": "pre(call, next)",
    "add_around": "around(call, next)",
    "add_post_execute": "post(call, result, next)",
    "add_guard": "guard(call)",
    "add_observer": "observer(call, result)",
}


@pytest.mark.parametrize("method", sorted(SIGNATURES))
def test_each_hook_method_documents_its_signature(method: str) -> None:
    doc = getattr(ToolRegistry, method).__doc__ or ""
    assert SIGNATURES[method] in doc, (method, doc)
    assert "removes" in doc  # what the return value is for


def test_the_readme_documents_every_hook_signature_and_approvals_agent() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("**Hooks and observers", 1)[1].split("\n\n", 3)
    section = "\n\n".join(section[:3])  # the lead, the table, what approval needs
    for method, signature in SIGNATURES.items():
        assert method in section and signature in section, method
    assert re.search(r"approval[^.]*agent", section, re.S), "approval needs a call with an agent"
    assert "set_approval" in section


def test_a_turn_log_says_what_it_holds() -> None:
    log = TurnLog()
    assert repr(log) == "<TurnLog 0 entries>"
    log.append("tool/call", "c1", {"name": "search", "arguments": {}})
    log.append("tool/result", "c1", {"content": [], "isError": True})
    assert repr(log) == "<TurnLog 2 entries: tool/call c1, tool/result c1 isError=True>"
    for n in range(7):
        log.append("context", f"c{n}", "x")
    text = repr(log)
    assert text.startswith("<TurnLog 9 entries, the last 6: context c1,") and "c6>" in text
