/**
 * What a gold sample is, beside what it measures. Two facts decide how far
 * its figures speak for the run: gold rows that the calibration the answers
 * carry was fitted on (their calibration figures are in-sample, and flatter
 * it), and gold chosen by confidence, as a review queue is (its figures
 * describe the rows chosen, not the run). `assess` finds both; the verdict
 * marks what they touch (metric-table.ts holds the rules).
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { decodeIdKeys, loadCalibration } from "../calibration/file.js";
import { VERDICT_LIMITS } from "./metric-table.js";
import { num, tally } from "./numbers.js";
import type { Provenance } from "./provenance.js";

/** Fine bins of top-label confidence over [0, 1]: the run's rows are counted, never held. */
const BINS = 1000;

const binOf = (x: number) => Math.min(BINS - 1, Math.max(0, Math.floor(x * BINS)));

/** The top-label confidence of a run's rows (a question's), counted in fine bins as the answers stream by. */
export class ConfidenceCounts {
  readonly counts = new Float64Array(BINS);
  n = 0;
  /** Counts a row by its distribution's top probability. */
  add(dist: readonly number[]): void {
    let top = 0;
    for (const p of dist) if (p > top) top = p;
    this.counts[binOf(top)]! += 1;
    this.n++;
  }
}

/** The gold rows' confidence against the run's: unlike a random sample of the run's rows, by the verdict's rule, or not. */
export interface ConfidenceSample {
  gold_rows: number;
  run_rows: number;
  /** Median top-label confidence of the gold rows and of all the run's rows (to the bins' 0.001). */
  gold_median: number;
  run_median: number;
  /** Kolmogorov-Smirnov distance between the two, and its p-value were the gold a random sample of the run's rows. */
  distance: number;
  p: number;
  /** Chosen by confidence: distance and p-value past the verdict's limits (VERDICT_LIMITS.chosenDistance, chosenP). */
  chosen: boolean;
  /** Whether the gold rows are less sure than the run's, or surer. */
  direction: "less sure" | "surer";
}

/** Kolmogorov's distribution's upper tail: P(K > lambda), the asymptotic p-value of a scaled KS distance (scipy's kstwobign.sf). */
export function kolmogorovTail(lambda: number): number {
  if (lambda <= 0) return 1;
  // The alternating series converges fast above 0.2; below it the tail is 1 to within 1e-16 anyway.
  if (lambda < 0.2) return 1;
  let sum = 0;
  for (let k = 1; k <= 100; k++) {
    const term = Math.exp(-2 * k * k * lambda * lambda);
    sum += (k % 2 === 1 ? 1 : -1) * term;
    if (term < 1e-17) break;
  }
  return Math.min(1, Math.max(0, 2 * sum));
}

function medianOf(counts: Float64Array, n: number): number {
  let seen = 0;
  for (let b = 0; b < counts.length; b++) {
    seen += counts[b] as number;
    if (seen >= n / 2) return (b + 0.5) / BINS;
  }
  return Number.NaN;
}

/**
 * Compares the gold rows' top-label confidences with the run's rows (which
 * include them): the KS distance between the two distributions over the
 * bins, and its p-value for a sample drawn at random without replacement
 * (the finite-population correction: the variance of a sample's CDF is
 * F(1 - F) / n times (N - n) / (N - 1)). Undefined when the run's rows are
 * no more than the gold's: the gold is then the run, not a sample of it.
 */
export function compareConfidence(gold: ArrayLike<number>, run: ConfidenceCounts): ConfidenceSample | undefined {
  const n = gold.length;
  const total = run.n;
  if (n === 0 || total <= n) return undefined;
  const mine = new Float64Array(BINS);
  for (let i = 0; i < n; i++) mine[binOf(gold[i] as number)]! += 1;
  let a = 0;
  let b = 0;
  let distance = 0;
  for (let i = 0; i < BINS; i++) {
    a += mine[i] as number;
    b += run.counts[i] as number;
    distance = Math.max(distance, Math.abs(a / n - b / total));
  }
  const p = kolmogorovTail(distance * Math.sqrt((n * (total - 1)) / (total - n)));
  const goldMedian = medianOf(mine, n);
  const runMedian = medianOf(run.counts, total);
  return {
    gold_rows: n,
    run_rows: total,
    gold_median: goldMedian,
    run_median: runMedian,
    distance,
    p,
    chosen: distance >= VERDICT_LIMITS.chosenDistance && p < VERDICT_LIMITS.chosenP,
    direction: goldMedian < runMedian ? "less sure" : "surer",
  };
}

/** The gold rows a question's calibration was fitted on, among those assessed, and what its file says it scored held out. */
export interface InSample {
  /** Assessed gold rows the calibration was fitted on, of the question's gold rows. */
  rows: number;
  of: number;
  /** The method the file chose for the question, and its cross-validated ECE when the file has it. */
  method: string;
  held_out_ece?: number;
  folds?: number;
  /** How the rows were told: by their record ids, or (a file that records none) by the gold file's name alone. */
  by: "record ids" | "gold file";
}

