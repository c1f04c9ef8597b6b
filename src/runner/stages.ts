/**
 * The journal, answer and write stages of a run, and its summaries: what
 * runs once the check, the lock and the model are through (run.ts). The
 * outputs are a function of (current input, current job, journal): the
 * answer stage takes the input's records in order and journals a result for
 * each one's current request; the write stage writes exactly those records
 * from the journal. The verdict is decided at the end from facts (the input's
 * end reached, every record with a result, the outputs written and checked),
 * by `decide` in api/verdict.ts, never from counters alone.
 */
import { rmSync } from "node:fs";
import type { Logger } from "../logging/logger.js";
import { scrubbedJson } from "../logging/secrets.js";
import { noBilling } from "../api/billing.js";
import { answerRecords, noStats, type Answered, type AnswerOptions, type JournalSink } from "./answer.js";
import { writeOutputs, type OutputTarget, type WrittenCounts } from "./output/outputs.js";
import type { FileFormat } from "../records/formats.js";
import { OrderedRecords } from "./output/ordered.js";
import { runSummary, type SummaryBase } from "./output/summary.js";
import { describeDuplicates, type UsageSummary } from "../records/usage.js";
import type { RunShaping } from "./prepare.js";
import { Journal, type JournalOptions, type OpenedJournal } from "./state/journal.js";
import type { JournalIndex } from "./state/index.js";
import { afterSummaryFailure, classify, decide, type Ending, type Stage, type Verdict } from "../api/verdict.js";

/** Opens a journal: the storage seam of a run (a test puts a failing store in its place). */
export type OpenJournal = (path: string, options: JournalOptions) => Promise<Omit<OpenedJournal, "journal"> & { journal: JournalSink }>;

/** A run whose check, lock and model are through: everything the journal, answer and write stages use (the input, the evaluator, the targets). */
export interface OpenedRun extends AnswerOptions {
  jobName?: string | undefined;
  /** The journal as the user knows it (an S3 prefix for a mirrored one), for messages and the summary. */
  journalName?: string | undefined;
  answers: { target: OutputTarget; format: FileFormat };
  errors: OutputTarget;
  /** Where the usage summary JSON goes, if anywhere: written whatever the verdict. */
  usage?: OutputTarget | undefined;
  /** A second copy of the summary for a scheduler (`--summary-json`), written first, whatever the verdict. */
  summaryJson?: OutputTarget | undefined;
  /** The share of records that may fail with the run still a success. Default 0. */
  maxErrorRate?: number | undefined;
  /** The input the journal belongs to (a resolved path, an S3 location, "stdin"); a journal of another input is refused. */
  inputId?: string | undefined;
  /** Calibration, review routing and CSV options applied when the outputs are written. */
  output?: RunShaping | undefined;
  /** Remove the journal once the run is done (a stdin-to-stdout run's: nothing later resumes it). */
  dropJournalWhenDone?: boolean | undefined;
  openJournal?: OpenJournal | undefined;
}

/** How the journal, answer and write stages ended: the verdict, the summary written for it, and what was written and kept. */
export interface StagesOutcome extends Ending {
  summary: UsageSummary;
  /** The verdict, under its older name. */
  status: Verdict;
  /** Whether the outputs were written (they are not for a run that ended early: they would look complete). */
  written: boolean;
  /** Whether the journal holds finished records (answered or failed), this run's or earlier ones'. */
  kept: boolean;
  /** Why the run ended before writing its outputs, when it did. */
  aborted?: string;
}

