// registry.test.js -- what the conformance vectors cannot see, checked directly:
//   node --test examples/js/
// (node:test and node:assert are built in; no dependencies.)  The vectors judge one call of a
// fixed scenario language; these tests pin the registry's API edges: usage errors that produce no
// result (R32, R40), the snapshot's refusals (R11, R30), listener hygiene on the caller's signal
// (R22), observer containment and identity (R31, D14), D11's concurrent next(), deadlines (R35),
// the later source's outputs (deviations E7-meta, E7-value).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import {
  RegistryUsageError,
  TimeoutReason,
  ToolError,
  ToolRegistry,
  deadline,
  fuse,
  installTimeoutPolicy,
  snapshot,
} from './registry.js';
import { VirtualClock } from './adapter-trace.js';

const quiet = { log: () => {} };
const done = [{ type: 'text', text: 'done' }];

test('R40: the revised contract refuses a call without a caller signal, before entry', async () => {
  const registry = new ToolRegistry({ revision: 'revised', ...quiet });
  let notified = 0;
  registry.hooks.on('tools/result', () => notified++);
  await assert.rejects(registry.execute('tool', { q: new Set() }), RegistryUsageError);
  assert.equal(notified, 0); // no result, no notification; before the argument snapshot too
});

test('R32: a declared budget must be a positive finite number', () => {
  const registry = new ToolRegistry(quiet);
  for (const timeoutMs of [0, -1, Infinity, NaN, '100']) {
    assert.throws(
      () => registry.register({ name: 't', execute: async () => done, timeoutMs }),
      { name: 'TypeError', message: 'tool "t" timeoutMs must be a positive finite number' },
    );
  }
});

test('R11/R30: the snapshot refuses what JSON would lose, and deep-freezes what it keeps', () => {
  const cyclic = {};
  cyclic.self = cyclic;
  for (const value of [undefined, () => 0, new Set(), new Date(0), NaN, -0, [1, , 3], cyclic]) {
    assert.throws(() => snapshot({ q: value }), { name: 'NotSerializableError' });
  }
  const copy = snapshot(JSON.parse('{"__proto__": {"a": [1]}, "b": null}'));
  assert.deepEqual(Object.keys(copy), ['__proto__', 'b']); // an own key, not a prototype
  assert.ok(Object.isFrozen(copy) && Object.isFrozen(copy.__proto__.a));
});

test('R22: the caller keeps no listener of the call, even when a relay was built', async () => {
  const registry = new ToolRegistry(quiet);
  registry.register({ name: 'tool', execute: async () => done });
  registry.hooks.on('tools/execute', async (exec, next) => {
    const upstream = exec.signal;
    exec.signal = new AbortController().signal; // forces a relay of C and W (R21)
    try {
      return await next();
    } finally {
      exec.signal = upstream;
    }
  });
  const caller = new AbortController();
  const result = await registry.execute('tool', {}, { signal: caller.signal });
  assert.deepEqual(result, { content: done, isError: false });
  assert.equal(getEventListeners(caller.signal, 'abort').length, 0);
});

test('R31/D14: observers get the frozen result; a throw or a rejection is contained', async () => {
  const registry = new ToolRegistry(quiet);
  registry.register({ name: 'tool', execute: async () => ({ content: done, meta: { rows: 3 } }) });
  const seen = [];
  registry.hooks.on('tools/result', async (exec, result) => {
    seen.push(result);
    throw new Error('rejected');
  });
  registry.hooks.on('tools/result', (exec, result) => {
    seen.push(result);
    assert.ok(Object.isFrozen(exec)); // the view is frozen before notification (R23)
    throw new Error('thrown');
  });
  const result = await registry.execute('tool', {});
  assert.equal(seen.length, 2);
  assert.ok(seen.every((r) => r === result) && Object.isFrozen(result.meta));
});

test('D11: a concurrent next() fails; the started body is still awaited (R27)', async () => {
  const registry = new ToolRegistry(quiet);
  let settled = false;
  registry.register({
    name: 'tool',
    execute: async () => {
      await new Promise((r) => setImmediate(r));
      settled = true;
      return done;
    },
  });
  registry.hooks.on('tools/execute', async (exec, next) => {
    next(); // not awaited
    return next(); // while the first is pending: a usage error, thrown to this wrapper
  });
  const result = await registry.execute('tool', {});
  const text = "Error: next() called while this wrapper's previous next() runs";
  assert.equal(result.content[0].text, text); // the wrapper's failure: R3 on the final route
  assert.ok(settled, 'execute() settled before the body it started');
});

test('D11 cursor: a second next() after a full pass goes straight to base dispatch', async () => {
  const registry = new ToolRegistry(quiet);
  const ran = [];
  registry.register({ name: 'tool', execute: async () => (ran.push('body'), done) });
  registry.hooks.on('tools/execute', async (exec, next) => (await next(), next()));
  registry.hooks.on('tools/execute', async (exec, next) => (ran.push('inner'), next()));
  await registry.execute('tool', {});
  assert.deepEqual(ran, ['inner', 'body', 'body']);
});

test('R21: a relay aborts with the reason of the first source to abort', () => {
  const c = new AbortController();
  const w = new AbortController();
  const f = fuse(c.signal, w.signal);
  assert.equal(f.kind, 'relay');
  w.abort('wrapper first');
  c.abort('caller later');
  assert.equal(f.signal.reason, 'wrapper first');
  const g = fuse(undefined, undefined);
  assert.equal(g.kind, 'none');
  assert.equal(g.signal, undefined);
});

