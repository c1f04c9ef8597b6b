/**
 * Outputs, written once a run's records are done: answers in any registered
 * format (src/records/formats.ts), failed records as JSONL, both to a path,
 * stdout or S3. They hold exactly the current input's records (ordered.ts),
 * in input order whatever the order records finished in (the same input
 * gives the same file), and every write is checked (targets.ts): a crash, a
 * full disk or a stop never leaves an output that looks complete.
 */
import { scrub } from "../../logging/secrets.js";
import { existsSync, rmSync } from "node:fs";
import { flatColumns, KeptKindsOf, type KeptKinds, type OutputRow, type RowShape } from "./columns.js";
import type { Job } from "../../records/job.js";
import { DuplicateIdWatch } from "./duplicate-ids.js";
import type { OrderedRecords, RecordEntry } from "./ordered.js";
import type { OutputTarget, Sink } from "./targets.js";
import { calibrateAnswers, type CalibrationMaps } from "../../calibration/apply.js";
import type { Answer } from "../../api/schema.js";
import type { FormatSettings, RowEncoder, Table } from "../../records/format.js";
import { encoderOf, type FileFormat } from "../../records/formats.js";
import type { DuplicateIds } from "../../records/usage.js";
import { auditKey, reviewVerdict, type ReviewPolicy } from "./review.js";
import { PriorEstimate, refuseFlattening } from "../../calibration/label-free.js";

export { localTarget, type OutputTarget, type Sink } from "./targets.js";

/** An encoder bound to its sink: rows in, then `end`; each waits for the sink, and its errors reach the caller. */
export interface RowWriter {
  row(r: OutputRow): Promise<void>;
  end(): Promise<void>;
}

export function sinkWriter(sink: Pick<Sink, "write">, encoder: RowEncoder<OutputRow>): RowWriter {
  return { row: (r) => sink.write(encoder.row(r)), end: () => sink.write(encoder.end()) };
}

/** A row as a format of records (JSONL) holds it: the answers as the API returns them. */
function answerRecord(shape: RowShape): (r: OutputRow) => Record<string, unknown> {
  return ({ entry: e, answers, raw, review }) => {
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
    return row;
  };
}

/** What an encoder needs: the job, the row's shape, the kinds of kept fields (typed formats), the format options given (`--csv-bom`). */
export interface WriterSpec {
  job: Job;
  shape: RowShape;
  kept?: KeptKinds | undefined;
  formats?: FormatSettings | undefined;
}

/** The answers of a job as a table: its flat columns and its nested records, each format taking what it writes. */
export function answersTable(spec: WriterSpec): Table<OutputRow> {
  return { columns: flatColumns(spec.job.questions, spec.job.keep ?? [], spec.shape, spec.kept), record: answerRecord(spec.shape) };
}

/** The encoder of answers rows in a file's format. */
export function encoderFor(file: FileFormat, spec: WriterSpec): RowEncoder<OutputRow> {
  return encoderOf(file, answersTable(spec), spec.formats);
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
  /** Each model that answered a written row, with its count of rows, in the order they first appear. */
  models: Record<string, number>;
  /** Ids that more than one row has (answered or failed), when any does. */
  duplicateIds?: DuplicateIds | undefined;
  /** Mean label distribution per question before and after calibration: how far it moved the labels. */
  shares?: { before: Record<string, number[]>; after: Record<string, number[]> };
  /** The review file an earlier run of this output left, removed once these outputs were final (this run routes no rows). */
  formerReviewRemoved?: string | undefined;
}

/** How the answers are shaped on the way out. */
export interface OutputPolicy {
  /** Maps from a calibration file, or "batch" to estimate each question's label prior from this run's answers. */
  calibration?: CalibrationMaps | "batch" | undefined;
  /** Review routing, and where the review rows go (same format as the answers). */
  review?: { policy: ReviewPolicy; target: OutputTarget } | undefined;
  /** Apply batch calibration even where it would flatten a skewed question (BATCH_MAX_MOVE). */
  forceBatch?: boolean | undefined;
  /** The format options given for writing (`--csv-bom`, `--csv-escape-formulas`), by flag. */
  formats?: FormatSettings | undefined;
  /**
   * Where this output's review file is, when this run routes no rows to
   * review (a local path): one an earlier run left there is removed once the
   * outputs are final, as it belongs to answers that are no longer there.
   */
  formerReview?: string | undefined;
}

/** Where the outputs go: the answers (in their format) and the failed records. */
export interface OutputPlaces {
  answers: { target: OutputTarget; format: FileFormat };
  errors: OutputTarget;
}

/** The outputs being written: a sink per output, its writer, and the counts so far. */
interface Writing {
  answers: Sink;
  errors: Sink;
  review: Sink | undefined;
  rows: RowWriter;
  reviewRows: RowWriter | undefined;
  counts: WrittenCounts;
  duplicates: DuplicateIdWatch;
  before: PriorEstimate | undefined;
  after: PriorEstimate | undefined;
}

/**
 * Writes the answers and errors outputs (and the review file) for the
 * current input's records, in input order; returns what was written. Every
 * output is complete and checked before any is made final; a stop before
 * that (`stop`) or any failed write discards them all.
 */
