// adapter-outcome.js -- an outcome-level (black-box) conformance adapter for registry.js: protocol 2
// of spec/vectors/README.md, reporting only what a user of the registry sees, through its public API.
//   toolcancel conform --revision seed --adapter node examples/js/adapter-outcome.js
// --classify-by-code: the timeout policy classifies as the original does (timeoutOf), declared in
// the hello as deviation D13; --later-outputs: revised calls build outputs as the later source
// does (outputs 'later'), declared as E7-meta and E7-value; --first-revision-errors: revised calls
// and turns keep the seed's error shape, as the first revised commit does (errors 'seed'),
// declared as pre-R44-error (--undeclared: the hello declares none).
import * as readline from 'node:readline';
import { getEventListeners } from 'node:events';
import { REVISIONS, ToolRegistry, ToolError, deadline, installTimeoutPolicy } from './registry.js';
import { VirtualClock } from './adapter-trace.js'; // virtual time for deadlines: no real timer is set
import { runTurnVector } from './turns.js'; // turn vectors through scheduler.js
import { Probes } from './probes.js'; // observer writes, the approval's signal, the slot after next()

const byCode = process.argv.includes('--classify-by-code');
const later = process.argv.includes('--later-outputs');
const firstErrors = process.argv.includes('--first-revision-errors');
const errorsOf = (revision) => (firstErrors && revision === 'revised' ? 'seed' : 'contract');
const deviations = process.argv.includes('--undeclared') ? []
  : [...(byCode ? ['D13'] : []), ...(firstErrors ? ['pre-R44-error'] : []),
    ...(later ? ['E7-meta', 'E7-value'] : [])];
const send = (m) => process.stdout.write(`${JSON.stringify({ protocol: 2, ...m })}\n`);
const settle = () => new Promise((r) => setImmediate(r)); // let every pending job run
const text = (t) => ({ type: 'text', text: t });
const note = (t) => ({ type: 'note', text: t });
class CallerReason extends Error {}
class WrapperReason extends Error {}
const whose = (r) => (r instanceof CallerReason ? 'caller' : r instanceof WrapperReason ? 'wrapper'
  : r?.code === 'TOOL_TIMEOUT' ? 'timeout' : 'other');
const state = (s) => ({ aborted: s?.aborted === true, reason: s?.aborted ? whose(s.reason) : null });
const PRE = { allow: { kind: 'allow' }, deny: { kind: 'deny', reason: 'policy refused the call' },
  ask: { kind: 'ask', reason: 'needs a human' } };
const POST = { accept: { kind: 'accept' },
  accept_content: { kind: 'accept', content: [text('rewritten by post-execute')] },
  accept_contexts: { kind: 'accept', additionalContexts: [note('from post-execute')] },
  block: { kind: 'block', feedback: [text('Error: blocked by post-execute')], additionalContexts: [note('from block')] } };

const HOLD_MS = 86_400_000; // how long an uncooperative body is held after its signal aborted

