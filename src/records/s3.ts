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
import { setMaxListeners } from "node:events";
import type { Readable } from "node:stream";
import {
  GetObjectCommand,
  type GetObjectCommandOutput,
  HeadBucketCommand,
  HeadObjectCommand,
  type HeadObjectCommandOutput,
  ListObjectsV2Command,
  S3Client,
} from "@aws-sdk/client-s3";
import { env } from "../api/env.js";
import { InvocationError } from "../api/errors.js";
import { backoffMs, type RetryPolicy, sleep } from "../api/retry.js";
import { systemErrorKind } from "../api/system-errors.js";
import { InputChangedError, StorageError, SourceError } from "../api/verdict.js";

export function isS3(location: string): boolean {
  return location.startsWith("s3://");
}

/**
 * Refuses a location meant as S3 but not written as one (`S3://b/k`,
 * `s3:/b/k`, `s3:b/k`), naming the spelling that works: read as a local path
 * it would be absent (exit 6, "skipped" to a scheduler) or made as a folder.
 */
export function refuseMistypedS3(location: string, setting: string): void {
  if (isS3(location)) return;
  const meant = /^s3:\/*([^/].*)$/i.exec(location)?.[1];
  if (meant === undefined) return;
  throw new InvocationError(`${setting} ${location} is not an S3 location as written: write it s3://${meant} (lower-case s3, two slashes)`);
}

export function parseS3(location: string): { bucket: string; key: string } {
  const match = /^s3:\/\/([^/]+)\/?(.*)$/.exec(location);
  if (!match?.[1]) throw new SourceError(`not an S3 location: ${location} (expected s3://bucket/key)`);
  return { bucket: match[1], key: match[2] ?? "" };
}

/** An S3 setting that cannot work (no credentials, no such bucket, a prefix where an object goes): exit 2, naming it. An endpoint without its scheme is refused with the environment (api/env.ts). */
export class S3SetupError extends InvocationError {
  override name = "S3SetupError";
  constructor(
    /** The setting to fix: an environment variable, a flag, "AWS credentials". */
    readonly setting: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** `location` as an object's (`s3://bucket/key`), or an `S3SetupError` naming `setting` when it is a bucket or a prefix. */
export function s3Object(location: string, setting: string): { bucket: string; key: string } {
  const { bucket, key } = parseS3(location);
  if (!key || key.endsWith("/"))
    throw new S3SetupError(
      setting,
      `${setting} ${location} is ${key ? "a prefix" : "a bucket"}, where an object goes: name the object, such as ${location.replace(/\/?$/, "/")}answers.jsonl`,
    );
  return { bucket, key };
}

let shared: { endpoint: string | undefined; client: S3Client } | undefined;

/**
 * The S3 client, configured from the environment (`AWS_ENDPOINT_URL_S3`,
 * else `AWS_ENDPOINT_URL`; api/env.ts refuses one without its scheme, exit 2
 * naming it); a new one when the endpoint changed.
 */
export function s3Client(): S3Client {
  const endpoint = env("AWS_ENDPOINT_URL_S3") ?? env("AWS_ENDPOINT_URL");
  if (shared && shared.endpoint === endpoint) return shared.client;
  const client = new S3Client({
    ...(endpoint ? { endpoint, forcePathStyle: true } : {}),
    region: env("AWS_REGION") ?? env("AWS_DEFAULT_REGION"),
    // One retry layer, `storageCall`'s: the SDK's own (3 attempts, then a retry quota) would end an outage in seconds.
    maxAttempts: 1,
    // A store that accepts the connection and then says nothing is a failed attempt, not a hang.
    requestHandler: { connectionTimeout: 5_000, requestTimeout: 30_000 },
  });
  shared = { endpoint, client };
  return client;
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
  // 501 Not Implemented: the store lacks the feature asked for, now and later.
  if (status !== undefined && ((status >= 500 && status !== 501) || status === 408 || status === 429)) return true;
  return TRANSIENT_NAMES.has((error as { name?: string }).name ?? "") || systemErrorKind(error) === "network";
}

/** What to fix when the store rejects the request's credentials, by the S3 error code that says so. */
const CREDENTIALS_FIX: Record<string, string> = {
  InvalidAccessKeyId:
    "the store does not know the access key in use: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) to credentials of this store",
  SignatureDoesNotMatch:
    "the store rejected the request's signature: AWS_SECRET_ACCESS_KEY (or the profile's secret) is not the secret of the access key in use (AWS_ACCESS_KEY_ID)",
  InvalidToken: "the store rejected the session token: set AWS_SESSION_TOKEN (or the profile) to a current one, or unset it for long-term keys",
  ExpiredToken: "the session token has expired: renew AWS_SESSION_TOKEN with its keys (or the profile's credentials)",
  TokenRefreshRequired: "the session token must be renewed: renew AWS_SESSION_TOKEN with its keys (or the profile's credentials)",
  RequestTimeTooSkewed: "this machine's clock is too far from the store's to sign requests: set it right (NTP)",
};

/**
 * The `StorageError` of a store that refused this client (401, 403), naming
 * what to fix: the credentials it rejects, or their permission for `location`.
 * Retrying will not help; `classify` makes it a setup mistake (exit 2), or a
 * permission lost mid-run (exit 9).
 */
function refusal(error: unknown, what: string, location: string): StorageError | undefined {
  const status = statusOf(error);
  const name = (error as { name?: string }).name ?? "";
  const credentials = CREDENTIALS_FIX[name];
  const said = `${what} ${location}: ${describeS3Error(error)}`;
  if (credentials !== undefined || status === 401) {
    const fix = credentials ?? "the store did not accept the credentials in use: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)";
    return new StorageError(`${said}: ${fix}`, location, { cause: error, refused: "credentials" });
  }
  if (status !== 403 && name !== "AccessDenied" && name !== "Forbidden") return undefined;
  // A HEAD's 403 carries no body, so no code: wrong credentials and a missing permission look alike.
  const coded = name !== "" && name !== "Forbidden" && name !== "Unknown" && !/^\d+$/.test(name);
  const fix = coded
    ? "the store denied the credentials in use (AWS_ACCESS_KEY_ID, or AWS_PROFILE) this access: grant it (the bucket's policy, the user's or role's), or use credentials that have it"
    : "the store refused access: check the credentials in use (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE) and their permission for it";
  return new StorageError(`${said}: ${fix}`, location, { cause: error, refused: "permission" });
}

/** The setup mistake an S3 error shows (no credentials, no such bucket), as the `S3SetupError` that names what to fix. */
function setupMistake(error: unknown, location: string): S3SetupError | undefined {
  const name = (error as { name?: string }).name;
  if (name === "CredentialsProviderError")
    return new S3SetupError(
      "AWS credentials",
      `no AWS credentials to reach ${location}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE (or run where an instance or pod role provides them)`,
      { cause: error },
    );
  if (name === "NoSuchBucket") return noSuchBucket(location, error);
  return undefined;
}

function noSuchBucket(location: string, cause?: unknown): S3SetupError {
  const { bucket } = parseS3(location);
  return new S3SetupError("bucket", `the bucket ${bucket} does not exist (${location}): create it, or correct its name`, { cause });
}

/**
 * Throws the `S3SetupError` of a missing bucket when `bucket` is not there.
 * (A HEAD of a key says only "not found", for a missing key and a missing
 * bucket alike.)
 */
export async function assertBucket(client: S3Client, bucket: string, location: string): Promise<void> {
  try {
    await storageCall("reading", location, (signal) => client.send(new HeadBucketCommand({ Bucket: bucket }), abortable(signal)));
  } catch (error) {
    if (isMissingKey(error) || statusOf(error) === 404) throw noSuchBucket(location, error);
    throw error;
  }
}

/**
 * An object's HEAD. A HEAD refused with 403 carries no body to say why, and
 * wrong credentials look like a missing permission; a one-byte GET of the
 * same object is then refused with its reason (InvalidAccessKeyId,
 * SignatureDoesNotMatch, AccessDenied), which is what is thrown.
 */
export async function headObject(client: S3Client, bucket: string, key: string): Promise<HeadObjectCommandOutput> {
  const location = `s3://${bucket}/${key}`;
  try {
    return await storageCall("reading", location, (signal) => client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }), abortable(signal)));
  } catch (error) {
    if (!(error instanceof StorageError) || error.refused === undefined) throw error;
    const got = await storageCall("reading", location, (signal) =>
      client.send(new GetObjectCommand({ Bucket: bucket, Key: key, Range: "bytes=0-0" }), abortable(signal)),
    ).catch((reason: unknown) => {
      throw reason instanceof StorageError && reason.refused !== undefined ? reason : error;
    });
    (got.Body as Readable | undefined)?.destroy();
    throw error;
  }
}

