/**
 * The check stage: everything that can be known before the first paid
 * request. The input exists and its first record decodes as its format
 * says; every local place the run writes (answers, errors, usage, review,
 * summary, journal and its lock) can be created and written; the endpoint
 * settings hold together. Failures here are verdicts with nothing paid.
 */
import { resolve } from "node:path";
import { InvocationError } from "../api/errors.js";
import { valueAt, type Source, type SourceItem } from "../records/source.js";
import type { Job } from "../records/job.js";
import type { Logger } from "../logging/logger.js";
import type { EvaluatorRequest } from "../api/schema.js";
import { ContextTooSmallError, type Evaluator } from "../evaluator/evaluator.js";
import { contextSizeFor } from "../engines/llama.js";
import { prepareItem, type Shard } from "./input/requests.js";
import { isS3, s3Object } from "../records/s3.js";
import { checkWritableFile } from "../records/local-files.js";

/** Checks every local place a run writes, that S3 ones name objects (the store itself is checked by taking the lock), and that the answers do not replace the input. */
export function checkPlaces(
  paths: { output: string; errors: string | undefined; usage: string | undefined; summaryJson: string | undefined; journalPath: string },
  input: string,
  reviewFile: string | undefined,
): void {
  const { output } = paths;
  if (output !== "-" && !isS3(output) && input !== "-" && !isS3(input) && resolve(output) === resolve(input)) {
    throw new InvocationError(`-o ${output} is the input itself: the answers would replace it; write them elsewhere`);
  }
  const places: [string | undefined, string][] = [
    [output === "-" ? undefined : output, "--output"],
    [paths.errors, "--errors"],
    [paths.usage, "the usage summary"],
    [reviewFile, "the review file"],
    [paths.summaryJson, "--summary-json"],
    [paths.journalPath, "--journal"],
    [`${paths.journalPath}.lock`, "the journal's lock"],
  ];
  for (const [place, flag] of places) if (place !== undefined) checkPlace(place, flag);
}

/** One place the run writes, local (writable, not a folder) or S3 (an object, not a prefix). */
export function checkPlace(place: string, flag: string): void {
  if (isS3(place)) s3Object(place, flag);
  else checkWritableFile(place, flag);
}

/**
 * Reads the input's first record now, so an input that is not what its name
 * says (a corrupt .gz, Parquet named .jsonl, invalid UTF-8) stops the run
 * here; the returned source yields that record again, then the rest.
 */
export async function checkFirstRecord(source: Source): Promise<Source> {
  return (await readAhead(source, 1)).source;
}

/** The records the check judges a job on before anything is paid: the kept fields, and what the context window must hold. */
export const FIRST_WINDOW = 20;

/**
 * Reads the input's first `n` items now (the first decoding as its format
 * says, or the run stops here); the returned source yields them again, then
 * the rest.
 */
export async function readAhead(source: Source, n: number): Promise<{ source: Source; window: SourceItem[] }> {
  const iterator = source.items[Symbol.asyncIterator]();
  const window: SourceItem[] = [];
  let ended = false;
  while (window.length < n) {
    const next = await iterator.next();
    if (next.done) {
      ended = true;
      break;
    }
    window.push(next.value);
  }
  async function* items() {
    try {
      yield* window;
      if (ended) return;
      for (;;) {
        const next = await iterator.next();
        if (next.done) return;
        yield next.value;
      }
    } finally {
      await iterator.return?.();
    }
  }
  return { source: { ...source, items: items() }, window };
}

/**
 * Warns once per field, naming it, when no record of the first window has a
 * field the job keeps (`customer.tierr`): its column would be empty in every
 * row without a word.
 */
export function warnMissingKeep(job: Job, window: readonly SourceItem[], logger: Logger): void {
  const records = window.flatMap((item) => ("record" in item ? [item.record] : []));
  if (records.length === 0) return;
  for (const field of job.keep ?? []) {
    if (records.some((record) => valueAt(record, field) !== undefined)) continue;
    logger.warn(
      { keep: field },
      `keep: none of the first ${records.length} records has the field "${field}": its column will be empty in every row; check its spelling in the job file`,
    );
  }
}

/**
 * Checks the context window (`--context-size`) against what the job needs
 * before anything is paid: the fixed part of the prompt (the system text,
 * the longest question and its labels, an empty state), then each request
 * of the first window. Either not fitting is a bad invocation naming the
 * size that would; a later record that does not fit is that record's error.
 * A remote evaluator holds no window here: nothing to check.
 */
export function checkContextFits(evaluator: Evaluator, job: Job, window: readonly SourceItem[], shard: Shard | undefined): void {
  const fixed = tooSmall(evaluator, { state: "", model: job.model, questions: job.questions });
  if (fixed) {
    throw new InvocationError(
      `--context-size: the context window is ${fixed.window} tokens, but the fixed part of the prompt (the system text and the longest question with its labels) needs ${fixed.need}: pass --context-size ${contextSizeFor(fixed.need)} or more`,
    );
  }
  let worst: { need: number; window: number; line: number } | undefined;
  for (const item of window) {
    const prepared = prepareItem(job, item, shard);
    if (prepared.kind !== "request") continue;
    const over = tooSmall(evaluator, prepared.request);
    if (over && over.need > (worst?.need ?? 0)) worst = { ...over, line: item.line };
  }
  if (worst) {
    throw new InvocationError(
      `--context-size: the context window is ${worst.window} tokens, but the record on line ${worst.line} (of the first ${window.length}) needs ${worst.need} with its longest question: pass --context-size ${contextSizeFor(worst.need)} or more`,
    );
  }
}

/** The need and window of a request over the context window, if it is. */
function tooSmall(evaluator: Evaluator, request: EvaluatorRequest): { need: number; window: number } | undefined {
  try {
    evaluator.estimateInputTokens(request);
    return undefined;
  } catch (error) {
    // Other refusals (a request over the token limits) are the record's own, told when it is sent.
    return error instanceof ContextTooSmallError ? { need: error.need, window: error.window } : undefined;
  }
}