async function run(s) {
  const timers = new VirtualClock(), waiting = new Map(), aborting = [], bodies = [], notified = [];
  const probes = new Probes();
  const outer = []; // deadlines of outer_deadline wrappers (D13: same code, 50 ms, expire first)
  const gate = (name, signal) => new Promise((resolve) => {
    const go = () => { waiting.delete(name); signal?.removeEventListener('abort', go); resolve(); };
    waiting.set(name, go);
    if (signal?.aborted) go(); else signal?.addEventListener('abort', go);
  });
  const caller = s.caller === 'none' ? undefined : new AbortController();
  const abortCaller = () => caller?.signal.aborted || caller?.abort(new CallerReason('cancelled'));
  if (s.caller === 'aborted' || s.cancel === 'before_entry') abortCaller();
  const outputs = later && s.revision === 'revised' ? 'later' : 'contract'; // E7: revised only
  const reg = new ToolRegistry({ revision: s.revision, timers, log: () => {}, outputs,
    errors: errorsOf(s.revision) });
  reg.hooks.on('tools/pre-execute', async (exec) => {
    probes.sawPre(exec);
    await gate('pre');
    if (s.pre === 'throw') throw new Error('pre-execute policy failed');
    if (s.pre === 'throw_structured') throw new ToolError('policy store unavailable', 'POLICY_DOWN');
    return PRE[s.pre];
  });
  const fail = (message) => { throw new Error(message); };
  if (s.approval_seam) reg.setApproval(async (request) => {
    probes.asked(request);
    await gate('approval');
    return s.approval === 'throw' ? fail('approval channel crashed') : s.approval;
  });
  reg.addGuard(() => (s.guard === 'throw' ? fail('guard crashed')
    : s.guard === 'deny' ? 'guard refused the call' : undefined));
  s.wrappers.forEach((w, i) => reg.hooks.on('tools/execute', async (exec, next) => {
    const up = exec.signal;
    if (w === 'short_success') return { content: [text(`wrapper ${i} answered`)], isError: false };
    if (w === 'short_error') return { content: [text(`Error: wrapper ${i} refused`)], isError: true };
    if (w === 'throw_before') throw new Error(`wrapper ${i} failed before delegating`);
    if (w === 'wait_before') await gate(`w${i}_before`);
    const mine = w === 'replace_live' || w === 'replace_aborting' ? new AbortController() : null;
    if (mine) exec.signal = mine.signal;
    if (w === 'replace_aborting') aborting.push(mine);
    if (w === 'replace_aborted') exec.signal = AbortSignal.abort(new WrapperReason(`wrapper ${i} refused`));
    if (w === 'remove') delete exec.signal;
    const d = w === 'outer_deadline' ? deadline(up, 50, 'TOOL_TIMEOUT', timers) : null;
    if (d) { outer.push(d); exec.signal = d.signal; }
    let r;
    try { r = await probes.next(exec, next); if (w === 'retry') r = await probes.next(exec, next); } finally {
      if (up === undefined) delete exec.signal; else exec.signal = up;
      d?.dispose();
    }
    if (w === 'wait_after') await gate(`w${i}_after`);
    if (w === 'throw_after') throw new Error(`wrapper ${i} failed after delegating`);
    return r;
  }));
  if (s.timeout !== 'absent') installTimeoutPolicy(reg, { classify: byCode ? 'code' : 'identity' }); // innermost
  if (s.tool_known) reg.register({ name: 'tool', timeoutMs: s.timeout === 'absent' ? undefined : 100,
    async execute(_args, exec) {
      const signal = exec.signal, body = { start: state(signal), settle: null, signal };
      bodies.push(body);
      if (s.body.startsWith('defer_')) ['deferred 1', 'deferred 2'].forEach((t) => exec.deferContext(note(t)));
      try { await gate('body', s.cooperative ? signal : undefined); } finally { body.settle = state(signal); }
      if (s.body === 'success_meta') return { content: [text('done')], meta: { rows: 3 } };
      if (s.body === 'bad_meta') return { content: [text('done')], meta: { handle: () => 0 } };
      if (s.body === 'throw_structured') throw new ToolError('disk full', 'ENOSPC');
      if (s.body.endsWith('throw')) throw new Error('tool failed');
      return [text('done')];
    } });
  reg.hooks.on('tools/post-execute', async (_exec, received) => {
    probes.sawPost(received);
    await gate('post');
    if (s.post === 'throw') throw new Error('post-execute policy failed');
    return POST[s.post];
  });
  reg.hooks.on('tools/result', (_exec, r) => { notified.push(r); });
  reg.hooks.on('tools/result', probes.observe);
  if (s.observer === 'throws') reg.hooks.on('tools/result', () => { throw new Error('observer crashed'); });
  // Drive the call: release one gate at a time, in the order the call reaches them.
  const count = () => (caller ? getEventListeners(caller.signal, 'abort').length : 0);
  const listeners = { before: count(), after: 0 };
  let result = null, raised = null, settled = null;
  reg.execute(s.tool_known ? 'tool' : 'no_such_tool', s.args === 'ok' ? { q: 'x' } : { q: new Set([1]) },
    { signal: caller?.signal, callId: 'c1', agent: s.agent ? 'agent' : undefined })
    .then((r) => { result = r; }, (e) => { raised = String(e); })
    .finally(() => {
      settled = { bodies_started: bodies.length, bodies_settled: bodies.filter((b) => b.settle).length };
      listeners.after = count();
    });
  for (let g; (await settle(), (g = waiting.keys().next().value)) !== undefined;) {
    if (g === 'body') {
      for (const c of aborting) if (!c.signal.aborted) c.abort(new WrapperReason('a wrapper deadline passed'));
      if (outer.some((d) => !d.signal.aborted)) { timers.advance(51); await settle(); }
      if (s.timeout === 'timer_first') {
        timers.advance(101); // the deadline's timer runs now, so it is first in this one step
        if (s.cancel === 'with_deadline') abortCaller(); // the same synchronous step (R34)
        await settle();
      }
    }
    if (s.cancel === `gate:${g}`) abortCaller();
    if (g === 'body' && !s.cooperative && bodies.at(-1).signal?.aborted) {
      // Hold the body a day after its signal aborted (R27: no grace period); drive first any
      // gate a registry that stopped waiting went on to, so `settled` shows it.
      timers.advance(HOLD_MS); await settle();
      for (let o; (o = [...waiting.keys()].find((k) => k !== 'body')) !== undefined;) {
        if (s.cancel === `gate:${o}`) abortCaller();
        waiting.get(o)(); await settle();
      }
    }
    waiting.get(g)?.();
  }
  if (settled === null) raised = 'execute() never settled';
  if (s.cancel === 'after') { abortCaller(); await settle(); }
  const same = notified.every((r) => r === result);
  return { result, observed: { raised, notifications: notified.length, ...probes.observed(result), notified_same: same && probes.observed(result).notified_same,
    bodies: bodies.map(({ start, settle }) => ({ start, settle })), settled,
    ...(caller ? { listeners } : {}) } };
}

send({ type: 'hello', implementation: 'toolcancel examples/js registry.js (cursor next())',
  revisions: REVISIONS, level: 'outcome', retry: 'cursor', turns: true,
  ...(deviations.length ? { deviations } : {}) });
for await (const line of readline.createInterface({ input: process.stdin })) {
  const v = JSON.parse(line);
  try { send({ type: 'outcome', id: v.id, ...(await (v.type === 'turn' ? runTurnVector(v.revision, v.turn, errorsOf(v.revision)) : run(v.scenario))) }); }
  catch (e) { send({ type: 'error', id: v.id, message: String(e?.message ?? e) }); }
}