/** What an S3 error says, in a few words. */
export function describeS3Error(error: unknown): string {
  const status = statusOf(error);
  const e = error as { name?: string; code?: string; message?: string };
  const what = e.code ?? e.name ?? "error";
  return `${status ? `HTTP ${status} ` : ""}${what}${e.message && e.message !== what && !e.message.startsWith("UnknownError") ? `: ${e.message}` : ""}`;
}

/** Milliseconds on a clock nobody steps (NTP, a VM waking): retry windows and endings are timed on it, never on the wall clock. */
export function monotonicMs(): number {
  return performance.now();
}

/** How long an attempt begun after a run's ending budget ran out may take: one try, no retry. */
const LAST_ATTEMPT_MS = 5_000;

/**
 * How a run's storage retries end. A run's writes after its verdict (the
 * summaries, the journal's last shipment, the lock's release) and after a
 * stop share one small budget, the stop's grace, counted from the moment the
 * ending began: a store that stays down cannot hold a run that is over, nor
 * give each of those writes a fresh retry window. The ending begins at a stop
 * (SIGTERM), at `endStorageRetries()` (a verdict), or when a storage call has
 * failed for its whole window (the store is known to be down).
 */
class StorageEnding {
  private endsAt: number | undefined;
  private why: "stopped" | "ending" = "ending";
  private readonly ended = new AbortController();

