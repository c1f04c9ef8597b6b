/**
 * Run reports: what a run's labels look like (label shares, probability and
 * confidence histograms, label mass, errors, usage), and how they moved since
 * an earlier run (population stability index, Jensen-Shannon distance,
 * agreement, flipped records, each distribution earlier and now, and both
 * runs' models). Streams the answers: memory holds counts, plus one small
 * entry per id of the earlier run when comparing. The pages are pages.ts.
 */
import { argmax } from "../questions/distribution.js";
import { kindOf } from "../questions/index.js";
import type { UsageSummary } from "../records/usage.js";
import { readAnswers, type QuestionInfo } from "./answers.js";

export { displayLabels } from "./answers.js";
import { fillLevels, provenanceOf, type Provenance, type Seen } from "./provenance.js";
import { recordedPromptFormat } from "../api/prompt-format.js";
import { type ErrorsTally, readErrors, readUsage, sidecarPlace } from "./sidecars.js";
import { displayPath, escapeHtml, table } from "./html.js";
import { num, pct, plural, tally } from "./numbers.js";
import { noiseText, type SuspectSummary } from "./suspects.js";
import type { GateRecord } from "./gate.js";

const BINS = 20;

export interface QuestionStats {
  name: string;
  type: QuestionInfo["type"];
  labels: string[];
  levels?: unknown[] | undefined;
  n: number;
  /** Rows whose most probable label is each label. */
  label_counts: number[];
  /** Mean probability of each label. */
  mean_probabilities: number[];
  /** noul: p(yes) in 20 bins over [0, 1]; score: the expected score in 20 bins over [0, k-1]; choice: empty. */
  value_histogram: number[];
  /** Top-label probability in 20 bins over [0, 1]. */
  confidence_histogram: number[];
  /** Label mass in 20 bins over [0, 1], when the answers carry it. */
  label_mass_histogram?: number[];
  /** Mean label mass over the rows that carry it, and how many do. */
  mean_label_mass?: number;
  label_mass_rows?: number;
}

export interface Shift {
  question: string;
  /** Population stability index over the bins of psi_basis (0.1: worth a look; 0.25: a real shift, by the usual rule of thumb). */
  psi: number;
  /** Jensen-Shannon distance of the label shares, base 2: 0 same, 1 disjoint. */
  js_distance: number;
  /** On the ids both runs hold: share with the same most probable label; null when no id is in both. */
  agreement: number | null;
  shared: number;
  flipped: number;
  earlier_shares: number[];
  shares: number[];
  /** The flipped records, most confident (now) first; at most 50. */
  flips: { id: string; from: string; to: string; confidence: number }[];
  /** What PSI was computed over (see PSI_BINS): the bins' shares earlier and now. */
  psi_basis: string;
  psi_earlier: number[];
  psi_now: number[];
  /** Mean label mass of the earlier run, when its rows carry it. */
  earlier_label_mass?: number;
  /** noul and score: the earlier run's value histogram, over the same bins as `value_histogram`. */
  earlier_value_histogram?: number[];
}

export interface RunReport {
  kind: "typed-eval.report";
  answers: string;
  rows: number;
  questions: QuestionStats[];
  errors?: ErrorsTally;
  /** Rows that failed (the errors file, else the usage summary); absent when neither is beside the answers. */
  failed_rows?: number;
  usage?: UsageSummary;
  compare?: {
    answers: string;
    rows: number;
    /** The earlier run's model and what stood behind it (its usage summary, else its rows). */
    model?: string | undefined;
    model_identity?: string | undefined;
    /** The earlier run's prompt format (its usage summary, else its rows; `unknown` when neither names one). */
    prompt_format: string;
    shifts: Shift[];
  };
  /** Model, calibration and files: what the report is about. */
  provenance?: Provenance;
  /** The gate's conditions and breaches, when `--fail-if` was given. */
  gate?: GateRecord;
}

/**
 * Population stability index bins: a choice's options (its top-label
 * shares); a noul's p(yes) and a score's expected level in PSI_BINS
 * equal-width bins over their range, so a night whose answers grow more or
 * less sure moves PSI even when the top labels stay. An empty bin counts as
 * PSI_EPSILON of the rows (the usual floor), so PSI stays finite.
 */
export const PSI_BINS = 10;
export const PSI_EPSILON = 1e-4;

function psiBinCount(q: QuestionInfo): number {
  return kindOf(q).value ? PSI_BINS : q.labels.length;
}

function psiBasis(q: QuestionInfo): string {
  return kindOf(q).value?.psiBasis(q, PSI_BINS) ?? "top-label shares";
}

