/**
 * The run's limiter, on Bottleneck: one limiter for requests (also bounding
 * concurrency), one for tokens, nested with `schedule`.
 *
 * Each reservoir is a sliding window: what a job takes is given back one
 * window later (our own timer and `incrementReservoir`), so no window ever
 * holds more than the limit, and throughput does not depend on Bottleneck's
 * heartbeat (reservoir refills fire up to 250 ms late) or on `updateSettings`
 * (which stops refills for good, Bottleneck issue 185). Units come back 2%
 * after the window: the server counts a request when it arrives, a few ms
 * after we count it, and with equal windows that jitter alone drew 1.5% 429s
 * at the token limit (0.0% with the margin; see bench/RESULTS.md).
 *
 * Requests: a window of 60,000 * g / rpm ms holding g requests, with g
 * = max(1, floor(rpm / 60)): 20 requests per second at 1,200 per minute, so
 * any minute holds at most the limit and the pace is smooth. Tokens: a 1 s
 * window of the tokens-per-second limit. A job heavier than a whole window
 * waits for an empty window and is counted at the window's size.
 */
import Bottleneck from "bottleneck";

export interface LimiterOptions {
  requestsPerMinute: number;
  tokensPerSecond: number;
  /** Requests in flight at once. */
  concurrency: number;
}

/** Extra delay before a window gives units back, as a share of the window. */
const TRANSIT_MARGIN = 0.02;

/** A Bottleneck reservoir managed as a sliding window. */
class Window {
  readonly limiter: Bottleneck;
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(
    readonly size: number,
    readonly windowMs: number,
    maxConcurrent: number | null,
  ) {
    this.limiter = new Bottleneck({ reservoir: size, maxConcurrent });
  }

  /** Gives `amount` back to the window `windowMs` from now. */
  returnLater(amount: number): void {
    if (amount <= 0) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      void this.limiter.incrementReservoir(amount);
    }, this.windowMs * (1 + TRANSIT_MARGIN));
    this.timers.add(timer);
  }

  /** Takes `amount` more now (a reconciled underestimate), returned one window later. */
  async takeNow(amount: number): Promise<void> {
    await this.limiter.incrementReservoir(-amount);
    this.returnLater(amount);
  }

  async stop(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await this.limiter.stop({ dropWaitingJobs: true });
  }
}

export class RunLimiter {
  private readonly requests: Window;
  private readonly tokens: Window;
  private pausedUntil = 0;

  constructor(readonly options: LimiterOptions) {
    const rpm = options.requestsPerMinute;
    const group = Math.max(1, Math.floor(rpm / 60));
    this.requests = new Window(group, (60_000 * group) / rpm, options.concurrency);
    this.tokens = new Window(options.tokensPerSecond, 1000, null);
  }

  /**
   * Runs `fn` once both windows have room for one request of `tokens`
   * estimated tokens, and no pause is in force. Every attempt comes through
   * here, retries included.
   */
  async schedule<T>(tokens: number, fn: () => Promise<T>): Promise<T> {
    for (let wait = this.pausedUntil - Date.now(); wait > 0; wait = this.pausedUntil - Date.now()) {
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
    const weight = Math.max(1, Math.min(Math.ceil(tokens), this.tokens.size));
    return this.tokens.limiter.schedule({ weight }, () => {
      this.tokens.returnLater(weight);
      return this.requests.limiter.schedule({ weight: 1 }, () => {
        this.requests.returnLater(1);
        return fn();
      });
    });
  }

  /** Corrects a request's token estimate with what it really used. */
  async settle(estimated: number, actual: number): Promise<void> {
    const counted = Math.max(1, Math.min(Math.ceil(estimated), this.tokens.size));
    const extra = Math.min(actual, this.tokens.size) - counted;
    if (extra > 0) await this.tokens.takeNow(extra);
  }

  /** Holds every new attempt back until `ms` from now (a 429 or 529 slows the whole run). */
  pause(ms: number): void {
    this.pausedUntil = Math.max(this.pausedUntil, Date.now() + ms);
  }

  async stop(): Promise<void> {
    await Promise.all([this.requests.stop(), this.tokens.stop()]);
  }
}
