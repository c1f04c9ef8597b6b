/**
 * What the endpoint says, turned into a pace: the share of the configured
 * limits the run uses now. Pure and clock-injected, so fake time pins every
 * transition.
 *
 * The signal: the share of attempts in a recent window answered 429 (the
 * endpoint's limit is below ours: shards sharing one account, or a limit
 * lower than configured) or 529 (the endpoint is overloaded). A 429 that
 * carries `retry-after-ms`/`retry-after` also holds the run until then (see
 * `RunLimiter.hold`).
 *
 * - A window closes after at least `windowMs` and `minAttempts` attempts (or
 *   half as many refusals), or after `maxWindowMs` whatever it holds, so a
 *   slow pace still decides.
 * - Overload: 429s above `throttledShare` of the window (any 429 beyond the
 *   endpoint's limit is a real signal; a clean run draws none) or 529s at or
 *   above `overloadedShare` (clusters shed load sporadically: 5% of 529s is
 *   a known baseline and must not slow the run).
 * - Cut, at most once per window, and for 429s at most once per
 *   `minCutIntervalMs` (a rate limit counted over a sliding second refuses for
 *   up to a second after one burst: one excursion, not several; 529 storms
 *   are cut every window): the pace times the share that got
 *   through, bounded to [minCut, maxCut], never below `floor`. An endpoint
 *   refusing everything is down to a quarter in one window; one refusing a
 *   few percent (just over its limit) loses 5%.
 * - Recover on a clean window: add `recoverPerSecond` of the limit per second
 *   the window lasted (additive in time, so recovery does not slow down when
 *   the pace is low and windows long). After 429s, the pace they cut to is
 *   what the endpoint accepts (the knee): recovery is fast up to it and slow
 *   (`probePerSecond`) above, so the run sits just under the endpoint's limit
 *   instead of bouncing off it. A knee not met again within `kneeMemoryMs` is
 *   forgotten (the endpoint's limit was raised).
 */

export type AttemptOutcome = "ok" | "failed" | "throttled" | "overloaded" | "held";

export interface PaceSettings {
  windowMs: number;
  minAttempts: number;
  maxWindowMs: number;
  throttledShare: number;
  overloadedShare: number;
  minCut: number;
  maxCut: number;
  recoverPerSecond: number;
  probePerSecond: number;
  kneeMemoryMs: number;
  minCutIntervalMs: number;
  floor: number;
}

export const DEFAULT_PACE: PaceSettings = {
  windowMs: 250,
  minAttempts: 32,
  maxWindowMs: 2000,
  throttledShare: 0.02,
  overloadedShare: 0.25,
  minCut: 0.25,
  maxCut: 0.95,
  recoverPerSecond: 0.3,
  probePerSecond: 0.02,
  kneeMemoryMs: 30_000,
  minCutIntervalMs: 1000,
  floor: 0.01,
};

/** The pace over a run: for the usage summary and the progress line. */
export interface PaceReport {
  /** The pace now, as a share of the configured limits. */
  current: number;
  lowest: number;
  /** Time-weighted mean over the run. */
  mean: number;
  seconds_below_limit: number;
  cuts: number;
}

export class Pace {
  private value = 1;
  private readonly settings: PaceSettings;
  private windowStart: number;
  private attempts = 0;
  private throttled = 0;
  private overloaded = 0;
  // Time-weighted history.
  private readonly started: number;
  private since: number;
  private area = 0;
  private below = 0;
  private lowest = 1;
  private cuts = 0;
  private lastCut = -Infinity;
  /** The pace at the last cut for 429s, and when. */
  private knee: { pace: number; at: number } | undefined;

  constructor(
    private readonly now: () => number = () => performance.now(),
    settings: Partial<PaceSettings> = {},
  ) {
    this.settings = { ...DEFAULT_PACE, ...settings };
    this.started = this.windowStart = this.since = now();
  }

  /** The share of the limits to use now, in [floor, 1]. */
  get current(): number {
    return this.value;
  }

