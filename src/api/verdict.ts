/**
 * How a run, or any command, ends: one verdict, one exit code, one line
 * saying what happened and what to do next. This file is the one place that
 * decides it:
 *
 * - `VERDICTS`, the table: each verdict's exit code, headline and next step;
 * - the errors that end a run or a command in a verdict of their own (an
 *   input that cannot be read or changed while read, a store that failed, a
 *   lock refused or taken over, an endpoint given up on, a gate that failed);
 * - `classify`, which turns any error met at any stage into its verdict;
 * - `decide`, which turns what a run knows at its end (its first ending, the
 *   input's end, the records without a result, the outputs written) into
 *   its verdict: `done` only when it is true.
 *
 * It lives below the runner and the quality tools, which both throw these
 * errors, and the command line's boundary, which prints them. No I/O.
 */
import { InvocationError, TypedEvalError, UpstreamUnavailableError, AuthenticationError, PermissionDeniedError } from "./errors.js";
import { EXIT, type ExitCode } from "./exit-codes.js";
import { describeSystemError, systemErrorKind } from "./system-errors.js";
import { scrub } from "../logging/secrets.js";

export type Verdict =
  | "done"
  | "failures"
  | "all-failed"
  | "no-input"
  | "bad-input"
  | "aborted"
  | "gate-failed"
  | "locked"
  | "lock-lost"
  | "storage-unavailable"
  | "input-changed"
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
  aborted: { exit: () => EXIT.aborted, headline: "aborted", next: "rerun the same command to resume" },
  "gate-failed": { exit: () => EXIT.gate, headline: "a quality gate failed", next: "look at the report before using the labels" },
  locked: { exit: () => EXIT.locked, headline: "refused: another run holds the journal", next: "wait for that run to finish, then rerun" },
  "lock-lost": {
    exit: () => EXIT.lockLost,
    headline: "stopped: this run's lock was lost while it was stalled (paused past its lease)",
    next: "rerun: it resumes from the journal, or exits 7 while another run holds the lock",
  },
  "storage-unavailable": {
    exit: () => EXIT.storage,
    headline: "stopped: storage unavailable",
    next: "rerun the same command once the store is back (or space is freed) to resume",
  },
  "input-changed": {
    exit: () => EXIT.inputChanged,
    headline: "stopped: the input changed while it was read",
    next: "rerun the same command to resume on the input as it is now",
  },
  stopped: {
    exit: (signal) => (signal === "SIGINT" ? EXIT.interrupted : signal === "SIGPIPE" ? EXIT.outputClosed : EXIT.terminated),
    headline: "stopped",
    next: "rerun the same command to resume",
  },
  "internal-error": {
    exit: () => EXIT.internal,
    headline: "internal error (a bug in typed-eval)",
    next: "rerun the same command to resume; please report this with the debug log (TYPED_EVAL_LOG_LEVEL=debug)",
  },
};

/**
 * The next step of a run refused by a lock that names no run (garbage, an
 * empty file): the table's "wait" would never end, for nothing releases it.
 */
export const LOCKED_NEXT = {
  unreadable: (path: string) => `if no run of this job is going, delete ${path} (no run holds it, so it never goes by itself), then rerun`,
} as const;

/** An error that ends a run or a command in the verdict it names. */
export class VerdictError extends Error {
  /** What to do next when the error knows better than the table's row (which file to delete): the line says this instead. */
  readonly next: string | undefined;
  constructor(
    readonly verdict: Verdict,
    message: string,
    options?: ErrorOptions & { next?: string | undefined },
  ) {
    super(message, options);
    this.name = new.target.name;
    this.next = options?.next;
  }
}

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
export class InputChangedError extends VerdictError {
  /** Where: the path or s3:// location that changed. */
  readonly location: string;
  constructor(message: string, location: string, options?: ErrorOptions) {
    super("input-changed", message, options);
    this.location = location;
  }
}

/**
 * Why a store refused this client rather than failed: its credentials (a key
 * it does not know, a signature or session token it rejects, a clock too far
 * off to sign with) or their permission for what was asked.
 */
export type StoreRefusal = "credentials" | "permission";

