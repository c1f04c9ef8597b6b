/**
 * Assessment of a run's answers against gold labels: per question the
 * metrics of its type, calibration (ECE with its noise floor, reliability
 * bins), risk-coverage, label mass against accuracy, and seeded bootstrap
 * intervals on the headline figures.
 */
import {
  around,
  calibrationError,
  countCells,
  eceNoiseFloor,
  eceWithInterval,
  orderBy,
  quantile,
  riskCoverage,
  topLabelConfidence,
  type Bin,
  type RiskCoverage,
} from "./metrics.js";
import {
  appliesTo,
  CLASS_METRICS,
  classFigures,
  isWeighted,
  METRIC_TABLE,
  metricsOf,
  metricText,
  noiseFloorText,
  preparationsOf,
  questionData,
  weightedValues,
  type ClassFigures,
  type Metric,
  type Whole,
} from "./metric-table.js";
import { displayLabels, QualityInputError, readAnswers, readGold, type Gold, type QuestionInfo } from "./answers.js";
import { isLabelStudioExport, readLabelStudioGold } from "./labelstudio.js";
import type { SuspectSummary, Suspects } from "./suspects.js";
import { keyedWeights, keyOrder } from "./resample.js";
import { fillLevels, provenanceOf, type Provenance } from "./provenance.js";
import { failedRows, readUsage, sidecarPlace } from "./sidecars.js";
import { rangeText } from "./html.js";
import { num, plural, tally } from "./numbers.js";
import { compareConfidence, ConfidenceCounts, type Fitted, fittedCalibration, type InSample, inSampleOf, type SampleFacts } from "./sample.js";
import { dirname } from "node:path";

export { parseConditions, type Condition } from "./gate.js";

import { Rows } from "./rows.js";

export { type KeyedRows, Rows } from "./rows.js";

export interface QuestionAssessment {
  name: string;
  type: QuestionInfo["type"];
  labels: string[];
  /** Score level texts, when known. */
  levels?: unknown[] | undefined;
  n: number;
  metrics: Record<string, number>;
  /** 95% intervals: bootstrap percentile intervals of the headline metrics, and ece_debiased's (see eceWithInterval); each holds its metric. */
  intervals: Record<string, [number, number]>;
  /** The ECE a perfectly calibrated model would show at this n: median and 95th percentile over simulations. */
  ece_noise_floor: { median: number; p95: number };
  confusion: number[][];
  reliability: Bin[];
  risk_coverage: RiskCoverage;
  /** Accuracy by label-mass quintile, when the answers carry label mass. */
  label_mass?: { mass_lo: number; mass_hi: number; count: number; accuracy: number }[];
  /** Gold label shares and predicted label shares. */
  gold_shares: number[];
  predicted_shares: number[];
  /** noul and choice: each class's counts, recall and precision with 95% Wilson intervals. */
  classes?: ClassFigures[];
  /** "weakest_recall" when a class is rare (under 10% of the gold rows): the figure to read first (with the least precise class's precision); else accuracy is. */
  headline?: "weakest_recall";
  /** The rows each metric rests on: the gold rows, or a class's (what `--fail-if ... min N` reads). */
  support: Record<string, number>;
  /** What the gold sample is: rows the calibration was fitted on, a sample chosen by confidence. */
  sample?: SampleFacts;
}

export interface Assessment {
  kind: "typed-eval.assessment";
  answers: string;
  gold: string;
  rows: {
    answers: number;
    gold: number;
    matched: number;
    gold_only: number;
    answers_only: number;
    /** Answer rows whose id an earlier answer row had (a run keeps every input row): only the first is joined to the gold. */
    repeated_ids?: number;
  };
  /** A few gold ids the answers lack, with their gold lines. */
  gold_only_examples: { id: string; line: number }[];
  ignored_gold_fields: string[];
  raw: boolean;
  seed: number;
  bootstrap: number;
  questions: QuestionAssessment[];
  /** Questions of the answers that no matched gold row labels: not assessed. */
  questions_without_gold?: { name: string; type: QuestionInfo["type"] }[];
  /** Rows the run failed (its errors file beside the answers, else its usage summary), when either is there. */
  failed_rows?: number;
  /** Gold labels the answers most confidently contradict (`assess --suspects`). */
  suspects?: SuspectSummary;
  /** Model, calibration and files: what was assessed. */
  provenance?: Provenance;
}

