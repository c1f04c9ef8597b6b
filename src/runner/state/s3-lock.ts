/**
 * One run per S3 journal, across machines: `<prefix>/lock.json` names the
 * holder (host, pid, start, a nonce) and carries a heartbeat the holder
 * rewrites every `heartbeatMs`.
 *
 * No two hosts' clocks are ever compared. A lock held by another run is stale
 * when its heartbeat has not changed for the stale period
 * (`$TYPED_EVAL_S3_LOCK_STALE_MS`, default 60 s), timed on this run's
 * monotonic clock while it watches the lock; a live holder shows a new
 * heartbeat within its renewal interval, and this run is refused (exit 7).
 * A lock from this host whose process is dead is taken over at once. This
 * run's own lease is timed on its monotonic clock too: it counts its lock as
 * held until `stale * 0.9` after the start of its last successful renewal
 * and never renews a lapsed one, so a run paused past that (SIGSTOP, a frozen
 * VM) stops at its next `assertHeld`, before sending anything more. A wall
 * clock stepped by NTP, either way, changes none of this.
 *
 * Every write is conditional: `If-None-Match: *` to create the lock,
 * `If-Match: <etag>` to take it over, renew and release it, so of two runs
 * that try at once exactly one succeeds (the other gets 412). A probe when
 * the lock is taken finds a store that ignores the conditions; such a store
 * is refused (exit 2) unless the run is told `--unsafe-s3-lock`, and then
 * every write is read back and its nonce compared, which does not exclude
 * two runs started within moments of each other both sending until the next
 * heartbeat shows one of them the other's nonce.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { env } from "../../api/env.js";
import { InvocationError } from "../../api/errors.js";
import { sleep } from "../../api/retry.js";
import { LockLostError, StorageError } from "../../api/verdict.js";
import { abortable, describeS3Error, isMissingKey, parseS3, s3Client, storageCall } from "../../records/s3.js";
import { deadHere, LockedError, type Lock, type LockHolder } from "./lock.js";

/** The clocks a lock reads; tests put stepped or frozen ones in their place. */
export interface LockClock {
  /** Milliseconds on a monotonic clock: every lease and stale period is timed on it. */
  monotonic(): number;
  /** Wall-clock milliseconds: only for the times people read in the lock object. */
  wall(): number;
}

const SYSTEM_CLOCK: LockClock = { monotonic: () => performance.now(), wall: () => Date.now() };

export interface S3LockOptions {
  /** How long another run's heartbeat must stand still before its lock is taken over. */
  staleMs?: number;
  /** How often the holder rewrites its heartbeat (default: a quarter of `staleMs`, at most 15 s). */
  heartbeatMs?: number;
  client?: S3Client;
  /** Take the lock on a store that ignores conditional writes (`--unsafe-s3-lock`). */
  unsafe?: boolean | undefined;
  clock?: LockClock;
  /** Who this run is (default: this host and process); tests start several runs in one process. */
  as?: { host: string; pid: number };
  /** Told what the lock waits for, and the risk an unsafe lock runs. */
  onNote?: (message: string) => void;
}

/** How long a release waits for a renewal under way before it reads the lock. */
const RELEASE_WAIT_MS = 5_000;

/** How long the store is given to settle before an unsafe lock's write is read back. */
const READ_BACK_MS = 300;

/** The store ignores conditional writes, and the run was not told to take its lock anyway: exit 2, naming the flag. */
export class UnsafeS3LockError extends InvocationError {
  override name = "UnsafeS3LockError";
  constructor(path: string) {
    super(
      `the store behind ${path} ignores conditional writes (If-None-Match, If-Match), so two runs started together could both take this lock and both pay for the same records: use a store that honours them (AWS S3, MinIO), or pass --unsafe-s3-lock to run at that risk`,
    );
  }
}

interface S3Holder extends LockHolder {
  nonce: string;
  /** Wall-clock time of the last renewal, for people; no run compares it with its own clock. */
  heartbeat: string;
  /** Renewals so far: a heartbeat always changes the object, whatever the wall clock does. */
  beat: number;
  /** The holder's stale period: a watcher waits at least this long. */
  staleMs: number;
}

/** A read of the lock object: nothing (no lock), or its text, its holder when it parses, and its ETag. */
interface Seen {
  text?: string;
  holder?: S3Holder;
  etag?: string;
}