function psiBin(q: QuestionInfo, p: readonly number[], label: number): number {
  const value = kindOf(q).value;
  if (!value) return label;
  const hi = value.top(q);
  return Math.min(PSI_BINS - 1, Math.max(0, Math.floor((value.of(p) / (hi || 1)) * PSI_BINS)));
}

function binIndex(x: number, lo: number, hi: number): number {
  return Math.min(BINS - 1, Math.max(0, Math.floor(((x - lo) / (hi - lo || 1)) * BINS)));
}

interface Earlier {
  questions: QuestionInfo[];
  ids: Map<string, number>;
  /** rows x questions predicted labels. */
  labels: Int32Array;
  counts: number[][];
  /** Per question, rows in each PSI bin. */
  psi: number[][];
  /** Per question, label mass sum and rows carrying it. */
  mass: { sum: number; rows: number }[];
  /** Per question, the value histogram (noul and score; empty for a choice). */
  values: number[][];
  rows: number;
  /** The model and prompt format the first row names. */
  rowModel?: string | undefined;
  rowPromptFormat?: string | undefined;
}

async function readEarlier(path: string, questions: QuestionInfo[] | undefined): Promise<Earlier> {
  const ids = new Map<string, number>();
  let labels = new Int32Array(1024);
  let found: QuestionInfo[] | undefined = questions;
  let counts: number[][] = [];
  let psi: number[][] = [];
  let mass: Earlier["mass"] = [];
  let values: number[][] = [];
  let rowModel: string | undefined;
  let rowPromptFormat: string | undefined;
  for await (const row of await readAnswers(path, { questions, onQuestions: (q) => (found = q), secondary: "--compare" })) {
    const qs = found as QuestionInfo[];
    if (counts.length === 0) {
      counts = qs.map((q) => new Array<number>(q.labels.length).fill(0));
      psi = qs.map((q) => new Array<number>(psiBinCount(q)).fill(0));
      mass = qs.map(() => ({ sum: 0, rows: 0 }));
      values = qs.map((q) => (kindOf(q).value ? new Array<number>(BINS).fill(0) : []));
      rowModel = row.model;
      rowPromptFormat = row.promptFormat;
    }
    const r = ids.size;
    if ((r + 1) * qs.length > labels.length) {
      const next = new Int32Array(labels.length * 2);
      next.set(labels);
      labels = next;
    }
    qs.forEach((q, j) => {
      const p = row.dist.get(q.name) as number[];
      const label = argmax(p);
      labels[r * qs.length + j] = label;
      counts[j]![label]! += 1;
      psi[j]![psiBin(q, p, label)]! += 1;
      const value = kindOf(q).value;
      if (value) values[j]![binIndex(value.of(p), 0, value.top(q))]! += 1;
      const m = row.mass?.[q.name];
      if (typeof m === "number") {
        mass[j]!.sum += m;
        mass[j]!.rows++;
      }
    });
    ids.set(row.id, r);
  }
  return { questions: found ?? [], ids, labels, counts, psi, mass, values, rows: ids.size, rowModel, rowPromptFormat };
}

/** Population stability index between two share vectors; an empty bin counts as PSI_EPSILON, so PSI stays finite. */
export function psi(a: readonly number[], b: readonly number[]): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) {
    const x = Math.max(a[i] as number, PSI_EPSILON);
    const y = Math.max(b[i] as number, PSI_EPSILON);
    s += (y - x) * Math.log(y / x);
  }
  return s;
}

/** Jensen-Shannon distance (square root of the divergence), base 2. */
export function jsDistance(a: readonly number[], b: readonly number[]): number {
  let d = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as number;
    const y = b[i] as number;
    const m = (x + y) / 2;
    if (x > 0) d += (x * Math.log2(x / m)) / 2;
    if (y > 0) d += (y * Math.log2(y / m)) / 2;
  }
  return Math.sqrt(Math.max(0, d));
}

/** Agreement with the earlier run on the ids both hold, per question, and its most confident flips. */
interface Shared {
  agree: number[];
  flipped: number[];
  flips: Shift["flips"][];
  n: number;
}

/** A question's counters before any row. */
function emptyStats(q: QuestionInfo): QuestionStats {
  return {
    name: q.name,
    type: q.type,
    labels: q.labels,
    levels: q.levels,
    n: 0,
    label_counts: new Array<number>(q.labels.length).fill(0),
    mean_probabilities: new Array<number>(q.labels.length).fill(0),
    value_histogram: kindOf(q).value ? new Array<number>(BINS).fill(0) : [],
    confidence_histogram: new Array<number>(BINS).fill(0),
  };
}

