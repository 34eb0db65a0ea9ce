"""The canonical trace: what the registry records, and how strictly the reader reads it.

Why these tests: the trace is the only thing the conformance oracle sees of a registry.  So the
registry's trace must say exactly what its machine did (the contract events of a call's trace are
its recorded path, caller aborts included, data and all), recording must not change behaviour,
and the reader must refuse every line it would otherwise have to guess about -- naming the file
and the line -- while accepting what the format allows (blank lines, CRLF, a missing final
newline, ``x_`` extension fields).  The schema is generated, so a test proves it is current and
that it accepts what the registry writes and refuses what the reader refuses.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from toolcancel import AbortController, load_contract
from toolcancel.contract.loader import parse_contract
from toolcancel.contract.trace import (
    MAX_DEPTH,
    MAX_LINE_BYTES,
    OBSERVATIONS,
    TraceRecorder,
    encode_line,
    schema_text,
    trace_schema,
    write_schema,
)
from toolcancel.contract.trace_reader import TraceError, parse_lines, read_traces
from toolcancel.oracle.judge.checker import check_lines
from toolcancel.oracle.observation import Observation
from toolcancel.oracle.scenario_language import Scenario
from toolcancel.runtime.registry import ToolRegistry
from toolcancel.runtime.virtual_time import VirtualClock, run
from toolcancel.selfcheck.harness import Harness
from toolcancel.selfcheck.space import configurations

ROOT = Path(__file__).resolve().parent.parent


def record(scenario: Scenario) -> tuple[Observation, list[dict[str, Any]]]:
    """Run one scenario against the real registry with a trace recorder."""
    recorder = TraceRecorder()
    clock = VirtualClock()
    factory = functools.partial(ToolRegistry, trace=recorder)
    obs = run(Harness(scenario, factory, clock).run(), clock=clock)
    return obs, recorder.lines


@functools.cache
def space(revision: str) -> tuple[Scenario, ...]:
    """The model checker's configurations with at most one wrapper (two add no trace event)."""
    return tuple(configurations(revision, max_wrappers=1))


def sample(revision: str, stride: int) -> list[Scenario]:
    """Every ``stride``-th configuration, with a cancellation at several points."""
    out = []
    for config in space(revision)[::stride]:
        out.append(config)
        if config.caller == "live":
            for cancel in ("gate:pre", "gate:body", "gate:post", "step:3", "after"):
                out.append(config.with_cancel(cancel))
    return out


# ------------------------------------------------------------------------------------------------
# Recording
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("revision", ["seed", "revised"])
def test_the_contract_events_of_a_trace_are_the_calls_recorded_path(revision: str) -> None:
    data_fields = {e.name: e.data for e in load_contract().events}
    checked = 0
    for scenario in sample(revision, 12):
        obs, lines = record(scenario)
        traced = [
            (line["event"], {k: v for k, v in line.items() if k in data_fields[line["event"]]})
            for line in lines
            if line["event"] in data_fields
        ]
        path = [
            (p.event, {d: getattr(p.occurrence, d) for d in data_fields[p.event]}) for p in obs.path
        ]
        assert traced == path, scenario.as_code()
        assert lines[0]["event"] == "call_entry"
        assert {line["call"] for line in lines} == {"c1"}
        assert all(line["trace"] == 1 for line in lines)
        checked += 1
    assert checked > 1000


@pytest.mark.parametrize("revision", ["seed", "revised"])
def test_observation_lines_say_what_the_registry_did(revision: str) -> None:
    for scenario in sample(revision, 31):
        obs, lines = record(scenario)
        events = [line["event"] for line in lines]
        entry = lines[0]
        assert entry == {
            "trace": 1,
            "call": "c1",
            "event": "call_entry",
            "caller": "aborted" if scenario.cancel == "before_entry" else scenario.entry_caller,
            "agent": scenario.agent,
            "approval_seam": scenario.approval_seam,
            "revision": revision,
            "retry": "reenter",
            "wrappers": scenario.around_count,
        }
        assert events.count("body_start") == obs.body_starts == events.count("body_settle")
        assert events.count("result") == events.count("notify") == 1
        assert events.index("publish") < events.index("result") < events.index("notify")
        assert obs.result is not None
        result_line = lines[events.index("result")]
        assert json.dumps(result_line["result"], sort_keys=True) == json.dumps(
            json.loads(obs.result.to_json()), sort_keys=True
        )
        adds = {
            (ln["signal"]) for ln in lines if ln["event"] == "listener" and ln["action"] == "add"
        }
        for signal in adds:
            got = [
                ln["action"] for ln in lines if ln["event"] == "listener" and ln["signal"] == signal
            ]
            assert got.count("add") == got.count("remove"), scenario.as_code()
        stages = [ln["stage"] for ln in lines if ln["event"] == "stage_enter"]
        assert stages == [s for s in ("pre", "approval", "guards", "post") if _ran(obs, s)], (
            scenario.as_code()
        )


