/**
 * The one logger factory: pino JSON lines with stable field names, secrets
 * redacted wherever they appear in the first three levels of a log object,
 * and every line passed through the scrubber (secrets.ts) on its way out:
 * a key inside a message, an error's text or its stack is redacted too.
 */
import { pino, type DestinationStream, type Logger, type LevelWithSilent } from "pino";
import { scrub } from "./secrets.js";

export type { Logger } from "pino";

const SECRET_FIELDS = ["authorization", "apiKey", "api_key", "token", "secret", "password", "x-api-key"];

/** pino redact paths covering each secret field at the top level and two levels down. */
export const REDACT_PATHS = SECRET_FIELDS.flatMap((field) => {
  const f = /^[A-Za-z_$][\w$]*$/.test(field) ? field : `["${field}"]`;
  const join = (prefix: string) => (f.startsWith("[") ? `${prefix}${f}` : `${prefix}.${f}`);
  return [f, join("*"), join("*.*")];
});

export interface LoggerOptions {
  level?: LevelWithSilent;
  /** Where lines go; stderr by default so stdout stays free for results. */
  destination?: DestinationStream;
  name?: string;
}

/** Creates a JSON-lines logger (level info unless told; the command line passes `$TYPED_EVAL_LOG_LEVEL`, read in api/env.ts). */
export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? "info";
  return pino(
    {
      name: options.name ?? "typed-eval",
      level,
      redact: { paths: REDACT_PATHS, censor: "[redacted]" },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      // The whole line, whatever field carries it (a message, an error's message or stack at debug level).
      hooks: { streamWrite: scrub },
    },
    options.destination ?? pino.destination({ fd: 2, sync: true }),
  );
}