type Condition = { IfNoneMatch: "*" } | { IfMatch: string } | Record<string, never>;

function httpStatus(error: unknown): number | undefined {
  return (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
}

/** Whether a conditional request failed its condition (412; 409 when the store saw a concurrent conditional write). */
function conflicted(error: unknown): boolean {
  const status = httpStatus(error);
  return status === 412 || status === 409;
}

/** The lock object: reads, conditional writes and removal, each one attempt unless retried by `storageCall`. */
class LockObject {
  readonly path: string;

  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
    readonly key: string,
  ) {
    this.path = `s3://${bucket}/${key}`;
  }

  async readOnce(signal?: AbortSignal): Promise<Seen> {
    try {
      const got = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.key }), abortable(signal));
      const text = (await got.Body?.transformToString("utf8")) ?? "";
      const seen: Seen = { text, ...(got.ETag ? { etag: got.ETag } : {}) };
      try {
        return { ...seen, holder: JSON.parse(text) as S3Holder };
      } catch {
        return seen;
      }
    } catch (error) {
      if (isMissingKey(error)) return {};
      throw error;
    }
  }

  /** Reads with the storage retries. */
  read(): Promise<Seen> {
    return storageCall("reading the lock", this.path, (signal) => this.readOnce(signal));
  }

  async write(body: string, condition: Condition, key = this.key, signal?: AbortSignal): Promise<string | undefined> {
    const put = await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ...condition }), abortable(signal));
    return put.ETag;
  }

  async remove(condition: Condition, key = this.key): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key, ...condition }));
  }
}

/** How long the lock's periods are: its stale period, its renewal interval, and this run's lease. */
interface Timing {
  staleMs: number;
  heartbeatMs: number;
  leaseMs: number;
}

function timingOf(options: S3LockOptions): Timing {
  const staleMs = options.staleMs ?? env("TYPED_EVAL_S3_LOCK_STALE_MS");
  return { staleMs, heartbeatMs: options.heartbeatMs ?? Math.min(15_000, staleMs / 4), leaseMs: staleMs * 0.9 };
}

/**
 * Whether the store honours conditional writes: a probe object is created
 * with `If-None-Match: *`, then written again with `If-None-Match: *` and
 * with `If-Match` on an ETag it does not have; both must fail (412).
 */
async function honoursConditions(store: LockObject): Promise<boolean> {
  const probe = `${store.key}.probe-${randomUUID()}`;
  const refuses = async (condition: Condition): Promise<boolean> => {
    try {
      await storageCall("probing conditional writes at", store.path, (signal) => store.write("probe", condition, probe, signal));
      return false;
    } catch (error) {
      if (conflicted(error)) return true;
      // 501 Not Implemented, 400: a store that does not know the header.
      if (httpStatus(error) === 501 || httpStatus(error) === 400) return false;
      throw error;
    }
  };
  if (await refuses({ IfNoneMatch: "*" })) return false;
  try {
    return (await refuses({ IfNoneMatch: "*" })) && (await refuses({ IfMatch: '"00000000000000000000000000000000"' }));
  } finally {
    await store.remove({}, probe).catch(() => undefined);
  }
}

/**
 * Watches a lock held by another run, on this run's monotonic clock: "live"
 * once its heartbeat changes, "gone" once it is removed, "stale" when it has
 * stood still for `staleMs`.
 */
async function watch(store: LockObject, seen: Seen, staleMs: number, clock: LockClock): Promise<"live" | "gone" | "stale"> {
  const since = clock.monotonic();
  const poll = Math.min(2_000, Math.max(50, staleMs / 20));
  for (;;) {
    const left = staleMs - (clock.monotonic() - since);
    if (left <= 0) return "stale";
    await sleep(Math.min(poll, left));
    const now = await store.read();
    if (now.text === undefined) return "gone";
    if (now.text !== seen.text || now.etag !== seen.etag) return "live";
  }
}

/** The holder record this run writes, its heartbeat and beat advanced. */
function heartbeatOf(me: S3Holder, clock: LockClock): string {
  me.beat++;
  me.heartbeat = new Date(clock.wall()).toISOString();
  return JSON.stringify(me);
}

/** A write of the lock that took: its ETag, and when (monotonic) the write began, which starts the lease. */
interface Claimed {
  etag: string | undefined;
  at: number;
}