/**
 * A store (S3, the local disk) failed past its retries, is full, or refused a
 * write: the run stops resumable, its journal intact. One that `refused` this
 * client is a setup mistake instead, as `classify` says.
 */
export class StorageError extends VerdictError {
  /** Where: the path or s3:// location that failed. */
  readonly location: string;
  /** Set when the store refused this client; kept by a `StorageError` that wraps another (its cause). */
  readonly refused: StoreRefusal | undefined;
  constructor(message: string, location: string, options?: ErrorOptions & { refused?: StoreRefusal | undefined }) {
    super("storage-unavailable", message, options);
    this.location = location;
    this.refused = options?.refused ?? (options?.cause instanceof StorageError ? options.cause.refused : undefined);
  }
}

/** A base for errors that always end in one verdict. */
function endingIn(verdict: Verdict) {
  return class extends VerdictError {
    constructor(message: string, options?: ErrorOptions & { next?: string | undefined }) {
      super(verdict, message, options);
    }
  };
}

/** Another run took this run's lock over (it was stalled past the lock's expiry): stop before sending or writing anything more. */
export class LockLostError extends endingIn("lock-lost") {}

/** Another run holds the journal: this one is refused before doing anything. */
export class LockRefusedError extends endingIn("locked") {}

/** The endpoint is given up on: it refused the key, cannot be reached, or fails record after record. Rerunning resumes. */
export class EndpointAbort extends endingIn("aborted") {}

/** The command's own input holds nothing to work on (no records, no answers, no tasks): exit 6, as for an absent one. */
export class NoInputError extends endingIn("no-input") {}

/** Why an input with no records ends in no-input: the one wording every command uses. */
export const NO_RECORDS = "the input holds no records: check that it is the file you meant";

/** The `--base-url` answers, but is not the System One API (a wrong path, another server): fix the setting. */
export class EndpointMismatch extends endingIn("bad-input") {}

/** The first records all failed for one reason: nothing later will do better. */
export class AllFailedError extends endingIn("all-failed") {}

/** A quality or drift gate failed (`assess --fail-if`, `report --fail-if`): the command said which, and ends with exit 4. */
export class GateFailedError extends endingIn("gate-failed") {}

/**
 * Whoever reads the output closed it (`run -o - | head -1`: EPIPE): the run
 * stops as a signal would, its journal kept, with the exit code of SIGPIPE.
 */
export class OutputClosedError extends endingIn("stopped") {
  readonly signal = "SIGPIPE" as const;
}

/**
 * The reader closing a command's output (EPIPE, or a stream destroyed by it):
 * the one conversion every command's stdout takes, a run's `-o -` and any
 * other command's printing alike (`assess --json | head -c 100`): stopped,
 * exit 141, as a shell's own commands end under SIGPIPE.
 */
export function outputClosed(error: unknown): OutputClosedError | undefined {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code !== "EPIPE" && code !== "ERR_STREAM_DESTROYED") return undefined;
  return new OutputClosedError("whoever read the output closed it (EPIPE)", { cause: error });
}

/** The stages of a run, in order, and "command" for an error that reached the command line outside a run. */
export type Stage = "check" | "lock" | "model" | "journal" | "answer" | "write" | "summary" | "release" | "command";

/** A verdict with its reason (one line), and the signal that stopped the run when one did. */
export interface Ending {
  verdict: Verdict;
  reason: string;
  signal?: NodeJS.Signals | undefined;
  /** The next step, when the ending knows better than the table's row (a lock to delete, by name). */
  next?: string | undefined;
}

/** Whether an error is a store (the disk, S3) failing, rather than a bug or a bad invocation. */
export function isStorageFailure(error: unknown): boolean {
  if (error instanceof StorageError) return true;
  if (!(error instanceof Error)) return false;
  if (systemErrorKind(error) !== undefined) return true;
  return storeStatus(error) !== undefined || (error.cause instanceof Error && error.cause !== error ? isStorageFailure(error.cause) : false);
}

