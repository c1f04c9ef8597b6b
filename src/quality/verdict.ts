/**
 * The verdict: can these labels be used? One row per question, one cell per
 * column (answered, agreement with gold, calibration, drift, suspects, the
 * weakest class's recall), each marked by the rules of metric-table.ts, and
 * one sentence above naming the questions to look at first. `assess` and
 * `report` build it here from whatever they were given (gold labels, an
 * earlier run, a gate), and print it the same way in the terminal, the JSON
 * and the HTML.
 */
import type { QuestionType } from "../api/schema.js";
import { describeIdentity } from "../evaluator/evaluator.js";
import type { Assessment, QuestionAssessment } from "./assess.js";
import { type Breach, breaches, type Condition, conditionKey, type GateSubject } from "./gate.js";
import {
  CLASS_METRICS,
  type ClassFigures,
  COLUMN_KEYS,
  type ColumnKey,
  classGateName,
  columnOfMetric,
  DRIFT_METRICS,
  type DriftMetric,
  EVIDENCE_COLUMNS,
  gateName,
  leastPreciseClass,
  type Mark,
  METRIC_TABLE,
  type Metric,
  metricsOf,
  VERDICT_COLUMN_LIST,
  VERDICT_COLUMNS,
  VERDICT_COMMON_RULE,
  VERDICT_MARK_RULE,
  VERDICT_SAMPLE_RULE,
  weakestClass,
} from "./metric-table.js";
import { intervalText, listText, num, pct, tally } from "./numbers.js";
import type { QuestionStats, RunReport, Shift } from "./report.js";
import { chosenText, inSampleText, isInSample } from "./sample.js";

/** One cell: its mark (n/a: no evidence, never ok) and what it shows; the gate conditions that broke here. */
export interface VerdictCell {
  mark: Mark | "n/a";
  text: string;
  /** n/a: what would give it evidence ("--gold <labels>"). */
  add?: string;
  gate?: string[];
}

export interface QuestionVerdict {
  name: string;
  type: QuestionType;
  /** The worst mark of its cells with evidence; n/a when none has any. */
  mark: Mark | "n/a";
  cells: Record<ColumnKey, VerdictCell>;
}

/** The models of this run and of the run it is compared with, as a person would name them. */
export interface ModelFacts {
  now?: string | undefined;
  earlier?: string | undefined;
  /** true: the earlier run was answered by another model (or other weights or endpoint); null: cannot tell. */
  changed: boolean | null;
  text: string;
}

export interface Verdict {
  /** What a scheduler reads: act or look when any question is; ok only when every question is ok; else n/a (nothing measured beyond the answered rows), never ok. */
  mark: Mark | "n/a";
  /** One sentence: can these labels be used, and which questions to look at first. */
  sentence: string;
  model: ModelFacts;
  questions: QuestionVerdict[];
  /** What the gold sample is, when that bears on the figures (in-sample calibration, gold chosen by confidence): one sentence, or undefined. */
  sample?: string | undefined;
  /** Columns no question has evidence for, with the reason and what to add. */
  not_measured: { column: ColumnKey; reason: string; add?: string | undefined }[];
  rules: { column: ColumnKey; label: string; rule: string }[];
  common_rule: string;
  mark_rule: string;
  sample_rule: string;
}

const RANK: Record<Mark, number> = { ok: 0, look: 1, act: 2 };
const worst = (marks: readonly (Mark | "n/a")[]): Mark | "n/a" =>
  marks.reduce<Mark | "n/a">((w, m) => (m === "n/a" ? w : w === "n/a" || RANK[m] > RANK[w] ? m : w), "n/a");

/** A cell without evidence: the reason in its text, what to add beside it (the sentence and the JSON say it once, not in every cell). */
const na = (reason: string, add?: string): VerdictCell => ({ mark: "n/a", text: `n/a: ${reason}`, ...(add ? { add } : {}) });

