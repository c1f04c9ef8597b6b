/**
 * Fitting a calibration on gold labels: per question, temperature scaling
 * and temperature plus per-option bias ("platt"), chosen and reported by
 * k-fold cross-validation on held-out rows (never in-sample numbers). The
 * choice is scored with the quality metrics, which is why it lives here; the
 * maps, the file and the label-free methods are src/calibration's.
 */
import type { FittedQuestion, HeldOut } from "../calibration/file.js";
import { fitData, fitMap, FITTED_METHODS, mapped, movement, type Method } from "../calibration/maps.js";
import { QualityInputError, type QuestionInfo } from "./answers.js";
import type { Rows } from "./assess.js";
import { calibrationError, confusion, accuracyOf, brier, logLoss, predictions, topLabelConfidence, type Scored } from "./metrics.js";
import { keyedFolds } from "./resample.js";

function heldOutFigures(s: Scored): HeldOut {
  const ones = new Float64Array(s.n).fill(1);
  const pred = predictions(s);
  const correct = Uint8Array.from(pred, (p, i) => (p === s.y[i] ? 1 : 0));
  return {
    log_loss: logLoss(s, ones),
    ece: calibrationError(topLabelConfidence(s), correct).ece,
    brier: brier(s, ones),
    accuracy: accuracyOf(confusion(s.y, pred, s.k, ones), s.k),
  };
}

/**
 * Fits a question's calibration on gold rows: each candidate method is
 * fitted on k-1 folds and scored on the held-out fold; the method with the
 * lowest held-out log loss is refitted on all rows (or `method` if named).
 */
export function fitQuestion(
  info: QuestionInfo,
  rows: Rows,
  options: { method: "auto" | "temperature" | "platt"; folds: number; seed: number },
): FittedQuestion {
  // Key order, and folds from a seeded hash of each record id: the same rows in any order choose the same method with the same numbers.
  const { s, keys } = rows.keyed();
  const { k, n } = s;
  if (n < options.folds * 2)
    throw new QualityInputError(`${info.name}: ${n} gold rows are too few for ${options.folds}-fold cross-validation (at least ${options.folds * 2})`);
  const data = fitData(s.p, s.y, k);
  const fold = keyedFolds(keys, n, options.seed, options.folds);
  const order = Int32Array.from({ length: n }, (_, i) => i);
  const candidates = options.method === "auto" ? [...FITTED_METHODS] : [options.method];
  const heldOut: Partial<Record<Method, HeldOut>> = { none: heldOutFigures(s) };
  for (const method of candidates) {
    const out = new Float64Array(s.p.length);
    for (let f = 0; f < options.folds; f++) {
      const train = Int32Array.from(order.filter((row) => fold[row] !== f));
      const fitted = fitMap(data, method, train);
      for (let i = 0; i < n; i++) {
        if (fold[i] !== f) continue;
        out.set(mapped(s.p.subarray(i * k, (i + 1) * k), k, fitted), i * k);
      }
    }
    heldOut[method] = heldOutFigures({ ...s, p: out });
  }
  // Auto keeps the raw answers when no method beats them on held-out rows: a map must earn its place.
  const pool: Method[] = options.method === "auto" ? ["none", ...candidates] : candidates;
  const chosen = pool.reduce((best, m) => ((heldOut[m] as HeldOut).log_loss < (heldOut[best] as HeldOut).log_loss ? m : best));
  const fitted = chosen === "none" ? { temperature: 1, bias: info.labels.map(() => 0) } : fitMap(data, chosen as "temperature" | "platt");
  return {
    type: info.type,
    method: chosen,
    temperature: fitted.temperature,
    bias: fitted.bias,
    labels: info.labels,
    rows: n,
    cross_validation: { folds: options.folds, seed: options.seed, held_out: heldOut },
    ...movement(s.p, k, fitted),
  };
}
