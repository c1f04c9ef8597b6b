/**
 * How many gold labels are wrong, net of the model's own mistakes, with a 95%
 * interval. Confident learning's 1 - trace(Q) counts every confident
 * disagreement as a wrong label, so a model 78% right on a 4-level score read
 * 22.7% of the labels wrong where 3% were (issue 37): its own slips to a
 * neighbouring level counted as the gold's.
 *
 * Here a row's gold label is modelled as its true label, drawn from the
 * model's recalibrated probabilities q, then replaced with probability ε by a
 * wrong one:
 *
 *   P(gold = j | row) = Σ_t q_t · M[t][j],   M = (1 - ε)·I + ε·K,
 *
 * K the way people err: to any other option evenly (noul, choice), or to a
 * neighbouring level (a type with ordered levels: a score). ε, the share of
 * gold labels that are not the true label, is estimated by maximum
 * likelihood with the recalibration fitted alongside (profile likelihood: for
 * each ε the best recalibration), and its 95% interval is the profile
 * likelihood's: every ε whose likelihood ratio to the best is within χ²₁'s
 * 95% point. Disagreements the model's recalibrated uncertainty explains
 * count as the model's; only what it cannot explain counts as wrong labels.
 *
 * The recalibration is q = softmax(a·log p + b) (a temperature and a bias
 * per option). On ordered levels two readings of the model's slips between
 * neighbouring levels are both plausible, and they pull ε apart on planted
 * flips (bench/RESULTS.md): this one, and one that also moves probability
 * between levels by their distance (z_t = a·log p_t + c·Σ_j |j - t|·log p_j
 * + b_t). For such a type the estimate is the middle of the two and the
 * interval spans both of theirs: the data cannot choose between them, so
 * the interval says so.
 *
 * Pure functions over one question's rows, in record-key order (the same
 * rows in any order give the same figures); at most `SAMPLE` rows, the first
 * in key order: a seeded sample that does not depend on the rows' order.
 */
import { solveLinear } from "../calibration/maps.js";
import type { LabelledRows, TieKeys } from "./confident-learning.js";
import { keyOrder } from "./resample.js";

/** Rows the estimate is computed on at most: the profile likelihood refits the model some 30 times, and 20,000 rows pin ε to within about ±0.5 points. */
export const SAMPLE = 20_000;

/** Above this many options only the temperature (and the distance term) is fitted: a bias per option costs k² a row. */
const MAX_BIASED = 16;

/** χ²₁'s 95% point: the profile likelihood interval's cut. */
const CHI2_95 = 3.841458820694124;

/** Probabilities under this are read as this (log 1e-12 = -27.6): one row the model calls impossible cannot outweigh thousands. */
const FLOOR = 1e-12;

/** The largest ε considered: beyond a half the wrong labels would outnumber the right ones of a yes/no question. */
const MAX_NOISE = 0.5;

/** How a person's wrong label relates to the true one: any other option, or a neighbouring level. */
export type NoiseKernel = "any-other" | "neighbour";

export interface NoiseEstimate {
  /** The estimated share of gold labels that are not the true label. */
  estimate: number;
  /** Its 95% interval (profile likelihood; on ordered levels, spanning both recalibrations' intervals). */
  interval: [number, number];
  /** Rows it was computed on (all, or the first `SAMPLE` in record-key order). */
  rows: number;
  /** What a wrong label is taken to be. */
  kernel: NoiseKernel;
}

/** The question's rows as the fit reads them, in key order. */
interface Data {
  n: number;
  k: number;
  /** log p, floored, row-major. */
  logp: Float64Array;
  y: Int32Array;
  /** K, k x k: the chance that a wrong label for true label t is j. */
  kernel: Float64Array;
}

function kernelMatrix(k: number, kind: NoiseKernel): Float64Array {
  const out = new Float64Array(k * k);
  for (let t = 0; t < k; t++) {
    if (kind === "any-other" || k < 3) {
      for (let j = 0; j < k; j++) if (j !== t) out[t * k + j] = 1 / (k - 1);
    } else {
      const neighbours = t === 0 || t === k - 1 ? 1 : 2;
      if (t > 0) out[t * k + t - 1] = 1 / neighbours;
      if (t < k - 1) out[t * k + t + 1] = 1 / neighbours;
    }
  }
  return out;
}