/** What a cell without evidence needs, said once for every column and command (report takes --gold and --compare; only assess lists suspects). */
const ADD = { gold: "add --gold <labels>", compare: "add --compare <earlier answers>", suspects: "run assess --suspects" } as const;

/** What the verdict is built from: any of gold (an assessment), a run report (with or without a comparison), and a gate's breaches. */
export interface VerdictInputs {
  assessment?: Assessment | undefined;
  report?: RunReport | undefined;
  breaches?: readonly Breach[];
  /** Rows answered and failed, when neither input says (defaults: the report's, else the assessment's). */
  answered?: number;
  failed?: number | undefined;
}

/** A model as a person names it: its id, and what stood behind it. */
function modelName(model: string | undefined, identity: string | undefined): string | undefined {
  if (!model && !identity) return undefined;
  const behind = identity ? describeIdentity(identity) : undefined;
  return [model, behind && behind !== model ? behind : undefined].filter(Boolean).join(": ");
}

/** This run's model and the earlier run's, and whether they differ (identities when both are known, else model ids). */
export function modelFacts(
  now: { model?: string | undefined; identity?: string | undefined },
  earlier?: { model?: string | undefined; identity?: string | undefined },
): ModelFacts {
  const n = modelName(now.model, now.identity);
  const e = earlier ? modelName(earlier.model, earlier.identity) : undefined;
  let changed: boolean | null = null;
  if (earlier) {
    if (now.identity && earlier.identity) changed = now.identity !== earlier.identity;
    else if (now.model && earlier.model) changed = now.model !== earlier.model;
  }
  const text = !earlier
    ? `Model: ${n ?? "not recorded"}.`
    : changed
      ? `The model changed: the earlier run was answered by ${e}, this one by ${n}; what moved may be the model, not the data.`
      : changed === false
        ? `Model: ${n}, the same as the earlier run's.`
        : `Model: ${n ?? "not recorded"}; the earlier run's: ${e ?? "not recorded"} (whether it changed cannot be told).`;
  return { now: n, earlier: e, changed, text };
}

function answeredCell(answered: number, failed: number | undefined): VerdictCell {
  if (failed === undefined) return na(`${tally(answered)} answered; failures not recorded (no errors file or usage summary beside the answers)`);
  const mark = VERDICT_COLUMNS.answered.mark({ answered, failed });
  return { mark, text: `${tally(answered)} answered, ${tally(failed)} failed${failed ? ` (${pct(failed / (answered + failed))})` : ""}` };
}

function agreementCell(q: QuestionAssessment): VerdictCell {
  const accuracy = q.metrics["accuracy"];
  if (accuracy === undefined || !Number.isFinite(accuracy)) return na("accuracy could not be computed");
  const interval = q.intervals["accuracy"] ?? [accuracy, accuracy];
  const commonest = Math.max(...q.gold_shares);
  const mark = VERDICT_COLUMNS.agreement.mark({ accuracy, interval, commonest });
  const baseline = interval[1] <= commonest ? `; always answering the commonest gold label scores ${num(commonest)}` : "";
  return { mark, text: `${num(accuracy)} (95%: ${intervalText(interval)}) on ${tally(q.n)} gold rows${baseline}` };
}

function calibrationCell(q: QuestionAssessment): VerdictCell {
  const ece = q.metrics["ece"];
  const debiased = q.intervals["ece_debiased"];
  if (ece === undefined || !Number.isFinite(ece) || !debiased) return na("ECE could not be computed");
  const noiseP95 = q.ece_noise_floor.p95;
  const inSample = isInSample(q.sample?.in_sample);
  const mark = VERDICT_COLUMNS.calibration.mark({ ece, noiseP95, debiased, inSample });
  const text =
    ece <= noiseP95
      ? `ECE ${num(ece)}, within the noise floor ${num(noiseP95)}`
      : `ECE ${num(ece)} above the noise floor ${num(noiseP95)}; ${num(q.metrics["ece_debiased"])} with noise removed (95%: ${intervalText(debiased)})`;
  const held = q.sample?.in_sample;
  return { mark, text: inSample && held ? `${text}; ${inSampleText(held)}` : text };
}

