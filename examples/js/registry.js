// registry.js -- a small tool registry under the cooperative, quiescent tool-cancellation
// contract (spec/CONTRACT.md, rules R1-R44), in plain JavaScript: Node >= 20, no dependencies.
//
// It is a teaching example, written from the contract's rules (the rule ids are cited where they
// are implemented), not a port of the Python reference.  Both revisions: "seed" and "revised".
//
// ------------------------------------------------------------------------------------------------
// API (stable: other examples build on it)
// ------------------------------------------------------------------------------------------------
//
//   const registry = new ToolRegistry({ revision, onTrace, timers, log, outputs })
//     revision  "seed" (default) | "revised"
//     outputs   "contract" (default) | "later": build a body's output as the later source does
//     errors    "contract" (default) | "seed": revised error fields keep the seed's {name, code}
//               shape, as the first revised commit does (declared deviation pre-R44-error)
//                                (declared deviations E7-meta and E7-value, spec/CONTRACT.md):
//                                a success keeps the body's value as `value`, and a value that
//                                is not lossless JSON is INVALID_TOOL_OUTPUT at body settle
//     onTrace   (line) => void   called synchronously with every canonical trace line (an object
//                                {trace: 1, call, event, ...fields}; spec/trace.schema.json)
//     timers    {setTimeout, clearTimeout}   used by deadlines (default: the global ones); pass a
//                                virtual clock to make timeouts deterministic
//     log       (level, message, error?) => void   where contained failures go (default: stderr)
//
//   registry.register({ name, execute, timeoutMs?, agent? })   execute(args, exec) -> content
//                                list | {content, meta?}; timeoutMs is a budget (R32)
//   registry.definition(name, agent?)                            the definition the agent sees
//   registry.hooks.on(hookName, listener, { prepend? })  -> off()
//     'tools/pre-execute'   async (exec, next) => {kind:'allow'} | {kind:'deny', reason}
//                                                 | {kind:'ask', reason?}
//     'tools/execute'       async (exec, next) => result         (around-dispatch wrapper)
//     'tools/post-execute'  async (exec, result, next) => {kind:'accept', content?,
//                                   additionalContexts?} | {kind:'block', feedback,
//                                   additionalContexts?}   (the original's field names; any
//                                   other key is refused, so a misspelt field never drops data)
//     'tools/result'        (exec, result) => void | Promise     (observer)
//   registry.setApproval(async (request) => 'approved'|'rejected'|'cancelled'|'unavailable')
//     request: {callId, name, arguments, agent, reason, signal}
//   registry.addGuard((exec) => undefined | reason, { agent? })  -> off()
//   await registry.execute(name, args, { signal?, callId?, agent?, parent? })  -> frozen result
//
//   installTimeoutPolicy(registry, {classify?}) -> uninstall    the timeout wrapper (R33);
//                                classify 'identity' (default, D13) or 'code' (the original's)
//   deadline(upstream, ms, code, timers?) -> {signal, firedByOwnTimer(), dispose()}      (R35)
//   timeoutOf(signal, code) -> the signal's TimeoutReason of that code, or undefined      (R35)
//   fuse(caller, slot, onListener?) -> {signal, kind, bornAborted, dispose()}          (R21, R22)
//   waterfall(listeners, args, base)                  the cursor waterfall of the original (R16)
//   snapshot(value) -> a deep-frozen lossless copy, or throws NotSerializableError    (R11, R30)
//   canonicalJson(value) -> text                                                         (R1.4)
//   ToolError(message, code), ToolNotFoundError, RegistryUsageError, NotSerializableError,
//   TimeoutReason, TEXTS, REVISIONS, RETRY ('cursor': this registry's retry behaviour, D11)
//
// A result is a plain object: {content, isError, error?, additionalContexts?, meta?} (R1).
// The execution view `exec` that hooks and bodies receive is a plain object too:
// {token, callId, name, arguments, agent?, parent?, signal?, deferContext(ctx)}; `signal` is the
// *slot*, which around wrappers may replace or delete (R23).  It is frozen before notification.
//
// The around waterfall's next() is, as in the original, a cursor over one listener list per
// call: `next = () => (listeners.shift() ?? base)(...)`.  A wrapper that calls next() a second
// time (a retry, D11) therefore goes on from where the cursor stands -- after a full first pass,
// straight to base dispatch, skipping the inner wrappers (contract.toml's retry behaviour
// "cursor").  Calling next() while the same wrapper's previous next() is still pending fails
// (D11).  The trace's call_entry line records the behaviour and the call's wrapper count.

import { PUBLISHES_OVER } from './outcomes.js';

// ================================================================================================
// 1. Model-visible texts (contract.toml [texts]; byte for byte)
// ================================================================================================

export const REVISIONS = Object.freeze(['seed', 'revised']);

export const TEXTS = Object.freeze({
  aborted: 'Error: tool call aborted',
  aborted_before_dispatch: 'Error: tool call aborted before dispatch',
  skipped_sibling: 'Error: tool call skipped because the step was aborted before execution',
  args_not_serializable: 'Error: tool execution arguments must be losslessly JSON-serializable',
  result_not_serializable: 'Error: tool result must be losslessly JSON-serializable',
  unknown_tool: 'Error: unknown tool "{name}"',
  ask_without_seam: 'tool "{name}" requires approval (not yet supported)',
  ask_without_agent:
    'tool "{name}" requires approval, but the call has no agent to route it through',
  approval_rejected: 'the user rejected tool "{name}"',
  approval_cancelled: 'approval for tool "{name}" was cancelled',
  approval_unavailable: 'tool "{name}" requires approval, but no approval channel is available',
  unreachable_approval: 'unreachable variant in ApprovalOutcome: {value}',
  unprintable: '<unprintable thrown value>',
  tool_timeout: 'Error: tool call timed out after {ms}ms',
  blocked_without_feedback: 'tool result blocked by post-execute policy',
  non_text_feedback: '[{type} content]',
});

