import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Question } from "../../src/api/schema.js";
import { answerViolations } from "../../src/api/consistency.js";
import { answerDistribution, answerFrom, applyMap, questionLabels, undoMap } from "../../src/calibration/maps.js";
import { Rows } from "../../src/quality/assess.js";
import { calibrationError, eceNoiseFloor, predictions, seededRandom, topLabelConfidence } from "../../src/quality/metrics.js";
import { batchQuestion } from "../../src/calibration/label-free.js";
import { fitQuestion } from "../../src/quality/calibrate.js";

/** Rows whose gold is drawn from `truth`, answered with `truth` distorted by `distort`. */
function synthetic(n: number, k: number, seed: number, distort: (p: number[]) => number[]): { rows: Rows; truth: Rows } {
  const random = seededRandom(seed);
  const rows = new Rows(k);
  const truth = new Rows(k);
  for (let i = 0; i < n; i++) {
    // A peaked random distribution: a Dirichlet-like draw by exponentiated uniforms.
    const w = Array.from({ length: k }, () => Math.exp(3 * random()));
    const t = w.reduce((a, b) => a + b, 0);
    const p = w.map((x) => x / t);
    let u = random();
    let y = 0;
    while (y < k - 1 && (u -= p[y] as number) > 0) y++;
    rows.push(distort(p), y, -1, `r${i}`);
    truth.push(p, y, -1, `r${i}`);
  }
  return { rows, truth };
}
const sharpen = (temperature: number) => (p: number[]) => applyMap({ temperature, bias: p.map(() => 0) }, p);
const info = (k: number) => ({ name: "q", type: "choice" as const, labels: Array.from({ length: k }, (_, i) => `o${i}`) });

function ece(rows: Rows): number {
  const s = rows.scored();
  const pred = predictions(s);
  return calibrationError(
    topLabelConfidence(s),
    Uint8Array.from(pred, (p, i) => (p === s.y[i] ? 1 : 0)),
  ).ece;
}

describe("calibration", () => {
  it("a calibrated source reads an ECE within its noise floor", () => {
    const { truth } = synthetic(2000, 4, 1, (p) => p);
    const s = truth.scored();
    expect(ece(truth)).toBeLessThanOrEqual(eceNoiseFloor(topLabelConfidence(s), 200, 2).p95);
  });

  it("fits back temperature 2 for answers sharpened with temperature 0.5, and the held-out ECE falls", () => {
    const { rows } = synthetic(3000, 4, 2, sharpen(0.5));
    const fitted = fitQuestion(info(4), rows, { method: "temperature", folds: 5, seed: 1 });
    expect(fitted.temperature).toBeGreaterThan(1.8);
    expect(fitted.temperature).toBeLessThan(2.2);
    const held = fitted.cross_validation!.held_out;
    expect(held.temperature!.ece).toBeLessThan(held.none!.ece / 2);
    expect(held.temperature!.log_loss).toBeLessThan(held.none!.log_loss);
  });

  it("auto picks by held-out log loss and platt removes a planted per-option bias", () => {
    const bias = [1.2, 0, -0.6, 0];
    const { rows } = synthetic(3000, 4, 3, (p) => applyMap({ temperature: 1, bias }, p));
    const fitted = fitQuestion(info(4), rows, { method: "auto", folds: 5, seed: 1 });
    expect(fitted.method).toBe("platt");
    const centred = bias.map((b) => b - bias.reduce((a, c) => a + c, 0) / 4);
    fitted.bias.forEach((b, i) => expect(b).toBeCloseTo(-(centred[i] as number), 0));
    expect(fitted.cross_validation!.held_out.platt!.log_loss).toBeLessThan(fitted.cross_validation!.held_out.temperature!.log_loss);
  });

  it("batch calibration removes at least 80% of a planted label bias", () => {
    // A source whose mean label distribution is uniform by symmetry; the planted bias moves it.
    const bias = [1, -0.5, 0, -0.5];
    const { rows } = synthetic(5000, 4, 4, (p) => applyMap({ temperature: 1, bias }, p));
    const s = rows.scored();
    const fitted = batchQuestion(info(4), s.p, 4);
    const planted = bias.map((b) => b - bias.reduce((a, c) => a + c, 0) / 4);
    const residual = Math.hypot(...fitted.bias.map((b, i) => b + (planted[i] as number)));
    expect(residual).toBeLessThan(0.2 * Math.hypot(...planted));
    expect(fitted.moved).toBeGreaterThan(0.1);
  });

  it("too few gold rows for the folds is a clear error", () => {
    const { rows } = synthetic(6, 3, 5, (p) => p);
    expect(() => fitQuestion(info(3), rows, { method: "auto", folds: 5, seed: 1 })).toThrow(/too few for 5-fold/);
  });
});

const question: fc.Arbitrary<Question> = fc.oneof(
  fc.constant<Question>({ type: "noul" }),
  fc
    .integer({ min: 1, max: 12 })
    .map((k): Question => ({ type: "choice", criteria: Object.fromEntries(Array.from({ length: k }, (_, i) => [`opt${i}`, null])) })),
  fc.integer({ min: 1, max: 10 }).map((k): Question => ({ type: "score", criteria: Array.from({ length: k }, (_, i) => `level ${i}`) })),
);

describe("calibration properties", () => {
  it("apply then undo returns the raw probabilities to 1e-9, and every calibrated answer obeys the v1 rules", () => {
    fc.assert(
      fc.property(
        question.chain((q) => {
          const k = questionLabels(q).length;
          return fc.tuple(
            fc.constant(q),
            fc.array(fc.double({ min: 1e-6, max: 1, noNaN: true }), { minLength: k, maxLength: k }),
            fc.double({ min: 0.2, max: 5, noNaN: true }),
            fc.array(fc.double({ min: -3, max: 3, noNaN: true }), { minLength: k, maxLength: k }),
          );
        }),
        ([q, weights, temperature, bias]) => {
          const total = weights.reduce((a, b) => a + b, 0);
          const raw = weights.map((w) => w / total);
          const answer = answerFrom(q, raw);
          const p = answerDistribution(q, answer);
          const c = applyMap({ temperature, bias }, p);
          const calibrated = answerFrom(q, c);
          expect(answerViolations("q", q, calibrated)).toEqual([]);
          // Undone from the distribution, not from the answer: a noul answer keeps p(yes) only, and 1 - p(yes)
          // near 1 loses the digits a strong temperature would amplify (outputs keep the raw values instead).
          const back = undoMap({ temperature, bias }, c);
          back.forEach((v, i) => expect(Math.abs(v - (p[i] as number))).toBeLessThan(1e-9));
        },
      ),
      { numRuns: 300 },
    );
  });
});
