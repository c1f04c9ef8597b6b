/**
 * Outputs, written from the journal once a run's records are done: answers
 * as JSONL or CSV, failed records as JSONL, both to a path, stdout or S3.
 * Each record appears once (its latest entry wins), and files are written
 * under a temporary name and renamed, so a crash never leaves an output that
 * looks complete.
 */
import { createWriteStream, renameSync, rmSync } from "node:fs";
import type { Writable } from "node:stream";
import { stringify } from "csv-stringify/sync";
import type { Answer, Question, ScoreAnswer } from "../api/schema.js";
import type { Job } from "./job.js";
import { readJournal, type AnswerEntry, type ErrorEntry } from "./journal.js";
import { calibrateAnswers, PriorEstimate, reviewVerdict, type CalibrationMaps, type ReviewPolicy, type ReviewVerdict } from "./labels.js";

/** Formats answers can be written in (inputs have their own list in sources.ts). */
export type OutputFormat = "jsonl" | "csv";

/** Where an output goes: stdout, a path, or anything else that yields a stream (S3). */
export interface OutputTarget {
  /** A writable for the output; `commit` makes it final, `abort` discards it. */
  open(): { stream: Writable; commit(): Promise<void>; abort(): Promise<void> };
  describe: string;
}

/** A local path (written as `<path>.partial`, renamed on success) or stdout for "-". */
export function localTarget(location: string): OutputTarget {
  if (location === "-") {
    return {
      describe: "stdout",
      open: () => ({ stream: process.stdout, commit: async () => undefined, abort: async () => undefined }),
    };
  }
  return {
    describe: location,
    open: () => {
      const partial = `${location}.partial`;
      const stream = createWriteStream(partial);
      const closed = () =>
        new Promise<void>((resolve, reject) => {
          stream.once("error", reject);
          stream.end(() => resolve());
        });
      return {
        stream,
        commit: async () => {
          await closed();
          renameSync(partial, location);
        },
        abort: async () => {
          await closed();
          rmSync(partial, { force: true });
        },
      };
    },
  };
}

/** What one output row holds: the journal entry, the answers as written (calibrated or not), the raw ones, a review verdict. */
export interface OutputRow {
  entry: AnswerEntry;
  answers: Record<string, Answer>;
  /** Raw answers of calibrated questions: p(yes) for a noul, else the probability map. */
  raw?: Record<string, number | Record<string, number>> | undefined;
  review?: ReviewVerdict | undefined;
}

/** One writer per output format: a header (maybe empty) and one line per row. */
export interface RowWriter {
  header(): string;
  row(r: OutputRow): string;
}

/** Options that change a row's columns: raw probabilities of calibrated questions, review columns. */
export interface RowShape {
  /** Questions whose raw probabilities are written beside the calibrated ones. */
  calibrated: ReadonlySet<string>;
  /** Review files lead each row with why it is there. */
  review: boolean;
}

const PLAIN: RowShape = { calibrated: new Set(), review: false };

/** A question's CSV columns: its answer, then each option's or level's probability. */
function questionColumns(name: string, question: Question): string[] {
  switch (question.type) {
    case "noul":
      return [`${name}.noul`];
    case "choice":
      return [`${name}.choice`, `${name}.confidence`, ...Object.keys(question.criteria).map((o) => `${name}.p.${o}`)];
    case "score":
      return [`${name}.score`, `${name}.level`, `${name}.confidence`, ...question.criteria.map((_, k) => `${name}.p.${k}`)];
    default:
      return assertNever(question);
  }
}

function assertNever(x: never): never {
  throw new TypeError(`unexpected question ${JSON.stringify(x)}`);
}

/** The most likely level's label: its text when the level is text, else its index. */
function levelLabel(a: ScoreAnswer): string {
  let best = "0";
  for (const [k, p] of Object.entries(a.probabilities)) if (p > (a.probabilities[best] ?? -1)) best = k;
  const legend = a.legend[best];
  return typeof legend === "string" ? legend : best;
}

function questionCells(question: Question, a: Answer | undefined): unknown[] {
  switch (question.type) {
    case "noul":
      return [a?.type === "noul" ? a.noul : ""];
    case "choice": {
      const c = a?.type === "choice" ? a : undefined;
      return [c?.choice ?? "", c?.confidence ?? "", ...Object.keys(question.criteria).map((o) => c?.probabilities[o] ?? "")];
    }
    case "score": {
      const s = a?.type === "score" ? a : undefined;
      return [s?.score ?? "", s ? levelLabel(s) : "", s?.confidence ?? "", ...question.criteria.map((_, k) => s?.probabilities[String(k)] ?? "")];
    }
    default:
      return assertNever(question);
  }
}

function rawColumns(name: string, question: Question): string[] {
  return question.type === "noul"
    ? [`${name}.raw.noul`]
    : questionColumns(name, question)
        .filter((c) => c.startsWith(`${name}.p.`))
        .map((c) => `${name}.raw.${c.slice(name.length + 1)}`);
}

