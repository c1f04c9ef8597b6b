/**
 * The accounts file as the server holds it: read at start, then read again
 * when it changes (a stat every poll; at once on `reload()`, which `serve`
 * calls on SIGHUP), the whole set swapped in one assignment. A file that
 * does not load (a torn or half-written file, a bad edit, a missing file)
 * leaves the last good set in force and logs one line, and the file is read
 * again every poll until it loads.
 */
import { statSync } from "node:fs";
import type { Logger } from "../logging/logger.js";
import { type Account, type Accounts, AccountStore, type KeyCheck } from "./accounts.js";

export interface ReloadOptions {
  logger: Logger;
  /** The clock keys' expiry is judged by (tests pass a fake one). */
  now?: () => number;
}

/** What tells one version of the file from another without reading it: inode, size, times (or why there are none). */
function signature(path: string): string {
  try {
    const s = statSync(path, { throwIfNoEntry: false, bigint: true });
    return s ? `${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}` : "missing";
  } catch (error) {
    // A folder made unreadable: the read that follows says so, and the last good set stays.
    return `unreadable: ${(error as NodeJS.ErrnoException).code ?? ""}`;
  }
}

export class ReloadingAccounts implements Accounts {
  private store: AccountStore;
  private seen: string;
  /** The last failure logged, so a file that stays broken logs once. */
  private failure: string | undefined;
  private timer: NodeJS.Timeout | undefined;

  /** Loads `path`, throwing when it does not load: a server does not start on a bad file. */
  constructor(
    readonly path: string,
    private readonly options: ReloadOptions,
  ) {
    this.seen = signature(path);
    this.store = AccountStore.load(path, this.storeOptions());
  }

  /** Compares the file's stat with the last one read every `pollMs` (0: never; `reload()` still works). */
  watch(pollMs: number): this {
    clearInterval(this.timer);
    if (pollMs > 0) this.timer = setInterval(() => this.poll(), pollMs).unref();
    return this;
  }

  private storeOptions(): { now?: () => number } {
    return this.options.now ? { now: this.options.now } : {};
  }

  check(key: string): KeyCheck {
    return this.store.check(key);
  }

  get accounts(): readonly Account[] {
    return this.store.accounts;
  }

  /** Live keys in the set in force. */
  get liveKeys(): number {
    return this.store.liveKeys;
  }

  private poll(): void {
    if (this.failure !== undefined || signature(this.path) !== this.seen) this.reload("changed");
  }

  /** Reads the file now; true when its set is in force, false when the last good one stays. */
  reload(reason: string): boolean {
    // The stat before the read: a change after it shows at the next poll.
    const seen = signature(this.path);
    let store: AccountStore;
    try {
      store = AccountStore.load(this.path, this.storeOptions());
    } catch (error) {
      const message = (error as Error).message;
      // Polls log a file that stays broken once; a SIGHUP always gets its answer.
      if (message !== this.failure || reason !== "changed") {
        const kept = `keeping the last good set (${this.store.accounts.length} accounts)`;
        this.options.logger.warn({ accountsFile: this.path, reason, error: message }, `accounts file not reloaded, ${kept}: ${message}`);
      }
      this.failure = message;
      return false;
    }
    this.store = store;
    this.seen = seen;
    this.failure = undefined;
    this.options.logger.info(
      { accountsFile: this.path, reason, accounts: store.accounts.length, liveKeys: store.liveKeys },
      `accounts reloaded: ${store.accounts.length} accounts, ${store.liveKeys} live keys`,
    );
    return true;
  }

  close(): void {
    clearInterval(this.timer);
  }
}