/**
 * A recalibration z = Σ_m θ_m u_m: the first `dense` parameters move every
 * option (u_0 = log p; u_1, when there, the distance term), the rest are the
 * biases of options 1..k-1 (option 0's is 0: softmax ignores a shared shift).
 */
interface Family {
  dense: 1 | 2;
  biases: number;
  dim: number;
}

function familyOf(k: number, distance: boolean): Family {
  const dense = distance ? 2 : 1;
  const biases = k <= MAX_BIASED ? k - 1 : 0;
  return { dense, biases, dim: dense + biases };
}

/** One evaluation at (θ, ε): the mean negative log-likelihood, its slope in ε, and when asked its gradient and Hessian in θ. */
interface Evaluation {
  loss: number;
  dEps: number;
  g?: Float64Array;
  h?: Float64Array;
}

/**
 * Long: one pass over the rows computing the mixture's likelihood, its slope
 * in ε, and its gradient and Hessian in θ together, over shared buffers;
 * split, each row's q and posterior would be computed twice.
 *
 * With w the posterior of the true label given the gold one (w_t = q_t·M[t][gold] / P),
 * d(-log P)/dθ_m = E_q[u_m] - E_w[u_m] and the Hessian is Cov_q[u] - Cov_w[u].
 */
function evaluate(d: Data, f: Family, theta: Float64Array, eps: number, withDerivatives: boolean): Evaluation {
  const { n, k, logp, y, kernel } = d;
  const { dense, dim } = f;
  const ridge = 1 / Math.max(n, 1);
  const u = new Float64Array(2 * k);
  const z = new Float64Array(k);
  const q = new Float64Array(k);
  const w = new Float64Array(k);
  const uq = new Float64Array(dim);
  const uw = new Float64Array(dim);
  const g = withDerivatives ? new Float64Array(dim) : undefined;
  const h = withDerivatives ? new Float64Array(dim * dim) : undefined;
  let loss = 0;
  let dEps = 0;
  for (let r = 0; r < n; r++) {
    const base = r * k;
    let max = -Infinity;
    for (let t = 0; t < k; t++) {
      const l = logp[base + t] as number;
      u[t] = l;
      let zt = (theta[0] as number) * l;
      if (dense === 2) {
        let s = 0;
        for (let j = 0; j < k; j++) s += Math.abs(j - t) * (logp[base + j] as number);
        u[k + t] = s;
        zt += (theta[1] as number) * s;
      }
      if (t > 0 && t <= f.biases) zt += theta[dense + t - 1] as number;
      z[t] = zt;
      if (zt > max) max = zt;
    }
    let sum = 0;
    for (let t = 0; t < k; t++) sum += Math.exp((z[t] as number) - max);
    for (let t = 0; t < k; t++) q[t] = Math.exp((z[t] as number) - max) / sum;
    const gold = y[r] as number;
    let kq = 0;
    for (let t = 0; t < k; t++) kq += (q[t] as number) * (kernel[t * k + gold] as number);
    const p = (1 - eps) * (q[gold] as number) + eps * kq;
    loss -= Math.log(p);
    dEps -= (kq - (q[gold] as number)) / p;
    if (!g || !h) continue;
    for (let t = 0; t < k; t++) w[t] = ((q[t] as number) * ((t === gold ? 1 - eps : 0) + eps * (kernel[t * k + gold] as number))) / p;
    for (let m = 0; m < dense; m++) {
      let a = 0;
      let b = 0;
      for (let t = 0; t < k; t++) {
        a += (q[t] as number) * (u[m * k + t] as number);
        b += (w[t] as number) * (u[m * k + t] as number);
      }
      uq[m] = a;
      uw[m] = b;
    }
    for (let j = 1; j <= f.biases; j++) {
      uq[dense + j - 1] = q[j] as number;
      uw[dense + j - 1] = w[j] as number;
    }
    for (let m = 0; m < dim; m++) g[m]! += (uq[m] as number) - (uw[m] as number);
    // E_q[u_m u_l] - E_w[u_m u_l]: dense with dense over every option, dense with a bias at its option, a bias with itself.
    for (let m = 0; m < dense; m++)
      for (let l = m; l < dense; l++) {
        let s = 0;
        for (let t = 0; t < k; t++) s += ((q[t] as number) - (w[t] as number)) * (u[m * k + t] as number) * (u[l * k + t] as number);
        h[m * dim + l]! += s;
      }
    for (let j = 1; j <= f.biases; j++) {
      const diff = (q[j] as number) - (w[j] as number);
      const b = dense + j - 1;
      for (let m = 0; m < dense; m++) h[m * dim + b]! += diff * (u[m * k + j] as number);
      h[b * dim + b]! += diff;
    }
    for (let m = 0; m < dim; m++) {
      const am = uq[m] as number;
      const bm = uw[m] as number;
      for (let l = m; l < dim; l++) h[m * dim + l]! += (uw[l] as number) * bm - (uq[l] as number) * am;
    }
  }
  loss /= n;
  dEps /= n;
  // A small ridge on the biases keeps an option no gold row holds finite.
  for (let m = dense; m < dim; m++) loss += (ridge * (theta[m] as number) ** 2) / 2;
  if (g && h) {
    for (let m = 0; m < dim; m++) {
      g[m]! /= n;
      for (let l = m; l < dim; l++) {
        h[m * dim + l]! /= n;
        h[l * dim + m] = h[m * dim + l] as number;
      }
    }
    for (let m = dense; m < dim; m++) {
      g[m]! += ridge * (theta[m] as number);
      h[m * dim + m]! += ridge;
    }
  }
  return { loss, dEps, ...(g ? { g } : {}), ...(h ? { h } : {}) };
}

