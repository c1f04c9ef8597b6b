/**
 * A journal that survives the worker: the run journals to a local file as
 * always (a synchronous append per record), and a mirror ships what was
 * appended to S3 every `flushMs` as an immutable segment object
 * (`<prefix>/segments/<run>-<n>.jsonl`, whole lines only). A run on any
 * machine pulls the segments, in key order, into its local file before it
 * starts, so a retry on another worker or a replaced pod resumes.
 *
 * The bound: a worker lost without warning (kill -9, a dead node) repays at
 * most the records it finished in its last `flushMs` (5 s by default) plus
 * those in flight, when the rerun is on another machine. The local file is
 * the journal until S3 confirms each segment (with the storage retries), and
 * a rerun on the same machine resumes from whichever is further ahead, so a
 * store that fails mid-run loses nothing there. A stop by signal, and every
 * run's end, flushes first.
 *
 * One run per journal across machines: `<prefix>/lock.json` names the holder
 * (host, pid, start) and carries a heartbeat rewritten every `heartbeatMs`.
 * A lock whose heartbeat is older than `staleMs` is taken over. Writing it
 * asks S3 for `If-None-Match: *` when no lock exists, and every writer reads
 * the lock back before it proceeds, so two runs started together cannot both
 * hold it.
 */
import { createHash, randomUUID } from "node:crypto";
import {
  appendFileSync,
  closeSync,
  createReadStream,
  existsSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createInterface } from "node:readline";
import { hostname } from "node:os";
import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { deadHere, LockedError, type Lock, type LockHolder } from "./lock.js";
import { describeS3Error, isMissingKey, keysUnder, parseS3, s3Client, storageCall } from "../../records/s3.js";
import { LockLostError, StorageError } from "../../api/verdict.js";
import { env } from "../../api/env.js";

export interface S3JournalOptions {
  flushMs?: number;
  heartbeatMs?: number;
  staleMs?: number;
  client?: S3Client;
}

/** How often a run ships its journal to S3 by default: what losing a worker repays at most. */
export const S3_FLUSH_MS = 5000;

export class S3Journal {
  private readonly bucket: string;
  private readonly prefix: string;
  private readonly client: S3Client;
  private readonly flushMs: number;
  /** Bytes of the local file already in S3. */
  private shipped = 0;
  private segment = 0;
  private readonly run = `${new Date().toISOString().replace(/[-:.]/g, "")}-${hostname()}-${process.pid}`;
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  /** Flush failures, for the log (a later flush retries them). */
  onError: ((error: unknown) => void) | undefined;
  /** The last flush's failure past the storage retries, until a flush succeeds. */
  private failed: StorageError | undefined;

  constructor(
    readonly location: string,
    readonly localPath: string,
    options: S3JournalOptions = {},
  ) {
    const { bucket, key } = parseS3(location);
    this.bucket = bucket;
    this.prefix = key.endsWith("/") ? key : `${key}/`;
    this.client = options.client ?? s3Client();
    this.flushMs = options.flushMs ?? S3_FLUSH_MS;
  }

  /**
   * Makes the local file the journal: the segments in S3, in order, and
   * whatever the local copy holds beyond them. The local copy is never
   * replaced by a journal that is behind it: a run that crashed while S3 was
   * down kept its finished records only there. When the local copy starts
   * with the segments it is simply further ahead; when the segments start
   * with it, they are; otherwise (another machine went on from an older
   * point) the segments are taken and the local lines they lack appended.
   * What is not in S3 yet is shipped by the next flush.
   */
  async pull(): Promise<{ segments: number; localAhead: number }> {
    const keys = (await keysUnder(this.client, this.bucket, `${this.prefix}segments/`)).keys.map((o) => o.key);
    if (keys.length === 0) {
      this.shipped = 0;
      return { segments: 0, localAhead: existsSync(this.localPath) ? statSync(this.localPath).size : 0 };
    }
    const pulled = `${this.localPath}.pulled`;
    writeFileSync(pulled, "");
    for (const key of keys) {
      const text = await storageCall("reading the journal", `s3://${this.bucket}/${key}`, async () => {
        const got = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
        return (await got.Body?.transformToString("utf8")) ?? "";
      });
      appendFileSync(pulled, text);
    }
    const remote = statSync(pulled).size;
    const local = existsSync(this.localPath) ? statSync(this.localPath).size : 0;
    if (local >= remote && startsWith(this.localPath, pulled)) {
      rmSync(pulled);
    } else if (startsWith(pulled, this.localPath)) {
      renameSync(pulled, this.localPath);
    } else {
      await appendMissingLines(this.localPath, pulled);
      renameSync(pulled, this.localPath);
    }
    this.shipped = remote;
    return { segments: keys.length, localAhead: statSync(this.localPath).size - remote };
  }

  start(): void {
    this.timer = setInterval(() => void this.flush().catch((error: unknown) => this.onError?.(error)), this.flushMs);
    this.timer.unref();
  }

