/**
 * S3 inputs and outputs. `s3://bucket/key` reads one object;
 * `s3://bucket/prefix/` reads every object under the prefix in key order,
 * as one stream of records. Outputs are streamed by multipart upload
 * (lib-storage `Upload`, 5 MiB parts, parts discarded on error).
 *
 * The client follows the AWS SDK's own configuration (environment, profile);
 * `AWS_ENDPOINT_URL_S3` (or `AWS_ENDPOINT_URL`) points it at any
 * S3-compatible server, with path-style addressing.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { Readable } from "node:stream";
import { GetObjectCommand, ListObjectsV2Command, S3Client } from "@aws-sdk/client-s3";
import { env } from "../api/env.js";
import { backoffMs, type RetryPolicy, sleep } from "../api/retry.js";
import { systemErrorKind } from "../api/system-errors.js";
import { StorageError, SourceError } from "../api/verdict.js";

export function isS3(location: string): boolean {
  return location.startsWith("s3://");
}

export function parseS3(location: string): { bucket: string; key: string } {
  const match = /^s3:\/\/([^/]+)\/?(.*)$/.exec(location);
  if (!match?.[1]) throw new SourceError(`not an S3 location: ${location} (expected s3://bucket/key)`);
  return { bucket: match[1], key: match[2] ?? "" };
}

let shared: S3Client | undefined;

/** The S3 client, configured from the environment. */
export function s3Client(): S3Client {
  const endpoint = env("AWS_ENDPOINT_URL_S3") ?? env("AWS_ENDPOINT_URL");
  shared ??= new S3Client({
    ...(endpoint ? { endpoint, forcePathStyle: true } : {}),
    region: env("AWS_REGION") ?? env("AWS_DEFAULT_REGION"),
    // One retry layer, `storageCall`'s: the SDK's own (3 attempts, then a retry quota) would end an outage in seconds.
    maxAttempts: 1,
    // A store that accepts the connection and then says nothing is a failed attempt, not a hang.
    requestHandler: { connectionTimeout: 5_000, requestTimeout: 30_000 },
  });
  return shared;
}

/**
 * Whether a key under a prefix is a marker, not data, by the rule Hadoop-style
 * readers use: a name starting with "_" or "." (`_SUCCESS`, `_committed_...`,
 * `.part-0.crc`) or ending in ".crc". Spark and Hadoop write them into every
 * output folder.
 */
export function isMarker(key: string): boolean {
  const name = key.slice(key.lastIndexOf("/") + 1);
  return name.startsWith("_") || name.startsWith(".") || name.endsWith(".crc");
}

/** Default of `--storage-retry`: how long S3 may fail transiently before the run stops, resumable. */
export const STORAGE_RETRY_MS = 120_000;

/** Backoff between storage attempts: 250 ms doubling to 8 s, up to half of each delay taken off at random. */
const STORAGE_BACKOFF: RetryPolicy = { maxRetries: Number.POSITIVE_INFINITY, initialMs: 250, maxBackoffMs: 8_000, jitter: 0.5, maxServerDelayMs: 0 };

/** The retry window: the default until the command line sets it (`--storage-retry`, else `$TYPED_EVAL_STORAGE_RETRY`, for every command). */
let retryWindowMs = STORAGE_RETRY_MS;

/** Sets how long storage calls retry transient failures (`--storage-retry`, `$TYPED_EVAL_STORAGE_RETRY` seconds). */
export function setStorageRetry(seconds: number): void {
  retryWindowMs = seconds * 1000;
}

const TRANSIENT_NAMES = new Set(["TimeoutError", "RequestTimeout", "RequestTimeoutException", "SlowDown", "InternalError", "ServiceUnavailable", "Throttling"]);

