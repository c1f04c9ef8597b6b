/**
 * Every metric `assess` reports, declared once: its name (the JSON key and
 * the `--fail-if` name), the question types it applies to, how it is
 * computed from a question's prepared rows, its interval, and how it prints.
 * The JSON, the terminal table, the HTML report, the gate and
 * docs/metrics.md are all read from this table: adding a metric is one entry.
 *
 * The table's order is the order of the JSON's `metrics` and of every table
 * that shows them.
 */
import type { QuestionType } from "../api/schema.js";
import { QUESTION_KINDS } from "../questions/index.js";
import {
  accuracyOf,
  auroc,
  averagePrecision,
  balancedAccuracyOf,
  brier,
  cellsOf,
  countCells,
  expectedLevel,
  kappaOf,
  logLoss,
  macroF1Of,
  maeExpected,
  predictions,
  rankedProbabilityScore,
  rankPair,
  spearman,
  topKAccuracy,
  topLabelConfidence,
  withinAccuracy,
  type Calibration,
  type EceEstimate,
  type RiskCoverage,
  type Scored,
} from "./metrics.js";

/**
 * What a metric needs prepared beyond the rows: "ranking", a binary
 * question's p(label 1) and gold positives, with its rows in descending
 * p(label 1) order; "ordinal", the expected and gold levels and their ranks.
 * The metrics of a question's type say what is prepared, never the type's name.
 */
export type Preparation = "ranking" | "ordinal";

/** What the metrics of a type need prepared. */
export function preparationsOf(metrics: readonly Metric[]): ReadonlySet<Preparation> {
  return new Set(metrics.flatMap((m) => (m.needs ? [m.needs] : [])));
}

/**
 * A question's rows prepared once, in assessment order (see assessQuestion):
 * in descending p(label 1) order when a metric ranks them, else in key order.
 */
export interface QuestionData {
  type: QuestionType;
  s: Scored;
  /** Predicted class of each row. */
  pred: Int32Array;
  /** Each row's confusion cell, gold * k + predicted. */
  cell: Int32Array;
  /** Top-label probability of each row. */
  confidence: Float64Array;
  /** 1 where the prediction is the gold class. */
  correct: Uint8Array;
  /** "ranking": p(label 1) and gold label 1 of each row; empty otherwise. */
  score: Float64Array;
  positive: Uint8Array;
  /** "ordinal": the expected level, the gold level, and the ranks of both; empty otherwise. */
  expected: Float64Array;
  gold: Float64Array;
  ranks: { a: Float64Array; b: Float64Array } | undefined;
}

/** Prepares a question's rows for the metrics, with what `needs` asks beyond the rows. */
export function questionData(type: QuestionType, s: Scored, needs: ReadonlySet<Preparation>): QuestionData {
  const pred = predictions(s);
  const correct = new Uint8Array(s.n);
  for (let i = 0; i < s.n; i++) correct[i] = pred[i] === s.y[i] ? 1 : 0;
  const score = new Float64Array(needs.has("ranking") ? s.n : 0);
  const positive = new Uint8Array(score.length);
  for (let i = 0; i < score.length; i++) {
    score[i] = s.p[i * 2 + 1] as number;
    positive[i] = s.y[i] === 1 ? 1 : 0;
  }
  const ordinal = needs.has("ordinal");
  const expected = ordinal ? expectedLevel(s) : new Float64Array(0);
  const gold = ordinal ? Float64Array.from(s.y) : new Float64Array(0);
  return {
    type,
    s,
    pred,
    cell: cellsOf(s.y, pred, s.k),
    confidence: topLabelConfidence(s),
    correct,
    score,
    positive,
    expected,
    gold,
    ranks: ordinal ? rankPair(expected, gold) : undefined,
  };
}

/** What a weighted metric sees: the prepared rows, their weights (ones, or a bootstrap draw's counts) and the weighted confusion matrix. */
export interface Weighted {
  d: QuestionData;
  w: Uint8Array;
  /** k x k, gold rows by predicted columns, weighted. */
  m: Float64Array;
}

/** What a metric computed once (never resampled) sees: the prepared rows and the passes assess makes over them anyway. */
export interface Whole {
  d: QuestionData;
  calibration: Calibration;
  risk: RiskCoverage;
  ece: EceEstimate;
}

interface Declared {
  /** The key in the JSON's `metrics`, and the name `--fail-if` takes unless `gate` says otherwise. */
  name: string;
  /** How tables and the report name it. */
  label: string;
  /** One sentence for docs/metrics.md: what it measures and how. */
  doc: string;
  types: readonly QuestionType[];
  better: "higher" | "lower";
  /** Decimals printed; a percent prints its value times 100 with this many decimals and a % sign. */
  digits: number;
  percent?: boolean;
  /** The name `--fail-if` takes, when not `name`. */
  gate?: string;
  /** The terminal table prints the ECE noise floor beside this one. */
  noiseFloor?: boolean;
  /** What it needs prepared beyond the rows (see `Preparation`). */
  needs?: Preparation;
}

