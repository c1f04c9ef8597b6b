/**
 * Review thresholds from gold labels: per question, the lowest top-label
 * probability at which the rows kept reach a target (overall accuracy, or
 * one class's precision or recall), on at least `MIN_SUPPORT` rows, with
 * the count behind every figure and Wilson intervals (a bootstrap of 2 rows
 * both right reads [1.000, 1.000], a certainty; Wilson's reads 0.342-1).
 */
import { displayLabels, QualityInputError, type QuestionInfo } from "./answers.js";
import type { Joined, Rows } from "./assess.js";
import { orderDescending, predictions, topLabelConfidence, wilsonInterval } from "./metrics.js";
import { num, pct, tally } from "./numbers.js";

/**
 * The fewest rows a picked threshold's figure may rest on unless told
 * otherwise (`--min-support`): 30 of 30 right has a 95% Wilson interval of
 * 0.886-1, where 2 of 2 has 0.342-1.
 */
export const MIN_SUPPORT = 30;

/** The most decimals a suggested `review_below` takes: confidences closer than this are one confidence (0.99 and 0.9900000000000001), never a cut. */
const MAX_DIGITS = 8;

/** What the accepted rows must reach: overall accuracy, or a class's precision (accepted rows answered with it) or recall (accepted rows whose gold is it). */
export type TargetMetric = "accuracy" | "precision" | "recall";

export interface Target {
  metric: TargetMetric;
  value: number;
  /** The class a precision or recall target is for: `question=label`, or a label only one question has. */
  class?: string | undefined;
}

/** A figure of the accepted rows with its count: `hits` of `support`. */
export interface Supported {
  value: number;
  hits: number;
  support: number;
  /** 95% Wilson interval; null without rows. */
  interval: [number, number] | null;
}

export interface Threshold {
  question: string;
  type: QuestionInfo["type"];
  n: number;
  /** The target value (kept for readers of the accuracy-only output). */
  target: number;
  target_metric: TargetMetric;
  /** The class of a precision or recall target, as the gold file writes it; null for accuracy. */
  target_class: string | null;
  /** The fewest rows the target figure could rest on. */
  min_support: number;
  /** Rows with top-label probability at or above this are accepted; null when no threshold reaches the target on `min_support` rows. */
  threshold: number | null;
  /** Rows accepted at the threshold. */
  accepted: number;
  coverage: number;
  coverage_interval: [number, number] | null;
  /** Accuracy of the accepted rows, `correct` of `accepted`. */
  accuracy: number;
  correct: number;
  accuracy_interval: [number, number] | null;
  /** The target figure (for accuracy, the same as `accuracy`). */
  figure: Supported;
  /** The threshold as the job's `review_below`: the shortest decimal (4 to 8 digits) that accepts exactly the same rows; 1 when there is no threshold. */
  review_below: number;
}

/**
 * The shortest decimal r (4 digits or more, at most `MAX_DIGITS`) with
 * `below < r <= threshold`: rows at or above r are exactly those at or above
 * the threshold, so the pasted value keeps the figure it was picked for.
 * Rounding to the nearest could land under a lower-confidence row and let it
 * in (0.89996 against a 0.9 target). Undefined when no such decimal exists:
 * the two confidences differ by float noise, and no cut falls between them.
 */
export function safeThreshold(threshold: number, below: number): number | undefined {
  for (let digits = 4; digits <= MAX_DIGITS; digits++) {
    // The nearest decimal when it is not above the threshold (0.29, not 0.2899 from 0.29 * 1e4 = 2899.9999999999995), else the one under it.
    for (const r of [Number(threshold.toFixed(digits)), Number((Math.floor(threshold * 10 ** digits) / 10 ** digits).toFixed(digits))])
      if (r > below && r <= threshold) return r;
  }
  return undefined;
}

/** The class index a precision or recall target names in this question, or undefined when it names another question's. */
function targetClass(info: QuestionInfo, target: Target): number | undefined {
  if (target.metric === "accuracy") return undefined;
  const spec = target.class ?? "";
  const eq = spec.indexOf("=");
  if (eq >= 0 && spec.slice(0, eq) !== info.name) return undefined;
  const label = eq >= 0 ? spec.slice(eq + 1) : spec;
  const shown = displayLabels(info);
  const at = info.labels.indexOf(label);
  const j = at >= 0 ? at : shown.indexOf(label);
  return j >= 0 ? j : undefined;
}

/** The questions a target applies to: every question for accuracy; for a class, the one question that has it (else exit 2). */
export function targetedQuestions(questions: QuestionInfo[], target: Target): QuestionInfo[] {
  if (target.metric === "accuracy") return questions;
  if (!target.class) throw new QualityInputError(`--target-${target.metric} needs --class: the class it is for, as question=label (e.g. team=fraud)`);
  const found = questions.filter((q) => targetClass(q, target) !== undefined);
  if (found.length === 1) return found;
  const known = questions.map((q) => `${q.name}: ${displayLabels(q).join(", ")}`).join("; ");
  throw new QualityInputError(
    found.length === 0
      ? `--class ${target.class} names no question's option (${known}); write it as question=label`
      : `--class ${target.class} is an option of ${found.map((q) => q.name).join(" and ")}; name the question: question=label`,
  );
}

const supported = (hits: number, support: number): Supported => ({
  value: support > 0 ? hits / support : NaN,
  hits,
  support,
  interval: wilsonInterval(hits, support) ?? null,
});

