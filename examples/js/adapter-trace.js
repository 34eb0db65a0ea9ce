// adapter-trace.js -- a trace-level conformance adapter for registry.js.
//
//   toolcancel conform --revision seed --adapter node examples/js/adapter-trace.js
//
// It speaks the adapter protocol of spec/vectors/README.md (JSON Lines on stdin/stdout): say
// hello, then for every vector build a fresh registry from the scenario's vocabulary, drive the
// call gate by gate, and answer with the canonical trace the registry wrote, the result and
// what the environment observed.  Everything is deterministic: gates are released one at a
// time when nothing else can run, and time is a virtual clock the registry's deadlines use.
//
// `runScenario(scenario)` is exported for other adapters and tests; running this file serves
// the protocol (`--verbose` sends the registry's contained-failure log to stderr).

import * as readline from 'node:readline';
import { pathToFileURL } from 'node:url';
import {
  RETRY, REVISIONS, ToolRegistry, ToolError, deadline, installTimeoutPolicy,
} from './registry.js';
import { runTurnVector } from './turns.js';
import { Probes } from './probes.js';

export const PROTOCOL = 2;
export const IMPLEMENTATION = 'toolcancel examples/js registry.js (cursor next())';

// ------------------------------------------------------------------------------------------------
// The scenario vocabulary (spec/vectors/README.md, "The scenario language")
// ------------------------------------------------------------------------------------------------

const VOCABULARY = {
  revision: ['seed', 'revised'],
  caller: ['none', 'live', 'aborted'],
  args: ['ok', 'not_serializable'],
  pre: ['allow', 'deny', 'ask', 'throw', 'throw_structured'],
  approval: ['approved', 'rejected', 'cancelled', 'unavailable', 'throw'],
  guard: ['none', 'deny', 'throw'],
  timeout: ['absent', 'budget', 'timer_first'],
  body: [
    'success', 'success_meta', 'bad_meta', 'throw', 'throw_structured', 'defer_success', 'defer_throw',
  ],
  post: ['accept', 'accept_content', 'accept_contexts', 'block', 'throw'],
  observer: ['none', 'throws'],
};
const WRAPPERS = [
  'delegate', 'wait_before', 'wait_after', 'replace_live', 'replace_aborting', 'replace_aborted',
  'remove', 'short_success', 'short_error', 'throw_before', 'throw_after', 'retry', 'outer_deadline',
];
const BUDGET_MS = 100;
const OUTER_MS = 50; // an outer_deadline's budget: it expires before the tool's own (D13)
const HOLD_MS = 86_400_000; // how long an uncooperative body is held after its signal aborted (R27)

/** Throws a message naming the field when a scenario does not fit the language. */
function checkScenario(s) {
  if (s === null || typeof s !== 'object') throw new Error('scenario must be an object');
  for (const [field, allowed] of Object.entries(VOCABULARY)) {
    if (!allowed.includes(s[field])) {
      throw new Error(`${field}: ${JSON.stringify(s[field])} is not one of ${allowed.join(', ')}`);
    }
  }
  for (const field of ['agent', 'approval_seam', 'tool_known', 'cooperative']) {
    if (typeof s[field] !== 'boolean') throw new Error(`${field} must be a boolean`);
  }
  if (!Array.isArray(s.wrappers) || !s.wrappers.every((w) => WRAPPERS.includes(w))) {
    throw new Error(`wrappers must be a list of ${WRAPPERS.join(', ')}`);
  }
  const c = s.cancel;
  const gate = typeof c === 'string' && /^gate:./.test(c);
  if (!(c === 'never' || c === 'before_entry' || c === 'after' || gate || c === 'with_deadline')) {
    throw new Error(
      `cancel: ${JSON.stringify(c)} is not never, before_entry, after, gate:<name> or with_deadline`);
  }
}

// ------------------------------------------------------------------------------------------------
// Virtual time: the registry's deadlines get this clock's setTimeout/clearTimeout
// ------------------------------------------------------------------------------------------------

