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
 * never presumed dead: the message says how to remove it.
 */
import { closeSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from "node:fs";
import { hostname } from "node:os";

export interface LockHolder {
  host: string;
  pid: number;
  started: string;
}

export class LockedError extends Error {
  override name = "LockedError";
  constructor(
    readonly path: string,
    readonly holder: LockHolder | undefined,
  ) {
    super(
      holder
        ? `another run holds ${path}: pid ${holder.pid} on ${holder.host}, started ${holder.started}. Wait for it to finish${holder.host === hostname() ? "" : `, or if that run is gone, delete ${path}`}`
        : `another run holds ${path} (its lock is unreadable); if no run is going, delete ${path}`,
    );
  }
}

export interface Lock {
  readonly path: string;
  release(): void | Promise<void>;
}

function readHolder(path: string): LockHolder | undefined {
  try {
    const holder = JSON.parse(readFileSync(path, "utf8")) as Partial<LockHolder>;
    return typeof holder.pid === "number" && typeof holder.host === "string"
      ? { host: holder.host, pid: holder.pid, started: String(holder.started) }
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

/** A takeover file left by a run killed mid-takeover is stale after this long. */
const TAKEOVER_STALE_MS = 10_000;

/** Takes the lock at `path`, or throws `LockedError` naming its holder. */
export function acquireLock(path: string): Lock {
  const me: LockHolder = { host: hostname(), pid: process.pid, started: new Date().toISOString() };
  const lock = { path, release: () => releaseIfOurs(path) };
  if (create(path, me)) return lock;
  const holder = readHolder(path);
  const stale = holder !== undefined && holder.host === me.host && holder.pid !== me.pid && !alive(holder.pid);
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
    if (!now || now.pid !== holder.pid || now.host !== holder.host || alive(now.pid)) throw new LockedError(path, now);
    unlinkSync(path);
    if (!create(path, me)) throw new LockedError(path, readHolder(path));
    return lock;
  } finally {
    unlinkSync(takeover);
  }
}

function releaseIfOurs(path: string): void {
  const holder = readHolder(path);
  if (holder && holder.pid === process.pid && holder.host === hostname()) {
    try {
      unlinkSync(path);
    } catch {
      // Already gone.
    }
  }
}