function statusOf(error: unknown): number | undefined {
  return (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
}

/** Whether a storage error may pass by itself: 5xx, 408, 429, resets, refusals, timeouts. A 403 or a missing key will not. */
export function isTransient(error: unknown): boolean {
  const status = statusOf(error);
  if (status !== undefined && (status >= 500 || status === 408 || status === 429)) return true;
  return TRANSIENT_NAMES.has((error as { name?: string }).name ?? "") || systemErrorKind(error) === "network";
}

/** Whether the store refused this client (401, 403): retrying will not help, fixing credentials or policy will. */
function isRefusal(error: unknown): boolean {
  const status = statusOf(error);
  const name = (error as { name?: string }).name;
  return status === 401 || status === 403 || name === "AccessDenied" || name === "Forbidden" || name === "InvalidAccessKeyId";
}

/** What an S3 error says, in a few words. */
export function describeS3Error(error: unknown): string {
  const status = statusOf(error);
  const e = error as { name?: string; code?: string; message?: string };
  const what = e.code ?? e.name ?? "error";
  return `${status ? `HTTP ${status} ` : ""}${what}${e.message && e.message !== what && !e.message.startsWith("UnknownError") ? `: ${e.message}` : ""}`;
}

/**
 * The signal that ends a run's storage retries: the run's stop (SIGTERM)
 * once its grace is over. Ambient rather than passed, because every S3 call
 * of the run (the input, the journal's shipments on their timer, the lock,
 * the uploads, the summaries) retries through `storageCall`, and each must
 * give up when the run is told to stop: a store that stays down must not
 * hold a stopped run past its grace.
 */
const runStop = new AsyncLocalStorage<AbortSignal>();

/** Runs `work` with `stop` ending every storage retry started within it (timers started there included). */
export function withStorageStop<T>(stop: AbortSignal | undefined, work: () => Promise<T>): Promise<T> {
  return stop ? runStop.run(stop, work) : work();
}

/** Waits out a storage backoff, or throws a `StorageError` at once when the run is stopped meanwhile. */
async function backoff(wait: number, what: string, location: string, error: unknown, signal: AbortSignal | undefined): Promise<void> {
  const stop = signal ?? runStop.getStore();
  const stopped = () =>
    new StorageError(`${what} ${location}: the run was stopped while the store was failing (${describeS3Error(error)})`, location, { cause: error });
  if (stop?.aborted) throw stopped();
  try {
    await sleep(wait, stop);
  } catch {
    throw stopped();
  }
}

/**
 * Every S3 call of a run goes through here: transient failures are retried
 * with jittered backoff for the storage retry window (120 s by default), then
 * end as a `StorageError` (the resumable storage verdict), as does a refusal
 * (403) and a stop of the run (`withStorageStop`). Other errors (a missing
 * key, a failed precondition) are the caller's.
 */
export async function storageCall<T>(what: string, location: string, op: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const deadline = Date.now() + retryWindowMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await op();
    } catch (error) {
      if (error instanceof StorageError) throw error;
      if (isRefusal(error)) throw new StorageError(`${what} ${location}: the store refused access (${describeS3Error(error)})`, location, { cause: error });
      if (!isTransient(error)) throw error;
      const wait = backoffMs(attempt, STORAGE_BACKOFF);
      if (Date.now() + wait > deadline) {
        throw new StorageError(`${what} ${location}: the store kept failing for ${Math.round(retryWindowMs / 1000)} s (${describeS3Error(error)})`, location, {
          cause: error,
        });
      }
      await backoff(wait, what, location, error, signal);
    }
  }
}

/** Whether an S3 error says the key (or object) is not there. */
export function isMissingKey(error: unknown): boolean {
  const name = (error as { name?: string }).name;
  return name === "NotFound" || name === "NoSuchKey";
}

/** Every object under a prefix, in key order, with the marker objects apart (all pages of the listing). */
export async function keysUnder(client: S3Client, bucket: string, prefix: string): Promise<{ keys: { key: string; size: number }[]; markers: string[] }> {
  const keys: { key: string; size: number }[] = [];
  const markers: string[] = [];
  let token: string | undefined;
  do {
    const page = await storageCall("listing", `s3://${bucket}/${prefix}`, () =>
      client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token })),
    );
    for (const o of page.Contents ?? []) {
      if (!o.Key || o.Key.endsWith("/")) continue;
      if (isMarker(o.Key.slice(prefix.length))) markers.push(o.Key);
      else keys.push({ key: o.Key, size: o.Size ?? 0 });
    }
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return { keys: keys.sort((a, b) => (a.key < b.key ? -1 : 1)), markers };
}

/**
 * An object's bytes as they arrive; a transient failure mid-body (a reset, a
 * stalled socket) resumes by a ranged GET where it was cut, within the
 * storage retry window, so a long input survives a store that drops connections.
 */
export async function* objectBytes(client: S3Client, bucket: string, key: string, size: number): AsyncGenerator<Buffer> {
  const location = `s3://${bucket}/${key}`;
  let offset = 0;
  let failingSince: number | undefined;
  let attempt = 0;
  while (offset < size) {
    const from = offset;
    const got = await storageCall("reading", location, () =>
      client.send(new GetObjectCommand({ Bucket: bucket, Key: key, ...(from > 0 ? { Range: `bytes=${from}-` } : {}) })),
    );
    const body = got.Body as Readable;
    try {
      for await (const chunk of body as AsyncIterable<Buffer>) {
        offset += chunk.length;
        failingSince = undefined;
        attempt = 0;
        yield chunk;
      }
      if (offset >= size) return;
      throw Object.assign(new Error(`the body ended at byte ${offset} of ${size}`), { code: "ECONNRESET" });
    } catch (error) {
      if (!isTransient(error)) throw error;
      failingSince ??= Date.now();
      if (Date.now() - failingSince > retryWindowMs) {
        throw new StorageError(`reading ${location}: the store kept failing for ${Math.round(retryWindowMs / 1000)} s (${describeS3Error(error)})`, location, {
          cause: error,
        });
      }
      await backoff(backoffMs(attempt++, STORAGE_BACKOFF), "reading", location, error, undefined);
    } finally {
      body.destroy();
    }
  }
}