export class VirtualClock {
  now = 0;
  #timers = new Map(); // id -> {at, fn}
  #ids = 0;

  setTimeout = (fn, ms) => {
    const id = ++this.#ids;
    this.#timers.set(id, { at: this.now + Math.max(0, Number(ms) || 0), fn });
    return id;
  };

  clearTimeout = (id) => {
    this.#timers.delete(id);
  };

  /** Move time forward by `ms`, running every timer that falls due, earliest first. */
  advance(ms) {
    const until = this.now + ms;
    for (;;) {
      let due; // the earliest timer due by `until` (the first created among equals)
      for (const entry of this.#timers) {
        if (entry[1].at <= until && (!due || entry[1].at < due[1].at)) due = entry;
      }
      if (!due) break;
      const [id, { at, fn }] = due;
      this.#timers.delete(id);
      this.now = at;
      fn();
    }
    this.now = until;
  }
}

// ------------------------------------------------------------------------------------------------
// One scenario
// ------------------------------------------------------------------------------------------------

/** The reasons the caller's and the wrappers' signals abort with (plain objects: a reason need
 *  not be an Error, and these need no stack trace). */
class Reason {
  constructor(message) {
    this.message = message;
  }
}
class CallerReason extends Reason {}
class WrapperReason extends Reason {}

const text = (t) => ({ type: 'text', text: t });
const note = (t) => ({ type: 'note', text: t });
/** Let every pending promise job run: the call is then blocked at a gate, or finished. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

/** Whose reason a signal carries, as the vectors classify it. */
function whose(signal) {
  if (!signal?.aborted) return null;
  const reason = signal.reason;
  if (reason instanceof CallerReason) return 'caller';
  if (reason instanceof WrapperReason) return 'wrapper';
  return reason?.code === 'TOOL_TIMEOUT' ? 'timeout' : 'other';
}

