// probes.js -- the optional observations of protocol 2 (spec/vectors/README.md, "outcome"),
// shared by both adapters: what an observer could write (R30: a deep-frozen result; R31: a view
// frozen before notification), the approval request's signal (R24), the slot each wrapper
// finds after its next() (R23) and what post-execute received (R19, R20).

/** True when `value` and everything inside it is frozen (an observer cannot write into it). */
export const deepFrozen = (value) =>
  value === null || typeof value !== 'object' || (Object.isFrozen(value) && Object.values(value).every(deepFrozen));

/** True when writing the view's slot (with the value it holds: nothing changes if it succeeds) throws. */
function slotRefused(exec) {
  try {
    exec.signal = exec.signal; // eslint-disable-line no-self-assign
    return false;
  } catch {
    return true;
  }
}

export class Probes {
  notified = [];
  frozen = null;
  approvalSignal = null;
  afterNext = [];
  preSlot = undefined;
  postReceived = null;

  /** An observer: remembers what it received and whether it could write into it. */
  observe = (exec, result) => {
    this.notified.push(result);
    this.frozen ??= { result: deepFrozen(result), view: slotRefused(exec) };
  };

  /** Call from pre-execute: the slot pre-execute finds (approval must get that very signal). */
  sawPre(exec) { this.preSlot = exec.signal; }

  /** Call from the approval seam with its request. */
  asked(request) { this.approvalSignal = request.signal === this.preSlot ? 'pre_slot' : 'other'; }

  /** Call from post-execute with the result it received (its first call; without meta). */
  sawPost(result) {
    if (this.postReceived !== null) return;
    const { meta, ...rest } = result; // eslint-disable-line no-unused-vars
    this.postReceived = JSON.parse(JSON.stringify(rest));
  }

  /** next() of a wrapper, recording whether the slot holds afterwards what it handed on. */
  async next(exec, next) {
    const handed = exec.signal;
    const result = await next();
    this.afterNext.push(exec.signal === handed);
    return result;
  }

  /** The fields these probes add to an answer's `observed`. */
  observed(result) {
    return {
      notified_same: this.notified.every((r) => r === result),
      ...(this.frozen ? { frozen: this.frozen } : {}),
      ...(this.approvalSignal ? { approval_signal: this.approvalSignal } : {}),
      slot_after_next: this.afterNext,
      post_received: this.postReceived,
    };
  }
}
