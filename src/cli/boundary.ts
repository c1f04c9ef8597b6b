/**
 * The one place where an error that escaped a command becomes the end of the
 * process: one line on stderr and a documented exit code, never a stack
 * (the stack is logged at debug level). Every command goes through it.
 *
 * - a bad invocation, job file, input, registry or accounts file
 *   (`InvocationError`, and yargs' own YError): exit 2 (6 for an absent input);
 * - an operating-system or library error (address in use, permission, read-only
 *   or full file system, a directory where a file goes, a refused host, a file
 *   that is not GGUF): a problem with what was named, exit 2;
 * - a store that failed past its retries (`StorageError`: S3 down, a disk
 *   full) or a lock taken over (`LockLostError`): their verdicts' codes, 9 and 8;
 * - a remote host that does not answer (`UpstreamUnavailableError`: an
 *   endpoint, a model download host): the resumable "aborted" code, 3;
 * - anything else: a bug, exit 70.
 */
import { InvocationError, UpstreamUnavailableError } from "../api/errors.js";
import { EXIT, type ExitCode } from "../api/exit-codes.js";
import { describeSystemError } from "../api/system-errors.js";
import { createLogger } from "../logging/logger.js";
import { LockLostError, StorageError, VERDICTS, SourceError } from "../api/verdict.js";

export interface Ending {
  code: ExitCode;
  /** What stderr shows, without the trailing newline. */
  text: string;
}

/** Text yargs already composed (the overview for a missing or unknown command): shown as it is, exit 2. */
export class ComposedUsage extends InvocationError {
  override name = "ComposedUsage";
}

const INTERNAL_HINT = "rerun with TYPED_EVAL_LOG_LEVEL=debug for the stack";

/** How an error that reached the command line ends the process. */
export function endingOf(error: unknown): Ending {
  if (error instanceof ComposedUsage) return { code: EXIT.usage, text: error.message };
  if (error instanceof InvocationError || (error instanceof Error && error.name === "YError")) {
    return { code: error instanceof SourceError && error.absent ? EXIT.noInput : EXIT.usage, text: `typed-eval: ${error.message}` };
  }
  if (error instanceof StorageError) return { code: VERDICTS["storage-unavailable"].exit(), text: `typed-eval: ${error.message}` };
  if (error instanceof LockLostError) return { code: VERDICTS["lock-lost"].exit(), text: `typed-eval: ${error.message}` };
  if (error instanceof UpstreamUnavailableError) return { code: VERDICTS.aborted.exit(), text: `typed-eval: ${error.message}` };
  const system = describeSystemError(error);
  if (system !== undefined) return { code: EXIT.usage, text: `typed-eval: ${system}` };
  const message = error instanceof Error ? error.message : String(error);
  // One line: a multi-line message (an assertion's diff) keeps its first line; the rest is in the debug log.
  const first = message.split("\n", 1)[0]?.trim() || (error instanceof Error ? error.name : "unknown error");
  return { code: EXIT.internal, text: `typed-eval: internal error (a bug in typed-eval): ${first}; ${INTERNAL_HINT}` };
}

/** Prints the ending of `error` (its stack at debug level) and exits with its code. */
export function exitWith(error: unknown): never {
  const ending = endingOf(error);
  createLogger().debug({ err: error }, "the error that ended the command");
  process.stderr.write(`${ending.text}\n`);
  process.exit(ending.code);
}
