"""The integrated rows of docs/REAL-WORLD.md: a runtime judged with its toolcancel integration.

An integrated row is ``examples/runtimes/adapter_<runtime>__integrated.py``: the plain row
(``adapter_<runtime>.py``) with the integration's install step at the plain row's integration
point (:func:`toolcancel.runtimes.integrated`), whose lines that apply the integration each end
``# integration`` (deleting them leaves the plain row's behaviour: tests/test_integrations.py
plants that stub and sees the row fail).  The integration is the
``toolcancel.integrations.<module>`` the row imports; its ``LIMITS`` (a literal dict, read here
without importing the runtime) gives, for each rule the row still breaks, the runtime's
structural reason.  The page shows the row
beside its plain row and that reason for every rule still broken; the render stops, naming the
row and the rule, when a broken rule has no reason or a reason names a rule every such row keeps.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from ..contract.errors import ToolcancelError

SUFFIX: Final = "__integrated"
INTEGRATIONS_DIR: Final = Path("machine/integrations")
SHOWN: Final = ("R27", "R28", "R31")
"""The rules an integration exists to keep: always shown beside the plain row."""
MARK: Final = "# integration"
"""What ends each line of an integrated row that applies the integration."""
IMPORT: Final = re.compile(r"^\s*(?:from|import)\s+toolcancel\.integrations\.(\w+)\b", re.M)


class IntegrationError(ToolcancelError):
    """An integrated row and its integration's LIMITS disagree (the message names both)."""


def is_integrated(name: str) -> bool:
    """Whether row ``name`` (``adapter_<name>.py``) runs its runtime with an integration."""
    return name.endswith(SUFFIX)


def plain_row(name: str) -> str:
    """The row an integrated row adds its integration to: ``langgraph__integrated`` ->
    ``langgraph``."""
    return name.removesuffix(SUFFIX)


def module_of(adapter: Path) -> str:
    """The ``toolcancel.integrations`` module an integrated row imports (exactly one)."""
    found = sorted(set(IMPORT.findall(adapter.read_text(encoding="utf-8"))))
    if len(found) != 1:
        raise IntegrationError(
            f"{adapter}: an integrated row imports exactly one toolcancel.integrations module "
            f"(found {', '.join(found) or 'none'})"
        )
    module: str = found[0]
    return module


def limits(root: Path, module: str) -> dict[str, str]:
    """``LIMITS`` of ``toolcancel.integrations.<module>``: rule id -> the runtime's reason.  Read
    from the source, never imported (the runtime need not be installed): a dict whose keys are
    strings and whose values are strings or names of the module's string constants."""
    path = root / INTEGRATIONS_DIR / f"{module}.py"
    if not path.is_file():
        raise IntegrationError(f"{path}: missing (an integrated row imports it)")
    strings: dict[str, str] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        target: ast.expr
        if isinstance(node, ast.AnnAssign):
            target, expr = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, expr = node.targets[0], node.value
        else:
            continue
        if not isinstance(target, ast.Name) or expr is None:
            continue
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            strings[target.id] = expr.value
        if target.id == "LIMITS" and isinstance(expr, ast.Dict):
            found = {}
            for k, v in zip(expr.keys, expr.values, strict=True):
                key = k.value if isinstance(k, ast.Constant) else None
                value = v.value if isinstance(v, ast.Constant) else (
                    strings.get(v.id) if isinstance(v, ast.Name) else None
                )  # fmt: skip
                if not (isinstance(key, str) and isinstance(value, str)):
                    break
                found[key] = value
            else:
                return found
    raise IntegrationError(
        f"{path}: needs LIMITS, a dict of rule id -> one sentence (a string or the name of one "
        "of the module's string constants: read without importing the runtime)"
    )


def verdicts(by_rev: Mapping[str, Any], rule: str, revisions: Iterable[str] = ()) -> list[str]:
    """A row's verdict on ``rule``, one per revision (in ``revisions``' order if given; ``not
    judged`` where it never ran)."""
    return [by_rev[rev]["rules"].get(rule, {}).get("verdict", "not judged")
            for rev in (revisions or by_rev)]  # fmt: skip


def broken(by_rev: Mapping[str, Any], protocol: str) -> set[str]:
    """The rules a row breaks in some revision (a vector it could not run aside)."""
    return {r for m in by_rev.values() for r, row in m["rules"].items()
            if row["verdict"] == "broken" and r != protocol}  # fmt: skip


def check(
    data: Mapping[str, Mapping[str, Any]], modules: Mapping[str, str],
    reasons: Mapping[str, Mapping[str, str]], protocol: str,
) -> None:  # fmt: skip
    """Every rule an integrated row breaks has its integration's reason, and no reason names a
    rule that every row of that integration keeps."""
    for name, module in modules.items():
        for rule in sorted(broken(data[name], protocol) - set(reasons[module])):
            raise IntegrationError(
                f"{name}: {rule} stays broken with toolcancel.integrations.{module}, whose LIMITS "
                f"gives no reason ({INTEGRATIONS_DIR / f'{module}.py'}): fix the integration or "
                "say why the runtime's structure keeps it broken"
            )
    for module in sorted(set(modules.values())):
        rows = [n for n, m in modules.items() if m == module]
        for rule in sorted(reasons[module]):
            seen = [v for n in rows for v in verdicts(data[n], rule)]
            if "broken" not in seen and "kept" in seen:
                raise IntegrationError(
                    f"{INTEGRATIONS_DIR / f'{module}.py'}: LIMITS gives a reason for {rule}, "
                    f"which {', '.join(rows)} keep{'s' if len(rows) == 1 else ''}: drop it"
                )


def _both(verdict: Iterable[str], revisions: Iterable[str]) -> str:
    said = list(verdict)
    if len(set(said)) == 1:
        return said[0]
    return "; ".join(f"{rev} {v}" for rev, v in zip(revisions, said, strict=True))


def beside(
    name: str, data: Mapping[str, Mapping[str, Any]], module: str, reasons: Mapping[str, str],
    protocol: str, cell: Any, revisions: tuple[str, ...],
) -> list[str]:  # fmt: skip
    """The lines that show integrated row ``name`` beside its plain row: the rules an
    integration exists to keep, and every rule still broken, each with its reason."""
    plain = plain_row(name)
    here = data[name]
    there = data.get(plain)
    rules = sorted(set(SHOWN) | broken(here, protocol) | (broken(there, protocol) if there
                                                           else set()),
                   key=lambda r: int(r[1:]) if r[1:].isdigit() else 0)  # fmt: skip
    out = [f"With `toolcancel.integrations.{module}` "
           f"([machine/integrations/{module}.py](../machine/integrations/{module}.py)), beside "
           f"the plain row `{plain}` (the same adapter without the lines ending "
           f"`{MARK}`):", "",
           "| rule | plain row | with the integration | why it stays broken |",
           "| --- | --- | --- | --- |"]  # fmt: skip
    for rule in rules:
        before = _both(verdicts(there, rule, revisions), revisions) if there else "not measured"
        after = _both(verdicts(here, rule, revisions), revisions)
        why = cell(reasons.get(rule, ""), 400) if rule in broken(here, protocol) else "—"
        out.append(f"| {rule} | {before} | {after} | {why} |")
    return [*out, ""]
