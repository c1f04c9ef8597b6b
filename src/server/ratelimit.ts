/**
 * Per-account rate limits: requests per minute and tokens per second, as two
 * continuously refilling buckets. A request is admitted only when both have
 * room, and a refusal says exactly when room will be there.
 */
export interface Limits {
  requests_per_minute: number;
  tokens_per_second: number;
}

export type Admission = { ok: true } | { ok: false; retryAfterMs: number; limit: string };

class Bucket {
  private level: number;
  private at: number;

  constructor(
    readonly capacity: number,
    /** Units per millisecond. */
    readonly rate: number,
    now: number,
  ) {
    this.level = capacity;
    this.at = now;
  }

  /** Units available at `now`. */
  available(now: number): number {
    return Math.min(this.capacity, this.level + (now - this.at) * this.rate);
  }

  /**
   * Milliseconds until `cost` units can be taken (0 when they can now). A
   * cost above the capacity waits for a full bucket and then overdraws it, so
   * no request is too big to ever pass.
   */
  waitMs(cost: number, now: number): number {
    const needed = Math.min(cost, this.capacity);
    const short = needed - this.available(now);
    return short <= 0 ? 0 : short / this.rate;
  }

  take(cost: number, now: number): void {
    this.level = this.available(now) - cost;
    this.at = now;
  }

  /** Gives back (or charges more than) an earlier estimate. */
  adjust(delta: number, now: number): void {
    this.level = Math.min(this.capacity, this.available(now) + delta);
    this.at = now;
  }
}

interface AccountBuckets {
  requests: Bucket;
  tokens: Bucket;
  limits: Limits;
}

export class RateLimiter {
  private readonly accounts = new Map<string, AccountBuckets>();

  constructor(private readonly now: () => number = Date.now) {}

  private buckets(account: string, limits: Limits): AccountBuckets {
    let b = this.accounts.get(account);
    if (!b || b.limits.requests_per_minute !== limits.requests_per_minute || b.limits.tokens_per_second !== limits.tokens_per_second) {
      const now = this.now();
      b = {
        requests: new Bucket(limits.requests_per_minute, limits.requests_per_minute / 60_000, now),
        tokens: new Bucket(limits.tokens_per_second, limits.tokens_per_second / 1000, now),
        limits,
      };
      this.accounts.set(account, b);
    }
    return b;
  }

  /** Admits one request of `tokens` estimated input tokens, or says how long to wait. */
  admit(account: string, limits: Limits, tokens: number): Admission {
    const b = this.buckets(account, limits);
    const now = this.now();
    const waitRequests = b.requests.waitMs(1, now);
    const waitTokens = b.tokens.waitMs(tokens, now);
    if (waitRequests > 0 || waitTokens > 0) {
      const byRequests = waitRequests >= waitTokens;
      return {
        ok: false,
        retryAfterMs: Math.ceil(Math.max(waitRequests, waitTokens)),
        limit: byRequests
          ? `${limits.requests_per_minute.toLocaleString("en-US")} requests per minute`
          : `${limits.tokens_per_second.toLocaleString("en-US")} tokens per second`,
      };
    }
    b.requests.take(1, now);
    b.tokens.take(tokens, now);
    return { ok: true };
  }

  /** Corrects an admitted request's token estimate once its real usage is known. */
  settle(account: string, estimated: number, actual: number): void {
    const b = this.accounts.get(account);
    if (b) b.tokens.adjust(estimated - actual, this.now());
  }
}
