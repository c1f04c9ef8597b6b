import { closeSync, openSync, rmSync, statSync } from "node:fs";
import { type Static, Type } from "@sinclair/typebox";
import { describeIssues, InvocationError } from "../api/errors.js";
import { readJsonFile } from "../api/json.js";
import { validateAgainst } from "../api/validate.js";
import { replaceFile } from "../records/local-files.js";

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
 * Applies `change` to the accounts file at `path` (an empty one when there is
 * none yet) under the lock, writes the result atomically, and returns what
 * `change` returned. Nothing is written when `change` throws.
 */
export function updateAccountsFile<T>(path: string, change: (file: AccountsFile) => T): T {
  const release = lock(path);
  try {
    const file: AccountsFile = statSync(path, { throwIfNoEntry: false }) ? readAccountsFile(path) : { accounts: [] };
    const result = change(file);
    // A new accounts file is the owner's alone (0600): it holds key hashes.
    replaceFile(path, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
    return result;
  } finally {
    release();
  }
}
