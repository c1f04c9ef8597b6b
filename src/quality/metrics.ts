/**
 * Label-quality metrics over answered rows with gold labels. Pure functions,
 * no I/O.
 *
 * Every metric takes per-row weights: a plain evaluation passes ones, and the
 * bootstrap passes how many times each row was drawn. Resampling then costs
 * O(n) per draw with no copies, and anything that needs a sort (AUROC,
 * AUPRC) sorts once: a million rows bootstrap 200 times in seconds.
 *
 * Conventions (fixtures in test/quality/fixtures were computed by
 * scikit-learn 1.2 and SciPy, see the command there):
 * - classes are 0..k-1; for noul 0 = no and 1 = yes, so `p[1]` is the answer;
 * - the prediction is the most probable class, ties to the first (as the
 *   readout does), so a noul is "yes" when p(yes) > 0.5;
 * - "confidence" here is the top-label probability `max_i p_i`, the quantity
 *   a calibrated model makes equal to its accuracy (not the v1 `confidence`
 *   field, which for a choice is a rescaling of it and ranks rows the same).
 */
import { order64 } from "./resample.js";

/** Rows of one question: `p` holds n rows of k probabilities, `y` the gold class of each row. */
export interface Scored {
  n: number;
  k: number;
  p: Float64Array;
  y: Int32Array;
}

/** Per-row weights: ones for a plain evaluation, how often each row was drawn for a bootstrap draw. */
export type Weights = Float64Array | Uint8Array;

/** Predicted class (argmax, ties to the first) of every row. */
export function predictions(s: Scored): Int32Array {
  const out = new Int32Array(s.n);
  for (let i = 0; i < s.n; i++) {
    let best = 0;
    const base = i * s.k;
    for (let j = 1; j < s.k; j++) if ((s.p[base + j] as number) > (s.p[base + best] as number)) best = j;
    out[i] = best;
  }
  return out;
}

/** Top-label probability of every row. */
export function topLabelConfidence(s: Scored): Float64Array {
  const out = new Float64Array(s.n);
  for (let i = 0; i < s.n; i++) {
    let max = 0;
    for (let j = 0; j < s.k; j++) max = Math.max(max, s.p[i * s.k + j] as number);
    out[i] = max;
  }
  return out;
}

/** Weighted k x k confusion matrix: rows are gold, columns predicted. */
export function confusion(y: Int32Array, pred: Int32Array, k: number, w: Weights): Float64Array {
  const m = new Float64Array(k * k);
  if (w instanceof Uint8Array) return countCells(cellsOf(y, pred, k), w, m);
  for (let i = 0; i < y.length; i++) m[(y[i] as number) * k + (pred[i] as number)]! += w[i] as number;
  return m;
}

/** Each row's confusion cell, gold * k + predicted. */
export function cellsOf(y: Int32Array, pred: Int32Array, k: number): Int32Array {
  const out = new Int32Array(y.length);
  for (let i = 0; i < y.length; i++) out[i] = (y[i] as number) * k + (pred[i] as number);
  return out;
}

/**
 * Whole-number weights summed by cell (`cell[i]` is row i's cell) into
 * `into`. Integer sums, in four interleaved sets of counters so that
 * neighbouring rows in one cell do not wait on each other: a bootstrap
 * counts a confusion matrix per draw. Exact, so the same as any other order.
 */
export function countCells(cell: Int32Array, w: Uint8Array, into: Float64Array): Float64Array {
  const cells = into.length;
  const lanes = new Int32Array(4 * cells);
  const n = cell.length;
  const whole = n - (n % 4);
  for (let i = 0; i < whole; i += 4) {
    lanes[cell[i] as number]! += w[i] as number;
    lanes[cells + (cell[i + 1] as number)]! += w[i + 1] as number;
    lanes[2 * cells + (cell[i + 2] as number)]! += w[i + 2] as number;
    lanes[3 * cells + (cell[i + 3] as number)]! += w[i + 3] as number;
  }
  for (let i = whole; i < n; i++) lanes[cell[i] as number]! += w[i] as number;
  for (let c = 0; c < cells; c++)
    into[c] = (lanes[c] as number) + (lanes[cells + c] as number) + (lanes[2 * cells + c] as number) + (lanes[3 * cells + c] as number);
  return into;
}

function total(m: Float64Array): number {
  let t = 0;
  for (const v of m) t += v;
  return t;
}

