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
 * the lock is taken checks that the store refuses the writes whose condition
 * fails and takes those whose condition holds, and finds the form it takes an
 * ETag in (quoted as S3 sends it, or bare: Ceph RGW 16 answers 412 to a
 * quoted one). A store that fails the probe is refused (exit 2) unless the
 * run is told `--unsafe-s3-lock`, and then the writes carry no condition and
 * each is read back and its nonce compared, which does not exclude two runs
 * started within moments of each other both sending until the next heartbeat
 * shows one of them the other's nonce. A renewal refused although the lock
 * is still this run's, under the very ETag its condition named, is retried
 * in the other form; refused in both, the run stops (exit 2, naming the
 * store's conditional writes), never taken for a stall.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { env } from "../../api/env.js";
import { InvocationError } from "../../api/errors.js";
import { sleep } from "../../api/retry.js";
import { LockLostError, StorageError } from "../../api/verdict.js";
import { abortable, describeS3Error, type EtagForm, ifMatchValue, isMissingKey, parseS3, rememberEtagForm, s3Client, storageCall } from "../../records/s3.js";
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

/** The store failed the probe of conditional writes, and the run was not told to take its lock anyway: exit 2, naming the flag. */
export class UnsafeS3LockError extends InvocationError {
  override name = "UnsafeS3LockError";
  constructor(path: string, why: string) {
    super(
      `the store behind ${path} ${why}, so two runs started together could both take this lock and both pay for the same records: use a store whose conditional writes hold (AWS S3, MinIO, Ceph RGW), or pass --unsafe-s3-lock to run at that risk`,
    );
  }
}

/**
 * The store refused a write of the lock whose condition held (`If-Match` on
 * the lock's own ETag, in either form), though no other run holds it: its
 * conditional writes do not work as the probe found them. Exit 2, naming them;
 * the journal keeps what was finished.
 */
export class S3ConditionRefusedError extends InvocationError {
  override name = "S3ConditionRefusedError";
  constructor(path: string, what: string) {
    super(
      `the store behind ${path} refused ${what} under If-Match naming the lock's own ETag (quoted and bare), though no other run holds it: its conditional writes do not work as its probe found them. Use a store whose conditional writes hold (AWS S3, MinIO, Ceph RGW), or pass --unsafe-s3-lock to run without them, at the risk it names`,
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

/** Whether two ETags name the same version, whatever their quotes. */
function sameEtag(a: string | undefined, b: string | undefined): boolean {
  return a !== undefined && b !== undefined && ifMatchValue(a, "bare") === ifMatchValue(b, "bare");
}

/**
 * The conditions this run's writes of the lock carry: none on a store whose
 * conditional writes failed the probe (`--unsafe-s3-lock`), else with its
 * ETags in the form the probe found.
 */
class Conditions {
  constructor(
    readonly honoured: boolean,
    public form: EtagForm,
  ) {}

  create(): Condition {
    return this.honoured ? { IfNoneMatch: "*" } : {};
  }

  match(etag: string | undefined, form = this.form): Condition {
    return this.honoured && etag !== undefined ? { IfMatch: ifMatchValue(etag, form) } : {};
  }
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

  async readOnce(signal?: AbortSignal, key = this.key): Promise<Seen> {
    try {
      const got = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }), abortable(signal));
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

/** What the probe found: conditional writes that hold, with the form the store takes an ETag in, or why not. */
type Probed = { honoured: true; form: EtagForm } | { honoured: false; why: string };

/** A condition no object's ETag meets. */
const NO_SUCH_ETAG = "00000000000000000000000000000000";

/**
 * Whether the store's conditional writes hold, on a probe object: created
 * with `If-None-Match: *`; written under `If-Match` on its own ETag, quoted
 * (S3's form), else bare, which must succeed and says which form the store
 * takes; then with `If-None-Match: *` again and `If-Match` on an ETag it does
 * not have, which must both fail (412).
 */
async function probe(store: LockObject): Promise<Probed> {
  const key = `${store.key}.probe-${randomUUID()}`;
  /** One write of the probe: its ETag when the store took it, "failed" on 412, "unknown" when the store does not know the header. */
  const write = async (condition: Condition): Promise<{ etag: string | undefined } | "failed" | "unknown"> => {
    try {
      return { etag: await storageCall("probing conditional writes at", store.path, (signal) => store.write("probe", condition, key, signal)) };
    } catch (error) {
      if (conflicted(error)) return "failed";
      // 501 Not Implemented, 400: a store that does not know the header.
      if (httpStatus(error) === 501 || httpStatus(error) === 400) return "unknown";
      throw error;
    }
  };
  const created = await write({ IfNoneMatch: "*" });
  if (created === "unknown") return { honoured: false, why: "does not know conditional writes (If-None-Match)" };
  if (created === "failed") return { honoured: false, why: "refused to create a new object under If-None-Match: *" };
  try {
    const etag = created.etag ?? (await store.readOnce(undefined, key)).etag;
    if (etag === undefined) return { honoured: false, why: "gives no ETag to condition a write on" };
    let form: EtagForm | undefined;
    for (const tried of ["quoted", "bare"] as const) {
      const matched = await write({ IfMatch: ifMatchValue(etag, tried) });
      if (matched === "unknown") return { honoured: false, why: "does not know conditional writes (If-Match)" };
      if (matched === "failed") continue;
      form = tried;
      break;
    }
    if (form === undefined) return { honoured: false, why: "refuses a write under If-Match naming the object's own ETag (HTTP 412, quoted and bare)" };
    if ((await write({ IfNoneMatch: "*" })) !== "failed")
      return { honoured: false, why: "ignores conditional writes (it overwrote an object under If-None-Match: *)" };
    if ((await write({ IfMatch: ifMatchValue(NO_SUCH_ETAG, form) })) !== "failed")
      return { honoured: false, why: "ignores conditional writes (it took a write under If-Match naming another ETag)" };
    return { honoured: true, form };
  } finally {
    await store.remove({}, key).catch(() => undefined);
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
 * Writes this run into the lock under `condition` (`If-Match` on `basis`, the
 * ETag seen, when taking it over). A 412 means another run got there first
 * (`LockedError`, naming it), or that an earlier attempt of this very write
 * landed though its answer was lost: then the lock is ours. A takeover
 * refused while the lock still has the ETag it named is the store refusing a
 * condition that holds.
 */
async function claimWith(store: LockObject, me: S3Holder, condition: Condition, timing: Timing, clock: LockClock, basis?: string): Promise<Claimed> {
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
    if ("IfMatch" in condition && sameEtag(now.etag, basis)) throw new S3ConditionRefusedError(store.path, "the lock's takeover");
    throw new LockedError(store.path, now.holder, timing.staleMs);
  }
}

/**
 * Takes the lock: creates it when there is none, takes it over when its
 * holder is provably dead (this host) or its heartbeat stood still for the
 * stale period, and throws `LockedError` when the holder shows a heartbeat.
 * Returns this run's write.
 */
async function claim(
  store: LockObject,
  me: S3Holder,
  conditions: Conditions,
  timing: Timing,
  clock: LockClock,
  onNote: (message: string) => void,
): Promise<Claimed> {
  for (;;) {
    const seen = await store.read();
    if (seen.text === undefined) return claimWith(store, me, conditions.create(), timing, clock);
    const holder = seen.holder;
    const takeOver = () => claimWith(store, me, conditions.match(seen.etag), timing, clock, seen.etag);
    if (holder && deadHere(holder, me)) return takeOver();
    const staleMs = Math.max(timing.staleMs, Number(holder?.staleMs) || 0);
    onNote(
      `${store.path} is held${holder ? ` by pid ${holder.pid} on ${holder.host}` : ""}: watching its heartbeat for up to ${Math.round(staleMs / 1000)} s before taking it over`,
    );
    const seenNow = await watch(store, seen, staleMs, clock);
    if (seenNow === "live") throw new LockedError(store.path, (await store.read()).holder ?? holder, staleMs);
    if (seenNow === "stale") return takeOver();
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
  const client = options.client ?? s3Client();
  const store = new LockObject(client, bucket, `${base.endsWith("/") ? base : `${base}/`}lock.json`);
  const clock = options.clock ?? SYSTEM_CLOCK;
  const timing = timingOf(options);
  const onNote = options.onNote ?? (() => undefined);
  const probed = await probe(store);
  if (!probed.honoured && !options.unsafe) throw new UnsafeS3LockError(store.path, probed.why);
  if (!probed.honoured) onNote(`${store.path}: the store ${probed.why}; taking the lock anyway (--unsafe-s3-lock): two runs started together may both pay`);
  if (probed.honoured) rememberEtagForm(client, probed.form);
  const conditions = new Conditions(probed.honoured, probed.honoured ? probed.form : "quoted");
  const started = new Date(clock.wall()).toISOString();
  const { host, pid } = options.as ?? { host: hostname(), pid: process.pid };
  const me: S3Holder = { host, pid, started, nonce: randomUUID(), heartbeat: started, beat: 0, staleMs: timing.staleMs };
  const claimed = await claim(store, me, conditions, timing, clock, onNote);
  const etag = conditions.honoured ? claimed.etag : ((await confirmByReadBack(store, me, timing)) ?? claimed.etag);
  return new HeldS3Lock(store, me, etag, { timing, clock, conditions, renewedAt: claimed.at, onFormChange: (form) => rememberEtagForm(client, form) });
}

/** A lock this run holds: renewed on a timer, its lease timed on the monotonic clock. */
class HeldS3Lock implements Lock {
  readonly path: string;
  /** Why this run no longer holds its lock: another run took it, its lease lapsed, or the store refused renewals whose condition held. */
  private loss: "taken" | "lapsed" | "refused" | undefined;
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
  private readonly conditions: Conditions;
  private readonly onFormChange: (form: EtagForm) => void;

  constructor(
    private readonly store: LockObject,
    private readonly me: S3Holder,
    private etag: string | undefined,
    settings: { timing: Timing; clock: LockClock; conditions: Conditions; renewedAt: number; onFormChange: (form: EtagForm) => void },
  ) {
    this.path = store.path;
    ({ timing: this.timing, clock: this.clock, conditions: this.conditions, renewedAt: this.renewedAt, onFormChange: this.onFormChange } = settings);
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
      if (!this.conditions.honoured && (await this.store.readOnce()).holder?.nonce !== this.me.nonce) return void (this.loss = "taken");
      if (this.lapsed()) return void (this.loss = "lapsed");
      this.renewed(await this.store.write(heartbeatOf(this.me, this.clock), this.conditions.match(this.etag)), started);
    } catch (error) {
      if (conflicted(error)) await this.afterConflict(started);
      else this.trouble = error;
    } finally {
      this.renewing = false;
    }
  }

  private renewed(etag: string | undefined, started: number): void {
    this.etag = etag ?? this.etag;
    this.renewedAt = started;
    this.trouble = undefined;
  }

  /**
   * A renewal's 412: another run's write (the lock taken), our own earlier
   * write whose answer was lost (the lock still ours, under a new ETag), or,
   * with the lock still ours under the ETag the condition named, the store
   * refusing a condition that holds: tried once in the other ETag form (kept
   * when it works), else the run stops.
   */
  private async afterConflict(started: number): Promise<void> {
    try {
      const now = await this.store.readOnce();
      if (now.holder?.nonce !== this.me.nonce) return void (this.loss = "taken");
      if (!sameEtag(now.etag, this.etag)) return void (this.etag = now.etag);
      const other: EtagForm = this.conditions.form === "quoted" ? "bare" : "quoted";
      try {
        this.renewed(await this.store.write(heartbeatOf(this.me, this.clock), this.conditions.match(this.etag, other)), started);
        this.conditions.form = other;
        this.onFormChange(other);
      } catch (error) {
        if (!conflicted(error)) return void (this.trouble = error);
        const again = await this.store.readOnce();
        this.loss = again.holder?.nonce !== this.me.nonce ? "taken" : sameEtag(again.etag, this.etag) ? "refused" : undefined;
        if (this.loss === undefined) this.etag = again.etag;
      }
    } catch (error) {
      this.trouble = error;
    }
  }

  assertHeld(): void {
    if (!this.loss && this.lapsed()) this.loss = "lapsed";
    if (this.loss === undefined) return;
    clearInterval(this.beat);
    if (this.loss === "refused") throw new S3ConditionRefusedError(this.path, "the lock's renewal");
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
          // Past the lease another run may take the lock over at any moment, and a store may ignore the delete's condition (RGW 16 does).
          if (now.holder?.nonce !== this.me.nonce || this.lapsed()) return;
          // A store that does not know a conditional delete (501, 400): the nonce was just read back, the plain delete is ours.
          await this.store.remove(this.conditions.match(now.etag)).catch((error: unknown) => {
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
