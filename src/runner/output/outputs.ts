/**
 * Outputs, written from the journal once a run's records are done: answers
 * as JSONL, CSV or Parquet, failed records as JSONL, both to a path, stdout or S3.
 * Each record appears once (its latest entry wins), in input order whatever
 * the order records finished in (the same input gives the same file), and files are written
 * under a temporary name and renamed, so a crash never leaves an output that
 * looks complete.
 */
import { createWriteStream, renameSync, rmSync } from "node:fs";
import type { Writable } from "node:stream";
import { stringify } from "csv-stringify/sync";
import { assertNever, flatColumns, KeptKindsOf, type FlatColumn, type KeptKinds, type OutputRow, type RowShape } from "./columns.js";
import type { Job } from "../../records/job.js";
import type { ErrorEntry } from "../state/journal.js";
import { DuplicateIdWatch } from "./duplicate-ids.js";
import { OrderedJournal } from "./ordered.js";
import { calibrateAnswers, type CalibrationMaps } from "../../calibration/apply.js";
import type { Answer } from "../../api/schema.js";
import { ParquetEncoder } from "./parquet.js";
import type { DuplicateIds } from "../../records/usage.js";
import { auditKey, reviewVerdict, type ReviewPolicy } from "./review.js";
import { PriorEstimate, refuseFlattening } from "../../calibration/label-free.js";

/** Formats answers can be written in (inputs have their own list in sources.ts). */
export type OutputFormat = "jsonl" | "csv" | "parquet";

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

/**
 * One encoder per output format: what a row adds to the file (maybe nothing
 * yet: Parquet buffers a row group) and what ends it (a header when no row
 * came, buffered rows, a footer). Encoders never touch a stream.
 */
export interface RowEncoder {
  row(r: OutputRow): string | Uint8Array;
  end(): string | Uint8Array;
}

/** An encoder bound to its stream: rows in, then `end`; each waits while the stream is full. */
export interface RowWriter {
  row(r: OutputRow): Promise<void>;
  end(): Promise<void>;
}

async function write(stream: Writable, chunk: string | Uint8Array): Promise<void> {
  if (chunk.length > 0 && !stream.write(chunk)) await new Promise<void>((resolve) => stream.once("drain", resolve));
}

export function streamWriter(stream: Writable, encoder: RowEncoder): RowWriter {
  return { row: (r) => write(stream, encoder.row(r)), end: () => write(stream, encoder.end()) };
}

/** A text format: a header (maybe empty) before the first row (or alone, for no rows), then one piece of text per row. */
function textEncoder(header: string, line: (r: OutputRow) => string): RowEncoder {
  let started = false;
  const head = () => {
    if (started) return "";
    started = true;
    return header;
  };
  return { row: (r) => head() + line(r), end: head };
}

/** A CSV cell: empty for nothing, JSON for objects and lists. */
function cell(value: unknown): unknown {
  return value === null || value === undefined ? "" : typeof value === "object" ? JSON.stringify(value) : value;
}

/** CSV: the flat columns as text; a UTF-8 BOM first when asked (Excel reads UTF-8 without one as a legacy code page). */
function csvEncoder(columns: readonly FlatColumn[], bom: boolean): RowEncoder {
  // Booleans as true/false: csv-stringify's default writes 1 and an empty cell, which reads as "no value".
  const options = { cast: { boolean: (b: boolean) => String(b) } };
  return textEncoder(`${bom ? "\ufeff" : ""}${stringify([columns.map((c) => c.name)])}`, (r) => stringify([columns.map((c) => cell(c.value(r)))], options));
}

/** JSONL: one object per record, the answers as the API returns them. */
function jsonlEncoder(shape: RowShape): RowEncoder {
  return textEncoder("", ({ entry: e, answers, raw, review }) => {
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
  });
}

/** What an encoder needs: the job, the row's shape, the kinds of kept fields (typed formats), the CSV BOM. */
export interface WriterSpec {
  job: Job;
  shape: RowShape;
  kept?: KeptKinds | undefined;
  bom?: boolean | undefined;
}

export function encoderFor(format: OutputFormat, spec: WriterSpec): RowEncoder {
  const columns = () => flatColumns(spec.job.questions, spec.job.keep ?? [], spec.shape, spec.kept);
  switch (format) {
    case "csv":
      return csvEncoder(columns(), spec.bom ?? false);
    case "jsonl":
      return jsonlEncoder(spec.shape);
    case "parquet":
      return new ParquetEncoder(columns());
    default:
      return assertNever(format);
  }
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
  /** The distinct models the written rows name (at most 8), in input order. */
  models: string[];
  /** Ids that more than one row has (answered or failed), when any does. */
  duplicateIds?: DuplicateIds | undefined;
  /** Mean label distribution per question before and after calibration: how far it moved the labels. */
  shares?: { before: Record<string, number[]>; after: Record<string, number[]> };
}

