/**
 * Calibration of answer probabilities: one map per question from the raw
 * label distribution to a corrected one,
 *
 *     p'_i = softmax(log p_i / T + b_i),
 *
 * which covers temperature scaling (b = 0), temperature plus a per-option
 * bias (Platt scaling for a noul, vector-style scaling for a choice or score),
 * and the label-prior corrections that need no gold labels (T = 1,
 * b = -log prior: batch and contextual calibration). Softmax of log p / T
 * equals softmax of logits / T, since log p differs from the logits by a
 * constant, so scaling probabilities is exactly scaling the model's logits.
 *
 * The map is invertible: `undo` returns the raw probabilities (to rounding),
 * so a run's outputs can be recalibrated later without asking the model again.
 * Pure functions, no I/O.
 */
import type { Answer, Question } from "../api/schema.js";
import { kindOf } from "../questions/index.js";

/** Probabilities below this are treated as this before the logarithm: a label the model ruled out stays (nearly) ruled out. */
const FLOOR = 1e-300;

export type Method = "none" | "temperature" | "platt" | "batch" | "contextual";
export const FITTED_METHODS = ["temperature", "platt"] as const;

/** One question's map. `bias` is aligned with `labels` (the question's option order). */
export interface QuestionCalibration {
  type: Question["type"];
  method: Method;
  temperature: number;
  bias: number[];
  /** Option names (choice), level indices "0".. (score) or ["false", "true"] (noul). */
  labels: string[];
}

/** The distribution a question's answer carries, in label order (noul: [p(no), p(yes)]). */
export function answerDistribution(question: Question, answer: Answer): number[] {
  if (answer.type !== question.type) throw new RangeError(`a ${answer.type} answer does not answer a ${question.type} question`);
  return kindOf(question).distribution(question, answer);
}

/** The labels of a question, in the order answerDistribution uses. */
export function questionLabels(question: Question): string[] {
  return kindOf(question).labels(question);
}

/** An answer rebuilt from a distribution by the v1 rules: choice, score and confidence follow the probabilities. */
export function answerFrom(question: Question, p: readonly number[]): Answer {
  return kindOf(question).answerFrom(question, p);
}

function softmax(z: number[]): number[] {
  let max = -Infinity;
  for (const v of z) if (v > max) max = v;
  let sum = 0;
  for (let i = 0; i < z.length; i++) {
    z[i] = Math.exp((z[i] as number) - max);
    sum += z[i] as number;
  }
  for (let i = 0; i < z.length; i++) z[i] = (z[i] as number) / sum;
  return z;
}

/** Applies a question's map to a distribution. */
export function applyMap(c: Pick<QuestionCalibration, "temperature" | "bias">, p: ArrayLike<number>): number[] {
  const z = new Array<number>(p.length);
  for (let i = 0; i < p.length; i++) z[i] = Math.log(Math.max(p[i] as number, FLOOR)) / c.temperature + (c.bias[i] as number);
  return softmax(z);
}

/** Inverts applyMap: the raw distribution a calibrated one came from. */
export function undoMap(c: Pick<QuestionCalibration, "temperature" | "bias">, q: ArrayLike<number>): number[] {
  const z = new Array<number>(q.length);
  for (let i = 0; i < q.length; i++) z[i] = (Math.log(Math.max(q[i] as number, FLOOR)) - (c.bias[i] as number)) * c.temperature;
  return softmax(z);
}

/** The identity map of a question. */
export function identityMap(question: Question): QuestionCalibration {
  const labels = questionLabels(question);
  return { type: question.type, method: "none", temperature: 1, bias: labels.map(() => 0), labels };
}

/** Rows of raw distributions and gold labels for fitting: n rows of k log-probabilities. */
export interface FitData {
  n: number;
  k: number;
  /** log p, floored, row-major. */
  logp: Float64Array;
  y: Int32Array;
}

export function fitData(p: Float64Array, y: Int32Array, k: number): FitData {
  return { n: y.length, k, logp: Float64Array.from(p, (v) => Math.log(Math.max(v, FLOOR))), y };
}

/**
 * Fits inverse temperature a = 1/T and (for "platt") biases b, b_0 = 0, by
 * Newton's method on the mean negative log-likelihood, which is convex in
 * (a, b): it is multinomial logistic regression on the features log p. A
 * small ridge on b (weight 1/n) keeps a label that never occurs in the gold
 * from running its bias to minus infinity.
 * Long: one Newton iteration with its gradient, Hessian, solve and line
 * search over shared buffers; the steps read as one algorithm, in order.
 */