/** Run one scenario to quiescence; returns {trace, result, observed}. */
export async function runScenario(s, { log = () => {} } = {}) {
  checkScenario(s);
  const clock = new VirtualClock();
  const trace = [];
  const bodySignals = [];
  const aborting = []; // controllers of replace_aborting wrappers, in creation order
  const outer = []; // deadlines of outer_deadline wrappers
  const waiting = new Map(); // gate name -> release()
  let notifications = 0;
  let bodySignal; // the signal the latest body invocation received
  const probes = new Probes(); // the optional observations (probes.js)

  /** Wait at gate `name` until the driver releases it (or, given a signal, it aborts). */
  const gate = (name, signal) =>
    new Promise((resolve) => {
      const release = () => {
        waiting.delete(name);
        signal?.removeEventListener('abort', release);
        resolve();
      };
      waiting.set(name, release);
      if (signal?.aborted) release();
      else signal?.addEventListener('abort', release);
    });

  const caller = s.caller === 'none' ? undefined : new AbortController();
  const abortCaller = () => {
    if (caller && !caller.signal.aborted) caller.abort(new CallerReason('the caller cancelled'));
  };
  if (s.caller === 'aborted' || s.cancel === 'before_entry') abortCaller();

  const registry = new ToolRegistry({
    revision: s.revision,
    onTrace: (line) => trace.push(line),
    timers: clock,
    log,
  });

  registry.hooks.on('tools/pre-execute', async (exec) => {
    probes.sawPre(exec);
    await gate('pre');
    switch (s.pre) {
      case 'allow': return { kind: 'allow' };
      case 'deny': return { kind: 'deny', reason: 'policy refused the call' };
      case 'ask': return { kind: 'ask', reason: 'needs a human' };
      case 'throw': throw new Error('pre-execute policy failed');
      default: throw new ToolError('policy store unavailable', 'POLICY_DOWN');
    }
  });

  if (s.approval_seam) {
    registry.setApproval(async (request) => {
      probes.asked(request);
      await gate('approval');
      if (s.approval === 'throw') throw new Error('approval channel crashed');
      return s.approval;
    });
  }

  registry.addGuard(() => {
    if (s.guard === 'throw') throw new Error('guard crashed');
    return s.guard === 'deny' ? 'guard refused the call' : undefined;
  });

  s.wrappers.forEach((behaviour, i) => {
    registry.hooks.on('tools/execute', async (exec, next) => {
      const upstream = exec.signal;
      switch (behaviour) {
        case 'short_success': return { content: [text(`wrapper ${i} answered`)], isError: false };
        case 'short_error':
          return { content: [text(`Error: wrapper ${i} refused`)], isError: true };
        case 'throw_before': throw new Error(`wrapper ${i} failed before delegating`);
        case 'wait_before': await gate(`w${i}_before`); break;
        case 'replace_live':
        case 'replace_aborting': {
          const mine = new AbortController();
          if (behaviour === 'replace_aborting') aborting.push(mine);
          exec.signal = mine.signal;
          break;
        }
        case 'replace_aborted':
          exec.signal = AbortSignal.abort(new WrapperReason(`wrapper ${i} refused`));
          break;
        case 'remove': delete exec.signal; break;
        case 'outer_deadline': {
          const d = deadline(upstream, OUTER_MS, 'TOOL_TIMEOUT', clock);
          outer.push(d);
          exec.signal = d.signal;
          break;
        }
        default: break; // delegate, wait_after, throw_after, retry
      }
      let result;
      try {
        result = await probes.next(exec, next);
        if (behaviour === 'retry') result = await probes.next(exec, next);
      } finally {
        if (upstream === undefined) delete exec.signal; // every delegating wrapper restores
        else exec.signal = upstream;
        if (behaviour === 'outer_deadline') outer.at(-1).dispose();
      }
      if (behaviour === 'wait_after') await gate(`w${i}_after`);
      if (behaviour === 'throw_after') throw new Error(`wrapper ${i} failed after delegating`);
      return result;
    });
  });

  if (s.timeout !== 'absent') installTimeoutPolicy(registry); // innermost wrapper

  if (s.tool_known) {
    registry.register({
      name: 'tool',
      timeoutMs: s.timeout === 'absent' ? undefined : BUDGET_MS,
      async execute(_args, exec) {
        const signal = exec.signal;
        bodySignal = signal;
        if (s.body.startsWith('defer_')) {
          exec.deferContext(note('deferred 1'));
          exec.deferContext(note('deferred 2'));
        }
        try {
          await gate('body', s.cooperative ? signal : undefined);
        } finally {
          bodySignals.push({ aborted: signal?.aborted === true, reason: whose(signal) });
        }
        switch (s.body) {
          case 'success_meta': return { content: [text('done')], meta: { rows: 3 } };
          case 'bad_meta': return { content: [text('done')], meta: { handle: () => 0 } };
          case 'throw_structured': throw new ToolError('disk full', 'ENOSPC');
          case 'throw':
          case 'defer_throw': throw new Error('tool failed');
          default: return [text('done')];
        }
      },
    });
  }

  registry.hooks.on('tools/post-execute', async (_exec, received) => {
    probes.sawPost(received);
    await gate('post');
    switch (s.post) {
      case 'accept': return { kind: 'accept' };
      case 'accept_content':
        return { kind: 'accept', content: [text('rewritten by post-execute')] };
      case 'accept_contexts':
        return { kind: 'accept', additionalContexts: [note('from post-execute')] };
      case 'block':
        return {
          kind: 'block',
          feedback: [text('Error: blocked by post-execute')],
          additionalContexts: [note('from block')],
        };
      default: throw new Error('post-execute policy failed');
    }
  });

  registry.hooks.on('tools/result', () => {
    notifications++;
  });
  registry.hooks.on('tools/result', probes.observe);
  if (s.observer === 'throws') {
    registry.hooks.on('tools/result', () => {
      throw new Error('observer crashed');
    });
  }

  // -- drive the call: release gates one at a time, in the order the call reaches them --------
  let result = null;
  let raised = null;
  let settledAt = null;
  const args = s.args === 'ok' ? { q: 'x' } : { q: new Set([1, 2]) };
  registry
    .execute(s.tool_known ? 'tool' : 'no_such_tool', args, {
      signal: caller?.signal,
      callId: 'c1',
      agent: s.agent ? 'agent' : undefined,
    })
    .then(
      (r) => { result = r; },
      (e) => { raised = String(e); },
    )
    .finally(() => { settledAt = trace.length; });

  for (;;) {
    await settle();
    const g = waiting.keys().next().value;
    if (g === undefined) break;
    if (g === 'body') {
      for (const c of aborting) {
        if (!c.signal.aborted) c.abort(new WrapperReason('a wrapper deadline passed'));
      }
      if (outer.some((d) => !d.signal.aborted)) {
        clock.advance(OUTER_MS + 1);
        await settle();
      }
      if (s.timeout === 'timer_first') {
        clock.advance(BUDGET_MS + 1); // the deadline's timer runs now: first in this one step
        if (s.cancel === 'with_deadline') abortCaller(); // the same synchronous step (R34)
        await settle();
      }
    }
    if (s.cancel === `gate:${g}`) abortCaller();
    if (g === 'body' && !s.cooperative && bodySignal?.aborted) {
      // Hold the body a day after its signal aborted (R27: no grace period); drive first any
      // gate a registry that stopped waiting went on to, so `settled_at` shows it.
      clock.advance(HOLD_MS);
      await settle();
      for (let o; (o = [...waiting.keys()].find((k) => k !== 'body')) !== undefined;) {
        if (s.cancel === `gate:${o}`) abortCaller();
        waiting.get(o)();
        await settle();
      }
    }
    waiting.get(g)?.();
  }
  if (settledAt === null) raised = 'execute() never settled';
  if (s.cancel === 'after') {
    abortCaller();
    await settle();
  }
  const observed = {
    notifications, body_signals: bodySignals, settled_at: settledAt, raised, ...probes.observed(result),
  };
  return { trace, result, observed };
}

