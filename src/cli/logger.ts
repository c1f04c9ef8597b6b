/** The command line's logger: JSON lines on stderr at `$TYPED_EVAL_LOG_LEVEL` (checked in api/env.ts). */
import { env } from "../api/env.js";
import { createLogger, type Logger } from "../logging/logger.js";

/** A logger at the level the environment asks for (info by default). */
export function cliLogger(): Logger {
  return createLogger({ level: env("TYPED_EVAL_LOG_LEVEL") });
}