/** A class's figure with its interval and counts: "recall 0.117 (95%: 0.076–0.176), 19 of 162" (found of its gold rows; right of its answers). */
function classFigure(c: ClassFigures, metric: "recall" | "precision"): string {
  if (metric === "recall") return `recall ${num(c.recall)} (95%: ${intervalText(c.recall_interval)}), ${tally(c.hits)} of ${tally(c.gold)}`;
  return `precision ${num(c.precision)} (95%: ${intervalText(c.precision_interval)}), ${tally(c.hits)} of ${tally(c.predicted)}`;
}

/** The weakest class's recall and precision; the least precise class's precision too when it is another class and not ok by itself. */
function weakestCell(q: QuestionAssessment): VerdictCell {
  if (!q.classes) return na("a score's levels are ordered: read its quadratic kappa");
  const weakest = weakestClass(q.classes);
  if (!weakest?.recall_interval) return na("no class has gold rows");
  const least = leastPreciseClass(q.classes);
  const rule = VERDICT_COLUMNS.weakest_class.mark;
  const mark = rule({ recall: weakest.recall_interval, precision: least?.precision_interval ?? undefined });
  const rare = (c: ClassFigures) => (c.rare ? ` (rare, ${pct(c.share)})` : "");
  const parts = [`${weakest.label}${rare(weakest)}: ${classFigure(weakest, "recall")}`];
  if (weakest.precision_interval) parts.push(classFigure(weakest, "precision"));
  // The rule reads each interval alike: the least precise class's alone says whether it is worth naming.
  if (least?.precision_interval && least !== weakest && rule({ recall: least.precision_interval }) !== "ok")
    parts.push(`least precise: ${least.label}${rare(least)}, ${classFigure(least, "precision")}`);
  return { mark, text: parts.join("; ") };
}

/** Marks the gold columns look when the gold was chosen by confidence, saying so: their figures describe the chosen rows. */
function sampleMarks(cells: Record<ColumnKey, VerdictCell>, q: QuestionAssessment | undefined): void {
  const chosen = q?.sample?.confidence;
  if (!chosen?.chosen) return;
  for (const key of ["agreement", "calibration", "weakest_class"] as const) {
    const cell = cells[key];
    if (cell.mark === "n/a") continue;
    cell.mark = "look";
    cell.text = `${cell.text}; on gold chosen by confidence (${chosen.direction} than the run)`;
  }
}

function suspectsCell(a: Assessment, q: QuestionAssessment): VerdictCell {
  const found = a.suspects?.questions.find((s) => s.question === q.name);
  if (!a.suspects) return na("not looked for", ADD.suspects);
  if (!found) return na("no gold rows", ADD.gold);
  const { suspects, rows, estimated_noise: noise, noise_interval: interval } = found;
  return {
    mark: VERDICT_COLUMNS.suspects.mark({ noise, interval }),
    text: `${pct(noise)} of gold labels wrong (95%: ${pct(interval[0])}–${pct(interval[1])}); ${tally(suspects)} of ${tally(rows)} rows suspect`,
  };
}

function driftCell(shift: Shift, model: ModelFacts): VerdictCell {
  const agreement = shift.shared > 0 && shift.agreement !== null ? shift.agreement : undefined;
  const mark = VERDICT_COLUMNS.drift.mark({ psi: shift.psi, agreement, modelChanged: model.changed === true });
  const parts = [
    `PSI ${num(shift.psi)}`,
    `JS ${num(shift.js_distance)}`,
    agreement === undefined ? "agreement n/a: no id in both runs" : `agreement ${pct(agreement)}`,
  ];
  if (model.changed) parts.push("another model");
  return { mark, text: parts.join(", ") };
}

