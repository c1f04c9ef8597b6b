/**
 * How a run ends: one verdict, one exit code, one line saying what happened
 * and what to do next. Every stage of a run ends in one of these; the
 * `--summary-json` file and the usage summary carry it for every verdict.
 * (The lifecycle in runner/run.ts maps stage failures onto this table.) The
 * errors that end a run or a command in a verdict of their own (an input that
 * cannot be read, a store that failed, a lock taken over) live here too, below
 * the runner and the quality tools that both throw them. No I/O.
 */
import { InvocationError } from "./errors.js";
import { EXIT, type ExitCode } from "./exit-codes.js";
import { systemErrorKind } from "./system-errors.js";

export type Verdict =
  | "done"
  | "failures"
  | "all-failed"
  | "no-input"
  | "bad-input"
  | "locked"
  | "lock-lost"
  | "storage-unavailable"
  | "input-changed"
  | "aborted"
  | "stopped"
  | "internal-error";

interface VerdictRow {
  exit: (signal?: NodeJS.Signals) => ExitCode;
  /** What happened, as the first words of the one line on stderr. */
  headline: string;
  /** What to do next. */
  next: string;
}

/** The one table: each verdict's exit code, headline and next step. */
export const VERDICTS: Record<Verdict, VerdictRow> = {
  done: { exit: () => EXIT.ok, headline: "done", next: "" },
  failures: { exit: () => EXIT.partial, headline: "finished with failed records", next: "see the errors file; rerun the same command to retry them" },
  "all-failed": {
    exit: () => EXIT.allFailed,
    headline: "stopped: every record fails",
    next: "fix the cause (the failed records are kept in the journal) and rerun the same command",
  },
  "no-input": { exit: () => EXIT.noInput, headline: "no input", next: "check that the input is the one you meant" },
  "bad-input": { exit: () => EXIT.usage, headline: "stopped: bad input", next: "fix the invocation or the input and rerun" },
  locked: { exit: () => EXIT.locked, headline: "refused: another run holds the journal", next: "wait for it to finish, or for its lock to expire" },
  "lock-lost": {
    exit: () => EXIT.lockLost,
    headline: "stopped: another run took the journal over while this one was stalled",
    next: "nothing to do: the run that took over finishes the job",
  },
  "storage-unavailable": {
    exit: () => EXIT.storage,
    headline: "stopped: storage unavailable",
    next: "rerun the same command once the store is back (or space is freed) to resume",
  },
  "input-changed": {
    exit: () => EXIT.inputChanged,
    headline: "stopped: the input changed while it was read",
    next: "rerun the same command to resume on the input as it is now (finished records are kept)",
  },
  aborted: { exit: () => EXIT.aborted, headline: "aborted", next: "rerun the same command to resume" },
  stopped: {
    exit: (signal) => (signal === "SIGINT" ? EXIT.interrupted : EXIT.terminated),
    headline: "stopped by a signal",
    next: "rerun the same command to resume",
  },
  "internal-error": {
    exit: () => EXIT.internal,
    headline: "internal error (a bug in typed-eval)",
    next: "rerun the same command to resume; please report this with the debug log (TYPED_EVAL_LOG_LEVEL=debug)",
  },
};

/** The run's input cannot be read: a bad invocation (exit 2), or an absent one (exit 6). */
export class SourceError extends InvocationError {
  override name = "SourceError";
  /** The input is not there at all (no such file, key or objects under a prefix): a scheduler may map this to "skipped". */
  readonly absent: boolean;
  constructor(message: string, options: { absent?: boolean } = {}) {
    super(message);
    this.absent = options.absent ?? false;
  }
}

/**
 * The input changed while it was read (another version of an S3 object, a local file replaced or
 * rewritten): what was read cannot be trusted to be one input, so the run stops resumable.
 */
export class InputChangedError extends Error {
  override name = "InputChangedError";
  /** Where: the path or s3:// location that changed. */
  readonly location: string;
  constructor(message: string, location: string, options?: ErrorOptions) {
    super(message, options);
    this.location = location;
  }
}

/** A store (S3, the local disk) failed past its retries, is full, or refused a write: the run stops resumable, its journal intact. */
export class StorageError extends Error {
  override name = "StorageError";
  /** Where: the path or s3:// location that failed. */
  readonly location: string;
  constructor(message: string, location: string, options?: ErrorOptions) {
    super(message, options);
    this.location = location;
  }
}

/** Another run took this run's lock over (it was stalled past the lock's expiry): stop before sending or writing anything more. */
export class LockLostError extends Error {
  override name = "LockLostError";
}

/** The stages of a run, in order; a verdict names the stage it came from. */
export type Stage = "check" | "lock" | "journal" | "answer" | "write" | "release";

/** Whether an error is a store (the disk, S3) failing, rather than a bug or a bad invocation. */
export function isStorageFailure(error: unknown): boolean {
  if (error instanceof StorageError) return true;
  if (!(error instanceof Error)) return false;
  if (systemErrorKind(error) !== undefined) return true;
  const e = error as Error & { $metadata?: { httpStatusCode?: number } };
  // The AWS SDK's service errors carry the HTTP status: 5xx is the store failing; a 403 mid-run, its permission changing.
  const status = e.$metadata?.httpStatusCode;
  if (status !== undefined && (status >= 500 || status === 403)) return true;
  return e.cause instanceof Error && e.cause !== error ? isStorageFailure(e.cause) : false;
}

/** What a run's end says: the verdict, why, and where its finished work is kept. */
export interface VerdictReport {
  verdict: Verdict;
  reason: string;
  /** The journal (a path or an S3 prefix), when the run got as far as opening one. */
  journal?: string | undefined;
  signal?: NodeJS.Signals | undefined;
}

/** The one line (or two) a run that did not finish prints on stderr: what happened, where the work is kept, what to do, the exit code. */
export function verdictLine(report: VerdictReport): string {
  const row = VERDICTS[report.verdict];
  const code = row.exit(report.signal);
  const headline = report.verdict === "stopped" && report.signal ? `stopped by ${report.signal}` : row.headline;
  const kept = report.journal ? ` Finished records are kept in ${report.journal}.` : "";
  const written = report.verdict === "done" || report.verdict === "failures" ? "" : " No output was written.";
  return `typed-eval: ${headline}: ${report.reason}\n${written.trim()}${kept}${written || kept ? " " : ""}Next: ${row.next}. Exit ${code}.\n`;
}