/**
 * Writes this run into the lock under `condition`. A 412 means another run
 * got there first (`LockedError`, naming it), or that an earlier attempt of
 * this very write landed though its answer was lost: then the lock is ours.
 */
async function claimWith(store: LockObject, me: S3Holder, condition: Condition, timing: Timing, clock: LockClock): Promise<Claimed> {
  const first = clock.monotonic();
  try {
    return await storageCall("writing the lock", store.path, async (signal) => {
      const at = clock.monotonic();
      return { etag: await store.write(heartbeatOf(me, clock), condition, store.key, signal), at };
    });
  } catch (error) {
    if (!conflicted(error)) throw error;
    const now = await store.read();
    if (now.holder?.nonce === me.nonce) return { etag: now.etag, at: first };
    throw new LockedError(store.path, now.holder, timing.staleMs);
  }
}

/**
 * Takes the lock: creates it when there is none, takes it over when its
 * holder is provably dead (this host) or its heartbeat stood still for the
 * stale period, and throws `LockedError` when the holder shows a heartbeat.
 * Returns this run's write.
 */
async function claim(store: LockObject, me: S3Holder, timing: Timing, clock: LockClock, onNote: (message: string) => void): Promise<Claimed> {
  for (;;) {
    const seen = await store.read();
    if (seen.text === undefined) return claimWith(store, me, { IfNoneMatch: "*" }, timing, clock);
    const holder = seen.holder;
    const ifMatch: Condition = seen.etag ? { IfMatch: seen.etag } : {};
    if (holder && deadHere(holder, me)) return claimWith(store, me, ifMatch, timing, clock);
    const staleMs = Math.max(timing.staleMs, Number(holder?.staleMs) || 0);
    onNote(
      `${store.path} is held${holder ? ` by pid ${holder.pid} on ${holder.host}` : ""}: watching its heartbeat for up to ${Math.round(staleMs / 1000)} s before taking it over`,
    );
    const seenNow = await watch(store, seen, staleMs, clock);
    if (seenNow === "live") throw new LockedError(store.path, (await store.read()).holder ?? holder, staleMs);
    if (seenNow === "stale") return claimWith(store, me, ifMatch, timing, clock);
  }
}

/** On a store without conditional writes: the last writer wins, so whoever reads back another's nonce yields. */
async function confirmByReadBack(store: LockObject, me: S3Holder, timing: Timing): Promise<string | undefined> {
  await sleep(READ_BACK_MS);
  const back = await store.read();
  if (back.holder?.nonce !== me.nonce) throw new LockedError(store.path, back.holder, timing.staleMs);
  return back.etag;
}

/**
 * Takes `<prefix>/lock.json`, or throws `LockedError` naming a live holder,
 * or `UnsafeS3LockError` on a store that ignores conditional writes (unless
 * `unsafe`). The returned lock fences: see `Lock.assertHeld`.
 */
export async function acquireS3Lock(location: string, options: S3LockOptions = {}): Promise<Lock> {
  const { bucket, key: base } = parseS3(location);
  const store = new LockObject(options.client ?? s3Client(), bucket, `${base.endsWith("/") ? base : `${base}/`}lock.json`);
  const clock = options.clock ?? SYSTEM_CLOCK;
  const timing = timingOf(options);
  const onNote = options.onNote ?? (() => undefined);
  const conditional = await honoursConditions(store);
  if (!conditional && !options.unsafe) throw new UnsafeS3LockError(store.path);
  if (!conditional)
    onNote(`${store.path}: the store ignores conditional writes; taking the lock anyway (--unsafe-s3-lock): two runs started together may both pay`);
  const started = new Date(clock.wall()).toISOString();
  const { host, pid } = options.as ?? { host: hostname(), pid: process.pid };
  const me: S3Holder = { host, pid, started, nonce: randomUUID(), heartbeat: started, beat: 0, staleMs: timing.staleMs };
  const claimed = await claim(store, me, timing, clock, onNote);
  const etag = conditional ? claimed.etag : ((await confirmByReadBack(store, me, timing)) ?? claimed.etag);
  return new HeldS3Lock(store, me, etag, { timing, clock, conditional, renewedAt: claimed.at });
}