/** Share of rows on the diagonal. */
export function accuracyOf(m: Float64Array, k: number): number {
  let diag = 0;
  for (let c = 0; c < k; c++) diag += m[c * k + c] as number;
  const t = total(m);
  return t > 0 ? diag / t : NaN;
}

function rowSum(m: Float64Array, k: number, r: number): number {
  let s = 0;
  for (let c = 0; c < k; c++) s += m[r * k + c] as number;
  return s;
}

function colSum(m: Float64Array, k: number, c: number): number {
  let s = 0;
  for (let r = 0; r < k; r++) s += m[r * k + c] as number;
  return s;
}

/** Mean recall over the classes that occur in the gold labels (scikit-learn's balanced accuracy). */
export function balancedAccuracyOf(m: Float64Array, k: number): number {
  let sum = 0;
  let classes = 0;
  for (let c = 0; c < k; c++) {
    const support = rowSum(m, k, c);
    if (support > 0) {
      sum += (m[c * k + c] as number) / support;
      classes++;
    }
  }
  return classes > 0 ? sum / classes : NaN;
}

/**
 * Macro-averaged F1 over the classes that occur in the gold labels or the
 * predictions (scikit-learn's default label set; an undefined F1 counts 0).
 */
export function macroF1Of(m: Float64Array, k: number): number {
  let sum = 0;
  let classes = 0;
  for (let c = 0; c < k; c++) {
    const support = rowSum(m, k, c);
    const predicted = colSum(m, k, c);
    if (support === 0 && predicted === 0) continue;
    const tp = m[c * k + c] as number;
    sum += support + predicted > 0 ? (2 * tp) / (support + predicted) : 0;
    classes++;
  }
  return classes > 0 ? sum / classes : NaN;
}

/**
 * Cohen's kappa from a confusion matrix, unweighted or with quadratic
 * weights on the class index distance (ordinal levels: all k levels count,
 * whether they occur or not).
 */
export function kappaOf(m: Float64Array, k: number, weights: "none" | "quadratic" = "none"): number {
  const t = total(m);
  if (t === 0) return NaN;
  const rows = Array.from({ length: k }, (_, r) => rowSum(m, k, r) / t);
  const cols = Array.from({ length: k }, (_, c) => colSum(m, k, c) / t);
  let observed = 0;
  let expected = 0;
  for (let r = 0; r < k; r++) {
    for (let c = 0; c < k; c++) {
      const d = weights === "quadratic" ? (r - c) ** 2 : r === c ? 0 : 1;
      observed += (d * (m[r * k + c] as number)) / t;
      expected += d * (rows[r] as number) * (cols[c] as number);
    }
  }
  // Every row and prediction in one class: agreement is total, and kappa is undefined (scikit-learn says NaN).
  return expected === 0 ? NaN : 1 - observed / expected;
}

/** Share of rows whose gold class is among the `top` most probable (ties count against). */
export function topKAccuracy(s: Scored, top: number, w: Weights): number {
  let hit = 0;
  let t = 0;
  for (let i = 0; i < s.n; i++) {
    const base = i * s.k;
    const pGold = s.p[base + (s.y[i] as number)] as number;
    let above = 0;
    for (let j = 0; j < s.k; j++) if ((s.p[base + j] as number) > pGold) above++;
    if (above < top) hit += w[i] as number;
    t += w[i] as number;
  }
  return hit / t;
}

/** Mean over rows of the squared distance between p and the one-hot gold (sum over classes; binary uses the positive class only). */
export function brier(s: Scored, w: Weights): number {
  let sum = 0;
  let t = 0;
  for (let i = 0; i < s.n; i++) {
    const base = i * s.k;
    const y = s.y[i] as number;
    let e = 0;
    if (s.k === 2) e = ((s.p[base + 1] as number) - (y === 1 ? 1 : 0)) ** 2;
    else for (let j = 0; j < s.k; j++) e += ((s.p[base + j] as number) - (j === y ? 1 : 0)) ** 2;
    sum += (w[i] as number) * e;
    t += w[i] as number;
  }
  return sum / t;
}

/** Probabilities are clipped here before the logarithm, as scikit-learn does. */
export const LOG_LOSS_EPS = 1e-15;