  constructor(private readonly graceMs: number) {
    // Every attempt of the run listens to it: dozens at once (multipart parts, ranged reads) are expected, not a leak.
    setMaxListeners(0, this.ended.signal);
  }

  /** Starts the budget, once: every storage call ends within the grace from now. */
  begin(why: "stopped" | "ending"): void {
    if (this.endsAt !== undefined) return;
    this.why = why;
    this.endsAt = monotonicMs() + this.graceMs;
    if (this.graceMs <= 0) this.ended.abort();
    else setTimeout(() => this.ended.abort(), this.graceMs).unref();
  }

  /** Ends the budget at once (a second signal): what is still retried gives up now. */
  endNow(): void {
    if (this.endsAt === undefined) this.why = "stopped";
    this.endsAt = Math.min(this.endsAt ?? Number.POSITIVE_INFINITY, monotonicMs());
    this.ended.abort();
  }

  /** When retries must be over (monotonic ms); infinite until the ending begins. */
  get deadline(): number {
    return this.endsAt ?? Number.POSITIVE_INFINITY;
  }

  /** Fires when the budget is spent; cuts the backoffs and attempts under way. */
  get signal(): AbortSignal {
    return this.ended.signal;
  }

  /** The signal an attempt starting now is cut by: the budget's, or once it is spent, a short limit of its own. */
  attemptSignal(): AbortSignal {
    return this.ended.signal.aborted ? AbortSignal.timeout(LAST_ATTEMPT_MS) : this.ended.signal;
  }

