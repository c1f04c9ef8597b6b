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
import type { QuestionType, SpecType } from "../api/schema.js";
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
  wilsonInterval,
  withinAccuracy,
  type Calibration,
  type EceEstimate,
  type RiskCoverage,
  type Scored,
} from "./metrics.js";
import { num } from "./numbers.js";

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
  /** Per class counts and figures (see classFigures). */
  classes: ClassFigures[];
}

/** A class whose gold rows are under this share of a question's gold rows is rare: the weakest class's recall is then the headline. */
export const RARE_CLASS_SHARE = 0.1;

/** One class of a noul or choice question against the gold: counts, recall and precision with 95% Wilson intervals (null without rows to count). */
export interface ClassFigures {
  label: string;
  /** Rows gold-labelled with the class, and its share of the gold rows. */
  gold: number;
  share: number;
  /** Rows the model answers with the class, and how many of those are right. */
  predicted: number;
  hits: number;
  recall: number | null;
  recall_interval: [number, number] | null;
  precision: number | null;
  precision_interval: [number, number] | null;
  /** Under RARE_CLASS_SHARE of the gold rows (and at least one). */
  rare: boolean;
}

/** Per class figures from a k x k confusion matrix (gold rows by predicted columns) and the classes' names. */
export function classFigures(m: ArrayLike<number>, labels: readonly string[]): ClassFigures[] {
  const k = labels.length;
  let total = 0;
  for (let i = 0; i < k * k; i++) total += m[i] as number;
  return labels.map((label, c) => {
    let gold = 0;
    let predicted = 0;
    for (let j = 0; j < k; j++) {
      gold += m[c * k + j] as number;
      predicted += m[j * k + c] as number;
    }
    const hits = m[c * k + c] as number;
    const share = total > 0 ? gold / total : 0;
    return {
      label,
      gold,
      share,
      predicted,
      hits,
      recall: gold > 0 ? hits / gold : null,
      recall_interval: wilsonInterval(hits, gold) ?? null,
      precision: predicted > 0 ? hits / predicted : null,
      precision_interval: wilsonInterval(hits, predicted) ?? null,
      rare: gold > 0 && share < RARE_CLASS_SHARE,
    };
  });
}

/** The class with gold rows whose recall is lowest (the first in label order on a tie); undefined when no class has gold rows. */
export function weakestClass(classes: readonly ClassFigures[]): ClassFigures | undefined {
  let weakest: ClassFigures | undefined;
  for (const c of classes) if (c.recall !== null && (weakest === undefined || c.recall < (weakest.recall as number))) weakest = c;
  return weakest;
}

/** The class the model answers with whose answers are least often right (the first in label order on a tie); undefined when the model answers with no class. */
export function leastPreciseClass(classes: readonly ClassFigures[]): ClassFigures | undefined {
  let least: ClassFigures | undefined;
  for (const c of classes) if (c.precision !== null && (least === undefined || c.precision < (least.precision as number))) least = c;
  return least;
}

/** The values a figure can take: a `--fail-if` limit outside them can never hold and is refused. */
export type Range = readonly [number, number];
const UNIT: Range = [0, 1];
const SIGNED: Range = [-1, 1];
const UNBOUNDED: Range = [0, Number.POSITIVE_INFINITY];

