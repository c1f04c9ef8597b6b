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
 * those in flight. A stop by signal, and every run's end, flushes first.
 *
 * One run per journal across machines: `<prefix>/lock.json` names the holder
 * (host, pid, start) and carries a heartbeat rewritten every `heartbeatMs`.
 * A lock whose heartbeat is older than `staleMs` is taken over. Writing it
 * asks S3 for `If-None-Match: *` when no lock exists, and every writer reads
 * the lock back before it proceeds, so two runs started together cannot both
 * hold it.
 */
import { randomUUID } from "node:crypto";
import { closeSync, existsSync, openSync, readSync, statSync, writeFileSync, appendFileSync } from "node:fs";
import { hostname } from "node:os";
import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { LockedError, type Lock, type LockHolder } from "./lock.js";
import { isMissingKey, keysUnder, parseS3, s3Client } from "../s3.js";

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
   * Makes the local file the journal in S3: its segments in order. With no
   * segments yet, a local journal is kept and shipped whole by the first flush
   * (a journal started before it moved to S3).
   */
  async pull(): Promise<{ segments: number }> {
    const keys = (await keysUnder(this.client, this.bucket, `${this.prefix}segments/`)).keys.map((o) => o.key);
    if (keys.length === 0) {
      this.shipped = 0;
      return { segments: 0 };
    }
    writeFileSync(this.localPath, "");
    for (const key of keys) {
      const got = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      appendFileSync(this.localPath, (await got.Body?.transformToString("utf8")) ?? "");
    }
    this.shipped = statSync(this.localPath).size;
    return { segments: keys.length };
  }

  start(): void {
    this.timer = setInterval(() => void this.flush().catch((error: unknown) => this.onError?.(error)), this.flushMs);
    this.timer.unref();
  }

  /** Ships what was appended since the last flush (whole lines) as one new segment. */
  flush(): Promise<void> {
    this.flushing = this.flushing.catch(() => undefined).then(() => this.ship());
    return this.flushing;
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
    await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: bytes.subarray(0, end) }));
    this.segment++;
    this.shipped += end;
  }

  /** Stops the timer and ships the rest. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush();
  }
}

interface S3Holder extends LockHolder {
  nonce: string;
  heartbeat: string;
}

/** Takes `<prefix>/lock.json`, or throws `LockedError` naming a live holder. */
export async function acquireS3Lock(location: string, options: S3JournalOptions = {}): Promise<Lock> {
  const { bucket, key: base } = parseS3(location);
  const key = `${base.endsWith("/") ? base : `${base}/`}lock.json`;
  const client = options.client ?? s3Client();
  // A lock unrefreshed this long is a dead run's ($TYPED_EVAL_S3_LOCK_STALE_MS, default 60 s); it is refreshed four times as often.
  const staleMs = options.staleMs ?? (Number(process.env["TYPED_EVAL_S3_LOCK_STALE_MS"]) || 60_000);
  const heartbeatMs = options.heartbeatMs ?? Math.min(15_000, staleMs / 4);
  const path = `s3://${bucket}/${key}`;
  const read = async (): Promise<S3Holder | undefined> => {
    try {
      const got = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      return JSON.parse((await got.Body?.transformToString("utf8")) ?? "") as S3Holder;
    } catch (error) {
      if (isMissingKey(error)) return undefined;
      if (error instanceof SyntaxError) return undefined;
      throw error;
    }
  };
  const me: S3Holder = { host: hostname(), pid: process.pid, started: new Date().toISOString(), nonce: randomUUID(), heartbeat: new Date().toISOString() };
  const write = (fresh: boolean) =>
    client.send(
      new PutObjectCommand({
        Bucket: bucket,
        Key: key,
        Body: JSON.stringify({ ...me, heartbeat: new Date().toISOString() }),
        ...(fresh ? { IfNoneMatch: "*" } : {}),
      }),
    );
  const holder = await read();
  if (holder && Date.now() - Date.parse(holder.heartbeat) <= staleMs) throw new LockedError(path, holder);
  try {
    await write(holder === undefined);
  } catch (error) {
    // 412: another run wrote the lock between our read and our write.
    if ((error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 412) throw new LockedError(path, await read());
    throw error;
  }
  // Servers without conditional writes: the last writer wins; whoever reads back another's nonce yields.
  await new Promise((resolve) => setTimeout(resolve, 300));
  const back = await read();
  if (back?.nonce !== me.nonce) throw new LockedError(path, back);
  const beat = setInterval(() => void write(false).catch(() => undefined), heartbeatMs);
  beat.unref();
  return {
    path,
    release: async () => {
      clearInterval(beat);
      const now = await read().catch(() => undefined);
      if (now?.nonce === me.nonce) await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key })).catch(() => undefined);
    },
  };
}
