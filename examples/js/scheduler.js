// scheduler.js -- an agent-loop turn scheduler for registry.js, written from CONTRACT.md R36-R38
// and R9. It runs one model turn's calls ONE AT A TIME: the reference groups parallel-safe calls
// and overlaps their bodies, but grouping is a MAY (R36), and a sequential scheduler keeps every
// rule with far less machinery -- prepare, body and finalize of one call never overlap another's.
import { snapshot } from './registry.js';

/**
 * Run `calls` ([{callId, name, arguments}]) under the turn `signal`; return the turn's log:
 * [{kind: 'tool/call' | 'tool/result' | 'context', callId, payload}].
 *
 * R36: the turn signal is read before each call is prepared; once it is aborted nothing more
 *      starts, and the call already running is awaited (execute() itself drains its body).
 *      The turn signal is every call's caller signal.
 * R37: every call that never started gets a call record and the synthetic result (R9), after
 *      every started call's result, in model order; it never touches the registry.
 * R38: results are committed in model order (here: the only order); a result's contexts are
 *      accepted when it is committed and logged as `context` entries after all of the turn's
 *      results; the `tool/result` entry carries no additionalContexts.
 */
export async function runTurn(registry, calls, { signal, agent } = {}) {
  const results = [];
  const contexts = [];
  let next = 0;
  for (; next < calls.length && !signal.aborted; next++) {
    const { callId, name, arguments: args } = calls[next];
    results.push(callEntry(calls[next]));
    const result = await registry.execute(name, args, { signal, callId, agent });
    const { additionalContexts = [], ...payload } = result;
    results.push(entry('tool/result', callId, payload));
    for (const context of additionalContexts) contexts.push(entry('context', callId, context));
  }
  const skipped = registry.results.skipped();
  for (const call of calls.slice(next)) {
    results.push(callEntry(call));
    results.push(entry('tool/result', call.callId, skipped));
  }
  return [...results, ...contexts];
}

/** A call record; arguments that are not JSON are recorded as why (the call itself then gets
 *  the registry's R11 error). */
function callEntry({ callId, name, arguments: args }) {
  try {
    return entry('tool/call', callId, { name, arguments: args });
  } catch (error) {
    return entry('tool/call', callId, { name, argumentsError: String(error?.message ?? error) });
  }
}

/** A durable log entry: its payload snapshotted, so what was logged cannot change afterwards. */
const entry = (kind, callId, payload) => Object.freeze({ kind, callId, payload: snapshot(payload) });