function rawCells(question: Question, raw: number | Record<string, number> | undefined): unknown[] {
  if (question.type === "noul") return [typeof raw === "number" ? raw : ""];
  const map = typeof raw === "object" ? raw : {};
  const keys = question.type === "choice" ? Object.keys(question.criteria) : question.criteria.map((_, k) => String(k));
  return keys.map((k) => map[k] ?? "");
}

/** CSV column names for a job: id, line, model, kept fields, each question's values, usage. */
export function csvColumns(job: Job, shape: RowShape = PLAIN): string[] {
  const columns = ["id", "line", "source", "model", ...(shape.review ? ["review_reason", "audit"] : []), ...(job.keep ?? [])];
  for (const [name, question] of Object.entries(job.questions) as [string, Question][]) {
    columns.push(...questionColumns(name, question));
    if (shape.calibrated.has(name)) columns.push(...rawColumns(name, question));
  }
  columns.push("input_tokens", "output_tokens", "dedup_of");
  return columns;
}

function reviewReason(v: ReviewVerdict | undefined): string {
  if (!v) return "";
  if (v.reasons.length === 0) return v.audit ? "audit sample" : "";
  return v.reasons.map((r) => `${r.question} ${r.confidence.toFixed(3)} < ${r.threshold}`).join("; ");
}

/** CSV: flat columns; a UTF-8 BOM first when asked (Excel reads UTF-8 without one as a legacy code page). */
export function csvWriter(job: Job, shape: RowShape = PLAIN, options: { bom?: boolean } = {}): RowWriter {
  return {
    header: () => `${options.bom ? "\ufeff" : ""}${stringify([csvColumns(job, shape)])}`,
    row: ({ entry: e, answers, raw, review }) => {
      const row: unknown[] = [
        e.id,
        e.line,
        e.source,
        e.model,
        ...(shape.review ? [reviewReason(review), review?.audit ? "true" : "false"] : []),
        ...(job.keep ?? []).map((f) => cell(e.keep?.[f])),
      ];
      for (const [name, question] of Object.entries(job.questions) as [string, Question][]) {
        row.push(...questionCells(question, answers[name]));
        if (shape.calibrated.has(name)) row.push(...rawCells(question, raw?.[name]));
      }
      row.push(e.usage.input_tokens, e.usage.output_tokens, e.dedup_of ?? "");
      return stringify([row]);
    },
  };
}

function cell(value: unknown): unknown {
  return value === null || value === undefined ? "" : typeof value === "object" ? JSON.stringify(value) : value;
}

/** JSONL: one object per record, the answers as the API returns them. */
export function jsonlWriter(shape: RowShape = PLAIN): RowWriter {
  return {
    header: () => "",
    row: ({ entry: e, answers, raw, review }) => {
      const row: Record<string, unknown> = { id: e.id, line: e.line, source: e.source, model: e.model };
      if (shape.review && review) {
        row["review_reasons"] = review.reasons;
        row["audit"] = review.audit;
      }
      row["answers"] = answers;
      if (raw && Object.keys(raw).length > 0) row["raw"] = raw;
      row["usage"] = e.usage;
      if (e.keep && Object.keys(e.keep).length > 0) row["fields"] = e.keep;
      if (e.dedup_of !== undefined) row["dedup_of"] = e.dedup_of;
      if (e.label_mass) row["label_mass"] = e.label_mass;
      return `${JSON.stringify(row)}\n`;
    },
  };
}

export function writerFor(format: OutputFormat, job: Job, shape: RowShape, options: { bom?: boolean } = {}): RowWriter {
  switch (format) {
    case "csv":
      return csvWriter(job, shape, options);
    case "jsonl":
      return jsonlWriter(shape);
    default:
      return assertNever(format);
  }
}

async function write(stream: Writable, text: string): Promise<void> {
  if (!stream.write(text)) await new Promise<void>((resolve) => stream.once("drain", resolve));
}

export interface WrittenCounts {
  answered: number;
  failed: number;
  deduplicated: number;
  inputTokens: number;
  outputTokens: number;
  /** Rows written to the review file: below a threshold, and sampled for audit. */
  review: number;
  audit: number;
  /** The maps applied, when the run calibrated (batch calibration's are estimated here). */
  calibration?: CalibrationMaps;
  /** Mean label distribution per question before and after calibration: how far it moved the labels. */
  shares?: { before: Record<string, number[]>; after: Record<string, number[]> };
}

/** Growable seq -> entry-number table (0 = none). */
class LastEntry {
  private table = new Uint32Array(1024);
  set(seq: number, entry: number): void {
    if (seq >= this.table.length) {
      let n = this.table.length;
      while (n <= seq) n *= 2;
      const next = new Uint32Array(n);
      next.set(this.table);
      this.table = next;
    }
    this.table[seq] = entry;
  }
  get(seq: number): number {
    return seq < this.table.length ? (this.table[seq] as number) : 0;
  }
}