/** p(label 1) of each of n binary rows. */
function yesColumn(p: Float64Array, n: number): Float64Array {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = p[i * 2 + 1] as number;
  return out;
}

/** Row indices in key order, or, for metrics that rank rows, in descending p(label 1) order with ties in key order. */
function rowOrder(ranked: boolean, rows: Rows): Int32Array {
  const order = keyOrder({ hi: rows.hi, lo: rows.lo }, rows.n);
  if (!ranked) return order;
  return orderBy(yesColumn(rows.p, rows.n), true, order);
}

/**
 * Assesses one question's rows: the same rows in any order give the same figures. The metrics are `table`'s for the question's type.
 * Long: every figure of one question from one ordered pass (point values, bootstrap intervals, noise floor, classes); split,
 * the prepared columns would travel through every piece.
 */
export function assessQuestion(
  info: QuestionInfo,
  rows: Rows,
  options: { seed: number; bootstrap: number; noiseDraws?: number },
  table: readonly Metric[] = METRIC_TABLE,
): QuestionAssessment {
  // Rows a metric ranks (a noul's AUROC) are put in descending order once, so the bootstrap's passes read memory in order.
  const mine = metricsOf(info.type, table);
  const needs = preparationsOf(mine);
  const { s, mass, keys } = rows.keyed(rowOrder(needs.has("ranking"), rows));
  const d = questionData(info.type, s, needs);
  const ones = new Uint8Array(s.n).fill(1);
  const cal = calibrationError(d.confidence, d.correct);
  const rc = riskCoverage(d.confidence, d.correct);
  const m = countCells(d.cell, ones, new Float64Array(s.k * s.k));
  const classes = classFigures(m, displayLabels(info));
  const whole: Whole = { d, calibration: cal, risk: rc, ece: eceWithInterval(d.confidence, d.correct, { seed: options.seed }), classes };
  const weighted = mine.filter(isWeighted);
  const cells = new Float64Array(s.k * s.k);
  const point = weightedValues(d, ones, weighted, cells);
  const metrics: Record<string, number> = {};
  const support: Record<string, number> = {};
  for (const m of mine) {
    metrics[m.name] = isWeighted(m) ? (point[weighted.indexOf(m)] as number) : m.whole(whole);
    support[m.name] = m.support?.(whole) ?? s.n;
  }

  const resampled = weighted.filter((m) => m.interval === "bootstrap");
  const samples = resampled.map((): number[] => []);
  const w = new Uint8Array(s.n);
  for (let b = 0; b < options.bootstrap && s.n > 0 && resampled.length > 0; b++) {
    keyedWeights(keys, s.n, options.seed, b, w);
    weightedValues(d, w, resampled, cells).forEach((x, j) => {
      if (Number.isFinite(x)) samples[j]!.push(x);
    });
  }
  const intervals: Record<string, [number, number]> = {};
  for (const metric of mine) {
    if (metric.interval === undefined) continue;
    if (!isWeighted(metric)) {
      const interval = s.n > 0 ? metric.interval(whole) : undefined;
      if (interval?.every(Number.isFinite)) intervals[metric.name] = interval;
      continue;
    }
    const v = samples[resampled.indexOf(metric)]!.sort((a, b) => a - b);
    if (v.length > 0) intervals[metric.name] = around(metrics[metric.name] as number, quantile(v, 0.025), quantile(v, 0.975));
  }

  const out: QuestionAssessment = {
    name: info.name,
    type: info.type,
    labels: info.labels,
    levels: info.levels,
    n: s.n,
    metrics,
    intervals,
    support,
    ece_noise_floor: eceNoiseFloor(d.confidence, options.noiseDraws ?? 200, options.seed),
    confusion: Array.from({ length: s.k }, (_, r) => Array.from(m.subarray(r * s.k, (r + 1) * s.k))),
    reliability: cal.bins,
    risk_coverage: rc,
    gold_shares: shares(s.y, s.k),
    predicted_shares: shares(d.pred, s.k),
  };
  if (CLASS_METRICS.some((c) => appliesTo(c.types, info.type))) {
    out.classes = classes;
    // A rare class can hide behind accuracy (0.958 while 4 of 66 spam rows are found): it takes the headline.
    if (classes.some((c) => c.rare)) out.headline = "weakest_recall";
  }
  if (mass.some((x) => x >= 0)) out.label_mass = massBands(mass, d.correct);
  return out;
}