/** Mean negative log-probability of the gold class. */
export function logLoss(s: Scored, w: Weights): number {
  let sum = 0;
  let t = 0;
  for (let i = 0; i < s.n; i++) {
    const p = Math.min(Math.max(s.p[i * s.k + (s.y[i] as number)] as number, LOG_LOSS_EPS), 1 - LOG_LOSS_EPS);
    sum -= (w[i] as number) * Math.log(p);
    t += w[i] as number;
  }
  return sum / t;
}

/** Row indices sorted by `score` descending (stable). */
export function orderDescending(score: Float64Array): Int32Array {
  return orderBy(score, true);
}

/** Which 32-bit half of a float64 comes first in memory. */
const LOW_HALF = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1 ? 0 : 1;
/** One float and its two halves: how orderBy reads a value's bits. */
const FLOAT = new Float64Array(1);
const HALVES = new Uint32Array(FLOAT.buffer);

/**
 * Indices of `values` ordered by value, ascending or descending, ties kept in
 * the order of `from` (default: index order); -0 equals 0, NaN is not
 * allowed. A radix sort on the values' IEEE bits (order64).
 */
export function orderBy(values: Float64Array, descending: boolean, from?: Int32Array): Int32Array {
  const n = values.length;
  const hi = new Uint32Array(n);
  const lo = new Uint32Array(n);
  const flip = descending ? 0xffffffff : 0;
  for (let i = 0; i < n; i++) {
    FLOAT[0] = (values[i] as number) + 0;
    let h = HALVES[1 - LOW_HALF] as number;
    let l = HALVES[LOW_HALF] as number;
    // Negative floats order backwards as integers: flip all their bits; positive ones just gain the sign bit.
    if (h & 0x80000000) {
      h = ~h;
      l = ~l;
    } else h |= 0x80000000;
    hi[i] = (h ^ flip) >>> 0;
    lo[i] = (l ^ flip) >>> 0;
  }
  return order64(hi, lo, from);
}

/**
 * Average precision of a binary score (scikit-learn's
 * average_precision_score), given the rows in descending score order (see
 * orderDescending): tied scores form one threshold. NaN without positives,
 * 1 without negatives.
 */
export function averagePrecision(score: Float64Array, positive: Uint8Array, w: Weights): number {
  const n = score.length;
  let pos = 0;
  let neg = 0;
  for (let i = 0; i < n; i++) {
    if (positive[i]) pos += w[i] as number;
    else neg += w[i] as number;
  }
  if (pos === 0 || neg === 0) return pos === 0 ? NaN : 1;
  let tp = 0;
  let fp = 0;
  let ap = 0;
  let i = 0;
  while (i < n) {
    const s = score[i] as number;
    let dtp = 0;
    let dfp = 0;
    while (i < n && score[i] === s) {
      if (positive[i]) dtp += w[i] as number;
      else dfp += w[i] as number;
      i++;
    }
    tp += dtp;
    fp += dfp;
    if (dtp > 0) ap += (dtp / pos) * (tp / (tp + fp));
  }
  return ap;
}

/**
 * AUROC of a binary score, given the rows in descending score order (see
 * orderDescending): tied scores form one threshold and count half, as
 * scikit-learn's roc_auc_score does; NaN without positives or negatives. No
 * division and no branch on the label per row: a bootstrap calls it once per
 * draw. With whole-number weights every partial sum is a multiple of 1/2
 * below 2^52, so any order of summing gives the same bits.
 */
export function auroc(score: Float64Array, positive: Uint8Array, w: Weights): number {
  const n = score.length;
  let pos = 0;
  let neg = 0;
  let auc = 0;
  let i = 0;
  while (i < n) {
    const s = score[i] as number;
    let dtp = 0;
    let dfp = 0;
    do {
      const wi = w[i] as number;
      const p = (positive[i] as number) * wi;
      dtp += p;
      dfp += wi - p;
      i++;
    } while (i < n && score[i] === s);
    auc += dfp * (pos + dtp * 0.5);
    pos += dtp;
    neg += dfp;
  }
  return pos === 0 || neg === 0 ? NaN : auc / (pos * neg);
}

/** Average ranks (1-based, ties share their mean rank). */
function ranks(values: Float64Array): Float64Array {
  const order = orderBy(values, false);
  const out = new Float64Array(values.length);
  let i = 0;
  while (i < order.length) {
    let j = i;
    while (j + 1 < order.length && values[order[j + 1] as number] === values[order[i] as number]) j++;
    const rank = (i + j) / 2 + 1;
    for (let t = i; t <= j; t++) out[order[t] as number] = rank;
    i = j + 1;
  }
  return out;
}