/** The journal, answer and write stages: every record answered once into the journal, then the outputs from it, then the summaries. */
export async function runJob(options: OpenedRun): Promise<StagesOutcome> {
  const identity = options.evaluator.identity(options.job.model);
  // What decides an answer: the model's identity and how the evaluator renders these questions (the request carries the rest).
  const fingerprint = options.evaluator.promptFingerprint?.(options.job.model, options.job.questions);
  // Without one (a remote endpoint: its identity covers its rendering) the hash is what it was: journals resume across releases.
  const requestIdentity = fingerprint ? `${identity}\n${fingerprint}` : identity;
  let opened: Awaited<ReturnType<OpenJournal>>;
  try {
    opened = await (options.openJournal ?? Journal.open)(options.journalPath, {
      input: options.inputId,
      byId: options.job.id !== undefined,
      onUnreadable: (message) => options.logger.warn({ journal: options.journalPath }, message),
    });
  } catch (error) {
    await options.limiter.stop();
    const ending = stageEnding(error, "journal", false, options.logger);
    // Nothing paid: the output's usage summary stays the last good run's (run.ts, endEarly).
    return finishRun({ ...options, usage: undefined }, summaryBase(options, identity, [], undefined, undefined), { ending, written: undefined, kept: false });
  }
  const answered = await answerRecords(options, opened.journal, opened.index, requestIdentity);
  let closing: Ending | undefined;
  try {
    opened.journal.close();
  } catch (error) {
    closing = stageEnding(error, "journal", true, options.logger);
  }
  await options.limiter.stop();
  const early = closing ?? answered.ended;
  const wrote = early === undefined && complete(answered) ? await writeStage(options, opened.index, answered) : undefined;
  const counts = wrote && !("verdict" in wrote) ? wrote : undefined;
  const ending = decide({
    ended: early ?? (wrote && "verdict" in wrote ? wrote : undefined),
    inputEnded: answered.inputEnded,
    records: answered.order.length,
    otherShards: answered.stats.otherShards,
    unfinished: answered.unfinished,
    written: counts,
    maxErrorRate: options.maxErrorRate ?? 0,
    sameReason: answered.sameReason,
  });
  const base = summaryBase(options, identity, opened.runs, answered, opened.index);
  // A run that paid, journaled and wrote nothing (the endpoint down or refusing at its first contact) leaves the output's usage
  // summary as the last good run made it, as a run ended before this stage does (run.ts, endEarly).
  const idle = counts === undefined && answered.sent.requests === 0 && answered.stats.answered + answered.stats.failed === 0;
  const usage = idle && early?.verdict !== "stopped" ? undefined : options.usage;
  // Keys are made for every record read; only a journaled answer or error is work kept (a refused key keeps none).
  const dropped = ending.verdict === "done" && options.dropJournalWhenDone === true && dropJournal(options.journalPath, options.logger);
  return finishRun({ ...options, usage }, base, { ending, written: counts, kept: opened.index.holdsResults() && !dropped, dropped });
}

/** Whether the answer stage left every record of the whole input with a result: only then are outputs written. */
function complete(answered: Answered): boolean {
  return answered.inputEnded && answered.unfinished === 0;
}

/** The write stage: the current input's records from the journal, every output checked; a stop before they are final writes none. */
async function writeStage(options: OpenedRun, index: JournalIndex, answered: Answered): Promise<WrittenCounts | Ending> {
  const records = new OrderedRecords(options.journalPath, index, answered.order, options.job.id !== undefined);
  try {
    // The fence first: a run whose lock was taken over writes nothing.
    options.fence?.();
    const counts = await writeOutputs(records, options.job, { answers: options.answers, errors: options.errors }, options.output, options.stop);
    // Repeated ids are kept (each row is its own record) but said out loud: a join on id downstream would double them.
    if (counts.duplicateIds) options.logger.warn({ duplicate_ids: counts.duplicateIds }, describeDuplicates(counts.duplicateIds));
    if (counts.formerReviewRemoved)
      options.logger.warn(
        { review: counts.formerReviewRemoved },
        `removed ${counts.formerReviewRemoved}: an earlier run's review rows, for answers these replace; this run routes no rows to review (no --review-below, review_below or audit sample)`,
      );
    return counts;
  } catch (error) {
    if (options.stop?.aborted)
      return { verdict: "stopped", reason: "stopped while the outputs were written: none was made final; the journal keeps every record" };
    return stageEnding(error, "write", true, options.logger);
  }
}

/** Removes a done run's journal that nothing will resume; false (and a warning) when it cannot be removed. */
function dropJournal(path: string, logger: Logger): boolean {
  try {
    rmSync(path, { force: true });
    return true;
  } catch (error) {
    logger.warn({ journal: path }, `could not remove the journal ${path} of a done run: ${classify(error, "release").reason}`);
    return false;
  }
}

/** An error that ended a stage, as its ending (a bug's stack to the debug log). */
function stageEnding(error: unknown, stage: Stage, paid: boolean, logger: Logger): Ending {
  const ending = classify(error, stage, { paid });
  if (ending.verdict === "internal-error") logger.debug({ err: error }, `the ${stage} stage failed unexpectedly`);
  return ending;
}