test('R35/D13: a deadline fires with its own reason; an upstream abort is not its timeout', () => {
  const clock = new VirtualClock();
  const own = deadline(undefined, 100, 'TOOL_TIMEOUT', clock);
  clock.advance(100);
  assert.ok(own.firedByOwnTimer() && own.signal.reason.code === 'TOOL_TIMEOUT');

  const outer = deadline(undefined, 50, 'TOOL_TIMEOUT', clock);
  const inner = deadline(outer.signal, 100, 'TOOL_TIMEOUT', clock); // same code, nested
  clock.advance(60);
  assert.ok(inner.signal.aborted && !inner.firedByOwnTimer()); // the outer expiry, not its own
  assert.throws(() => deadline(undefined, NaN, 'X', clock), RangeError);
});

test('R3: a ToolError subclass is named by its class; other codes are not structured', async () => {
  class DiskFull extends ToolError {}
  const registry = new ToolRegistry(quiet);
  const systemError = Object.assign(new Error('no such file'), { code: 'ENOENT' });
  const structured = new DiskFull('disk full', 'ENOSPC');
  registry.register({ name: 'a', execute: async () => Promise.reject(structured) });
  registry.register({ name: 'b', execute: async () => Promise.reject(systemError) });
  assert.deepEqual((await registry.execute('a', {})).error, { name: 'DiskFull', code: 'ENOSPC' });
  assert.equal((await registry.execute('b', {})).error, undefined);
});

test('R7: post-execute decisions use the original\'s field, additionalContexts; no other key', async () => {
  const note = (t) => ({ type: 'note', text: t });
  const run = async (decision) => {
    const registry = new ToolRegistry(quiet);
    registry.register({ name: 't', execute: async () => done });
    registry.hooks.on('tools/post-execute', async () => decision);
    return registry.execute('t', {});
  };
  const accepted = await run({ kind: 'accept', additionalContexts: [note('kept')] });
  assert.deepEqual(accepted.additionalContexts, [note('kept')]);
  const blocked = await run({ kind: 'block', feedback: done, additionalContexts: [note('b')] });
  assert.deepEqual([blocked.isError, blocked.additionalContexts], [true, [note('b')]]);
  // `contexts` (a misspelling the original would silently ignore) is the listener's failure.
  const refused = await run({ kind: 'accept', contexts: [note('lost')] });
  assert.equal(refused.isError, true);
  assert.equal(refused.additionalContexts, undefined);
});

test('D13: an outer deadline made by deadline() and one made by hand give the same verdict', async () => {
  // The outer_deadline vectors' environment: a deadline with the timeout policy's own code,
  // aborting with the same kind of reason the policy's deadline does (a TimeoutReason).
  const byDeadline = (up, timers) => deadline(up, 50, 'TOOL_TIMEOUT', timers);
  const byHand = (up, timers) => {
    const c = new AbortController();
    const timer = timers.setTimeout(() => c.abort(new TimeoutReason('TOOL_TIMEOUT', 50)), 50);
    return { signal: c.signal, dispose: () => timers.clearTimeout(timer) };
  };
  const run = async (outer, classify) => {
    const clock = new VirtualClock();
    const registry = new ToolRegistry({ ...quiet, timers: clock });
    let release;
    registry.register({
      name: 't',
      timeoutMs: 100,
      execute: (_args, exec) => new Promise((resolve) => {
        release = () => resolve(done);
        exec.signal.addEventListener('abort', () => resolve(done));
      }),
    });
    registry.hooks.on('tools/execute', async (exec, next) => {
      const up = exec.signal;
      const d = outer(up, clock);
      exec.signal = d.signal;
      try { return await next(); } finally { exec.signal = up; d.dispose(); }
    });
    installTimeoutPolicy(registry, { classify });
    const pending = registry.execute('t', {}, { signal: new AbortController().signal });
    await new Promise((r) => setImmediate(r));
    clock.advance(51);
    await new Promise((r) => setImmediate(r));
    release?.();
    return (await pending).error.code;
  };
  for (const [classify, code] of [['identity', 'ABORTED'], ['code', 'TOOL_TIMEOUT']]) {
    assert.equal(await run(byDeadline, classify), code, `deadline(), classify ${classify}`);
    assert.equal(await run(byHand, classify), code, `by hand, classify ${classify}`);
  }
  assert.throws(() => installTimeoutPolicy(new ToolRegistry(quiet), { classify: 'name' }), RangeError);
});

test("outputs 'later' (E7-meta, E7-value): a success keeps its value; a bad meta is a tool error at settle, before ABORTED", async () => {
  assert.throws(() => new ToolRegistry({ outputs: 'head' }), RegistryUsageError);
  const registry = new ToolRegistry({ revision: 'revised', outputs: 'later', ...quiet });
  const controller = new AbortController();
  registry.register({ name: 'ok', execute: async () => ({ content: done, meta: { rows: 3 } }) });
  registry.register({ name: 'bad', execute: async () => {
    controller.abort(); // aborted while it runs: the contract would make a success ABORTED
    return { content: done, meta: { handle: () => 0 } };
  } });
  const ok = await registry.execute('ok', {}, { signal: new AbortController().signal });
  assert.deepEqual(ok.value, { content: done, meta: { rows: 3 } });
  const bad = await registry.execute('bad', {}, { signal: controller.signal });
  assert.equal(bad.error.info.code, 'INVALID_TOOL_OUTPUT');
  assert.equal('value' in bad, false);
});