  /** Ships what was appended since the last flush (whole lines) as one new segment. */
  flush(): Promise<void> {
    this.flushing = this.flushing
      .catch(() => undefined)
      .then(() => this.ship())
      .then(
        () => void (this.failed = undefined),
        (error: unknown) => {
          if (error instanceof StorageError) this.failed = error;
          throw error;
        },
      );
    return this.flushing;
  }

  /**
   * Throws the `StorageError` of a shipment that failed past the storage
   * retries (until one succeeds): the run stops paying for records S3 cannot
   * keep. Synchronous; the sender calls it with the lock's `assertHeld`.
   */
  assertShipping(): void {
    if (this.failed) throw this.failed;
  }

  private async ship(): Promise<void> {
    if (!existsSync(this.localPath)) return;
    const size = statSync(this.localPath).size;
    if (size <= this.shipped) return;
    const fd = openSync(this.localPath, "r");
    let bytes: Buffer;
    try {
      bytes = Buffer.alloc(size - this.shipped);
      readSync(fd, bytes, 0, bytes.length, this.shipped);
    } finally {
      closeSync(fd);
    }
    const end = bytes.lastIndexOf(0x0a) + 1;
    if (end === 0) return;
    const key = `${this.prefix}segments/${this.run}-${String(this.segment).padStart(6, "0")}.jsonl`;
    const body = bytes.subarray(0, end);
    // Until this returns the lines are only in the local file, which is kept: a rerun here resumes from it.
    await storageCall("shipping the journal to", `s3://${this.bucket}/${key}`, () =>
      this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body })),
    );
    this.segment++;
    this.shipped += end;
  }

  /** Stops the timer and ships the rest. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush();
  }
}

/** Whether the file at `path` starts with every byte of the file at `prefix`. */
function startsWith(path: string, prefix: string): boolean {
  const size = existsSync(prefix) ? statSync(prefix).size : 0;
  if (size === 0) return true;
  if (!existsSync(path)) return false;
  if (statSync(path).size < size) return false;
  const a = openSync(path, "r");
  const b = openSync(prefix, "r");
  try {
    const x = Buffer.alloc(1 << 16);
    const y = Buffer.alloc(1 << 16);
    for (let at = 0; at < size; at += x.length) {
      const n = readSync(b, y, 0, Math.min(y.length, size - at), at);
      if (readSync(a, x, 0, n, at) !== n || !x.subarray(0, n).equals(y.subarray(0, n))) return false;
    }
    return true;
  } finally {
    closeSync(a);
    closeSync(b);
  }
}

/** Appends to `into` the whole lines of `from` that it lacks (compared by a 128-bit hash, so memory stays small). */
async function appendMissingLines(from: string, into: string): Promise<void> {
  if (!existsSync(from)) return;
  const digest = (line: string) => createHash("sha256").update(line).digest("base64").slice(0, 22);
  const have = new Set<string>();
  for await (const line of createInterface({ input: createReadStream(into), crlfDelay: Infinity })) if (line) have.add(digest(line));
  const missing: string[] = [];
  const text = readFileSync(from, "utf8");
  const whole = text.slice(0, text.lastIndexOf("\n") + 1);
  for (const line of whole.split("\n")) if (line && !have.has(digest(line))) missing.push(`${line}\n`);
  // Segments hold whole lines only, so `into` ends with a newline.
  if (missing.length > 0) appendFileSync(into, missing.join(""));
}

interface S3Holder extends LockHolder {
  nonce: string;
  heartbeat: string;
}