/** D11: what a wrapper's second next() runs.  This registry is the original's "cursor". */
export const RETRY = 'cursor';

/** `TEXTS.x` with its `{placeholders}` filled in. */
const fill = (template, values) => template.replace(/\{(\w+)\}/g, (_, key) => values[key]);

// ================================================================================================
// 2. Errors
// ================================================================================================

/** A structured failure: its result carries `error` with this class's name and `code` (R3).
 *  Subclass it to name failures; the name in the result is the class name. */
export class ToolError extends Error {
  constructor(message, code, options) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** R6: base dispatch found no definition for the name. */
export class ToolNotFoundError extends ToolError {}

/** The registry was used against the contract: no caller signal in the revised contract (R40),
 *  a concurrent next() (D11), a bad registration.  Thrown to the caller, never a result. */
export class RegistryUsageError extends Error {
  name = 'RegistryUsageError';
}

/** A value is not lossless JSON (R11, R30); `path` says where. */
export class NotSerializableError extends TypeError {
  name = 'NotSerializableError';
  constructor(path, what) {
    super(`${path}: ${what} is not lossless JSON`);
    this.path = path;
  }
}

/** The reason a deadline aborts with when its own timer fires (R35). */
export class TimeoutReason extends Error {
  name = 'TimeoutError';
  constructor(code, ms) {
    super(`timed out after ${ms}ms`);
    this.code = code;
    this.ms = ms;
  }
}

// ================================================================================================
// 3. Lossless JSON: snapshot + deep freeze (R11, R30), canonical JSON (R1.4)
// ================================================================================================

/**
 * A deep-frozen copy of `value` if it survives a JSON round trip unchanged: null, booleans,
 * finite numbers other than -0, strings, dense plain arrays, plain objects with string keys and
 * plain data properties, no cycles.  Anything else (undefined, functions, Set, Map, Date, class
 * instances, NaN, getters, symbol keys, holes) throws NotSerializableError naming the place.
 */
export function snapshot(value, path = '$', active = new Set()) {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (!Number.isFinite(value) || Object.is(value, -0)) {
        throw new NotSerializableError(path, String(Object.is(value, -0) ? '-0' : value));
      }
      return value;
    case 'object':
      if (value === null) return null;
      break;
    default: // undefined, function, symbol, bigint
      throw new NotSerializableError(path, value === undefined ? 'undefined' : `a ${typeof value}`);
  }
  if (active.has(value)) throw new NotSerializableError(path, 'a cycle');
  const proto = Object.getPrototypeOf(value);
  const isArray = Array.isArray(value);
  if (isArray ? proto !== Array.prototype : proto !== Object.prototype && proto !== null) {
    throw new NotSerializableError(path, `a ${value.constructor?.name ?? 'exotic'} object`);
  }
  const keys = Reflect.ownKeys(value);
  active.add(value);
  try {
    if (isArray) {
      // own keys of a dense plain array: "0".."n-1" and "length"; anything more is lost by JSON
      if (keys.length !== value.length + 1) {
        throw new NotSerializableError(path, 'a sparse array or one with extra properties');
      }
      const copy = new Array(value.length);
      for (let i = 0; i < value.length; i++) {
        copy[i] = snapshot(own(value, i, path), `${path}[${i}]`, active);
      }
      return Object.freeze(copy);
    }
    const copy = {};
    for (const key of keys) {
      if (typeof key !== 'string') throw new NotSerializableError(path, 'a symbol key');
      const item = snapshot(own(value, key, path), `${path}.${key}`, active);
      // `copy[key] = ...` would set the prototype for the key "__proto__"
      if (key === '__proto__') Object.defineProperty(copy, key, { value: item, enumerable: true });
      else copy[key] = item;
    }
    return Object.freeze(copy);
  } finally {
    active.delete(value);
  }
}

/** An own, enumerable data property (getters and hidden properties do not survive JSON). */
function own(object, key, path) {
  const d = Object.getOwnPropertyDescriptor(object, key);
  if (!d || !('value' in d) || !d.enumerable) {
    throw new NotSerializableError(`${path}.${String(key)}`, 'an accessor or hidden property');
  }
  return d.value;
}