  record(outcome: AttemptOutcome): void {
    this.attempts++;
    if (outcome === "throttled" || outcome === "held") this.throttled++;
    else if (outcome === "overloaded") this.overloaded++;
    this.update();
  }

  /** Closes the window when it is due (also called when a request is about to go, so an idle run recovers). */
  update(): void {
    const s = this.settings;
    const t = this.now();
    const age = t - this.windowStart;
    // A window of mostly refusals decides at half the attempts: a storm is cut a window sooner.
    const enough = this.attempts >= s.minAttempts || this.throttled + this.overloaded >= s.minAttempts / 2;
    if (!((age >= s.windowMs && enough) || age >= s.maxWindowMs)) return;
    const n = Math.max(1, this.attempts);
    const throttling = this.throttled / n > s.throttledShare;
    const overloaded = this.overloaded / n >= s.overloadedShare;
    if (throttling && !overloaded && t - this.lastCut < s.minCutIntervalMs) {
      // 429s still paying for the last excursion (rate limits count over a second or more): no second cut for it.
    } else if (throttling || overloaded) {
      this.lastCut = t;
      const refused = (this.throttled + this.overloaded) / n;
      this.set(Math.max(s.floor, this.value * Math.min(s.maxCut, Math.max(s.minCut, 1 - refused))), t);
      // After 429s the pace just cut to is what the endpoint accepts: above it, only probe.
      if (throttling) this.knee = { pace: this.value, at: t };
      this.cuts++;
    } else if (this.value < 1) {
      if (this.knee && t - this.knee.at > s.kneeMemoryMs) this.knee = undefined;
      const fastUpTo = this.knee ? this.knee.pace : 1;
      let next = this.value + (s.recoverPerSecond * age) / 1000;
      if (next > fastUpTo) next = Math.max(this.value, fastUpTo) + (s.probePerSecond * age) / 1000;
      this.set(Math.min(1, next), t);
    }
    this.windowStart = t;
    this.attempts = this.throttled = this.overloaded = 0;
  }

  private set(value: number, t: number): void {
    this.account(t);
    this.value = value;
    this.lowest = Math.min(this.lowest, value);
  }

  private account(t: number): void {
    const span = t - this.since;
    this.area += span * this.value;
    if (this.value < 1) this.below += span;
    this.since = t;
  }

  report(): PaceReport {
    this.account(this.now());
    const total = this.since - this.started;
    return {
      current: this.value,
      lowest: this.lowest,
      mean: total > 0 ? this.area / total : this.value,
      seconds_below_limit: this.below / 1000,
      cuts: this.cuts,
    };
  }
}

/**
 * Retries bounded by recent successes (Google SRE's client-side retry
 * budget): each success earns `ratio` of a retry, up to `cap`; a retry spends
 * one. When the budget is empty, retries wait for it to refill at
 * `perSecond` (so a failing endpoint is probed, not hammered) while first
 * attempts go on. Sized for a 12% fault rate: a success earns 0.2 retries,
 * and such an endpoint asks about 0.14 retries per success.
 */
export class RetryBudget {
  private tokens: number;
  private last: number;

  constructor(
    private readonly perSecond: number,
    private readonly now: () => number = () => performance.now(),
    private readonly ratio = 0.2,
    private readonly cap = 100,
    initial = 10,
  ) {
    this.tokens = initial;
    this.last = now();
  }

  success(): void {
    this.refill();
    this.tokens = Math.min(this.cap, this.tokens + this.ratio);
  }

  /** Spends one retry when there is one; else how long until there is. */
  take(): number {
    this.refill();
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - this.tokens) / this.perSecond) * 1000);
  }

  get available(): number {
    this.refill();
    return this.tokens;
  }

  private refill(): void {
    const t = this.now();
    this.tokens = Math.min(this.cap, this.tokens + ((t - this.last) / 1000) * this.perSecond);
    this.last = t;
  }
}
