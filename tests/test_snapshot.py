"""The snapshot (R30) and the result constructor it feeds, held to their slow references.

``snapshot`` first takes a plain walk that keeps neither a cycle set nor paths, and hands any value
it does not judge (too deep -- as every cycle is -- or not a plain dict, list, tuple or scalar) to
the walks that find cycles and name paths.  So every value must come out exactly as the
path-naming walk ``_snap``, which judges any value alone, would have it: the same frozen copy, or
the same refusal with the same path and reason.  ``ToolResult._make`` is the registry's cheap
constructor and must give what the dataclass's own constructor gives.
"""

from __future__ import annotations

import dataclasses
from collections import UserDict
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from toolcancel.contract.errors import NotSerializable
from toolcancel.contract.loader import load_contract
from toolcancel.contract.results import (
    _FAST_DEPTH,
    ErrorInfo,
    FrozenDict,
    Results,
    ToolResult,
    _snap,
    canonical_json,
    same_json,
    snapshot,
)


def outcome(walk: Any, value: Any) -> tuple[str, str]:
    """What a walk made of ``value``: its frozen copy's repr (types and all), or its refusal."""
    try:
        return "frozen", repr(walk(value))
    except NotSerializable as exc:
        return "refused", str(exc)


def reference(value: Any) -> Any:
    return _snap(value, "$.x", set())


leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN, the infinities and -0.0 are refused
    st.text(max_size=3),
    st.sampled_from([{1}, b"x", ...]),  # not JSON at all
)


class Key(str):
    """A ``str`` subclass: a string key all the same."""


def containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # an int key is refused; a str subclass is a string
    keys = st.one_of(st.text(max_size=2), st.integers(0, 2), st.text(max_size=2).map(Key))
    return st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(keys, children, max_size=3),
        st.dictionaries(st.text(max_size=2), children, max_size=3).map(FrozenDict),
        st.dictionaries(st.text(max_size=2), children, max_size=3).map(UserDict),  # a Mapping
    )


@given(st.recursive(leaves, containers, max_leaves=12))
def test_the_plain_walk_agrees_with_the_path_naming_walk(value: Any) -> None:
    assert outcome(lambda v: snapshot(v, "$.x"), value) == outcome(reference, value)


@pytest.mark.parametrize("depth", [_FAST_DEPTH, _FAST_DEPTH + 1, _FAST_DEPTH + 2, 300])
@pytest.mark.parametrize("container", ["list", "dict"])
def test_a_value_deeper_than_the_plain_walk_is_frozen_alike(depth: int, container: str) -> None:
    value: Any = [1.5, "leaf"]
    for _ in range(depth):
        value = [value, None] if container == "list" else {"k": value, "n": 1}
    assert outcome(lambda v: snapshot(v, "$.x"), value) == outcome(reference, value)
    assert outcome(lambda v: snapshot(v, "$.x"), value)[0] == "frozen"


@pytest.mark.parametrize("depth", [0, 1, _FAST_DEPTH - 1, _FAST_DEPTH, 100])
def test_a_cycle_at_any_depth_is_refused_where_it_closes(depth: int) -> None:
    inner: dict[str, Any] = {"ok": 1}
    inner["back"] = inner
    value: Any = inner
    for _ in range(depth):
        value = {"k": [value]}
    with pytest.raises(NotSerializable) as refused:
        snapshot(value, "$.x")
    where = "$.x" + ".k[0]" * depth + ".back"
    assert str(refused.value) == f"{where}: the value contains itself (a cycle)"


def test_a_cycle_behind_a_bad_leaf_is_refused_at_the_leaf() -> None:
    value: list[Any] = [float("nan")]
    value.append(value)
    with pytest.raises(NotSerializable, match=r"^\$\.x\[0\]: nan is not a finite number$"):
        snapshot(value, "$.x")


