/**
 * Confident learning (Northcutt, Jiang and Chuang, "Confident Learning:
 * Estimating Uncertainty in Dataset Labels", JAIR 70, 2021): which gold
 * labels a model's probabilities contradict. Pure functions over one
 * question's rows (n rows of k probabilities and a gold class each); no I/O.
 *
 * - Thresholds (section 3.1): t_j is the mean probability of option j over
 *   the rows gold-labelled j.
 * - Confident label of a row: among the options whose probability reaches its
 *   threshold, the most probable (equation 2); none when no option does.
 * - Confident joint C[i][j]: rows gold-labelled i whose confident label is j.
 * - Calibration (equation 3): each row of C rescaled to the count of rows
 *   gold-labelled i, so C̃ sums to n and Q = C̃ / n estimates the joint of
 *   gold and true labels; 1 - trace(Q) is the estimated share of wrong gold.
 * - Two ways to name the rows (section 3.2): the off-diagonal cells of C
 *   (method "confident-joint"), or prune by noise rate ("noise-rate"): for
 *   each off-diagonal cell (gold i, true j), the n·Q[i][j] rows gold-labelled
 *   i with the largest margin p_j - p_i.
 *
 * Either way a row whose gold label is the model's most probable option (ties
 * included) is never named: the model agrees with it. Conventions where the
 * paper leaves a choice, as cleanlab (the authors' package) makes them:
 * C's diagonal counts at least 1 (a gold label none of whose rows is
 * confidently right is taken as right once, so its row can be calibrated),
 * and n·Q is rounded to whole rows per gold label, keeping each row's total.
 * Where cleanlab departs from the paper we follow the paper: with two or
 * more options over their thresholds the confident label is the most
 * probable of those (cleanlab takes the most probable of all options).
 *
 * Nothing depends on the order of the rows: the thresholds' sums are exact,
 * and rows whose margins tie at a cell's cut are taken in record-key order.
 */

/** One question's rows: `p` holds n rows of k probabilities, `y` the gold class of each. */
export interface LabelledRows {
  n: number;
  k: number;
  p: Float64Array;
  y: Int32Array;
}

/** Each row's record key (see resample.ts): what breaks a tie at a cut. */
export interface TieKeys {
  hi: Uint32Array;
  lo: Uint32Array;
}

/** The ways to name suspect rows. */
export const SUSPECT_METHODS = ["confident-joint", "noise-rate"] as const;
export type SuspectMethod = (typeof SUSPECT_METHODS)[number];

/** A probability in steps of 2^-52, as two 26-bit halves: sums of these are exact integers below 2^27 rows, so any order gives the same sum. */
const STEPS = 2 ** 52;
const HALF = 2 ** 26;

/** The thresholds t_j (mean p_j over the rows gold-labelled j); NaN where no row is gold-labelled j. */
export function confidentThresholds(rows: LabelledRows): Float64Array {
  const { n, k, p, y } = rows;
  const high = new Float64Array(k);
  const low = new Float64Array(k);
  const count = new Float64Array(k);
  for (let r = 0; r < n; r++) {
    const g = y[r] as number;
    const steps = Math.round((p[r * k + g] as number) * STEPS);
    const h = Math.floor(steps / HALF);
    high[g]! += h;
    low[g]! += steps - h * HALF;
    count[g]! += 1;
  }
  const t = new Float64Array(k);
  for (let j = 0; j < k; j++) t[j] = (count[j] as number) > 0 ? ((high[j] as number) * HALF + (low[j] as number)) / STEPS / (count[j] as number) : Number.NaN;
  return t;
}

/** Each row's confident label (the most probable option at or over its threshold), -1 where none is. */
export function confidentLabels(rows: LabelledRows, t: Float64Array): Int32Array {
  const { n, k, p } = rows;
  const out = new Int32Array(n);
  for (let r = 0; r < n; r++) {
    let best = -1;
    let bestP = -1;
    for (let j = 0; j < k; j++) {
      const pj = p[r * k + j] as number;
      // NaN (no row gold-labelled j) never passes.
      if (pj >= (t[j] as number) && pj > bestP) {
        best = j;
        bestP = pj;
      }
    }
    out[r] = best;
  }
  return out;
}

/** The confident joint C (k x k, row = gold label, column = confident label), its diagonal at least 1. */
export function confidentJoint(rows: LabelledRows, confident: Int32Array): Float64Array {
  const { n, k, y } = rows;
  const c = new Float64Array(k * k);
  for (let r = 0; r < n; r++) {
    const j = confident[r] as number;
    if (j >= 0) c[(y[r] as number) * k + j]! += 1;
  }
  for (let i = 0; i < k; i++) c[i * k + i] = Math.max(1, c[i * k + i] as number);
  return c;
}

/** Rows gold-labelled with each option. */
export function labelCounts(rows: LabelledRows): Float64Array {
  const out = new Float64Array(rows.k);
  for (let r = 0; r < rows.n; r++) out[rows.y[r] as number]! += 1;
  return out;
}