/** The accepted rows' counts as a walk down the ranking takes them: right answers, and for a class its answers and gold rows. */
class Counts {
  private at = { accepted: 0, right: 0, predicted: 0, predictedRight: 0, gold: 0, goldRight: 0 };
  constructor(
    private readonly metric: TargetMetric,
    private readonly c: number | undefined,
  ) {}
  add(pred: number, gold: number): void {
    const ok = pred === gold ? 1 : 0;
    const a = this.at;
    a.accepted++;
    a.right += ok;
    if (pred === this.c) {
      a.predicted++;
      a.predictedRight += ok;
    }
    if (gold === this.c) {
      a.gold++;
      a.goldRight += ok;
    }
  }
  snapshot(): Counts["at"] {
    return { ...this.at };
  }
  /** The target figure's hits and support so far. */
  figure(): [number, number] {
    return Counts.figureOf(this.at, this.metric);
  }
  static figureOf(a: Counts["at"], metric: TargetMetric): [number, number] {
    return metric === "precision" ? [a.predictedRight, a.predicted] : metric === "recall" ? [a.goldRight, a.gold] : [a.right, a.accepted];
  }
}

/**
 * Picks a question's threshold: the largest accepted share whose target
 * figure is at least the target on at least `minSupport` rows (the figure's
 * own denominator: accepted rows for accuracy, accepted rows answered with
 * the class for precision, accepted rows whose gold is the class for recall).
 */
export function pickThreshold(info: QuestionInfo, rows: Rows, target: Target, options: { minSupport?: number | undefined } = {}): Threshold {
  const minSupport = options.minSupport ?? MIN_SUPPORT;
  const { s } = rows.keyed();
  const confidence = topLabelConfidence(s);
  const pred = predictions(s);
  const c = targetClass(info, target);
  const order = orderDescending(confidence);
  const counts = new Counts(target.metric, c);
  let best = -1;
  let reviewBelow: number | undefined;
  let at = counts.snapshot();
  // Walk down the ranking; a cut may only fall between confidences a decimal of MAX_DIGITS can tell apart, since a threshold keeps ties together.
  for (let m = 0; m < s.n; m++) {
    const i = order[m] as number;
    counts.add(pred[i] as number, s.y[i] as number);
    const next = m + 1 < s.n ? (confidence[order[m + 1] as number] as number) : -Infinity;
    const r = safeThreshold(confidence[i] as number, next);
    if (r === undefined) continue;
    const [hits, support] = counts.figure();
    if (support >= minSupport && hits / support >= target.value) {
      best = m;
      reviewBelow = r;
      at = counts.snapshot();
    }
  }
  const threshold = best >= 0 ? (confidence[order[best] as number] as number) : null;
  const { accepted, right } = at;
  const [hits, support] = Counts.figureOf(at, target.metric);
  const accuracy = supported(right, accepted);
  return {
    question: info.name,
    type: info.type,
    n: s.n,
    target: target.value,
    target_metric: target.metric,
    target_class: c === undefined ? null : (info.labels[c] as string),
    min_support: minSupport,
    threshold,
    accepted,
    coverage: s.n ? accepted / s.n : 0,
    coverage_interval: wilsonInterval(accepted, s.n) ?? null,
    accuracy: accuracy.value,
    correct: right,
    accuracy_interval: accuracy.interval,
    figure: target.metric === "accuracy" ? accuracy : supported(hits, support),
    review_below: threshold === null ? 1 : (reviewBelow as number),
  };
}

/** Per question the target applies to (every question with gold rows, or the one that has the class), its threshold. */
export function thresholds(joined: Joined, target: Target, options: { minSupport?: number | undefined } = {}): Threshold[] {
  const withRows = joined.questions.filter((q) => (joined.rows.get(q.name)?.n ?? 0) > 0);
  return targetedQuestions(withRows, target).map((q) => pickThreshold(q, joined.rows.get(q.name) as Rows, target, options));
}

/** The target in words: "accuracy 0.95", "precision of fraud 0.9". */
function targetText(t: Threshold): string {
  return t.target_metric === "accuracy" ? `accuracy ${t.target}` : `${t.target_metric} of ${t.target_class} ${t.target}`;
}

const interval = (i: [number, number] | null) => (i ? ` (95%: ${num(i[0])}–${num(i[1])})` : "");

/** The thresholds for the terminal, every figure with its count, then the job file's `review_below`. */
export function describeThresholds(list: Threshold[]): string {
  const lines = list.map((t) => {
    const head = `${t.question} (${t.type}, ${tally(t.n)} rows)`;
    if (t.threshold === null)
      return `${head}: no threshold reaches ${targetText(t)} on at least ${tally(t.min_support)} rows; review every row (fewer rows: --min-support)`;
    const f = t.figure;
    const own =
      t.target_metric === "accuracy"
        ? ""
        : `; ${t.target_metric} of ${t.target_class} ${num(f.value)}${interval(f.interval)}, ${tally(f.hits)} of ${tally(f.support)}`;
    const cov = t.coverage_interval ? ` (95%: ${pct(t.coverage_interval[0])}–${pct(t.coverage_interval[1])})` : "";
    return `${head}: accept at p >= ${t.review_below}: ${tally(t.accepted)} rows, coverage ${pct(t.coverage)}${cov}; accuracy ${num(t.accuracy)}${interval(t.accuracy_interval)}, ${tally(t.correct)} of ${tally(t.accepted)}${own}`;
  });
  const job = Object.fromEntries(list.map((t) => [t.question, t.review_below]));
  lines.push("", `job file: "review_below": ${JSON.stringify(job)}`);
  return lines.join("\n");
}
