/** Exit codes a scheduler can act on: one per verdict (api/verdict.ts), the same for every command. */
export const EXIT = {
  /** Everything succeeded. */
  ok: 0,
  /** Some records or inputs failed; see the errors output. */
  partial: 1,
  /**
   * Bad invocation, setting, job file or input that nothing could be done with; or a place the run
   * writes (an output, the summary, the journal) found refused or full before its first request.
   */
  usage: 2,
  /** Aborted (auth failure, upstream unreachable); rerunning resumes. */
  aborted: 3,
  /** A quality gate (`assess --fail-if`) failed: the labels are not good enough. */
  gate: 4,
  /**
   * Every record failed, or the first records all failed for the same reason
   * (a wrong state field, format or path): the run stopped early and names the
   * reason. Retrying will not help; fixing the job or input will.
   */
  allFailed: 5,
  /** The input is absent (no such file, key or objects) or holds no records: a scheduler may map this to "skipped". */
  noInput: 6,
  /** Another run holds this job's journal (its host, pid and start time are printed); nothing was done. */
  locked: 7,
  /**
   * This run's lock was taken over or lost while it was stalled (paused past the lock's lease: a frozen VM, a
   * clock that jumped): it stopped before writing anything. Rerunning is safe: 7 if another run holds the lock,
   * else it resumes from the journal.
   */
  lockLost: 8,
  /**
   * A store the run depends on (S3, the local disk) failed past its retries, filled up or refused a
   * write once the run had begun answering (an output, the summary, the journal); the journal is
   * intact: rerun once it is back to resume.
   */
  storage: 9,
  /**
   * The input changed while the run read it (an S3 object overwritten between ranged reads, a local
   * file replaced, truncated or rewritten): the records finished before the change are kept; rerun to
   * resume on the input as it is now.
   */
  inputChanged: 10,
  /** A failure nobody anticipated: a bug. The message says where the journal is; the stack is logged at debug level. */
  internal: 70,
  /** Stopped by SIGINT (128 + 2) after finishing what was in flight (a second signal: at once); rerunning resumes. */
  interrupted: 130,
  /** Stopped because whoever read the output closed it (any command's stdout, EPIPE: 128 + SIGPIPE's 13); a run's journal is kept; rerunning resumes. */
  outputClosed: 141,
  /** Stopped by SIGTERM (128 + 15) after finishing what was in flight (a second signal: at once); rerunning resumes. */
  terminated: 143,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/**
 * The codes a scheduler retries: the run stopped with its journal intact, and
 * the same command goes on where it stopped (an endpoint or a store that was
 * down, a signal). Every other failing code needs a person, or new input,
 * first. docs/scheduling.md's table, the Airflow DAG, the crontab and the
 * Kubernetes Job's podFailurePolicy say the same (test/api/exit-codes.test.ts);
 * the DAG and the Job also retry KILLED.
 */
export const RESUMABLE: ReadonlySet<ExitCode> = new Set<ExitCode>([
  EXIT.aborted,
  EXIT.lockLost,
  EXIT.storage,
  EXIT.inputChanged,
  EXIT.interrupted,
  EXIT.terminated,
]);

/**
 * 128 + SIGKILL's 9: what a shell, a scheduler and Kubernetes report for a
 * run killed outright (the out-of-memory killer, kill -9, a stop that outlived
 * its pod's grace). Not a verdict: nothing of typed-eval runs after SIGKILL,
 * so no summary is written. The journal keeps every record up to its last
 * shipment (`--journal-flush`), so a rerun resumes, repaying at most those
 * and the ones in flight: the DAG and the Kubernetes Job retry it as they
 * retry RESUMABLE (bounded by their retries, since an out-of-memory kill may
 * recur).
 */
export const KILLED = 137;