/**
 * The best recalibration for a fixed ε, from `theta` (updated in place):
 * Newton's method, damped until the step goes downhill (the mixture's
 * Hessian need not be positive), with a backtracking line search that keeps
 * the temperature positive; it stops once the step would gain less than
 * 1e-12 a row.
 */
function fitAt(d: Data, f: Family, theta: Float64Array, eps: number): Evaluation {
  const { dim } = f;
  let current = evaluate(d, f, theta, eps, true);
  for (let iteration = 0; iteration < 50; iteration++) {
    const g = current.g as Float64Array;
    let step: Float64Array | undefined;
    let decrement = 0;
    for (let damping = 0; damping <= 1e6 && !step; damping = damping === 0 ? 1e-8 : damping * 100) {
      const h = Float64Array.from(current.h as Float64Array);
      for (let m = 0; m < dim; m++) h[m * dim + m]! += damping;
      const candidate = solveLinear(h, g, dim);
      decrement = 0;
      for (let m = 0; m < dim; m++) decrement += (candidate[m] as number) * (g[m] as number);
      if (decrement > 0) step = candidate;
    }
    if (!step || decrement / 2 < 1e-12) break;
    let next: Float64Array | undefined;
    for (let scale = 1; scale > 1e-6 && !next; scale /= 2) {
      const candidate = theta.map((v, m) => v - scale * (step[m] as number));
      if (!((candidate[0] as number) > 1e-3)) continue;
      if (evaluate(d, f, candidate, eps, false).loss < current.loss) next = candidate;
    }
    if (!next) break;
    theta.set(next);
    current = evaluate(d, f, theta, eps, true);
  }
  return current;
}

/** The first `SAMPLE` rows in key order, as log-probabilities and gold labels. */
function dataOf(rows: LabelledRows, keys: TieKeys | undefined, kind: NoiseKernel): Data {
  const { k } = rows;
  const order = keys ? keyOrder(keys, rows.n) : Int32Array.from({ length: rows.n }, (_, i) => i);
  const n = Math.min(rows.n, SAMPLE);
  const logp = new Float64Array(n * k);
  const y = new Int32Array(n);
  for (let to = 0; to < n; to++) {
    const from = order[to] as number;
    for (let j = 0; j < k; j++) logp[to * k + j] = Math.log(Math.max(rows.p[from * k + j] as number, FLOOR));
    y[to] = rows.y[from] as number;
  }
  return { n, k, logp, y, kernel: kernelMatrix(k, kind) };
}