/** Marks a cell act for each breach shown in its column, naming the condition and the value. */
function markBreaches(cells: Record<ColumnKey, VerdictCell>, breaches: readonly Breach[]): void {
  for (const b of breaches) {
    const column = columnOfMetric(conditionKey(b.condition)) ?? "agreement";
    const cell = cells[column];
    const value = Number.isNaN(b.actual) ? "n/a" : num(b.actual);
    const line = `${b.condition.text} (${value})`;
    cell.gate = [...(cell.gate ?? []), line];
    cell.mark = "act";
    cell.text = `${cell.text}; ✗ gate ${line}`;
  }
}

/** The gate's subject: each question's metrics from the assessment (with its per class figures) and the run report, by gate key, with their support and intervals. */
export function gateSubject(a: Assessment | undefined, r: RunReport | undefined, table: readonly Metric[] = METRIC_TABLE): GateSubject {
  const names = questionList(a, r);
  const questions = names.map(({ name }) => {
    const metrics: Record<string, number | undefined> = {};
    const support: Record<string, number> = {};
    const intervals: Record<string, readonly [number, number]> = {};
    const q = a?.questions.find((x) => x.name === name);
    if (q) {
      for (const m of metricsOf(q.type, table)) {
        const key = gateName(m);
        metrics[key] = q.metrics[m.name];
        support[key] = q.support[m.name] ?? q.n;
        const interval = q.intervals[m.name];
        if (interval) intervals[key] = interval;
      }
      for (const c of q.classes ?? [])
        for (const m of CLASS_METRICS) {
          const key = classGateName(m.name, c.label);
          metrics[key] = m.value(c) ?? Number.NaN;
          support[key] = m.support(c);
          const interval = m.interval(c);
          if (interval) intervals[key] = interval;
        }
    }
    if (r) {
      const s = r.questions.find((x) => x.name === name);
      const shift = r.compare?.shifts.find((x) => x.question === name);
      const counted = { rows: s?.n ?? 0, shared: shift?.shared ?? 0, massRows: s?.label_mass_rows ?? 0 };
      for (const m of DRIFT_METRICS) {
        if (m.needs === "compare" && !r.compare) continue;
        metrics[m.name] = driftValue(m.name, s, shift);
        support[m.name] = m.support(counted);
      }
    }
    return { name, metrics, support, intervals };
  });
  return { questions, known: (name) => Object.keys(questions.find((q) => q.name === name)?.metrics ?? {}) };
}

/** A drift metric's figure for a question (NaN where it cannot be computed: a gate fails closed). */
function driftValue(name: DriftMetric["name"], s: QuestionStats | undefined, shift: Shift | undefined): number | undefined {
  if (name === "label_mass") return s?.mean_label_mass ?? Number.NaN;
  if (name === "agreement") return shift?.agreement ?? Number.NaN;
  return shift?.[name];
}

/** The conditions that hold against an assessment alone (each a failed gate, one per question), checking that every name exists. */
export function failedConditions(a: Assessment, conditions: readonly Condition[], table: readonly Metric[] = METRIC_TABLE): Breach[] {
  return breaches(gateSubject(a, undefined, table), conditions);
}

/** The questions in the answers' order: the report's when there is one (it holds every question), else the assessment's. */
function questionList(a: Assessment | undefined, r: RunReport | undefined): { name: string; type: QuestionType }[] {
  if (r) return r.questions.map((q) => ({ name: q.name, type: q.type }));
  return [...(a?.questions ?? []), ...(a?.questions_without_gold ?? [])].map((q) => ({ name: q.name, type: q.type }));
}

