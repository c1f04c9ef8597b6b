/** The pace and the retry budget on a fake clock: each transition where the design puts it. */
import { describe, expect, it } from "vitest";
import { Pace, RetryBudget, type AttemptOutcome } from "../../src/runner/send/pacing.js";
import { seededRandom } from "../../src/quality/metrics.js";

function clock() {
  let t = 0;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

/** `n` attempts spread over `ms`, each drawn by `pick`. */
function traffic(pace: Pace, c: ReturnType<typeof clock>, n: number, ms: number, pick: (i: number) => AttemptOutcome): void {
  for (let i = 0; i < n; i++) {
    c.advance(ms / n);
    pace.record(pick(i));
  }
}

describe("Pace", () => {
  it("cuts to a quarter in one window of nothing but 529s, at most once per window", () => {
    const c = clock();
    const pace = new Pace(c.now);
    traffic(pace, c, 15, 300, () => "overloaded");
    expect(pace.current).toBe(1); // 15 refusals: the window is not yet decided
    traffic(pace, c, 1, 1, () => "overloaded");
    expect(pace.current).toBe(0.25); // 16: half a window of refusals decides
    traffic(pace, c, 10, 100, () => "overloaded"); // the next window has not closed
    expect(pace.current).toBe(0.25);
    traffic(pace, c, 6, 200, () => "overloaded");
    expect(pace.current).toBeCloseTo(0.0625);
    expect(pace.report().cuts).toBe(2);
  });

  it("never goes below the floor, and a long window decides with few attempts", () => {
    const c = clock();
    const pace = new Pace(c.now);
    for (let w = 0; w < 10; w++) traffic(pace, c, 3, 2000, () => "overloaded");
    expect(pace.current).toBe(0.01);
  });

  it("wins the pace back additively on clean windows: 30% of the limit per second", () => {
    const c = clock();
    const pace = new Pace(c.now);
    traffic(pace, c, 32, 250, () => "overloaded");
    expect(pace.current).toBe(0.25);
    traffic(pace, c, 32, 500, () => "ok");
    expect(pace.current).toBeCloseTo(0.4);
    traffic(pace, c, 100, 5000, () => "ok");
    expect(pace.current).toBe(1);
    const report = pace.report();
    expect(report.lowest).toBe(0.25);
    expect(report.seconds_below_limit).toBeGreaterThan(3);
    expect(report.mean).toBeLessThan(1);
  });

  it("recovers while idle: the next request closes the window", () => {
    const c = clock();
    const pace = new Pace(c.now);
    traffic(pace, c, 32, 250, () => "overloaded");
    c.advance(5000);
    pace.update();
    expect(pace.current).toBe(1);
  });

  it("barely slows down for sporadic 529s (5%) and 500s (5%)", () => {
    const c = clock();
    const pace = new Pace(c.now);
    const random = seededRandom(7);
    traffic(pace, c, 100_000, 1_000_000, () => {
      const x = random();
      return x < 0.05 ? "overloaded" : x < 0.1 ? "failed" : "ok";
    });
    // A window of 32 holds 8 or more 529s about once in 2,000 windows by chance.
    expect(pace.report().cuts).toBeLessThanOrEqual(3);
    expect(pace.report().mean).toBeGreaterThan(0.995);
  });

  it("cuts on 429s (the endpoint's limit is below ours), with or without a delay", () => {
    const c = clock();
    const held = new Pace(c.now);
    traffic(held, c, 40, 500, (i) => (i % 2 ? "held" : "ok"));
    expect(held.current).toBe(0.5);
    const throttled = new Pace(c.now);
    traffic(throttled, c, 32, 300, (i) => (i < 2 ? "throttled" : "ok"));
    // 2 of 32 refused: the share that got through, 30/32.
    expect(throttled.current).toBeCloseTo(0.9375);
    // More 429s within the second after that cut are the same excursion: no second cut.
    traffic(throttled, c, 32, 300, (i) => (i < 4 ? "throttled" : "ok"));
    expect(throttled.current).toBeCloseTo(0.9375);
    traffic(throttled, c, 32, 800, (i) => (i < 4 ? "throttled" : "ok"));
    expect(throttled.current).toBeCloseTo(0.9375 * 0.875);
  });

  it("holds near an endpoint that silently allows half the limit: at least 45% achieved, under 5% refused", () => {
    const c = clock();
    const pace = new Pace(c.now);
    const random = seededRandom(3);
    let achieved = 0;
    let rejected = 0;
    let sent = 0;
    // 100 attempts a second at pace 1; the endpoint takes 50 a second and refuses the excess at random.
    for (let ms = 0; ms < 120_000; ms += 10) {
      c.advance(10);
      const rate = 100 * pace.current;
      if (random() >= rate / 100) continue;
      sent++;
      const ok = random() < Math.min(1, 50 / rate);
      if (ok) achieved++;
      else rejected++;
      pace.record(ok ? "ok" : "throttled");
    }
    const perSecond = achieved / 120;
    expect(perSecond).toBeGreaterThan(45);
    expect(rejected / sent).toBeLessThan(0.05);
  });
});

describe("RetryBudget", () => {
  it("spends what successes earn, then waits for the slow refill", () => {
    const c = clock();
    const budget = new RetryBudget(2, c.now, 0.2, 100, 3);
    expect([budget.take(), budget.take(), budget.take()]).toEqual([0, 0, 0]);
    expect(budget.take()).toBe(500); // 1 retry at 2 a second
    for (let i = 0; i < 5; i++) budget.success();
    expect(budget.take()).toBe(0);
    c.advance(500);
    expect(budget.take()).toBe(0);
  });

  it("a 12% fault rate never runs it dry", () => {
    const c = clock();
    const budget = new RetryBudget(1, c.now);
    const random = seededRandom(11);
    let waited = 0;
    for (let i = 0; i < 100_000; i++) {
      c.advance(10);
      // Each record: attempts until one succeeds, each failing with probability 0.12.
      while (random() < 0.12) if (budget.take() > 0) waited++;
      budget.success();
    }
    expect(waited).toBe(0);
  });
});
