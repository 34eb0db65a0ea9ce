"""The committed explorer (``explorer/``), opened from ``file://`` in a real headless Chromium.

Debian's ``chromium`` (``scripts/dev-env`` installs it with apt-get) driven by the PyPI
``playwright`` package launched with ``executable_path``: no browser is downloaded.  Without
either, every test here is skipped with a reason that says the page was NOT tested.

What a person would do, checked as they would see it: the page loads with no console error;
clicking a transition shows its rules; stepping a vector to its end shows the result the vector
publishes; a dropped trace that breaks the contract stops at the event ``toolcancel check`` names;
a built-in example shows check's own verdict.  Screenshots of the overview and of a stepped vector
are written to the test's temporary directory and checked for size and for not being blank.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import threading
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from toolcancel import load_contract
from toolcancel.checker import Checker
from toolcancel.explain import shipped_vectors
from toolcancel.registry import ToolRegistry
from toolcancel.scenario import Scenario, run_scenario
from toolcancel.trace import TraceRecorder

SITE = Path(__file__).resolve().parent.parent / "explorer"
CHROMIUM = os.environ.get("TOOLCANCEL_CHROMIUM") or shutil.which("chromium")
VIEWPORT = {"width": 1280, "height": 720}
RETRIES = load_contract().retry_names

try:
    from playwright.sync_api import Browser, Page, sync_playwright
except ImportError:  # pragma: no cover - the dev extra installs it
    sync_playwright = None

pytestmark = pytest.mark.skipif(
    sync_playwright is None or CHROMIUM is None,
    reason="SKIPPED, NOT TESTED: the explorer needs Debian's chromium (apt-get install chromium; "
    "scripts/dev-env installs it as root) and the playwright package (the dev extra)",
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert sync_playwright is not None and CHROMIUM is not None
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport=VIEWPORT)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
    local = ("file:", "data:", "http://127.0.0.1:")
    pg.on("request", lambda r: None if r.url.startswith(local) else errors.append(
        f"network request: {r.url}"
    ))
    yield pg
    context.close()
    assert errors == [], errors


def open_site(page: Page, fragment: str = "") -> None:
    page.goto(SITE.joinpath("index.html").as_uri() + fragment)
    page.wait_for_selector("#diagram svg g.node")


def state(page: Page) -> dict[str, Any]:
    value: dict[str, Any] = page.evaluate("window.TC_EXPLORER.state()")
    return value


def png_checked(data: bytes, path: Path) -> None:
    """``data`` is a 1280x720 PNG with real content: bigger than a blank page compresses to, and
    with many distinct byte values once inflated (a blank or one-colour image has a handful)."""
    path.write_bytes(data)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (VIEWPORT["width"], VIEWPORT["height"])
    assert len(data) > 40_000, f"{path}: {len(data)} bytes, a nearly blank page"
    chunks, at = [], 8
    while at < len(data):
        length = struct.unpack(">I", data[at : at + 4])[0]
        if data[at + 4 : at + 8] == b"IDAT":
            chunks.append(data[at + 8 : at + 8 + length])
        at += 12 + length
    pixels = zlib.decompress(b"".join(chunks))
    assert len(set(pixels)) > 64, f"{path}: too few distinct values, a blank page"


def test_overview_loads_without_error_and_reads_on_a_slide(page: Page, tmp_path: Path) -> None:
    open_site(page)
    assert state(page)["view"] == "overview"
    labels = page.eval_on_selector_all(
        "#diagram g.cluster > text", "els => els.map(e => e.textContent)"
    )
    assert labels == [f"{k} {name}" for k, name in enumerate(_stage_names(), 1)]
    # every stage label is legible on a 1280x720 screen: at least 14 px tall
    heights = page.evaluate(
        "[...document.querySelectorAll('#diagram g.cluster text')]"
        ".map(t => t.getBoundingClientRect().height)"
    )
    assert min(heights) >= 14, heights
    png_checked(page.screenshot(), tmp_path / "overview.png")


def _stage_names() -> list[str]:
    from toolcancel import load_contract

    return [stage.name for stage in load_contract().stages]


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No line per request on stderr."""


def test_the_site_works_from_a_static_server_too(page: Page) -> None:
    handler = partial(_Quiet, directory=str(SITE))
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/index.html#vector=revised-00004")
            page.wait_for_selector("#step-count")
            page.click("#step-last")
            assert state(page)["at"] == state(page)["steps"]
            assert page.locator("#step-result").is_visible()
        finally:
            server.shutdown()


def test_clicking_a_transition_shows_its_rules(page: Page) -> None:
    open_site(page, "#machine")
    page.locator('[id="a_t30-around_before"]').click()
    panel = page.locator("#panel")
    assert panel.locator("h2").inner_text() == "t30 base_dispatch"
    rules = panel.locator("details.rule").evaluate_all("els => els.map(e => e.dataset.rule)")
    t30 = next(t for t in load_contract().revision("seed").transitions if t.index == 30)
    assert rules == list(t30.rules)
    panel.locator("details.rule summary").first.click()
    assert "Body invocation" in panel.inner_text()  # R18's title and its CONTRACT.md text


