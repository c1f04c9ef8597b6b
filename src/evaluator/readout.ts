/**
 * The readout math: from the log-probabilities a model gives each option label
 * to the answers of spec section 2.4. Pure functions, no model here.
 *
 * Every function is total on finite and infinite inputs and never returns NaN;
 * NaN inputs are a bug upstream and throw.
 */
import type { ChoiceAnswer, Content, NoulAnswer, ScoreAnswer } from "../api/schema.js";

function assertNoNaN(values: readonly number[], what: string): void {
  if (values.some(Number.isNaN)) throw new RangeError(`${what} contains NaN`);
}

function clamp01(x: number): number {
  return Math.min(1, Math.max(0, x));
}

/** log(sum(exp(x))) without overflow; -Infinity when empty or every term is -Infinity. */
export function logSumExp(values: readonly number[]): number {
  assertNoNaN(values, "logSumExp input");
  let max = -Infinity;
  for (const v of values) if (v > max) max = v;
  if (max === -Infinity || max === Infinity) return max;
  let sum = 0;
  for (const v of values) sum += Math.exp(v - max);
  return max + Math.log(sum);
}

/** Index of the largest value; ties go to the first. -1 when empty. */
export function argmax(values: readonly number[]): number {
  let best = -1;
  for (let i = 0; i < values.length; i++) {
    const v = values[i] as number;
    if (best < 0 || v > (values[best] as number)) best = i;
  }
  return best;
}

/**
 * Label log-probabilities to a distribution over the labels:
 * `p_i = softmax(logprob_i / temperature)`. With no information (every label
 * impossible) the distribution is uniform; labels at +Infinity share all mass.
 */
export function labelDistribution(logprobs: readonly number[], temperature = 1): number[] {
  assertNoNaN(logprobs, "label log-probabilities");
  if (!(temperature > 0 && Number.isFinite(temperature))) {
    throw new RangeError(`calibration temperature must be a positive finite number, got ${temperature}`);
  }
  const n = logprobs.length;
  if (n === 0) return [];
  let max = -Infinity;
  for (const v of logprobs) if (v > max) max = v;
  if (max === -Infinity) return logprobs.map(() => 1 / n);
  if (max === Infinity) {
    const top = logprobs.filter((v) => v === Infinity).length;
    return logprobs.map((v) => (v === Infinity ? 1 / top : 0));
  }
  const weights = logprobs.map((v) => Math.exp((v - max) / temperature));
  let sum = 0;
  for (const w of weights) sum += w;
  return weights.map((w) => w / sum);
}

/**
 * Share of the model's whole next-token distribution that fell on the labels,
 * from the labels' log-probabilities under that distribution. Low mass means
 * the model did not take the question as intended: a diagnostic, not an answer.
 */
export function labelMass(logprobs: readonly number[]): number {
  return clamp01(Math.exp(logSumExp(logprobs)));
}

/** v1 choice confidence: `(n * p_max - 1) / (n - 1)` clipped to [0, 1]; 1 for one option. */
export function choiceConfidence(probabilities: readonly number[]): number {
  assertNoNaN(probabilities, "probabilities");
  const n = probabilities.length;
  if (n <= 1) return 1;
  const pMax = probabilities[argmax(probabilities)] as number;
  return clamp01((n * pMax - 1) / (n - 1));
}

/**
 * v1 score confidence: `1 - sum_i p_i |i - m| / mad_uniform`, m the most
 * likely level and mad_uniform the mean absolute deviation of a uniform
 * distribution from its centre, clipped to [0, 1]; 1 for one level.
 */
export function scoreConfidence(probabilities: readonly number[]): number {
  assertNoNaN(probabilities, "probabilities");
  const k = probabilities.length;
  if (k <= 1) return 1;
  const m = argmax(probabilities);
  const centre = (k - 1) / 2;
  let madUniform = 0;
  let spread = 0;
  for (let i = 0; i < k; i++) {
    madUniform += Math.abs(i - centre) / k;
    spread += (probabilities[i] as number) * Math.abs(i - m);
  }
  return clamp01(1 - spread / madUniform);
}

/** A noul answer from the probability of yes. */
export function noulAnswer(pYes: number): NoulAnswer {
  assertNoNaN([pYes], "probability of yes");
  return { type: "noul", noul: clamp01(pYes) };
}

function checkLengths(labels: number, probabilities: readonly number[]): void {
  if (labels === 0) throw new RangeError("an answer needs at least one option");
  if (labels !== probabilities.length) {
    throw new RangeError(`${labels} options but ${probabilities.length} probabilities`);
  }
  assertNoNaN(probabilities, "probabilities");
}

/** A choice answer: `options` in the question's order, `probabilities` aligned with them. */
export function choiceAnswer(options: readonly string[], probabilities: readonly number[]): ChoiceAnswer {
  checkLengths(options.length, probabilities);
  return {
    type: "choice",
    choice: options[argmax(probabilities)] as string,
    // fromEntries defines own properties, so an option named "__proto__" stays an option.
    probabilities: Object.fromEntries(options.map((name, i) => [name, clamp01(probabilities[i] as number)])),
    confidence: choiceConfidence(probabilities),
  };
}

/** A score answer: `levels` are the question's criteria, `probabilities` aligned with them. */
export function scoreAnswer(levels: readonly Content[], probabilities: readonly number[]): ScoreAnswer {
  checkLengths(levels.length, probabilities);
  let score = 0;
  probabilities.forEach((p, k) => (score += k * p));
  return {
    type: "score",
    score: Math.min(Math.max(score, 0), levels.length - 1),
    legend: Object.fromEntries(levels.map((level, k) => [String(k), level])),
    probabilities: Object.fromEntries(probabilities.map((p, k) => [String(k), clamp01(p)])),
    confidence: scoreConfidence(probabilities),
  };
}
