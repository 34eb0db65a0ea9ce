// outcomes.js: made from spec/contract.toml by `toolcancel regen`; never edit it.
//
// What each cancellation outcome publishes over the result a call held (R28;
// `publishes_over` in contract.toml), per revision: 'success' (only failures survive
// the cancellation) or 'any' (it replaces every result).

export const PUBLISHES_OVER = Object.freeze({
  seed: Object.freeze({ aborted: 'success' }),
  revised: Object.freeze({ aborted: 'success', aborted_before_dispatch: 'success' }),
});