/** A lock this run holds: renewed on a timer, its lease timed on the monotonic clock. */
class HeldS3Lock implements Lock {
  readonly path: string;
  private loss: "taken" | "lapsed" | undefined;
  /** Monotonic start of the last successful renewal (of the claim, at first). */
  private renewedAt: number;
  /** The last renewal failure, while renewals fail: a lease that lapses meanwhile lapsed for the store's sake. */
  private trouble: unknown;
  private renewing = false;
  /** The renewal the timer started last: a release waits for it, or its write would change the ETag under the release's delete. */
  private pending: Promise<void> | undefined;
  private readonly beat: NodeJS.Timeout;
  private readonly timing: Timing;
  private readonly clock: LockClock;
  private readonly conditional: boolean;

  constructor(
    private readonly store: LockObject,
    private readonly me: S3Holder,
    private etag: string | undefined,
    settings: { timing: Timing; clock: LockClock; conditional: boolean; renewedAt: number },
  ) {
    this.path = store.path;
    ({ timing: this.timing, clock: this.clock, conditional: this.conditional, renewedAt: this.renewedAt } = settings);
    this.beat = setInterval(() => void (this.pending = this.renew()), this.timing.heartbeatMs);
    this.beat.unref();
  }

  private lapsed(): boolean {
    return this.clock.monotonic() - this.renewedAt > this.timing.leaseMs;
  }

  get lost(): boolean {
    return this.loss !== undefined || this.lapsed();
  }

  /** One renewal: the heartbeat rewritten under `If-Match`; never for a lapsed lease (another run may hold the lock by now). */
  async renew(): Promise<void> {
    if (this.loss || this.renewing) return;
    if (this.lapsed()) return void (this.loss = "lapsed");
    this.renewing = true;
    const started = this.clock.monotonic();
    try {
      if (!this.conditional && (await this.store.readOnce()).holder?.nonce !== this.me.nonce) return void (this.loss = "taken");
      if (this.lapsed()) return void (this.loss = "lapsed");
      this.etag = (await this.store.write(heartbeatOf(this.me, this.clock), this.etag ? { IfMatch: this.etag } : {})) ?? this.etag;
      this.renewedAt = started;
      this.trouble = undefined;
    } catch (error) {
      if (conflicted(error)) await this.afterConflict();
      else this.trouble = error;
    } finally {
      this.renewing = false;
    }
  }

  /** A renewal's 412: our own earlier write whose answer was lost (the lock still ours, under a new ETag), or another run's. */
  private async afterConflict(): Promise<void> {
    try {
      const now = await this.store.readOnce();
      if (now.holder?.nonce === this.me.nonce) this.etag = now.etag;
      else this.loss = "taken";
    } catch (error) {
      this.trouble = error;
    }
  }

  assertHeld(): void {
    if (!this.loss && this.lapsed()) this.loss = "lapsed";
    if (this.loss === undefined) return;
    clearInterval(this.beat);
    if (this.loss === "lapsed" && this.trouble !== undefined) {
      throw new StorageError(`could not renew the lock ${this.path} before it expired (${describeS3Error(this.trouble)})`, this.path, {
        cause: this.trouble,
      });
    }
    throw new LockLostError(
      this.loss === "taken"
        ? `another run took the lock ${this.path} over while this one was stalled`
        : `this run was stalled past its lock's lease (${this.path}, ${Math.round(this.timing.leaseMs / 1000)} s without a renewal); another run may have taken the journal over`,
    );
  }

  /** Removes the lock if it is still ours, one attempt: a lock left behind goes stale by itself, and a rerun on this host takes it over at once. */
  async release(): Promise<void> {
    clearInterval(this.beat);
    // Bounded: a renewal stuck on a slow store leaves the lock to go stale, as a failed release does.
    const waited = new AbortController();
    await Promise.race([this.pending, sleep(RELEASE_WAIT_MS, waited.signal).catch(() => undefined)]);
    waited.abort();
    if (this.lost) return;
    try {
      await storageCall(
        "releasing the lock",
        this.path,
        async (signal) => {
          const now = await this.store.readOnce(signal);
          if (now.holder?.nonce !== this.me.nonce) return;
          // A store that does not know a conditional delete (501, 400): the nonce was just read back, the plain delete is ours.
          await this.store.remove(now.etag ? { IfMatch: now.etag } : {}).catch((error: unknown) => {
            if (httpStatus(error) === 501 || httpStatus(error) === 400) return this.store.remove({});
            throw error;
          });
        },
        { once: true },
      );
    } catch {
      // The lock goes stale by itself.
    }
  }
}
