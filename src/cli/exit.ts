/** Exit codes a scheduler can act on (the same for every command). */
export const EXIT = {
  /** Everything succeeded. */
  ok: 0,
  /** Some records or inputs failed; see the errors output. */
  partial: 1,
  /** Bad invocation, job file or input that nothing could be done with. */
  usage: 2,
  /** Aborted (auth failure, upstream unreachable); rerunning resumes. */
  aborted: 3,
} as const;