export async function writeOutputs(
  records: OrderedRecords,
  job: Job,
  places: OutputPlaces,
  policy: OutputPolicy = {},
  stop?: AbortSignal,
): Promise<WrittenCounts> {
  const kept = places.answers.format.format.typed && (job.keep ?? []).length > 0 ? keptKinds(records, job) : undefined;
  const maps = await calibrationMaps(records, job, policy);
  const shape: RowShape = { calibrated: new Set(maps?.keys() ?? []), review: false };
  const writing = openOutputs(places, policy, { job, shape, kept, formats: policy.formats }, maps);
  try {
    for (const entry of records.rows()) {
      stop?.throwIfAborted();
      await writeRow(writing, entry, job, maps, policy);
    }
    await writing.rows.end();
    await writing.reviewRows?.end();
    // No output is made final after a stop: an upload under way is abandoned, the ones after it not begun.
    for (const sink of [writing.answers, writing.errors, writing.review]) {
      stop?.throwIfAborted();
      await sink?.commit(stop);
    }
  } catch (error) {
    await Promise.allSettled([writing.answers.abort(), writing.errors.abort(), writing.review?.abort()]);
    throw error;
  }
  if (writing.before && writing.after) writing.counts.shares = { before: writing.before.priors(), after: writing.after.priors() };
  // An earlier run's review rows beside answers that replaced theirs would send people rows of another labelling.
  if (!policy.review && policy.formerReview !== undefined && existsSync(policy.formerReview)) {
    rmSync(policy.formerReview, { force: true });
    writing.counts.formerReviewRemoved = policy.formerReview;
  }
  return writing.counts;
}

/** The kinds of the kept fields, for a typed format's columns: from every row the output holds. */
function keptKinds(records: OrderedRecords, job: Job): KeptKinds {
  const kinds = new KeptKindsOf(job.keep ?? []);
  for (const entry of records.rows()) if (entry.k === "answer") kinds.add(entry.keep);
  return kinds.kinds();
}

/** The calibration applied on the way out: a file's maps, or batch calibration's estimated from the rows (in input order: the same bits every run). */
async function calibrationMaps(records: OrderedRecords, job: Job, policy: OutputPolicy): Promise<CalibrationMaps | undefined> {
  if (policy.calibration !== "batch") return policy.calibration;
  const prior = new PriorEstimate(job.questions);
  for (const entry of records.rows()) if (entry.k === "answer") prior.add(entry.answers);
  const maps = prior.maps();
  if (!policy.forceBatch) await refuseFlattening(job.questions, maps, prior, latestAnswers(records));
  return maps;
}

function openOutputs(places: OutputPlaces, policy: OutputPolicy, spec: WriterSpec, maps: CalibrationMaps | undefined): Writing {
  const opened: Sink[] = [];
  const open = (target: OutputTarget) => {
    const sink = target.open();
    opened.push(sink);
    return sink;
  };
  try {
    const answers = open(places.answers.target);
    const errors = open(places.errors);
    const review = policy.review ? open(policy.review.target) : undefined;
    const reviewSpec = { ...spec, shape: { ...spec.shape, review: true } };
    return {
      answers,
      errors,
      review,
      rows: sinkWriter(answers, encoderFor(places.answers.format, spec)),
      reviewRows: review ? sinkWriter(review, encoderFor(places.answers.format, reviewSpec)) : undefined,
      counts: {
        answered: 0,
        failed: 0,
        deduplicated: 0,
        inputTokens: 0,
        outputTokens: 0,
        review: 0,
        audit: 0,
        models: {},
        ...(maps ? { calibration: maps } : {}),
      },
      duplicates: new DuplicateIdWatch(),
      before: maps ? new PriorEstimate(spec.job.questions) : undefined,
      after: maps ? new PriorEstimate(spec.job.questions) : undefined,
    };
  } catch (error) {
    // One output could not be opened: the others opened before it are discarded.
    for (const sink of opened) void sink.abort().catch(() => undefined);
    throw error;
  }
}

/** One record's row: an answer to the answers (and the review file when it is routed there), an error to the errors output. */
async function writeRow(writing: Writing, entry: RecordEntry, job: Job, maps: CalibrationMaps | undefined, policy: OutputPolicy): Promise<void> {
  const { counts } = writing;
  if (writing.duplicates.see(entry.id, entry.line, entry.source)) counts.duplicateIds = writing.duplicates.result();
  if (entry.k === "error") {
    await writing.errors.write(
      // The message scrubbed again: a journal written by an earlier release may hold what an endpoint echoed.
      `${JSON.stringify({ line: entry.line, source: entry.source, id: entry.id, status: entry.status, type: entry.type, message: scrub(entry.message) })}\n`,
    );
    counts.failed++;
    return;
  }
  const row: OutputRow = { entry, answers: entry.answers };
  if (maps) {
    Object.assign(row, calibrateAnswers(maps, job.questions, entry.answers));
    writing.before?.add(entry.answers);
    writing.after?.add(row.answers);
  }
  await writing.rows.row(row);
  if (writing.reviewRows && policy.review) {
    row.review = reviewVerdict(policy.review.policy, job.questions, row.answers, auditKey(job, entry));
    if (row.review.reasons.length > 0 || row.review.audit) {
      await writing.reviewRows.row(row);
      if (row.review.audit) counts.audit++;
      else counts.review++;
    }
  }
  counts.answered++;
  counts.models[entry.model] = (counts.models[entry.model] ?? 0) + 1;
  if (entry.dedup_of !== undefined) counts.deduplicated++;
  counts.inputTokens += entry.usage.input_tokens;
  counts.outputTokens += entry.usage.output_tokens;
}

/** The answers of each record's answer, in input order. */
async function* latestAnswers(records: OrderedRecords): AsyncGenerator<Record<string, Answer>> {
  for (const entry of records.rows()) if (entry.k === "answer") yield entry.answers;
}