def _ran(obs: Observation, stage: str) -> bool:
    """Whether the harness saw the hooks of ``stage`` run (its own record, not the trace)."""
    kinds = {e[0] for e in obs.log}
    return {"pre": "pre", "approval": "approval", "guards": "guard", "post": "post_in"}[
        stage
    ] in kinds


def test_a_relay_reports_its_listeners_and_the_fused_signal() -> None:
    _, lines = record(Scenario(wrappers=("replace_live",), cancel="gate:body"))
    seq = [
        (ln["event"], ln.get("signal") or ln.get("kind"), ln.get("action"))
        for ln in lines
        if ln["event"] in ("listener", "fused", "body_start", "body_settle", "caller_abort")
    ]
    assert seq == [
        ("listener", "caller", "add"),
        ("listener", "slot", "add"),
        ("fused", "relay", None),
        ("body_start", None, None),
        ("listener", "caller", "remove"),  # the relay unhooks as soon as a source fires (R22)
        ("listener", "slot", "remove"),
        ("caller_abort", None, None),
        ("body_settle", None, None),
    ]
    slots = [(ln["action"], ln["aborted"]) for ln in lines if ln["event"] == "slot"]
    assert slots == [("replace", False), ("replace", True)]  # the wrapper's, then C restored


def test_a_pre_aborted_seed_body_gets_the_callers_aborted_signal_itself() -> None:
    _, lines = record(Scenario(caller="aborted"))
    fused = next(ln for ln in lines if ln["event"] == "fused")
    assert (fused["kind"], fused["aborted"]) == ("caller", True)
    assert not any(ln["event"] == "listener" for ln in lines)  # a dead signal gets no listener


@pytest.mark.parametrize("revision", ["seed", "revised"])
def test_recording_changes_nothing_the_call_does(revision: str) -> None:
    for scenario in sample(revision, 41):
        clock = VirtualClock()
        plain = run(Harness(scenario, ToolRegistry, clock).run(), clock=clock)
        traced, _ = record(scenario)
        assert plain.result is not None and traced.result is not None
        assert plain.result.to_json() == traced.result.to_json(), scenario.as_code()
        assert [p[:4] for p in plain.path] == [p[:4] for p in traced.path]
        assert _comparable(plain.log) == _comparable(traced.log)


def _traced_call(trace: Any, revision: str, hooks: tuple[str, ...], cancel: str) -> None:
    """One call on a registry with ``hooks`` (a subset of pre, guard, around, post), its caller
    signal live, aborted by the body (``cancel == "body"``) or absent (``"none"``, seed only:
    the revised contract requires a caller signal, R40)."""
    registry = ToolRegistry(revision=revision, trace=trace)
    caller = AbortController()

    async def body(args: Any, view: Any) -> list[dict[str, str]]:
        if cancel == "body":
            caller.abort("stop")
        return [{"type": "text", "text": "ok"}]

    async def pre(view: Any, nxt: Any) -> Any:
        return await nxt()

    async def around(view: Any, nxt: Any) -> Any:
        return await nxt()

    async def post(view: Any, result: Any, nxt: Any) -> Any:
        return await nxt()

    registry.register("t", body)
    if "pre" in hooks:
        registry.add_pre_execute(pre)
    if "guard" in hooks:
        registry.add_guard(lambda view: None)
    if "around" in hooks:
        registry.add_around(around)
    if "post" in hooks:
        registry.add_post_execute(post)
    signal = None if cancel == "none" else caller.signal
    asyncio.run(registry.execute("t", {}, signal=signal))


@pytest.mark.parametrize("revision", ["seed", "revised"])
def test_a_recorder_gets_the_lines_a_sink_that_runs_code_gets(revision: str) -> None:
    """A TraceRecorder runs no code between two steps, so the registry may take two steps as
    one (without guards, ``pre_allow`` then ``guards_pass``; without post-execute hooks,
    ``around_settled`` then ``post_accept``); a sink that is a function runs code, so each step
    is offered on its own.  The lines must be the same, stage lines included, and conform."""
    shapes = [
        hooks
        for n in range(5)
        for hooks in itertools.combinations(("pre", "guard", "around", "post"), n)
    ]
    for hooks in shapes:
        for cancel in ("live", "body", "none") if revision == "seed" else ("live", "body"):
            recorder, seen = TraceRecorder(), []
            _traced_call(recorder, revision, hooks, cancel)
            _traced_call(lambda line, seen=seen: seen.append(line), revision, hooks, cancel)
            same_call = [{**line, "call": recorder.lines[0]["call"]} for line in seen]
            assert recorder.lines == same_call, (hooks, cancel)
            (verdict,) = check_lines(recorder.lines, revision)
            assert verdict.conforming, (hooks, cancel, verdict)


