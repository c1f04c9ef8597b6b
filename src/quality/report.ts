/**
 * Run reports: what a run's labels look like (label shares, probability and
 * confidence histograms, label mass, errors, usage), how they moved since an
 * earlier run (population stability index, Jensen-Shannon distance,
 * agreement, flipped records), and the HTML of an assessment. Streams the
 * answers: memory holds counts, plus one small entry per id of the earlier
 * run when comparing.
 */
import { createReadStream, existsSync, readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { argmax } from "../evaluator/readout.js";
import { isSummary, type UsageSummary } from "../runner/output/usage.js";
import { readAnswers, type QuestionInfo } from "./answers.js";
import { LOWER_IS_BETTER, METRICS, metricLabel, type Assessment } from "./assess.js";
import { barChart, coverageCurve, escapeHtml, heatMap, histogram, num, page, pct, reliabilityDiagram, suspectsSection, table } from "./html.js";

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
}

export interface Shift {
  question: string;
  /** Population stability index of the label shares (0.1: worth a look; 0.25: a real shift, by the usual rule of thumb). */
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
}

export interface RunReport {
  kind: "typed-eval.report";
  answers: string;
  rows: number;
  questions: QuestionStats[];
  errors?: { total: number; by_type: Record<string, number>; examples: { line: number; id: string; type: string; message: string }[] };
  usage?: UsageSummary;
  compare?: { answers: string; rows: number; shifts: Shift[] };
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
  rows: number;
}

async function readEarlier(path: string, questions: QuestionInfo[] | undefined): Promise<Earlier> {
  const ids = new Map<string, number>();
  let labels = new Int32Array(1024);
  let found: QuestionInfo[] | undefined = questions;
  let counts: number[][] = [];
  for await (const row of await readAnswers(path, { questions, onQuestions: (q) => (found = q) })) {
    const qs = found as QuestionInfo[];
    if (counts.length === 0) counts = qs.map((q) => new Array<number>(q.labels.length).fill(0));
    const r = ids.size;
    if ((r + 1) * qs.length > labels.length) {
      const next = new Int32Array(labels.length * 2);
      next.set(labels);
      labels = next;
    }
    qs.forEach((q, j) => {
      const label = argmax(row.dist.get(q.name) as number[]);
      labels[r * qs.length + j] = label;
      counts[j]![label]! += 1;
    });
    ids.set(row.id, r);
  }
  return { questions: found ?? [], ids, labels, counts, rows: ids.size };
}