/** A question's sample facts: the gold rows' confidence against the run's, and the rows its calibration was fitted on; undefined when neither says anything. */
function sampleOf(rows: Rows, run: ConfidenceCounts | undefined, inSample: InSample | undefined): SampleFacts | undefined {
  const confidence = run ? compareConfidence(topLabelConfidence(rows.scored()), run) : undefined;
  if (!confidence && !inSample) return undefined;
  return { ...(inSample ? { in_sample: inSample } : {}), ...(confidence ? { confidence } : {}) };
}

/** Each class's share: counted, then divided once, so 3 of 10 is 0.3 and not 0.30000000000000004. */
function shares(classes: Int32Array, k: number): number[] {
  const c = new Array<number>(k).fill(0);
  for (const v of classes) c[v]! += 1;
  return c.map((count) => count / (classes.length || 1));
}

/** Accuracy in five equal-count bands of label mass (rows without mass left out). */
function massBands(mass: Float64Array, correct: Uint8Array) {
  const idx = Array.from({ length: mass.length }, (_, i) => i).filter((i) => (mass[i] as number) >= 0);
  idx.sort((a, b) => (mass[a] as number) - (mass[b] as number));
  const bands = [];
  for (let b = 0; b < 5; b++) {
    const part = idx.slice(Math.floor((b * idx.length) / 5), Math.floor(((b + 1) * idx.length) / 5));
    if (part.length === 0) continue;
    let acc = 0;
    for (const i of part) acc += correct[i] as number;
    bands.push({
      mass_lo: mass[part[0] as number] as number,
      mass_hi: mass[part[part.length - 1] as number] as number,
      count: part.length,
      accuracy: acc / part.length,
    });
  }
  return bands;
}

export interface JoinOptions {
  questions?: QuestionInfo[] | undefined;
  idField?: string | undefined;
  jobIdField?: string | undefined;
  /** Use the raw (uncalibrated) probabilities when the run calibrated. */
  raw?: boolean;
  /** Accept gold ids the answers lack (reported); otherwise they are an error. */
  allowUnmatched?: boolean;
}

export interface Joined {
  questions: QuestionInfo[];
  rows: Map<string, Rows>;
  counts: Assessment["rows"];
  goldOnly: { id: string; line: number }[];
  ignored: string[];
  /** Raw distributions were present in the answers (the run calibrated). */
  hadRaw: boolean;
  /** Gold ids by gold row (what `Rows.ref` points at). */
  goldIds: string[];
  /** The model and prompt format the first answers row names. */
  model?: string | undefined;
  promptFormat?: string | undefined;
  /** Per question, the top-label confidence of every answer row (not only those with gold): what the gold is a sample of. */
  confidence: Map<string, ConfidenceCounts>;
}

/**
 * Joins answers and gold on id into per-question rows. The gold is read
 * first (a hand-labeled sample is small); the answers are streamed.
 */
