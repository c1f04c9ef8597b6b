import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { classFigures, weakestClass } from "../../src/quality/metric-table.js";
import {
  accuracyOf,
  balancedAccuracyOf,
  auroc,
  averagePrecision,
  brier,
  calibrationError,
  confusion,
  eceNoiseFloor,
  expectedLevel,
  kappaOf,
  logLoss,
  macroF1Of,
  maeExpected,
  orderBy,
  orderDescending,
  predictions,
  rankedProbabilityScore,
  riskCoverage,
  seededRandom,
  spearman,
  topKAccuracy,
  topLabelConfidence,
  wilsonInterval,
  withinAccuracy,
  type Scored,
} from "../../src/quality/metrics.js";

// Reference values from scikit-learn 1.2.1 / SciPy 1.10.1: see fixtures/make_metrics.py for the command.
const ref = JSON.parse(readFileSync(new URL("fixtures/metrics.json", import.meta.url), "utf8")) as {
  noul: { p_yes: number[]; y: number[]; accuracy: number; balanced_accuracy: number; auroc: number; auprc: number; brier: number; log_loss: number };
  choice: {
    k: number;
    p: number[][];
    y: number[];
    accuracy: number;
    balanced_accuracy: number;
    macro_f1: number;
    kappa: number;
    confusion: number[][];
    top2_accuracy: number;
    brier: number;
    log_loss: number;
  };
  score: { k: number; p: number[][]; y: number[]; accuracy: number; within_one: number; mae: number; qwk: number; spearman: number; rps: number };
};

function scored(p: number[][], y: number[]): Scored {
  const k = p[0]!.length;
  return { n: y.length, k, p: Float64Array.from(p.flat()), y: Int32Array.from(y) };
}
const ones = (n: number) => new Float64Array(n).fill(1);

describe("metrics against scikit-learn", () => {
  it("noul: accuracy, balanced accuracy, AUROC, AUPRC, Brier, log loss", () => {
    const s = scored(
      ref.noul.p_yes.map((p) => [1 - p, p]),
      ref.noul.y,
    );
    const w = ones(s.n);
    const m = confusion(s.y, predictions(s), 2, w);
    expect(accuracyOf(m, 2)).toBeCloseTo(ref.noul.accuracy, 12);
    expect(balancedAccuracyOf(m, 2)).toBeCloseTo(ref.noul.balanced_accuracy, 12);
    const order = orderDescending(Float64Array.from(ref.noul.p_yes));
    const sorted = Float64Array.from(order, (i) => ref.noul.p_yes[i] as number);
    const positive = Uint8Array.from(order, (i) => ref.noul.y[i] as number);
    expect(auroc(sorted, positive, w)).toBeCloseTo(ref.noul.auroc, 12);
    expect(averagePrecision(sorted, positive, w)).toBeCloseTo(ref.noul.auprc, 12);
    expect(brier(s, w)).toBeCloseTo(ref.noul.brier, 12);
    expect(logLoss(s, w)).toBeCloseTo(ref.noul.log_loss, 10);
  });

  it("choice: accuracy, balanced accuracy, macro-F1, kappa, confusion, top-2, Brier, log loss", () => {
    const s = scored(ref.choice.p, ref.choice.y);
    const w = ones(s.n);
    const m = confusion(s.y, predictions(s), s.k, w);
    expect(Array.from(m)).toEqual(ref.choice.confusion.flat());
    expect(accuracyOf(m, s.k)).toBeCloseTo(ref.choice.accuracy, 12);
    expect(balancedAccuracyOf(m, s.k)).toBeCloseTo(ref.choice.balanced_accuracy, 12);
    expect(macroF1Of(m, s.k)).toBeCloseTo(ref.choice.macro_f1, 12);
    expect(kappaOf(m, s.k)).toBeCloseTo(ref.choice.kappa, 12);
    expect(topKAccuracy(s, 2, w)).toBeCloseTo(ref.choice.top2_accuracy, 12);
    expect(brier(s, w)).toBeCloseTo(ref.choice.brier, 12);
    expect(logLoss(s, w)).toBeCloseTo(ref.choice.log_loss, 10);
  });

  it("score: exact and within-one accuracy, MAE, quadratic kappa, Spearman, RPS", () => {
    const s = scored(ref.score.p, ref.score.y);
    const w = ones(s.n);
    const pred = predictions(s);
    const m = confusion(s.y, pred, s.k, w);
    expect(accuracyOf(m, s.k)).toBeCloseTo(ref.score.accuracy, 12);
    expect(withinAccuracy(pred, s.y, 1, w)).toBeCloseTo(ref.score.within_one, 12);
    const e = expectedLevel(s);
    expect(maeExpected(e, s.y, w)).toBeCloseTo(ref.score.mae, 12);
    expect(kappaOf(m, s.k, "quadratic")).toBeCloseTo(ref.score.qwk, 12);
    expect(spearman(e, Float64Array.from(ref.score.y), w)).toBeCloseTo(ref.score.spearman, 12);
    expect(rankedProbabilityScore(s, w)).toBeCloseTo(ref.score.rps, 12);
  });
});