/** Canonical JSON text (R1.4): keys sorted by code point, no whitespace, ECMAScript numbers. */
export function canonicalJson(value) {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort(byCodePoint);
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

function byCodePoint(a, b) {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i].codePointAt(0) - y[i].codePointAt(0);
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

// ================================================================================================
// 4. Results: every result the registry authors, in the shape of one revision (R1-R9, R44)
// ================================================================================================

const textBlock = (text) => ({ type: 'text', text });
const withoutErrorPrefix = (text) => (text.startsWith('Error: ') ? text.slice(7) : text);

/** A result with `additionalContexts` replaced (omitted when empty, R1). */
function withContexts(result, contexts) {
  const copy = { ...result };
  if (contexts && contexts.length > 0) copy.additionalContexts = contexts;
  else delete copy.additionalContexts;
  return copy;
}

/** The code of a result's `error`, in either revision's shape. */
const errorCode = (error) => error?.code ?? error?.info?.code;

/** R3: the message of any thrown value, never throwing itself. */
function messageOf(value) {
  try {
    if (value instanceof Error) return String(value.message);
    if (value !== null && typeof value === 'object' && typeof value.message === 'string') {
      return value.message;
    }
    return String(value);
  } catch {
    return TEXTS.unprintable;
  }
}

class Results {
  constructor(revision, outputs = 'contract', errors = 'contract') {
    this.revision = revision;
    this.outputs = outputs;
    this.errors = errors; // 'seed': revised errors keep the seed's {name, code} (pre-R44-error)
  }

  /** An error result: seed `error: {name, code}` only with a code; revised `{message, info?}`. */
  error(text, info, contexts) {
    const result = { content: [textBlock(text)], isError: true };
    if (this.revision === 'seed' || this.errors === 'seed') {
      if (info) result.error = { name: info.name, code: info.code };
    } else {
      result.error = { message: withoutErrorPrefix(text) };
      if (info) result.error.info = { name: info.name, code: info.code };
    }
    return withContexts(result, contexts);
  }

  /** R2: what a body returned. */
  success(value) {
    return this.outputs === 'later' ? this.output(value) : this.built(value);
  }

  built(value) {
    if (Array.isArray(value)) return { content: value, isError: false };
    if (value !== null && typeof value === 'object' && Array.isArray(value.content)) {
      const result = { content: value.content, isError: false };
      if (value.meta !== undefined) result.meta = value.meta;
      return result;
    }
    throw new TypeError('a tool body must return a list of content blocks or {content, meta?}');
  }

  /** The later source's output stage (E7-meta, E7-value): the value is snapshotted when the body
   *  settles -- a value that is not lossless JSON is a tool error there, before the body-level
   *  abort check -- and kept beside the content.  The error's texts are this example's own: the
   *  later source's are not recorded in this repository (E7-meta's mask sets them aside). */
  output(value) {
    let kept;
    try {
      kept = snapshot(value, '$.value');
    } catch (error) {
      if (!(error instanceof NotSerializableError)) throw error;
      return this.error('Error: tool output is invalid: ' + error.message,
        { name: 'ToolOutputError', code: 'INVALID_TOOL_OUTPUT' });
    }
    return { ...this.built(value), value: kept };
  }

  /** R3: a thrown value. A ToolError (a structured error) keeps its class name and code. */
  thrown(value) {
    const text = `Error: ${messageOf(value)}`;
    let info;
    try {
      if (value instanceof ToolError && typeof value.code === 'string') {
        info = { name: value.constructor.name, code: value.code };
      }
    } catch {
      info = undefined; // inspecting the name or code threw: no error key (R3.2)
    }
    return this.error(text, info);
  }

  aborted(contexts) {
    return this.error(TEXTS.aborted, { name: 'AbortError', code: 'ABORTED' }, contexts); // R4
  }

  abortedBeforeDispatch(contexts) {
    const info = { name: 'AbortError', code: 'ABORTED_BEFORE_DISPATCH' }; // R41 (revised)
    return this.error(TEXTS.aborted_before_dispatch, info, contexts);
  }

  /** R9: the scheduler's result for a model call that never started (seed: ABORTED with its
   *  own text, D17; revised: ABORTED_BEFORE_DISPATCH). */
  skipped() {
    if (this.revision !== 'seed') return this.abortedBeforeDispatch();
    return this.error(TEXTS.skipped_sibling, { name: 'AbortError', code: 'ABORTED' });
  }

  denied(reason) {
    return this.revision === 'seed'
      ? { content: [textBlock(`Error: ${reason}`)], isError: true } // R5: no error key
      : this.error(`Error: ${reason}`); // R44: {message: reason}
  }

  unknownTool(name) {
    return this.thrown(new ToolNotFoundError(`unknown tool "${name}"`, 'UNKNOWN_TOOL')); // R6
  }

  blocked(feedback, contexts) {
    const result = { content: feedback, isError: true }; // R7: no error key (seed)
    if (this.revision !== 'seed' && this.errors !== 'seed') {
      // R44, as the original derives it: a line per feedback block, nothing stripped
      const lines = feedback.map((b) =>
        b?.type === 'text' && typeof b.text === 'string'
          ? b.text
          : fill(TEXTS.non_text_feedback, { type: b?.type }),
      );
      result.error = { message: lines.join('\n') || TEXTS.blocked_without_feedback };
    }
    return withContexts(result, contexts);
  }

  toolTimeout(ms) {
    const info = { name: 'ToolTimeoutError', code: 'TOOL_TIMEOUT' }; // R8
    return this.error(fill(TEXTS.tool_timeout, { ms: String(ms) }), info);
  }

  argsNotSerializable() {
    return this.error(TEXTS.args_not_serializable); // R11
  }

  resultNotSerializable() {
    return this.error(TEXTS.result_not_serializable); // R30
  }
}

/** R30: the envelope of a result (absent optional keys omitted), snapshotted and deep-frozen. */
function materialize(result) {
  const envelope = { content: result.content, isError: result.isError };
  if (result.error != null) envelope.error = result.error;
  const contexts = result.additionalContexts;
  if (contexts != null && !(Array.isArray(contexts) && contexts.length === 0)) {
    envelope.additionalContexts = contexts;
  }
  if (result.meta !== undefined) envelope.meta = result.meta;
  if (result.value !== undefined) envelope.value = result.value; // outputs 'later' only (E7-value)
  return snapshot(envelope, '$.result');
}

const isResult = (value) =>
  value !== null &&
  typeof value === 'object' &&
  Array.isArray(value.content) &&
  typeof value.isError === 'boolean';

// ================================================================================================
// 5. Signals: the fused signal F, a relay of the caller's C and the slot's W (R21, R22)
// ================================================================================================

/**
 * The signal the body gets, from the caller's signal C and the slot's value W (either may be
 * undefined).  R21:
 *
 *   C absent,  W absent          -> no signal                         kind "none"
 *   C absent,  W present         -> W itself                          kind "slot"
 *   C present, W absent or W===C -> C itself                          kind "caller"
 *   C present, W another signal  -> a fresh relay                     kind "relay"
 *
 * The relay is born aborted with W's reason if W already is (W wins, D19), else with C's reason
 * if C already is; otherwise it aborts with the reason of whichever aborts first.  Its two
 * listeners are removed as soon as either fires, and by dispose() (R22): aborting C after the
 * body settled never reaches the F that body saw, and C keeps no listener of the call.
 * `onListener(signal, action)` is told of every listener added to or removed from C or W.
 */
export function fuse(caller, slot, onListener) {
  const itself = (signal, kind) => ({ signal, kind, bornAborted: !!signal?.aborted, dispose() {} });
  if (!caller) return itself(slot, slot ? 'slot' : 'none');
  if (!slot || slot === caller) return itself(caller, 'caller');

  const relay = new AbortController();
  let listening = false;
  const dispose = () => {
    if (!listening) return; // idempotent
    listening = false;
    caller.removeEventListener('abort', fromCaller);
    slot.removeEventListener('abort', fromSlot);
    onListener?.('caller', 'remove');
    onListener?.('slot', 'remove');
  };
  const fromCaller = () => {
    dispose();
    relay.abort(caller.reason);
  };
  const fromSlot = () => {
    dispose();
    relay.abort(slot.reason);
  };
  if (slot.aborted) relay.abort(slot.reason);
  else if (caller.aborted) relay.abort(caller.reason);
  else {
    caller.addEventListener('abort', fromCaller);
    slot.addEventListener('abort', fromSlot);
    listening = true;
    onListener?.('caller', 'add');
    onListener?.('slot', 'add');
  }
  return { signal: relay.signal, kind: 'relay', bornAborted: relay.signal.aborted, dispose };
}

// ================================================================================================
// 6. Deadlines and the timeout policy (R32-R35)
// ================================================================================================

/**
 * R35: a signal that aborts on the first of: `upstream` aborting (its reason), or `ms` elapsing
 * (a TimeoutReason carrying `code` and `ms`).  Born aborted when the upstream already is.
 * `ms <= 0` is the "no timer" sentinel: the upstream itself, or a signal that never aborts.
 * `firedByOwnTimer()` classifies by identity (D13): true only for this deadline's own reason.
 * `dispose()` clears the timer and the upstream listener; it never aborts.
 */
export function deadline(upstream, ms, code, timers = globalThis) {
  if (typeof ms !== 'number' || Number.isNaN(ms) || ms === Infinity) {
    throw new RangeError(`deadline: ${ms} is not a budget (NaN and infinities are refused)`);
  }
  if (ms <= 0) {
    const signal = upstream ?? new AbortController().signal;
    return { signal, firedByOwnTimer: () => false, dispose() {} };
  }
  const controller = new AbortController();
  let own; // this deadline's own timeout reason, made when (and only if) its timer fires
  let timer;
  const onUpstream = () => {
    dispose();
    controller.abort(upstream.reason);
  };
  const dispose = () => {
    if (timer !== undefined) timers.clearTimeout(timer);
    timer = undefined;
    upstream?.removeEventListener('abort', onUpstream);
  };
  if (upstream?.aborted) {
    controller.abort(upstream.reason); // born aborted, no timer
  } else {
    upstream?.addEventListener('abort', onUpstream);
    timer = timers.setTimeout(() => {
      timer = undefined;
      dispose();
      own = new TimeoutReason(code, ms);
      controller.abort(own);
    }, ms);
  }
  const signal = controller.signal;
  return { signal, firedByOwnTimer: () => own !== undefined && signal.reason === own, dispose };
}

/**
 * R33: the zero-configuration timeout wrapper.  For a tool that declares `timeoutMs`, it puts a
 * deadline derived from the slot's current value into the slot, delegates, and reports
 * TOOL_TIMEOUT only when its *own* deadline fired (D13).  It restores the slot and clears the
 * timer in every case; an inner throw propagates unchanged.  Returns a function that uninstalls.
 */
/**
 * The timeout library's classification by code: the signal's reason if it is a timeout reason
 * whose code is `code`, else undefined.  Any deadline with that code matches, an enclosing
 * call's included: the original's timeout policy classifies with it (D13).
 */
export function timeoutOf(signal, code) {
  const reason = signal?.reason;
  return reason instanceof TimeoutReason && reason.code === code ? reason : undefined;
}

/**
 * R33.  `classify: 'identity'` (the contract, D13) reports TOOL_TIMEOUT only when the policy's
 * own deadline fired; `classify: 'code'` is the original's way (`timeoutOf`), the declared
 * deviation D13: an enclosing call's same-coded deadline reads as this call's own timeout.
 */
export function installTimeoutPolicy(registry, { classify = 'identity' } = {}) {
  if (classify !== 'identity' && classify !== 'code') {
    throw new RangeError(`installTimeoutPolicy: classify is 'identity' or 'code', not ${classify}`);
  }
  const fired = classify === 'code'
    ? (d) => timeoutOf(d.signal, 'TOOL_TIMEOUT') !== undefined
    : (d) => d.firedByOwnTimer();
  return registry.hooks.on('tools/execute', async function timeoutPolicy(exec, next) {
    const ms = registry.definition(exec.name, exec.agent)?.timeoutMs;
    if (ms === undefined) return next(); // no budget: the slot is left untouched
    const upstream = exec.signal;
    const d = deadline(upstream, ms, 'TOOL_TIMEOUT', registry.timers);
    exec.signal = d.signal; // by mutation: next() takes no arguments
    try {
      const inner = await next();
      return fired(d) ? registry.results.toolTimeout(ms) : inner;
    } finally {
      setSlot(exec, upstream);
      d.dispose();
    }
  });
}

/** Put `value` in the execution view's slot; undefined makes the slot absent. */
function setSlot(exec, value) {
  if (value === undefined) delete exec.signal;
  else exec.signal = value;
}

// ================================================================================================
// 7. The waterfall (R16): a cursor over one listener list per call
// ================================================================================================

/**
 * Run `listeners` outermost-first; each gets `...args` and `next`, which runs the next listener
 * or, past the last, `base`.  The list is copied once per run and `next` *consumes* it, as the
 * original does: a listener that returns without next() short-circuits the rest; a second
 * next() continues from wherever the cursor stands.
 */
export function waterfall(listeners, args, base) {
  const queue = [...listeners];
  const next = () => (queue.shift() ?? base)(...args, next);
  return next();
}

const ALLOW = Object.freeze({ kind: 'allow' });
const ACCEPT = Object.freeze({ kind: 'accept' });
const APPROVAL_OUTCOMES = ['approved', 'rejected', 'cancelled', 'unavailable'];
const HOOKS = ['tools/pre-execute', 'tools/execute', 'tools/post-execute', 'tools/result'];

// ================================================================================================
// 8. The registry
// ================================================================================================

let callCounter = 0;

export class ToolRegistry {
  #tools = new Map(); // "agent\0name" -> definition
  #hooks = Object.fromEntries(HOOKS.map((h) => [h, []]));
  #guards = []; // [{agent, guard}]
  #approval = undefined;

  constructor({ revision = 'seed', onTrace, timers = globalThis, log = defaultLog,
    outputs = 'contract', errors = 'contract' } = {}) {
    if (!REVISIONS.includes(revision)) {
      throw new RegistryUsageError(`revision must be one of ${REVISIONS.join(', ')}`);
    }
    if (outputs !== 'contract' && outputs !== 'later') {
      throw new RegistryUsageError(`outputs must be 'contract' or 'later', not ${String(outputs)}`);
    }
    this.revision = revision;
    if (errors !== 'contract' && errors !== 'seed') {
      throw new RegistryUsageError(`errors must be 'contract' or 'seed', not ${String(errors)}`);
    }
    this.results = new Results(revision, outputs, errors);
    this.onTrace = onTrace;
    this.timers = timers;
    this.log = log;
    const hooks = this.#hooks;
    this.hooks = Object.freeze({
      on(name, listener, { prepend = false } = {}) {
        const list = hooks[name];
        if (!list) throw new RegistryUsageError(`no hook ${name}; one of ${HOOKS.join(', ')}`);
        if (prepend) list.unshift(listener);
        else list.push(listener);
        return () => {
          const i = list.indexOf(listener);
          if (i >= 0) list.splice(i, 1);
        };
      },
    });
  }

  /** Register a tool, visible to every agent or only to `agent`.  R32: a declared budget must be
   *  a positive finite number; it is never shown to a model. */
  register({ name, execute, timeoutMs, agent, description = '' }) {
    const budget = typeof timeoutMs === 'number' && Number.isFinite(timeoutMs) && timeoutMs > 0;
    if (timeoutMs !== undefined && !budget) {
      throw new TypeError(`tool "${name}" timeoutMs must be a positive finite number`);
    }
    if (typeof execute !== 'function') {
      throw new TypeError(`tool "${name}": execute must be a function`);
    }
    const definition = Object.freeze({ name, execute, timeoutMs, agent, description });
    this.#tools.set(`${agent ?? ''}\0${name}`, definition);
    return definition;
  }

  /** The definition visible to `agent`: its own first, then the global one. */
  definition(name, agent) {
    const own = agent !== undefined ? this.#tools.get(`${agent}\0${name}`) : undefined;
    return own ?? this.#tools.get(`\0${name}`);
  }

  setApproval(seam) {
    this.#approval = seam;
  }

  addGuard(guard, { agent } = {}) {
    const entry = { agent, guard };
    this.#guards.push(entry);
    return () => {
      const i = this.#guards.indexOf(entry);
      if (i >= 0) this.#guards.splice(i, 1);
    };
  }

  /** Run one call and return its frozen result -- the very object observers received (R31). */
  async execute(name, args = {}, { signal, callId, agent, parent } = {}) {
    if (signal != null && !(signal instanceof AbortSignal)) {
      throw new RegistryUsageError('signal must be an AbortSignal');
    }
    if (signal == null && this.revision === 'revised') {
      // R40: refused before entry -- no result, no notification
      throw new RegistryUsageError('the revised contract requires a caller signal (R40)');
    }
    const stages = {
      pre: [...this.#hooks['tools/pre-execute']],
      around: [...this.#hooks['tools/execute']],
      post: [...this.#hooks['tools/post-execute']],
      observers: [...this.#hooks['tools/result']],
      approval: this.#approval,
      guards: [
        ...this.#guards.filter((g) => g.agent === undefined),
        ...this.#guards.filter((g) => g.agent !== undefined && g.agent === agent),
      ].map((g) => g.guard),
    };
    callId ??= `call-${++callCounter}`;
    return new Call(this, stages, name, args, signal ?? undefined, callId, agent, parent).run();
  }
}

function defaultLog(level, message, error) {
  console.error(`[toolcancel ${level}] ${message}`, error ?? '');
}

// ================================================================================================
// 9. One call: the pipeline (R10) with its checkpoints C1 (R13, R43), C1' (R14), C2 (R17), the
//    body-level check (R18), C3 (R19), C4 (R20), materialization and notification (R30, R31)
// ================================================================================================
//
// Each stage returns where the call goes next: {route: 'post', result} goes through post-execute
// and C4; {route: 'final', result} goes straight to materialization (R10's final route).

const post = (result) => ({ route: 'post', result });
const final = (result) => ({ route: 'final', result });

class Call {
  constructor(registry, stages, name, args, caller, callId, agent, parent) {
    this.registry = registry;
    this.stages = stages;
    this.results = registry.results;
    this.revised = registry.revision === 'revised';
    this.name = name;
    this.rawArgs = args;
    this.callId = callId;
    this.agent = agent;
    this.parent = parent;
    // R11: C and abortedAtEntry live here, out of reach of the execution view's slot.
    this.caller = caller;
    this.abortedAtEntry = caller?.aborted === true;
    this.deferred = []; // R29: contexts deferred by the body and hooks, in call order
    this.merged = false; // set at C3: later deferrals are dropped (D4)
    this.bodyInvoked = false; // R41 (revised): set right before the body is called
    this.onTrace = registry.onTrace;
    this.callerNoticed = this.abortedAtEntry; // trace only: has caller_abort been written?
    this.unwinding = undefined; // the wrapper failure being propagated (logged once)
  }

  /**
   * The caller checkpoints' predicate.  Seed (R12): cancelled-after-entry, `not abortedAtEntry
   * and C present and C.aborted`, read live.  Revised (R43): "C is aborted now" -- the same
   * formula, since a pre-aborted revised call never gets past entry (R42).
   */
  get callerCancelled() {
    return !this.abortedAtEntry && this.caller?.aborted === true;
  }

  /** A cancellation result: seed ABORTED; revised ABORTED if the body was invoked, else
   *  ABORTED_BEFORE_DISPATCH (R41). */
  cancellation(contexts) {
    return !this.revised || this.bodyInvoked
      ? this.results.aborted(contexts)
      : this.results.abortedBeforeDispatch(contexts);
  }

  /** R28 at C3 and C4: whether the caller's cancellation replaces `result`.  Which results it
   *  replaces is contract data (`publishes_over`, generated into outcomes.js): a success only,
   *  or any result. */
  cancels(result) {
    if (!this.callerCancelled) return false;
    const kind = !this.revised || this.bodyInvoked ? 'aborted' : 'aborted_before_dispatch';
    return PUBLISHES_OVER[this.registry.revision][kind] === 'any' || !result.isError;
  }

  // -- tracing ----------------------------------------------------------------------------------

  emit(event, fields) {
    this.onTrace?.({ trace: 1, call: this.callId, event, ...fields });
  }

  /** A contract event.  A caller abort not yet reported is reported first: the registry notices
   *  aborts when it next looks, which the trace format allows. */
  event(event, fields) {
    if (!this.onTrace) return;
    if (!this.callerNoticed && this.caller?.aborted) {
      this.callerNoticed = true;
      this.emit('caller_abort');
    }
    this.emit(event, fields);
  }

  failed(where, error, level = 'info') {
    this.registry.log(level, `call ${this.callId}: ${where} failed`, error);
  }

  // -- the pipeline -----------------------------------------------------------------------------

  async run() {
    const r = this.results;
    this.emit('call_entry', {
      caller: this.caller ? (this.abortedAtEntry ? 'aborted' : 'live') : 'none',
      agent: this.agent !== undefined,
      approval_seam: this.stages.approval !== undefined,
      revision: this.registry.revision,
      retry: RETRY,
      wrappers: this.stages.around.length,
    });
    if (!this.entry()) return this.publish(r.argsNotSerializable()); // R11.2: final route
    this.event('args_valid');
    if (this.revised && this.abortedAtEntry) {
      return this.publish(r.abortedBeforeDispatch()); // R42: nothing else runs
    }
    let next = await this.prePolicy();
    if (next === undefined) next = await this.around();
    const result = next.route === 'post' ? await this.postPolicy(next.result) : next.result;
    return this.publish(result);
  }

  /** R11: snapshot and deep-freeze the arguments and build the execution view, whose slot holds
   *  C (absent without C).  False when the arguments are not lossless JSON. */
  entry() {
    const exec = {
      token: Object.freeze({}), // opaque, unique per call
      callId: this.callId,
      name: this.name,
      arguments: undefined,
      deferContext: (context) => this.defer(context),
    };
    if (this.agent !== undefined) exec.agent = this.agent;
    if (this.parent !== undefined) exec.parent = this.parent;
    if (this.caller) exec.signal = this.caller; // R23: the slot starts as C
    this.exec = exec;
    try {
      exec.arguments = snapshot(this.rawArgs, '$.arguments');
    } catch (error) {
      this.failed('argument snapshot', error);
      this.event('args_invalid');
      return false;
    }
    return true;
  }

  defer(context) {
    if (this.merged) {
      const message = `call ${this.callId}: a context deferred after C3 is dropped (D4)`;
      this.registry.log('warn', message);
      return;
    }
    this.deferred.push(context);
  }

  /**
   * Pre-execute, approval, guards; C1 and C1'.  Returns undefined to go on to the around
   * waterfall, else where the call goes.
   *
   * Seed (R13-R15): cancellation beats every decision and every pre-stage failure.
   * Revised (R43): (a) approval `cancelled` + C aborted -> ABORTED_BEFORE_DISPATCH; (b) denials
   * beat cancellation, guards run even when C is aborted; (c) else C aborted ->
   * ABORTED_BEFORE_DISPATCH; (d) a pre-stage failure is always a final-route error.
   */
  async prePolicy() {
    const r = this.results;
    const { approval, guards } = this.stages;
    let stage = 'pre'; // which stage a throw comes from: pre_raise, approval_raise, guard_raise
    try {
      this.emit('stage_enter', { stage: 'pre' });
      const decision = await waterfall(this.stages.pre, [this.exec], () => ALLOW);
      const kind = decision?.kind;
      if (kind !== 'allow' && kind !== 'deny' && kind !== 'ask') {
        throw new TypeError(`pre-execute returned ${String(kind)}; expected allow, deny or ask`);
      }
      if (kind === 'deny' && typeof decision.reason !== 'string') {
        throw new TypeError('a pre-execute deny needs a reason (a string)');
      }
      this.event(`pre_${kind}`);
      let denial; // the R5 reason, when the decision denies
      if (kind === 'deny') {
        denial = decision.reason;
      } else if (kind === 'ask') {
        if (approval === undefined) {
          denial = decision.reason ?? fill(TEXTS.ask_without_seam, { name: this.name });
        } else if (this.agent === undefined) {
          denial = fill(TEXTS.ask_without_agent, { name: this.name }); // the seam is not asked
        } else {
          stage = 'approval';
          const answer = await this.askApproval(approval, decision);
          this.event(`approval_${answer}`);
          if (this.revised && answer === 'cancelled' && this.callerCancelled) {
            return post(r.abortedBeforeDispatch()); // R43 (a)
          }
          if (answer !== 'approved') {
            denial = fill(TEXTS[`approval_${answer}`], { name: this.name });
          }
        }
      }
      if (!this.revised && this.callerCancelled) return post(r.aborted()); // C1 (R13)
      if (denial !== undefined) return post(r.denied(denial)); // R15; revised R43 (b)
      stage = 'guards';
      this.emit('stage_enter', { stage: 'guards' });
      const reason = runGuards(guards, this.exec);
      if (reason !== undefined) {
        this.event('guard_deny');
        return post(r.denied(reason));
      }
      this.event('guards_pass');
      if (this.revised && this.callerCancelled) return post(r.abortedBeforeDispatch()); // R43 (c)
      return undefined;
    } catch (error) {
      this.failed(`${stage} stage`, error);
      this.event(`${stage === 'guards' ? 'guard' : stage}_raise`);
      if (!this.revised && this.callerCancelled) return post(r.aborted()); // C1' (R14)
      return final(r.thrown(error)); // R14; revised R43 (d)
    }
  }

  /** R5, R24: ask the seam with the slot's signal; await it, never race it (D12). */
  async askApproval(seam, decision) {
    const exec = this.exec;
    const request = Object.freeze({
      callId: this.callId,
      name: this.name,
      arguments: exec.arguments,
      agent: this.agent,
      reason: decision.reason,
      signal: exec.signal,
    });
    this.emit('stage_enter', { stage: 'approval' });
    const answer = await seam(request);
    if (!APPROVAL_OUTCOMES.includes(answer)) {
      let value;
      try {
        value = JSON.stringify(answer) ?? String(answer);
      } catch {
        value = String(answer);
      }
      throw new Error(fill(TEXTS.unreachable_approval, { value }));
    }
    return answer;
  }

  /** The around waterfall, then C3 (R16, R19). */
  async around() {
    let result;
    try {
      result = await this.aroundWaterfall();
    } catch (error) {
      this.merged = true;
      this.event('around_raised');
      return final(this.results.thrown(error)); // R16.4: deferred contexts are lost
    }
    this.merged = true;
    if (this.deferred.length > 0) {
      // R29: deferred contexts first, then the around result's own
      result = withContexts(result, [...this.deferred, ...(result.additionalContexts ?? [])]);
    }
    this.event('around_settled');
    if (this.cancels(result)) {
      result = this.cancellation(result.additionalContexts); // C3
    }
    return post(result);
  }

  /** The original's cursor: one listener list per call, consumed by next(). */
  aroundWaterfall() {
    const queue = [...this.stages.around];
    const advance = () => {
      const wrapper = queue.shift();
      return wrapper ? this.runWrapper(wrapper, advance) : this.baseDispatch();
    };
    return advance();
  }

  /** One around wrapper, with its own next(): D11's bookkeeping (retry, concurrent next()) and
   *  the trace's wrapper events. */
  async runWrapper(wrapper, advance) {
    this.event('wrapper_enter');
    let pending; // the promise of this wrapper's running next(), if any
    let calls = 0;
    let last; // what this wrapper's latest next() resolved to
    const next = () => {
      if (pending) {
        throw new RegistryUsageError('next() called while this wrapper\'s previous next() runs');
      }
      if (calls++ > 0) this.event('redelegate');
      last = undefined;
      pending = advance()
        .then((result) => (last = result))
        .finally(() => (pending = undefined));
      return pending;
    };
    let result;
    try {
      result = await wrapper(this.exec, next);
      if (!isResult(result)) {
        throw new TypeError('an around-dispatch wrapper must return a result {content, isError}');
      }
    } catch (error) {
      await this.awaitForgotten(pending);
      if (error !== this.unwinding) this.failed('around-dispatch wrapper', error);
      this.unwinding = error;
      this.event('wrapper_raise');
      throw error;
    }
    await this.awaitForgotten(pending);
    this.event('wrapper_returned', {
      passthrough: result === last,
      is_error: result.isError,
      timeout: errorCode(result.error) === 'TOOL_TIMEOUT',
    });
    return result;
  }

  /** R27: a wrapper that settled without awaiting its next() may leave a body running; the call
   *  does not settle before it does. */
  async awaitForgotten(pending) {
    if (!pending) return;
    const message = `call ${this.callId}: a wrapper settled before its next(); awaiting it (R27)`;
    this.registry.log('warn', message);
    await pending.catch(() => {});
  }

  /** Base dispatch: C2, lookup, the body with the fused signal, the body-level check (R17, R18).
   *  Its result is normalized: a body's throw becomes a result (R16.1).  It throws only when a
   *  wrapper left something other than a signal in the slot (the wrapper's usage error). */
  async baseDispatch() {
    const r = this.results;
    const exec = this.exec;
    const C = this.caller;
    const W = exec.signal ?? undefined; // the slot as the innermost wrapper left it
    if (W !== undefined && !(W instanceof AbortSignal)) {
      throw new RegistryUsageError('the execution view\'s signal slot must hold an AbortSignal');
    }
    const tool = this.registry.definition(this.name, this.agent);
    this.event('base_dispatch', {
      slot_aborted: W?.aborted === true,
      tool_found: tool !== undefined,
    });

    // C2: F would be born aborted exactly when C or W already is (R21).  The slot stays W.
    if ((C?.aborted || W?.aborted) && (this.revised || !this.abortedAtEntry)) {
      return this.revised ? r.abortedBeforeDispatch() : r.aborted(); // beats UNKNOWN_TOOL (D10)
    }
    if (tool === undefined) return r.unknownTool(this.name); // R6

    const onListener =
      this.onTrace && ((signal, action) => this.emit('listener', { signal, action }));
    const fused = fuse(C, W, onListener);
    const F = fused.signal;
    this.emit('fused', { kind: fused.kind, aborted: fused.bornAborted });
    setSlot(exec, F); // during the body the slot holds F (R23)
    this.bodyInvoked = true; // R41
    this.emit('body_start');
    let result;
    let how;
    try {
      result = r.success(await tool.execute(exec.arguments, exec)); // awaited, never raced (R27)
      how = 'ok';
    } catch (error) {
      this.failed('the tool body', error);
      result = r.thrown(error); // a tool-owned failure survives cancellation (R18.3)
      how = 'raise';
    }
    this.noticeAbortAtSettle(fused);
    this.emit('body_settle', { how });
    fused.dispose(); // R22
    setSlot(exec, W); // R18.5: exactly W again, nothing more (D8)
    this.event(how === 'ok' ? 'body_ok' : 'body_raise');
    if (how === 'ok' && !result.isError && F?.aborted && (this.revised || !this.abortedAtEntry)) {
      return r.aborted(); // body-level check: F read at settle (R18.4, D18)
    }
    return result;
  }

  /** Trace only: an abort of F while the body ran becomes visible when the body settles. */
  noticeAbortAtSettle(fused) {
    if (!this.onTrace) return;
    const F = fused.signal;
    const C = this.caller;
    if (F?.aborted && !fused.bornAborted) {
      // F carries the reason of whichever source aborted it first (R21).  A W that relays C's
      // reason (a deadline derived from C) aborted because C did: that is the caller's abort.
      const byCaller = C?.aborted && F.reason === C.reason;
      if (!byCaller) this.emit('fused_abort');
    }
    if (!this.callerNoticed && C?.aborted) {
      this.callerNoticed = true;
      this.emit('caller_abort');
    }
  }

  /** Post-execute and C4 (R7, R20). */
  async postPolicy(result) {
    const r = this.results;
    this.emit('stage_enter', { stage: 'post' });
    let decision;
    try {
      decision = await waterfall(this.stages.post, [this.exec, result], () => ACCEPT);
      checkPostDecision(decision);
    } catch (error) {
      this.failed('post-execute', error);
      this.event('post_raise');
      return r.thrown(error); // R20.2: no contexts, even after cancellation
    }
    if (decision.kind === 'block') {
      this.event('post_block');
      return r.blocked(decision.feedback, decision.additionalContexts); // drops earlier contexts and codes
    }
    let accepted = result;
    if (decision.content !== undefined || decision.additionalContexts?.length) {
      accepted = withContexts(
        decision.content === undefined ? result : { ...result, content: decision.content },
        [...(result.additionalContexts ?? []), ...(decision.additionalContexts ?? [])],
      );
    }
    this.event('post_accept');
    if (this.cancels(accepted)) {
      return this.cancellation(accepted.additionalContexts); // C4
    }
    return accepted;
  }

  /** R30, R31: materialize once, freeze the view, notify every observer exactly once with the
   *  object the caller gets.  Observer failures are contained; async observers are awaited one
   *  at a time (D14), so the call is quiescent when execute() returns. */
  async publish(result) {
    let frozen;
    let serializable = true;
    try {
      frozen = materialize(result);
    } catch (error) {
      this.failed('result snapshot', error);
      serializable = false;
      frozen = materialize(this.results.resultNotSerializable()); // R30: replaces anything
    }
    this.event('publish', { serializable });
    this.merged = true;
    Object.freeze(this.exec); // the slot is immutable from now on (R23)
    this.emit('result', { result: frozen });
    this.emit('notify');
    for (const observer of this.stages.observers) {
      try {
        const pending = observer(this.exec, frozen);
        if (pending !== null && typeof pending?.then === 'function') await pending;
      } catch (error) {
        this.failed('a result observer', error, 'error');
      }
    }
    return frozen;
  }
}

/** R15: global guards, then the calling agent's, synchronously; the first reason denies.
 *  "No reason" is undefined, as in the original. */
function runGuards(guards, exec) {
  for (const guard of guards) {
    const reason = guard(exec);
    if (reason !== null && typeof reason?.then === 'function') {
      throw new TypeError('a guard must answer synchronously');
    }
    if (reason !== undefined) return String(reason);
  }
  return undefined;
}

function checkPostDecision(decision) {
  // The original's names (R7): `additionalContexts`, as on a result.  A key of neither form is
  // refused -- `contexts` above all, which the original would silently ignore.
  const list = (value) => value === undefined || Array.isArray(value);
  const keys = (...allowed) => Object.keys(decision).every((k) => allowed.includes(k));
  const contexts = list(decision?.additionalContexts);
  if (decision?.kind === 'accept' && list(decision.content) && contexts &&
      keys('kind', 'content', 'additionalContexts')) return;
  if (decision?.kind === 'block' && Array.isArray(decision.feedback) && contexts &&
      keys('kind', 'feedback', 'additionalContexts')) return;
  throw new TypeError(
    'post-execute must return {kind: "accept", content?, additionalContexts?} or ' +
      '{kind: "block", feedback, additionalContexts?}, and no other key',
  );
}
