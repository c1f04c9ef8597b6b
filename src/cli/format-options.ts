/**
 * The flags of the format options (`--csv-delimiter`, `--csv-bom`,
 * `--csv-escape-formulas`), declared by the formats that take them
 * (src/records/formats.ts lists them): a command that reads or writes data
 * files adds them here, and hands their values on untouched, so a new
 * format option changes its format's module only.
 */
import type { Argv } from "yargs";
import type { FormatOption, FormatSettings } from "../records/format.js";
import { formatOptions } from "../records/formats.js";
import { UsageError } from "./exit.js";

/** A string option's value as its format takes it; a bad one is a one-line usage error (exit 2). */
function coerced(option: FormatOption): (value: unknown) => string {
  return (value) => {
    if (Array.isArray(value)) throw new UsageError(`--${option.flag} is given ${value.length} times; give it once`);
    const parsed = option.parse?.(String(value)) ?? { value: String(value) };
    if ("error" in parsed) throw new UsageError(`--${option.flag} takes ${parsed.error}, not ${JSON.stringify(value)}`);
    return parsed.value;
  };
}

/**
 * Adds the flags of the options that shape reading inputs (`read`) or
 * writing outputs (`write`). No yargs default: a flag not given is absent,
 * so a format can tell a choice from its default (the help shows it).
 */
export function withFormatOptions<T>(y: Argv<T>, applies: FormatOption["applies"]): Argv<T> {
  let out = y;
  for (const option of formatOptions(applies)) {
    const shown = { describe: option.describe, defaultDescription: JSON.stringify(option.default) };
    out =
      option.type === "boolean"
        ? out.option(option.flag, { ...shown, type: "boolean" })
        : out.option(option.flag, { ...shown, type: "string", requiresArg: true, coerce: coerced(option) });
  }
  return out;
}

/** The format options given among a command's arguments (read or write ones), by flag. */
export function formatSettingsOf(args: Readonly<Record<string, unknown>>, applies: FormatOption["applies"]): FormatSettings {
  const settings: Record<string, string | boolean> = {};
  for (const { flag } of formatOptions(applies)) {
    const value = args[flag];
    if (typeof value === "string" || typeof value === "boolean") settings[flag] = value;
  }
  return settings;
}