/** Counts one row's answer to a question (`p` its distribution, `mass` its label mass if known). */
function countAnswer(s: QuestionStats, q: QuestionInfo, p: number[], label: number, mass: number | undefined): void {
  s.n++;
  s.label_counts[label]! += 1;
  p.forEach((v, i) => (s.mean_probabilities[i]! += v));
  s.confidence_histogram[binIndex(p[label] as number, 0, 1)]! += 1;
  const value = kindOf(q).value;
  if (value) s.value_histogram[binIndex(value.of(p), 0, value.top(q))]! += 1;
  if (typeof mass === "number") {
    s.label_mass_histogram ??= new Array<number>(BINS).fill(0);
    s.label_mass_histogram[binIndex(mass, 0, 1)]! += 1;
    s.mean_label_mass = (s.mean_label_mass ?? 0) + mass;
    s.label_mass_rows = (s.label_mass_rows ?? 0) + 1;
  }
}

/** Counts a question's answer against the earlier run's label `was` for the same id. */
function countShared(shared: Shared, j: number, q: QuestionInfo, id: string, was: number, label: number, confidence: number): void {
  if (was === label) {
    shared.agree[j]! += 1;
    return;
  }
  shared.flipped[j]! += 1;
  const flips = shared.flips[j] as Shift["flips"];
  flips.push({ id, from: q.labels[was] ?? String(was), to: q.labels[label] as string, confidence });
  // Keep the 50 most confident: sort and cut now and then, so memory stays small.
  if (flips.length > 500) {
    flips.sort((a, b) => b.confidence - a.confidence);
    flips.length = 50;
  }
}

/** Counts as shares of their total (an empty count: all zero). */
function toShares(counts: readonly number[]): number[] {
  const total = counts.reduce((x, y) => x + y, 0) || 1;
  return counts.map((v) => v / total);
}

/** How question `j` moved since the earlier run. */
function shiftOf(s: QuestionStats, j: number, q: QuestionInfo, earlier: Earlier, shared: Shared, psiNow: readonly number[]): Shift {
  const a = toShares(earlier.counts[j] ?? []);
  const b = s.label_counts.map((c) => c / (s.n || 1));
  const pa = toShares(earlier.psi[j] ?? []);
  const pb = toShares(psiNow);
  const em = earlier.mass[j];
  return {
    question: s.name,
    psi: psi(pa, pb),
    js_distance: jsDistance(a, b),
    agreement: shared.n ? (shared.agree[j] as number) / shared.n : null,
    shared: shared.n,
    flipped: shared.flipped[j] as number,
    earlier_shares: a,
    shares: b,
    flips: (shared.flips[j] ?? []).sort((x, y) => y.confidence - x.confidence).slice(0, 50),
    psi_basis: psiBasis(q),
    psi_earlier: pa,
    psi_now: pb,
    ...(em?.rows ? { earlier_label_mass: em.sum / em.rows } : {}),
    ...(kindOf(q).value ? { earlier_value_histogram: earlier.values[j] ?? [] } : {}),
  };
}

/** What a report reads besides the answers. */
export interface ReportOptions {
  questions?: QuestionInfo[] | undefined;
  /** An earlier run's answers. */
  compare?: string | undefined;
  /** The errors file and the usage summary, when not beside the answers. */
  errors?: string | undefined;
  usage?: string | undefined;
  /** The job file as the user named it, for the header. */
  job?: string | undefined;
}

/** What a run wrote beside its answers, as read. */
interface Sidecars {
  errors: ErrorsTally | undefined;
  usage: UsageSummary | undefined;
  /** Where the usage summary is (or would be): what relative paths in it are read against. */
  usagePath: string;
}

/** What a run wrote beside its answers (or where --errors and --usage name it), read before the answers: a named file that cannot be read costs no pass over them. */
async function readSidecars(answersPath: string, options: ReportOptions): Promise<Sidecars> {
  const usagePlace = sidecarPlace(answersPath, "usage", options.usage);
  const usage = await readUsage(usagePlace);
  const errors = await readErrors(sidecarPlace(answersPath, "errors", options.errors));
  return { errors, usage, usagePath: usagePlace.location };
}

/** A report with what the files beside the answers say: the errors, the usage summary, and from them the provenance. */
function withSidecars(report: RunReport, options: ReportOptions, sidecars: Sidecars, seen: Seen): RunReport {
  const { errors, usage, usagePath } = sidecars;
  if (errors) report.errors = errors;
  if (usage) report.usage = usage;
  const failed = errors?.total ?? usage?.records.failed;
  if (failed !== undefined) report.failed_rows = failed;
  if (!options.questions) fillLevels(report.questions, usage, usagePath);
  report.provenance = provenanceOf(usage, usagePath, seen, { answers: report.answers, compare: options.compare, job: options.job });
  return report;
}

