/**
 * The one convention for durations on the command line: a number with a unit
 * (`500ms`, `30s`, `2m`, `1h`), or a bare number, which is seconds, for every
 * flag and every environment default that is a duration. A duration option
 * hands its handler seconds (fractional where the unit was finer).
 */
import { parseDuration } from "../api/duration.js";
import { UsageError } from "./exit.js";
import { env, isSet } from "../api/env.js";

export { type Duration, parseDuration } from "../api/duration.js";

/** What a duration option accepts, as its messages and help say it. */
export const DURATION_FORMS = "500ms, 30s, 2m or 1h (a bare number is seconds)";

/** What every duration option's help adds to its description. */
const UNITS_IN_HELP = "500ms, 30s, 2m, 1h; a bare number is seconds";

/**
 * The longest duration accepted: Node's timers hold at most 2^31-1 ms and
 * fire at once beyond it, so a longer --timeout would fail every attempt.
 */
const MAX_SECONDS = 596 * 3600;

/**
 * A bare number above this, for a flag that took milliseconds before the
 * convention, is taken for old milliseconds and refused: nobody means five
 * minutes of shutdown grace by writing a bare 500, but 30000 was the old default.
 */
const LEGACY_MS_SECONDS = 300;

/** A duration in words for messages: `8.3 hours`, `45 seconds`. */
export function inWords(seconds: number): string {
  const [amount, unit] =
    seconds >= 3600
      ? [seconds / 3600, "hour"]
      : seconds >= 60
        ? [seconds / 60, "minute"]
        : seconds >= 1
          ? [seconds, "second"]
          : [seconds * 1000, "millisecond"];
  const shown = Number(amount.toFixed(1));
  return `${shown} ${unit}${shown === 1 ? "" : "s"}`;
}

export interface DurationRule {
  /** Smallest value allowed, in seconds (inclusive). */
  min?: number;
  /** Values must be above this, in seconds (exclusive). */
  above?: number;
  /** The flag took milliseconds as a bare number before: refuse a bare number too large to be meant as seconds. */
  wasMilliseconds?: boolean;
  /** The environment variable its default comes from (read and checked in api/env.ts), named when that value is out of bounds. */
  env?: "TYPED_EVAL_STORAGE_RETRY";
}

function bounds(rule: DurationRule): string {
  if (rule.above !== undefined) return rule.above === 0 ? " above 0" : ` above ${rule.above}s`;
  if (rule.min !== undefined && rule.min > 0) return ` of at least ${rule.min}s`;
  return "";
}

/** A yargs `coerce` turning a duration into seconds, else throwing a one-line UsageError naming the flag. */
export function durationRule(flag: string, rule: DurationRule = {}): (value: unknown) => number {
  return (value: unknown) => {
    if (Array.isArray(value)) throw new UsageError(`--${flag} is given ${value.length} times; give it once`);
    const text = typeof value === "number" ? String(value) : typeof value === "string" ? value : "";
    const parsed = parseDuration(text);
    const inBounds =
      parsed !== undefined && (rule.min === undefined || parsed.seconds >= rule.min) && (rule.above === undefined || parsed.seconds > rule.above);
    if (!inBounds) {
      const from = rule.env !== undefined && text === envDefault(rule.env) ? ` (from $${rule.env})` : "";
      const given = value === undefined || value === true ? "nothing" : JSON.stringify(text);
      throw new UsageError(`--${flag} takes a duration${bounds(rule)}, such as ${DURATION_FORMS}, not ${given}${from}`);
    }
    if (rule.wasMilliseconds && parsed.bare && parsed.seconds > LEGACY_MS_SECONDS) {
      const n = parsed.seconds;
      throw new UsageError(`--${flag} ${text.trim()}: that is ${inWords(n)}; write ${n}ms or ${n / 1000}s`);
    }
    if (parsed.seconds > MAX_SECONDS) throw new UsageError(`--${flag} ${text.trim()}: that is ${inWords(parsed.seconds)}; the longest is 596h`);
    return parsed.seconds;
  };
}

/**
 * A duration option: its yargs settings with the check attached. The default
 * is written with its unit (`"30s"`); `rule.env`, when set and not empty,
 * replaces it and goes through the same parser, so `$TYPED_EVAL_STORAGE_RETRY=2m`
 * means what `--storage-retry 2m` does.
 */
export function duration<S extends { describe: string; default: string }>(
  flag: string,
  rule: DurationRule,
  settings: S,
): Omit<S, "default"> & { default: string; defaultDescription: string; requiresArg: true; coerce: (value: unknown) => number } {
  const fromEnv = rule.env === undefined ? undefined : envDefault(rule.env);
  return {
    ...settings,
    describe: `${settings.describe} (${UNITS_IN_HELP})`,
    default: fromEnv ?? settings.default,
    defaultDescription: rule.env === undefined ? settings.default : `$${rule.env}, else ${settings.default}`,
    requiresArg: true,
    coerce: durationRule(flag, rule),
  };
}

/** The default an environment variable gives a duration option, as text with its unit; undefined when it is unset. */
function envDefault(name: "TYPED_EVAL_STORAGE_RETRY"): string | undefined {
  return isSet(name) ? `${env(name)}s` : undefined;
}