export async function joinGold(answersPath: string, goldPath: string, options: JoinOptions): Promise<Joined> {
  // The questions: the job's, or the answers file's own (read from its first row).
  let questions = options.questions;
  if (!questions) {
    const found: { questions?: QuestionInfo[] } = {};
    const probe = await readAnswers(answersPath, { onQuestions: (q) => (found.questions = q) });
    await probe.next();
    await probe.return(undefined);
    if (!found.questions) throw new QualityInputError(`${answersPath} holds no answers`);
    questions = found.questions;
  }
  const gold = isLabelStudioExport(goldPath)
    ? await readLabelStudioGold(goldPath, questions)
    : await readGold(goldPath, questions, { idField: options.idField, jobIdField: options.jobIdField });
  const rows = new Map(questions.map((q) => [q.name, new Rows(q.labels.length)]));
  const confidence = new Map(questions.map((q) => [q.name, new ConfidenceCounts()]));
  const matched = new Uint8Array(gold.lines.length);
  const counts: Assessment["rows"] = { answers: 0, gold: gold.lines.length, matched: 0, gold_only: 0, answers_only: 0 };
  let hadRaw = false;
  let model: string | undefined;
  let promptFormat: string | undefined;
  const nq = questions.length;
  for await (const row of await readAnswers(answersPath, { questions })) {
    counts.answers++;
    model ??= row.model;
    promptFormat ??= row.promptFormat;
    for (const q of questions) confidence.get(q.name)!.add((options.raw && row.raw?.get(q.name)) || (row.dist.get(q.name) as number[]));
    const g = gold.rows.get(row.id);
    if (g === undefined) {
      counts.answers_only++;
      continue;
    }
    // An id the input repeats (the run keeps and reports every row): the gold labels its first row, in input order.
    if (matched[g]) {
      counts.repeated_ids = (counts.repeated_ids ?? 0) + 1;
      continue;
    }
    matched[g] = 1;
    counts.matched++;
    if (row.raw) hadRaw = true;
    questions.forEach((q, j) => {
      const y = gold.labels[g * nq + j] as number;
      if (y < 0) return;
      const dist = (options.raw && row.raw?.get(q.name)) || (row.dist.get(q.name) as number[]);
      const mass = row.mass?.[q.name];
      rows.get(q.name)!.push(dist, y, typeof mass === "number" ? mass : -1, row.id, g);
    });
  }
  const goldOnly = unmatchedGold(gold, matched, counts, answersPath, options.allowUnmatched);
  return { questions, rows, counts, goldOnly, ignored: gold.ignored, hadRaw, goldIds: [...gold.rows.keys()], model, promptFormat, confidence };
}

/** The gold ids no answer matched (the first ten, all counted); refused when none matched, or some did not without --allow-unmatched. */
function unmatchedGold(
  gold: Gold,
  matched: Uint8Array,
  counts: Assessment["rows"],
  answersPath: string,
  allowUnmatched: boolean | undefined,
): { id: string; line: number }[] {
  const goldOnly: { id: string; line: number }[] = [];
  for (const [id, r] of gold.rows) {
    if (matched[r]) continue;
    counts.gold_only++;
    if (goldOnly.length < 10) goldOnly.push({ id, line: gold.lines[r] as number });
  }
  if (counts.matched === 0) {
    throw new QualityInputError(
      `none of the ${tally(counts.gold)} gold ids is in ${answersPath} (${plural(counts.answers, "row")})${goldOnly[0] ? `: e.g. ${goldOnly[0].id} (gold line ${goldOnly[0].line})` : ""}; check --id-field and that both files are of the same run`,
    );
  }
  if (counts.gold_only > 0 && !allowUnmatched) {
    throw new QualityInputError(
      `${counts.gold_only} gold id${counts.gold_only > 1 ? "s are" : " is"} not in ${answersPath}: ${goldOnly.map((g) => `${g.id} (gold line ${g.line})`).join(", ")}${counts.gold_only > goldOnly.length ? ", ..." : ""}; pass --allow-unmatched to assess the rest`,
    );
  }
  return goldOnly;
}

/** Each question of joined rows assessed, with what its gold sample is; the questions no gold row labels, apart. */
function assessJoined(
  joined: Joined,
  options: { seed: number; bootstrap: number; suspects?: Suspects | undefined; metrics?: readonly Metric[] | undefined },
  fitted: Fitted | undefined,
): { questions: QuestionAssessment[]; withoutGold: { name: string; type: QuestionInfo["type"] }[] } {
  const questions: QuestionAssessment[] = [];
  const withoutGold: { name: string; type: QuestionInfo["type"] }[] = [];
  for (const q of joined.questions) {
    const rows = joined.rows.get(q.name) as Rows;
    // Let each question's rows go once assessed: the peak then holds one question's working arrays, not all.
    joined.rows.delete(q.name);
    if (rows.n === 0) {
      withoutGold.push({ name: q.name, type: q.type });
      continue;
    }
    options.suspects?.add(q, rows);
    const assessed = assessQuestion(q, rows, options, options.metrics);
    const sample = sampleOf(rows, joined.confidence.get(q.name), inSampleOf(fitted, q.name, rows.hi.subarray(0, rows.n)));
    if (sample) assessed.sample = sample;
    questions.push(assessed);
  }
  return { questions, withoutGold };
}

