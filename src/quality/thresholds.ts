/**
 * Review thresholds from gold labels: per question, the lowest top-label
 * probability at which the rows kept reach a target accuracy, with the
 * coverage it gives and bootstrap intervals on both.
 */
import type { QuestionInfo } from "./answers.js";
import type { Joined, Rows } from "./assess.js";
import { around, orderDescending, predictions, quantile, topLabelConfidence } from "./metrics.js";
import { keyedWeights } from "./resample.js";

export interface Threshold {
  question: string;
  type: QuestionInfo["type"];
  n: number;
  target: number;
  /** Rows with top-label probability at or above this are accepted; null when no threshold reaches the target. */
  threshold: number | null;
  coverage: number;
  accuracy: number;
  coverage_interval: [number, number];
  accuracy_interval: [number, number];
  /** The threshold as the job's `review_below`: the shortest decimal (4 digits or more) that accepts exactly the same rows; 1 when there is no threshold. */
  review_below: number;
}

/**
 * The shortest decimal r (4 digits or more) with `below < r <= threshold`:
 * rows at or above r are exactly those at or above the threshold, so the
 * pasted value keeps the accuracy it was picked for. Rounding to the nearest
 * could land under a lower-confidence row and let it in (0.89996 against a
 * 0.9 target).
 */
export function safeThreshold(threshold: number, below: number): number {
  for (let digits = 4; digits <= 17; digits++) {
    const r = Number((Math.floor(threshold * 10 ** digits) / 10 ** digits).toFixed(digits));
    if (r > below && r <= threshold) return r;
  }
  return threshold;
}

/** Picks a question's threshold: the largest accepted share whose accuracy is at least `target`. */
export function pickThreshold(info: QuestionInfo, rows: Rows, target: number, options: { seed: number; bootstrap: number }): Threshold {
  const { s, keys } = rows.keyed();
  const confidence = topLabelConfidence(s);
  const pred = predictions(s);
  const correct = Uint8Array.from(pred, (p, i) => (p === s.y[i] ? 1 : 0));
  const order = orderDescending(confidence);
  let right = 0;
  let best = -1;
  // Walk down the ranking; a cut may only fall between different confidences, since a threshold keeps ties together.
  for (let m = 0; m < s.n; m++) {
    right += correct[order[m] as number] as number;
    const next = m + 1 < s.n ? (confidence[order[m + 1] as number] as number) : -Infinity;
    if (next === confidence[order[m] as number]) continue;
    if (right / (m + 1) >= target) best = m;
  }
  const threshold = best >= 0 ? (confidence[order[best] as number] as number) : null;
  const below = best >= 0 && best + 1 < s.n ? (confidence[order[best + 1] as number] as number) : -Infinity;
  const accepted = (i: number) => threshold !== null && (confidence[i] as number) >= threshold;
  const figures = (w: Uint8Array | undefined) => {
    let kept = 0;
    let ok = 0;
    let total = 0;
    for (let i = 0; i < s.n; i++) {
      const wi = w ? (w[i] as number) : 1;
      total += wi;
      if (!accepted(i)) continue;
      kept += wi;
      ok += wi * (correct[i] as number);
    }
    return { coverage: total ? kept / total : 0, accuracy: kept ? ok / kept : NaN };
  };
  const point = figures(undefined);
  const w = new Uint8Array(s.n);
  const cov: number[] = [];
  const acc: number[] = [];
  for (let b = 0; b < options.bootstrap; b++) {
    const f = figures(keyedWeights(keys, s.n, options.seed, b, w));
    cov.push(f.coverage);
    if (Number.isFinite(f.accuracy)) acc.push(f.accuracy);
  }
  cov.sort((a, b) => a - b);
  acc.sort((a, b) => a - b);
  return {
    question: info.name,
    type: info.type,
    n: s.n,
    target,
    threshold,
    coverage: point.coverage,
    accuracy: point.accuracy,
    coverage_interval: around(point.coverage, quantile(cov, 0.025), quantile(cov, 0.975)),
    accuracy_interval: around(point.accuracy, quantile(acc, 0.025), quantile(acc, 0.975)),
    review_below: threshold === null ? 1 : safeThreshold(threshold, below),
  };
}

export function thresholds(joined: Joined, target: number, options: { seed: number; bootstrap: number }): Threshold[] {
  return joined.questions.filter((q) => (joined.rows.get(q.name)?.n ?? 0) > 0).map((q) => pickThreshold(q, joined.rows.get(q.name) as Rows, target, options));
}

export function describeThresholds(list: Threshold[]): string {
  const f = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : "n/a");
  const lines = list.map((t) =>
    t.threshold === null
      ? `${t.question} (${t.type}, ${t.n} rows): no threshold reaches accuracy ${t.target}; review every row`
      : `${t.question} (${t.type}, ${t.n} rows): accept at p >= ${t.review_below}: coverage ${(t.coverage * 100).toFixed(1)}% [${(t.coverage_interval[0] * 100).toFixed(1)}, ${(t.coverage_interval[1] * 100).toFixed(1)}], accuracy ${f(t.accuracy)} [${f(t.accuracy_interval[0])}, ${f(t.accuracy_interval[1])}]`,
  );
  const job = Object.fromEntries(list.map((t) => [t.question, t.review_below]));
  lines.push("", `job file: "review_below": ${JSON.stringify(job)}`);
  return lines.join("\n");
}
