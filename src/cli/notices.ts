/**
 * Third-party notices kept out of a user's terminal. The AWS SDK prints a
 * nine-line NodeVersionSupportWarning (that its releases from 2027 require
 * Node 22) on every S3 run under Node 20: nothing a user of typed-eval can
 * act on per run, and it buries the one line that matters. Such notices are
 * logged at debug level instead; every other warning prints as Node prints it.
 */
import { cliLogger } from "./logger.js";

/** Warnings dropped from stderr, by the text they start with. */
const QUIET = ["NodeVersionSupportWarning:"];

function isQuiet(warning: string | Error): boolean {
  const text = typeof warning === "string" ? warning : `${warning.name}: ${warning.message}`;
  const bare = typeof warning === "string" ? warning : warning.message;
  return QUIET.some((start) => text.startsWith(start) || bare.startsWith(start));
}

let installed = false;

/** Routes the quiet notices to the debug log; call once, before any SDK client is created. */
export function quietThirdPartyNotices(): void {
  if (installed) return;
  installed = true;
  const emit = process.emitWarning.bind(process) as (...args: unknown[]) => void;
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    if (isQuiet(warning)) {
      cliLogger().debug({ warning: typeof warning === "string" ? warning : warning.message }, "third-party notice (not shown at info level)");
      return;
    }
    emit(warning, ...rest);
  }) as typeof process.emitWarning;
}
