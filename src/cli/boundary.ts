/**
 * The one place where a command's end becomes the end of the process: one
 * line on stderr and a documented exit code, never a stack (the stack is
 * logged at debug level). Every command goes through it, and nothing else
 * sets an exit code: commands return when they succeed and throw otherwise,
 * and the verdict of what they throw is `classify`'s (api/verdict.ts), the
 * same table a run's stages use.
 *
 * - a bad invocation, setting, job file, input, registry or accounts file
 *   (`InvocationError`, and yargs' own YError): exit 2 (6 for an absent input);
 * - an operating-system or library error (address in use, permission, read-only
 *   or full file system, a directory where a file goes, a refused host, a file
 *   that is not GGUF): a problem with what was named, exit 2;
 * - an error that names its verdict: a store that failed past its retries (9),
 *   a lock taken over (8), a gate (4), an endpoint given up on (3);
 * - a remote host that does not answer (an endpoint, a model download host):
 *   the resumable "aborted" code, 3;
 * - anything else: a bug, exit 70.
 */
import { InvocationError } from "../api/errors.js";
import type { ExitCode } from "../api/exit-codes.js";
import { classify, exitCodeOf, type Ending as Verdicted } from "../api/verdict.js";
import { cliLogger } from "./logger.js";
import { scrub } from "../logging/secrets.js";

export interface Ending {
  code: ExitCode;
  /** What stderr shows, without the trailing newline (empty: the command already said it). */
  text: string;
}

/** Text yargs already composed (the overview for a missing or unknown command): shown as it is, exit 2. */
export class ComposedUsage extends InvocationError {
  override name = "ComposedUsage";
}

/** A command's ending it has already told on stderr (a run's verdict line and summary): only its exit code remains. */
export class Told extends Error {
  override name = "Told";
  constructor(readonly ending: Verdicted) {
    super(ending.reason);
  }
}

const INTERNAL_HINT = "rerun with TYPED_EVAL_LOG_LEVEL=debug for the stack";

/** How an error that reached the command line ends the process. */
export function endingOf(error: unknown): Ending {
  if (error instanceof Told) return { code: exitCodeOf(error.ending), text: "" };
  if (error instanceof ComposedUsage) return { code: exitCodeOf({ verdict: "bad-input" }), text: error.message };
  const ending = classify(error, "command");
  const code = exitCodeOf(ending);
  if (ending.verdict !== "internal-error") return { code, text: `typed-eval: ${ending.reason}` };
  return { code, text: `typed-eval: internal error (a bug in typed-eval): ${ending.reason || "unknown error"}; ${INTERNAL_HINT}` };
}

/** Prints the ending of `error` (its stack at debug level) and exits with its code. */
export function exitWith(error: unknown): never {
  const ending = endingOf(error);
  debugLog(error);
  // Scrubbed: the line may quote what an endpoint answered (secrets.ts).
  if (ending.text) process.stderr.write(`${scrub(ending.text)}\n`);
  process.exit(ending.code);
}

/**
 * Ends the process now, with the code of a stop that cannot wait any longer
 * (a second signal whose run did not end within its bound), saying so in one line.
 */
export function endNow(ending: Verdicted, line: string): never {
  process.stderr.write(`${scrub(line)}\n`);
  process.exit(exitCodeOf(ending));
}

/** Ends a server that shut down on a signal: exit 0, whatever handles remain. */
export function shutDown(): never {
  process.exit(0);
}

function debugLog(error: unknown): void {
  try {
    cliLogger().debug({ err: error }, "the error that ended the command");
  } catch {
    // A logger that cannot be made (a bad $TYPED_EVAL_LOG_LEVEL is what is being reported) logs nothing.
  }
}