describe("metrics by hand", () => {
  it("ECE, adaptive ECE and MCE of a small case", () => {
    // Bins of width 1/15: 0.95 and 0.99 share bin 15 (accuracy 1/2, confidence 0.97); 0.6 is alone in bin 9 and right.
    const confidence = Float64Array.from([0.95, 0.99, 0.6]);
    const correct = Uint8Array.from([1, 0, 1]);
    const c = calibrationError(confidence, correct);
    expect(c.ece).toBeCloseTo((2 / 3) * Math.abs(0.5 - 0.97) + (1 / 3) * 0.4, 12);
    expect(c.mce).toBeCloseTo(0.47, 12);
    // 3 rows in 15 equal-mass bins: one row each, so ACE is the mean |correct - confidence|.
    expect(c.ace).toBeCloseTo((0.05 + 0.99 + 0.4) / 3, 12);
    expect(c.bins.filter((b) => b.count > 0).map((b) => b.count)).toEqual([1, 2]);
  });

  it("a confidence of exactly 1/15 falls in the first bin, 1 in the last", () => {
    const c = calibrationError(Float64Array.from([1 / 15, 1]), Uint8Array.from([0, 1]));
    expect(c.bins[0]!.count).toBe(1);
    expect(c.bins[14]!.count).toBe(1);
  });

  it("AUROC counts tied scores as half", () => {
    const score = Float64Array.from([0.5, 0.5]);
    expect(auroc(score, Uint8Array.from([1, 0]), ones(2))).toBe(0.5);
    expect(auroc(score, Uint8Array.from([1, 1]), ones(2))).toBeNaN();
    expect(averagePrecision(score, Uint8Array.from([1, 1]), ones(2))).toBe(1);
  });

  it("orderBy sorts by value with ties in the given order, as a stable comparison sort does", () => {
    const random = seededRandom(4);
    // Few distinct values (many ties), negatives, -0 beside 0, and values that differ only in their lowest bits.
    const values = Float64Array.from({ length: 5000 }, (_, i) =>
      i % 7 === 0 ? -0 : i % 11 === 0 ? 0 : i % 5 === 0 ? 1 - 2 ** -52 * (i % 3) : Math.round(random() * 40) / 8 - 2,
    );
    const from = Int32Array.from({ length: values.length }, (_, i) => (i * 7919) % values.length);
    for (const descending of [false, true]) {
      const sign = descending ? -1 : 1;
      const expected = Array.from(from).sort((a, b) => sign * ((values[a] as number) - (values[b] as number)));
      expect(Array.from(orderBy(values, descending, from))).toEqual(expected);
    }
    expect(Array.from(orderBy(Float64Array.from([0.2, 0.1, 0.2]), false))).toEqual([1, 0, 2]);
  });

  it("risk-coverage: accuracy of the most confident rows and the area under the risk curve", () => {
    const confidence = Float64Array.from([0.9, 0.8, 0.7, 0.6]);
    const correct = Uint8Array.from([1, 1, 0, 1]);
    const rc = riskCoverage(confidence, correct);
    // Coverage 50% keeps 2 rows; 80% and 90% of 4 rows round up to all 4.
    expect(rc.at.map((p) => p.accuracy)).toEqual([1, 3 / 4, 3 / 4, 3 / 4]);
    expect(rc.at[0]!.threshold).toBe(0.8);
    // Risks at coverage 1/4..4/4: 0, 0, 1/3, 1/4.
    expect(rc.aurc).toBeCloseTo((0 + 0 + 1 / 3 + 1 / 4) / 4, 12);
  });

  it("quadratic kappa weighs a two-level miss four times a one-level miss", () => {
    const near = confusion(Int32Array.from([0, 1, 2, 0]), Int32Array.from([0, 1, 2, 1]), 3, ones(4));
    const far = confusion(Int32Array.from([0, 1, 2, 0]), Int32Array.from([0, 1, 2, 2]), 3, ones(4));
    expect(kappaOf(near, 3, "quadratic")).toBeGreaterThan(kappaOf(far, 3, "quadratic"));
  });

  it("RPS is 0 for a sure right answer and 1 for a sure answer at the far end", () => {
    const s: Scored = { n: 2, k: 3, p: Float64Array.from([1, 0, 0, 1, 0, 0]), y: Int32Array.from([0, 2]) };
    expect(rankedProbabilityScore({ ...s, n: 1, y: Int32Array.from([0]) }, ones(1))).toBe(0);
    expect(rankedProbabilityScore({ n: 1, k: 3, p: Float64Array.from([1, 0, 0]), y: Int32Array.from([2]) }, ones(1))).toBe(1);
  });

  it("top-label confidence is the largest probability of each row", () => {
    expect(Array.from(topLabelConfidence({ n: 2, k: 2, p: Float64Array.from([0.2, 0.8, 0.6, 0.4]), y: Int32Array.from([0, 0]) }))).toEqual([0.8, 0.6]);
  });
});