/** Reads a run's outputs (answers, and the errors and usage files beside them) into a report. */
export async function runReport(answersPath: string, options: ReportOptions): Promise<RunReport> {
  const sidecars = await readSidecars(answersPath, options);
  const earlier = options.compare ? await readEarlier(options.compare, options.questions) : undefined;
  let questions: QuestionInfo[] | undefined = options.questions ?? earlier?.questions;
  let stats: QuestionStats[] = [];
  const shared: Shared = { agree: [], flipped: [], flips: [], n: 0 };
  let rows = 0;
  let psiNow: number[][] = [];
  const seen: Seen = { sawRaw: false };
  for await (const row of await readAnswers(answersPath, { questions, onQuestions: (q) => (questions = q) })) {
    const qs = questions as QuestionInfo[];
    if (stats.length === 0) {
      stats = qs.map(emptyStats);
      Object.assign(shared, { agree: qs.map(() => 0), flipped: qs.map(() => 0), flips: qs.map(() => []) });
      psiNow = qs.map((q) => new Array<number>(psiBinCount(q)).fill(0));
      seen.rowModel = row.model;
      seen.rowPromptFormat = row.promptFormat;
    }
    if (row.raw) seen.sawRaw = true;
    rows++;
    const before = earlier?.ids.get(row.id);
    if (before !== undefined) shared.n++;
    qs.forEach((q, j) => {
      const p = row.dist.get(q.name) as number[];
      const label = argmax(p);
      countAnswer(stats[j] as QuestionStats, q, p, label, row.mass?.[q.name]);
      psiNow[j]![psiBin(q, p, label)]! += 1;
      if (before !== undefined && earlier) countShared(shared, j, q, row.id, earlier.labels[before * qs.length + j] as number, label, p[label] as number);
    });
  }
  for (const s of stats) {
    s.mean_probabilities = s.mean_probabilities.map((v) => (s.n ? v / s.n : 0));
    if (s.label_mass_rows) s.mean_label_mass = (s.mean_label_mass as number) / s.label_mass_rows;
  }
  const report = withSidecars({ kind: "typed-eval.report", answers: answersPath, rows, questions: stats }, options, sidecars, seen);
  if (earlier && options.compare) {
    const earlierUsage = await readUsage(sidecarPlace(options.compare, "usage"));
    const qs = questions as QuestionInfo[];
    report.compare = {
      answers: options.compare,
      rows: earlier.rows,
      model: earlierUsage?.model ?? earlier.rowModel,
      model_identity: earlierUsage?.model_identity,
      prompt_format: recordedPromptFormat(earlierUsage?.prompt_format ?? earlier.rowPromptFormat),
      shifts: stats.map((s, j) => shiftOf(s, j, qs[j] as QuestionInfo, earlier, shared, psiNow[j] ?? [])),
    };
  }
  return report;
}

/** One question's suspect gold labels (`assess --suspects`): its own most confident contradictions, sorted by the margin shown, and how many the file holds. */
export function suspectsHtml(question: string, s: SuspectSummary): string {
  const q = s.questions.find((x) => x.question === question);
  const count = q?.suspects ?? 0;
  const how = `Method ${escapeHtml(s.method)}${q ? `; ${escapeHtml(noiseText(q))}` : ""}. The rows listed are the model's confident contradictions, its own mistakes among them: more rows than wrong labels where the model is often wrong.`;
  if (!q || count === 0) return `<h3>Suspect gold labels</h3><p class="muted">None: no gold label here is contradicted with unusual confidence. ${how}</p>`;
  return `<h3>Suspect gold labels: ${plural(count, "row")}${s.file ? ` (in ${escapeHtml(displayPath(s.file))})` : ""}</h3><p class="muted">${how} Sorted by margin, the model's probability of its label less its probability of the gold label, largest first.</p>${table(
    ["id", "gold label", "model's label", "margin ↓", "p(model's label)", "p(gold label)"],
    q.top.map((r) => [r.id, r.gold, r.model_label, num(r.margin), num(r.probability), num(r.gold_probability)]),
  )}${count > q.top.length ? `<p class="muted">${plural(count - q.top.length, "more row")} in the file${s.file ? "" : " (name one with --suspects FILE)"}.</p>` : ""}`;
}

/** The comparison for the terminal: one line per question, n/a with its reason where a figure cannot be had. */
export function describeShifts(r: RunReport): string {
  const c = r.compare;
  if (!c) return "";
  return c.shifts
    .map(
      (s) =>
        `${s.question} vs ${c.answers}: PSI ${num(s.psi)}, JS distance ${num(s.js_distance)}, ${
          s.shared > 0 ? `agreement ${pct(s.agreement)} on ${tally(s.shared)} shared ids, ${tally(s.flipped)} flipped` : "agreement n/a: no id is in both runs"
        }`,
    )
    .join("\n");
}
