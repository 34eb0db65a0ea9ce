// turns.js -- the turn part of the adapter protocol (spec/vectors/README.md, "Turns"), shared by
// both adapters: a turn is observed from outside the scheduler, the same at both levels.
import { ToolRegistry } from './registry.js';
import { runTurn } from './scheduler.js';

const settle = () => new Promise((r) => setImmediate(r)); // let every pending job run
const text = (t) => ({ type: 'text', text: t });

/** Run one turn message's batch through scheduler.js; return {log, observed: {events, returned}}.
 *  `errors`: the registry's error shape ('contract', or 'seed' for pre-R44-error). */
export async function runTurnVector(revision, { calls, abort, release }, errors = 'contract') {
  const events = [], waiting = new Map(), turn = new AbortController();
  const record = (event, exec, extra = {}) => events.push({ event, call: exec.callId, ...extra });
  const index = (exec) => Number(exec.callId.slice(1));
  const gate = (name) => new Promise((resolve) => waiting.set(name, resolve));
  const stop = () => {
    if (turn.signal.aborted) return;
    events.push({ event: 'abort' });
    turn.abort(new Error('the turn was cancelled'));
  };
  const reg = new ToolRegistry({ revision, log: () => {}, errors });
  reg.hooks.on('tools/pre-execute', async (exec) => {
    record('pre', exec);
    await gate(`gate:${index(exec)}:pre`);
    record('pre_done', exec);
    return calls[index(exec)] === 'denied' ? { kind: 'deny', reason: 'not now' } : { kind: 'allow' };
  });
  reg.register({ name: 'tool', async execute(_args, exec) {
    record('body_start', exec);
    if (calls[index(exec)] === 'defer') exec.deferContext({ type: 'note', text: `from ${exec.callId}` });
    try { await gate(`gate:${index(exec)}:body`); } finally { record('body_settle', exec); }
    if (calls[index(exec)] === 'throw') throw new Error('tool failed');
    return [text(`done ${exec.callId}`)];
  } });
  reg.hooks.on('tools/post-execute', async (exec) => {
    record('post', exec);
    await gate(`gate:${index(exec)}:post`);
    record('post_done', exec);
    return { kind: 'accept' };
  });
  reg.hooks.on('tools/result', (exec, result) => record('notify', exec, { result }));
  if (abort === 'before_turn') stop();
  const batch = calls.map((_, i) => ({ callId: `c${i}`, name: 'tool', arguments: { i } }));
  let log = [], returned = null;
  runTurn(reg, batch, { signal: turn.signal }).then((entries) => { log = entries; returned = events.length; });
  // Release one gate at a time: the first reached (fifo) or the last (lifo).
  for (let g; (await settle(), waiting.size > 0);) {
    g = release === 'fifo' ? [...waiting.keys()][0] : [...waiting.keys()].at(-1);
    if (abort === g) stop();
    const go = waiting.get(g);
    waiting.delete(g);
    go();
  }
  return { log, observed: { events, returned } };
}
