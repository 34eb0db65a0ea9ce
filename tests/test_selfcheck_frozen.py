"""The harness's frozen check (R30): ``unfrozen`` says whether a published result is deep-frozen
-- every container a tuple or a read-only mapping, all the way down -- and where it is not.

A frozen result is walked once without keeping where each part is, and only one that is not is
walked again to name the place; both walks must say what the rule says, held here to a
reference written from it.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from types import MappingProxyType
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from toolcancel.contract.results import FrozenDict, ToolResult
from toolcancel.selfcheck.harness import unfrozen


def frozen(value: Any) -> bool:
    """The rule, written plainly."""
    if value is None or type(value) in (str, int, float, bool):
        return True
    if isinstance(value, tuple):
        return all(frozen(v) for v in value)
    if isinstance(value, Mapping) and not isinstance(value, MutableMapping):
        return all(frozen(v) for v in value.values())
    return False


class Text(str):
    """Not a plain string: the rule takes only the JSON types themselves."""


leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=2),
                   st.just(Text("t")), st.just({1}))  # fmt: skip


def containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=3).map(tuple),
        st.lists(children, max_size=2),  # a mutable container
        st.dictionaries(st.text(max_size=2), children, max_size=3).map(FrozenDict),
        st.dictionaries(st.text(max_size=2), children, max_size=2).map(MappingProxyType),
        st.dictionaries(st.text(max_size=2), children, max_size=2),  # a mutable mapping
    )


values = st.recursive(leaves, containers, max_leaves=8)


@given(st.lists(values, max_size=3), values)
def test_unfrozen_follows_the_rule_and_names_the_place(content: list[Any], meta: Any) -> None:
    result = ToolResult._make(tuple(content), False, None, (), meta, "seed")
    found = unfrozen(result)
    if frozen(tuple(content)) and frozen(meta):
        assert found is None
    else:
        assert found is not None and found.startswith(("content", "meta")), found
        assert " is a " in found


def test_a_result_with_a_writable_dict_is_not_frozen() -> None:
    class Loose(ToolResult):  # a subclass without __slots__ gets a __dict__
        pass

    result = Loose((), False, None, (), None, "seed")
    assert unfrozen(result) == "the result object has a writable __dict__"