/** A metric of the rows under weights: a bootstrap interval is available. */
export interface WeightedMetric extends Declared {
  weighted: (x: Weighted) => number;
  /** "bootstrap": a 95% percentile interval over the bootstrap draws, widened to hold the estimate (a headline figure). */
  interval?: "bootstrap";
}

/** A metric computed once from whole-question passes; its interval, if any, comes from the same data. */
export interface WholeMetric extends Declared {
  whole: (x: Whole) => number;
  interval?: (x: Whole) => [number, number];
}

export type Metric = WeightedMetric | WholeMetric;

const ALL: readonly QuestionType[] = QUESTION_KINDS.map((k) => k.type);

/** The metrics, in the order the JSON and every table show them. */
export const METRIC_TABLE: readonly Metric[] = [
  {
    name: "accuracy",
    label: "accuracy",
    doc: "Share of rows whose most probable label is the gold label.",
    types: ALL,
    better: "higher",
    digits: 3,
    weighted: ({ d, m }) => accuracyOf(m, d.s.k),
    interval: "bootstrap",
  },
  {
    name: "balanced_accuracy",
    label: "balanced accuracy",
    doc: "Mean recall over the labels that occur in the gold (scikit-learn's balanced accuracy).",
    types: ["noul", "choice"],
    better: "higher",
    digits: 3,
    weighted: ({ d, m }) => balancedAccuracyOf(m, d.s.k),
  },
  {
    name: "macro_f1",
    label: "macro-F1",
    doc: "F1 averaged over the options that occur in the gold or the predictions (an undefined F1 counts 0).",
    types: ["choice"],
    better: "higher",
    digits: 3,
    weighted: ({ d, m }) => macroF1Of(m, d.s.k),
    interval: "bootstrap",
  },
  {
    name: "kappa",
    label: "Cohen's kappa",
    doc: "Agreement with the gold beyond chance, unweighted.",
    types: ["choice"],
    better: "higher",
    digits: 3,
    weighted: ({ d, m }) => kappaOf(m, d.s.k),
  },
  {
    name: "qwk",
    label: "quadratic kappa",
    doc: "Cohen's kappa with quadratic weights on the distance between levels.",
    types: ["score"],
    better: "higher",
    digits: 3,
    weighted: ({ d, m }) => kappaOf(m, d.s.k, "quadratic"),
    interval: "bootstrap",
  },
  {
    name: "top2_accuracy",
    label: "top-2 accuracy",
    doc: "Share of rows whose gold option is among the two most probable (ties count against).",
    types: ["choice"],
    better: "higher",
    digits: 3,
    weighted: ({ d, w }) => topKAccuracy(d.s, 2, w),
  },
  {
    name: "brier",
    label: "Brier",
    doc: "Mean squared distance between the probabilities and the one-hot gold label (a noul: of p(yes) alone).",
    types: ["noul", "choice"],
    better: "lower",
    digits: 3,
    weighted: ({ d, w }) => brier(d.s, w),
  },
  {
    name: "log_loss",
    label: "log loss",
    doc: "Mean negative log-probability of the gold label, probabilities clipped to [1e-15, 1 - 1e-15].",
    types: ["noul", "choice"],
    better: "lower",
    digits: 3,
    weighted: ({ d, w }) => logLoss(d.s, w),
  },
  {
    name: "auroc",
    label: "AUROC",
    doc: "Area under the ROC curve of p(yes); tied probabilities count half.",
    types: ["noul"],
    better: "higher",
    digits: 3,
    needs: "ranking",
    weighted: ({ d, w }) => auroc(d.score, d.positive, w),
    interval: "bootstrap",
  },
  {
    name: "auprc",
    label: "AUPRC",
    doc: "Average precision of p(yes) (scikit-learn's average_precision_score).",
    types: ["noul"],
    better: "higher",
    digits: 3,
    needs: "ranking",
    weighted: ({ d, w }) => averagePrecision(d.score, d.positive, w),
  },
  {
    name: "within_one",
    label: "within one level",
    doc: "Share of rows whose most probable level is at most one level from the gold level.",
    types: ["score"],
    better: "higher",
    digits: 3,
    weighted: ({ d, w }) => withinAccuracy(d.pred, d.s.y, 1, w),
  },
  {
    name: "mae",
    label: "MAE (expected score)",
    doc: "Mean absolute distance between the expected level (sum of level times probability) and the gold level.",
    types: ["score"],
    better: "lower",
    digits: 3,
    needs: "ordinal",
    weighted: ({ d, w }) => maeExpected(d.expected, d.s.y, w),
  },
  {
    name: "spearman",
    label: "Spearman",
    doc: "Rank correlation between the expected level and the gold level.",
    types: ["score"],
    better: "higher",
    digits: 3,
    needs: "ordinal",
    weighted: ({ d, w }) => spearman(d.expected, d.gold, w, d.ranks),
  },
  {
    name: "rps",
    label: "RPS",
    doc: "Ranked probability score: squared distance between predicted and gold cumulative distributions, over the k-1 thresholds, in [0, 1].",
    types: ["score"],
    better: "lower",
    digits: 3,
    weighted: ({ d, w }) => rankedProbabilityScore(d.s, w),
  },
  {
    name: "ece",
    label: "ECE (15 bins)",
    doc: "Expected calibration error: |accuracy - confidence| over 15 equal-width bins of the top-label probability, weighted by bin size. Biased upward at small n: compare with the noise floor printed beside it.",
    types: ALL,
    better: "lower",
    digits: 3,
    noiseFloor: true,
    whole: ({ calibration }) => calibration.ece,
  },
  {
    name: "ace",
    label: "adaptive ECE",
    doc: "The ECE over 15 equal-count bins.",
    types: ALL,
    better: "lower",
    digits: 3,
    whole: ({ calibration }) => calibration.ace,
  },
  {
    name: "mce",
    label: "MCE",
    doc: "Largest |accuracy - confidence| of a non-empty equal-width bin.",
    types: ALL,
    better: "lower",
    digits: 3,
    whole: ({ calibration }) => calibration.mce,
  },
  {
    name: "aurc",
    label: "risk-coverage area",
    doc: "Area under the risk-coverage curve: the error rate of the most confident rows, averaged over every coverage.",
    types: ALL,
    better: "lower",
    digits: 3,
    whole: ({ risk }) => risk.aurc,
  },
  {
    name: "ece_debiased",
    label: "ECE, noise removed",
    doc: "Median-unbiased estimate of the population's binned ECE (0 when the measured ECE is within noise); its 95% interval inverts the ECE's simulated sampling distribution and always holds the estimate.",
    types: ALL,
    better: "lower",
    digits: 3,
    whole: ({ ece }) => ece.estimate,
    interval: ({ ece }) => ece.interval,
  },
];