function httpStatus(error: unknown): number | undefined {
  return (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
}

/**
 * Takes `<prefix>/lock.json`, or throws `LockedError` naming a live holder and
 * when its lock expires. The returned lock fences: see `Lock.assertHeld`.
 *
 * A lock from this host whose process is dead is taken over at once; one from
 * another host once its heartbeat is older than the expiry
 * (`$TYPED_EVAL_S3_LOCK_STALE_MS`, default 60 s; renewed four times as often).
 *
 * Writes are conditional where the store supports it: `If-None-Match: *` to
 * create, `If-Match: <etag>` to take over, renew and release, so a stale
 * writer's write fails with 412. Every write is also read back and its nonce
 * compared, which is all that holds on stores that ignore the conditions
 * (s3rver, the test server, does): there a run that stalls between its
 * renewal's read and its write can overwrite a lock just taken over, and both
 * runs send until the next heartbeat shows one of them the other's nonce.
 *
 * The lease: a run counts its lock as held until `expiry * 0.9` after the
 * start of its last successful renewal, and never renews a lapsed one. A run
 * paused past that (SIGSTOP, a frozen VM) stops at its next `assertHeld`,
 * whether or not another run took over meanwhile, before sending anything more.
 */
export async function acquireS3Lock(location: string, options: S3JournalOptions = {}): Promise<Lock> {
  const { bucket, key: base } = parseS3(location);
  const key = `${base.endsWith("/") ? base : `${base}/`}lock.json`;
  const client = options.client ?? s3Client();
  const staleMs = options.staleMs ?? env("TYPED_EVAL_S3_LOCK_STALE_MS");
  const heartbeatMs = options.heartbeatMs ?? Math.min(15_000, staleMs / 4);
  const leaseMs = staleMs * 0.9;
  const path = `s3://${bucket}/${key}`;
  const readOnce = async (): Promise<{ holder?: S3Holder | undefined; etag?: string | undefined }> => {
    try {
      const got = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      const text = (await got.Body?.transformToString("utf8")) ?? "";
      try {
        return { holder: JSON.parse(text) as S3Holder, etag: got.ETag };
      } catch {
        return { etag: got.ETag };
      }
    } catch (error) {
      if (isMissingKey(error)) return {};
      throw error;
    }
  };
  const read = () => storageCall("reading the lock", path, readOnce);
  const me: S3Holder = { host: hostname(), pid: process.pid, started: new Date().toISOString(), nonce: randomUUID(), heartbeat: new Date().toISOString() };
  const writeOnce = async (condition: { IfNoneMatch: string } | { IfMatch: string } | Record<string, never>): Promise<string | undefined> => {
    const put = await client.send(
      new PutObjectCommand({ Bucket: bucket, Key: key, Body: JSON.stringify({ ...me, heartbeat: new Date().toISOString() }), ...condition }),
    );
    return put.ETag;
  };
  const condition = (etag: string | undefined) => (etag ? { IfMatch: etag } : {});

  const found = await read();
  if (found.holder) {
    const expires = Date.parse(found.holder.heartbeat) + staleMs;
    if (!deadHere(found.holder, me) && Date.now() <= expires) throw new LockedError(path, found.holder, new Date(expires));
  }
  let renewedAt = Date.now();
  let etag: string | undefined;
  try {
    etag = await storageCall("writing the lock", path, () => writeOnce(found.holder || found.etag ? condition(found.etag) : { IfNoneMatch: "*" }));
  } catch (error) {
    // 412: another run wrote the lock between our read and our write.
    if (httpStatus(error) === 412) throw new LockedError(path, (await read()).holder);
    throw error;
  }
  // Stores without conditional writes: the last writer wins; whoever reads back another's nonce yields.
  await new Promise((resolve) => setTimeout(resolve, 300));
  const back = await read();
  if (back.holder?.nonce !== me.nonce)
    throw new LockedError(path, back.holder, back.holder ? new Date(Date.parse(back.holder.heartbeat) + staleMs) : undefined);
  etag = back.etag ?? etag;

  let lost: "taken" | "lapsed" | undefined;
  /** The last renewal failure, while renewals fail: a lease that lapses meanwhile lapsed for the store's sake. */
  let trouble: unknown;
  let renewing = false;
  const renew = async () => {
    if (lost || renewing) return;
    // A lapsed lease is never renewed: another run may hold the lock by now.
    if (Date.now() - renewedAt > leaseMs) return void (lost = "lapsed");
    renewing = true;
    const started = Date.now();
    try {
      const now = await readOnce();
      if (now.holder?.nonce !== me.nonce) return void (lost = "taken");
      if (Date.now() - renewedAt > leaseMs) return void (lost = "lapsed");
      etag = (await writeOnce(condition(now.etag))) ?? etag;
      renewedAt = started;
      trouble = undefined;
    } catch (error) {
      if (httpStatus(error) === 412) lost = "taken";
      else trouble = error;
    } finally {
      renewing = false;
    }
  };
  const beat = setInterval(() => void renew(), heartbeatMs);
  beat.unref();
  const lock: Lock = {
    path,
    get lost() {
      return lost !== undefined || Date.now() - renewedAt > leaseMs;
    },
    assertHeld() {
      if (!lost && Date.now() - renewedAt > leaseMs) lost = "lapsed";
      if (lost === undefined) return;
      clearInterval(beat);
      if (lost === "lapsed" && trouble !== undefined) {
        throw new StorageError(`could not renew the lock ${path} before it expired (${describeS3Error(trouble)})`, path, { cause: trouble });
      }
      throw new LockLostError(
        lost === "taken"
          ? `another run took the lock ${path} over while this one was stalled`
          : `this run was stalled past its lock's expiry (${path}, last renewed ${new Date(renewedAt).toISOString()}); another run may have taken the journal over`,
      );
    },
    release: async () => {
      clearInterval(beat);
      if (lost) return;
      try {
        const now = await readOnce();
        if (now.holder?.nonce === me.nonce) await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key, ...condition(now.etag) }));
      } catch {
        // The lock expires by itself; a rerun on this host takes it over at once.
      }
    },
  };
  return lock;
}