/**
 * Where `value` crosses zero between `a` and `b` (opposite signs there), by
 * the Illinois variant of regula falsi to within `tolerance` in x; the end
 * returned is the one on `a`'s side.
 */
function crossing(a: number, b: number, value: (x: number) => number, fa: number, fb: number, tolerance: number): number {
  let side = 0;
  for (let i = 0; i < 60 && Math.abs(b - a) > tolerance; i++) {
    let x = (a * fb - b * fa) / (fb - fa);
    // Keep a step inside and away from the ends, so a flat end still shrinks the bracket.
    const lo = Math.min(a, b) + Math.abs(b - a) * 0.01;
    const hi = Math.max(a, b) - Math.abs(b - a) * 0.01;
    if (!(x >= lo && x <= hi)) x = (a + b) / 2;
    const fx = value(x);
    if (Math.sign(fx) === Math.sign(fa)) {
      a = x;
      fa = fx;
      if (side === 1) fb /= 2;
      side = 1;
    } else {
      b = x;
      fb = fx;
      if (side === -1) fa /= 2;
      side = -1;
    }
  }
  return a;
}

/** ε's maximum likelihood estimate and 95% profile likelihood interval under one recalibration. */
function profileInterval(d: Data, f: Family): { estimate: number; interval: [number, number] } {
  const theta = new Float64Array(f.dim);
  theta[0] = 1;
  const profile = (eps: number) => fitAt(d, f, theta, eps);
  // The profile's slope in ε is the partial derivative at the best recalibration (the envelope theorem): its zero is the estimate.
  const at0 = profile(0);
  let best = 0;
  let bestLoss = at0.loss;
  if (at0.dEps < 0) {
    const top = profile(MAX_NOISE);
    best = top.dEps < 0 ? MAX_NOISE : crossing(0, MAX_NOISE, (e) => profile(e).dEps, at0.dEps, top.dEps, 1e-6);
    bestLoss = profile(best).loss;
  }
  const bestTheta = Float64Array.from(theta);
  // Inside the interval: 2·n·(loss(ε) - loss(ε̂)) ≤ 3.84; `excess` is that less 3.84 (negative inside).
  const excess = (eps: number) => 2 * d.n * (profile(eps).loss - bestLoss) - CHI2_95;
  const tolerance = 1e-5;
  let lo = 0;
  if (best > 0) {
    theta.set(bestTheta);
    const f0 = 2 * d.n * (at0.loss - bestLoss) - CHI2_95;
    if (f0 > 0) lo = crossing(best, 0, excess, -CHI2_95, f0, tolerance);
  }
  let hi = MAX_NOISE;
  if (best < MAX_NOISE) {
    theta.set(bestTheta);
    const fTop = excess(MAX_NOISE);
    theta.set(bestTheta);
    if (fTop > 0) hi = crossing(best, MAX_NOISE, excess, -CHI2_95, fTop, tolerance);
  }
  return { estimate: best, interval: [Math.min(lo, best), Math.max(hi, best)] };
}

/**
 * The share of gold labels that are wrong, net of what the model's own
 * recalibrated uncertainty explains, with its 95% interval (see the module's
 * comment). `kernel`: how a person errs on this question's labels.
 */
export function estimateNoise(rows: LabelledRows, options: { kernel: NoiseKernel; keys?: TieKeys | undefined }): NoiseEstimate {
  const d = dataOf(rows, options.keys, options.kernel);
  if (d.k < 2 || d.n === 0) return { estimate: 0, interval: [0, 0], rows: d.n, kernel: options.kernel };
  const plain = profileInterval(d, familyOf(d.k, false));
  if (options.kernel !== "neighbour" || d.k < 3) return { ...plain, rows: d.n, kernel: options.kernel };
  const spread = profileInterval(d, familyOf(d.k, true));
  return {
    estimate: (plain.estimate + spread.estimate) / 2,
    interval: [Math.min(plain.interval[0], spread.interval[0]), Math.max(plain.interval[1], spread.interval[1])],
    rows: d.n,
    kernel: options.kernel,
  };
}
