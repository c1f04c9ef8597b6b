/**
 * The run's limiter. Bottleneck holds the limits of record: one reservoir for
 * requests, one for tokens, each managed as a sliding window. On top of it:
 * a hold (a 429 that says how long), a pace (what the endpoint's overload
 * signals allow, see pacing.ts), and a retry budget.
 *
 * Sliding windows: what a request takes is given back one window later (our
 * own timers and `incrementReservoir`), so no window ever holds more than
 * the limit, and throughput does not depend on Bottleneck's heartbeat
 * (reservoir refills fire up to 250 ms late) or on `updateSettings` (which
 * stops refills for good, Bottleneck issue 185). Units come back 1% after the
 * window: the server counts a request when it arrives, a few ms after we
 * count it, and with equal windows that jitter alone drew 1.5% 429s at the
 * token limit (0 of 6,000 with the margin, which also caps the pace at 99%;
 * see bench/RESULTS.md).
 *
 * Leases: Bottleneck's in-memory store yields a macrotask under a lock on
 * every submit, which caps it near 430 jobs/s whatever the limits. So the
 * run does not submit a job per request: it takes units from Bottleneck in
 * leases (up to a quarter of a window when the reservoir holds that much,
 * else just what the waiting request needs) and hands them out synchronously. A unit leased and not yet used sits idle in the
 * lease; a unit used comes back to Bottleneck one window after its use, so
 * the window property holds unit by unit: each of a window's units is used
 * at most once per window.
 *
 * Requests: a window of 60,000 * g / rpm ms holding g requests, with g
 * = max(1, floor(rpm / 60)): 20 requests per second at 1,200 per minute, so
 * any minute holds at most the limit and the pace is smooth. Tokens: a 1 s
 * window of the tokens-per-second limit. A request heavier than a whole
 * window waits for an empty window and is counted at the window's size.
 */
import Bottleneck from "bottleneck";
import { sleep } from "../../api/retry.js";
import { Pace, RetryBudget, type AttemptOutcome, type PaceReport, type PaceSettings } from "./pacing.js";

export interface LimiterOptions {
  requestsPerMinute: number;
  tokensPerSecond: number;
  /** Overrides of the pacing thresholds (tests, benchmarks). */
  pace?: Partial<PaceSettings>;
  /** For tests. */
  now?: () => number;
}

/** The default service limits (spec section 6), shared by every command that paces requests. */
export const DEFAULT_LIMITS = { requestsPerMinute: 1200, tokensPerSecond: 250_000 } as const;

/** Extra delay before a window gives units back, as a share of the window. */
const TRANSIT_MARGIN = 0.01;

/** A Bottleneck reservoir managed as a sliding window, handed out from leases. */
class Window {
  private readonly bottleneck: Bottleneck;
  /** Units leased from Bottleneck and not yet used. */
  private local = 0;
  private leasing = false;
  private stopped = false;
  private readonly waiting: { n: number; resolve: () => void; reject: (error: unknown) => void }[] = [];
  /** Units due back, by the time slot they return in: one timer per slot, not per request. */
  private readonly due = new Map<number, number>();
  /** The sum of `due`: with `local`, what the reservoir lacks of its size (size = reservoir + local + dueTotal). */
  private dueTotal = 0;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly slotMs: number;
  /** Bottleneck jobs submitted (leases), for the benchmark. */
  leases = 0;

  constructor(
    readonly size: number,
    readonly windowMs: number,
    private readonly leaseSize: number,
  ) {
    this.bottleneck = new Bottleneck({ reservoir: size, maxConcurrent: null });
    // Returns are rounded up to a slot (later, never earlier): at most 0.2% of a window.
    this.slotMs = Math.max(1, windowMs / 500);
  }

  /**
   * Takes `n` units: at once (undefined) when the lease holds them and nobody
   * waits, else a promise. One that `signal` aborts leaves the queue at once,
   * rejected with its reason, having taken nothing.
   */
  take(n: number, signal?: AbortSignal): Promise<void> | undefined {
    const units = Math.max(1, Math.min(Math.ceil(n), this.size));
    if (this.waiting.length === 0 && this.local >= units) {
      this.local -= units;
      this.returnLater(units);
      return undefined;
    }
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const leave = () => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(signal?.reason);
        // The one that was first may have held the others back.
        if (at === 0) this.pump();
      };
      const waiter = {
        n: units,
        resolve: () => {
          signal?.removeEventListener("abort", leave);
          resolve();
        },
        reject: (error: unknown) => {
          signal?.removeEventListener("abort", leave);
          reject(error);
        },
      };
      signal?.addEventListener("abort", leave, { once: true });
      this.waiting.push(waiter);
      this.pump();
    });
  }

  /** Units a request took beyond its estimate (a reconciled underestimate), returned one window later. */
  takeMore(n: number): void {
    const units = Math.min(Math.ceil(n), this.size);
    if (units <= 0) return;
    const fromLease = Math.min(this.local, units);
    this.local -= fromLease;
    // The reservoir may go below zero: leases then wait for returns, which is the point.
    if (units > fromLease) void this.bottleneck.incrementReservoir(-(units - fromLease));
    this.returnLater(units);
  }

  private pump(): void {
    while (this.waiting.length > 0 && this.local >= this.waiting[0]!.n) {
      const next = this.waiting.shift()!;
      this.local -= next.n;
      this.returnLater(next.n);
      next.resolve();
    }
    if (this.waiting.length === 0 || this.leasing || this.stopped) return;
    // What the reservoir holds now, by our own count. A lease takes a batch when the reservoir has it, and no more than the
    // waiting request needs when it has not (waiting for a batch would leave the window idle).
    const need = this.waiting[0]!.n - this.local;
    const available = this.size - this.local - this.dueTotal;
    const weight = available >= need ? Math.max(need, Math.min(this.leaseSize, available)) : need;
    this.leasing = true;
    this.leases++;
    this.bottleneck
      .schedule({ weight }, () => Promise.resolve())
      .then(
        () => {
          this.leasing = false;
          this.local += weight;
          this.pump();
        },
        (error: unknown) => {
          this.leasing = false;
          for (const w of this.waiting.splice(0)) w.reject(error);
        },
      );
  }

  private returnLater(amount: number): void {
    const at = Math.ceil((Date.now() + this.windowMs * (1 + TRANSIT_MARGIN)) / this.slotMs) * this.slotMs;
    this.dueTotal += amount;
    const pending = this.due.get(at);
    if (pending !== undefined) return void this.due.set(at, pending + amount);
    this.due.set(at, amount);
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      const back = this.due.get(at) ?? 0;
      this.due.delete(at);
      this.dueTotal -= back;
      if (!this.stopped) void this.bottleneck.incrementReservoir(back);
    }, at - Date.now());
    this.timers.add(timer);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const w of this.waiting.splice(0)) w.reject(new Error("the limiter stopped"));
    await this.bottleneck.stop({ dropWaitingJobs: true });
  }
}