/** The verdict from whatever was measured. */
export function buildVerdict(inputs: VerdictInputs): Verdict {
  const { assessment: a, report: r } = inputs;
  const answered = inputs.answered ?? r?.rows ?? a?.rows.answers ?? 0;
  const failed = "failed" in inputs ? inputs.failed : r ? r.failed_rows : a?.failed_rows;
  const provenance = r?.provenance ?? a?.provenance;
  const model = modelFacts(
    { model: provenance?.model, identity: provenance?.model_identity },
    r?.compare ? { model: r.compare.model, identity: r.compare.model_identity } : undefined,
  );
  const questions: QuestionVerdict[] = questionList(a, r).map(({ name, type }) => {
    const q = a?.questions.find((x) => x.name === name);
    const shift = r?.compare?.shifts.find((x) => x.question === name);
    const noGold = a ? na("no gold rows for this question") : na("no gold labels given", ADD.gold);
    const cells: Record<ColumnKey, VerdictCell> = {
      answered: answeredCell(answered, failed),
      agreement: q ? agreementCell(q) : { ...noGold },
      calibration: q ? calibrationCell(q) : { ...noGold },
      drift: shift ? driftCell(shift, model) : na("no earlier run given", ADD.compare),
      suspects: q && a ? suspectsCell(a, q) : a ? { ...noGold } : na("not looked for", ADD.suspects),
      weakest_class: q ? weakestCell(q) : { ...noGold },
    };
    sampleMarks(cells, q);
    markBreaches(
      cells,
      (inputs.breaches ?? []).filter((b) => b.question === name),
    );
    return { name, type, mark: questionMark(cells), cells };
  });
  const not_measured = COLUMN_KEYS.flatMap((column) => {
    const cells = questions.map((q) => q.cells[column]);
    const texts = new Set(cells.map((c) => (c.mark === "n/a" ? reasonOf(c) : "")));
    const [only] = texts;
    return questions.length > 0 && texts.size === 1 && only ? [{ column, reason: only, ...(cells[0]?.add ? { add: cells[0].add } : {}) }] : [];
  });
  return {
    mark: verdictMark(questions),
    sentence: sentence(questions, not_measured),
    model,
    sample: sampleSentence(a),
    questions,
    not_measured,
    rules: VERDICT_COLUMN_LIST.map((c) => ({ column: c.key, label: c.label, rule: c.rule })),
    common_rule: VERDICT_COMMON_RULE,
    mark_rule: VERDICT_MARK_RULE,
    sample_rule: VERDICT_SAMPLE_RULE,
  };
}

/** A cell's reason for n/a, without the "n/a: " and what to add. */
const reasonOf = (c: VerdictCell) => c.text.replace(/^n\/a: /, "");

/** A question's mark: act or look when any cell is; ok only with evidence beyond the answered rows; else n/a (VERDICT_MARK_RULE). */
function questionMark(cells: Record<ColumnKey, VerdictCell>): Mark | "n/a" {
  const w = worst(COLUMN_KEYS.map((k) => cells[k].mark));
  return w === "ok" && !EVIDENCE_COLUMNS.some((k) => cells[k].mark !== "n/a") ? "n/a" : w;
}

/** The verdict's mark: act or look when any question is; ok only when every question is; else n/a (VERDICT_MARK_RULE). */
function verdictMark(questions: readonly QuestionVerdict[]): Mark | "n/a" {
  const w = worst(questions.map((q) => q.mark));
  return w === "ok" && questions.some((q) => q.mark === "n/a") ? "n/a" : w;
}

