/**
 * The readout math: from the log-probabilities a model gives each option label
 * to a distribution over the labels (each question type turns it into its
 * answer: `src/questions`). Pure functions, no model here.
 *
 * Every function is total on finite and infinite inputs and never returns NaN;
 * NaN inputs are a bug upstream and throw.
 */
import { assertNoNaN, clamp01 } from "../questions/distribution.js";

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