interface Declared {
  /** The key in the JSON's `metrics`, and the name `--fail-if` takes unless `gate` says otherwise. */
  name: string;
  /** How tables and the report name it. */
  label: string;
  /** One sentence for docs/metrics.md: what it measures and how. */
  doc: string;
  /** The types it applies to: "every" type (one registered in process too), or those a metric's arithmetic needs (a ranking wants two classes). */
  types: Applies;
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
  /** The verdict column that shows it (and marks a --fail-if breach of it). */
  column: "agreement" | "calibration" | "weakest_class";
  /** The values it can take. */
  range: Range;
  /** What its support is (the rows it rests on, which `--fail-if ... min N` reads), for the docs; default: the question's gold rows. */
  supportDoc?: string;
  /** Its support, when not the question's gold rows. */
  support?: (x: Whole) => number;
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

/** The question types a metric applies to. */
export type Applies = "every" | readonly SpecType[];
const ALL = "every";

/** Whether a metric that `applies` serves a unit of this type. */
export function appliesTo(applies: Applies, type: QuestionType): boolean {
  return applies === ALL || (applies as readonly QuestionType[]).includes(type);
}

/** The metrics, in the order the JSON and every table show them. */
export const METRIC_TABLE: readonly Metric[] = [
  {
    name: "accuracy",
    column: "agreement",
    label: "accuracy",
    doc: "Share of rows whose most probable label is the gold label.",
    types: ALL,
    better: "higher",
    range: UNIT,
    digits: 3,
    weighted: ({ d, m }) => accuracyOf(m, d.s.k),
    interval: "bootstrap",
  },
  {
    name: "balanced_accuracy",
    column: "agreement",
    label: "balanced accuracy",
    doc: "Mean recall over the labels that occur in the gold (scikit-learn's balanced accuracy).",
    types: ["noul", "choice"],
    better: "higher",
    range: UNIT,
    digits: 3,
    weighted: ({ d, m }) => balancedAccuracyOf(m, d.s.k),
  },
  {
    name: "weakest_recall",
    column: "weakest_class",
    label: "weakest class recall",
    doc: "Recall of the class the model finds least often among those in the gold, with its 95% Wilson interval: the headline figure when a class is rare (under 10% of gold rows), where accuracy can stay high while that class is missed.",
    types: ["noul", "choice"],
    better: "higher",
    range: UNIT,
    digits: 3,
    supportDoc: "that class's gold rows",
    support: ({ classes }) => weakestClass(classes)?.gold ?? 0,
    whole: ({ classes }) => weakestClass(classes)?.recall ?? Number.NaN,
    interval: ({ classes }) => weakestClass(classes)?.recall_interval ?? [Number.NaN, Number.NaN],
  },
  {
    name: "weakest_precision",
    column: "weakest_class",
    label: "least class precision",
    doc: "Precision of the class whose answers are least often right, among those the model answers with, with its 95% Wilson interval: a rare class the model over-answers shows here (few of its answers right) while its recall and the accuracy read well.",
    types: ["noul", "choice"],
    better: "higher",
    range: UNIT,
    digits: 3,
    supportDoc: "the rows answered with that class",
    support: ({ classes }) => leastPreciseClass(classes)?.predicted ?? 0,
    whole: ({ classes }) => leastPreciseClass(classes)?.precision ?? Number.NaN,
    interval: ({ classes }) => leastPreciseClass(classes)?.precision_interval ?? [Number.NaN, Number.NaN],
  },
  {
    name: "macro_f1",
    column: "agreement",
    label: "macro-F1",
    doc: "F1 averaged over the options that occur in the gold or the predictions (an undefined F1 counts 0).",
    types: ["choice"],
    better: "higher",
    range: UNIT,
    digits: 3,
    weighted: ({ d, m }) => macroF1Of(m, d.s.k),
    interval: "bootstrap",
  },
  {
    name: "kappa",
    column: "agreement",
    label: "Cohen's kappa",
    doc: "Agreement with the gold beyond chance, unweighted.",
    types: ["choice"],
    better: "higher",
    range: SIGNED,
    digits: 3,
    weighted: ({ d, m }) => kappaOf(m, d.s.k),
  },
  {
    name: "qwk",
    column: "agreement",
    label: "quadratic kappa",
    doc: "Cohen's kappa with quadratic weights on the distance between levels.",
    types: ["score"],
    better: "higher",
    range: SIGNED,
    digits: 3,
    weighted: ({ d, m }) => kappaOf(m, d.s.k, "quadratic"),
    interval: "bootstrap",
  },
  {
    name: "top2_accuracy",
    column: "agreement",
    label: "top-2 accuracy",
    doc: "Share of rows whose gold option is among the two most probable (ties count against).",
    types: ["choice"],
    better: "higher",
    range: UNIT,
    digits: 3,
    weighted: ({ d, w }) => topKAccuracy(d.s, 2, w),
  },
  {
    name: "brier",
    column: "calibration",
    label: "Brier",
    doc: "Mean squared distance between the probabilities and the one-hot gold label (a noul: of p(yes) alone).",
    types: ["noul", "choice"],
    better: "lower",
    range: [0, 2],
    digits: 3,
    weighted: ({ d, w }) => brier(d.s, w),
  },
  {
    name: "log_loss",
    column: "calibration",
    label: "log loss",
    doc: "Mean negative log-probability of the gold label, probabilities clipped to [1e-15, 1 - 1e-15].",
    types: ["noul", "choice"],
    better: "lower",
    range: UNBOUNDED,
    digits: 3,
    weighted: ({ d, w }) => logLoss(d.s, w),
  },
  {
    name: "auroc",
    column: "agreement",
    label: "AUROC",
    doc: "Area under the ROC curve of p(yes); tied probabilities count half.",
    types: ["noul"],
    better: "higher",
    range: UNIT,
    digits: 3,
    needs: "ranking",
    weighted: ({ d, w }) => auroc(d.score, d.positive, w),
    interval: "bootstrap",
  },
  {
    name: "auprc",
    column: "agreement",
    label: "AUPRC",
    doc: "Average precision of p(yes) (scikit-learn's average_precision_score).",
    types: ["noul"],
    better: "higher",
    range: UNIT,
    digits: 3,
    needs: "ranking",
    weighted: ({ d, w }) => averagePrecision(d.score, d.positive, w),
  },
  {
    name: "within_one",
    column: "agreement",
    label: "within one level",
    doc: "Share of rows whose most probable level is at most one level from the gold level.",
    types: ["score"],
    better: "higher",
    range: UNIT,
    digits: 3,
    weighted: ({ d, w }) => withinAccuracy(d.pred, d.s.y, 1, w),
  },
  {
    name: "mae",
    column: "agreement",
    label: "MAE (expected score)",
    doc: "Mean absolute distance between the expected level (sum of level times probability) and the gold level.",
    types: ["score"],
    better: "lower",
    range: UNBOUNDED,
    digits: 3,
    needs: "ordinal",
    weighted: ({ d, w }) => maeExpected(d.expected, d.s.y, w),
  },
  {
    name: "spearman",
    column: "agreement",
    label: "Spearman",
    doc: "Rank correlation between the expected level and the gold level.",
    types: ["score"],
    better: "higher",
    range: SIGNED,
    digits: 3,
    needs: "ordinal",
    weighted: ({ d, w }) => spearman(d.expected, d.gold, w, d.ranks),
  },
  {
    name: "rps",
    column: "calibration",
    label: "RPS",
    doc: "Ranked probability score: squared distance between predicted and gold cumulative distributions, over the k-1 thresholds, in [0, 1].",
    types: ["score"],
    better: "lower",
    range: UNIT,
    digits: 3,
    weighted: ({ d, w }) => rankedProbabilityScore(d.s, w),
  },
  {
    name: "ece",
    column: "calibration",
    label: "ECE (15 bins)",
    doc: "Expected calibration error: |accuracy - confidence| over 15 equal-width bins of the top-label probability, weighted by bin size. Biased upward at small n: compare with the noise floor printed beside it.",
    types: ALL,
    better: "lower",
    range: UNIT,
    digits: 3,
    noiseFloor: true,
    whole: ({ calibration }) => calibration.ece,
  },
  {
    name: "ace",
    column: "calibration",
    label: "adaptive ECE",
    doc: "The ECE over 15 equal-count bins.",
    types: ALL,
    better: "lower",
    range: UNIT,
    digits: 3,
    whole: ({ calibration }) => calibration.ace,
  },
  {
    name: "mce",
    column: "calibration",
    label: "MCE",
    doc: "Largest |accuracy - confidence| of a non-empty equal-width bin.",
    types: ALL,
    better: "lower",
    range: UNIT,
    digits: 3,
    whole: ({ calibration }) => calibration.mce,
  },
  {
    name: "aurc",
    column: "calibration",
    label: "risk-coverage area",
    doc: "Area under the risk-coverage curve: the error rate of the most confident rows, averaged over every coverage.",
    types: ALL,
    better: "lower",
    range: UNIT,
    digits: 3,
    whole: ({ risk }) => risk.aurc,
  },
  {
    name: "ece_debiased",
    column: "calibration",
    label: "ECE, noise removed",
    doc: "Median-unbiased estimate of the population's binned ECE (0 when the measured ECE is within noise); its 95% interval inverts the ECE's simulated sampling distribution and always holds the estimate.",
    types: ALL,
    better: "lower",
    range: UNIT,
    digits: 3,
    whole: ({ ece }) => ece.estimate,
    interval: ({ ece }) => ece.interval,
  },
];

/** A figure per class of a noul or choice question: `--fail-if` names it `question.recall["billing"]` (the class as a JSON string). */
export interface ClassMetric {
  name: "recall" | "precision";
  label: string;
  doc: string;
  types: Applies;
  better: "higher";
  column: "weakest_class";
  range: Range;
  value: (c: ClassFigures) => number | null;
  interval: (c: ClassFigures) => [number, number] | null;
  /** The rows the figure rests on (`--fail-if ... min N`), and its words for the docs. */
  support: (c: ClassFigures) => number;
  supportDoc: string;
}

/** The per class metrics, each with a 95% Wilson interval. */
export const CLASS_METRICS: readonly ClassMetric[] = [
  {
    name: "recall",
    label: "recall",
    doc: 'Share of the rows gold-labelled with the class that the model answers with it; `recall["billing"]` names the class as a JSON string.',
    types: ["noul", "choice"],
    better: "higher",
    column: "weakest_class",
    range: UNIT,
    value: (c) => c.recall,
    interval: (c) => c.recall_interval,
    support: (c) => c.gold,
    supportDoc: "the class's gold rows",
  },
  {
    name: "precision",
    label: "precision",
    doc: "Share of the rows the model answers with the class whose gold label it is.",
    types: ["noul", "choice"],
    better: "higher",
    column: "weakest_class",
    range: UNIT,
    value: (c) => c.precision,
    interval: (c) => c.precision_interval,
    support: (c) => c.predicted,
    supportDoc: "the rows answered with the class",
  },
];

/** The gate name of a per class metric: `recall["account access"]`. */
export const classGateName = (metric: string, label: string) => `${metric}[${JSON.stringify(label)}]`;

/** A metric of a run's answers alone, or of two runs compared (`report`, or `assess --compare`): these gate too. */
export interface DriftMetric {
  name: "psi" | "js_distance" | "agreement" | "label_mass";
  label: string;
  doc: string;
  better: "higher" | "lower";
  /** "compare": needs an earlier run's answers (--compare). */
  needs?: "compare";
  column: "drift" | "answered";
  range: Range;
  /** The rows the figure rests on (`--fail-if ... min N`), and its words for the docs. */
  support: (x: DriftSupport) => number;
  supportDoc: string;
}

/** What a drift metric's support is counted from: a question's rows tonight, the ids both runs hold, the rows carrying label mass. */
export interface DriftSupport {
  rows: number;
  shared: number;
  massRows: number;
}

/** PSI above these is worth a look, then a real shift (the usual rule of thumb). */
export const PSI_LOOK = 0.1;
export const PSI_ACT = 0.25;

/** The metrics of the answers and of two runs compared, in the order the report shows them. */
export const DRIFT_METRICS: readonly DriftMetric[] = [
  {
    name: "psi",
    label: "PSI",
    doc: `Population stability index from the earlier run to this one over a choice's options, a noul's p(yes) or a score's expected level in 10 equal-width bins (an empty bin counts as 0.0001 of the rows): ${PSI_LOOK} is worth a look, ${PSI_ACT} a real shift.`,
    better: "lower",
    needs: "compare",
    column: "drift",
    range: UNBOUNDED,
    support: (x) => x.rows,
    supportDoc: "this run's rows",
  },
  {
    name: "js_distance",
    label: "JS distance",
    doc: "Jensen-Shannon distance (base 2) between the two runs' top-label shares: 0 the same, 1 disjoint.",
    better: "lower",
    needs: "compare",
    column: "drift",
    range: UNIT,
    support: (x) => x.rows,
    supportDoc: "this run's rows",
  },
  {
    name: "agreement",
    label: "agreement with the earlier run",
    doc: "Share of the ids in both runs whose most probable label is the same (n/a when no id is in both).",
    better: "higher",
    needs: "compare",
    column: "drift",
    range: UNIT,
    support: (x) => x.shared,
    supportDoc: "the ids in both runs",
  },
  {
    name: "label_mass",
    label: "mean label mass",
    doc: "Mean share of the next-token probability that fell on the labels, over the rows that carry it (n/a when none does).",
    better: "higher",
    column: "answered",
    range: UNIT,
    support: (x) => x.massRows,
    supportDoc: "the rows carrying label mass",
  },
];

/** The metrics of a question type, in table order. */
export function metricsOf(type: QuestionType, table: readonly Metric[] = METRIC_TABLE): Metric[] {
  return table.filter((m) => appliesTo(m.types, type));
}

/** Metrics with an interval: the headline figures of a question. */
export function headlineOf(type: QuestionType, table: readonly Metric[] = METRIC_TABLE): Metric[] {
  return metricsOf(type, table).filter((m) => m.interval !== undefined);
}

export const isWeighted = (m: Metric): m is WeightedMetric => "weighted" in m;

/** The name `--fail-if` takes for a metric. */
export const gateName = (m: Metric): string => m.gate ?? m.name;

/** A metric's value as tables print it: its digits, as a percent when declared one; n/a when it could not be computed. */
export function metricText(m: Pick<Metric, "percent" | "digits">, x: number | null | undefined): string {
  if (x === undefined || x === null || !Number.isFinite(x)) return "n/a";
  return m.percent ? `${num(x * 100, m.digits)}%` : num(x, m.digits);
}

/** Weighted metrics on weights `w`, one confusion matrix (counted into `m`, k x k) shared by all. */
export function weightedValues(d: QuestionData, w: Uint8Array, metrics: readonly WeightedMetric[], m: Float64Array): number[] {
  const x: Weighted = { d, w, m: countCells(d.cell, w, m) };
  return metrics.map((metric) => metric.weighted(x));
}

/**
 * The verdict: one row per question, one cell per column, each marked ok,
 * look or act by the rules below (n/a when there is no evidence, which is
 * never ok). The HTML, the terminal, the JSON and docs/metrics.md all read
 * these rules; their texts are written from the same thresholds.
 */
export type Mark = "ok" | "look" | "act";

/** The verdict's columns, in the order every table shows them. */
export const COLUMN_KEYS = ["answered", "agreement", "calibration", "drift", "suspects", "weakest_class"] as const;
export type ColumnKey = (typeof COLUMN_KEYS)[number];

/** The thresholds of the verdict's rules. */
export const VERDICT_LIMITS = {
  /** Share of rows failed (no answer). */
  failedLook: 0.001,
  failedAct: 0.02,
  /** Accuracy against gold: the 95% interval's bottom for ok, its top for act. */
  agreementOk: 0.9,
  agreementAct: 0.7,
  /** The ECE with noise removed: act when its whole interval is above this. */
  eceAct: 0.05,
  /** Agreement with the earlier run under this: worth a look. */
  agreementLook: 0.9,
  /** The estimated share of wrong gold labels (net of the model's own doubt): look at this estimate (or an interval reaching the second), act when the whole 95% interval is at or above the second. */
  suspectsLook: 0.03,
  suspectsAct: 0.1,
  /** The weakest class's recall and the least precise class's precision: the interval's bottom for ok, its top for act. */
  recallOk: 0.7,
  recallAct: 0.5,
  /** Share of a question's gold rows the applied calibration was fitted on at which its calibration figures are in-sample. */
  inSample: 0.1,
  /** Gold chosen by confidence: the Kolmogorov-Smirnov distance between its rows' confidence and the run's, and the p-value under which it counts. */
  chosenDistance: 0.2,
  chosenP: 0.001,
} as const;

/** What each column's rule reads. */
export interface Evidence {
  answered: { answered: number; failed: number };
  agreement: { accuracy: number; interval: readonly [number, number]; commonest: number };
  /** `inSample`: the gold rows are mostly those the calibration the answers carry was fitted on. */
  calibration: { ece: number; noiseP95: number; debiased: readonly [number, number]; inSample: boolean };
  drift: { psi: number; agreement: number | undefined; modelChanged: boolean };
  /** The estimated share of wrong gold labels and its 95% interval. */
  suspects: { noise: number; interval: readonly [number, number] };
  /** The weakest class's recall interval, and the least precise class's precision interval (absent when the model answers with no class). */
  weakest_class: { recall: readonly [number, number]; precision?: readonly [number, number] | undefined };
}

export interface VerdictColumn<K extends ColumnKey = ColumnKey> {
  key: K;
  /** The column's header. */
  label: string;
  /** The rule in words, written beside the table. */
  rule: string;
  mark: (e: Evidence[K]) => Mark;
}

const L = VERDICT_LIMITS;
const share = (x: number) => `${Number((x * 100).toPrecision(6))}%`;

/** The verdict's rules, one per column. */
export const VERDICT_COLUMNS: { [K in ColumnKey]: VerdictColumn<K> } = {
  answered: {
    key: "answered",
    label: "answered",
    rule: `Rows answered and failed. act: none answered, or ${share(L.failedAct)} or more failed; look: ${share(L.failedLook)} or more failed; ok: fewer.`,
    mark: ({ answered, failed }) => {
      const rate = failed / (answered + failed || 1);
      return answered === 0 || rate >= L.failedAct ? "act" : rate >= L.failedLook ? "look" : "ok";
    },
  },
  agreement: {
    key: "agreement",
    label: "agreement with gold",
    rule: `Accuracy against the gold labels, with its 95% interval. act: the interval's top is under ${L.agreementAct}, or no better than always answering the commonest gold label; look: its bottom is under ${L.agreementOk}; ok: its bottom is ${L.agreementOk} or more.`,
    mark: ({ interval: [lo, hi], commonest }) => (hi < L.agreementAct || hi <= commonest ? "act" : lo < L.agreementOk ? "look" : "ok"),
  },
  calibration: {
    key: "calibration",
    label: "calibration",
    rule: `ECE against its noise floor (the 95th percentile of the ECE a calibrated model shows at this n). ok: within it; act: the ECE with noise removed is above ${L.eceAct} across its whole 95% interval; look: in between, or within it on gold rows the calibration was fitted on (${share(L.inSample)} of them or more: in-sample figures may flatter it; the calibration file's held-out ECE is named).`,
    mark: ({ ece, noiseP95, debiased: [lo], inSample }) => (ece <= noiseP95 ? (inSample ? "look" : "ok") : lo > L.eceAct ? "act" : "look"),
  },
  drift: {
    key: "drift",
    label: "drift",
    rule: `Against the earlier run (--compare). act: PSI ${PSI_ACT} or more; look: PSI ${PSI_LOOK} or more, agreement with the earlier run under ${share(L.agreementLook)}, or another model; ok: otherwise.`,
    mark: ({ psi, agreement, modelChanged }) =>
      psi >= PSI_ACT ? "act" : psi >= PSI_LOOK || (agreement !== undefined && agreement < L.agreementLook) || modelChanged ? "look" : "ok",
  },
  suspects: {
    key: "suspects",
    label: "suspects",
    rule: `The estimated share of wrong gold labels (assess --suspects), net of what the model's own recalibrated doubt explains (on a score, a wrong label is one a level away), with its 95% interval; the count of suspect rows is shown beside it. act: the interval's bottom is ${share(L.suspectsAct)} or more; look: the estimate is ${share(L.suspectsLook)} or more, or the interval's top is ${share(L.suspectsAct)} or more (too few rows to tell); ok: otherwise.`,
    mark: ({ noise, interval: [lo, hi] }) => (lo >= L.suspectsAct ? "act" : noise >= L.suspectsLook || hi >= L.suspectsAct ? "look" : "ok"),
  },
  weakest_class: {
    key: "weakest_class",
    label: "weakest class",
    rule: `Recall of the class the model finds least often, and precision of the class whose answers are least often right (noul and choice), each with its 95% Wilson interval. act: either interval's top is under ${L.recallAct}; look: either bottom is under ${L.recallOk}; ok: both bottoms are ${L.recallOk} or more.`,
    mark: ({ recall, precision }) => {
      const intervals = precision ? [recall, precision] : [recall];
      return intervals.some(([, hi]) => hi < L.recallAct) ? "act" : intervals.some(([lo]) => lo < L.recallOk) ? "look" : "ok";
    },
  },
};

/** The rules every column shares. */
export const VERDICT_COMMON_RULE =
  "In any column: act when a --fail-if condition on a metric it shows holds. A cell without evidence reads n/a with the reason and what to add, and is never ok.";

/** The columns whose evidence can earn an ok: every one but answered (rows answered say nothing of whether their labels are right). */
export const EVIDENCE_COLUMNS: readonly ColumnKey[] = COLUMN_KEYS.filter((k) => k !== "answered");

/** How a question's mark and the whole verdict's follow from the cells. */
export const VERDICT_MARK_RULE =
  "A question is act or look when any of its cells is; ok only when every cell with evidence is ok and at least one beyond answered has evidence (agreement, calibration, drift, suspects or weakest class); otherwise n/a. The verdict is act or look when any question is, ok only when every question is ok, and otherwise n/a: never ok when nothing beyond the answered rows was measured.";

/** What a gold sample chosen by confidence does to the columns measured on it. */
export const VERDICT_SAMPLE_RULE = `On gold chosen by confidence (its rows' top-label probabilities unlike the run's: a Kolmogorov-Smirnov distance of ${L.chosenDistance} or more, p < ${L.chosenP}; a review queue is such a sample), agreement, calibration and weakest class read look whatever their figures: those describe the chosen rows, not the run.`;

/** The verdict as a gate: `--fail-if "verdict>ok"` (every question) or `team.verdict>=act` compares a question's mark, ordered ok < look < act. */
export const VERDICT_GATE = {
  name: "verdict",
  marks: ["ok", "look", "act"] as const,
  doc: "A question's mark in the verdict, ordered ok < look < act: `verdict>ok` holds for every question not ok. A question marked n/a (nothing measured beyond the answered rows) holds any verdict condition, as a figure that cannot be computed does: a gate on `verdict>ok` never passes a night nobody measured.",
} as const;

/** The ECE noise floor as every table, page and the verdict name it: the 95th percentile of a calibrated model's ECE at this n. */
export function noiseFloorText(floor: { median: number; p95: number }): string {
  return `noise floor ${num(floor.p95)} (a calibrated model's median ${num(floor.median)})`;
}

/** The columns in order. */
export const VERDICT_COLUMN_LIST: readonly VerdictColumn[] = COLUMN_KEYS.map((k) => VERDICT_COLUMNS[k] as VerdictColumn);

/** The verdict column that shows a gate metric (`recall["x"]` is shown with the weakest class), or undefined for a name no table declares. */
export function columnOfMetric(name: string, table: readonly Metric[] = METRIC_TABLE): ColumnKey | undefined {
  const base = name.replace(/\[.*$/s, "");
  return (
    table.find((m) => gateName(m) === base)?.column ?? CLASS_METRICS.find((m) => m.name === base)?.column ?? DRIFT_METRICS.find((m) => m.name === base)?.column
  );
}

/** A range as the docs print it: "0 to 1", "0 and up". */
function rangeDoc([lo, hi]: Range): string {
  return Number.isFinite(hi) ? `${lo} to ${hi}` : `${lo} and up`;
}

/**
 * docs/metrics.md: the table as a page (test/quality/metric-table.test.ts keeps the committed page current).
 * Long: most of it is the page's own prose in one template, read as the page reads.
 */
export function metricsMarkdown(table: readonly Metric[] = METRIC_TABLE): string {
  const cell = (s: string) => s.replaceAll("|", "\\|");
  const interval = (m: Metric) => (m.interval === undefined ? "–" : isWeighted(m) ? "bootstrap, 95%" : "its own, 95%");
  const column = (key: ColumnKey) => VERDICT_COLUMNS[key].label;
  const typesText = (applies: Applies) => (applies === ALL ? "every type" : applies.join(", "));
  return `# Assessment metrics

<!-- Generated from src/quality/metric-table.ts; do not edit. UPDATE_DOCS=1 npx vitest run test/quality/metric-table.test.ts rewrites it. -->

\`typed-eval assess\` reports these metrics per question, under \`metrics\` in
its JSON (the key is the name below), each with the rows it rests on under
\`support\`, in the terminal table and in the HTML report. Metrics with an
interval are the headline figures; their 95% intervals are under
\`intervals\`.

## Gates

Any metric can gate a run: \`--fail-if "question.name>value"\` (or a bare
\`name\`: every question that has the metric) exits 4 when the condition
holds, or when the metric could not be computed. Conditions are separated by
commas; a breach is marked act in the verdict's column named below. Two
words after the limit ask more of the evidence:

- \`min N\`: the figure must rest on at least N rows (its support, below);
  on fewer the condition holds. \`team.recall["fraud"]<0.6 min 30\` fails a
  recall of 1 of 2 (0.5) that the bare condition would pass.
- \`interval\`: the condition holds when any value of the figure's 95%
  interval would, so it passes only when the whole interval clears the
  limit: \`team.accuracy<0.9 interval\` fails unless the interval's bottom is
  0.9 or more. Only metrics with an interval take it.

A gate that checks nothing is refused (exit 2) before any answers are read:
an empty one (\`""\`, \`","\`, \`"   "\`), and a condition that can never hold
because its limit is outside the values the metric takes (the range below:
\`topic.ece>5\`, \`accuracy<0\`). So is a condition on a metric the command
cannot measure with what it was given (a drift metric without \`--compare\`,
a gold metric without gold labels).

The verdict itself gates too: ${VERDICT_GATE.doc}

Conventions: the predicted label is the most probable (ties to the first);
"confidence" is the top label's probability; a noul's classes are no = 0,
yes = 1. Bootstrap intervals come from \`--bootstrap\` draws (default 200)
keyed by record id and \`--seed\`, so the same rows in any order give the same
interval.

| \`--fail-if\` name | shown as | question types | better | range | interval | support | verdict column | what it is |
|---|---|---|---|---|---|---|---|---|
${table.map((m) => `| \`${gateName(m)}\` | ${cell(m.label)} | ${typesText(m.types)} | ${m.better} | ${rangeDoc(m.range)} | ${interval(m)} | ${m.supportDoc ?? "gold rows"} | ${column(m.column)} | ${cell(m.doc)} |`).join("\n")}

## Per class

For noul and choice questions, under \`classes\`: each class's gold rows, its
share of them, and these figures with 95% Wilson intervals. A class under
${RARE_CLASS_SHARE * 100}% of the gold rows is rare: the question's headline is then the weakest
class's recall and the least precise class's precision. The gate names a class as a JSON string, so any name
survives, spaces, commas and quotes included:
\`--fail-if 'team.recall["account access"]<0.6'\` (inside the name, \`\\"\` is a
quote and \`\\\\\` a backslash).

| \`--fail-if\` name | shown as | question types | better | range | interval | support | verdict column | what it is |
|---|---|---|---|---|---|---|---|---|
${CLASS_METRICS.map((m) => `| \`${classGateName(m.name, "class")}\` | ${m.label} | ${typesText(m.types)} | ${m.better} | ${rangeDoc(m.range)} | Wilson, 95% | ${m.supportDoc} | ${column(m.column)} | ${cell(m.doc)} |`).join("\n")}