/** What a question's gold sample is: in-sample for its calibration, chosen by confidence. */
export interface SampleFacts {
  in_sample?: InSample;
  confidence?: ConfidenceSample;
}

/** The fitted rows of the calibration the answers carry: per question, a test of a row's key and the file's held-out figures. */
export interface Fitted {
  /** Whether a row (by the first half of its record key) was among the gold rows fitted on; undefined when the file records no ids. */
  has?: (key: number) => boolean;
  /** The file was fitted with the gold file assessed now (by its path). */
  sameGold: boolean;
  questions: Record<string, { method: string; held_out_ece?: number; folds?: number }>;
}

/**
 * The calibration the answers carry, when it was fitted on gold labels and
 * is assessed calibrated (not --raw): its file (as the run named it, else
 * beside the usage summary), with the keys of the gold rows it was fitted on.
 */
export function fittedCalibration(provenance: Provenance, usageDir: string, gold: string, raw: boolean): Fitted | undefined {
  const c = provenance.calibration;
  if (raw || c.state !== "applied" || !c.source || c.source === "batch" || !c.fitted_on?.gold) return undefined;
  const path = [c.source, resolve(usageDir, c.source)].find((p) => existsSync(p));
  if (!path) return undefined;
  let file: ReturnType<typeof loadCalibration>;
  try {
    file = loadCalibration(path);
  } catch {
    // A calibration file broken or replaced since the run: what it was fitted on cannot be told, and is not claimed.
    return undefined;
  }
  const keys = file.fitted_on.gold_ids ? new Set(decodeIdKeys(file.fitted_on.gold_ids)) : undefined;
  const questions: Fitted["questions"] = {};
  for (const [name, q] of Object.entries(file.questions)) {
    const cv = q.cross_validation;
    // Only a map fitted on the gold rows makes their figures in-sample: batch and contextual maps saw no label, and "none" fitted nothing.
    if (!cv || q.method === "none") continue;
    const ece = cv.held_out[q.method]?.ece;
    questions[name] = { method: q.method, ...(ece !== undefined ? { held_out_ece: ece, folds: cv.folds } : {}) };
  }
  return {
    ...(keys ? { has: (key: number) => keys.has(key) } : {}),
    sameGold: resolve(file.fitted_on.gold ?? "") === resolve(gold),
    questions,
  };
}

/** A question's in-sample facts: its assessed rows (by the first halves of their keys) that the calibration was fitted on. */
export function inSampleOf(fitted: Fitted | undefined, question: string, keys: ArrayLike<number>): InSample | undefined {
  const q = fitted?.questions[question];
  if (!fitted || !q) return undefined;
  const of = keys.length;
  let rows = 0;
  if (fitted.has) for (let i = 0; i < of; i++) rows += fitted.has(keys[i] as number) ? 1 : 0;
  else if (fitted.sameGold) rows = of;
  if (rows === 0) return undefined;
  return {
    rows,
    of,
    method: q.method,
    ...(q.held_out_ece !== undefined ? { held_out_ece: q.held_out_ece, folds: q.folds as number } : {}),
    by: fitted.has ? "record ids" : "gold file",
  };
}

/** Whether a question's calibration figures are in-sample by the verdict's rule. */
export const isInSample = (s: InSample | undefined) => s !== undefined && s.rows >= VERDICT_LIMITS.inSample * s.of;

/** The in-sample fact in words: "412 of 500 gold rows fitted the calibration (held out, 5-fold: ECE 0.092)". */
export function inSampleText(s: InSample): string {
  const how = s.by === "gold file" ? "the calibration was fitted with this gold file" : `${tally(s.rows)} of ${tally(s.of)} gold rows fitted the calibration`;
  const held = s.held_out_ece !== undefined ? `held out (${s.folds}-fold), its ECE was ${num(s.held_out_ece)}` : "the file holds no held-out figure";
  return `in-sample: ${how}; ${held}`;
}

/** The gold sample chosen by confidence in words, with the bias it brings: "its rows are less sure than the run's (...); its figures describe ...". */
export function chosenText(c: ConfidenceSample): string {
  const which =
    c.direction === "less sure" ? "least sure of (accuracy and recall likely below the run's)" : "surest of (accuracy and recall likely above the run's)";
  return `its rows are ${c.direction} than the run's (median confidence ${num(c.gold_median, 2)} against ${num(c.run_median, 2)}; KS distance ${num(c.distance, 2)}, p ${c.p < 1e-4 ? "< 0.0001" : num(c.p, 4)}), as a review queue's are: its figures describe the rows the model was ${which}, not the run`;
}