/** Weighted Pearson correlation. */
function pearson(a: Float64Array, b: Float64Array, w: Weights): number {
  let t = 0;
  let ma = 0;
  let mb = 0;
  for (let i = 0; i < a.length; i++) {
    t += w[i] as number;
    ma += (w[i] as number) * (a[i] as number);
    mb += (w[i] as number) * (b[i] as number);
  }
  ma /= t;
  mb /= t;
  let cov = 0;
  let va = 0;
  let vb = 0;
  for (let i = 0; i < a.length; i++) {
    const da = (a[i] as number) - ma;
    const db = (b[i] as number) - mb;
    cov += (w[i] as number) * da * db;
    va += (w[i] as number) * da * da;
    vb += (w[i] as number) * db * db;
  }
  return va > 0 && vb > 0 ? cov / Math.sqrt(va * vb) : NaN;
}

/**
 * Spearman's rank correlation: Pearson on ranks. The ranks are those of the
 * rows as given; under bootstrap weights they are not recomputed, which
 * keeps a draw O(n) and moves the interval negligibly at the sizes it matters.
 */
export function spearman(a: Float64Array, b: Float64Array, w: Weights, ranked?: { a: Float64Array; b: Float64Array }): number {
  const r = ranked ?? { a: ranks(a), b: ranks(b) };
  return pearson(r.a, r.b, w);
}

export function rankPair(a: Float64Array, b: Float64Array): { a: Float64Array; b: Float64Array } {
  return { a: ranks(a), b: ranks(b) };
}

/** Expected level `sum_j j p_j` of every row. */
export function expectedLevel(s: Scored): Float64Array {
  const out = new Float64Array(s.n);
  for (let i = 0; i < s.n; i++) {
    let e = 0;
    for (let j = 0; j < s.k; j++) e += j * (s.p[i * s.k + j] as number);
    out[i] = e;
  }
  return out;
}

/** Mean absolute error of the expected level against the gold level. */
export function maeExpected(expected: Float64Array, y: Int32Array, w: Weights): number {
  let sum = 0;
  let t = 0;
  for (let i = 0; i < y.length; i++) {
    sum += (w[i] as number) * Math.abs((expected[i] as number) - (y[i] as number));
    t += w[i] as number;
  }
  return sum / t;
}

/** Share of rows whose predicted level is within `d` of the gold level. */
export function withinAccuracy(pred: Int32Array, y: Int32Array, d: number, w: Weights): number {
  let hit = 0;
  let t = 0;
  for (let i = 0; i < y.length; i++) {
    if (Math.abs((pred[i] as number) - (y[i] as number)) <= d) hit += w[i] as number;
    t += w[i] as number;
  }
  return hit / t;
}

/**
 * Ranked probability score: the squared distance between the predicted and
 * the gold cumulative distributions, summed over the k-1 thresholds and
 * divided by k-1, so it lies in [0, 1]; 0 is a sure, right answer.
 */
export function rankedProbabilityScore(s: Scored, w: Weights): number {
  if (s.k < 2) return 0;
  let sum = 0;
  let t = 0;
  for (let i = 0; i < s.n; i++) {
    let cdf = 0;
    let e = 0;
    const y = s.y[i] as number;
    for (let j = 0; j < s.k - 1; j++) {
      cdf += s.p[i * s.k + j] as number;
      e += (cdf - (j >= y ? 1 : 0)) ** 2;
    }
    sum += ((w[i] as number) * e) / (s.k - 1);
    t += w[i] as number;
  }
  return sum / t;
}

/** One bin of a reliability diagram. */
export interface Bin {
  lo: number;
  hi: number;
  count: number;
  confidence: number;
  accuracy: number;
}

export interface Calibration {
  /** Expected calibration error over 15 equal-width bins of the top-label probability. */
  ece: number;
  /** The same over 15 equal-mass bins (adaptive ECE). */
  ace: number;
  /** Largest |accuracy - confidence| of a non-empty equal-width bin. */
  mce: number;
  bins: Bin[];
}

export const ECE_BINS = 15;

/** Equal-width bin of a confidence: bins are (lo, hi], with 0 in the first. */
export function binOf(confidence: number, bins = ECE_BINS): number {
  return Math.min(bins - 1, Math.max(0, Math.ceil(confidence * bins) - 1));
}