export function fitMap(data: FitData, method: "temperature" | "platt", rows?: Int32Array): { temperature: number; bias: number[] } {
  const { k, logp, y } = data;
  const index = rows ?? Int32Array.from({ length: data.n }, (_, i) => i);
  const n = index.length;
  const free = method === "platt" ? k - 1 : 0; // b_1..b_{k-1}
  const dim = 1 + free;
  const ridge = 1 / Math.max(n, 1);
  const theta = new Float64Array(dim);
  theta[0] = 1;
  const z = new Float64Array(k);
  const q = new Float64Array(k);

  const evaluate = (t: Float64Array, withDerivatives: boolean) => {
    let loss = 0;
    const g = new Float64Array(dim);
    const h = withDerivatives ? new Float64Array(dim * dim) : undefined;
    for (let r = 0; r < n; r++) {
      const row = index[r] as number;
      const base = row * k;
      let max = -Infinity;
      for (let j = 0; j < k; j++) {
        z[j] = (t[0] as number) * (logp[base + j] as number) + (j > 0 && free ? (t[j] as number) : 0);
        if ((z[j] as number) > max) max = z[j] as number;
      }
      let sum = 0;
      for (let j = 0; j < k; j++) sum += Math.exp((z[j] as number) - max);
      const lse = max + Math.log(sum);
      const gold = y[row] as number;
      loss += lse - (z[gold] as number);
      if (!h) continue;
      for (let j = 0; j < k; j++) q[j] = Math.exp((z[j] as number) - lse);
      // Features: x_0 = log p_j for the slope, x_j = [j = class] for bias j. Gradient: E_q[x] - x_gold.
      let meanL = 0;
      for (let j = 0; j < k; j++) meanL += (q[j] as number) * (logp[base + j] as number);
      g[0]! += meanL - (logp[base + gold] as number);
      for (let j = 1; j <= free; j++) g[j]! += (q[j] as number) - (j === gold ? 1 : 0);
      // Hessian: Cov_q[x].
      let varL = 0;
      for (let j = 0; j < k; j++) varL += (q[j] as number) * ((logp[base + j] as number) - meanL) ** 2;
      h[0]! += varL;
      for (let j = 1; j <= free; j++) {
        const cross = (q[j] as number) * ((logp[base + j] as number) - meanL);
        h[j]! += cross;
        h[j * dim]! += cross;
        for (let l = 1; l <= free; l++) h[j * dim + l]! += (q[j] as number) * ((j === l ? 1 : 0) - (q[l] as number));
      }
    }
    loss /= n;
    for (let j = 1; j <= free; j++) loss += (ridge * (t[j] as number) ** 2) / 2;
    if (h) {
      for (let i = 0; i < dim * dim; i++) h[i]! /= n;
      for (let j = 0; j < dim; j++) g[j]! /= n;
      for (let j = 1; j <= free; j++) {
        g[j]! += ridge * (t[j] as number);
        h[j * dim + j]! += ridge;
      }
      h[0]! += 1e-12;
    }
    return { loss, g, h };
  };

  let current = evaluate(theta, true);
  for (let iteration = 0; iteration < 100; iteration++) {
    const step = solveLinear(current.h as Float64Array, current.g, dim);
    let scale = 1;
    let next: Float64Array | undefined;
    let nextLoss = Infinity;
    // Backtracking: keep the slope positive (T finite and > 0) and the loss falling.
    while (scale > 1e-8) {
      const candidate = theta.map((v, i) => v - scale * (step[i] as number));
      if ((candidate[0] as number) > 1e-3) {
        nextLoss = evaluate(candidate, false).loss;
        if (nextLoss <= current.loss + 1e-15) {
          next = candidate;
          break;
        }
      }
      scale /= 2;
    }
    if (!next) break;
    const moved = Math.max(...next.map((v, i) => Math.abs(v - (theta[i] as number))));
    theta.set(next);
    current = evaluate(theta, true);
    if (moved < 1e-10) break;
  }
  const bias = new Array<number>(k).fill(0);
  for (let j = 1; j <= free; j++) bias[j] = theta[j] as number;
  // Centre the biases: softmax ignores a shared shift, and centred numbers read better.
  const mean = bias.reduce((s, v) => s + v, 0) / k;
  return { temperature: 1 / (theta[0] as number), bias: bias.map((v) => v - mean) };
}

