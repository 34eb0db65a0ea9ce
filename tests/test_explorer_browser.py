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
from toolcancel.oracle.judge.checker import Checker
from toolcancel.oracle.scenario_language import Scenario
from toolcancel.selfcheck.harness import run_scenario
from toolcancel.teaching.explain import shipped_vectors

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


def _stage_names(revision: str = "seed") -> list[str]:
    from toolcancel.teaching.diagrams import stage_titles

    return [title.split(" ", 1)[1] for title in stage_titles(load_contract().revision(revision))]


# ------------------------------------------------------------------------------------------------
# A class's screens: nothing drawn over anything, errors where the user looks
# ------------------------------------------------------------------------------------------------

SIZES = [(1280, 720), (1280, 900), (800, 600)]
"""A projector, a laptop, and the small screen a class still meets."""

BOXES = """() => {
  const box = (el) => { const r = el.getBoundingClientRect();
    return { x1: r.left, y1: r.top, x2: r.right, y2: r.bottom }; };
  const area = box(document.querySelector("#diagram"));
  const clip = (b) => ({ x1: Math.max(b.x1, area.x1), y1: Math.max(b.y1, area.y1),
    x2: Math.min(b.x2, area.x2), y2: Math.min(b.y2, area.y2) });
  const items = [];
  const drawn = (kind, el, name) => {
    const whole = box(el), b = clip(whole);
    if (b.x2 - b.x1 > 0.5 && b.y2 - b.y1 > 0.5) items.push({ kind, name, whole, ...b });
  };
  for (const g of document.querySelectorAll("#diagram g.node")) {
    const shape = g.querySelector("path, polygon, ellipse");
    if (shape) drawn("state", shape, g.id);
  }
  for (const t of document.querySelectorAll("#diagram g.cluster > text")) {
    drawn("title", t, t.textContent);
  }
  for (const t of document.querySelectorAll("#diagram g.edge text")) {
    drawn("label", t, t.textContent);
  }
  for (const sel of ["header", "#toolbar", "#zoom", "#hint", "#stepper", "#panel"]) {
    const el = document.querySelector(sel);
    if (el && getComputedStyle(el).display !== "none" && el.getClientRects().length) {
      items.push({ kind: "panel", name: sel, whole: box(el), ...box(el) });
    }
  }
  const overlaps = [];
  for (let i = 0; i < items.length; i++) for (let j = i + 1; j < items.length; j++) {
    const a = items[i], b = items[j];
    if (a.kind === "panel" && b.kind === "panel") continue;
    const w = Math.min(a.x2, b.x2) - Math.max(a.x1, b.x1);
    const h = Math.min(a.y2, b.y2) - Math.max(a.y1, b.y1);
    if (w > 0.5 && h > 0.5) overlaps.push(a.kind + " " + a.name + " / " + b.kind + " " + b.name);
  }
  const cut = items.filter((a) => a.kind !== "panel" && (a.whole.x1 < area.x1 - 0.5 ||
    a.whole.y1 < area.y1 - 0.5 || a.whole.x2 > area.x2 + 0.5 || a.whole.y2 > area.y2 + 0.5))
    .map((a) => a.kind + " " + a.name);
  const counts = {};
  for (const a of items) counts[a.kind] = (counts[a.kind] || 0) + 1;
  return { overlaps, cut, counts, width: innerWidth, height: innerHeight,
    header: [...document.querySelectorAll("header *")].filter((e) => {
      const b = box(e); return b.x2 > innerWidth + 0.5 || b.y2 > innerHeight + 0.5; })
      .map((e) => e.id || e.tagName) };
}"""


def _boxes(browser: Browser, size: tuple[int, int], fragment: str) -> dict[str, Any]:
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    try:
        pg = context.new_page()
        open_site(pg, fragment)
        found: dict[str, Any] = pg.evaluate(BOXES)
        return found
    finally:
        context.close()


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("revision", ["seed", "revised"])
def test_nothing_is_drawn_over_anything_at_a_class_screen_size(
    browser: Browser, size: tuple[int, int], revision: str
) -> None:
    """On the overview, whole: no state, stage title or transition label overlaps another, and
    none lies under the toolbar, the hint, the step bar or the side panel, or is cut off; the
    header (the revision selector included) fits.  Then the same while stepping a vector, in
    the part of the machine the page zooms to."""
    table = load_contract().revision(revision)
    if revision == "seed":
        found = _boxes(browser, size, "#overview")
    else:
        found = _revised_overview(browser, size)
    assert (found["width"], found["height"]) == size
    assert found["overlaps"] == [], found["overlaps"]
    assert found["cut"] == [], found["cut"]
    assert found["header"] == [], f"cut off by the window's edge: {found['header']}"
    assert found["counts"]["state"] == len(table.states)
    assert found["counts"]["title"] == len(table.contract.stages)
    assert found["counts"]["label"] >= len(table.transitions)  # a tN cell per (transition, source)
    vector = shipped_vectors(revision)[0]["id"]
    stepping = _boxes(browser, size, f"#vector={vector}")
    assert stepping["overlaps"] == [], stepping["overlaps"]
    assert stepping["header"] == []


