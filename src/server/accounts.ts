/**
 * Accounts and API keys. The accounts file holds SHA-256 hashes of keys,
 * never the keys; a presented key is hashed and compared with every stored
 * hash in constant time, so timing tells nothing about which bytes matched.
 * A key lives until it is revoked or, once rotated out, until its grace ends.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { type Account, AccountsError, type AccountsFile, readAccountsFile, type StoredKey, updateAccountsFile } from "./accounts-file.js";

export type { Account, AccountsFile, StoredKey } from "./accounts-file.js";

/** Service limits of spec section 8, the default for every account. */
export const DEFAULT_LIMITS = { requests_per_minute: 1200, tokens_per_second: 250_000 } as const;

/** Hex SHA-256 of a key. */
export function hashKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

/** A new API key: `te_` and 32 random URL-safe characters (192 bits). */
export function newKey(): string {
  return `te_${randomBytes(24).toString("base64url")}`;
}

/** The limits in force for an account. */
export function limitsOf(account: Account): { requests_per_minute: number; tokens_per_second: number } {
  return { ...DEFAULT_LIMITS, ...account.limits };
}

/** Where a key stands at a moment: usable (perhaps until `expires`), or refused since `at`. */
export type KeyState = { live: true; expires?: string } | { live: false; why: "revoked" | "expired"; at: string };

/** A key's state at `now` (ms since the epoch). */
export function keyState(key: StoredKey, now: number): KeyState {
  if (key.revoked !== undefined) return { live: false, why: "revoked", at: key.revoked };
  if (key.expires === undefined) return { live: true };
  return Date.parse(key.expires) <= now ? { live: false, why: "expired", at: key.expires } : { live: true, expires: key.expires };
}

/** The answer to a presented key: its account, or why it is refused (with the account when the key was once valid). */
export type KeyCheck = { ok: true; account: Account; keyId: string } | { ok: false; reason: string; account?: Account; keyId?: string };

/** What the server asks of its accounts: a fixed set, or a file reloaded as it changes. */
export interface Accounts {
  /** Checks a presented key against the set in force now. */
  check(key: string): KeyCheck;
  readonly accounts: readonly Account[];
  /** Stops watching whatever the set is read from. */
  close?(): void;
}

function checkDates(account: Account, key: StoredKey): void {
  for (const field of ["expires", "revoked"] as const) {
    const value = key[field];
    if (value !== undefined && Number.isNaN(Date.parse(value))) {
      throw new AccountsError(`account ${account.name}: key ${key.id} has ${field} ${JSON.stringify(value)}, not a date such as 2026-11-21T00:00:00Z`);
    }
  }
}

/** One set of accounts, as read once: checks keys against it. */
export class AccountStore implements Accounts {
  private readonly entries: { hash: Buffer; account: Account; key: StoredKey }[] = [];
  private readonly now: () => number;

  constructor(
    readonly file: AccountsFile,
    options: { now?: () => number } = {},
  ) {
    this.now = options.now ?? Date.now;
    for (const account of file.accounts) {
      for (const key of account.keys) {
        if (!/^[0-9a-f]{64}$/.test(key.sha256)) throw new AccountsError(`account ${account.name}: key ${key.id} has no valid sha256`);
        checkDates(account, key);
        this.entries.push({ hash: Buffer.from(key.sha256, "hex"), account, key });
      }
    }
  }

  /** Reads and checks an accounts file. */
  static load(path: string, options: { now?: () => number } = {}): AccountStore {
    return new AccountStore(readAccountsFile(path), options);
  }

  get accounts(): readonly Account[] {
    return this.file.accounts;
  }

  /** Live keys in the set. */
  get liveKeys(): number {
    const now = this.now();
    return this.entries.filter((e) => keyState(e.key, now).live).length;
  }

  check(key: string): KeyCheck {
    const presented = createHash("sha256").update(key, "utf8").digest();
    let found: (typeof this.entries)[number] | undefined;
    for (const entry of this.entries) {
      // No early exit: every stored hash is compared whatever matched before.
      if (timingSafeEqual(entry.hash, presented) && !found) found = entry;
    }
    if (!found) return { ok: false, reason: "Invalid API key" };
    const state = keyState(found.key, this.now());
    const { account, key: stored } = found;
    if (state.live) return { ok: true, account, keyId: stored.id };
    const reason = state.why === "revoked" ? `API key ${stored.id} was revoked` : `API key ${stored.id} expired at ${state.at} (it was rotated)`;
    return { ok: false, reason: `${reason}; ask for a new key`, account, keyId: stored.id };
  }

  /** The account a presented key belongs to, if the key is live. */
  authenticate(key: string): Account | undefined {
    const result = this.check(key);
    return result.ok ? result.account : undefined;
  }
}