def _comparable(log: list[tuple[Any, ...]]) -> list[str]:
    """The harness log as text, object addresses (fresh objects each run) left out."""
    return [re.sub(r" at 0x[0-9a-f]+", "", repr(e)) for e in log]


def test_the_recorder_writes_json_lines_the_reader_reads_back(tmp_path: Path) -> None:
    recorder = TraceRecorder()
    factory = functools.partial(ToolRegistry, trace=recorder)
    clock = VirtualClock()
    run(Harness(Scenario(cancel="gate:body"), factory, clock).run(), clock=clock)
    path = tmp_path / "t.jsonl"
    recorder.write(path)
    text = path.read_text("utf-8")
    assert text.endswith("\n") and text.count("\n") == len(recorder)
    first = text.splitlines()[0]
    assert first.startswith('{"trace":1,"call":"c1","event":"call_entry",')
    traces = read_traces(path)
    assert list(traces) == ["c1"]
    assert [e.data for e in traces["c1"]] == recorder.lines
    assert [e.line for e in traces["c1"]] == list(range(1, len(recorder) + 1))
    assert recorder.calls() == {"c1": recorder.lines}


def test_encode_line_puts_the_header_first_and_values_in_canonical_json() -> None:
    line = {"x_b": 1.0, "event": "result", "call": "é", "trace": 1, "result": {"b": 1e21, "a": []}}
    text = encode_line(line)
    assert text == '{"trace":1,"call":"é","event":"result","result":{"a":[],"b":1e+21},"x_b":1}'
    assert json.loads(text) == line


# ------------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------------

ENTRY = '{"trace":1,"call":"c1","event":"call_entry","caller":"live","agent":true,"approval_seam":true,"revision":"seed"}'  # noqa: E501


def write(tmp_path: Path, text: str | bytes, name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, "utf-8")
    return path


def read_error(path: Path) -> str:
    with pytest.raises(TraceError) as info:
        read_traces(path)
    return str(info.value)


def test_interleaved_calls_are_split_per_call_with_their_line_numbers(tmp_path: Path) -> None:
    second = ENTRY.replace('"c1"', '"c2"')
    text = "\n".join(
        [
            ENTRY,
            second,
            "",
            '{"trace":1,"call":"c2","event":"args_valid"}',
            '   {"trace":1,"call":"c1","event":"args_invalid","x_at":[1,{"ms":2}]}  ',
        ]
    )
    traces = read_traces(write(tmp_path, text + "\r\n"))
    assert list(traces) == ["c1", "c2"]
    assert [(e.line, e.event) for e in traces["c1"]] == [(1, "call_entry"), (5, "args_invalid")]
    assert [(e.line, e.event) for e in traces["c2"]] == [(2, "call_entry"), (4, "args_valid")]
    assert traces["c1"][1].data["x_at"] == [1, {"ms": 2}]


def test_a_final_line_without_newline_is_read(tmp_path: Path) -> None:
    traces = read_traces(write(tmp_path, ENTRY + "\n" + ENTRY.replace("c1", "c2")))
    assert list(traces) == ["c1", "c2"]


def test_lines_longer_than_a_read_chunk_and_many_lines_are_read(tmp_path: Path) -> None:
    big = {"type": "text", "text": "é" * 300_000}  # 600 kB of UTF-8 in one line
    result = json.dumps({"content": [big], "isError": False}, ensure_ascii=False)
    lines = [ENTRY] + [f'{{"trace":1,"call":"c1","event":"result","result":{result}}}'] * 12
    traces = read_traces(write(tmp_path, "\n".join(lines) + "\n"))
    assert [e.line for e in traces["c1"]] == list(range(1, 14))
    assert traces["c1"][12].data["result"]["content"][0] == big