def test_make_gives_what_the_constructor_gives() -> None:
    fields = (({"type": "text"},), True, ErrorInfo("n", "c", "m"), ("ctx",), 7, "revised")
    made = ToolResult._make(*fields)
    built = ToolResult(*fields)
    assert type(made) is ToolResult
    assert made == built and repr(made) == repr(built)
    assert hash(ToolResult._make((), False, None, (), None, "seed")) == hash(ToolResult(()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.content = ()  # type: ignore[misc]
    assert dataclasses.replace(made, meta=None) == dataclasses.replace(built, meta=None)


def test_a_string_subclass_key_is_a_string_key() -> None:
    frozen = snapshot({Key("k"): [1]}, "$.x")
    assert frozen == FrozenDict({"k": (1,)})


def test_a_bad_value_inside_another_mapping_is_named_from_the_top() -> None:
    value = {"content": [{"a": UserDict({"k": float("inf")})}]}
    with pytest.raises(NotSerializable, match=r"^\$\.x\.content\[0\]\.a\.k: inf is not"):
        snapshot(value, "$.x")


_JSON_LEAVES = (
    st.none() | st.booleans() | st.sampled_from([0, 1, -1, 1.0, -0.0, 0.5, 2**53, 2**53 + 1])
    | st.integers(-(2**60), 2**60) | st.floats(allow_nan=False) | st.sampled_from(["", "a", "1"])
)
_JSON = st.recursive(
    _JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
    max_leaves=8,
)


@given(_JSON, _JSON)
def test_same_json_is_equal_canonical_text(a: Any, b: Any) -> None:
    # the judge compares logged and published results without writing them (turn checks):
    # it must decide exactly what comparing their canonical texts decides
    assert same_json(a, b) == (canonical_json(a) == canonical_json(b))
    assert same_json(a, a)


@pytest.mark.parametrize(("a", "b", "same"), [
    (True, 1, False), (1, 1.0, True), (-0.0, 0, True), ({"a": [1]}, {"a": (1.0,)}, True),
    (2**53 + 1, float(2**53), True),  # JavaScript holds them as the same double
    ({"a": 1}, {"b": 1}, False), ([1, 2], [2, 1], False), (None, False, False),
])  # fmt: skip
def test_same_json_on_the_edges(a: Any, b: Any, same: bool) -> None:
    assert same_json(a, b) is same and (canonical_json(a) == canonical_json(b)) is same



_FREEZABLE = st.recursive(
    st.none() | st.booleans() | st.sampled_from([0, 1, 1.0, 0.5, "", "a"]),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from("ab"), inner),
    max_leaves=6,
)
_OBJECTS = st.dictionaries(st.sampled_from(["a", "b", "c"]), _FREEZABLE, max_size=3)


@given(_OBJECTS, _OBJECTS)
def test_frozen_objects_are_equal_exactly_as_mappings_are(a: Any, b: Any) -> None:
    """FrozenDict's own equality (both sides frozen: their dicts compared) says what Mapping's
    says, and a frozen object against a dict or a non-mapping is Mapping's."""
    fa, fb = snapshot(a), snapshot(b)
    assert (fa == fb) is Mapping.__eq__(fa, fb) is (fb == fa)
    assert fa == snapshot(a)
    assert fa == dict(fa.items()) and dict(fa.items()) == fa
    assert fa != list(a) and fa != None  # noqa: E711 -- a non-mapping is never equal


@given(_OBJECTS, st.sampled_from(["a", "b", "z"]))
def test_frozen_objects_read_exactly_as_mappings_do(a: Any, key: str) -> None:
    """FrozenDict's own lookups and views (its dict's, for speed) say what Mapping's say, and
    none of them is a way to change the object."""
    frozen = snapshot(a)
    assert (key in frozen) is Mapping.__contains__(frozen, key)
    assert frozen.get(key) == Mapping.get(frozen, key)
    assert frozen.get(key, "absent") == Mapping.get(frozen, key, "absent")
    assert list(frozen.keys()) == list(Mapping.keys(frozen))
    assert list(frozen.values()) == list(Mapping.values(frozen))
    assert list(frozen.items()) == list(Mapping.items(frozen))
    before = dict(frozen.items())
    for view in (frozen.keys(), frozen.values(), frozen.items()):
        with pytest.raises(TypeError):
            view.mapping["z"] = 1
        assert not hasattr(view, "add") and not hasattr(view, "pop")
    assert dict(frozen.items()) == before


@pytest.mark.parametrize("revision", ["seed", "revised"])
def test_a_fixed_text_result_is_published_deep_frozen_as_made(revision: str) -> None:
    """The results of the contract's fixed texts are made once and materialize() keeps their
    content unwalked: so it must already be exactly what the walk would make of it."""
    r = Results(load_contract().revision(revision))
    made = [r.aborted(), r.aborted_before_dispatch(), r.args_error(), r.serialization_error(),
            r.skipped(), r.aborted([{"ctx": [1]}])]
    for result in made:
        published = r.materialize(result)
        assert repr(published.content) == repr(snapshot(result.content))
        assert published.content is result.content  # kept, not walked into a copy
        assert published == ToolResult(
            snapshot(result.content), result.is_error, result.error,
            snapshot(result.contexts), None, revision,
        )
    assert r.aborted() is r.aborted() and r.aborted([1]).contexts == (1,)