/** How the answers are shaped on the way out. */
export interface OutputPolicy {
  /** Maps from a calibration file, or "batch" to estimate each question's label prior from this run's answers. */
  calibration?: CalibrationMaps | "batch" | undefined;
  /** Review routing, and where the review rows go (same format as the answers). */
  review?: { policy: ReviewPolicy; target: OutputTarget } | undefined;
  /** Apply batch calibration even where it would flatten a skewed question (BATCH_MAX_MOVE). */
  forceBatch?: boolean | undefined;
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
  // Kept fields journaled after a record's answer (the job's keep changed): only those records are held here.
  const rekept = new Map<number, { offset: number; keep: Record<string, unknown> }>();
  // The kinds of the kept fields, for Parquet's column types: from every value journaled (a superset of those written).
  const kept = answers.format === "parquet" ? new KeptKindsOf(job.keep ?? []) : undefined;
  // Pass 1: where each record's latest entry lies. Later passes read in input order, so the file does not depend on completion order.
  const journal = await OrderedJournal.index(journalPath, (entry, offset) => {
    if (entry.k === "answer") kept?.add(entry.keep);
    else if (entry.k === "keep") {
      rekept.set(entry.seq, { offset, keep: entry.keep });
      kept?.add(entry.keep);
    }
  });
  let maps: CalibrationMaps | undefined;
  if (policy.calibration === "batch") {
    // Batch calibration: the mean raw answer of the records this output holds (summed in input order: the same bits every run).
    const prior = new PriorEstimate(job.questions);
    for (const { entry } of journal.records()) if (entry.k === "answer") prior.add(entry.answers);
    maps = prior.maps();
    if (!policy.forceBatch) await refuseFlattening(job.questions, maps, prior, latestAnswers(journal));
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
    models: [],
    ...(maps ? { calibration: maps } : {}),
  };
  const before = maps ? new PriorEstimate(job.questions) : undefined;
  const after = maps ? new PriorEstimate(job.questions) : undefined;
  const out = answers.target.open();
  const err = errors.open();
  const rev = policy.review?.target.open();
  const duplicates = new DuplicateIdWatch();
  const spec: WriterSpec = { job, shape, kept: kept?.kinds(), bom: policy.csvBom };
  const writer = streamWriter(out.stream, encoderFor(answers.format, spec));
  const reviewWriter = rev ? streamWriter(rev.stream, encoderFor(answers.format, { ...spec, shape: { ...shape, review: true } })) : undefined;
  try {
    for (const { entry, offset } of journal.records()) {
      if (duplicates.see(entry.id, entry.line)) counts.duplicateIds = duplicates.result();
      if (entry.k === "answer") {
        const fresh = rekept.get(entry.seq);
        if (fresh && fresh.offset > offset) entry.keep = fresh.keep;
        // Journals before 0.x named the original by its seq: name it by its id, as new ones do.
        if (typeof entry.dedup_of === "number") entry.dedup_of = journal.idOf(entry.dedup_of) ?? String(entry.dedup_of);
        const row: OutputRow = { entry, answers: entry.answers };
        if (maps) {
          Object.assign(row, calibrateAnswers(maps, job.questions, entry.answers));
          before?.add(entry.answers);
          after?.add(row.answers);
        }
        await writer.row(row);
        if (reviewWriter && policy.review) {
          row.review = reviewVerdict(policy.review.policy, job.questions, row.answers, auditKey(job, entry));
          if (row.review.reasons.length > 0 || row.review.audit) {
            await reviewWriter.row(row);
            if (row.review.audit) counts.audit++;
            else counts.review++;
          }
        }
        counts.answered++;
        if (counts.models.length < 8 && !counts.models.includes(entry.model)) counts.models.push(entry.model);
        if (entry.dedup_of !== undefined) counts.deduplicated++;
        counts.inputTokens += entry.usage.input_tokens;
        counts.outputTokens += entry.usage.output_tokens;
      } else {
        const e: ErrorEntry = entry;
        await write(err.stream, `${JSON.stringify({ line: e.line, source: e.source, id: e.id, status: e.status, type: e.type, message: e.message })}\n`);
        counts.failed++;
      }
    }
    await writer.end();
    await reviewWriter?.end();
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

/** The answers of each record's latest answer entry, in input order. */
async function* latestAnswers(journal: OrderedJournal): AsyncGenerator<Record<string, Answer>> {
  for (const { entry } of journal.records()) if (entry.k === "answer") yield entry.answers;
}