  /** Why a call gave up at the end: said in its `StorageError`. */
  describe(): string {
    return this.why === "stopped" ? "the run was stopped while the store was failing" : "the run was ending and the store was still failing";
  }
}

const runEnding = new AsyncLocalStorage<StorageEnding>();

/**
 * Runs `work` with its storage retries ended by the run's `stop` (SIGTERM) and
 * its verdict: from then on every storage call started within it (timers
 * included) gives up within `graceMs` in all. Ambient rather than passed,
 * because every S3 call of the run (the input, the journal's shipments on
 * their timer, the lock, the uploads, the summaries) retries through
 * `storageCall`. A second signal (`now`) ends them at once.
 */
export function withStorageStop<T>(stop: AbortSignal | undefined, work: () => Promise<T>, graceMs = 0, now?: AbortSignal): Promise<T> {
  const ending = new StorageEnding(graceMs);
  if (stop?.aborted) ending.begin("stopped");
  else stop?.addEventListener("abort", () => ending.begin("stopped"), { once: true });
  if (now?.aborted) ending.endNow();
  else now?.addEventListener("abort", () => ending.endNow(), { once: true });
  return runEnding.run(ending, work);
}

/** The run reached its verdict: what it still writes to a failing store gets the grace in all, not a retry window each. */
export function endStorageRetries(): void {
  runEnding.getStore()?.begin("ending");
}

/** The SDK's send options for an attempt `signal` may cut short. */
export function abortable(signal: AbortSignal | undefined): { abortSignal?: AbortSignal } {
  return signal ? { abortSignal: signal } : {};
}

/** Resolves or rejects as `work` does, or rejects as a timeout once `signal` fires (an attempt the ending cut short). */
function within<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return work;
  return new Promise<T>((resolve, reject) => {
    const cut = () => reject(Object.assign(new Error("the attempt was cut short"), { name: "TimeoutError" }));
    if (signal.aborted) return cut();
    signal.addEventListener("abort", cut, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", cut));
  });
}

/**
 * One stretch of failures of one storage operation: its retry window, cut
 * short by the run's ending, and its backoff. `next` waits before the next
 * attempt or throws the `StorageError` that ends the stretch.
 */
class FailingStretch {
  private attempt = 0;
  private readonly windowEnds = monotonicMs() + retryWindowMs;
  private readonly ending = runEnding.getStore();

  constructor(
    private readonly what: string,
    private readonly location: string,
  ) {}

  /** The signal the next attempt is cut by, if the run has an ending. */
  attemptSignal(): AbortSignal | undefined {
    return this.ending?.attemptSignal();
  }

  async next(error: unknown): Promise<void> {
    const wait = backoffMs(this.attempt++, STORAGE_BACKOFF);
    const fail = (why: string) => new StorageError(`${this.what} ${this.location}: ${why} (${describeS3Error(error)})`, this.location, { cause: error });
    if (this.ending && (this.ending.signal.aborted || monotonicMs() + wait > this.ending.deadline)) throw fail(this.ending.describe());
    if (monotonicMs() + wait > this.windowEnds) {
      // The store is down: whatever the run still writes shares the grace from here.
      this.ending?.begin("ending");
      throw fail(`the store kept failing for ${Math.round(retryWindowMs / 1000)} s`);
    }
    try {
      await sleep(wait, this.ending?.signal);
    } catch {
      throw fail((this.ending as StorageEnding).describe());
    }
  }
}

/**
 * Every S3 call of a run goes through here: transient failures are retried
 * with jittered backoff for the storage retry window (120 s by default), then
 * end as a `StorageError` (the resumable storage verdict), as does a refusal
 * (401, 403: a `StorageError` saying what the store `refused`, credentials or
 * permission) and the end of the run's budget (`withStorageStop`). A setup
 * mistake (no credentials, no such bucket) is an `S3SetupError`. Other errors (a
 * missing key, a failed precondition) are the caller's. `op` gets the signal
 * that cuts its attempt when the run's ending budget runs out. `once`: one
 * attempt, no retry (a release that may as well fail).
 */
