/**
 * Small facts about label distributions that the question types and the
 * readout share. Pure functions; NaN inputs are a bug upstream and throw.
 */

export function assertNoNaN(values: readonly number[], what: string): void {
  if (values.some(Number.isNaN)) throw new RangeError(`${what} contains NaN`);
}

export function clamp01(x: number): number {
  return Math.min(1, Math.max(0, x));
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

/** An answer needs one probability per option, at least one option, and no NaN. */
export function checkLengths(labels: number, probabilities: readonly number[]): void {
  if (labels === 0) throw new RangeError("an answer needs at least one option");
  if (labels !== probabilities.length) {
    throw new RangeError(`${labels} options but ${probabilities.length} probabilities`);
  }
  assertNoNaN(probabilities, "probabilities");
}