def test_stepping_a_vector_reaches_its_published_result(page: Page, tmp_path: Path) -> None:
    vector = next(v for v in shipped_vectors("seed") if v["id"] == "seed-00888")
    open_site(page, "#vector=seed-00888")
    steps = state(page)["steps"]
    assert steps == len(vector["expected"]["paths"][0])
    for n in range(1, steps + 1):
        page.click("#step-next")
        assert state(page)["at"] == n
    shown = json.loads(page.locator("#step-result").inner_text())
    assert shown == vector["expected"]["result"]
    assert page.locator("#diagram g.edge.current").count() == 1
    page.click("#step-prev")
    assert page.locator("#step-outcome").inner_text().startswith("aborted")
    png_checked(page.screenshot(), tmp_path / "stepped-vector.png")


def _reference_trace(vector_id: str) -> list[dict[str, Any]]:
    """The reference registry's trace of a vector.  Run in a thread of its own: Playwright's
    synchronous API keeps an event loop running in this one, and a scenario runs its own."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(_record, vector_id).result()


def _record(vector_id: str, retry: str | None = None) -> list[dict[str, Any]]:
    revision = vector_id.split("-")[0]
    vector = next(v for v in shipped_vectors(revision) if v["id"] == vector_id)
    recorder = TraceRecorder()

    def factory(**options: Any) -> ToolRegistry:
        return ToolRegistry(trace=recorder, **options)

    run_scenario(Scenario.from_data(vector["scenario"]), factory, retry=retry)
    return recorder.lines


def _sample() -> list[tuple[list[dict[str, Any]], list[int]]]:
    """Reference traces of a spread of vectors (every retry behaviour for retrying ones), each
    with the transitions the registry took."""
    out = []
    for revision in ("seed", "revised"):
        vectors = shipped_vectors(revision)
        retrying = [v for v in vectors if "retry" in v["scenario"]["wrappers"]]
        for vector in [*vectors[::250], *retrying[:3]]:
            retries = RETRIES if vector in retrying else (None,)
            for retry in retries:
                recorder = TraceRecorder()

                def factory(recorder: TraceRecorder = recorder, **options: Any) -> ToolRegistry:
                    return ToolRegistry(trace=recorder, **options)

                obs = run_scenario(Scenario.from_data(vector["scenario"]), factory, retry=retry)
                out.append((recorder.lines, [p.transition for p in obs.path]))
    return out


def test_a_violating_trace_stops_at_the_step_check_names(page: Page, tmp_path: Path) -> None:
    lines = _reference_trace("seed-00888")
    at = next(i for i, line in enumerate(lines) if line["event"] == "pre_allow")
    lines.insert(at + 1, dict(lines[at]))  # a second pre-execute decision: the contract has none
    verdict = Checker("seed").check_lines(lines)[0]
    assert not verdict.conforming and verdict.event_index == at + 1
    trace = tmp_path / "broken.jsonl"
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    open_site(page, "#trace")
    dropped = page.evaluate_handle(
        "text => { const dt = new DataTransfer();"
        " dt.items.add(new File([text], 'broken.jsonl')); return dt; }",
        trace.read_text(encoding="utf-8"),
    )
    page.dispatch_event("#drop", "drop", {"dataTransfer": dropped})  # as a file dropped on it
    page.wait_for_selector("#stepper:not([hidden])")
    page.click("#step-last")
    stopped = state(page)["violation"]
    assert stopped["index"] == verdict.event_index
    assert page.locator("#violation").is_visible()
    assert page.locator("#diagram g.node.violated").count() == 1
    # the conforming original replays to its end, with no violation
    ok = tmp_path / "ok.jsonl"
    ok.write_text("".join(json.dumps(line) + "\n" for line in _reference_trace("seed-00888")))
    page.click("#back-to-traces")
    page.set_input_files("#trace-file", str(ok))
    page.wait_for_selector("#stepper:not([hidden])")
    assert state(page)["violation"] is None
    assert page.locator(".ok-box").is_visible()


def test_the_pages_table_replay_follows_the_reference_registry(page: Page) -> None:
    """explorer.js ports core.py's guards and step: on real traces it takes the very transitions
    the registry took (a guard ported wrong shows here, as a different step or a violation)."""
    with ThreadPoolExecutor(1) as pool:
        sample = pool.submit(_sample).result()
    open_site(page, "#trace")
    for lines, transitions in sample:
        text = "".join(json.dumps(line) + "\n" for line in lines)
        replayed = page.evaluate("t => window.TC_EXPLORER.replay(t)", text)
        assert replayed.get("violation") is None, (lines[0], replayed.get("violation"))
        assert [s["t"]["i"] for s in replayed["steps"]] == transitions, lines[0]


def test_built_in_examples_show_checks_verdict(page: Page) -> None:
    data = json.loads(
        SITE.joinpath("data.js").read_text(encoding="utf-8").split("window.TC_DATA = ", 1)[1][:-2]
    )
    examples = data["revisions"]["seed"]["examples"]
    assert examples
    for k, example in enumerate(examples):
        lines = [json.loads(x) for x in example["lines"]]
        verdict = Checker("seed").check_lines(lines, "trace.jsonl")[0]
        assert verdict.to_json() == example["verdict"]
        open_site(page, f"#example=seed/{k}")
        assert state(page)["violation"]["index"] == verdict.event_index
        assert f"violation of {verdict.rule}" in page.locator("#violation").inner_text()
        replayed = page.evaluate("t => window.TC_EXPLORER.replay(t)", "\n".join(example["lines"]))
        # the page's own replay checks less than check: it never stops before check does
        if replayed.get("violation"):
            assert replayed["violation"]["index"] >= verdict.event_index