export async function storageCall<T>(
  what: string,
  location: string,
  op: (signal: AbortSignal | undefined) => Promise<T>,
  options: { once?: boolean } = {},
): Promise<T> {
  const stretch = new FailingStretch(what, location);
  for (;;) {
    const signal = stretch.attemptSignal();
    try {
      return await within(op(signal), signal);
    } catch (error) {
      if (error instanceof StorageError || error instanceof InvocationError) throw error;
      const setup = setupMistake(error, location);
      if (setup) throw setup;
      const refused = refusal(error, what, location);
      if (refused) throw refused;
      if (!isTransient(error) && !signal?.aborted) throw error;
      if (options.once) throw new StorageError(`${what} ${location}: ${describeS3Error(error)}`, location, { cause: error });
      await stretch.next(error);
    }
  }
}

/**
 * How a store takes an ETag in `If-Match`: quoted, as S3 sends ETags and as
 * RFC 7232 writes an entity tag (AWS S3, MinIO and s3rver's proxy also take
 * it bare), or bare (Ceph RGW 16 answers 412 to a quoted one on PUT, even
 * when it names the object's ETag). The S3 lock's probe finds which
 * (`rememberEtagForm`); every conditional request to that store then uses it.
 */
export type EtagForm = "quoted" | "bare";

const etagForms = new WeakMap<S3Client, EtagForm>();

/** Remembers the form `client`'s store takes an ETag in, for every later conditional request through it. */
export function rememberEtagForm(client: S3Client, form: EtagForm): void {
  etagForms.set(client, form);
}

/** The form `client`'s store takes an ETag in: as found by a probe, else quoted (S3's own form). */
export function etagFormOf(client: S3Client): EtagForm {
  return etagForms.get(client) ?? "quoted";
}

/** `etag` (as S3 returns it, quoted, or bare) in `form`, for an `If-Match` header. */
export function ifMatchValue(etag: string, form: EtagForm): string {
  const bare = etag.replace(/^W\//, "").replace(/^"|"$/g, "");
  return form === "quoted" ? `"${bare}"` : bare;
}

/** Whether an S3 error says the key (or object) is not there. */
export function isMissingKey(error: unknown): boolean {
  const name = (error as { name?: string }).name;
  return name === "NotFound" || name === "NoSuchKey";
}

/** An object as a reader first saw it: what every later read of it must match. */
export interface ObjectVersion {
  etag?: string | undefined;
  /** Set in a versioned bucket: reads name this version, and an overwrite meanwhile does not touch them. */
  versionId?: string | undefined;
  size: number;
}

/** An object under a prefix, as the listing saw it. */
export interface ListedObject extends ObjectVersion {
  key: string;
}

/** Every object under a prefix, in key order, with the marker objects apart (all pages of the listing). */
export async function keysUnder(client: S3Client, bucket: string, prefix: string): Promise<{ keys: ListedObject[]; markers: string[] }> {
  const keys: ListedObject[] = [];
  const markers: string[] = [];
  let token: string | undefined;
  do {
    const page = await storageCall("listing", `s3://${bucket}/${prefix}`, (signal) =>
      client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }), abortable(signal)),
    );
    for (const o of page.Contents ?? []) {
      if (!o.Key || o.Key.endsWith("/")) continue;
      if (isMarker(o.Key.slice(prefix.length))) markers.push(o.Key);
      else keys.push({ key: o.Key, size: o.Size ?? 0, etag: o.ETag });
    }
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return { keys: keys.sort((a, b) => (a.key < b.key ? -1 : 1)), markers };
}

function changed(location: string, why: string, cause?: unknown): InputChangedError {
  return new InputChangedError(`${location} changed while it was read (${why})`, location, { cause });
}