/** What the gold sample is, when it bears on the figures: one sentence naming the questions. */
function sampleSentence(a: Assessment | undefined): string | undefined {
  if (!a) return undefined;
  const parts: string[] = [];
  const chosen = a.questions.filter((q) => q.sample?.confidence?.chosen);
  if (chosen.length > 0) {
    const c = chosen[0]!.sample!.confidence!;
    parts.push(
      `The gold of ${listText(chosen.map((q) => q.name))} was chosen by confidence: ${chosenText(c)}. Label a random sample, or the run's audit rows (--audit-sample), for figures of the run.`,
    );
  }
  const inSample = a.questions.filter((q) => isInSample(q.sample?.in_sample));
  if (inSample.length > 0) {
    const held = inSample.map((q) => {
      const s = q.sample!.in_sample!;
      return `${q.name} ${s.held_out_ece !== undefined ? `${num(s.held_out_ece)} held out against ${num(q.metrics["ece"])} here` : "(no held-out figure)"}`;
    });
    parts.push(
      `Calibration is in-sample: the answers' calibration was fitted on these gold rows, so its figures may flatter it; the calibration file's ECE on held-out rows: ${listText(held)}. Assess on gold it was not fitted on.`,
    );
  }
  return parts.length ? parts.join(" ") : undefined;
}

/** "Not yet: act on is_spam (weakest class) first, then look at team (drift)." */
function sentence(questions: readonly QuestionVerdict[], notMeasured: Verdict["not_measured"]): string {
  const named = (q: QuestionVerdict, mark: Mark) =>
    `${q.name} (${COLUMN_KEYS.filter((k) => q.cells[k].mark === mark)
      .map((k) => VERDICT_COLUMNS[k].label)
      .join(", ")})`;
  // Five names at most: the table holds the rest.
  const few = (names: string[]) => (names.length > 5 ? [...names.slice(0, 4), `${names.length - 4} more (see the table)`] : names);
  const acts = few(questions.filter((q) => q.mark === "act").map((q) => named(q, "act")));
  const looks = few(questions.filter((q) => q.mark === "look").map((q) => named(q, "look")));
  const blind = questions.filter((q) => q.mark === "n/a");
  const unmeasured = few(blind.map((q) => q.name));
  let head: string;
  if (questions.length === 0) head = "Nothing to judge: no question was measured.";
  else if (acts.length) head = `Not yet: act on ${listText(acts)} first${looks.length ? `, then look at ${listText(looks)}` : ""}.`;
  else if (looks.length) head = `Yes, with care: look at ${listText(looks)} first.`;
  else if (blind.length === questions.length) head = "Cannot tell: nothing beyond the answered rows was measured.";
  else if (blind.length)
    head = `Cannot tell for ${listText(unmeasured)}: nothing beyond ${blind.length === 1 ? "its" : "their"} answered rows was measured; the rest is ok.`;
  else head = "Yes: every question is ok on what was measured.";
  if ((acts.length || looks.length) && blind.length) head += ` Cannot tell for ${listText(unmeasured)}.`;
  const byReason = new Map<string, { labels: string[]; add?: string | undefined }>();
  for (const n of notMeasured) {
    const seen = byReason.get(n.reason) ?? { labels: [], add: n.add };
    seen.labels.push(VERDICT_COLUMNS[n.column].label);
    byReason.set(n.reason, seen);
  }
  const tail = [...byReason].map(([reason, { labels, add }]) => `${listText(labels)} (${reason}${add ? `: ${add}` : ""})`);
  return tail.length ? `${head} Not measured: ${tail.join("; ")}.` : head;
}

/** The verdict for the terminal: the sentence, the model, one block per question, the rules. */
export function describeVerdict(v: Verdict): string {
  const lines = [`Can these labels be used? ${v.sentence}`, v.model.text, ...(v.sample ? [v.sample] : [])];
  const width = Math.max(...VERDICT_COLUMN_LIST.map((c) => c.label.length));
  for (const q of v.questions) {
    lines.push(`${q.name} (${q.type}): ${q.mark}`);
    for (const c of VERDICT_COLUMN_LIST) {
      const cell = q.cells[c.key];
      lines.push(`  ${c.label.padEnd(width)}  ${cell.mark.padEnd(4)}  ${cell.text.replace(/^n\/a: /, "")}`);
    }
  }
  lines.push(
    "Rules (docs/metrics.md): ok, look or act per column; n/a has no evidence and is never ok, nor is a question or verdict with nothing measured beyond its answered rows.",
  );
  return lines.join("\n");
}
