/**
 * Run reports: what a run's labels look like (label shares, probability and
 * confidence histograms, label mass, errors, usage), how they moved since an
 * earlier run (population stability index, Jensen-Shannon distance,
 * agreement, flipped records), and the HTML of an assessment. Streams the
 * answers: memory holds counts, plus one small entry per id of the earlier
 * run when comparing.
 */
import { createReadStream, existsSync } from "node:fs";
import { createInterface } from "node:readline";
import { argmax } from "../questions/distribution.js";
import { kindOf } from "../questions/index.js";
import type { UsageSummary } from "../records/usage.js";
import { displayLabels, QualityInputError, readAnswers, type QuestionInfo } from "./answers.js";

export { displayLabels } from "./answers.js";
import type { Assessment } from "./assess.js";
import { headlineOf, METRIC_TABLE, metricsOf, metricText, type Metric } from "./metric-table.js";
import { breaches, describeBreach, parseConditions, type Breach, type Condition } from "./gate.js";
import {
  band,
  barChart,
  coverageCurve,
  displayPath,
  escapeHtml,
  heatMap,
  histogram,
  num,
  page,
  pct,
  plural,
  provenanceList,
  rangeText,
  reliabilityDiagram,
  table,
  tiles,
} from "./html.js";
import { fillLevels, provenanceOf, provenanceRows, readUsage, type Provenance } from "./provenance.js";
import type { SuspectSummary } from "./suspects.js";

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
  /** On the ids both runs hold: share with the same most probable label. */
  agreement: number;
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
}