/** The equal-width bin of every confidence. */
function binsOf(confidence: Float64Array, bins: number): Uint8Array {
  const out = new Uint8Array(confidence.length);
  for (let i = 0; i < confidence.length; i++) out[i] = binOf(confidence[i] as number, bins);
  return out;
}

/** ECE, adaptive ECE, MCE and the reliability diagram's bins. */
export function calibrationError(confidence: Float64Array, correct: Uint8Array, bins = ECE_BINS): Calibration {
  const n = confidence.length;
  const bin = binsOf(confidence, bins);
  // One pass over the rows for every bin's count, confidence and accuracy sums.
  const count = new Float64Array(bins);
  const conf = new Float64Array(bins);
  const acc = new Float64Array(bins);
  for (let i = 0; i < n; i++) {
    const b = bin[i] as number;
    count[b]! += 1;
    conf[b]! += confidence[i] as number;
    acc[b]! += correct[i] as number;
  }
  const out: Bin[] = [];
  let mce = 0;
  let ece = 0;
  for (let b = 0; b < bins; b++) {
    const c = count[b] as number;
    if (c > 0) {
      mce = Math.max(mce, Math.abs((acc[b] as number) - (conf[b] as number)) / c);
      ece += Math.abs((acc[b] as number) - (conf[b] as number)) / n;
    }
    out.push({ lo: b / bins, hi: (b + 1) / bins, count: c, confidence: c ? (conf[b] as number) / c : NaN, accuracy: c ? (acc[b] as number) / c : NaN });
  }
  // Equal-mass bins: rows sorted by confidence, cut into `bins` runs of (nearly) equal size, as numpy's array_split does.
  const order = orderBy(confidence, false);
  let ace = 0;
  const base = Math.floor(n / bins);
  const extra = n % bins;
  let start = 0;
  for (let b = 0; b < bins && start < n; b++) {
    const size = base + (b < extra ? 1 : 0);
    if (size === 0) continue;
    let conf = 0;
    let acc = 0;
    for (let t = start; t < start + size; t++) {
      conf += confidence[order[t] as number] as number;
      acc += correct[order[t] as number] as number;
    }
    ace += Math.abs(acc - conf) / n;
    start += size;
  }
  return { ece, ace, mce, bins: out };
}

/** Risk-coverage: rows ranked by confidence, most confident first. */
export interface RiskCoverage {
  /** Area under the risk-coverage curve: the mean error rate over every coverage 1/n..1. Lower is better. */
  aurc: number;
  /** Accuracy of the most confident share of rows, at each coverage asked for. */
  at: { coverage: number; accuracy: number; threshold: number }[];
  /** Up to 101 points (coverage, accuracy, threshold) for plotting. */
  curve: { coverage: number; accuracy: number; threshold: number }[];
}

export function riskCoverage(confidence: Float64Array, correct: Uint8Array, coverages = [0.5, 0.8, 0.9, 1]): RiskCoverage {
  const n = confidence.length;
  const order = orderDescending(confidence);
  const cumulative = new Float64Array(n + 1);
  let risk = 0;
  for (let i = 0; i < n; i++) {
    cumulative[i + 1] = (cumulative[i] as number) + (correct[order[i] as number] as number);
    risk += 1 - (cumulative[i + 1] as number) / (i + 1);
  }
  const point = (coverage: number) => {
    const m = Math.max(1, Math.ceil(coverage * n - 1e-9));
    return { coverage, accuracy: (cumulative[m] as number) / m, threshold: confidence[order[m - 1] as number] as number };
  };
  const curve = [];
  for (let c = 1; c <= 100; c++) curve.push(point(c / 100));
  return { aurc: n ? risk / n : NaN, at: n ? coverages.map(point) : [], curve: n ? curve : [] };
}

/** A seeded generator (mulberry32): the same seed gives the same numbers on every machine. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The ECE a perfectly calibrated model would show at these confidences: each
 * row is right with probability equal to its confidence, drawn `draws` times.
 * ECE is biased upwards at small n, so a measured ECE means little unless it
 * stands above this floor.
 *
 * ECE depends only on each bin's count of right rows, a sum of independent
 * Bernoulli draws: a bin of 200 rows or more draws that sum from its normal
 * approximation (mean sum c, variance sum c(1-c)), smaller bins row by row.
 * A million rows then cost as much as a few thousand.
 *
 * Small bins draw row by row in the order given: callers pass rows in key
 * order (assess does), so the same rows in any order draw alike.
 */
