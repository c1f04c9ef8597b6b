/**
 * Seeded trials for checking the ECE interval's coverage (bench/ece-coverage.ts
 * runs 1,000 per setting; test/quality/ece-interval.test.ts a few).
 *
 * A trial draws n answers of a yes/no question whose true probability pi is
 * uniform on (0, 1); the gold label is yes with probability pi, and the model
 * answers p = sigmoid(sharpness * logit(pi)). Top-label confidence is
 * c = max(p, 1 - p), the row is right with probability a(c) = max(pi, 1 - pi),
 * and max(pi, 1 - pi) is uniform on (1/2, 1).
 *
 * The estimand, the population's binned ECE over the 15 equal-width bins,
 * is then known exactly:
 *   sum_b | integral over {u in (1/2, 1): c(u) in bin b} of (u - c(u)) 2 du |
 * with c(u) = sigmoid(sharpness * logit(u)). At sharpness 1 the model is
 * calibrated and it is 0; otherwise it is integrated below on a fine grid.
 */
import { binOf, ECE_BINS, seededRandom } from "../../src/quality/metrics.js";

const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));
const logit = (u: number) => Math.log(u / (1 - u));

/** The population's binned ECE of the model that answers sigmoid(sharpness * logit(pi)). */
export function trueBinnedEce(sharpness: number, grid = 2_000_000): number {
  if (sharpness === 1) return 0;
  const gap = new Float64Array(ECE_BINS);
  for (let i = 0; i < grid; i++) {
    const u = 0.5 + (0.5 * (i + 0.5)) / grid;
    const c = sigmoid(sharpness * logit(u));
    // Density of u is 2 on (1/2, 1); each grid cell has width 0.5 / grid.
    gap[binOf(c)]! += (u - c) * 2 * (0.5 / grid);
  }
  return gap.reduce((s, g) => s + Math.abs(g), 0);
}

/** One trial's top-label confidences and right/wrong flags. */
export function trial(n: number, sharpness: number, seed: number): { confidence: Float64Array; correct: Uint8Array } {
  const random = seededRandom(seed);
  const confidence = new Float64Array(n);
  const correct = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    const pi = Math.min(1 - 1e-12, Math.max(1e-12, random()));
    const p = sigmoid(sharpness * logit(pi));
    const yes = random() < pi;
    confidence[i] = Math.max(p, 1 - p);
    correct[i] = p > 0.5 === yes ? 1 : 0;
  }
  return { confidence, correct };
}