def _revised_overview(browser: Browser, size: tuple[int, int]) -> dict[str, Any]:
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    try:
        pg = context.new_page()
        open_site(pg, "#overview")
        pg.select_option("#revision", "revised")
        labels = pg.eval_on_selector_all(
            "#diagram g.cluster > text", "els => els.map(e => e.textContent)"
        )
        assert labels == [f"{k} {n}" for k, n in enumerate(_stage_names("revised"), 1)]
        found: dict[str, Any] = pg.evaluate(BOXES)
        return found
    finally:
        context.close()


@pytest.mark.parametrize("size", [(1280, 720), (800, 600)], ids=["1280x720", "800x600"])
def test_a_malformed_pasted_trace_is_reported_where_the_user_is_looking(
    browser: Browser, size: tuple[int, int]
) -> None:
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    try:
        pg = context.new_page()
        open_site(pg, "#trace")
        pg.fill("#trace-text", '{"call": "c1", "event": "call_entry"}\nthis is not JSON\n')
        pg.click("#trace-go")
        box = pg.locator("#trace-error .violation-box")
        assert box.inner_text().startswith("pasted trace: line 2: not JSON")
        inside = pg.evaluate(
            "() => { const b = document.querySelector('#trace-error .violation-box')"
            ".getBoundingClientRect(); const p = document.querySelector('#panel')"
            ".getBoundingClientRect(); return b.top >= p.top && b.bottom <= Math.min(p.bottom,"
            " innerHeight) && b.left >= 0 && b.right <= innerWidth; }"
        )
        assert inside, "the error is out of sight"
        # the same for a file that is not a trace, dropped on the page
        dropped = pg.evaluate_handle(
            "() => { const dt = new DataTransfer();"
            " dt.items.add(new File(['[1, 2]'], 'notes.jsonl')); return dt; }"
        )
        pg.dispatch_event("#drop", "drop", {"dataTransfer": dropped})
        pg.wait_for_function(
            "document.querySelector('#trace-error').textContent.startsWith('notes.jsonl')"
        )
        assert pg.locator("#trace-error .violation-box").is_visible()
    finally:
        context.close()


def test_the_naming_of_transitions_is_explained(page: Page) -> None:
    """A transition is named by its id in contract.toml, one name in both revisions: the page
    says so and names the other revision's transitions."""
    contract = load_contract()
    open_site(page, "#machine")
    for revision in contract.revisions:
        page.select_option("#revision", revision)
        text = page.locator("#numbering").inner_text()
        own = [t.id for t in contract.revision(revision).transitions]
        others = [t.id for t in contract.transitions if t.id not in own]
        assert f"{len(own)} transitions in this revision" in text
        assert "one name in both revisions" in text
        assert f"of the {len(own) + len(others)} transitions" in text
        assert f"other revision only: {' '.join(others)}." in text


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
    page.locator('[id="a_dispatch-around_before"]').click()
    panel = page.locator("#panel")
    assert panel.locator("h2").inner_text() == "dispatch base_dispatch"
    rules = panel.locator("details.rule").evaluate_all("els => els.map(e => e.dataset.rule)")
    assert rules == list(load_contract().transition("dispatch").rules)
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
    # run_scenario records the registry's own trace (the record verify judges)
    return run_scenario(Scenario.from_data(vector["scenario"]), retry=retry).trace


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
                obs = run_scenario(Scenario.from_data(vector["scenario"]), retry=retry)
                out.append((obs.trace, [p.transition for p in obs.path]))
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


def test_a_guard_that_cannot_fail_in_a_revision_is_said_so(page: Page) -> None:
    """The drawings leave out revised late_success_aborted's ``not aborted_at_entry`` (R42 ends
    such a call at entry); the page still lists it, saying why it is not drawn, and the seed's is
    plain."""
    open_site(page, "#machine")
    for revision, moot in (("seed", False), ("revised", True)):
        page.select_option("#revision", revision)
        page.evaluate("location.hash = '#transition=late_success_aborted-draining'")
        page.wait_for_function(
            "document.querySelector('#panel h2').textContent.startsWith('late_success_aborted')"
        )
        guards = page.locator("#panel").inner_text()
        assert "not aborted_at_entry" in guards
        assert ("cannot fail in this revision" in guards) == moot
        page.evaluate("location.hash = '#machine'")
