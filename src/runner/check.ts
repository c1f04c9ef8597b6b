/**
 * The check stage: everything that can be known before the first paid
 * request. The input exists and its first record decodes as its format
 * says; every local place the run writes (answers, errors, usage, review,
 * summary, journal and its lock) can be created and written; the endpoint
 * settings hold together. Failures here are verdicts with nothing paid.
 */
import { realpathSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { InvocationError, TypedEvalError } from "../api/errors.js";
import { valueAt, type Source, type SourceItem } from "../records/source.js";
import type { Job } from "../records/job.js";
import type { Logger } from "../logging/logger.js";
import type { EvaluatorRequest } from "../api/schema.js";
import { ContextTooSmallError, type Evaluator } from "../evaluator/evaluator.js";
import { contextSizeFor } from "../engines/llama.js";
import { bareNumber, prepareItem, type Shard } from "./input/requests.js";
import { isS3, refuseMistypedS3, s3Object } from "../records/s3.js";
import { checkCreatableFile, checkWritableFile } from "../records/local-files.js";
import { stagedPath } from "./output/s3-target.js";

/** The places a run's paths name for writing, each with the flag or file that names it (stdout left out). */
type Places = { output: string; errors: string | undefined; usage: string | undefined; summaryJson: string | undefined; journalPath: string };

function placesOf(paths: Places, reviewFile: string | undefined): [string, string][] {
  // The output and the places named after it first: of two places that are one file, the later is the one to rename.
  const named: [string | undefined, string][] = [
    [paths.output === "-" ? undefined : paths.output, "--output"],
    [paths.usage, "the usage summary"],
    [reviewFile, "the review file"],
    [paths.journalPath, "--journal"],
    [`${paths.journalPath}.lock`, "the journal's lock"],
    [paths.errors, "--errors"],
    [paths.summaryJson, "--summary-json"],
  ];
  return named.filter((place): place is [string, string] => place[0] !== undefined);
}

/**
 * Checks, before anything is paid, every place a run writes: none is
 * another's file or the input itself, each local one can be created and
 * written, each S3 one names an object whose staging copy
 * ($TYPED_EVAL_STAGING) can be written (the store itself is checked by
 * taking the lock). A place written as S3 but mistyped (`S3://`, `s3:/`) is
 * refused naming the spelling that works.
 */
export function checkPlaces(paths: Places, input: string): void {
  refuseMistypedS3(input, "the input");
  const places = placesOf(paths, undefined);
  for (const [place, flag] of places) refuseMistypedS3(place, flag);
  checkApart(places, input);
  for (const [place, flag] of places) checkPlace(place, flag);
}

/** The review file, once the answers' format names it: checked as every other place, and apart from them. */
export function checkReviewPlace(paths: Places, input: string, reviewFile: string): void {
  checkApart(placesOf(paths, reviewFile), input);
  checkPlace(reviewFile, "the review file");
}

/** One place the run writes, local (writable, not a folder) or S3 (an object, not a prefix, and its staging copy writable). */
export function checkPlace(place: string, flag: string): void {
  if (!isS3(place)) return checkWritableFile(place, flag);
  s3Object(place, flag);
  checkCreatableFile(stagedPath(place), `$TYPED_EVAL_STAGING (where ${flag} ${place} is assembled before its upload)`);
}

/**
 * No two places one file, and none the input: two flags naming one file
 * (`--errors a.jsonl -o a.jsonl`) would write one over the other after every
 * record was paid for.
 */
function checkApart(places: readonly [string, string][], input: string): void {
  const inputKey = input === "-" ? undefined : placeKey(input);
  const seen = new Map<string, [string, string]>();
  for (const [place, flag] of places) {
    const key = placeKey(place);
    if (key === inputKey) throw new InvocationError(`${flag} ${place} is the input itself: writing it would replace the input; write it elsewhere`);
    if (inputKey?.endsWith("/") && isS3(place) && key.startsWith(inputKey)) {
      throw new InvocationError(`${flag} ${place} is under the input prefix ${input}: a later run would read it as input; write it elsewhere`);
    }
    const other = seen.get(key);
    if (other)
      throw new InvocationError(`${other[1]} ${other[0]} and ${flag} ${place} are one file: each place a run writes needs its own; name another for ${flag}`);
    seen.set(key, [place, flag]);
  }
}

/**
 * Whether `place` is a file of its own: not the input, not another place of
 * the run (those named by other than `flag`). A run refused at the check
 * still writes its `--summary-json`, and a run that routes no rows to review
 * removes an earlier review file: neither may touch the input, an output or
 * the journal.
 */
export function ownFile(place: string, flag: string, paths: Places, input: string): boolean {
  const own = placeKey(place);
  if (input !== "-" && own === placeKey(input)) return false;
  return !placesOf(paths, undefined).some(([other, by]) => by !== flag && placeKey(other) === own);
}

/** What a place is, whatever its spelling: an S3 location as written, a local path resolved through its links. */
function placeKey(place: string): string {
  if (isS3(place)) return place;
  const path = resolve(place);
  try {
    return realpathSync(path);
  } catch {
    try {
      return join(realpathSync(dirname(path)), basename(path));
    } catch {
      return path;
    }
  }
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
 * Warns once, before anything is paid, when records of the first window have
 * a bare number as their state (42, "3.5"): sent as text, such a state is
 * more often a wrong state field (an id, a count) than something to label.
 * (An empty state, or a missing value's mark, fails as its record: see
 * `buildRequest`.)
 */
export function warnBareNumbers(job: Job, window: readonly SourceItem[], logger: Logger): void {
  if (job.state === undefined) return;
  const field = job.state;
  const states = window.flatMap((item) => ("record" in item ? [valueAt(item.record, field)] : []));
  const numbers = states.filter(bareNumber);
  if (numbers.length === 0) return;
  logger.warn(
    { state: field, bare_numbers: numbers.length, of: states.length },
    `state: ${numbers.length} of the first ${states.length} records' "${field}" ${numbers.length === 1 ? "is a bare number" : "are bare numbers"} (such as ${JSON.stringify(numbers[0])}): they are sent as text and paid for; check that "${field}" is the field the job means`,
  );
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
  const empty: EvaluatorRequest = { state: "", model: job.model, questions: job.questions };
  const fixed = tooSmall(evaluator, empty);
  if (!fixed) refuseQuestionsAlone(evaluator, empty);
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

/**
 * The questions alone (an empty state) over the model's other limits (a
 * question of 100 KB of instructions: over the 32k-token limit whatever the
 * state): every record would fail alike, so the job is refused here.
 */
function refuseQuestionsAlone(evaluator: Evaluator, empty: EvaluatorRequest): void {
  try {
    evaluator.estimateInputTokens(empty);
  } catch (error) {
    if (!(error instanceof TypedEvalError)) throw error;
    throw new InvocationError(
      `the job's questions alone (with an empty state) are over the model's limits, so every record would fail: ${error.message} Shorten the instructions, or split the questions over several jobs`,
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