describe("noise floor", () => {
  it("drawn per bin from the normal approximation, agrees with drawing every row", () => {
    const random = seededRandom(9);
    const confidence = Float64Array.from({ length: 6000 }, () => 0.4 + 0.6 * random());
    // The exact simulation: every row drawn, ECE over the bins.
    const exact: number[] = [];
    const correct = new Uint8Array(confidence.length);
    for (let d = 0; d < 200; d++) {
      for (let i = 0; i < confidence.length; i++) correct[i] = random() < confidence[i]! ? 1 : 0;
      exact.push(calibrationError(confidence, correct).ece);
    }
    exact.sort((a, b) => a - b);
    const approx = eceNoiseFloor(confidence, 400, 4);
    expect(approx.median).toBeGreaterThan(exact[100]! * 0.85);
    expect(approx.median).toBeLessThan(exact[100]! * 1.15);
    expect(approx.p95).toBeGreaterThan(exact[190]! * 0.8);
    expect(approx.p95).toBeLessThan(exact[190]! * 1.2);
  });

  it("is the same for the same seed and shrinks with n", () => {
    const random = seededRandom(7);
    const conf = (n: number) => Float64Array.from({ length: n }, () => 0.5 + random() / 2);
    const small = conf(100);
    expect(eceNoiseFloor(small, 100, 3)).toEqual(eceNoiseFloor(small, 100, 3));
    // The literature's figure: a calibrated n = 100 with 15 bins reads an ECE near 0.09 at the median.
    const floor100 = eceNoiseFloor(small, 200, 1);
    expect(floor100.median).toBeGreaterThan(0.05);
    expect(floor100.median).toBeLessThan(0.13);
    expect(eceNoiseFloor(conf(10_000), 50, 1).median).toBeLessThan(floor100.median / 5);
  });
});

describe("per class figures", () => {
  it("Wilson's interval is the score test inverted: each bound p solves (hits/n - p)^2 = z^2 p (1 - p) / n", () => {
    // The bounds found independently, by bisection on the score test's equation.
    const z = 1.959963984540054;
    const solve = (hits: number, n: number, side: -1 | 1) => {
      const phat = hits / n;
      let lo = side < 0 ? 0 : phat;
      let hi = side < 0 ? phat : 1;
      const f = (p: number) => (phat - p) ** 2 - (z * z * p * (1 - p)) / n;
      for (let i = 0; i < 200; i++) {
        const mid = (lo + hi) / 2;
        // Inside the interval the score statistic is below z (f < 0).
        if (f(mid) < 0 === side < 0) hi = mid;
        else lo = mid;
      }
      return (lo + hi) / 2;
    };
    for (const [hits, n] of [
      [81, 263],
      [4, 66],
      [1, 3],
      [997, 1000],
    ] as const) {
      const [lo, hi] = wilsonInterval(hits, n)!;
      expect(lo).toBeCloseTo(solve(hits, n, -1), 12);
      expect(hi).toBeCloseTo(solve(hits, n, 1), 12);
    }
    // At 0 of n and n of n one bound is the point itself.
    expect(wilsonInterval(0, 10)).toEqual([0, expect.closeTo(solve(0, 10, 1), 12)]);
    expect(wilsonInterval(10, 10)).toEqual([expect.closeTo(solve(10, 10, -1), 12), 1]);
    expect(wilsonInterval(0, 0)).toBeUndefined();
  });

  it("recall and precision per class from the confusion matrix; a class under 10% of the gold rows is rare", () => {
    // is_spam as issue 29 found it: 1,504 ham rows, 66 spam of which the model finds 4, and calls 2 ham rows spam.
    const classes = classFigures([1502, 2, 62, 4], ["no", "yes"]);
    const yes = classes[1]!;
    expect(yes).toMatchObject({ label: "yes", gold: 66, predicted: 6, hits: 4, rare: true });
    expect(yes.recall).toBeCloseTo(4 / 66, 15);
    expect(yes.precision).toBeCloseTo(4 / 6, 15);
    expect(yes.recall_interval![1]).toBeLessThan(0.5);
    expect(classes[0]!.rare).toBe(false);
    expect(weakestClass(classes)?.label).toBe("yes");
    // Accuracy hides it: (1502 + 4) / 1570.
    expect((1502 + 4) / 1570).toBeGreaterThan(0.95);
  });
});
