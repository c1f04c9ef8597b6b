/**
 * Fitting calibrations: per question, temperature scaling and temperature
 * plus per-option bias ("platt"), chosen and reported by k-fold
 * cross-validation on held-out rows (never in-sample numbers); and the
 * label-prior corrections that need no gold labels (batch, contextual).
 */
import { readJsonFile } from "../api/json.js";
import type { Answer, Question } from "../api/schema.js";
import {
  applyMap,
  fitData,
  fitMap,
  FITTED_METHODS,
  meanDistribution,
  priorMap,
  totalVariation,
  type Method,
  type QuestionCalibration,
} from "../evaluator/calibration.js";
import { PriorEstimate } from "../runner/output/labels.js";
import { QualityInputError, type QuestionInfo } from "./answers.js";
import type { Rows } from "./assess.js";
import { calibrationError, confusion, accuracyOf, brier, logLoss, predictions, topLabelConfidence, type Scored } from "./metrics.js";
import { keyedFolds } from "./resample.js";

/** Held-out figures of one method. */
export interface HeldOut {
  log_loss: number;
  ece: number;
  brier: number;
  accuracy: number;
}

export interface FittedQuestion extends QuestionCalibration {
  /** Rows the final map was fitted on. */
  rows?: number;
  /** Cross-validated figures per method ("none" is the raw answers), when fitted on gold labels. */
  cross_validation?: { folds: number; seed: number; held_out: Partial<Record<Method, HeldOut>> };
  /** How far the map moved the mean label distribution (total variation distance), on the rows it was fitted on. */
  moved?: number;
  /** Mean label distribution before and after, on those rows. */
  shares_before?: number[];
  shares_after?: number[];
}

/** A calibration file: what `calibrate` writes and `run --calibration` applies. */
export interface CalibrationFile {
  kind: "typed-eval.calibration";
  version: 1;
  /** The model identity the answers came from (as the run journal keys it); null when unknown. */
  identity: string | null;
  /** The versioned model id the answers name. */
  model: string | null;
  created: string;
  fitted_on: { answers: string; gold?: string };
  questions: Record<string, FittedQuestion>;
}

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

/** Applies a fitted map to rows (row-major n x k). */
export function mapped(p: Float64Array, k: number, c: Pick<QuestionCalibration, "temperature" | "bias">): Float64Array {
  const out = new Float64Array(p.length);
  for (let i = 0; i < p.length / k; i++) out.set(applyMap(c, p.subarray(i * k, (i + 1) * k)), i * k);
  return out;
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

/** Batch calibration: the label prior is the mean answer of the rows themselves (no gold, no extra calls). */
export function batchQuestion(info: QuestionInfo, p: Float64Array, k: number): FittedQuestion {
  const map = priorMap(info, meanDistribution(p, k), "batch");
  return { ...map, rows: p.length / k, ...movement(p, k, map) };
}

/** The content-free states of contextual calibration (Zhao et al. 2021 use "N/A", "" and "[MASK]"). */
export const CONTENT_FREE_STATES = ["N/A", "", "[MASK]"];

/**
 * Contextual calibration: asks every question about content-free states
 * through the evaluator the run uses, and takes the mean answer as the label
 * bias to divide out. `ask` answers one request (the caller's evaluator).
 */
export async function contextualMaps(
  questions: Record<string, Question>,
  ask: (state: string) => Promise<Record<string, Answer>>,
): Promise<{ maps: Record<string, FittedQuestion>; priors: Record<string, number[]> }> {
  const prior = new PriorEstimate(questions);
  for (const state of CONTENT_FREE_STATES) {
    const answers = await ask(state);
    const missing = Object.keys(questions).find((name) => !answers[name]);
    if (missing !== undefined) throw new QualityInputError(`the content-free request got no answer to ${missing}`);
    prior.add(answers);
  }
  return { maps: Object.fromEntries(prior.maps("contextual")), priors: prior.priors() };
}

/** How far a map moves the mean distribution of rows (n x k): total variation, before and after. */
export function movement(
  p: Float64Array,
  k: number,
  map: Pick<QuestionCalibration, "temperature" | "bias">,
): { moved: number; shares_before: number[]; shares_after: number[] } {
  const before = meanDistribution(p, k);
  const after = meanDistribution(mapped(p, k, map), k);
  return { moved: totalVariation(before, after), shares_before: before, shares_after: after };
}

/** Reads and checks a calibration file. */
export function loadCalibration(path: string): CalibrationFile {
  const file = readJsonFile(path, "calibration", QualityInputError) as Partial<CalibrationFile>;
  if (file.kind !== "typed-eval.calibration" || file.version !== 1 || typeof file.questions !== "object" || file.questions === null) {
    throw new QualityInputError(`${path} is not a typed-eval calibration file (write one with typed-eval calibrate)`);
  }
  for (const [name, q] of Object.entries(file.questions)) {
    const ok =
      Array.isArray(q.labels) &&
      Array.isArray(q.bias) &&
      q.bias.length === q.labels.length &&
      q.bias.every((b) => Number.isFinite(b)) &&
      typeof q.temperature === "number" &&
      q.temperature > 0 &&
      Number.isFinite(q.temperature);
    if (!ok) throw new QualityInputError(`${path}: question ${name}: needs labels, one finite bias per label and a positive temperature`);
  }
  return file as CalibrationFile;
}

/**
 * Checks a calibration against a job's questions: every calibrated question
 * must exist with the same labels in the same order. Returns the maps by question.
 */
export function calibrationFor(
  file: CalibrationFile,
  path: string,
  questions: Record<string, Question>,
  labelsOf: (q: Question) => string[],
): Map<string, QuestionCalibration> {
  const out = new Map<string, QuestionCalibration>();
  for (const [name, c] of Object.entries(file.questions)) {
    const q = questions[name];
    if (!q)
      throw new QualityInputError(`${path} calibrates question "${name}", which the job does not ask; its questions: ${Object.keys(questions).join(", ")}`);
    const labels = labelsOf(q);
    if (q.type !== c.type || labels.join("\u0000") !== c.labels.join("\u0000")) {
      throw new QualityInputError(
        `${path}: question ${name} was calibrated as a ${c.type} with labels ${c.labels.join(", ")}, but the job's has ${labels.join(", ")}; calibrate again`,
      );
    }
    out.set(name, c);
  }
  return out;
}
