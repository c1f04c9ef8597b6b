/**
 * Review thresholds from gold labels: per question, the lowest top-label
 * probability at which the rows kept reach a target accuracy, with the
 * coverage it gives and bootstrap intervals on both.
 */
import type { QuestionInfo } from "./answers.js";
import type { Joined, Rows } from "./assess.js";
import { drawWeights, orderDescending, predictions, quantile, seededRandom, topLabelConfidence } from "./metrics.js";

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
}

/** Picks a question's threshold: the largest accepted share whose accuracy is at least `target`. */
export function pickThreshold(info: QuestionInfo, rows: Rows, target: number, options: { seed: number; bootstrap: number }): Threshold {
  const s = rows.scored();
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
  const accepted = (i: number) => threshold !== null && (confidence[i] as number) >= threshold;
  const figures = (w: Float64Array | undefined) => {
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
  const random = seededRandom(options.seed);
  const w = new Float64Array(s.n);
  const cov: number[] = [];
  const acc: number[] = [];
  for (let b = 0; b < options.bootstrap; b++) {
    const f = figures(drawWeights(s.n, random, w));
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
    coverage_interval: [quantile(cov, 0.025), quantile(cov, 0.975)],
    accuracy_interval: [quantile(acc, 0.025), quantile(acc, 0.975)],
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
      : `${t.question} (${t.type}, ${t.n} rows): accept at p >= ${f(t.threshold)}: coverage ${(t.coverage * 100).toFixed(1)}% [${(t.coverage_interval[0] * 100).toFixed(1)}, ${(t.coverage_interval[1] * 100).toFixed(1)}], accuracy ${f(t.accuracy)} [${f(t.accuracy_interval[0])}, ${f(t.accuracy_interval[1])}]`,
  );
  // Rounded up, toward the safe side: rounding down would accept rows under the threshold and miss the target accuracy.
  const job = Object.fromEntries(list.map((t) => [t.question, t.threshold === null ? 1 : Math.ceil(Number((t.threshold * 1e4).toPrecision(12))) / 1e4]));
  lines.push("", `job file: "review_below": ${JSON.stringify(job)}`);
  return lines.join("\n");
}