export interface RunReport {
  kind: "typed-eval.report";
  answers: string;
  rows: number;
  questions: QuestionStats[];
  errors?: { total: number; by_type: Record<string, number>; examples: { line: number; id: string; type: string; message: string }[] };
  usage?: UsageSummary;
  compare?: { answers: string; rows: number; shifts: Shift[] };
  /** Model, calibration and files: what the report is about. */
  provenance?: Provenance;
  /** The drift gate's conditions and breaches, when `--fail-if` was given. */
  gate?: { conditions: string[]; breaches: { question: string; metric: string; condition: string; actual: number | null; line: string }[] };
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

/** Metrics the drift gate knows, per question. */
export const GATE_METRICS = ["psi", "js_distance", "agreement", "label_mass"] as const;
const NEEDS_COMPARE = new Set(["psi", "js_distance", "agreement"]);

/** Parses a drift gate and checks its metrics before any answers are read: an unknown metric, or one that needs --compare without it, is one line, exit 2. */
export function reportConditions(text: string, comparing: boolean): Condition[] {
  const conditions = parseConditions(text);
  for (const c of conditions) {
    if (!(GATE_METRICS as readonly string[]).includes(c.metric))
      throw new QualityInputError(`--fail-if: no metric "${c.metric}" (in "${c.text}"); report gates on ${GATE_METRICS.join(", ")}`);
    if (!comparing && NEEDS_COMPARE.has(c.metric))
      throw new QualityInputError(`--fail-if: ${c.metric} (in "${c.text}") compares two nights; add --compare <earlier answers>`);
  }
  return conditions;
}

/** The gate's breaches on a report: every metric per question (those of a comparison need --compare). */
export function reportBreaches(r: RunReport, conditions: readonly Condition[]): Breach[] {
  const needing = conditions.find((c) => NEEDS_COMPARE.has(c.metric));
  if (needing && !r.compare)
    throw new QualityInputError(`--fail-if: ${needing.metric} (in "${needing.text}") compares two nights; add --compare <earlier answers>`);
  return breaches(
    {
      questions: r.questions.map((q) => {
        const s = r.compare?.shifts.find((x) => x.question === q.name);
        return {
          name: q.name,
          metrics: {
            psi: s?.psi,
            js_distance: s?.js_distance,
            agreement: s?.agreement,
            label_mass: q.mean_label_mass ?? NaN,
          },
        };
      }),
      known: () => [...GATE_METRICS],
    },
    conditions,
  );
}

/** Records the gate on the report (shown in its HTML and JSON); returns the breach lines. */
export function applyGate(r: RunReport, conditions: readonly Condition[]): string[] {
  const found = reportBreaches(r, conditions);
  const why = (b: Breach) =>
    b.condition.metric === "label_mass" ? "the answers carry no label mass" : b.condition.metric === "agreement" ? "no ids in both runs" : undefined;
  r.gate = {
    conditions: conditions.map((c) => c.text),
    breaches: found.map((b) => ({
      question: b.question,
      metric: b.condition.metric,
      condition: b.condition.text,
      actual: Number.isNaN(b.actual) ? null : b.actual,
      line: describeBreach(b, why(b)),
    })),
  };
  return r.gate.breaches.map((b) => b.line);
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
  rows: number;
}

async function readEarlier(path: string, questions: QuestionInfo[] | undefined): Promise<Earlier> {
  const ids = new Map<string, number>();
  let labels = new Int32Array(1024);
  let found: QuestionInfo[] | undefined = questions;
  let counts: number[][] = [];
  let psi: number[][] = [];
  let mass: Earlier["mass"] = [];
  for await (const row of await readAnswers(path, { questions, onQuestions: (q) => (found = q), secondary: true })) {
    const qs = found as QuestionInfo[];
    if (counts.length === 0) {
      counts = qs.map((q) => new Array<number>(q.labels.length).fill(0));
      psi = qs.map((q) => new Array<number>(psiBinCount(q)).fill(0));
      mass = qs.map(() => ({ sum: 0, rows: 0 }));
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
      const m = row.mass?.[q.name];
      if (typeof m === "number") {
        mass[j]!.sum += m;
        mass[j]!.rows++;
      }
    });
    ids.set(row.id, r);
  }
  return { questions: found ?? [], ids, labels, counts, psi, mass, rows: ids.size };
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

/** Reads a run's outputs (answers, and the errors and usage files beside them) into a report. */
export async function runReport(
  answersPath: string,
  options: {
    questions?: QuestionInfo[] | undefined;
    compare?: string | undefined;
    errors?: string | undefined;
    usage?: string | undefined;
    /** The job file as the user named it, for the header. */
    job?: string | undefined;
  },
): Promise<RunReport> {
  const earlier = options.compare ? await readEarlier(options.compare, options.questions) : undefined;
  let questions: QuestionInfo[] | undefined = options.questions ?? earlier?.questions;
  let stats: QuestionStats[] = [];
  const shared: { agree: number[]; flipped: number[]; flips: Shift["flips"][]; n: number } = { agree: [], flipped: [], flips: [], n: 0 };
  let rows = 0;
  let psiNow: number[][] = [];
  const seen: { sawRaw: boolean; rowModel?: string | undefined } = { sawRaw: false };
  for await (const row of await readAnswers(answersPath, { questions, onQuestions: (q) => (questions = q) })) {
    const qs = questions as QuestionInfo[];
    if (stats.length === 0) {
      stats = qs.map((q) => ({
        name: q.name,
        type: q.type,
        labels: q.labels,
        levels: q.levels,
        n: 0,
        label_counts: new Array<number>(q.labels.length).fill(0),
        mean_probabilities: new Array<number>(q.labels.length).fill(0),
        value_histogram: kindOf(q).value ? new Array<number>(BINS).fill(0) : [],
        confidence_histogram: new Array<number>(BINS).fill(0),
      }));
      shared.agree = qs.map(() => 0);
      shared.flipped = qs.map(() => 0);
      shared.flips = qs.map(() => []);
      psiNow = qs.map((q) => new Array<number>(psiBinCount(q)).fill(0));
      seen.rowModel = row.model;
    }
    if (row.raw) seen.sawRaw = true;
    rows++;
    const before = earlier?.ids.get(row.id);
    if (before !== undefined) shared.n++;
    qs.forEach((q, j) => {
      const s = stats[j] as QuestionStats;
      const p = row.dist.get(q.name) as number[];
      const label = argmax(p);
      const confidence = p[label] as number;
      s.n++;
      s.label_counts[label]! += 1;
      psiNow[j]![psiBin(q, p, label)]! += 1;
      p.forEach((v, i) => (s.mean_probabilities[i]! += v));
      s.confidence_histogram[binIndex(confidence, 0, 1)]! += 1;
      const value = kindOf(q).value;
      if (value) s.value_histogram[binIndex(value.of(p), 0, value.top(q))]! += 1;
      const mass = row.mass?.[q.name];
      if (typeof mass === "number") {
        s.label_mass_histogram ??= new Array<number>(BINS).fill(0);
        s.label_mass_histogram[binIndex(mass, 0, 1)]! += 1;
        s.mean_label_mass = (s.mean_label_mass ?? 0) + mass;
        s.label_mass_rows = (s.label_mass_rows ?? 0) + 1;
      }
      if (before !== undefined && earlier) {
        const was = earlier.labels[before * qs.length + j] as number;
        if (was === label) shared.agree[j]! += 1;
        else {
          shared.flipped[j]! += 1;
          const flips = shared.flips[j] as Shift["flips"];
          flips.push({ id: row.id, from: q.labels[was] ?? String(was), to: q.labels[label] as string, confidence });
          // Keep the 50 most confident: sort and cut now and then, so memory stays small.
          if (flips.length > 500) {
            flips.sort((a, b) => b.confidence - a.confidence);
            flips.length = 50;
          }
        }
      }
    });
  }
  for (const s of stats) {
    s.mean_probabilities = s.mean_probabilities.map((v) => (s.n ? v / s.n : 0));
    if (s.label_mass_rows) s.mean_label_mass = (s.mean_label_mass as number) / s.label_mass_rows;
  }
  const report: RunReport = { kind: "typed-eval.report", answers: answersPath, rows, questions: stats };

  const errorsPath = options.errors ?? `${answersPath}.errors.jsonl`;
  if (existsSync(errorsPath)) report.errors = await readErrors(errorsPath);
  const usagePath = options.usage ?? `${answersPath}.usage.json`;
  const usage = readUsage(usagePath);
  if (usage) report.usage = usage;
  if (!options.questions) fillLevels(stats, usage, usagePath);
  report.provenance = provenanceOf(usage, usagePath, seen, { answers: answersPath, compare: options.compare, job: options.job });
  if (earlier && options.compare) {
    report.compare = {
      answers: options.compare,
      rows: earlier.rows,
      shifts: stats.map((s, j) => {
        const earlierCounts = earlier.counts[j] ?? [];
        const earlierTotal = earlierCounts.reduce((a, b) => a + b, 0) || 1;
        const a = earlierCounts.map((c) => c / earlierTotal);
        const b = s.label_counts.map((c) => c / (s.n || 1));
        const flips = (shared.flips[j] ?? []).sort((x, y) => y.confidence - x.confidence).slice(0, 50);
        const q = (questions as QuestionInfo[])[j] as QuestionInfo;
        const toShares = (c: number[]) => {
          const t = c.reduce((x, y) => x + y, 0) || 1;
          return c.map((v) => v / t);
        };
        const pa = toShares(earlier.psi[j] ?? []);
        const pb = toShares(psiNow[j] ?? []);
        const em = earlier.mass[j];
        return {
          question: s.name,
          psi: psi(pa, pb),
          js_distance: jsDistance(a, b),
          agreement: shared.n ? (shared.agree[j] as number) / shared.n : NaN,
          shared: shared.n,
          flipped: shared.flipped[j] as number,
          earlier_shares: a,
          shares: b,
          flips,
          psi_basis: psiBasis(q),
          psi_earlier: pa,
          psi_now: pb,
          ...(em?.rows ? { earlier_label_mass: em.sum / em.rows } : {}),
        };
      }),
    };
  }
  return report;
}

async function readErrors(path: string): Promise<NonNullable<RunReport["errors"]>> {
  const out: NonNullable<RunReport["errors"]> = { total: 0, by_type: {}, examples: [] };
  for await (const line of createInterface({ input: createReadStream(path), crlfDelay: Infinity })) {
    if (!line) continue;
    try {
      const e = JSON.parse(line) as { line: number; id: string; type: string; message: string };
      out.total++;
      out.by_type[e.type] = (out.by_type[e.type] ?? 0) + 1;
      if (out.examples.length < 20) out.examples.push({ line: e.line, id: e.id, type: e.type, message: e.message });
    } catch {
      // Not an errors line: skipped.
    }
  }
  return out;
}

const tally = (n: number) => n.toLocaleString("en-US");

/** One question of a run report: its numbers, then its charts, as one band. */
function questionBand(s: QuestionStats, shift: Shift | undefined, gate: RunReport["gate"]): string {
  const names = displayLabels(s);
  const shares = s.label_counts.map((c) => c / (s.n || 1));
  const breached = (metric: string) => gate?.breaches.some((b) => b.question === s.name && b.metric === metric);
  const mark = (metric: string, text: string) => (breached(metric) ? `${text} ✗ gate` : text);
  const items: { label: string; value: string; interval?: string }[] = [{ label: "rows", value: tally(s.n) }];
  if (s.mean_label_mass !== undefined)
    items.push({ label: "mean label mass", value: mark("label_mass", num(s.mean_label_mass)), interval: `${plural(s.label_mass_rows ?? 0, "row")} carry it` });
  if (shift) {
    items.push({ label: "PSI", value: mark("psi", num(shift.psi)), interval: shift.psi_basis });
    items.push({ label: "agreement", value: mark("agreement", pct(shift.agreement)), interval: `${tally(shift.flipped)} of ${tally(shift.shared)} flipped` });
  }
  const head = ["label", "share now", ...(shift ? ["earlier"] : [])];
  const rows = names.map((n, i) => [n, pct(shares[i]), ...(shift ? [pct(shift.earlier_shares[i])] : [])]);
  const numbers = `<div class="card numbers"><h3>${escapeHtml(s.name)} in numbers</h3>${tiles(items)}${table(head, rows)}${
    shift?.earlier_label_mass !== undefined ? `<p class="muted">Mean label mass earlier: ${num(shift.earlier_label_mass)}.</p>` : ""
  }</div>`;
  const cards = [numbers];
  cards.push(
    barChart(
      shift ? `${s.name}: label shares, earlier and now` : `${s.name}: label shares`,
      names,
      shift
        ? [
            { name: "earlier", values: shift.earlier_shares },
            { name: "now", values: shares },
          ]
        : [{ name: "rows", values: shares }],
    ),
  );
  const value = kindOf(s).value;
  if (value) cards.push(histogram(`${s.name}: ${value.title}`, s.value_histogram, 0, value.top(s), value.axis));
  cards.push(histogram(`${s.name}: confidence`, s.confidence_histogram, 0, 1, "top-label probability"));
  if (s.label_mass_histogram) cards.push(histogram(`${s.name}: label mass`, s.label_mass_histogram, 0, 1, "share of next-token probability on the labels"));
  const wide: string[] = [];
  if (shift && shift.flips.length > 0) {
    wide.push(
      `<details><summary>${plural(shift.flipped, "record")} flipped since the earlier run (the ${shift.flips.length} most confident now shown)</summary>${table(
        ["id", "earlier", "now", "confidence now"],
        shift.flips.map((f) => [f.id, f.from, f.to, num(f.confidence)]),
      )}</details>`,
    );
  }
  return `<h2>${escapeHtml(s.name)} <span class="muted">(${s.type}, ${plural(s.n, "row")})</span></h2>${band(cards, wide)}`;
}

function gateHtml(gate: NonNullable<RunReport["gate"]>): string {
  if (gate.breaches.length === 0) return `<p class="ok">Drift gate passed: ${escapeHtml(gate.conditions.join(", "))}.</p>`;
  return `<div class="card"><p class="bad">Drift gate failed: ${plural(gate.breaches.length, "breach", "breaches")} of ${escapeHtml(gate.conditions.join(", "))}</p><ul>${gate.breaches
    .map((b) => `<li>${escapeHtml(b.line)}</li>`)
    .join("")}</ul></div>`;
}

/** The run report's HTML. */
export function reportHtml(r: RunReport): string {
  const body: string[] = [];
  if (r.provenance) body.push(provenanceList(provenanceRows(r.provenance)));
  body.push(`<p>${plural(r.rows, "answered row")}${r.errors ? `, ${tally(r.errors.total)} failed` : ""}.</p>`);
  if (r.gate) body.push(gateHtml(r.gate));
  if (r.compare) {
    const c = r.compare;
    body.push(
      `<h2>Compared with ${escapeHtml(displayPath(c.answers))}</h2><p>${plural(c.rows, "earlier row")}; ids in both runs: ${tally(c.shifts[0]?.shared ?? 0)}. PSI: 0.1 is worth a look, 0.25 a real shift; an empty bin counts as ${PSI_EPSILON} of the rows.</p>`,
    );
    body.push(
      table(
        ["question", "PSI", "PSI over", "JS distance", "agreement", "flipped", "label mass earlier", "label mass now"],
        c.shifts.map((s) => {
          const q = r.questions.find((x) => x.name === s.question);
          return [
            s.question,
            num(s.psi),
            s.psi_basis,
            num(s.js_distance),
            pct(s.agreement),
            tally(s.flipped),
            num(s.earlier_label_mass),
            num(q?.mean_label_mass),
          ];
        }),
      ),
    );
  }
  if (r.usage) {
    const u = r.usage;
    body.push(
      `<h2>Usage</h2>${table(
        ["model", "records read", "answered", "failed", "requests", "retries", "429s", "529s", "input tokens", "cost (USD)", "seconds", "records/s"],
        [
          [
            u.model,
            u.records.read,
            u.records.answered,
            u.records.failed,
            u.requests.sent,
            u.requests.retries,
            u.requests.rate_limited,
            u.requests.overloaded,
            u.tokens.input,
            u.cost_usd.toFixed(4),
            u.seconds.toFixed(1),
            u.records_per_second.toFixed(1),
          ],
        ],
      )}`,
    );
  }
  if (r.errors && r.errors.total > 0) {
    body.push(
      `<h2>Errors by reason</h2>${table(
        ["reason", "rows"],
        Object.entries(r.errors.by_type).sort((a, b) => b[1] - a[1]),
      )}`,
    );
    body.push(
      `<details><summary>first ${plural(r.errors.examples.length, "error row")}</summary>${table(
        ["line", "id", "reason", "message"],
        r.errors.examples.map((e) => [e.line, e.id, e.type, e.message]),
      )}</details>`,
    );
  }
  for (const s of r.questions)
    body.push(
      questionBand(
        s,
        r.compare?.shifts.find((x) => x.question === s.name),
        r.gate,
      ),
    );
  return page(`Run report: ${displayPath(r.answers)}`, body.join("\n"));
}

/** What the assessment page shows beside the assessment itself. */
export interface AssessmentHtmlOptions {
  /** The job file as the user named it, for the header. */
  job?: string | undefined;
  /** The metrics shown (default: all of assess's). */
  metrics?: readonly Metric[];
}

/** One question's suspect gold labels (`assess --suspects`): the most confident contradictions, and how many the file holds. */
function suspectsHtml(question: string, s: SuspectSummary): string {
  const mine = s.top.filter((r) => r.question === question);
  const count = s.questions.find((q) => q.question === question)?.suspects ?? mine.length;
  if (count === 0) return `<h3>Suspect gold labels</h3><p class="muted">None: no gold label here is contradicted with unusual confidence.</p>`;
  return `<h3>Suspect gold labels: ${plural(count, "row")}${s.file ? ` (in ${escapeHtml(displayPath(s.file))})` : ""}</h3>${table(
    ["id", "gold label", "model's label", "model's probability"],
    mine.map((r) => [r.id, r.gold, r.model_label, num(r.probability)]),
  )}${count > mine.length ? `<p class="muted">${plural(count - mine.length, "more row")} in the file${s.file ? "" : " (name one with --suspects FILE)"}.</p>` : ""}`;
}

/** The assessment's HTML: metrics with intervals, reliability diagrams, risk-coverage, confusion heat maps. */
export function assessmentHtml(a: Assessment & { provenance?: Provenance }, options: AssessmentHtmlOptions = {}): string {
  const body: string[] = [];
  const r = a.rows;
  if (a.provenance) body.push(provenanceList(provenanceRows(a.provenance, { raw: a.raw })));
  body.push(
    `<p>${tally(r.matched)} of ${plural(r.gold, "gold row")} matched; ${plural(r.answers_only, "answer")} without a gold label${r.gold_only ? `; ${plural(r.gold_only, "gold row")} without an answer` : ""}. 95% intervals from ${plural(a.bootstrap, "bootstrap draw")} (seed ${a.seed}). Confidence is the top label's probability.</p>`,
  );
  for (const q of a.questions) {
    const names = displayLabels(q);
    // The headline figures: the metrics with an interval (the ECE with its noise removed among them, its interval holding it).
    const shown = options.metrics ?? METRIC_TABLE;
    const tileItems = headlineOf(q.type, shown)
      .filter((m) => q.metrics[m.name] !== undefined)
      .map((m) => {
        const ci = q.intervals[m.name];
        return { label: m.label, value: metricText(m, q.metrics[m.name]), interval: ci ? `95%: ${metricText(m, ci[0])} – ${metricText(m, ci[1])}` : undefined };
      });
    const rows = metricsOf(q.type, shown).map((m) => [`${m.label} ${m.better === "lower" ? "↓" : "↑"}`, metricText(m, q.metrics[m.name])]);
    rows.push(["ECE noise floor at this n", `${num(q.ece_noise_floor.median)} (95%: ${num(q.ece_noise_floor.p95)})`]);
    const eceNote =
      (q.metrics["ece"] as number) > q.ece_noise_floor.p95
        ? `<p class="bad">ECE ${num(q.metrics["ece"])} is above what a calibrated model shows at this n (95%: ${num(q.ece_noise_floor.p95)}): calibrate.</p>`
        : `<p>ECE is within the noise a calibrated model shows at this n.</p>`;
    const numbers = `<div class="card numbers"><h3>${escapeHtml(q.name)} in numbers</h3>${tiles(tileItems)}${table(["metric (↑ higher is better, ↓ lower)", "value"], rows)}${eceNote}</div>`;
    const cards = [
      numbers,
      reliabilityDiagram(`${q.name}: reliability`, q.reliability),
      coverageCurve(`${q.name}: accuracy against coverage`, q.risk_coverage.curve, {
        head: ["most confident", "accuracy", "confidence at least"],
        rows: q.risk_coverage.at.map((p) => [pct(p.coverage), num(p.accuracy), num(p.threshold)]),
      }),
      heatMap(`${q.name}: confusion (gold × predicted)`, names, q.confusion),
      barChart(`${q.name}: gold and predicted shares`, names, [
        { name: "gold", values: q.gold_shares },
        { name: "predicted", values: q.predicted_shares },
      ]),
    ];
    if (q.label_mass) {
      cards.push(
        barChart(
          `${q.name}: accuracy by label mass`,
          q.label_mass.map((b) => `${rangeText(b.mass_lo, b.mass_hi)} (${tally(b.count)})`),
          [{ name: "accuracy", values: q.label_mass.map((b) => b.accuracy) }],
          { format: "number", xLabel: "accuracy (label-mass fifth, rows)", fixedMax: 1 },
        ),
      );
    }
    const wide = a.suspects ? [suspectsHtml(q.name, a.suspects)] : [];
    body.push(`<h2>${escapeHtml(q.name)} <span class="muted">(${q.type}, ${plural(q.n, "row")})</span></h2>${band(cards, wide)}`);
  }
  return page(`Assessment: ${displayPath(a.answers)}`, body.join("\n"));
}
