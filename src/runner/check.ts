/**
 * The check stage: everything that can be known before the first paid
 * request. The input exists and its first record decodes as its format
 * says; every local place the run writes (answers, errors, usage, review,
 * summary, journal and its lock) can be created and written; the endpoint
 * settings hold together. Failures here are verdicts with nothing paid.
 */
import { existsSync, mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { dirname, join, resolve } from "node:path";
import { InvocationError } from "../api/errors.js";
import { describeSystemError, systemCode } from "../api/system-errors.js";
import type { Source } from "../records/source.js";
import { isS3, s3Object } from "../records/s3.js";
import { EndpointAbort } from "../api/verdict.js";

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
  // Written, not asked (access() says yes to root on a read-only mount's folder with no write bit... and no to nothing else);
  // a byte, so a full disk is found here, before anything is paid, not when the outputs are written.
  const probe = join(folder, `.typed-eval-check-${process.pid}`);
  try {
    writeFileSync(probe, "\n");
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

/** Connection failures that mean nothing listens at an address (as against one request's reset or timeout). */
const UNREACHABLE = new Set(["ECONNREFUSED", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN"]);

/**
 * Whether anything listens at a remote endpoint: one connection to its host
 * and port, before the first paid request (no request is sent, so an
 * endpoint sees nothing it does not expect). Refused, no such host or no
 * route is the endpoint down: `EndpointAbort` (exit 3, resumable) in
 * seconds, not after every record's retries. A slow connection is left to
 * the run's own timeouts.
 */
export function probeEndpoint(baseUrl: string, timeoutMs = 5000): Promise<void> {
  const url = new URL(baseUrl);
  const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
  const host = url.hostname.replace(/^\[|\]$/g, "");
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    const done = (error?: Error) => {
      socket.destroy();
      if (!error) return resolve();
      const code = systemCode(error);
      if (code === undefined || !UNREACHABLE.has(code)) return resolve();
      const why = describeSystemError(error) ?? code;
      reject(new EndpointAbort(`nothing answers at ${baseUrl} (${why}): check --base-url and that the endpoint is up, then rerun`, { cause: error }));
    };
    socket.setTimeout(timeoutMs, () => done());
    socket.once("connect", () => done());
    socket.once("error", done);
  });
}
