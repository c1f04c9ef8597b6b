/**
 * Order-free statistics: the same gold rows and answers in any order give the
 * same calibration method, the same folds, the same bootstrap intervals and
 * the same numbers (bit for bit: rows are summed in key order).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { QuestionInfo } from "../../src/quality/answers.js";
import { assessQuestion, Rows } from "../../src/quality/assess.js";
import { pickThreshold } from "../../src/quality/thresholds.js";
import { seededRandom } from "../../src/quality/metrics.js";
import { keyedBits, keyedFolds, keyedWeights, PURPOSE, recordKey, streamOf } from "../../src/quality/resample.js";
import { fitQuestion } from "../../src/quality/calibrate.js";

interface Row {
  id: string;
  p: number[];
  y: number;
}

/** Rows of a k-option question, answered by a sharpened version of the distribution the gold was drawn from. */
function synthetic(n: number, k: number, seed: number): Row[] {
  const random = seededRandom(seed);
  return Array.from({ length: n }, (_, i) => {
    const w = Array.from({ length: k }, () => Math.exp(4 * random()));
    const t = w.reduce((a, b) => a + b, 0);
    const truth = w.map((x) => x / t);
    let u = random();
    let y = 0;
    while (y < k - 1 && (u -= truth[y] as number) > 0) y++;
    const sharp = truth.map((x) => x ** 1.6);
    const s = sharp.reduce((a, b) => a + b, 0);
    return { id: `rec-${seed}-${i}`, p: sharp.map((x) => x / s), y };
  });
}

function rowsOf(list: readonly Row[], k: number): Rows {
  const rows = new Rows(k);
  for (const r of list) rows.push(r.p, r.y, -1, r.id);
  return rows;
}

const infoOf = (k: number): QuestionInfo =>
  k === 2 ? { name: "q", type: "noul", labels: ["false", "true"] } : { name: "q", type: "choice", labels: Array.from({ length: k }, (_, i) => `o${i}`) };

describe("order-free statistics", () => {
  it("shuffled rows give the same assessment, calibration choice and thresholds, bit for bit", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 4 }),
        fc.integer({ min: 40, max: 160 }),
        fc.integer({ min: 1, max: 1000 }),
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        (k, n, seed, shuffleSeed) => {
          const list = synthetic(n, k, seed);
          const random = seededRandom(shuffleSeed);
          const shuffled = [...list];
          for (let i = shuffled.length - 1; i > 0; i--) {
            const j = Math.floor(random() * (i + 1));
            [shuffled[i], shuffled[j]] = [shuffled[j] as Row, shuffled[i] as Row];
          }
          const info = infoOf(k);
          const options = { seed: 3, bootstrap: 40, noiseDraws: 40 };
          expect(assessQuestion(info, rowsOf(shuffled, k), options)).toEqual(assessQuestion(info, rowsOf(list, k), options));
          const fit = { method: "auto" as const, folds: 5, seed: 2 };
          expect(fitQuestion(info, rowsOf(shuffled, k), fit)).toEqual(fitQuestion(info, rowsOf(list, k), fit));
          const t = { metric: "accuracy" as const, value: 0.8 };
          expect(pickThreshold(info, rowsOf(shuffled, k), t, { minSupport: 5 })).toEqual(pickThreshold(info, rowsOf(list, k), t, { minSupport: 5 }));
        },
      ),
      { numRuns: 25 },
    );
  });

  it("a row's bootstrap weight depends on its id and the seed only, with Poisson(1)'s mean and variance", () => {
    const n = 20_000;
    const keys = { hi: new Uint32Array(n), lo: new Uint32Array(n) };
    for (let i = 0; i < n; i++) [keys.hi[i], keys.lo[i]] = recordKey(`id${i}`);
    const w = keyedWeights(keys, n, 1, 0, new Uint8Array(n));
    const mean = w.reduce((a, b) => a + b, 0) / n;
    const variance = w.reduce((a, b) => a + (b - mean) ** 2, 0) / n;
    expect(Math.abs(mean - 1)).toBeLessThan(0.03);
    expect(Math.abs(variance - 1)).toBeLessThan(0.05);
    // The same id keeps its weight when the other rows change; another draw or seed moves it.
    const one = { hi: keys.hi.subarray(7, 8), lo: keys.lo.subarray(7, 8) };
    expect(keyedWeights(one, 1, 1, 0, new Uint8Array(1))[0]).toBe(w[7]);
    const other = keyedWeights(keys, n, 1, 1, new Uint8Array(n));
    const seedTwo = keyedWeights(keys, n, 2, 0, new Uint8Array(n));
    expect(other.filter((v, i) => v !== w[i]).length).toBeGreaterThan(n / 3);
    expect(seedTwo.filter((v, i) => v !== w[i]).length).toBeGreaterThan(n / 3);
    // Successive draws are independent: their weights do not correlate.
    let cov = 0;
    for (let i = 0; i < n; i++) cov += ((w[i] as number) - 1) * ((other[i] as number) - 1);
    expect(Math.abs(cov / n)).toBeLessThan(0.03);
  });

  it("each weight is the Poisson(1) draw of the row's keyed 32-bit uniform (the table lookup changes no weight)", () => {
    const n = 200_000;
    const keys = { hi: new Uint32Array(n), lo: new Uint32Array(n) };
    for (let i = 0; i < n; i++) [keys.hi[i], keys.lo[i]] = recordKey(`k${i}`);
    // P(K <= k) for K ~ Poisson(1), scaled to 32 bits, searched row by row.
    const cdf: number[] = [];
    for (let k = 0, p = Math.exp(-1), c = p; k < 12; k++, p /= k, c += p) cdf.push(Math.min(4294967295, Math.floor(c * 4294967296)));
    for (const [seed, draw] of [
      [1, 0],
      [7, 199],
    ] as const) {
      const w = keyedWeights(keys, n, seed, draw, new Uint8Array(n));
      const stream = streamOf(seed, PURPOSE.bootstrap, draw);
      let differ = 0;
      for (let i = 0; i < n; i++) {
        const u = keyedBits(keys.hi[i] as number, keys.lo[i] as number, stream);
        let k = 0;
        while (k < 12 && u > (cdf[k] as number)) k++;
        if (k !== w[i]) differ++;
      }
      expect(differ).toBe(0);
      // Rows at 5 or more draws exist at this n, so the rare branch past the table runs too.
      expect(w.some((x) => x >= 5)).toBe(true);
    }
  });

  it("folds are equal in size (within one) and follow the seed", () => {
    const n = 103;
    const keys = { hi: new Uint32Array(n), lo: new Uint32Array(n) };
    for (let i = 0; i < n; i++) [keys.hi[i], keys.lo[i]] = recordKey(`r${i}`);
    const fold = keyedFolds(keys, n, 1, 5);
    const sizes = [0, 1, 2, 3, 4].map((f) => fold.filter((x) => x === f).length);
    expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
    expect(Array.from(keyedFolds(keys, n, 2, 5))).not.toEqual(Array.from(fold));
  });
});