/** Assesses answers against gold labels. */
export async function assess(
  answersPath: string,
  goldPath: string,
  options: JoinOptions & {
    seed?: number;
    bootstrap?: number;
    suspects?: Suspects | undefined;
    job?: string | undefined;
    /** The errors file and the usage summary, when not beside the answers (`report --errors/--usage`). */
    errors?: string | undefined;
    usage?: string | undefined;
    /** The metrics to compute (default: the whole table). */
    metrics?: readonly Metric[];
  },
): Promise<Assessment> {
  // The files beside the answers first: one a flag names and that cannot be read costs no pass over the answers.
  const usagePlace = sidecarPlace(answersPath, "usage", options.usage);
  const usage = await readUsage(usagePlace);
  const failed = await failedRows(sidecarPlace(answersPath, "errors", options.errors), usage);
  const joined = await joinGold(answersPath, goldPath, options);
  // Only a suspects list names gold rows, and it keeps them compactly: a million id strings need not stay for every collection to walk.
  options.suspects?.nameRows(joined.goldIds);
  joined.goldIds.length = 0;
  const seed = options.seed ?? 1;
  const bootstrap = options.bootstrap ?? 200;
  const usagePath = usagePlace.location;
  const provenance = provenanceOf(
    usage,
    usagePath,
    { sawRaw: joined.hadRaw, rowModel: joined.model, rowPromptFormat: joined.promptFormat },
    { answers: answersPath, gold: goldPath, job: options.job },
  );
  const raw = !!options.raw && joined.hadRaw;
  const fitted = fittedCalibration(provenance, dirname(usagePath), goldPath, raw);
  const { questions, withoutGold } = assessJoined(joined, { ...options, seed, bootstrap }, fitted);
  if (!options.questions) fillLevels(questions, usage, usagePath);
  const out: Assessment = {
    kind: "typed-eval.assessment",
    answers: answersPath,
    gold: goldPath,
    rows: joined.counts,
    gold_only_examples: joined.goldOnly,
    ignored_gold_fields: joined.ignored,
    raw,
    seed,
    bootstrap,
    questions,
    provenance,
  };
  if (withoutGold.length) out.questions_without_gold = withoutGold;
  if (failed !== undefined) out.failed_rows = failed;
  if (options.suspects) out.suspects = options.suspects.summary();
  return out;
}

const fmt = (x: number | undefined) => num(x);

/** The terminal table. */
export function describeAssessment(a: Assessment, table: readonly Metric[] = METRIC_TABLE): string {
  const lines: string[] = [];
  const r = a.rows;
  lines.push(
    `${tally(r.matched)} of ${plural(r.gold, "gold row")} matched ${plural(r.answers, "answer")} (${plural(r.answers_only, "answer")} without gold${r.gold_only ? `, ${plural(r.gold_only, "gold row")} without answers` : ""}${r.repeated_ids ? `, ${plural(r.repeated_ids, "answer")} repeating an id: the first row of each id was used` : ""})${a.raw ? "; raw (uncalibrated) probabilities" : ""}`,
  );
  if (a.ignored_gold_fields.length) lines.push(`gold fields not assessed (not questions of the answers): ${a.ignored_gold_fields.join(", ")}`);
  for (const q of a.questions) {
    lines.push("", `${q.name} (${q.type}, ${plural(q.n, "row")})`);
    for (const m of metricsOf(q.type, table)) {
      const ci = q.intervals[m.name];
      let line = `  ${m.label.padEnd(22)} ${metricText(m, q.metrics[m.name]).padStart(6)}`;
      if (ci) line += `  [${metricText(m, ci[0])}, ${metricText(m, ci[1])}]`;
      if (m.noiseFloor) line += `${ci ? "" : "                "}  ${noiseFloorText(q.ece_noise_floor)}`;
      lines.push(line);
    }
    const cover = q.risk_coverage.at.map((p) => `${Math.round(p.coverage * 100)}%: ${fmt(p.accuracy)} (p>=${fmt(p.threshold)})`).join(", ");
    lines.push(`  accuracy at coverage    ${cover}`);
    if (q.label_mass)
      lines.push(`  accuracy by label mass  ${q.label_mass.map((b) => `${rangeText(b.mass_lo, b.mass_hi, "-")}: ${fmt(b.accuracy)}`).join(", ")}`);
  }
  lines.push(
    "",
    `95% intervals: ${a.bootstrap} bootstrap draws, seed ${a.seed}; for the ECE with noise removed, from the ECE's simulated sampling distribution. Confidence = the top label's probability.`,
  );
  return lines.join("\n");
}