export class RunLimiter {
  private readonly requests: Window;
  private readonly tokens: Window;
  private heldUntil = 0;
  private readonly pace: Pace;
  private readonly budget: RetryBudget;
  /** When the next request may go while the pace is below the limit. */
  private nextAt = 0;
  private readonly now: () => number;

  constructor(readonly options: LimiterOptions) {
    const rpm = options.requestsPerMinute;
    const group = Math.max(1, Math.floor(rpm / 60));
    this.requests = new Window(group, (60_000 * group) / rpm, Math.max(1, Math.min(256, Math.floor(group / 4))));
    this.tokens = new Window(options.tokensPerSecond, 1000, Math.max(1, Math.min(4_000_000, Math.floor(options.tokensPerSecond / 4))));
    // Monotonic: a wall clock stepped back (NTP) would otherwise hold every request until it caught up.
    this.now = options.now ?? (() => performance.now());
    this.pace = new Pace(this.now, options.pace);
    // Retries refill at 5% of the request limit per second (at least one a second) when nothing succeeds.
    this.budget = new RetryBudget(Math.max(1, (rpm / 60) * 0.05), this.now);
  }

  /**
   * Runs `fn` once no hold is in force, the pace allows, and both windows
   * have room for one request of `tokens` estimated tokens. Every attempt
   * comes through here, retries included. `signal` ends the wait: an attempt
   * still waiting when it aborts leaves the limiter at once, rejected with
   * its reason, `fn` never called (at --rpm 2 a queue of 32 would otherwise
   * hold a stopped run for 16 minutes).
   */
  async schedule<T>(tokens: number, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    for (let wait = this.heldUntil - this.now(); wait > 0; wait = this.heldUntil - this.now()) await sleep(wait, signal);
    this.pace.update();
    const pace = this.pace.current;
    if (pace < 1) {
      // Below the limit: space requests evenly at the pace's share of both limits.
      const interval = Math.max(60_000 / (this.options.requestsPerMinute * pace), (Math.max(1, tokens) * 1000) / (this.options.tokensPerSecond * pace));
      const t = this.now();
      const at = Math.max(t, this.nextAt);
      this.nextAt = at + interval;
      if (at > t) await sleep(at - t, signal);
    } else {
      this.nextAt = 0;
    }
    const t = this.tokens.take(Math.min(tokens, this.tokens.size), signal);
    if (t) await t;
    const r = this.requests.take(1, signal);
    if (r) await r;
    signal?.throwIfAborted();
    return fn();
  }

  /** Corrects a request's token estimate with what it really used. */
  settle(estimated: number, actual: number): void {
    const counted = Math.max(1, Math.min(Math.ceil(estimated), this.tokens.size));
    const extra = Math.min(actual, this.tokens.size) - counted;
    if (extra > 0) this.tokens.takeMore(extra);
  }

  /** Holds every new attempt back until `ms` from now: a 429 that says how long (the limit is the account's). */
  hold(ms: number): void {
    this.heldUntil = Math.max(this.heldUntil, this.now() + ms);
  }

  /** What an attempt came to: feeds the pace and the retry budget. */
  observe(outcome: AttemptOutcome): void {
    this.pace.record(outcome);
    if (outcome === "ok") this.budget.success();
  }

  /** Waits until the retry budget allows one more retry, and spends it. */
  async retryPermit(signal?: AbortSignal): Promise<void> {
    for (let wait = this.budget.take(); wait > 0; wait = this.budget.take()) await sleep(wait, signal);
  }

  paceReport(): PaceReport {
    return this.pace.report();
  }

  /** Bottleneck jobs submitted so far (each a lease of many requests or tokens). */
  get leases(): number {
    return this.requests.leases + this.tokens.leases;
  }

  async stop(): Promise<void> {
    await Promise.all([this.requests.stop(), this.tokens.stop()]);
  }
}
