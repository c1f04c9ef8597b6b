/**
 * Accounts and API keys. The accounts file holds SHA-256 hashes of keys,
 * never the keys; a presented key is hashed and compared with every stored
 * hash in constant time, so timing tells nothing about which bytes matched.
 */
import { describeIssues, InvocationError } from "../api/errors.js";
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { existsSync, renameSync, writeFileSync } from "node:fs";
import { readJsonFile } from "../api/json.js";
import { Type, type Static } from "@sinclair/typebox";
import { validateAgainst } from "../api/validate.js";

/** Service limits of spec section 8, the default for every account. */
export const DEFAULT_LIMITS = { requests_per_minute: 1200, tokens_per_second: 250_000 } as const;

const Limits = Type.Object({
  requests_per_minute: Type.Optional(Type.Integer({ minimum: 1 })),
  tokens_per_second: Type.Optional(Type.Integer({ minimum: 1 })),
});

const StoredKey = Type.Object({
  id: Type.String({ description: "Public identifier: the first 12 hex digits of the hash." }),
  sha256: Type.String(),
  created: Type.String(),
});

const Account = Type.Object({
  name: Type.String(),
  /** Model names, aliases or versioned ids this account may use; "*" for all. */
  models: Type.Array(Type.String()),
  limits: Type.Optional(Limits),
  keys: Type.Array(StoredKey),
});

const AccountsFile = Type.Object({ accounts: Type.Array(Account) }, { additionalProperties: true });

export type Account = Static<typeof Account>;
export type AccountsFile = Static<typeof AccountsFile>;

export class AccountsError extends InvocationError {
  override name = "AccountsError";
}

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

export class AccountStore {
  private readonly hashes: { hash: Buffer; account: Account }[] = [];

  constructor(readonly file: AccountsFile) {
    for (const account of file.accounts) {
      for (const key of account.keys) {
        if (!/^[0-9a-f]{64}$/.test(key.sha256)) throw new AccountsError(`account ${account.name}: key ${key.id} has no valid sha256`);
        this.hashes.push({ hash: Buffer.from(key.sha256, "hex"), account });
      }
    }
  }

  /** Reads and checks an accounts file. */
  static load(path: string): AccountStore {
    const json = readJsonFile(path, "accounts file", AccountsError);
    const result = validateAgainst<AccountsFile>(AccountsFile, json, [path]);
    if (!result.ok) throw new AccountsError(describeIssues(result.errors, "\n"));
    return new AccountStore(result.value);
  }

  get accounts(): readonly Account[] {
    return this.file.accounts;
  }

  /** The account a presented key belongs to, checking every stored hash in constant time. */
  authenticate(key: string): Account | undefined {
    const presented = createHash("sha256").update(key, "utf8").digest();
    let found: Account | undefined;
    for (const { hash, account } of this.hashes) {
      // No early exit: every stored hash is compared whatever matched before.
      if (timingSafeEqual(hash, presented) && !found) found = account;
    }
    return found;
  }
}

/**
 * Adds a new key for `accountName` to the accounts file at `path` (creating
 * the file and the account as needed) and returns the key, which is stored
 * nowhere: only its hash is written. The file is replaced atomically.
 */
export function createKey(path: string, accountName: string, models: readonly string[] | undefined, now = new Date()): string {
  const file: AccountsFile = existsSync(path) ? AccountStore.load(path).file : { accounts: [] };
  let account = file.accounts.find((a) => a.name === accountName);
  if (!account) {
    account = { name: accountName, models: models && models.length > 0 ? [...models] : ["*"], keys: [] };
    file.accounts.push(account);
  } else if (models && models.length > 0) {
    account.models = [...models];
  }
  const key = newKey();
  const sha256 = hashKey(key);
  account.keys.push({ id: sha256.slice(0, 12), sha256, created: now.toISOString() });
  const partial = `${path}.${process.pid}.tmp`;
  writeFileSync(partial, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
  renameSync(partial, path);
  return key;
}