/** The calibrated joint C̃: each row of C rescaled to its gold label's row count (so C̃ sums to n; Q = C̃ / n). */
export function calibratedJoint(c: Float64Array, counts: Float64Array): Float64Array {
  const k = counts.length;
  const out = new Float64Array(k * k);
  for (let i = 0; i < k; i++) {
    let rowSum = 0;
    for (let j = 0; j < k; j++) rowSum += c[i * k + j] as number;
    if (rowSum > 0) for (let j = 0; j < k; j++) out[i * k + j] = ((c[i * k + j] as number) / rowSum) * (counts[i] as number);
  }
  return out;
}

/**
 * n·Q in whole rows: each row of the calibrated joint rounded so that it
 * still sums to its gold label's count (largest remainder: every cell rounded
 * down, then one more to the cells with the largest fractions, the lower
 * option first on a tie).
 */
export function pruneCounts(calibrated: Float64Array, k: number): Int32Array {
  const out = new Int32Array(k * k);
  for (let i = 0; i < k; i++) {
    let total = 0;
    let floors = 0;
    const fraction: { f: number; j: number }[] = [];
    for (let j = 0; j < k; j++) {
      const x = calibrated[i * k + j] as number;
      total += x;
      out[i * k + j] = Math.floor(x);
      floors += Math.floor(x);
      fraction.push({ f: x - Math.floor(x), j });
    }
    fraction.sort((a, b) => b.f - a.f || a.j - b.j);
    const missing = Math.round(total) - floors;
    for (let m = 0; m < missing; m++) out[i * k + (fraction[m] as { j: number }).j]! += 1;
  }
  return out;
}

/** What confident learning found in one question's rows. */
export interface LabelIssues {
  /** The suspect rows, as indices into the rows, ascending. */
  rows: Int32Array;
  thresholds: Float64Array;
  /** The calibrated joint C̃ (k x k counts summing to n). */
  joint: Float64Array;
  /** Rows to prune per cell (k x k, gold i x true j): the rounded C̃. */
  prune: Int32Array;
}

/**
 * Marks the `take` rows of `group` with the largest `margin` (aligned with
 * `group`); rows that tie at the cut are taken in key order, then row order.
 */
function markLargest(group: Int32Array, margin: Float64Array, take: number, keys: TieKeys | undefined, named: Uint8Array, sorted: Float64Array): void {
  const m = group.length;
  if (take >= m) {
    for (let a = 0; a < m; a++) named[group[a] as number] = 1;
    return;
  }
  sorted.set(margin);
  sorted.sort();
  const cut = sorted[m - take] as number;
  const ties: number[] = [];
  let above = 0;
  for (let a = 0; a < m; a++) {
    const x = margin[a] as number;
    if (x > cut) {
      named[group[a] as number] = 1;
      above++;
    } else if (x === cut) ties.push(group[a] as number);
  }
  let need = take - above;
  if (keys && ties.length > need)
    ties.sort((a, b) => (keys.hi[a] as number) - (keys.hi[b] as number) || (keys.lo[a] as number) - (keys.lo[b] as number) || a - b);
  for (const r of ties) if (need-- > 0) named[r] = 1;
}

/**
 * The suspect rows of one question by `method`. `keys`, each row's record
 * key, orders rows whose margins tie at a cut (default: the order given).
 */
export function findSuspects(rows: LabelledRows, method: SuspectMethod, keys?: TieKeys): LabelIssues {
  const { n, k, p, y } = rows;
  const thresholds = confidentThresholds(rows);
  const confident = confidentLabels(rows, thresholds);
  const counts = labelCounts(rows);
  const joint = calibratedJoint(confidentJoint(rows, confident), counts);
  const prune = pruneCounts(joint, k);
  const named = new Uint8Array(n);
  if (method === "confident-joint") {
    for (let r = 0; r < n; r++) if ((confident[r] as number) >= 0 && confident[r] !== y[r]) named[r] = 1;
  } else {
    // Each gold label's rows, in row order: a counting sort by label.
    const start = new Int32Array(k + 1);
    for (let i = 0; i < k; i++) start[i + 1] = (start[i] as number) + (counts[i] as number);
    const fill = start.slice(0, k);
    const byLabel = new Int32Array(n);
    for (let r = 0; r < n; r++) byLabel[fill[y[r] as number]!++] = r;
    for (let i = 0; i < k; i++) {
      const group = byLabel.subarray(start[i] as number, start[i + 1] as number);
      const margin = new Float64Array(group.length);
      const sorted = new Float64Array(group.length);
      for (let j = 0; j < k; j++) {
        const take = j === i ? 0 : (prune[i * k + j] as number);
        if (take <= 0) continue;
        for (let a = 0; a < group.length; a++) {
          const r = group[a] as number;
          margin[a] = (p[r * k + j] as number) - (p[r * k + i] as number);
        }
        markLargest(group, margin, take, keys, named, sorted);
      }
    }
  }
  let m = 0;
  for (let r = 0; r < n; r++) {
    if (!named[r]) continue;
    // A gold label at the top (a tie included) is the model's own answer: never suspect.
    const pGold = p[r * k + (y[r] as number)] as number;
    let top = true;
    for (let j = 0; j < k && top; j++) if ((p[r * k + j] as number) > pGold) top = false;
    if (top) named[r] = 0;
    else m++;
  }
  const out = new Int32Array(m);
  m = 0;
  for (let r = 0; r < n; r++) if (named[r]) out[m++] = r;
  return { rows: out, thresholds, joint, prune };
}
