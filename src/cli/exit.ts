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
  /** A quality gate (`assess --fail-if`) failed: the labels are not good enough. */
  gate: 4,
} as const;

/** A bad argument value: one line on stderr, exit 2. */
export class UsageError extends Error {
  override name = "UsageError";
}