/** The metrics of a question type, in table order. */
export function metricsOf(type: QuestionType, table: readonly Metric[] = METRIC_TABLE): Metric[] {
  return table.filter((m) => m.types.includes(type));
}

/** Metrics with an interval: the headline figures of a question. */
export function headlineOf(type: QuestionType, table: readonly Metric[] = METRIC_TABLE): Metric[] {
  return metricsOf(type, table).filter((m) => m.interval !== undefined);
}

export const isWeighted = (m: Metric): m is WeightedMetric => "weighted" in m;

/** The name `--fail-if` takes for a metric. */
export const gateName = (m: Metric): string => m.gate ?? m.name;

/** A metric's value as tables print it: its digits, as a percent when declared one; n/a when it could not be computed. */
export function metricText(m: Metric, x: number | undefined): string {
  if (x === undefined || !Number.isFinite(x)) return "n/a";
  return m.percent ? `${(x * 100).toFixed(m.digits)}%` : x.toFixed(m.digits);
}

/** Weighted metrics on weights `w`, one confusion matrix (counted into `m`, k x k) shared by all. */
export function weightedValues(d: QuestionData, w: Uint8Array, metrics: readonly WeightedMetric[], m: Float64Array): number[] {
  const x: Weighted = { d, w, m: countCells(d.cell, w, m) };
  return metrics.map((metric) => metric.weighted(x));
}

/** docs/metrics.md: the table as a page (test/quality/metric-table.test.ts keeps the committed page current). */
export function metricsMarkdown(table: readonly Metric[] = METRIC_TABLE): string {
  const cell = (s: string) => s.replaceAll("|", "\\|");
  const interval = (m: Metric) => (m.interval === undefined ? "–" : isWeighted(m) ? "bootstrap, 95%" : "its own, 95%");
  return `# Assessment metrics

<!-- Generated from src/quality/metric-table.ts; do not edit. UPDATE_DOCS=1 npx vitest run test/quality/metric-table.test.ts rewrites it. -->

\`typed-eval assess\` reports these metrics per question, under \`metrics\` in
its JSON (the key is the name below), in the terminal table and in the HTML
report. Metrics with an interval are the headline figures; their 95%
intervals are under \`intervals\`. Any metric can gate a run:
\`--fail-if "question.name>value"\` (or a bare \`name\`: every question) exits 4
when the condition holds, or when the metric could not be computed.

Conventions: the predicted label is the most probable (ties to the first);
"confidence" is the top label's probability; a noul's classes are no = 0,
yes = 1. Bootstrap intervals come from \`--bootstrap\` draws (default 200)
keyed by record id and \`--seed\`, so the same rows in any order give the same
interval.

| \`--fail-if\` name | shown as | question types | better | interval | what it is |
|---|---|---|---|---|---|
${table.map((m) => `| \`${gateName(m)}\` | ${cell(m.label)} | ${m.types.join(", ")} | ${m.better} | ${interval(m)} | ${cell(m.doc)} |`).join("\n")}
`;
}
