/**
 * The accounts file on disk: its format, reading it, and changing it so that
 * a reader (the server polling it) only ever sees the old file or the new
 * one. A change holds a lock file beside it, so two `keys` commands at once
 * cannot lose each other's key; the new text is written to a temporary file,
 * flushed, and renamed over the old one with the old one's permissions.
 */
import { randomBytes } from "node:crypto";
import { closeSync, fchmodSync, fchownSync, fsyncSync, openSync, realpathSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { type Static, Type } from "@sinclair/typebox";
import { describeIssues, InvocationError } from "../api/errors.js";
import { readJsonFile } from "../api/json.js";
import { validateAgainst } from "../api/validate.js";

const Limits = Type.Object({
  requests_per_minute: Type.Optional(Type.Integer({ minimum: 1 })),
  tokens_per_second: Type.Optional(Type.Integer({ minimum: 1 })),
});

const StoredKey = Type.Object({
  id: Type.String({ description: "Public identifier: the first 12 hex digits of the hash." }),
  sha256: Type.String(),
  created: Type.String(),
  /** When a rotated-out key stops working (ISO 8601); absent: never. */
  expires: Type.Optional(Type.String()),
  /** When the key was revoked (ISO 8601); absent: not revoked. */
  revoked: Type.Optional(Type.String()),
});

const Account = Type.Object({
  name: Type.String(),
  /** Model names, aliases or versioned ids this account may use; "*" for all. */
  models: Type.Array(Type.String()),
  limits: Type.Optional(Limits),
  keys: Type.Array(StoredKey),
});

const AccountsFile = Type.Object({ accounts: Type.Array(Account) }, { additionalProperties: true });

export type StoredKey = Static<typeof StoredKey>;
export type Account = Static<typeof Account>;
export type AccountsFile = Static<typeof AccountsFile>;

export class AccountsError extends InvocationError {
  override name = "AccountsError";
}

/** Reads and checks the accounts file at `path`: a missing, unreadable or malformed file throws one line. */
export function readAccountsFile(path: string): AccountsFile {
  const json = readJsonFile(path, "accounts file", AccountsError);
  const result = validateAgainst<AccountsFile>(AccountsFile, json, [path]);
  if (!result.ok) throw new AccountsError(describeIssues(result.errors, "; "));
  return result.value;
}

/** How long a `keys` command waits for another one's lock, and when a lock is taken for abandoned. */
const LOCK_WAIT_MS = 5_000;
const LOCK_STALE_MS = 30_000;

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Takes `<path>.lock`, waiting for another holder; returns its release. */
function lock(path: string): () => void {
  const file = `${path}.lock`;
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      closeSync(openSync(file, "wx", 0o600));
      return () => rmSync(file, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    const held = statSync(file, { throwIfNoEntry: false });
    // A holder that died mid-change leaves its lock: one far older than any change takes is abandoned.
    if (held && Date.now() - held.mtimeMs > LOCK_STALE_MS) rmSync(file, { force: true });
    else if (Date.now() > deadline) {
      throw new AccountsError(`another keys command is changing ${path} (lock file ${file}); if none is running, delete the lock file`);
    } else sleepSync(50);
  }
}

/**
 * Replaces the file at `path` with `text` so that a reader sees the old file
 * or the new one, never a part: a temporary file beside it, flushed, renamed
 * over it, and the folder flushed. The new file keeps the old one's mode and
 * owner (0600 for a new file); a symbolic link is followed, not replaced.
 */
export function replaceFile(path: string, text: string): void {
  const target = statSync(path, { throwIfNoEntry: false }) ? realpathSync(path) : path;
  const old = statSync(target, { throwIfNoEntry: false });
  const mode = old ? old.mode & 0o7777 : 0o600;
  const temp = `${target}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  const fd = openSync(temp, "wx", mode);
  try {
    writeSync(fd, text);
    // The umask may have narrowed the mode at creation.
    fchmodSync(fd, mode);
    if (old && (old.uid !== process.getuid?.() || old.gid !== process.getgid?.())) {
      try {
        fchownSync(fd, old.uid, old.gid);
      } catch {
        // Only root may give a file away: otherwise it stays ours, with the old mode.
      }
    }
    fsyncSync(fd);
    closeSync(fd);
    renameSync(temp, target);
  } catch (error) {
    try {
      closeSync(fd);
    } catch {
      // already closed
    }
    rmSync(temp, { force: true });
    throw error;
  }
  // The rename itself is durable once the folder is flushed.
  const folder = openSync(dirname(target), "r");
  try {
    fsyncSync(folder);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EINVAL") throw error;
  } finally {
    closeSync(folder);
  }
}

/**
 * Applies `change` to the accounts file at `path` (an empty one when there is
 * none yet) under the lock, writes the result atomically, and returns what
 * `change` returned. Nothing is written when `change` throws.
 */
export function updateAccountsFile<T>(path: string, change: (file: AccountsFile) => T): T {
  const release = lock(path);
  try {
    const file: AccountsFile = statSync(path, { throwIfNoEntry: false }) ? readAccountsFile(path) : { accounts: [] };
    const result = change(file);
    replaceFile(path, `${JSON.stringify(file, null, 2)}\n`);
    return result;
  } finally {
    release();
  }
}