BAD_LINES = [
    # (line 2 of a trace, the start of the error, what refuses it: json/line/limit/file)
    ("{not json", "not valid JSON (Expecting property name enclosed in double quotes", "json"),
    ('{"a": 1} x', "not valid JSON (extra data at column 10)", "json"),
    ('{"trace":1,"call":"c1","event":"notify","x_t":NaN}', "not valid JSON (NaN", "json"),
    (
        '{"trace":1,"call":"c1","event":"notify","x_a":' + "[" * 100_000 + "]" * 100_000 + "}",
        f"JSON nested deeper than {MAX_DEPTH} levels",
        "json",
    ),
    ("[1, 2]", "expected a JSON object, got an array", "line"),
    ('"call_entry"', "expected a JSON object, got a string", "line"),
    ('{"trace":1,"call":"c1"}', 'missing "event"', "line"),
    ('{"trace":1,"call":"c1","event":"bogus"}', "unknown event 'bogus'", "line"),
    ('{"trace":1,"call":"c1","event":7}', '"event" must be a string, got a number', "line"),
    ('{"trace":2,"call":"c1","event":"notify"}', "trace format version 2 is not", "line"),
    ('{"trace":true,"call":"c1","event":"notify"}', '"trace" must be the format', "line"),
    ('{"call":"c1","event":"notify"}', 'missing "trace"', "line"),
    ('{"trace":1,"event":"notify"}', 'missing "call"', "line"),
    ('{"trace":1,"call":3,"event":"notify"}', '"call" must be a string, got a number', "line"),
    (
        '{"trace":1,"call":"c1","event":"base_dispatch","slot_aborted":"no"}',
        "field 'slot_aborted' of base_dispatch must be a boolean, got a string",
        "line",
    ),
    (
        '{"trace":1,"call":"c1","event":"stage_enter","stage":"middle"}',
        "field 'stage' of stage_enter must be one of approval, guards, post, pre",
        "line",
    ),
    ('{"trace":1,"call":"c1","event":"stage_enter"}', "a stage_enter line needs", "line"),
    (
        '{"trace":1,"call":"c1","event":"notify","when":3}',
        "unknown field 'when' on a notify line (extensions must start with x_)",
        "line",
    ),
    (
        '{"trace":1,"call":"c1","event":"result","result":[1]}',
        "field 'result' of result must be an object, got an array",
        "line",
    ),
    (
        '{"trace":1,"call":"c1","event":"result","result":'
        + '{"a":' * MAX_DEPTH
        + "1"
        + "}" * MAX_DEPTH
        + "}",
        f"JSON nested deeper than {MAX_DEPTH} levels",
        "limit",  # a limit of the reader; JSON Schema has no keyword for depth
    ),
    ('{"trace":1,"call":"c2","event":"notify"}', "call 'c2' starts with notify", "file"),
    (ENTRY, "a second call_entry for call 'c1' (the first is on line 1)", "file"),
]
IDS = [m for _, m, _ in BAD_LINES]


@pytest.mark.parametrize(("line", "message", "level"), BAD_LINES, ids=IDS)
def test_a_bad_line_is_refused_naming_the_file_and_line(
    tmp_path: Path, line: str, message: str, level: str
) -> None:
    path = write(tmp_path, f"{ENTRY}\n{line}\n{ENTRY.replace('c1', 'c9')}\n")
    got = read_error(path)
    assert got.startswith(f"{path}:2: {message}"), got
    assert "\n" not in got


@pytest.mark.parametrize(("line", "message", "level"), BAD_LINES, ids=IDS)
def test_in_memory_lines_are_validated_alike(line: str, message: str, level: str) -> None:
    if level == "json":
        return  # in memory there is no JSON text to be wrong: the caller decoded it
    with pytest.raises(TraceError) as info:
        parse_lines([json.loads(ENTRY), json.loads(line)], "adapter")
    assert str(info.value).startswith(f"adapter:2: {message}")


def test_nesting_at_the_limit_is_accepted(tmp_path: Path) -> None:
    inner = '{"a":' * (MAX_DEPTH - 2) + "1" + "}" * (MAX_DEPTH - 2)
    line = f'{{"trace":1,"call":"c1","event":"result","result":{inner}}}'
    assert read_traces(write(tmp_path, f"{ENTRY}\n{line}\n"))["c1"][1].event == "result"


def test_a_file_cut_in_the_middle_of_a_line_is_a_truncated_trace(tmp_path: Path) -> None:
    path = write(tmp_path, ENTRY + "\n" + '{"trace":1,"call":"c1","ev')
    assert read_error(path) == f"{path}:2: the file ends in the middle of this line (truncated)"


def test_binary_garbage_is_not_utf8(tmp_path: Path) -> None:
    path = write(tmp_path, ENTRY.encode() + b"\n\x00\xff\xfe garbage\n")
    assert read_error(path) == f"{path}:2: not UTF-8 text (byte 0xff at column 2)"


