/**
 * Checks for numeric options, run by yargs as each option's `coerce` so that
 * a bad value stops the command before anything starts: one line naming the
 * flag, what it accepts and the value given, exit 2 (a `UsageError`).
 */
import { UsageError } from "./exit.js";

export interface NumberRule {
  /** Smallest value allowed (inclusive). */
  min?: number;
  /** Values must be above this (exclusive). */
  above?: number;
  max?: number;
  integer?: boolean;
}

function accepts(rule: NumberRule): string {
  const kind = rule.integer ? "a whole number" : "a number";
  if (rule.min !== undefined && rule.max !== undefined) return `${kind} from ${rule.min} to ${rule.max}`;
  if (rule.above !== undefined && rule.max !== undefined) return `${kind} above ${rule.above} and at most ${rule.max}`;
  if (rule.min !== undefined) return `${kind} of at least ${rule.min}`;
  if (rule.above !== undefined) return `${kind} above ${rule.above}`;
  if (rule.max !== undefined) return `${kind} of at most ${rule.max}`;
  return kind;
}

function shown(value: unknown): string {
  if (value === undefined || value === true) return "nothing";
  // NaN from an environment default such as Number($TYPED_EVAL_PORT).
  return typeof value === "number" ? String(value) : JSON.stringify(value);
}

/** A yargs `coerce` that accepts one finite number obeying `rule`, else throws a one-line UsageError. */
export function numberRule(flag: string, rule: NumberRule): (value: unknown) => number {
  return (value: unknown) => {
    if (Array.isArray(value)) throw new UsageError(`--${flag} is given ${value.length} times; give it once (${accepts(rule)})`);
    const x = typeof value === "number" ? value : typeof value === "string" && value.trim() !== "" ? Number(value) : NaN;
    const ok =
      Number.isFinite(x) &&
      (!rule.integer || Number.isInteger(x)) &&
      (rule.min === undefined || x >= rule.min) &&
      (rule.above === undefined || x > rule.above) &&
      (rule.max === undefined || x <= rule.max);
    if (!ok) throw new UsageError(`--${flag} takes ${accepts(rule)}, not ${shown(value)}`);
    return x;
  };
}

/**
 * A numeric option: its yargs settings with the check attached. Deliberately
 * not yargs' `type: "number"`, which turns a word into NaN before the check
 * sees it: the check converts, so the message can quote what was given.
 */
export function numeric<S extends { describe: string; default?: number; demandOption?: boolean }>(
  flag: string,
  rule: NumberRule,
  settings: S,
): S & { requiresArg: true; coerce: (value: unknown) => number } {
  return { ...settings, requiresArg: true, coerce: numberRule(flag, rule) };
}