/** The summaries of a run whose verdict is decided, and its result. */
async function finishRun(
  options: OpenedRun,
  base: SummaryBase,
  end: { ending: Ending; written: WrittenCounts | undefined; kept: boolean; dropped?: boolean },
): Promise<StagesOutcome> {
  const { written } = end;
  options.onEnding?.(end.ending);
  const shaping = options.output;
  const outputs = written && {
    written,
    calibrationSource: shaping?.calibrationSource ?? (shaping?.calibration === "batch" ? "batch" : "file"),
    reviewFile: shaping?.review ? (shaping.reviewFile ?? shaping.review.target.describe) : undefined,
  };
  const summarise = (ending: Ending) =>
    Object.assign(runSummary(base, outputs, ending.verdict), {
      verdict: ending.verdict,
      reason: ending.reason,
      // A journal removed once done (stdin to stdout) is named nowhere.
      ...(end.dropped ? {} : { journal: options.journalName ?? options.journalPath }),
    });
  if (written && Object.keys(written.models).length > 1) options.logger.warn({ answered_by: written.models }, "the rows were answered by more than one model");
  const { ending, summary } = await writeSummaries([options.summaryJson, options.usage], end.ending, summarise, options.logger);
  return {
    ...ending,
    summary,
    status: ending.verdict,
    written: written !== undefined,
    kept: end.kept,
    ...(written ? {} : { aborted: ending.reason }),
  };
}

/**
 * Writes the summaries (`--summary-json` first: the scheduler's copy is on a
 * local disk, the usage summary may be on a failing store). One that cannot
 * be written turns a `done` or `failures` run into storage-unavailable (the
 * others written again to say so); any other verdict keeps its code.
 */
export async function writeSummaries(
  targets: readonly (OutputTarget | undefined)[],
  decided: Ending,
  summarise: (ending: Ending) => UsageSummary,
  logger: Logger,
): Promise<{ ending: Ending; summary: UsageSummary }> {
  let ending = decided;
  let summary = summarise(ending);
  const failed: string[] = [];
  const written: OutputTarget[] = [];
  for (const target of targets) {
    if (!target) continue;
    const problem = await writeSummary(target, summary);
    if (problem === undefined) written.push(target);
    else failed.push(problem);
  }
  if (failed.length === 0) return { ending, summary };
  for (const problem of failed) logger.warn({}, problem);
  const changed = afterSummaryFailure(ending, failed.join("; "));
  if (changed === ending) return { ending, summary };
  ending = changed;
  summary = summarise(ending);
  for (const target of written) await writeSummary(target, summary);
  return { ending, summary };
}

/** Writes one summary; returns what went wrong, if anything did. */
async function writeSummary(target: OutputTarget, summary: UsageSummary): Promise<string | undefined> {
  let sink: ReturnType<OutputTarget["open"]> | undefined;
  try {
    sink = target.open();
    // Scrubbed whole: its reason may quote an endpoint, and it goes to a scheduler's XCom, S3, anyone's screen.
    await sink.write(`${scrubbedJson(summary, 2)}\n`);
    await sink.commit();
    return undefined;
  } catch (error) {
    await sink?.abort().catch(() => undefined);
    return `could not write the summary ${target.describe}: ${classify(error, "summary", { paid: true }).reason}`;
  }
}

/** How this run picked part of its input (`--limit`, `--sample`, `--shard`), when it did. */
function selectionOf(options: OpenedRun): string | undefined {
  const parts = [options.source.selection, options.shard && options.shard.count > 1 ? `--shard ${options.shard.index}/${options.shard.count}` : undefined];
  return parts.filter((p) => p !== undefined).join(" ") || undefined;
}

function summaryBase(
  options: OpenedRun,
  identity: string,
  runs: SummaryBase["runs"],
  answered: Answered | undefined,
  index: JournalIndex | undefined,
): SummaryBase {
  const stats = answered?.stats ?? noStats();
  const sent = answered?.sent ?? { requests: 0, retries: 0, rateLimited: 0, overloaded: 0, wastedInput: 0 };
  const started = answered?.started ?? Date.now();
  return {
    job: options.job,
    jobName: options.jobName,
    identity,
    model: options.evaluator.versionedId?.(options.job.model),
    price: options.pricePerMillion,
    input: options.source.name,
    output: options.answers.target.describe,
    runs,
    setAside: answered?.inputEnded ? index?.setAside() : undefined,
    selection: selectionOf(options),
    thisRun: {
      started,
      seconds: answered ? (performance.now() - answered.startedMonotonic) / 1000 : 0,
      stats,
      sent,
      billed: answered?.billed ?? noBilling(),
      pace: options.limiter.paceReport(),
    },
  };
}