// ------------------------------------------------------------------------------------------------
// The protocol
// ------------------------------------------------------------------------------------------------

/** The answer to one input line: an outcome, or an error naming what is wrong. */
export async function answer(line, options) {
  let id = null;
  try {
    const msg = JSON.parse(line);
    id = typeof msg?.id === 'string' ? msg.id : null;
    if (msg?.protocol !== PROTOCOL) {
      throw new Error(`protocol ${JSON.stringify(msg?.protocol)}; this adapter speaks ${PROTOCOL}`);
    }
    if (id === null) throw new Error('a vector message needs a string id');
    if (msg.type === 'turn') {
      return { protocol: PROTOCOL, type: 'outcome', id, ...(await runTurnVector(msg.revision, msg.turn)) };
    }
    if (msg.type !== 'vector') throw new Error(`type ${JSON.stringify(msg.type)}; expected "vector"`);
    if (msg.revision !== msg.scenario?.revision) {
      throw new Error("scenario.revision differs from the message's revision");
    }
    const outcome = await runScenario(msg.scenario, options);
    return { protocol: PROTOCOL, type: 'outcome', id, ...outcome };
  } catch (error) {
    return { protocol: PROTOCOL, type: 'error', id, message: String(error?.message ?? error) };
  }
}

async function main() {
  const verbose = process.argv.includes('--verbose');
  const log = verbose
    ? (level, message, error) => console.error(`[${level}] ${message}`, error ?? '')
    : () => {};
  const send = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
  // protocol 2: the hello declares the conformance level (the full trace) and the registry's
  // retry behaviour (D11); every vector is judged by that behaviour's expectation
  send({
    protocol: PROTOCOL,
    type: 'hello',
    implementation: IMPLEMENTATION,
    revisions: REVISIONS,
    level: 'trace',
    retry: RETRY,
    turns: true, // turn vectors run through scheduler.js (turns.js)
  });
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (line.trim() !== '') send(await answer(line, { log }));
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