/** Population stability index between two share vectors, with a floor so an empty label does not blow up. */
export function psi(a: readonly number[], b: readonly number[]): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) {
    const x = Math.max(a[i] as number, 1e-4);
    const y = Math.max(b[i] as number, 1e-4);
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
  options: { questions?: QuestionInfo[] | undefined; compare?: string | undefined; errors?: string | undefined; usage?: string | undefined },
): Promise<RunReport> {
  const earlier = options.compare ? await readEarlier(options.compare, options.questions) : undefined;
  let questions: QuestionInfo[] | undefined = options.questions ?? earlier?.questions;
  let stats: QuestionStats[] = [];
  const shared: { agree: number[]; flipped: number[]; flips: Shift["flips"][]; n: number } = { agree: [], flipped: [], flips: [], n: 0 };
  let rows = 0;
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
        value_histogram: q.type === "choice" ? [] : new Array<number>(BINS).fill(0),
        confidence_histogram: new Array<number>(BINS).fill(0),
      }));
      shared.agree = qs.map(() => 0);
      shared.flipped = qs.map(() => 0);
      shared.flips = qs.map(() => []);
    }
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
      p.forEach((v, i) => (s.mean_probabilities[i]! += v));
      s.confidence_histogram[binIndex(confidence, 0, 1)]! += 1;
      if (q.type === "noul") s.value_histogram[binIndex(p[1] as number, 0, 1)]! += 1;
      if (q.type === "score")
        s.value_histogram[
          binIndex(
            p.reduce((e, v, i) => e + i * v, 0),
            0,
            q.labels.length - 1,
          )
        ]! += 1;
      const mass = row.mass?.[q.name];
      if (typeof mass === "number") {
        s.label_mass_histogram ??= new Array<number>(BINS).fill(0);
        s.label_mass_histogram[binIndex(mass, 0, 1)]! += 1;
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
  for (const s of stats) s.mean_probabilities = s.mean_probabilities.map((v) => (s.n ? v / s.n : 0));
  const report: RunReport = { kind: "typed-eval.report", answers: answersPath, rows, questions: stats };

  const errorsPath = options.errors ?? `${answersPath}.errors.jsonl`;
  if (existsSync(errorsPath)) report.errors = await readErrors(errorsPath);
  const usagePath = options.usage ?? `${answersPath}.usage.json`;
  if (existsSync(usagePath)) {
    try {
      const json: unknown = JSON.parse(readFileSync(usagePath, "utf8"));
      if (isSummary(json)) report.usage = json;
    } catch {
      // An unreadable usage file leaves the usage section out; the labels are what the report is for.
    }
  }
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
        return {
          question: s.name,
          psi: psi(a, b),
          js_distance: jsDistance(a, b),
          agreement: shared.n ? (shared.agree[j] as number) / shared.n : NaN,
          shared: shared.n,
          flipped: shared.flipped[j] as number,
          earlier_shares: a,
          shares: b,
          flips,
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

/** Labels as people read them: no/yes for a noul, level texts for a score when known. */
export function displayLabels(q: { type: QuestionInfo["type"]; labels: string[]; levels?: unknown[] | undefined }): string[] {
  if (q.type === "noul") return ["no", "yes"];
  if (q.type === "score" && q.levels) return q.labels.map((l, i) => (typeof q.levels?.[i] === "string" ? `${l}: ${q.levels[i] as string}` : l));
  return q.labels;
}

function questionCharts(s: QuestionStats): string {
  const parts: string[] = [];
  const shares = s.label_counts.map((c) => c / (s.n || 1));
  parts.push(barChart(`${s.name}: label shares`, displayLabels(s), [{ name: "rows", values: shares }]));
  if (s.type === "noul") parts.push(histogram(`${s.name}: p(yes)`, s.value_histogram, 0, 1, "probability of yes"));
  if (s.type === "score") parts.push(histogram(`${s.name}: expected score`, s.value_histogram, 0, s.labels.length - 1, "expected score"));
  parts.push(histogram(`${s.name}: confidence`, s.confidence_histogram, 0, 1, "top-label probability"));
  if (s.label_mass_histogram) parts.push(histogram(`${s.name}: label mass`, s.label_mass_histogram, 0, 1, "share of next-token probability on the labels"));
  return `<h2>${escapeHtml(s.name)} <span class="muted">(${s.type}, ${s.n} rows)</span></h2><div class="charts">${parts.join("")}</div>`;
}

/** The run report's HTML. */
export function reportHtml(r: RunReport): string {
  const body: string[] = [];
  body.push(
    `<p>${escapeHtml(r.answers)}: ${r.rows.toLocaleString("en-US")} answered rows${r.errors ? `, ${r.errors.total.toLocaleString("en-US")} failed` : ""}.</p>`,
  );
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
      `<details><summary>first ${r.errors.examples.length} error rows</summary>${table(
        ["line", "id", "reason", "message"],
        r.errors.examples.map((e) => [e.line, e.id, e.type, e.message]),
      )}</details>`,
    );
  }
  if (r.compare) {
    body.push(
      `<h2>Compared with ${escapeHtml(r.compare.answers)}</h2><p>${r.compare.rows.toLocaleString("en-US")} earlier rows; ids in both runs: ${(r.compare.shifts[0]?.shared ?? 0).toLocaleString("en-US")}.</p>`,
    );
    body.push(
      table(
        ["question", "PSI", "JS distance", "agreement", "flipped"],
        r.compare.shifts.map((s) => [s.question, num(s.psi), num(s.js_distance), pct(s.agreement), s.flipped]),
      ),
    );
    const charts = r.compare.shifts.map((s) => {
      const q = r.questions.find((x) => x.name === s.question) as QuestionStats;
      return barChart(`${s.question}: label shares, earlier and now`, displayLabels(q), [
        { name: "earlier", values: s.earlier_shares },
        { name: "now", values: s.shares },
      ]);
    });
    body.push(`<div class="charts">${charts.join("")}</div>`);
    for (const s of r.compare.shifts) {
      if (s.flips.length === 0) continue;
      body.push(
        `<details><summary>${escapeHtml(s.question)}: ${s.flipped} flipped (${s.flips.length} most confident shown)</summary>${table(
          ["id", "earlier", "now", "confidence now"],
          s.flips.map((f) => [f.id, f.from, f.to, num(f.confidence)]),
        )}</details>`,
      );
    }
  }
  for (const s of r.questions) body.push(questionCharts(s));
  return page(`Run report: ${r.answers}`, body.join("\n"));
}

