/**
 * Prompt formats as they are recorded and read back. The embedded model's
 * format is named once, beside its rendering (`PROMPT_FORMAT` in
 * `src/evaluator/prompt.ts`); a remote endpoint renders its own prompt and
 * may name it in a response header. Every answer records its format (output
 * rows, the usage summary), and the quality tools compare two runs' formats
 * as they compare their models. Three values name no one rendering, so two
 * of them cannot be told apart: `unknown` (recorded before formats were
 * named), `endpoint` (a remote endpoint that does not name its format) and
 * `mixed` (a summary over rows of several formats).
 */

/** The response header in which a server names the prompt format of its answers (the wire has no field for it). */
export const PROMPT_FORMAT_HEADER = "x-typed-eval-prompt-format";

/** How a row or summary written before formats were named reads. */
export const UNKNOWN_PROMPT_FORMAT = "unknown";
/** Answers whose prompt a remote endpoint rendered without naming its format: it may change without notice. */
export const ENDPOINT_PROMPT_FORMAT = "endpoint";
/** A summary over rows of more than one format (its `prompt_formats` counts them). */
export const MIXED_PROMPT_FORMATS = "mixed";

const UNNAMED: ReadonlySet<string> = new Set([UNKNOWN_PROMPT_FORMAT, ENDPOINT_PROMPT_FORMAT, MIXED_PROMPT_FORMATS]);

/** A recorded format as read back: its name, or `unknown` for a record without one. */
export function recordedPromptFormat(value: unknown): string {
  return typeof value === "string" && value !== "" ? value : UNKNOWN_PROMPT_FORMAT;
}

/** Whether a recorded format names one rendering (`unknown`, `endpoint` and `mixed` do not). */
export function namesPromptFormat(format: string): boolean {
  return !UNNAMED.has(format);
}

/** The format an endpoint's response names in its header, when it is a plausible name (short printable ASCII); else `endpoint`. */
export function declaredPromptFormat(header: string | null | undefined): string {
  return header && /^[\x21-\x7e]{1,64}$/.test(header) && namesPromptFormat(header) ? header : ENDPOINT_PROMPT_FORMAT;
}

/** The one format of rows counted by format, else `mixed` (none counted: undefined). */
export function formatOfRows(counts: Readonly<Record<string, number>>): string | undefined {
  const formats = Object.keys(counts);
  return formats.length > 1 ? MIXED_PROMPT_FORMATS : formats[0];
}

/** Whether two runs' prompts differ: true or false when both formats are named, null when either cannot tell. */
export function promptFormatChanged(now: string, earlier: string): boolean | null {
  return namesPromptFormat(now) && namesPromptFormat(earlier) ? now !== earlier : null;
}
