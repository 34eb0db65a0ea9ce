// The contract explorer (toolcancel explore). Plain JavaScript, no dependencies, no network: the
// contract, the vectors and the layout arrive as globals from the scripts next to this one
// (data.js, vectors-<revision>.js, layout.js), so the page works from file:// as well as served.
"use strict";
(function () {
  const D = window.TC_DATA;
  const LAYOUT = window.TC_LAYOUT;
  const REVISIONS = Object.keys(D.revisions);
  const VECTORS = {};
  for (const r of REVISIONS) VECTORS[r] = window["TC_VECTORS_" + r.toUpperCase()];
  const UNKNOWN = -1;
  const $ = (sel, root) => (root || document).querySelector(sel);
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));

  // ---------------------------------------------------------------------------------------------
  // The machine: core.py's guards and step, over the contract's own table (data.js)
  // ---------------------------------------------------------------------------------------------
  function listenerLeft(s) {
    if (s.wrappers === UNKNOWN) return true;
    return (s.retry === "cursor" ? s.handed : s.depth) < s.wrappers;
  }
  const GUARDS = {
    cancelled_after_entry: (s) => s.caller === "live" && s.caller_aborted,
    caller_aborted: (s) => s.caller !== "none" && s.caller_aborted,
    aborted_at_entry: (s) => s.caller === "aborted",
    approval_seam: (s) => s.approval_seam,
    has_agent: (s) => s.has_agent,
    fused_aborted: (s, o) => (s.caller !== "none" && s.caller_aborted) || o.slot_aborted,
    tool_found: (s, o) => o.tool_found,
    result_is_error: (s) => s.outcome !== null && D.outcomes[s.outcome].is_error,
    passthrough: (s, o) => o.passthrough,
    returned_error: (s, o) => o.is_error,
    returned_timeout: (s, o) => o.timeout && o.is_error,
    in_wrapper: (s) => s.depth > 0,
    exception_pending: (s) => s.outcome === "around_error",
    listener_left: (s) => listenerLeft(s),
    listeners_done: (s) => s.wrappers === UNKNOWN || !listenerLeft(s),
    handing_out: (s) => s.handing,
    retry_rejected: (s) => s.retry === "reject",
    body_invoked: (s) => s.invoked,
    serializable: (s, o) => o.serializable,
  };
  for (const g of Object.keys(D.guards)) {
    if (!GUARDS[g]) console.error("explorer: the contract's guard " + g + " has no implementation here");
  }

  const TABLES = {};
  for (const r of REVISIONS) {
    const info = D.revisions[r];
    const byIndex = new Map();
    const byId = new Map();
    const candidates = new Map();
    for (const t of info.transitions) {
      byIndex.set(t.i, t);
      byId.set(t.id, t);
      for (const [src, ev] of t.pairs) {  // which event leaves which source: the contract's
        const key = src + "|" + ev;
        if (!candidates.has(key)) candidates.set(key, []);
        candidates.get(key).push(t);
      }
    }
    TABLES[r] = { info, byIndex, byId, candidates };
  }
  const stateInfo = Object.fromEntries(D.states.map((s) => [s.name, s]));

  function initialState(r, entry) {
    const caller = entry.caller;
    return {
      state: D.revisions[r].initial, caller, caller_aborted: caller === "aborted",
      has_agent: !!entry.agent, approval_seam: !!entry.approval_seam, depth: 0, outcome: null,
      invoked: false, retry: entry.retry || D.default_retry,
      wrappers: typeof entry.wrappers === "number" ? entry.wrappers : UNKNOWN, handed: 0, handing: false,
    };
  }
  function occurrence(line) {
    const d = (k, v) => (k in line ? line[k] : v);
    return { event: line.event, slot_aborted: d("slot_aborted", false), tool_found: d("tool_found", true),
      passthrough: d("passthrough", false), is_error: d("is_error", false), timeout: d("timeout", false),
      serializable: d("serializable", true) };
  }
  function guardsHold(t, s, o) {
    return t.guards.every(([name, want]) => GUARDS[name](s, o) === want);
  }
  function apply(t, s, o) {
    return {
      state: t.dest === null ? s.state : t.dest, caller: s.caller,
      caller_aborted: s.caller_aborted || (o.event === "caller_abort" && s.caller !== "none"),
      has_agent: s.has_agent, approval_seam: s.approval_seam, depth: s.depth + t.depth,
      outcome: t.outcome === null ? s.outcome : t.outcome, invoked: s.invoked || t.invoke,
      retry: s.retry, wrappers: s.wrappers, handed: s.handed + (t.depth > 0 && s.retry === "cursor" ? 1 : 0),
      handing: t.hand_out || (s.handing && t.dest === null && t.depth === 0),
    };
  }
  function choices(r, s, o) {
    const out = [];
    for (const t of TABLES[r].candidates.get(s.state + "|" + o.event) || []) {
      if (guardsHold(t, s, o)) {
        out.push([t, apply(t, s, o)]);
        if (!t.alternative) return out;
      }
    }
    return out;
  }
  function eventsAllowedIn(r, state) {
    return Object.keys(D.events).filter((e) => TABLES[r].candidates.has(state + "|" + e));
  }

  // A path as encoded by the site's builder (one character per transition, a second one for the
  // event of a transition taken on any of several), placed by walking from the initial state.
  function resolvePath(r, code) {
    let state = D.revisions[r].initial;
    let outcome = null;
    const steps = [];
    for (let k = 0; k < code.length; k++) {
      const t = TABLES[r].byIndex.get(D.alphabet.indexOf(code[k]));
      const event = t.events.length > 1 ? t.events[D.alphabet.indexOf(code[++k])] : t.events[0];
      const source = t.sources.includes(state) ? state : t.sources[0];
      const dest = t.dest === null ? source : t.dest;
      if (t.outcome !== null) outcome = t.outcome;
      state = dest;
      steps.push({ t, source, dest, event, outcome });
    }
    return steps;
  }
  const transitionsOf = (r, code) => resolvePath(r, code).map((st) => st.t.i);

  // Replays one call's trace lines through the table: every transition the contract allows is
  // followed (MAY points included); the first event no possible state can take, or a result whose
  // kind (isError, error.code) no possible outcome has, is the violation.
  function replayCall(lines) {
    const entry = lines[0];
    const r = entry.revision || "seed";
    if (!TABLES[r]) return { error: "line 1: unknown contract revision " + JSON.stringify(entry.revision) };
    let branches = [{ s: initialState(r, entry), steps: [] }];
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i];
      if (line.event in D.events) {
        const o = occurrence(line);
        const next = [];
        const seen = new Set();
        for (const b of branches) {
          for (const [t, s2] of choices(r, b.s, o).reverse()) {  // the reference's first
            const key = JSON.stringify(s2);
            if (seen.has(key)) continue;
            seen.add(key);
            next.push({ s: s2, steps: b.steps.concat([{ t, source: b.s.state, dest: s2.state, event: line.event, outcome: s2.outcome, line: i }]) });
          }
        }
        if (!next.length) {
          const states = [...new Set(branches.map((b) => b.s.state))];
          const allowed = [...new Set(states.flatMap((st) => eventsAllowedIn(r, st)))];
          return { revision: r, steps: branches[0].steps, violation: { index: i, state: states.join(" or "), allowed, seen: line.event,
            sentence: "The contract's table has no transition for " + line.event + " in " + states.join(" or ") + " (allowed there: " + (allowed.join(", ") || "nothing more") + ")." } };
        }
        branches = next;
      } else if (line.event === "result" && line.result) {
        const res = line.result;
        const code = resultCode(r, res);
        const agree = branches.filter((b) => {
          const k = b.s.outcome && D.outcomes[b.s.outcome];
          return k && res.isError === k.is_error && (!k.code || code === k.code);
        });
        if (!agree.length) {
          const o = branches[0].s.outcome;
          const k = o && D.outcomes[o];
          return { revision: r, steps: branches[0].steps, violation: { index: i, state: branches[0].s.state, allowed: [], seen: "result",
            sentence: "The contract's outcome for this call is " + o + (k && k.code ? " (" + k.code + ")" : "") + (k ? (k.is_error ? ", an error" : ", a success") : "") +
              "; the published result is " + (res.isError ? "an error" : "a success") + (code ? " with code " + code : "") + "." } };
        }
        branches = agree;
      }
    }
    const result = lines.find((l) => l.event === "result");
    return { revision: r, steps: branches[0].steps, result: result ? result.result : null };
  }

  // A result's error code: error.code, or error.info.code under a revision with R44's error shape.
  function resultCode(r, res) {
    let error = res && typeof res.error === "object" ? res.error : null;
    if (error && D.revisions[r].rules.includes("R44")) error = typeof error.info === "object" ? error.info : null;
    return error && typeof error.code === "string" ? error.code : undefined;
  }

  function parseTrace(text) {
    const calls = new Map();
    const lines = text.split(/\r?\n/);
    for (let n = 0; n < lines.length; n++) {
      if (!lines[n].trim()) continue;
      let obj;
      try { obj = JSON.parse(lines[n]); } catch (e) { return { error: "line " + (n + 1) + ": not JSON (" + e.message + ")" }; }
      if (!obj || typeof obj !== "object" || typeof obj.event !== "string" || typeof obj.call !== "string") {
        return { error: "line " + (n + 1) + ": not a trace line (it needs call and event)" };
      }
      if (!calls.has(obj.call)) {
        if (obj.event !== "call_entry") return { error: "line " + (n + 1) + ": call " + obj.call + " does not start with call_entry" };
        calls.set(obj.call, []);
      }
      calls.get(obj.call).push(obj);
    }
    if (!calls.size) return { error: "the trace has no call" };
    return { calls };
  }

  // ---------------------------------------------------------------------------------------------
  // Vectors
  // ---------------------------------------------------------------------------------------------
  const FIELDS = D.scenario.fields;
  const vectorCache = {};
  function vectorsOf(r) {
    if (vectorCache[r]) return vectorCache[r];
    const list = VECTORS[r].rows.map((row) => ({ id: r + "-" + row[0], revision: r, row }));
    vectorCache[r] = { list, byId: new Map(list.map((v) => [v.id, v])) };
    return vectorCache[r];
  }
  function scenarioOf(v) {
    const code = v.row[1];
    const sc = { revision: v.revision };
    const n = FIELDS.length - 1;
    for (let k = 0; k < n; k++) sc[FIELDS[k]] = D.scenario.values[FIELDS[k]][D.alphabet.indexOf(code[k])];
    sc.wrappers = Array.from(code.slice(n), (c) => D.scenario.values.wrappers[D.alphabet.indexOf(c)]);
    return sc;
  }
  const resultOf = (i) => JSON.parse(D.results[i]);
  function pathOf(v) {
    if (!v.steps) v.steps = resolvePath(v.revision, v.row[2]);
    return v.steps;
  }
  function rulesOfPath(r, steps) {
    const seen = new Set();
    for (const st of steps) {
      for (const x of st.t.rules) seen.add(x);
      if (st.t.outcome) seen.add(D.outcomes[st.t.outcome].rule);
    }
    return seen;
  }
  function searchText(v) {
    if (v.text) return v.text;
    const sc = scenarioOf(v);
    const steps = pathOf(v);
    const out = [v.id, "outcome:" + (steps.length ? steps[steps.length - 1].outcome : "")];
    const res = resultOf(v.row[3]);
    const code = resultCode(v.revision, res);
    if (code) out.push("code:" + code);
    for (const f of FIELDS) out.push(f + "=" + (f === "wrappers" ? sc.wrappers.join(",") || "none" : sc[f]));
    for (const rule of rulesOfPath(v.revision, steps)) out.push(rule);
    for (const st of steps) out.push(st.t.id, st.event);
    v.text = " " + out.join(" ").toLowerCase() + " ";
    return v.text;
  }
  function searchVectors(r, query) {
    const words = query.toLowerCase().split(/\s+/).filter(Boolean);
    const all = vectorsOf(r).list;
    if (!words.length) return all;
    return all.filter((v) => {
      const text = searchText(v);
      return words.every((w) => (/^r\d+$/.test(w) || TABLES[r].byId.has(w) ? text.includes(" " + w + " ") : text.includes(w)));
    });
  }

  // ---------------------------------------------------------------------------------------------
  // The drawing: one SVG per revision, the same layout in every view
  // ---------------------------------------------------------------------------------------------
  const ui = { rev: REVISIONS[0], view: "overview", svg: null, edges: new Map(), rows: new Map(), nodes: new Map(),
    viewBox: null, full: null, steps: null, at: 0, stepInfo: null };

  function mountSvg() {
    const host = $("#diagram");
    host.innerHTML = LAYOUT[ui.rev];
    const svg = host.querySelector("svg");
    svg.removeAttribute("width");
    svg.removeAttribute("height");
    ui.svg = svg;
    ui.edges = new Map();
    ui.rows = new Map();
    ui.nodes = new Map();
    for (const g of svg.querySelectorAll("g.edge")) {
      for (const id of g.id.split("+")) ui.edges.set(id, g);
    }
    for (const g of svg.querySelectorAll("g[id^='a_']")) ui.rows.set(g.id.slice(2), g);
    for (const g of svg.querySelectorAll("g.node")) if (g.id.startsWith("state-")) ui.nodes.set(g.id.slice(6), g);
    for (const a of svg.querySelectorAll("a")) a.addEventListener("click", (e) => e.preventDefault());
    const vb = svg.viewBox.baseVal;
    ui.full = { x: vb.x, y: vb.y, w: vb.width, h: vb.height };
    fit();
    svg.addEventListener("click", onDiagramClick);
  }

  function setViewBox(v) {
    ui.viewBox = v;
    ui.svg.setAttribute("viewBox", [v.x, v.y, v.w, v.h].join(" "));
  }
  function fit() { setViewBox({ ...ui.full }); }
  function zoomToEl(el) { zoomTo(toGraph(el), 40); }
  function zoomToStates(names) {
    let box = null;
    for (const n of names) {
      const g = ui.nodes.get(n);
      if (!g) continue;
      const b = toGraph(g);
      box = box ? { x1: Math.min(box.x1, b.x), y1: Math.min(box.y1, b.y), x2: Math.max(box.x2, b.x + b.width), y2: Math.max(box.y2, b.y + b.height) }
        : { x1: b.x, y1: b.y, x2: b.x + b.width, y2: b.y + b.height };
    }
    if (box) zoomTo({ x: box.x1, y: box.y1, width: box.x2 - box.x1, height: box.y2 - box.y1 }, 90);
  }
  function zoomTo(b, margin) {
    const m = margin || 30;
    setViewBox({ x: b.x - m, y: b.y - m, w: b.width + 2 * m, h: b.height + 2 * m });
  }
  function toGraph(el) {
    // A bounding box of ``el`` in the SVG's viewBox units (Graphviz translates the graph group).
    const b = el.getBBox();
    const graph = ui.svg.querySelector("g.graph");
    const m = graph.transform.baseVal.consolidate();
    const dx = m ? m.matrix.e : 0, dy = m ? m.matrix.f : 0;
    return { x: b.x + dx, y: b.y + dy, width: b.width, height: b.height };
  }
  function zoomBy(f, cx, cy) {
    const v = ui.viewBox;
    const x = cx === undefined ? v.x + v.w / 2 : cx;
    const y = cy === undefined ? v.y + v.h / 2 : cy;
    setViewBox({ x: x - (x - v.x) * f, y: y - (y - v.y) * f, w: v.w * f, h: v.h * f });
  }
  function ensureVisible(el) {
    const b = toGraph(el);
    const v = ui.viewBox;
    if (b.x >= v.x && b.y >= v.y && b.x + b.width <= v.x + v.w && b.y + b.height <= v.y + v.h) return;
    const w = Math.max(v.w, b.width * 1.4), h = Math.max(v.h, b.height * 1.4);
    setViewBox({ x: b.x + b.width / 2 - w / 2, y: b.y + b.height / 2 - h / 2, w, h });
  }

  function installPanZoom() {
    const host = $("#diagram");
    let drag = null;
    host.addEventListener("wheel", (e) => {
      e.preventDefault();
      const r = ui.svg.getBoundingClientRect();
      const v = ui.viewBox;
      const scale = Math.max(v.w / r.width, v.h / r.height);
      const cx = v.x + (e.clientX - r.left - (r.width - v.w / scale) / 2) * scale;
      const cy = v.y + (e.clientY - r.top - (r.height - v.h / scale) / 2) * scale;
      zoomBy(e.deltaY > 0 ? 1.15 : 1 / 1.15, cx, cy);
    }, { passive: false });
    host.addEventListener("mousedown", (e) => { drag = { x: e.clientX, y: e.clientY, v: { ...ui.viewBox }, moved: false }; });
    window.addEventListener("mousemove", (e) => {
      if (!drag) return;
      const r = ui.svg.getBoundingClientRect();
      const scale = Math.max(drag.v.w / r.width, drag.v.h / r.height);
      const dx = (e.clientX - drag.x) * scale, dy = (e.clientY - drag.y) * scale;
      if (Math.abs(e.clientX - drag.x) + Math.abs(e.clientY - drag.y) > 3) drag.moved = true;
      if (drag.moved) setViewBox({ ...drag.v, x: drag.v.x - dx, y: drag.v.y - dy });
    });
    window.addEventListener("mouseup", () => { setTimeout(() => { drag = null; }, 0); });
    host.addEventListener("click", (e) => { if (drag && drag.moved) e.stopPropagation(); }, true);
    $("#zoom-in").onclick = () => zoomBy(1 / 1.4);
    $("#zoom-out").onclick = () => zoomBy(1.4);
    $("#zoom-fit").onclick = fit;
  }

  function onDiagramClick(e) {
    const row = e.target.closest("g[id^='a_']");
    const edge = e.target.closest("g.edge");
    const node = e.target.closest("g.node");
    if (row) return selectTransition(row.id.slice(2));
    if (edge) return selectTransition(edge.id.split("+")[0]);
    if (node && node.id.startsWith("state-")) return selectState(node.id.slice(6));
    const stage = e.target.closest("g.cluster");
    if (stage && ui.view === "overview") { setView("machine"); zoomToEl(stage); }
  }

  function clearMarks() {
    if (!ui.svg) return;
    ui.svg.classList.remove("dim");
    for (const el of ui.svg.querySelectorAll(".onpath, .current, .violated, .selected, .row-current")) {
      el.classList.remove("onpath", "current", "violated", "selected", "row-current");
    }
  }
  const edgeKey = (st) => st.t.id + "-" + st.source;

  // ---------------------------------------------------------------------------------------------
  // Panels
  // ---------------------------------------------------------------------------------------------
  const panel = () => $("#panel");
  function ruleHtml(id, open) {
    const r = D.rules[id];
    if (!r) return "<div class='rule'>" + esc(id) + "</div>";
    return "<details class='rule' data-rule='" + esc(id) + "'" + (open ? " open" : "") + "><summary><b>" + esc(id) + "</b> " + esc(r.title) +
      " — <span class='muted'>" + esc(r.summary) + "</span></summary><div class='text'>" + r.html + "</div></details>";
  }
  function outcomeHtml(name) {
    if (!name) return "<span class='muted'>none yet</span>";
    const o = D.outcomes[name];
    return "<b>" + esc(name) + "</b> " + (o.code ? "<span class='tag err'>" + esc(o.code) + "</span>" : "") +
      (o.is_error ? "<span class='tag err'>error</span>" : "<span class='tag okay'>success</span>") +
      (o.route === "final" ? "<span class='tag'>FINAL route</span>" : "") + " <span class='muted'>(" + esc(o.rule) + ")</span>";
  }
  function precedenceRow(r, row) { return D.revisions[r].precedence.find((p) => p.row === row); }
  // A transition's guards as the drawing labels them: without those that cannot fail here.
  const shownGuards = (t) => t.guards.filter(([g]) => !t.moot.includes(g)).map(([g, w]) => (w ? "" : "not ") + g).join(" and ");
  function transitionTitle(t) {
    return t.id + " " + t.events.join(", ");
  }
  function transitionHtml(t) {
    const r = ui.rev;
    const dest = t.dest === null ? "(same state)" : t.dest;
    let h = "<h2>" + esc(transitionTitle(t)) + "</h2>";
    h += "<p>" + t.sources.map((s) => "<a data-state='" + esc(s) + "'>" + esc(s) + "</a>").join(" / ") + " → " +
      (t.dest ? "<a data-state='" + esc(t.dest) + "'>" + esc(dest) + "</a>" : esc(dest)) + "</p>";
    const tags = [];
    if (t.events.some((e) => D.events[e].cancellation)) tags.push("<span class='tag cancel'>cancellation event</span>");
    if (t.alternative) tags.push("<span class='tag may'>MAY: allowed, the reference does not take it</span>");
    if (t.invoke) tags.push("<span class='tag'>invokes the body</span>");
    if (t.depth) tags.push("<span class='tag'>wrapper depth " + (t.depth > 0 ? "+" : "") + t.depth + "</span>");
    if (t.hand_out) tags.push("<span class='tag'>hands out the next listener</span>");
    if (tags.length) h += "<p>" + tags.join(" ") + "</p>";
    h += "<h3>Events</h3>" + t.events.map((e) => "<div><code>" + esc(e) + "</code> — " + esc(D.events[e].doc) + "</div>").join("");
    h += "<h3>Guards</h3>" + (t.guards.length ? t.guards.map(([g, want]) => "<div><code>" + (want ? "" : "not ") + esc(g) + "</code> — " +
      esc(D.guards[g].doc) + " <span class='muted'>(" + esc(D.guards[g].rule) + ")</span>" +
      (t.moot.includes(g) ? " <span class='tag'>cannot fail in this revision: not drawn</span>" : "") + "</div>").join("") : "<div class='muted'>none: the first candidate for this state and event</div>");
    h += "<h3>Outcome</h3><div>" + (t.outcome ? outcomeHtml(t.outcome) : "<span class='muted'>kept: the call's result does not change</span>") + "</div>";
    if (t.precedence !== null) {
      const p = precedenceRow(r, t.precedence);
      h += "<h3>Precedence row " + p.row + "</h3><div>" + esc(p.situation) + " → <b>" + esc(p.outcome) + "</b>; beats " + esc(p.beats) +
        " <a data-view-link='precedence' data-row='" + p.row + "'>(the table)</a></div>";
    }
    h += "<h3>Rules</h3>" + t.rules.map((x) => ruleHtml(x, t.rules.length === 1)).join("");
    const taking = vectorsOf(r).list.filter((v) => transitionsOf(r, v.row[2]).includes(t.i)).slice(0, 6);
    h += "<h3>Vectors taking it</h3>" + (taking.length ? taking.map((v) => "<a data-vector='" + v.id + "'>" + v.id + "</a>").join(", ") :
      "<span class='muted'>none of the shipped vectors (see the vectors README: some transitions need a step:&lt;k&gt; cancellation point)</span>");
    return h;
  }
  const backToSteps = () => (ui.steps ? "<p><a id='back-to-steps'>← back to the steps</a></p>" : "");
  function selectTransition(key) {
    const m = /^([a-z0-9_]+)-(.+)$/.exec(key);
    if (!m) return;
    const t = TABLES[ui.rev].byId.get(m[1]);
    if (!t) return;
    if (ui.view === "overview") setView("machine", true);
    if (!ui.steps) clearMarks();
    for (const el of ui.svg.querySelectorAll(".selected")) el.classList.remove("selected");
    const g = ui.edges.get(key);
    if (g) g.classList.add("selected");
    panel().innerHTML = transitionHtml(t) + backToSteps();
    const back = $("#back-to-steps");
    if (back) back.onclick = () => renderStepPanel();
    if (location.hash !== "#transition=" + key) history.replaceState(null, "", "#transition=" + key);
  }
  function selectState(name) {
    const s = stateInfo[name];
    const r = ui.rev;
    if (ui.view === "overview") setView("machine", true);
    if (!ui.steps) clearMarks();
    for (const el of ui.svg.querySelectorAll(".selected")) el.classList.remove("selected");
    const g = ui.nodes.get(name);
    if (g) g.classList.add("selected");
    const stage = D.stages.findIndex((st) => st.states.includes(name));
    let h = "<h2>state " + esc(name) + "</h2><p>" + esc(s.action) + "</p><p>";
    if (stage >= 0) h += "<span class='tag'>stage " + (stage + 1) + ": " + esc(D.stages[stage].titles[r]) + "</span>";
    if (s.wait) h += "<span class='tag'>waits on foreign code: cancellation can arrive here</span>";
    if (s.initial) h += "<span class='tag'>initial</span>";
    if (s.terminal) h += "<span class='tag'>terminal</span>";
    h += "</p>";
    const out = D.revisions[r].transitions.filter((t) => t.sources.includes(name));
    const inc = D.revisions[r].transitions.filter((t) => t.dest === name && !t.sources.includes(name));
    const li = (t, src) => "<li><a data-transition='" + t.id + "-" + esc(src) + "'>" + esc(transitionTitle(t)) + "</a>" +
      (shownGuards(t) ? " <span class='muted'>[" + esc(shownGuards(t)) + "]</span>" : "") +
      " → " + esc(t.dest || "same") + (t.outcome ? " / " + esc(t.outcome) : "") + "</li>";
    h += "<h3>Leaving it (tried in this order)</h3><ul>" + out.map((t) => li(t, name)).join("") + "</ul>";
    h += "<h3>Entering it</h3><ul>" + inc.map((t) => li(t, t.sources[0])).join("") + "</ul>";
    panel().innerHTML = h + backToSteps();
    const back = $("#back-to-steps");
    if (back) back.onclick = () => renderStepPanel();
    history.replaceState(null, "", "#state=" + name);
  }

  function machinePanel() {
    const r = ui.rev;
    let h = "<h2>" + esc(D.revisions[r].title) + "</h2>";
    h += "<p>One tool call runs through seven stages (R10). Click any state or transition (labelled with its id, e.g. <code>c2_aborted</code>) for its guards, outcome, rule texts and precedence row. Drag to pan, wheel or +/− to zoom.</p><ol>";
    D.stages.forEach((s, k) => {
      const n = D.revisions[r].transitions.filter((t) => t.sources.some((x) => s.states.includes(x))).length;
      h += "<li><a data-stage='" + k + "'><b>" + esc(s.titles[r]) + "</b></a> <span class='muted'>" + esc(s.states.join(", ")) + " · " + n + " transitions leave it · " + esc(s.rule) + "</span></li>";
    });
    const own = D.revisions[r].transitions.map((t) => t.id);
    const all = new Set(REVISIONS.flatMap((x) => D.revisions[x].transitions.map((t) => t.id)));
    const others = [...all].filter((id) => !own.includes(id));
    h += "</ol><p class='muted' id='numbering'>" + own.length + " transitions in this revision, " + vectorsOf(r).list.length +
      " vectors. A transition is named by its id in contract.toml, one name in both revisions; of the " + all.size +
      " transitions, these belong to the other revision only: " + others.join(" ") + ". Shaded states wait on foreign code (cancellation can arrive there); dashed red edges are cancellation events; dotted purple ones are MAY (allowed, not taken by the reference).</p>";
    h += "<p class='muted'>" + esc(D.generated) + ".</p>";
    panel().innerHTML = h;
  }

  // ---------------------------------------------------------------------------------------------
  // Stepping: a vector's path, or a trace's
  // ---------------------------------------------------------------------------------------------
  function startSteps(info) {
    ui.stepInfo = info;
    ui.steps = info.steps;
    ui.at = info.start !== undefined ? info.start : 0;
    $("#stepper").hidden = false;
    zoomToStates([D.revisions[info.revision].initial, ...info.steps.map((s) => s.dest)]);
    showStep();
  }
  function stopSteps() {
    ui.steps = null;
    ui.stepInfo = null;
    $("#stepper").hidden = true;
    clearMarks();
  }
  function maxStep() {
    return ui.steps.length + (ui.stepInfo.violation ? 1 : 0);
  }
  function showStep() {
    const info = ui.stepInfo;
    const steps = ui.steps;
    clearMarks();
    ui.svg.classList.add("dim");
    const n = ui.at;
    const r = info.revision;
    let current = null;
    let currentState = D.revisions[r].initial;
    ui.nodes.get(currentState) && ui.nodes.get(currentState).classList.add("onpath");
    for (let k = 0; k < Math.min(n, steps.length); k++) {
      const st = steps[k];
      const g = ui.edges.get(edgeKey(st));
      if (g) g.classList.add("onpath");
      for (const s of [st.source, st.dest]) ui.nodes.get(s) && ui.nodes.get(s).classList.add("onpath");
      currentState = st.dest;
      current = st;
    }
    const violating = info.violation && n > steps.length;
    if (current && !violating) {
      const g = ui.edges.get(edgeKey(current));
      if (g) { g.classList.add("current"); ensureVisible(g); }
      const row = ui.rows.get(edgeKey(current));
      if (row) row.classList.add("row-current");
    }
    const node = ui.nodes.get(currentState);
    if (node) {
      node.classList.add(violating ? "violated" : "current");
      if (!current || violating) ensureVisible(node);
    }
    $("#step-count").textContent = violating ? "violation" : "step " + n + " / " + steps.length;
    $("#step-now").textContent = violating ? info.violation.sentence : current ? current.source + " —" + current.event + "→ " + current.dest : "at " + currentState + ", before the first event";
    renderStepPanel();
  }
  function step(delta) {
    if (!ui.steps) return;
    ui.at = Math.max(0, Math.min(maxStep(), ui.at + delta));
    showStep();
  }
  function renderStepPanel() {
    const info = ui.stepInfo;
    const steps = ui.steps;
    const n = ui.at;
    const r = info.revision;
    let h = info.header;
    const current = n > 0 && n <= steps.length ? steps[n - 1] : null;
    const violating = info.violation && n > steps.length;
    h += "<h3>Path</h3><ol class='steps'>";
    steps.forEach((st, k) => {
      const cls = k + 1 === n ? "now" : k + 1 < n ? "done" : "todo";
      h += "<li class='" + cls + "' data-step='" + (k + 1) + "'>" + esc(st.event + " → " + st.dest) + " <span class='mono'>" + esc(st.t.id) + "</span></li>";
    });
    if (info.violation) h += "<li class='" + (violating ? "violation" : "todo") + "' data-step='" + (steps.length + 1) + "'>✗ " + esc(info.violation.seen) + ": not allowed</li>";
    h += "</ol>";
    if (violating) {
      h += "<div class='violation-box' id='violation'><b>Stopped at the first violation</b> (event " + info.violation.index + " of the call, line " + (info.violation.line || info.violation.index + 1) + ")<pre>" + esc(info.violation.check || info.violation.sentence) + "</pre>" + (info.violation.note ? "<div class='muted'>" + esc(info.violation.note) + "</div>" : "") + "</div>";
    } else if (current) {
      const t = current.t;
      h += "<h3>Step " + n + ": " + esc(current.source + " → " + current.dest) + "</h3>";
      h += "<div><a data-transition='" + esc(edgeKey(current)) + "'>" + esc(transitionTitle(t)) + "</a>" + (shownGuards(t) ? " <span class='muted'>[" + esc(shownGuards(t)) + "]</span>" : "") + "</div>";
      h += "<h3>The call now holds</h3><div id='step-outcome'>" + outcomeHtml(current.outcome) + "</div>";
      h += "<h3>Rules cited</h3>" + t.rules.map((x) => ruleHtml(x, false)).join("");
    } else {
      h += "<p class='muted'>Before the first event: the call is in " + esc(D.revisions[r].initial) + ". Step with ▶ or the → key.</p>";
    }
    if (n === steps.length && !info.violation && info.result) {
      const last = steps[steps.length - 1];
      const decided = [...steps].reverse().find((st) => st.t.outcome !== null && st.t.outcome === last.outcome);
      h += "<h3>Published result</h3><pre id='step-result'>" + esc(JSON.stringify(info.result, null, 1)) + "</pre>";
      if (decided && decided.t.precedence !== null) {
        const p = precedenceRow(r, decided.t.precedence);
        h += "<div>Decided by precedence row " + p.row + " (" + decided.t.id + "): " + esc(p.situation) + " → " + esc(p.outcome) + "; beats " + esc(p.beats) + "</div>";
      } else if (decided) {
        h += "<div class='muted'>Set by " + decided.t.id + "; no competing situation (no precedence row applies).</div>";
      }
    }
    if (info.footer) h += info.footer;
    panel().innerHTML = h;
  }

  // ---------------------------------------------------------------------------------------------
  // Views
  // ---------------------------------------------------------------------------------------------
  function scenarioHtml(sc) {
    return "<table>" + FIELDS.map((f) => "<tr><td class='muted'>" + f + "</td><td class='mono'>" + esc(f === "wrappers" ? JSON.stringify(sc.wrappers) : sc[f]) + "</td></tr>").join("") + "</table>";
  }
  function openVector(id, keepView) {
    const r = id.split("-")[0];
    if (!TABLES[r]) return;
    if (r !== ui.rev) setRevision(r);
    const v = vectorsOf(r).byId.get(id);
    if (!v) { panel().innerHTML = "<p>No vector " + esc(id) + " in the shipped " + esc(r) + " vectors.</p>"; return; }
    if (!keepView) setView("vectors", true);
    ui.vector = v;
    const steps = pathOf(v);
    const result = resultOf(v.row[3]);
    const header = "<p><a id='back-to-search'>← search</a> · <a data-compare='" + v.id + "'>side by side</a></p><h2>vector " + v.id + "</h2>" +
      "<details><summary>scenario</summary>" + scenarioHtml(scenarioOf(v)) + "</details>";
    startSteps({ revision: r, steps, result, header, footer: "" });
    history.replaceState(null, "", "#vector=" + id);
  }
  function vectorsPanel(query) {
    stopSteps();
    const r = ui.rev;
    const q = query || "";
    const found = searchVectors(r, q);
    let h = "<h2>Vectors of " + esc(r) + "</h2><input id='vector-search' type='search' placeholder='id, rule (R21), outcome:aborted, code:TOOL_TIMEOUT, cancel=gate:body, wrappers=retry, c2_aborted' value='" + esc(q) + "'>";
    h += "<p class='muted'>" + found.length + " of " + vectorsOf(r).list.length + " match" + (found.length > 200 ? "; the first 200 are listed" : "") + ". Every word must match: an id, a rule or transition cited on the path, outcome:, code:, or a scenario feature (field=value).</p>";
    h += "<ul class='list' id='vector-list'>" + found.slice(0, 200).map((v) => {
      const steps = pathOf(v);
      const sc = scenarioOf(v);
      return "<li data-vector='" + v.id + "'><b>" + v.id + "</b> " + esc(steps.length ? steps[steps.length - 1].outcome : "") + " <span class='muted'>caller=" + esc(sc.caller) + " cancel=" + esc(sc.cancel) + (sc.wrappers.length ? " wrappers=" + esc(sc.wrappers.join(",")) : "") + "</span></li>";
    }).join("") + "</ul>";
    panel().innerHTML = h;
    const input = $("#vector-search");
    input.addEventListener("input", () => {
      clearTimeout(input.timer);
      input.timer = setTimeout(() => { vectorsPanel(input.value); const i = $("#vector-search"); i.focus(); i.setSelectionRange(i.value.length, i.value.length); }, 200);
    });
  }

  // Marks the steps of ``b`` that are not in a longest common subsequence with ``a``.
  function differing(a, b) {
    const key = (st) => st.event + ">" + st.dest + ">" + st.outcome;
    const x = a.map(key), y = b.map(key);
    const L = Array.from({ length: x.length + 1 }, () => new Array(y.length + 1).fill(0));
    for (let i = x.length - 1; i >= 0; i--) for (let j = y.length - 1; j >= 0; j--) {
      L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
    }
    const same = new Set();
    let i = 0, j = 0;
    while (i < x.length && j < y.length) {
      if (x[i] === y[j]) { same.add(j); i++; j++; } else if (L[i + 1][j] >= L[i][j + 1]) i++; else j++;
    }
    return y.map((_, k) => !same.has(k));
  }
  function comparePanel(id) {
    stopSteps();
    const v = id ? vectorsOf(id.split("-")[0]).byId.get(id) : ui.vector;
    if (!v) {
      panel().innerHTML = "<h2>Side by side</h2><p>Pick a vector first (Vectors tab), or try <a data-compare='" + vectorsOf(ui.rev).list[0].id + "'>" + vectorsOf(ui.rev).list[0].id + "</a>. Vectors whose wrapper retries also show each retry behaviour (D11): search <code>wrappers=retry</code>.</p>";
      return;
    }
    if (v.revision !== ui.rev) setRevision(v.revision);
    ui.vector = v;
    const cols = [{ title: v.revision + (v.row[5] ? " · " + D.default_retry : ""), revision: v.revision, path: v.row[2], result: v.row[3] }];
    const other = v.row[4];
    if (other) cols.push({ title: other[0], revision: other[0], path: other[1], result: other[2] });
    if (v.row[5]) {
      D.retries.forEach((rb, k) => {
        if (rb.name === D.default_retry) return;
        const x = v.row[5][k];
        if (x) cols.push({ title: v.revision + " · " + rb.name, revision: v.revision, path: x[0], result: x[1] });
      });
    }
    const base = resolvePath(cols[0].revision, cols[0].path);
    let h = "<p><a data-vector='" + v.id + "'>← step " + v.id + "</a></p><h2>" + v.id + " side by side</h2>";
    h += "<p class='muted'>The same scenario on the reference registry" + (other ? " under both revisions" : "") + (v.row[5] ? " and under each retry behaviour of a wrapper's second next() (D11)" : "") +
      ". Steps not in the first column's path are marked.</p>";
    if (!other) h += "<p class='muted'>Under the other revision this scenario is not a call (a usage error, e.g. the revised contract requires a caller signal).</p>";
    h += "<div class='columns' id='compare'>";
    for (const c of cols) {
      const steps = resolvePath(c.revision, c.path);
      const marks = differing(base, steps);
      const res = resultOf(c.result);
      h += "<div><h4>" + esc(c.title) + "</h4><ol class='steps'>" + steps.map((st, k) => "<li class='" + (marks[k] ? "differs" : "done") + "'>" + esc(st.event + " → " + st.dest) + "</li>").join("") + "</ol>";
      h += "<div>" + outcomeHtml(steps.length ? steps[steps.length - 1].outcome : null) + "</div><pre>" + esc(JSON.stringify(res)) + "</pre></div>";
    }
    h += "</div>";
    panel().innerHTML = h;
    document.body.classList.add("wide");
    history.replaceState(null, "", "#compare=" + v.id);
  }
  function precedencePanel(highlight) {
    stopSteps();
    const r = ui.rev;
    let h = "<h2>Outcome precedence (R39) — " + esc(r) + "</h2><p class='muted'>When situations meet in one call, the row decides the outcome. Each row links to the transitions that decide it and to a vector whose outcome it decided.</p><table id='precedence'><tr><th>#</th><th>Situation</th><th>Outcome</th><th>Beats</th><th>Rules</th><th>Decided by</th><th>Vector</th></tr>";
    for (const p of D.revisions[r].precedence) {
      h += "<tr" + (p.row === highlight ? " style='background:#fff4cc'" : "") + " data-row='" + p.row + "'><td>" + p.row + "</td><td>" + esc(p.situation) + "</td><td>" + esc(p.outcome) + "</td><td>" + esc(p.beats) + "</td><td>" +
        p.rules.map((x) => "<a data-rule-open='" + x + "'>" + x + "</a>").join(" ") + "</td><td>" +
        p.deciders.map((i) => { const t = TABLES[r].byIndex.get(i); return "<a data-transition='" + t.id + "-" + esc(t.sources[0]) + "'>" + t.id + "</a>"; }).join(" ") + "</td><td>" +
        (p.vector ? "<a data-vector='" + p.vector + "'>" + p.vector + "</a>" : "<span class='muted'>none</span>") + "</td></tr>";
    }
    h += "</table><p class='muted'>Click a row to mark its transitions on the machine.</p><div id='rule-text'></div>";
    panel().innerHTML = h;
    document.body.classList.add("wide");
    if (highlight) markDeciders(highlight);
  }

  // A precedence row's deciding transitions, marked on the drawing.
  function markDeciders(row) {
    clearMarks();
    const p = precedenceRow(ui.rev, row);
    ui.svg.classList.add("dim");
    for (const i of p.deciders) {
      const t = TABLES[ui.rev].byIndex.get(i);
      for (const src of t.sources) {
        const g = ui.edges.get(t.id + "-" + src);
        if (g) g.classList.add("onpath", "selected");
        for (const st of [src, t.dest || src]) ui.nodes.get(st) && ui.nodes.get(st).classList.add("onpath");
      }
    }
    for (const tr of document.querySelectorAll("#precedence tr[data-row]")) tr.style.background = Number(tr.dataset.row) === row ? "#fff4cc" : "";
  }

  function tracePanel() {
    stopSteps();
    const r = ui.rev;
    let h = "<h2>Replay a trace</h2>";
    h += "<div class='drop' id='drop'>Drop a trace file (JSON Lines, the trace.schema.json format) here, or <label class='link'>choose one<input id='trace-file' type='file' accept='.jsonl,.json,.txt' hidden></label></div>";
    h += "<textarea id='trace-text' placeholder='…or paste trace lines here'></textarea><p><button class='btn' id='trace-go'>Replay</button> <select id='trace-call' hidden></select></p>";
    h += "<div id='trace-error' role='alert'></div>";  // next to what the user just did, not below the examples
    h += "<p class='muted'><b>What this page checks, in your browser:</b> the call's contract events replayed through the contract's transition table (every transition the table allows, MAY points included), and whether the published result's kind (isError and its error code) agrees with the outcome reached. It stops at the first event the table does not allow. It does not check texts, result shapes, listeners, body signals or notifications, and does not name the rule: <code>toolcancel check FILE</code> gives the full verdict. The examples below carry that verdict, computed when the site was built.</p>";
    h += "<h3>Non-conforming examples (" + esc(r) + ")</h3><ul class='list' id='example-list'>";
    D.revisions[r].examples.forEach((x, k) => {
      h += "<li data-example='" + r + "/" + k + "'><b>" + esc(x.verdict.rule) + "</b> " + esc(x.verdict.title) + "<br><span class='muted'>" + esc(x.title) + "</span></li>";
    });
    h += "</ul>";
    panel().innerHTML = h;
    const drop = $("#drop");
    drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
    drop.addEventListener("dragleave", () => drop.classList.remove("over"));
    drop.addEventListener("drop", (e) => { e.preventDefault(); drop.classList.remove("over"); if (e.dataTransfer.files[0]) readFile(e.dataTransfer.files[0]); });
    $("#trace-file").addEventListener("change", (e) => { if (e.target.files[0]) readFile(e.target.files[0]); });
    $("#trace-go").onclick = () => replayText($("#trace-text").value, "pasted trace");
  }
  // A trace the page cannot replay: said under the Replay button, scrolled into view.
  function traceError(message) {
    if (ui.view !== "trace") setView("trace");
    const box = $("#trace-error");
    box.innerHTML = "<div class='violation-box'>" + esc(message) + "</div>";
    box.scrollIntoView({ block: "nearest" });
  }
  function readFile(file) {
    const reader = new FileReader();
    reader.onload = () => replayText(String(reader.result), file.name);
    reader.onerror = () => traceError(file.name + ": cannot be read");
    reader.readAsText(file);
  }
  function replayText(text, name, callId) {
    const parsed = parseTrace(text);
    if (parsed.error) return traceError(name + ": " + parsed.error);
    const ids = [...parsed.calls.keys()];
    const call = callId && parsed.calls.has(callId) ? callId : ids[0];
    showReplay(parsed.calls.get(call), name + (ids.length > 1 ? ", call " + call : ""), null, ids.length > 1 ? { ids, call, text, name } : null);
  }
  function showReplay(lines, name, verdict, many) {
    const rep = replayCall(lines);
    if (rep.error) return traceError(name + ": " + rep.error);
    if (rep.revision !== ui.rev) setRevision(rep.revision);
    setView("trace", true);
    let violation = null;
    let steps = rep.steps;
    if (verdict) {
      // A built-in example: the stop and the sentence are toolcancel check's own.
      steps = steps.filter((s) => s.line < verdict.event_index);
      violation = { index: verdict.event_index, line: verdict.line, seen: verdict.seen, sentence: verdict.explanation, check: verdict.check };
    } else if (rep.violation) {
      violation = { ...rep.violation, line: null, note: "Found by the table replay in this page; run toolcancel check on the file for the rule and the full verdict." };
    }
    let header = "<p><a id='back-to-traces'>← traces</a></p><h2>" + esc(name) + "</h2>";
    if (many) header += "<p>call <select id='call-pick'>" + many.ids.map((c) => "<option" + (c === many.call ? " selected" : "") + ">" + esc(c) + "</option>").join("") + "</select></p>";
    if (!violation) header += "<div class='ok-box'>The table allows this call's events and its result's kind (what this page checks; <code>toolcancel check</code> checks the rest).</div>";
    const info = { revision: rep.revision, steps, result: rep.result, header, violation, footer: "" };
    startSteps(info);
    const pick = $("#call-pick");
    if (pick) pick.onchange = () => replayText(many.text, many.name, pick.value);
  }
  function openExample(key) {
    const [r, k] = key.split("/");
    const x = D.revisions[r] && D.revisions[r].examples[Number(k)];
    if (!x) return;
    if (r !== ui.rev) setRevision(r);
    const lines = x.lines.map((l) => JSON.parse(l));
    showReplay(lines, "example: " + x.title, { ...x.verdict, check: x.check }, null);
    ui.at = maxStep();
    showStep();
    history.replaceState(null, "", "#example=" + key);
  }

  function setRevision(r) {
    if (!TABLES[r]) return;
    ui.rev = r;
    $("#revision").value = r;
    mountSvg();
    ui.svg.classList.toggle("overview", ui.view === "overview");
  }
  function setView(view, quiet) {
    ui.view = view;
    document.body.classList.remove("wide");
    document.body.classList.toggle("overview", view === "overview");
    for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("on", b.dataset.view === view);
    ui.svg.classList.toggle("overview", view === "overview");
    if (quiet) return;
    stopSteps();
    if (view === "overview") { fit(); machinePanel(); history.replaceState(null, "", "#overview"); }
    else if (view === "machine") { machinePanel(); history.replaceState(null, "", "#machine"); }
    else if (view === "vectors") { vectorsPanel(""); history.replaceState(null, "", "#vectors"); }
    else if (view === "compare") comparePanel(null);
    else if (view === "precedence") { precedencePanel(null); history.replaceState(null, "", "#precedence"); }
    else if (view === "trace") { tracePanel(); history.replaceState(null, "", "#trace"); }
  }

  function route() {
    const h = decodeURIComponent(location.hash.slice(1));
    const [k, v] = h.split("=");
    if (k === "vector" && v) return openVector(v);
    if (k === "compare" && v) { setView("compare", true); return comparePanel(v); }
    if (k === "example" && v) return openExample(v);
    if (k === "transition" && v) { setView("machine"); return selectTransition(v); }
    if (k === "state" && v) { setView("machine"); return selectState(v); }
    if (["overview", "machine", "vectors", "compare", "precedence", "trace"].includes(k)) return setView(k);
    setView("overview");
  }

  function wire() {
    const sel = $("#revision");
    sel.innerHTML = REVISIONS.map((r) => "<option value='" + r + "'>" + r + "</option>").join("");
    sel.onchange = () => { setRevision(sel.value); setView(ui.view === "compare" ? "vectors" : ui.view); };
    for (const b of document.querySelectorAll("#tabs button")) b.onclick = () => setView(b.dataset.view);
    $("#step-prev").onclick = () => step(-1);
    $("#step-next").onclick = () => step(1);
    $("#step-first").onclick = () => step(-1e9);
    $("#step-last").onclick = () => step(1e9);
    document.addEventListener("keydown", (e) => {
      if (!ui.steps || /INPUT|TEXTAREA|SELECT/.test(e.target.tagName)) return;
      if (e.key === "ArrowRight") step(1);
      else if (e.key === "ArrowLeft") step(-1);
      else if (e.key === "Home") step(-1e9);
      else if (e.key === "End") step(1e9);
    });
    panel().addEventListener("click", (e) => {
      const a = e.target.closest("[data-vector],[data-transition],[data-state],[data-stage],[data-step],[data-compare],[data-example],[data-view-link],[data-rule-open],#back-to-search,#back-to-traces");
      if (!a) {
        const tr = e.target.closest("tr[data-row]");
        if (tr) markDeciders(Number(tr.dataset.row));
        return;
      }
      if (a.id === "back-to-search") return setView("vectors");
      if (a.id === "back-to-traces") return setView("trace");
      if (a.dataset.vector) return openVector(a.dataset.vector);
      if (a.dataset.transition) return selectTransition(a.dataset.transition);
      if (a.dataset.state) return selectState(a.dataset.state);
      if (a.dataset.stage) { setView("machine"); return zoomToEl(ui.svg.querySelector("#stage-" + a.dataset.stage)); }
      if (a.dataset.step) { ui.at = Number(a.dataset.step); return showStep(); }
      if (a.dataset.compare) { setView("compare", true); return comparePanel(a.dataset.compare); }
      if (a.dataset.example) return openExample(a.dataset.example);
      if (a.dataset.viewLink) { setView(a.dataset.viewLink, true); return precedencePanel(Number(a.dataset.row)); }
      if (a.dataset.ruleOpen) { $("#rule-text").innerHTML = ruleHtml(a.dataset.ruleOpen, true); $("#rule-text").scrollIntoView(); }
    });
  }

  wire();
  installPanZoom();
  setRevision(ui.rev);
  route();
  window.addEventListener("hashchange", route);
  // For tests and the console: the table replay and the current step, read-only.
  window.TC_EXPLORER = {
    replay: (text) => { const p = parseTrace(text); if (p.error) return p; return replayCall([...p.calls.values()][0]); },
    state: () => ({ view: ui.view, revision: ui.rev, at: ui.at, steps: ui.steps ? ui.steps.length : null, violation: ui.stepInfo ? ui.stepInfo.violation : null }),
  };
})();