function addKey(account: Account, now: Date): { key: string; id: string } {
  const key = newKey();
  const sha256 = hashKey(key);
  const id = sha256.slice(0, 12);
  account.keys.push({ id, sha256, created: now.toISOString() });
  return { key, id };
}

/**
 * Adds a new key for `accountName` to the accounts file at `path` (creating
 * the file and the account as needed) and returns the key, which is stored
 * nowhere: only its hash is written. The file is replaced atomically.
 */
export function createKey(path: string, accountName: string, models: readonly string[] | undefined, now = new Date()): string {
  return updateAccountsFile(path, (file) => {
    let account = file.accounts.find((a) => a.name === accountName);
    if (!account) {
      account = { name: accountName, models: models && models.length > 0 ? [...models] : ["*"], keys: [] };
      file.accounts.push(account);
    } else if (models && models.length > 0) {
      account.models = [...models];
    }
    return addKey(account, now).key;
  });
}

/** Where a key is: its account and itself. */
function findKey(file: AccountsFile, idOrKey: string, path: string): { account: Account; key: StoredKey } {
  // The secret itself is accepted too: whoever holds a leaked key may not know its id.
  const wanted = idOrKey.startsWith("te_") ? hashKey(idOrKey).slice(0, 12) : idOrKey.toLowerCase();
  for (const account of file.accounts) {
    const key = account.keys.find((k) => k.id === wanted);
    if (key) return { account, key };
  }
  throw new AccountsError(`no key ${idOrKey.startsWith("te_") ? "matching the key given" : idOrKey} in ${path}; \`typed-eval keys list\` shows the ids`);
}

/** Revokes a key (by its id or the key itself) at once; says whether it already was. */
export function revokeKey(path: string, idOrKey: string, now = new Date()): { account: string; id: string; already: boolean } {
  return updateAccountsFile(path, (file) => {
    const { account, key } = findKey(file, idOrKey, path);
    const already = key.revoked !== undefined;
    if (!already) key.revoked = now.toISOString();
    return { account: account.name, id: key.id, already };
  });
}

export interface Rotation {
  /** The new key, shown once. */
  key: string;
  id: string;
  /** The key it replaces, and when that one stops working. */
  old: { id: string; expires: string };
}

/**
 * Replaces a live key of an account with a new one; the old key keeps working
 * for `graceMs` (0: it stops now). `keyId` names the old key; without it the
 * account must have exactly one live key.
 */
export function rotateKey(path: string, options: { account: string; keyId?: string; graceMs: number; now?: Date }): Rotation {
  const now = options.now ?? new Date();
  return updateAccountsFile(path, (file) => {
    const account = file.accounts.find((a) => a.name === options.account);
    if (!account) throw new AccountsError(`no account ${options.account} in ${path}; \`typed-eval keys list\` shows the accounts`);
    const live = account.keys.filter((k) => keyState(k, now.getTime()).live);
    // Without --key, the one key that is not already on its way out.
    const old = options.keyId === undefined ? live.filter((k) => k.expires === undefined) : live.filter((k) => k.id === options.keyId?.toLowerCase());
    if (live.length === 0) throw new AccountsError(`account ${account.name} has no live key to rotate; make one with \`typed-eval keys create\``);
    if (old.length !== 1) {
      const ids = live.map((k) => k.id).join(", ") || "none";
      const why = options.keyId === undefined ? `has ${old.length} live keys without an end` : `has no live key ${options.keyId}`;
      throw new AccountsError(`account ${account.name} ${why} (live: ${ids}); name the one to rotate with --key ID`);
    }
    const retired = old[0] as StoredKey;
    const expires = new Date(now.getTime() + options.graceMs).toISOString();
    // A key already due to expire sooner keeps its earlier end.
    if (retired.expires === undefined || Date.parse(retired.expires) > Date.parse(expires)) retired.expires = expires;
    const made = addKey(account, now);
    return { ...made, old: { id: retired.id, expires: retired.expires } };
  });
}

/** One row of `keys list`: everything but the hash. */
export interface KeyRow {
  account: string;
  models: string[];
  id: string;
  created: string;
  state: "active" | "expiring" | "expired" | "revoked";
  /** When an expiring key stops, or when a refused one stopped. */
  at?: string;
}

/** Every key of the accounts file at `path` with its state at `now`. */
export function listKeys(path: string, now = new Date()): KeyRow[] {
  return readAccountsFile(path).accounts.flatMap((account) =>
    account.keys.map((key): KeyRow => {
      const state = keyState(key, now.getTime());
      const base = { account: account.name, models: account.models, id: key.id, created: key.created };
      if (!state.live) return { ...base, state: state.why, at: state.at };
      return state.expires === undefined ? { ...base, state: "active" } : { ...base, state: "expiring", at: state.expires };
    }),
  );
}