/** The assessment's HTML: metrics with intervals, reliability diagrams, risk-coverage, confusion heat maps. */
export function assessmentHtml(a: Assessment): string {
  const body: string[] = [];
  const r = a.rows;
  body.push(
    `<p>${escapeHtml(a.answers)} against ${escapeHtml(a.gold)}: ${r.matched} of ${r.gold} gold rows matched; ${r.answers_only} answers have no gold label${r.gold_only ? `; ${r.gold_only} gold rows have no answer` : ""}. 95% intervals from ${a.bootstrap} bootstrap draws (seed ${a.seed}). Confidence is the top label's probability.${a.raw ? " Raw (uncalibrated) probabilities." : ""}</p>`,
  );
  for (const q of a.questions) {
    const rows = [...METRICS[q.type], ...METRICS.common].map((m) => {
      const ci = q.intervals[m];
      return [metricLabel(m), num(q.metrics[m]), ci ? `${num(ci[0])} – ${num(ci[1])}` : "", LOWER_IS_BETTER.has(m) ? "lower" : "higher"];
    });
    rows.push(["ECE noise floor at this n", `${num(q.ece_noise_floor.median)}`, `95th percentile ${num(q.ece_noise_floor.p95)}`, ""]);
    const eceNote =
      (q.metrics["ece"] as number) > q.ece_noise_floor.p95
        ? `<p class="bad">ECE ${num(q.metrics["ece"])} is above what a calibrated model shows at this n (95%: ${num(q.ece_noise_floor.p95)}): calibrate.</p>`
        : `<p>ECE is within the noise a calibrated model shows at this n.</p>`;
    const charts = [
      reliabilityDiagram(`${q.name}: reliability`, q.reliability),
      coverageCurve(`${q.name}: accuracy against coverage`, q.risk_coverage.curve),
      heatMap(`${q.name}: confusion (gold × predicted)`, displayLabels(q), q.confusion),
      barChart(`${q.name}: gold and predicted shares`, displayLabels(q), [
        { name: "gold", values: q.gold_shares },
        { name: "predicted", values: q.predicted_shares },
      ]),
    ];
    const cover = table(
      ["coverage", "accuracy", "confidence at least"],
      q.risk_coverage.at.map((p) => [pct(p.coverage), num(p.accuracy), num(p.threshold)]),
    );
    const mass = q.label_mass
      ? `<h3>Accuracy by label mass</h3>${table(
          ["label mass", "rows", "accuracy"],
          q.label_mass.map((b) => [`${b.mass_lo.toPrecision(2)} – ${b.mass_hi.toPrecision(2)}`, b.count, num(b.accuracy)]),
        )}`
      : "";
    const tables = `<div class="tables">${table(["metric", "value", "95% interval", "better"], rows)}${eceNote}<h3>Accuracy of the most confident rows</h3>${cover}${mass}</div>`;
    body.push(
      `<h2>${escapeHtml(q.name)} <span class="muted">(${q.type}, ${q.n} rows)</span></h2><div class="q">${tables}<div class="charts">${charts.join("")}</div></div>`,
    );
  }
  if (a.suspects) body.push(suspectsSection(a.suspects.top, a.suspects.total));
  return page(`Assessment: ${a.answers}`, body.join("\n"));
}