/** What a GET answered about the object, checked against the version first seen: throws `InputChangedError` on any difference. */
function assertVersion(
  location: string,
  pinned: ObjectVersion,
  got: Pick<GetObjectCommandOutput, "ETag" | "VersionId" | "ContentRange" | "ContentLength">,
): void {
  if (pinned.versionId !== undefined && got.VersionId !== undefined && got.VersionId !== pinned.versionId)
    throw changed(location, `version ${pinned.versionId} became ${got.VersionId}`);
  if (pinned.etag !== undefined && got.ETag !== undefined && got.ETag !== pinned.etag) throw changed(location, `its ETag was ${pinned.etag}, now ${got.ETag}`);
  const total = got.ContentRange ? Number(/\/(\d+)$/.exec(got.ContentRange)?.[1]) : got.ContentLength;
  if (total !== undefined && Number.isFinite(total) && total !== pinned.size) throw changed(location, `it was ${pinned.size} bytes, now ${total}`);
}

/**
 * A GET of exactly the version first seen, `from` a byte on (to `to`, inclusive):
 * by its VersionId in a versioned bucket, else with `If-Match` on its ETag, and
 * every answer's ETag, version and size compared with it (a store may ignore
 * the condition). An object replaced meanwhile throws `InputChangedError`.
 */
export async function getPinned(
  client: S3Client,
  location: string,
  pinned: ObjectVersion,
  range: { from: number; to?: number | undefined },
  signal: AbortSignal | undefined,
): Promise<GetObjectCommandOutput> {
  const { bucket, key } = parseS3(location);
  const which =
    pinned.versionId !== undefined
      ? { VersionId: pinned.versionId }
      : pinned.etag !== undefined
        ? { IfMatch: ifMatchValue(pinned.etag, etagFormOf(client)) }
        : {};
  const bytes = range.from > 0 || range.to !== undefined ? { Range: `bytes=${range.from}-${range.to ?? ""}` } : {};
  let got: GetObjectCommandOutput;
  try {
    got = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key, ...which, ...bytes }), abortable(signal));
  } catch (error) {
    if (statusOf(error) === 412) throw changed(location, `it is no longer the version of ETag ${pinned.etag} first read`, error);
    if (pinned.versionId !== undefined && (error as { name?: string }).name === "NoSuchVersion")
      throw changed(location, `version ${pinned.versionId} is gone`, error);
    if (isMissingKey(error)) throw changed(location, "it was deleted", error);
    throw error;
  }
  try {
    assertVersion(location, pinned, got);
  } catch (error) {
    (got.Body as Readable | undefined)?.destroy();
    throw error;
  }
  return got;
}

/**
 * An object's bytes as they arrive, all of one version (`pinned`, as its HEAD
 * or listing showed it). A transient failure mid-body (a reset, a stalled
 * socket) resumes by a ranged GET of that version where it was cut, within
 * the storage retry window, so a long input survives a store that drops
 * connections; an object replaced meanwhile ends the read with
 * `InputChangedError` rather than splicing two versions.
 */
export async function* objectBytes(client: S3Client, bucket: string, key: string, pinned: ObjectVersion): AsyncGenerator<Buffer> {
  const location = `s3://${bucket}/${key}`;
  let offset = 0;
  let failing: FailingStretch | undefined;
  while (offset < pinned.size) {
    const from = offset;
    const got = await storageCall("reading", location, (signal) => getPinned(client, location, pinned, { from }, signal));
    const body = got.Body as Readable;
    try {
      for await (const chunk of body as AsyncIterable<Buffer>) {
        offset += chunk.length;
        failing = undefined;
        yield chunk;
      }
      if (offset >= pinned.size) return;
      throw Object.assign(new Error(`the body ended at byte ${offset} of ${pinned.size}`), { code: "ECONNRESET" });
    } catch (error) {
      if (!isTransient(error)) throw error;
      failing ??= new FailingStretch("reading", location);
      await failing.next(error);
    } finally {
      body.destroy();
    }
  }
}