def test_a_line_over_the_limit_is_refused(tmp_path: Path) -> None:
    pad = "x" * MAX_LINE_BYTES
    path = write(tmp_path, f'{ENTRY}\n{{"trace":1,"call":"c1","event":"notify","x_p":"{pad}"}}\n')
    assert read_error(path) == f"{path}:2: line longer than {MAX_LINE_BYTES:,} bytes"


@pytest.mark.parametrize(
    ("content", "message"),
    [("", "the file holds no trace lines"), ("\n  \n\n", "the file holds no trace lines")],
)
def test_an_empty_trace_is_refused(tmp_path: Path, content: str, message: str) -> None:
    path = write(tmp_path, content)
    assert read_error(path) == f"{path}: {message}"


def test_missing_files_and_directories_are_refused_naming_them(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    assert read_error(missing) == f"{missing}: cannot read (No such file or directory)"
    assert read_error(tmp_path) == f"{tmp_path}: is a directory, not a file"


# ------------------------------------------------------------------------------------------------
# The generated schema
# ------------------------------------------------------------------------------------------------


def test_the_committed_schema_is_the_generated_one() -> None:
    assert write_schema(check=True), (
        "spec/trace.schema.json is stale: regenerate it with `toolcancel regen`"
    )
    assert (ROOT / "spec" / "trace.schema.json").read_text("utf-8") == schema_text()


def test_write_schema_writes_and_check_compares(tmp_path: Path) -> None:
    target = tmp_path / "schema.json"
    assert not write_schema(target, check=True)
    assert not target.exists()
    assert write_schema(target)
    assert write_schema(target, check=True)
    target.write_text("{}", "utf-8")
    assert not write_schema(target, check=True)


def test_the_schema_is_generated_from_the_contract_not_restated() -> None:
    contract = load_contract()
    branches = {b["title"]: b for b in trace_schema()["oneOf"]}
    assert list(branches) == [e.name for e in contract.events] + list(OBSERVATIONS)
    for e in contract.events:
        assert set(branches[e.name]["properties"]) == {"trace", "call", "event", *e.data}
    tomllib = pytest.importorskip("tomllib")
    data = tomllib.loads((ROOT / "spec" / "contract.toml").read_text("utf-8"))
    data["event"].append({"name": "body_yield", "doc": "a new event", "data": ["partial"]})
    grown = parse_contract(data, "edited.toml")
    titles = [b["title"] for b in trace_schema(grown)["oneOf"]]
    assert "body_yield" in titles
    new = next(b for b in trace_schema(grown)["oneOf"] if b["title"] == "body_yield")
    assert new["properties"]["partial"] == {
        "type": "boolean",
        "default": False,
        "description": "body_yield data",
    }


def _validates(schema: dict[str, Any], line: Any) -> bool:
    """A validator for exactly the JSON Schema keywords the generated schema uses.

    (No third-party validator is a dependency; this one reads the schema's own keywords, so a
    schema that disagreed with the reader would fail the tests below.)
    """
    defs = schema["$defs"]

    def ok(value: Any, rule: dict[str, Any]) -> bool:
        if "$ref" in rule:
            rule = defs[rule["$ref"].rsplit("/", 1)[1]]
        kinds = {"object": dict, "string": str, "boolean": bool, "integer": int}
        if "type" in rule and type(value) is not kinds[rule["type"]]:
            return False
        if "const" in rule and (value != rule["const"] or type(value) is bool):
            return False
        return "enum" not in rule or value in rule["enum"]

    if not isinstance(line, dict) or any(k not in line for k in schema["required"]):
        return False
    matches = 0
    for branch in schema["oneOf"]:
        props = branch["properties"]
        if any(k not in line for k in branch["required"]):
            continue
        if not all(ok(line[k], props[k]) for k in props if k in line):
            continue
        extra = [k for k in line if k not in props]
        if any(not re.match(p, k) for k in extra for p in branch["patternProperties"]):
            continue
        matches += 1
    return matches == 1


def test_the_schema_accepts_what_the_registry_writes_and_refuses_what_the_reader_refuses() -> None:
    schema = trace_schema()
    for revision in ("seed", "revised"):
        for scenario in sample(revision, 97):
            for line in record(scenario)[1]:
                assert _validates(schema, json.loads(json.dumps(line))), line
    refused = [line for line, _, level in BAD_LINES if level == "line"]
    assert len(refused) > 10
    for line in refused:
        assert not _validates(schema, json.loads(line)), line