/** The HTTP status of an AWS SDK service error that is the store failing (5xx) or its permission changing (403). */
function storeStatus(error: Error): number | undefined {
  const status = (error as Error & { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  return status !== undefined && (status >= 500 || status === 403) ? status : undefined;
}

/** What a record's failure says about the endpoint: true when it is the endpoint's side (unreachable, timed out, throttled, 5xx), not the record's. */
export function isEndpointFailure(status: number, type: string): boolean {
  return (status === 0 && type !== "invalid_record") || status === 408 || status === 429 || status >= 500;
}

/** The first line of a message: the rest (an assertion's diff, a stack) belongs in the debug log. */
function firstLine(message: string): string {
  return message.split("\n", 1)[0]?.trim() ?? "";
}

/**
 * The one classifier: the verdict of any error met at `stage`.
 *
 * - an error that names its verdict (`VerdictError`: a store that failed, a
 *   lock refused or lost, the endpoint given up on, a gate, a closed output);
 * - an input that is absent (6) or unreadable, and any bad invocation or
 *   setting (`InvocationError`, yargs' own): bad-input (2);
 * - an endpoint's error (`TypedEvalError`): one it will not take back (401,
 *   403, unreachable, 408, 429, 5xx) aborts, resumable (3); a refusal of the
 *   request itself (400, 404, 422), and an address that is not the API, is
 *   bad input (2);
 * - a file system refusing (full, read-only, permission, a directory where a
 *   file goes): the user's to fix (2) at the check, on the command line and
 *   before the run's first request (`paid` false); once it has begun
 *   answering, a storage failure (9), resumable: the journal keeps the work;
 * - a store that refused this client (`StorageError.refused`): credentials it
 *   rejects are a setting to fix (2) wherever met; a permission denied is
 *   one too (2) at the check, on the command line and before the run's first
 *   request, and once it has begun answering, a permission changed mid-run:
 *   storage-unavailable (9), resumable;
 * - a connection failing (S3 down, refused, reset) or a store's 5xx or 403:
 *   storage-unavailable (9) in a run; on the command line, a problem with
 *   the host named (2);
 * - anything else: a bug (70).
 */
export function classify(error: unknown, stage: Stage, options: { paid?: boolean } = {}): Ending {
  const message = error instanceof Error ? error.message || error.name : String(error);
  // Before anything is paid, what the user set up wrong is theirs to fix; afterwards the same failure may be the store's.
  const usersToFix = stage === "check" || stage === "command" || !options.paid;
  if (error instanceof StorageError && error.refused !== undefined)
    return { verdict: error.refused === "credentials" || usersToFix ? "bad-input" : "storage-unavailable", reason: message };
  if (error instanceof VerdictError)
    return {
      verdict: error.verdict,
      reason: message,
      ...(error instanceof OutputClosedError ? { signal: error.signal } : {}),
      ...(error.next !== undefined ? { next: error.next } : {}),
    };
  if (error instanceof SourceError) return { verdict: error.absent ? "no-input" : "bad-input", reason: message };
  if (error instanceof InvocationError || (error instanceof Error && error.name === "YError")) return { verdict: "bad-input", reason: message };
  if (error instanceof TypedEvalError) return { verdict: endpointGaveUp(error) ? "aborted" : "bad-input", reason: message };
  const described = describeSystemError(error);
  const kind = systemErrorKind(error);
  if (kind === "file-system") {
    return { verdict: usersToFix ? "bad-input" : "storage-unavailable", reason: described ?? message };
  }
  if (kind === "network") return { verdict: stage === "command" ? "bad-input" : "storage-unavailable", reason: described ?? message };
  if (error instanceof Error && isStorageFailure(error)) return { verdict: "storage-unavailable", reason: described ?? message };
  if (described !== undefined) return { verdict: "bad-input", reason: described };
  // One line: a multi-line message (an assertion's diff) keeps its first; the rest is in the debug log.
  return { verdict: "internal-error", reason: firstLine(message) || (error instanceof Error ? error.name : "unknown error") };
}

/** An endpoint's error that no change to the request would cure: the run stops, resumable. */
function endpointGaveUp(error: TypedEvalError): boolean {
  if (error instanceof UpstreamUnavailableError && error.notTheApi) return false;
  return error instanceof UpstreamUnavailableError || error instanceof AuthenticationError || error instanceof PermissionDeniedError || error.retryable;
}

/** What a run knows when it ends: the facts its verdict is decided from, never its counters alone. */
export interface RunFacts {
  /** The first thing that ended the run early (a stop, an error classified at its stage), if anything did. */
  ended?: Ending | undefined;
  /** The reader reached the real end of the input (or shard, or selection): recorded when it did, never inferred. */
  inputEnded: boolean;
  /** Records of the input read in this run (other shards' left out). */
  records: number;
  /** Records read and left to other shards. */
  otherShards: number;
  /** Of those, the records without a journaled result for their current request. */
  unfinished: number;
  /** The rows written to the outputs (each output written, flushed and checked), when they were. */
  written?: { answered: number; failed: number } | undefined;
  /** The share of records that may fail with the run still done. */
  maxErrorRate: number;
  /** Why every record failed, when they all failed alike. */
  sameReason?: string | undefined;
}

/**
 * The verdict of a run at its end. `done` only when the input's end was
 * reached, every record read has a journaled result for its current
 * request, and the outputs were written and checked; a stop or an error is
 * its own verdict whatever was finished.
 */
export function decide(facts: RunFacts): Ending {
  if (facts.ended) return facts.ended;
  if (!facts.inputEnded) return { verdict: "internal-error", reason: "the input's reading ended before its end with no reason given" };
  if (facts.unfinished > 0) {
    return {
      verdict: "internal-error",
      reason: `${facts.unfinished} of the ${facts.records} records read have no result in the journal; the journal keeps the others`,
    };
  }
  if (facts.records === 0 && facts.otherShards === 0) return { verdict: "no-input", reason: NO_RECORDS };
  if (!facts.written) return { verdict: "internal-error", reason: "the outputs were not written" };
  const { answered, failed } = facts.written;
  if (failed > 0 && answered === 0) return { verdict: "all-failed", reason: facts.sameReason ?? `all ${failed} records failed: see the errors file` };
  if (failed > 0 && failed / (answered + failed) > facts.maxErrorRate) {
    return { verdict: "failures", reason: `${failed} of ${answered + failed} records failed, more than --max-error-rate allows` };
  }
  return { verdict: "done", reason: "" };
}

/** A failed write of the summary: only a run that would otherwise end well changes its verdict (to storage-unavailable). */
export function afterSummaryFailure(ending: Ending, failure: string): Ending {
  if (ending.verdict !== "done" && ending.verdict !== "failures") return ending;
  return { verdict: "storage-unavailable", reason: failure };
}

/** What a run's end says: the verdict, why, and where its finished work is kept. */
export interface VerdictReport extends Ending {
  /** The journal (a path or an S3 prefix), when it holds finished records. */
  journal?: string | undefined;
}

/** The exit code of an ending. */
export function exitCodeOf(ending: Pick<Ending, "verdict" | "signal">): ExitCode {
  return VERDICTS[ending.verdict].exit(ending.signal);
}

/** The headline of an ending: a stop names its signal (or the closed output). */
function headlineOf(ending: Ending): string {
  if (ending.verdict !== "stopped") return VERDICTS[ending.verdict].headline;
  if (ending.signal === "SIGPIPE") return "stopped: the output was closed";
  return ending.signal ? `stopped by ${ending.signal}` : "stopped";
}

/**
 * The one line (or two) a run that did not finish prints on stderr: what
 * happened, where the work is kept (only when the journal holds a finished
 * record), what to do, the exit code. Scrubbed: the reason may quote an endpoint.
 */
export function verdictLine(report: VerdictReport): string {
  const row = VERDICTS[report.verdict];
  const code = exitCodeOf(report);
  const kept = report.journal ? ` Finished records are kept in ${report.journal}.` : "";
  // A reader that closed the output (`| head -1`) may have read rows of it: they are not the whole output.
  const cut = report.signal === "SIGPIPE" ? " Whatever the reader took is not the whole output." : " No output was written.";
  const written = report.verdict === "done" || report.verdict === "failures" ? "" : cut;
  return scrub(
    `typed-eval: ${headlineOf(report)}: ${report.reason}\n${written.trim()}${kept}${written || kept ? " " : ""}Next: ${report.next ?? row.next}. Exit ${code}.\n`,
  );
}
