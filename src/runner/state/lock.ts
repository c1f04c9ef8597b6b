/**
 * One run per journal. Two runs of the same job on the same journal would
 * both send every record (each pays) and interleave their entries; the
 * second is refused at once, naming the holder.
 *
 * The lock is a file beside the journal, created exclusively (`wx`), holding
 * the holder's host, pid and start time. A lock whose holder is gone (same
 * host, no such process) is stale and is taken over; taking over happens
 * under a second exclusive file, so two runs finding the same stale lock
 * cannot both take it. A lock held on another host (a shared filesystem) is
 * never presumed dead: the message says how to remove it. A lock naming this
 * host and this very pid is a previous incarnation's (a restarted container
 * keeps its hostname and pid 1), so it is stale too.
 *
 * Fencing: each holder writes a unique nonce; `assertHeld()` rereads the file
 * (at most every 250 ms) and throws `LockLostError` once it names another
 * holder or is gone, so a run whose lock was removed or taken over stops
 * before its next request and before writing outputs.
 */
import { randomUUID } from "node:crypto";
import { closeSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from "node:fs";
import { hostname } from "node:os";
import { LOCKED_NEXT, LockLostError } from "../../api/verdict.js";

export interface LockHolder {
  host: string;
  pid: number;
  started: string;
  /** Unique to one acquisition: tells a holder from a later one with the same host and pid. */
  nonce?: string;
  /** The holder's own `--summary-json` (resolved): a run refused by this lock must not write over it. */
  summary?: string;
}

export class LockedError extends Error {
  override name = "LockedError";
  constructor(
    readonly path: string,
    readonly holder: LockHolder | undefined,
    /** How long a heartbeat that stopped takes to make the lock stale (S3 locks); undefined for a lock held until released. */
    readonly staleMs?: number,
  ) {
    const stale = staleMs === undefined ? undefined : `${Math.round(staleMs / 1000)} s`;
    super(
      holder
        ? `another run holds ${path}: pid ${holder.pid} on ${holder.host}, started ${holder.started}. ${
            stale
              ? `Wait for it to finish; if that run is gone, a rerun takes its lock over once its heartbeat has stood still for ${stale}`
              : `Wait for it to finish${holder.host === hostname() ? "" : `, or if that run is gone, delete ${path}`}`
          }`
        : stale
          ? `another run holds ${path} (its lock is unreadable); a rerun takes it over once it has stood still for ${stale}`
          : `${path} is in the way of this run's lock, but names no run (it is empty, or not a lock typed-eval wrote)`,
    );
  }

  /** What to do next when the table's "wait" would mislead: a local lock naming no run is released by nothing (api/verdict.ts words it). */
  get next(): string | undefined {
    return this.holder === undefined && this.staleMs === undefined ? LOCKED_NEXT.unreadable(this.path) : undefined;
  }
}

/** A held lock: the fence every request and every output write passes. */
export interface Lock {
  readonly path: string;
  /** True once this run is known not to hold its lock any more (taken over, removed, or lapsed unrenewed). */
  readonly lost: boolean;
  /**
   * Throws `LockLostError` (or `StorageError` when the store kept the lock from
   * being renewed) unless this run still holds its lock. Synchronous and cheap:
   * call it before each request and before writing any output.
   */
  assertHeld(): void;
  release(): void | Promise<void>;
}

/** Whether a lock's holder is provably gone: on this host, and its pid dead or our own (a previous incarnation's). */
export function deadHere(holder: LockHolder, me: LockHolder): boolean {
  if (holder.host !== me.host) return false;
  if (holder.pid === me.pid) return holder.nonce !== me.nonce;
  return !alive(holder.pid);
}

function readHolder(path: string): LockHolder | undefined {
  try {
    const holder = JSON.parse(readFileSync(path, "utf8")) as Partial<LockHolder>;
    return typeof holder.pid === "number" && typeof holder.host === "string"
      ? {
          host: holder.host,
          pid: holder.pid,
          started: String(holder.started),
          ...(typeof holder.nonce === "string" ? { nonce: holder.nonce } : {}),
          ...(typeof holder.summary === "string" ? { summary: holder.summary } : {}),
        }
      : undefined;
  } catch {
    return undefined;
  }
}

/** Whether a process of this host is alive (EPERM: alive, someone else's). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Creates the lock file exclusively; false when it exists. */
function create(path: string, holder: LockHolder): boolean {
  let fd: number;
  try {
    fd = openSync(path, "wx");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  }
  writeSync(fd, JSON.stringify(holder));
  closeSync(fd);
  return true;
}

/** Waits `ms` without returning to the event loop (the lock is taken synchronously). */
function pause(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** A takeover file left by a run killed mid-takeover is stale after this long. */
const TAKEOVER_STALE_MS = 10_000;

/** Takes the lock at `path` (naming this run's `--summary-json`, if any), or throws `LockedError` naming its holder. */
export function acquireLock(path: string, summary?: string): Lock {
  const me: LockHolder = { host: hostname(), pid: process.pid, started: new Date().toISOString(), nonce: randomUUID(), ...(summary ? { summary } : {}) };
  const lock = fencedLock(path, me);
  if (create(path, me)) return lock;
  // A lock read between another run's create and its write is empty for a moment: read it again before calling it garbage.
  const holder = readHolder(path) ?? (pause(50), readHolder(path));
  const stale = holder !== undefined && deadHere(holder, me);
  if (!stale) throw new LockedError(path, holder);
  const takeover = `${path}.takeover`;
  try {
    if (Date.now() - statSync(takeover).mtimeMs > TAKEOVER_STALE_MS) unlinkSync(takeover);
  } catch {
    // No takeover under way.
  }
  if (!create(takeover, me)) throw new LockedError(path, holder);
  try {
    // Still the same stale holder? (Another run may have taken over between our reads.)
    const now = readHolder(path);
    if (!now || now.pid !== holder.pid || now.host !== holder.host || now.nonce !== holder.nonce || !deadHere(now, me)) throw new LockedError(path, now);
    unlinkSync(path);
    if (!create(path, me)) throw new LockedError(path, readHolder(path));
    return lock;
  } finally {
    unlinkSync(takeover);
  }
}

/** How often `assertHeld` rereads a local lock at most. */
const RECHECK_MS = 250;

function fencedLock(path: string, me: LockHolder): Lock {
  let lost = false;
  // Monotonic: a wall clock stepped back must not stop the rereads.
  let checked = performance.now();
  return {
    path,
    get lost() {
      return lost;
    },
    assertHeld() {
      if (!lost && performance.now() - checked >= RECHECK_MS) {
        checked = performance.now();
        lost = readHolder(path)?.nonce !== me.nonce;
      }
      if (lost) throw new LockLostError(`this run's lock ${path} was removed or taken over by another run`);
    },
    release: () => releaseIfOurs(path, me),
  };
}

function releaseIfOurs(path: string, me: LockHolder): void {
  const holder = readHolder(path);
  if (holder && holder.nonce === me.nonce) {
    try {
      unlinkSync(path);
    } catch {
      // Already gone.
    }
  }
}
