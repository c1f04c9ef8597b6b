/**
 * Planted label flips on synthetic model probabilities, for the suspects
 * benchmark (bench/suspects.bench.ts) and tests: three questions (a noul, a
 * 5-option choice, a 4-level score), each with a class imbalance, answered by
 * a miscalibrated model in one of four regimes; gold labels are the true
 * labels with a seeded share flipped.
 */
import type { LabelledRows } from "../../src/quality/confident-learning.js";
import { seededRandom } from "../../src/quality/metrics.js";

export interface Question {
  name: string;
  type: "noul" | "choice" | "score";
  /** The true labels' shares: a class imbalance. */
  prior: number[];
  /** One-class flips: every flip takes a row of the first class to the second. */
  oneClass: [number, number];
  /** Per class: how clearly the model sees a row of that class (a diffuse "other" sees little). */
  clarity: number[];
}

export const QUESTIONS: Question[] = [
  { name: "urgent", type: "noul", prior: [0.8, 0.2], oneClass: [1, 0], clarity: [1, 0.8] },
  { name: "team", type: "choice", prior: [0.45, 0.25, 0.15, 0.1, 0.05], oneClass: [1, 0], clarity: [1, 1, 0.8, 0.6, 0.4] },
  { name: "mood", type: "score", prior: [0.35, 0.35, 0.2, 0.1], oneClass: [2, 1], clarity: [1, 0.6, 0.6, 1] },
];

export interface Regime {
  name: string;
  description: string;
  /** Per question: a logit bias per class (the model's label bias). */
  bias: Record<string, number[]>;
  /** The true label drawn from the model's own probabilities: a calibrated model. */
  calibrated: boolean;
  /** How clearly the model sees the true label, against the first regime's (1.6 takes a model 79-94% right to 89-98%). */
  clarity: number;
  /** The logits' scale: above 1 overconfident, below 1 underconfident. */
  scale: number;
}

const MILD = { urgent: [0, -0.5], team: [0.5, 0, 0, -0.5, -0.5], mood: [0, 0.3, 0, -0.3] };

export const REGIMES: Regime[] = [
  {
    name: "miscalibrated",
    description: "overconfident (logits x1.5), a mild bias towards the common classes",
    bias: MILD,
    calibrated: false,
    clarity: 1,
    scale: 1.5,
  },
  {
    name: "biased",
    description: "underconfident (logits x0.7) and strongly biased against the rare classes",
    bias: { urgent: [0, -1.5], team: [1, 0, 0, -1, -1.5], mood: [0.5, 0, 0, -1] },
    calibrated: false,
    clarity: 1,
    scale: 0.7,
  },
  {
    name: "calibrated",
    description: "the true label drawn from the miscalibrated model's own probabilities",
    bias: MILD,
    calibrated: true,
    clarity: 1,
    scale: 1.5,
  },
  {
    name: "stronger model",
    description: "the miscalibrated model seeing the true label 1.6 times as clearly",
    bias: MILD,
    calibrated: false,
    clarity: 1.6,
    scale: 1.5,
  },
];

export interface Case {
  name: string;
  rate: number;
  oneClass: boolean;
}

export const CASES: Case[] = [
  { name: "no flips", rate: 0, oneClass: false },
  { name: "2% flips", rate: 0.02, oneClass: false },
  { name: "5% flips", rate: 0.05, oneClass: false },
  { name: "10% flips", rate: 0.1, oneClass: false },
  { name: "5% one-class flips", rate: 0.05, oneClass: true },
];

function pick(random: () => number, p: ArrayLike<number>): number {
  let u = random();
  for (let j = 0; j < p.length; j++) if ((u -= p[j] as number) < 0) return j;
  return p.length - 1;
}

/** A model's probabilities for n rows of one question, and the true labels. */
export function synthetic(q: Question, regime: Regime, n: number, seed: number): { p: Float64Array; truth: Int32Array; accuracy: number } {
  const random = seededRandom(seed);
  const normal = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  const k = q.prior.length;
  const bias = regime.bias[q.name] as number[];
  const p = new Float64Array(n * k);
  const truth = new Int32Array(n);
  const z = new Float64Array(k);
  let right = 0;
  for (let r = 0; r < n; r++) {
    let y = pick(random, q.prior);
    // Some rows are harder than others; a score's neighbouring levels look alike.
    const clarity = 2.5 * regime.clarity * Math.exp(0.5 * normal()) * (q.clarity[y] as number);
    let max = Number.NEGATIVE_INFINITY;
    for (let j = 0; j < k; j++) {
      const signal = q.type === "score" ? -0.8 * Math.abs(j - y) : j === y ? 1 : 0;
      z[j] = regime.scale * (clarity * signal + normal() + (bias[j] as number));
      max = Math.max(max, z[j] as number);
    }
    let sum = 0;
    for (let j = 0; j < k; j++) sum += Math.exp((z[j] as number) - max);
    let top = 0;
    for (let j = 0; j < k; j++) {
      p[r * k + j] = Math.exp((z[j] as number) - max) / sum;
      if ((p[r * k + j] as number) > (p[r * k + top] as number)) top = j;
    }
    if (regime.calibrated) y = pick(random, p.subarray(r * k, (r + 1) * k));
    truth[r] = y;
    if (top === y) right++;
  }
  return { p, truth, accuracy: right / n };
}

/** Gold labels: the true ones with `c.rate` of the rows flipped (a score to a neighbouring level, as people err on a scale). */
export function flipped(q: Question, truth: Int32Array, c: Case, seed: number): { gold: Int32Array; flip: Uint8Array } {
  const random = seededRandom(seed);
  const n = truth.length;
  const k = q.prior.length;
  const gold = truth.slice();
  const flip = new Uint8Array(n);
  const pool: number[] = [];
  for (let r = 0; r < n; r++) if (!c.oneClass || truth[r] === q.oneClass[0]) pool.push(r);
  for (let i = pool.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [pool[i], pool[j]] = [pool[j] as number, pool[i] as number];
  }
  for (const r of pool.slice(0, Math.round(c.rate * n))) {
    const y = truth[r] as number;
    if (c.oneClass) gold[r] = q.oneClass[1];
    else if (q.type === "score") gold[r] = y === 0 ? 1 : y === k - 1 ? y - 1 : random() < 0.5 ? y - 1 : y + 1;
    else gold[r] = (y + 1 + Math.floor(random() * (k - 1))) % k;
    flip[r] = 1;
  }
  return { gold, flip };
}

/** The suspects method shipped before issue 29 (a baseline): every row whose confident label is not its gold label, gold on top or not. */
export function before(rows: LabelledRows): Int32Array {
  const { n, k, p, y } = rows;
  const sum = new Float64Array(k);
  const count = new Float64Array(k);
  for (let r = 0; r < n; r++) {
    sum[y[r] as number]! += p[r * k + (y[r] as number)] as number;
    count[y[r] as number]! += 1;
  }
  const out: number[] = [];
  for (let r = 0; r < n; r++) {
    let best = -1;
    for (let j = 0; j < k; j++) {
      const pj = p[r * k + j] as number;
      if (pj >= (sum[j] as number) / (count[j] as number) && (best < 0 || pj > (p[r * k + best] as number))) best = j;
    }
    if (best >= 0 && best !== y[r]) out.push(r);
  }
  return Int32Array.from(out);
}
