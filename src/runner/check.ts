/**
 * The check stage: everything that can be known before the first paid
 * request. The input exists and its first record decodes as its format
 * says; every local place the run writes (answers, errors, usage, review,
 * summary, journal and its lock) can be created and written; the endpoint
 * settings hold together. Failures here are verdicts with nothing paid.
 */
import { existsSync, mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { InvocationError, TypedEvalError } from "../api/errors.js";
import { describeSystemError, systemErrorKind } from "../api/system-errors.js";
import type { Source } from "../records/source.js";
import { isS3, s3Object } from "../records/s3.js";
import { InputChangedError, isStorageFailure, StorageError, type Verdict, SourceError } from "../api/verdict.js";

/** A stage's failure as a verdict: nothing crosses a stage as an exception. */
export interface StageFailure {
  verdict: Verdict;
  reason: string;
}

/**
 * The verdict of an error met before the first request: the user's to fix
 * (bad input, bad invocation, a path that cannot be written), the store's
 * (S3 down: resumable), or a bug.
 */
export function checkFailure(error: unknown): StageFailure {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof SourceError) return { verdict: error.absent ? "no-input" : "bad-input", reason: message };
  if (error instanceof InvocationError) return { verdict: "bad-input", reason: message };
  if (error instanceof TypedEvalError) return { verdict: "aborted", reason: message };
  // A store that failed past its retries already says what it was reading or writing, and for how long.
  if (error instanceof StorageError) return { verdict: "storage-unavailable", reason: message };
  if (error instanceof InputChangedError) return { verdict: "input-changed", reason: message };
  const system = describeSystemError(error);
  // A store that does not answer (S3 down, refused, reset) is resumable; a path the user named wrong is not.
  if (systemErrorKind(error) !== "file-system" && isStorageFailure(error)) return { verdict: "storage-unavailable", reason: system ?? message };
  if (system) return { verdict: "bad-input", reason: system };
  return { verdict: "internal-error", reason: message };
}

/** Can `path` be written as a file: its folder made, no directory in its (or its `.partial`'s) place, the folder writable. */
export function checkWritableFile(path: string, flag: string): void {
  const folder = dirname(resolve(path));
  const refuse = (why: string) => new InvocationError(`cannot write ${flag} ${path}: ${why}`);
  try {
    mkdirSync(folder, { recursive: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw refuse(code === "EEXIST" || code === "ENOTDIR" ? `part of ${dirname(path)} is a file, not a folder; choose another path` : oneLine(error));
  }
  for (const place of [path, `${path}.partial`]) {
    if (existsSync(place) && statSync(place).isDirectory()) throw refuse(`${place} is a directory where the file goes; name a file, or remove the directory`);
  }
  // Written, not asked (access() says yes to root on a read-only mount's folder with no write bit... and no to nothing else).
  const probe = join(folder, `.typed-eval-check-${process.pid}`);
  try {
    writeFileSync(probe, "");
  } catch (error) {
    throw refuse(oneLine(error));
  } finally {
    rmSync(probe, { force: true });
  }
}

function oneLine(error: unknown): string {
  return describeSystemError(error) ?? (error as Error).message;
}

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
  for (const [place, flag] of places) {
    if (place === undefined) continue;
    if (isS3(place)) s3Object(place, flag);
    else checkWritableFile(place, flag);
  }
}

/**
 * Reads the input's first record now, so an input that is not what its name
 * says (a corrupt .gz, Parquet named .jsonl, invalid UTF-8) stops the run
 * here; the returned source yields that record again, then the rest.
 */
export async function checkFirstRecord(source: Source): Promise<Source> {
  const iterator = source.items[Symbol.asyncIterator]();
  const first = await iterator.next();
  async function* items() {
    try {
      if (first.done) return;
      yield first.value;
      for (;;) {
        const next = await iterator.next();
        if (next.done) return;
        yield next.value;
      }
    } finally {
      await iterator.return?.();
    }
  }
  return { ...source, items: items() };
}
