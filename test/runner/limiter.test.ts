import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { RunLimiter } from "../../src/runner/send/limiter.js";

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

/** The largest sum of `weights` started within any window of `windowMs`. */
function busiestWindow(starts: { at: number; weight: number }[], windowMs: number): number {
  let best = 0;
  for (const s of starts) {
    const sum = starts.filter((o) => o.at >= s.at && o.at < s.at + windowMs).reduce((a, o) => a + o.weight, 0);
    best = Math.max(best, sum);
  }
  return best;
}

describe("RunLimiter under fake timers", () => {
  it("never starts more than the requests per minute in any minute, and keeps the pace", async () => {
    const limiter = new RunLimiter({ requestsPerMinute: 120, tokensPerSecond: 1e9 });
    const starts: { at: number; weight: number }[] = [];
    const jobs = Array.from({ length: 400 }, () => limiter.schedule(10, async () => void starts.push({ at: Date.now(), weight: 1 })));
    await vi.advanceTimersByTimeAsync(220_000);
    await Promise.all(jobs);
    expect(starts).toHaveLength(400);
    expect(busiestWindow(starts, 60_000)).toBeLessThanOrEqual(120);
    // 2 per second (less the 1% transit margin): 400 requests take about 200 s, not much more.
    expect(starts.at(-1)!.at).toBeLessThanOrEqual(200_000 * 1.02);
    expect(starts.at(-1)!.at).toBeGreaterThanOrEqual(199_000 - 1000);
    await limiter.stop();
  });

  it("never starts more than the tokens per second in any second", async () => {
    const limiter = new RunLimiter({ requestsPerMinute: 1e6, tokensPerSecond: 1000 });
    const starts: { at: number; weight: number }[] = [];
    const weights = Array.from({ length: 300 }, (_, i) => 50 + ((i * 37) % 200));
    const jobs = weights.map((w) => limiter.schedule(w, async () => void starts.push({ at: Date.now(), weight: w })));
    await vi.advanceTimersByTimeAsync(100_000);
    await Promise.all(jobs);
    expect(starts).toHaveLength(300);
    expect(busiestWindow(starts, 1000)).toBeLessThanOrEqual(1000);
    const total = weights.reduce((a, b) => a + b, 0);
    const mean = total / weights.length;
    // Sustains the limit, less what FIFO leaves idle while the next job waits for room:
    // about half a mean job per window (here 7.5%; 0.2% at 250,000 tokens/s and 1,000-token requests).
    expect(starts.at(-1)!.at).toBeLessThanOrEqual((total / 1000) * 1000 * (1 + mean / 1000) * 1.02);
    await limiter.stop();
  });

  it("counts a reconciled underestimate against the window", async () => {
    const limiter = new RunLimiter({ requestsPerMinute: 1e6, tokensPerSecond: 1000 });
    const starts: number[] = [];
    const first = limiter.schedule(100, async () => void starts.push(Date.now()));
    await vi.advanceTimersByTimeAsync(10);
    await first;
    limiter.settle(100, 1000); // it really used a whole second's worth
    await vi.advanceTimersByTimeAsync(10);
    const next = limiter.schedule(100, async () => void starts.push(Date.now()));
    await vi.advanceTimersByTimeAsync(2000);
    await next;
    expect(starts[1]! - starts[0]!).toBeGreaterThanOrEqual(1000);
    await limiter.stop();
  });

  it("holds every new attempt after a 429 until the delay passes", async () => {
    const limiter = new RunLimiter({ requestsPerMinute: 1e6, tokensPerSecond: 1e9 });
    limiter.hold(5000);
    const starts: number[] = [];
    const jobs = [1, 2, 3].map(() => limiter.schedule(1, async () => void starts.push(Date.now())));
    await vi.advanceTimersByTimeAsync(10_000);
    await Promise.all(jobs);
    expect(starts.every((t) => t >= 5000)).toBe(true);
    await limiter.stop();
  });

  it("an attempt waiting in the limiter leaves it the moment its signal aborts, unsent, and the queue behind it still moves", async () => {
    // --rpm 2: one request per 30 s. Four queued behind the first would hold a stopped run for 90 s.
    const limiter = new RunLimiter({ requestsPerMinute: 2, tokensPerSecond: 1e9 });
    const sent: number[] = [];
    const stop = new AbortController();
    const first = limiter.schedule(1, async () => void sent.push(Date.now()));
    const queued = [1, 2, 3, 4].map(() => limiter.schedule(1, async () => void sent.push(Date.now()), stop.signal));
    const settled = queued.map((job) =>
      job.then(
        () => "sent",
        () => Date.now(),
      ),
    );
    const other = limiter.schedule(1, async () => void sent.push(Date.now()));
    await vi.advanceTimersByTimeAsync(1000);
    await first;
    expect(sent).toHaveLength(1);
    stop.abort(new Error("stopped"));
    await vi.advanceTimersByTimeAsync(0);
    // Left at once (t = 1 s), none of them sent.
    expect(await Promise.all(settled)).toEqual([1000, 1000, 1000, 1000]);
    await expect(queued[0]).rejects.toThrow("stopped");
    expect(sent).toHaveLength(1);
    // The request queued behind them is not held up by them: it goes one window (30 s, plus the 1% margin) after the first.
    await vi.advanceTimersByTimeAsync(31_000);
    await other;
    expect(sent).toHaveLength(2);
    expect(sent[1]! - sent[0]!).toBeLessThanOrEqual(30_400);
    // A signal already aborted never waits.
    const late = limiter.schedule(1, async () => void sent.push(Date.now()), stop.signal);
    await expect(late).rejects.toThrow("stopped");
    await limiter.stop();
  });

  it("takes units from Bottleneck in leases, not one job per request", async () => {
    const limiter = new RunLimiter({ requestsPerMinute: 1e12, tokensPerSecond: 1e15 });
    let ran = 0;
    const jobs = Array.from({ length: 5000 }, () => limiter.schedule(1000, async () => void ran++));
    await vi.advanceTimersByTimeAsync(1000);
    await Promise.all(jobs);
    expect(ran).toBe(5000);
    // Two windows, each leasing a batch at a time: a handful of Bottleneck jobs, not 10,000.
    expect(limiter.leases).toBeLessThan(100);
    await limiter.stop();
  });

  it("spaces requests at the pace's share of the limits once the endpoint signals overload", async () => {
    const limiter = new RunLimiter({ requestsPerMinute: 6000, tokensPerSecond: 1e9 });
    // A window of 529s: the pace falls to a quarter.
    for (let i = 0; i < 20; i++) limiter.observe("overloaded");
    await vi.advanceTimersByTimeAsync(300);
    for (let i = 0; i < 20; i++) limiter.observe("overloaded");
    const pace = limiter.paceReport().current;
    expect(pace).toBe(0.25);
    const starts: number[] = [];
    const t0 = Date.now();
    const jobs = Array.from({ length: 50 }, () => limiter.schedule(1, async () => void starts.push(Date.now() - t0)));
    await vi.advanceTimersByTimeAsync(60_000);
    await Promise.all(jobs);
    // 100 requests/s at the limit, 25/s at the pace (it recovers as windows stay clean, so no slower than that).
    expect(
      busiestWindow(
        starts.map((at) => ({ at, weight: 1 })),
        1000,
      ),
    ).toBeLessThanOrEqual(26);
    await limiter.stop();
  });
});
