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
 * run's end, flushes first; once S3 holds every line of the local copy, the
 * copy is removed (they would pile up in `.typed-eval/`, night after night).
 *
 * One run per journal across machines: the lock is `s3-lock.ts`.
 */
import { createHash } from "node:crypto";
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
import { GetObjectCommand, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { abortable, keysUnder, parseS3, s3Client, storageCall } from "../../records/s3.js";
import { StorageError } from "../../api/verdict.js";

export interface S3JournalOptions {
  flushMs?: number;
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
      const text = await storageCall("reading the journal", `s3://${this.bucket}/${key}`, async (signal) => {
        const got = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }), abortable(signal));
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
    await storageCall("shipping the journal to", `s3://${this.bucket}/${key}`, (signal) =>
      this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body }), abortable(signal)),
    );
    this.segment++;
    this.shipped += end;
  }

  /**
   * Stops the timer and ships the rest; then, when S3 holds every byte of the
   * local copy, removes the copy (a rerun pulls the segments). A copy S3 does
   * not hold all of (a shipment failed, a torn last line) is kept.
   */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush();
    if (existsSync(this.localPath) && statSync(this.localPath).size === this.shipped) rmSync(this.localPath, { force: true });
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