## Drift and the answers themselves

\`typed-eval report\` and \`assess --compare EARLIER\` measure these per
question; those marked "--compare" need the earlier run's answers.

| \`--fail-if\` name | shown as | needs | better | range | support | verdict column | what it is |
|---|---|---|---|---|---|---|---|
${DRIFT_METRICS.map((m) => `| \`${m.name}\` | ${m.label} | ${m.needs === "compare" ? "--compare" : "–"} | ${m.better} | ${rangeDoc(m.range)} | ${m.supportDoc} | ${column(m.column)} | ${cell(m.doc)} |`).join("\n")}

## The verdict

At the top of \`assess\` and \`report\`, in the terminal, under \`verdict\` in
their JSON and at the top of their HTML: one row per question, one cell per
column, each marked by these rules. ${VERDICT_COMMON_RULE}

| column | rule |
|---|---|
${VERDICT_COLUMN_LIST.map((c) => `| ${c.label} | ${cell(c.rule)} |`).join("\n")}
| the mark | ${cell(VERDICT_MARK_RULE)} |
| the gold sample | ${cell(VERDICT_SAMPLE_RULE)} |

What a scheduler gets: \`verdict.mark\` in the JSON is ok, look, act or n/a;
accept ok (or ok and look) and nothing else, so n/a (nothing measured) is
never accepted. The exit code of \`assess\` and \`report\` says the command did
its work (0) unless a gate is given: \`--fail-if "verdict>ok"\` exits 4 unless
every question is ok, n/a included.
`;
}
