/**
 * The ECE interval on synthetic answers whose population binned ECE is known
 * (test/support/calibration-trials.ts): a reduced run of bench/ece-coverage.ts
 * (1,000 trials per setting, figures in bench/RESULTS.md).
 */
import { describe, expect, it } from "vitest";
import { calibrationError, eceWithInterval } from "../../src/quality/metrics.js";
import { trial, trueBinnedEce } from "../support/calibration-trials.js";

function coverage(n: number, sharpness: number, trials: number): { covered: number; holds: number; estimate: number; plugIn: number } {
  const truth = trueBinnedEce(sharpness, 200_000);
  const out = { covered: 0, holds: 0, estimate: 0, plugIn: 0 };
  for (let t = 0; t < trials; t++) {
    const { confidence, correct } = trial(n, sharpness, 31 * t + n);
    const r = eceWithInterval(confidence, correct, { seed: t + 1 });
    if (r.interval[0] <= truth && truth <= r.interval[1]) out.covered += 1 / trials;
    if (r.interval[0] <= r.estimate && r.estimate <= r.interval[1]) out.holds += 1 / trials;
    out.estimate += r.estimate / trials;
    out.plugIn += calibrationError(confidence, correct).ece / trials;
  }
  return out;
}

describe("ECE with noise removed", () => {
  it("the known estimand: 0 for a calibrated model, about 0.059 for one sharpened 1.5 times", () => {
    expect(trueBinnedEce(1)).toBe(0);
    expect(trueBinnedEce(1.5, 200_000)).toBeCloseTo(0.0587, 3);
  });

  it("on calibrated answers: the interval covers 0 in about 95% of trials and holds its estimate in all", () => {
    const c = coverage(500, 1, 120);
    expect(c.covered).toBeGreaterThan(0.9);
    expect(c.holds).toBeCloseTo(1, 9);
    // The plug-in reads about 0.04 here; the estimate removes most of that.
    expect(c.estimate).toBeLessThan(c.plugIn / 2);
  });

  it("on overconfident answers: covers the true binned ECE and estimates it without the plug-in's bias", () => {
    const truth = trueBinnedEce(1.5, 200_000);
    const c = coverage(500, 1.5, 120);
    expect(c.covered).toBeGreaterThan(0.88);
    expect(c.covered).toBeLessThan(0.995);
    expect(Math.abs(c.estimate - truth)).toBeLessThan(0.006);
    expect(c.plugIn - truth).toBeGreaterThan(0.01);
  });

  it("is the same for the same seed, and a clear miscalibration gets an interval above 0", () => {
    const { confidence, correct } = trial(3000, 2, 5);
    const a = eceWithInterval(confidence, correct, { seed: 3 });
    expect(eceWithInterval(confidence, correct, { seed: 3 })).toEqual(a);
    expect(a.interval[0]).toBeGreaterThan(0.05);
    expect(a.interval[0]).toBeLessThanOrEqual(a.estimate);
    expect(a.estimate).toBeLessThanOrEqual(a.interval[1]);
  });
});