/** How the answers are shaped on the way out. */
export interface OutputPolicy {
  /** Maps from a calibration file, or "batch" to estimate each question's label prior from this run's answers. */
  calibration?: CalibrationMaps | "batch" | undefined;
  /** Review routing, and where the review rows go (same format as the answers). */
  review?: { policy: ReviewPolicy; target: OutputTarget } | undefined;
  /** Start CSV outputs with a UTF-8 byte order mark. */
  csvBom?: boolean | undefined;
}

/** Writes the answers and errors outputs (and the review file) from a journal; returns what was written. */
export async function writeOutputs(
  journalPath: string,
  job: Job,
  answers: { target: OutputTarget; format: OutputFormat },
  errors: OutputTarget,
  policy: OutputPolicy = {},
): Promise<WrittenCounts> {
  // Pass 1: the latest entry of each record. A record answered after failing earlier counts as answered.
  const lastAnswer = new LastEntry();
  const lastError = new LastEntry();
  // Kept fields journaled after a record's answer (the job's keep changed): only those records are held here.
  const rekept = new Map<number, { n: number; keep: Record<string, unknown> }>();
  let n = 0;
  for await (const entry of readJournal(journalPath)) {
    n++;
    if (entry.k === "answer") lastAnswer.set(entry.seq, n);
    else if (entry.k === "error") lastError.set(entry.seq, n);
    else if (entry.k === "keep") rekept.set(entry.seq, { n, keep: entry.keep });
  }
  let maps: CalibrationMaps | undefined;
  if (policy.calibration === "batch") {
    // Batch calibration: the mean raw answer of the records this output holds.
    const prior = new PriorEstimate(job.questions);
    n = 0;
    for await (const entry of readJournal(journalPath)) {
      n++;
      if (entry.k === "answer" && lastAnswer.get(entry.seq) === n) prior.add(entry.answers);
    }
    maps = prior.maps();
  } else maps = policy.calibration;
  const shape: RowShape = { calibrated: new Set(maps?.keys() ?? []), review: false };
  const counts: WrittenCounts = {
    answered: 0,
    failed: 0,
    deduplicated: 0,
    inputTokens: 0,
    outputTokens: 0,
    review: 0,
    audit: 0,
    ...(maps ? { calibration: maps } : {}),
  };
  const writer = writerFor(answers.format, job, shape, { bom: policy.csvBom ?? false });
  const reviewWriter = policy.review ? writerFor(answers.format, job, { ...shape, review: true }, { bom: policy.csvBom ?? false }) : undefined;
  const before = maps ? new PriorEstimate(job.questions) : undefined;
  const after = maps ? new PriorEstimate(job.questions) : undefined;
  const out = answers.target.open();
  const err = errors.open();
  const rev = policy.review?.target.open();
  try {
    await write(out.stream, writer.header());
    if (rev && reviewWriter) await write(rev.stream, reviewWriter.header());
    n = 0;
    for await (const entry of readJournal(journalPath)) {
      n++;
      if (entry.k === "answer" && lastAnswer.get(entry.seq) === n) {
        const fresh = rekept.get(entry.seq);
        if (fresh && fresh.n > n) entry.keep = fresh.keep;
        const row: OutputRow = { entry, answers: entry.answers };
        if (maps) {
          Object.assign(row, calibrateAnswers(maps, job.questions, entry.answers));
          before?.add(entry.answers);
          after?.add(row.answers);
        }
        await write(out.stream, writer.row(row));
        if (rev && reviewWriter && policy.review) {
          row.review = reviewVerdict(policy.review.policy, job.questions, row.answers, `${entry.source}:${entry.seq}:${entry.id}`);
          if (row.review.reasons.length > 0 || row.review.audit) {
            await write(rev.stream, reviewWriter.row(row));
            if (row.review.audit) counts.audit++;
            else counts.review++;
          }
        }
        counts.answered++;
        if (entry.dedup_of !== undefined) counts.deduplicated++;
        counts.inputTokens += entry.usage.input_tokens;
        counts.outputTokens += entry.usage.output_tokens;
      } else if (entry.k === "error" && lastError.get(entry.seq) === n && lastAnswer.get(entry.seq) === 0) {
        const e: ErrorEntry = entry;
        await write(err.stream, `${JSON.stringify({ line: e.line, source: e.source, id: e.id, status: e.status, type: e.type, message: e.message })}\n`);
        counts.failed++;
      }
    }
    await out.commit();
    await err.commit();
    await rev?.commit();
    if (before && after) counts.shares = { before: before.priors(), after: after.priors() };
  } catch (error) {
    await out.abort();
    await err.abort();
    await rev?.abort();
    throw error;
  }
  return counts;
}