/** Solves H x = g by Gaussian elimination with partial pivoting (dim is at most 256). */
export function solveLinear(h: Float64Array, g: Float64Array, dim: number): Float64Array {
  const a = Float64Array.from(h);
  const x = Float64Array.from(g);
  for (let c = 0; c < dim; c++) {
    let pivot = c;
    for (let r = c + 1; r < dim; r++) if (Math.abs(a[r * dim + c] as number) > Math.abs(a[pivot * dim + c] as number)) pivot = r;
    if (pivot !== c) {
      for (let j = 0; j < dim; j++) [a[c * dim + j], a[pivot * dim + j]] = [a[pivot * dim + j] as number, a[c * dim + j] as number];
      [x[c], x[pivot]] = [x[pivot] as number, x[c] as number];
    }
    const d = a[c * dim + c] as number;
    if (Math.abs(d) < 1e-300) continue;
    for (let r = c + 1; r < dim; r++) {
      const f = (a[r * dim + c] as number) / d;
      if (f === 0) continue;
      for (let j = c; j < dim; j++) a[r * dim + j]! -= f * (a[c * dim + j] as number);
      x[r]! -= f * (x[c] as number);
    }
  }
  for (let c = dim - 1; c >= 0; c--) {
    let s = x[c] as number;
    for (let j = c + 1; j < dim; j++) s -= (a[c * dim + j] as number) * (x[j] as number);
    const d = a[c * dim + c] as number;
    x[c] = Math.abs(d) < 1e-300 ? 0 : s / d;
  }
  return x;
}

/**
 * A label-prior correction with no gold labels: divide the distribution by
 * `prior` (T = 1, b = -log prior). Batch calibration takes the prior from the
 * run's own mean answer; contextual calibration from the answers to
 * content-free states.
 */
export function priorMap(
  question: { type: Question["type"]; labels: string[] },
  prior: readonly number[],
  method: "batch" | "contextual",
): QuestionCalibration {
  const labels = question.labels;
  const logs = prior.map((p) => Math.log(Math.max(p, 1e-12)));
  const mean = logs.reduce((s, v) => s + v, 0) / logs.length;
  return { type: question.type, method, temperature: 1, bias: logs.map((v) => mean - v), labels };
}

/** Mean distribution of rows (row-major, n x k). */
export function meanDistribution(p: Float64Array, k: number): number[] {
  const n = p.length / k;
  const mean = new Array<number>(k).fill(0);
  for (let i = 0; i < n; i++) for (let j = 0; j < k; j++) mean[j]! += (p[i * k + j] as number) / n;
  return mean;
}

/** Total variation distance between two distributions: how far a correction moved the label shares. */
export function totalVariation(a: readonly number[], b: readonly number[]): number {
  let d = 0;
  for (let i = 0; i < a.length; i++) d += Math.abs((a[i] as number) - (b[i] as number));
  return d / 2;
}

/**
 * How far (total variation) batch calibration may move a question's mean
 * label distribution on its own say-so. Dividing out the mean answer cannot
 * tell a model's label bias from a skew the data really has: on a question
 * whose true labels are 80/20 it pushes the answers toward 50/50. A larger
 * move needs gold labels that back it, or --force.
 */
export const BATCH_MAX_MOVE = 0.1;

const sharesText = (p: readonly number[]) => p.map((x) => x.toFixed(2)).join("/");

/**
 * Whether batch calibration would flatten a skewed question: one line saying
 * so, or undefined. With gold label shares, when the calibrated shares are
 * farther from the gold's than the raw ones were (by more than 0.02); without,
 * when it moves the mean distribution by more than BATCH_MAX_MOVE.
 */
export function batchFlattens(name: string, before: readonly number[], after: readonly number[], gold?: readonly number[]): string | undefined {
  const moved = totalVariation(before, after);
  if (gold) {
    const was = totalVariation(before, gold);
    const is = totalVariation(after, gold);
    return is > was + 0.02
      ? `batch calibration would move ${name}'s label shares from ${sharesText(before)} to ${sharesText(after)}, away from the gold labels' ${sharesText(gold)}: the skew is real`
      : undefined;
  }
  return moved > BATCH_MAX_MOVE
    ? `batch calibration would move ${name}'s label shares by ${(moved * 100).toFixed(0)}% (${sharesText(before)} to ${sharesText(after)}), more than ${BATCH_MAX_MOVE * 100}%: a skew that large may be real, and this would flatten it`
    : undefined;
}

/** Applies a fitted map to rows (row-major n x k). */
export function mapped(p: Float64Array, k: number, c: Pick<QuestionCalibration, "temperature" | "bias">): Float64Array {
  const out = new Float64Array(p.length);
  for (let i = 0; i < p.length / k; i++) out.set(applyMap(c, p.subarray(i * k, (i + 1) * k)), i * k);
  return out;
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