export function eceNoiseFloor(confidence: Float64Array, draws = 200, seed = 1, bins = ECE_BINS): { median: number; p95: number } {
  const random = seededRandom(seed);
  const n = confidence.length;
  const bin = binsOf(confidence, bins);
  const count = new Float64Array(bins);
  const mean = new Float64Array(bins);
  const variance = new Float64Array(bins);
  for (let i = 0; i < n; i++) {
    const c = confidence[i] as number;
    count[bin[i] as number]! += 1;
    mean[bin[i] as number]! += c;
    variance[bin[i] as number]! += c * (1 - c);
  }
  const small: number[][] = Array.from({ length: bins }, () => []);
  for (let i = 0; i < n; i++) if ((count[bin[i] as number] as number) < 200) small[bin[i] as number]!.push(confidence[i] as number);
  const gaussian = () => {
    // Box-Muller on the seeded generator.
    const u = 1 - random();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
  };
  const values: number[] = [];
  for (let d = 0; d < draws; d++) {
    let ece = 0;
    for (let b = 0; b < bins; b++) {
      if (count[b] === 0) continue;
      let right = 0;
      if ((count[b] as number) < 200) for (const c of small[b] as number[]) right += random() < c ? 1 : 0;
      else right = Math.min(count[b] as number, Math.max(0, (mean[b] as number) + Math.sqrt(variance[b] as number) * gaussian()));
      ece += Math.abs(right - (mean[b] as number));
    }
    values.push(n ? ece / n : NaN);
  }
  values.sort((a, b) => a - b);
  return { median: quantile(values, 0.5), p95: quantile(values, 0.95) };
}

/**
 * A percentile interval widened, where it must be, to hold its point
 * estimate: with few rows or a skewed statistic the bootstrap's 2.5% point
 * can sit above the estimate, and an interval that excludes its own figure
 * reads as a contradiction.
 */
export function around(point: number, lo: number, hi: number): [number, number] {
  return Number.isFinite(point) ? [Math.min(lo, point), Math.max(hi, point)] : [lo, hi];
}

/** Linear-interpolated quantile of sorted values (numpy's default). */
export function quantile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return NaN;
  const at = (sorted.length - 1) * q;
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  return (sorted[lo] as number) + ((sorted[hi] as number) - (sorted[lo] as number)) * (at - lo);
}

/** An ECE estimate that accounts for sampling noise, with its interval. */
export interface EceEstimate {
  /** Median-unbiased estimate of the population's binned ECE (0 when the measured ECE is within noise of perfect calibration). */
  estimate: number;
  /** Confidence interval of the population's binned ECE; it always holds `estimate`. */
  interval: [number, number];
}

/**
 * The plug-in ECE is biased upwards: each bin's |accuracy - confidence| adds
 * its sampling noise, so a perfectly calibrated model reads an ECE near its
 * noise floor, and a bootstrap of the plug-in (which adds that noise twice)
 * sits above the estimate itself. This inverts the plug-in's sampling
 * distribution instead.
 *
 * The estimand is the population's binned ECE at these confidences,
 * `sum_b n_b/n |E[accuracy - confidence | bin b]|`. Candidate truths are the
 * observed per-bin gaps scaled by `s >= 0` (s = 0 is perfect calibration; its
 * ECE is s times the plug-in). For each s the plug-in's distribution is
 * simulated, each bin's count of right rows from its normal approximation
 * (mean: the confidences plus the scaled gap; variance: sum p(1-p)), with the
 * same draws for every s. The interval holds every s whose simulated 2.5% to
 * 97.5% range contains the measured ECE, and the estimate is the s whose
 * simulated median is the measured ECE: so the interval holds the estimate,
 * and both are 0 when the measured ECE is no more than noise. Coverage on
 * calibrated and miscalibrated synthetic data: bench/ece-coverage.ts.
 * Long: the bins, the simulation and the inversion share per-bin buffers
 * and one set of draws; the method reads as one derivation, in order.
 */
export function eceWithInterval(
  confidence: Float64Array,
  correct: Uint8Array,
  options: { seed?: number; draws?: number; level?: number; bins?: number } = {},
): EceEstimate {
  const bins = options.bins ?? ECE_BINS;
  const draws = options.draws ?? 2000;
  const tail = (1 - (options.level ?? 0.95)) / 2;
  const n = confidence.length;
  const count = new Float64Array(bins);
  const sum = new Float64Array(bins);
  const squares = new Float64Array(bins);
  const right = new Float64Array(bins);
  for (let i = 0; i < n; i++) {
    const b = binOf(confidence[i] as number, bins);
    const c = confidence[i] as number;
    count[b]! += 1;
    sum[b]! += c;
    squares[b]! += c * c;
    right[b]! += correct[i] as number;
  }
  let plugIn = 0;
  for (let b = 0; b < bins; b++) plugIn += Math.abs((right[b] as number) - (sum[b] as number)) / n;
  if (n === 0) return { estimate: NaN, interval: [NaN, NaN] };
  const random = seededRandom(options.seed ?? 1);
  const z = new Float64Array(draws * bins);
  for (let i = 0; i < z.length; i++) z[i] = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  const simulated = new Float64Array(draws);
  /** The q-quantile of the simulated plug-in ECE when each bin's gap is `s` times the observed one. */
  const quantileAt = (s: number, q: number): number => {
    simulated.fill(0);
    for (let b = 0; b < bins; b++) {
      const nb = count[b] as number;
      if (nb === 0) continue;
      const gap = ((right[b] as number) - (sum[b] as number)) / nb;
      const shift = s * gap;
      // sum over the bin's rows of p(1-p), p = confidence + shift (clipped to [0, 1] row by row only in effect: floored at 0).
      const variance = Math.max(0, (sum[b] as number) + nb * shift - ((squares[b] as number) + 2 * shift * (sum[b] as number) + nb * shift * shift));
      const sd = Math.sqrt(variance);
      const mean = nb * shift;
      for (let d = 0; d < draws; d++) simulated[d]! += Math.abs(mean + sd * (z[d * bins + b] as number)) / n;
    }
    simulated.sort();
    return quantile(simulated, q);
  };
  /** The smallest s >= 0 at which the level(s)-quantile reaches the measured ECE (0 when it already does at s = 0). */
  const solve = (level: (s: number) => number): number => {
    if (quantileAt(0, level(0)) >= plugIn) return 0;
    let hi = 1;
    while (quantileAt(hi, level(hi)) < plugIn && hi < 1e6) hi *= 2;
    let lo = hi / 2 >= 1 ? hi / 2 : 0;
    for (let i = 0; i < 40 && hi - lo > 1e-9; i++) {
      const mid = (lo + hi) / 2;
      if (quantileAt(mid, level(mid)) < plugIn) lo = mid;
      else hi = mid;
    }
    return (lo + hi) / 2;
  };
  // The acceptance range at s: from the lowTail(s) to the 1 - (2 tail - lowTail(s)) quantile. At s = 0 (perfect
  // calibration, the edge of the range) nothing lies below, so the range is one-sided: the lower end is 0 exactly
  // when the measured ECE is within the 95% point of a calibrated model's; it turns central by s = 1.
  const lowTail = (s: number) => tail * Math.min(1, s);
  const low = solve((s) => 1 - (2 * tail - lowTail(s))) * plugIn;
  const estimate = solve(() => 0.5) * plugIn;
  const high = solve(lowTail) * plugIn;
  return { estimate, interval: [Math.min(low, estimate), Math.max(high, estimate)] };
}

/** The normal quantile of a two-sided 95% interval. */
const Z95 = 1.959963984540054;

/**
 * Wilson's score interval of a proportion, `hits` of `n` (95% unless `z`
 * says otherwise): unlike a bootstrap, it stays honest at 0 of 66 or 66 of
 * 66, where every resample agrees and a percentile interval collapses to a
 * point. Undefined without trials.
 */
export function wilsonInterval(hits: number, n: number, z = Z95): [number, number] | undefined {
  if (!(n > 0)) return undefined;
  const p = hits / n;
  const z2 = z * z;
  const centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const half = (z / (1 + z2 / n)) * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n));
  // At 0 of n or n of n the bound is the point itself; rounding must not put it on the wrong side.
  return [hits <= 0 ? 0 : Math.min(p, Math.max(0, centre - half)), hits >= n ? 1 : Math.max(p, Math.min(1, centre + half))];
}
