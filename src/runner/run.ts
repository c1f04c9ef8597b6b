/**
 * A run's lifecycle, its stages in order: check (check.ts: input, places,
 * endpoint), lock, check the model, journal, answer (answer.ts), write
 * (outputs and summaries), release. Each stage ends in a verdict
 * (verdict.ts); no exception crosses a stage, and the summaries are written
 * whatever the verdict.
 */
import type { Evaluator } from "../evaluator/evaluator.js";
import type { Logger } from "../logging/logger.js";
import { answerRecords, type Answered, type AnswerOptions, type JournalSink } from "./answer.js";
import { checkFailure, checkFirstRecord, checkPlaces, type StageFailure } from "./check.js";
import type { Shard } from "./input/requests.js";
import type { Source } from "../records/source.js";
import { writeOutputs, type OutputFormat, type OutputTarget } from "./output/outputs.js";
import { runSummary, statusOf, type SummaryBase } from "./output/summary.js";
import { emptySummary, finish, type UsageSummary, describeDuplicates } from "../records/usage.js";
import {
  openSource,
  outputPolicy,
  openModelFor,
  readJob,
  runPaths,
  targetOf,
  type JobSettings,
  type OpenModel,
  type RunPaths,
  type RunPlaces,
  type RunShaping,
  type ShapingSettings,
} from "./prepare.js";
import { RunLimiter } from "./send/limiter.js";
import { Journal, type DoneIndex, type RunEntry } from "./state/journal.js";
import { acquireLock, LockedError, type Lock } from "./state/lock.js";
import { S3Journal } from "./state/s3-journal.js";
import { acquireS3Lock } from "./state/s3-lock.js";
import { endStorageRetries, withStorageStop } from "../records/s3.js";
import { isStorageFailure, LockLostError, type Verdict } from "../api/verdict.js";
import type { Job } from "../records/job.js";
import { parseShard } from "./input/requests.js";
import { existsSync } from "node:fs";
import { Writable } from "node:stream";

export { RUN_DEFAULTS, SPEND_INTERVAL_MS, type RunProgress } from "./answer.js";

/** Opens a journal: the storage seam of a run (a test puts a failing store in its place). */
export type OpenJournal = (path: string, input?: string, keep?: readonly string[]) => Promise<{ journal: JournalSink; done: DoneIndex; runs: RunEntry[] }>;

export interface RunOptions extends AnswerOptions {
  jobName?: string | undefined;
  /** The journal as the user knows it (an S3 prefix for a mirrored one), for messages and the summary. */
  journalName?: string | undefined;
  answers: { target: OutputTarget; format: OutputFormat };
  errors: OutputTarget;
  /** Where the usage summary JSON goes, if anywhere: written whatever the verdict. */
  usage?: OutputTarget | undefined;
  /** A second copy of the summary for a scheduler (`--summary-json`), written whatever the verdict. */
  summaryJson?: OutputTarget | undefined;
  /** The share of records that may fail with the run still a success. Default 0. */
  maxErrorRate?: number | undefined;
  /** The input the journal belongs to (a resolved path, an S3 location, "stdin"); a journal of another input is refused. */
  inputId?: string | undefined;
  /** Calibration, review routing and CSV options applied when the outputs are written. */
  output?: RunShaping | undefined;
  openJournal?: OpenJournal | undefined;
}

export interface RunResult {
  summary: UsageSummary;
  verdict: Verdict;
  /** The verdict, under its older name. */
  status: Verdict;
  reason: string;
  /** Whether the outputs were written (they are not for a run that stopped early: they would look complete). */
  written: boolean;
  /** Why the run stopped before the end, when it did. */
  aborted?: string;
}

/** The journal, answer and write stages: every record answered once into the journal, then the outputs from it. */
export async function runJob(options: RunOptions): Promise<RunResult> {
  const identity = options.evaluator.identity(options.job.model);
  const base = summaryBase(options, identity, [], undefined);
  let opened: Awaited<ReturnType<OpenJournal>>;
  try {
    opened = await (options.openJournal ?? Journal.open)(options.journalPath, options.inputId, options.job.keep ?? []);
  } catch (error) {
    await options.limiter.stop();
    return finishRun(options, base, undefined, stageFailure(error, "journal"));
  }
  const answered = await answerRecords(options, opened.journal, opened.done, identity);
  let end: StageFailure | undefined = answered.verdict ? { verdict: answered.verdict, reason: answered.reason ?? "" } : undefined;
  try {
    opened.journal.close();
  } catch (error) {
    end ??= stageFailure(error, "journal");
  }
  await options.limiter.stop();
  return finishRun(options, summaryBase(options, identity, opened.runs, answered), answered, end);
}

/** The write stage: the outputs from the journal (unless the run ended early: they would look complete), then the summaries. */
async function finishRun(options: RunOptions, base: SummaryBase, answered: Answered | undefined, early: StageFailure | undefined): Promise<RunResult> {
  let verdict: Verdict;
  let reason: string;
  let summary: UsageSummary;
  let written = false;
  if (early || !answered) {
    ({ verdict, reason } = early ?? { verdict: "internal-error", reason: "the run ended without answering" });
    summary = runSummary(base, undefined, verdict);
  } else {
    try {
      const counts = await writeOutputs(options.journalPath, options.job, options.answers, options.errors, options.output);
      // Repeated ids are kept (each row is its own record) but said out loud: a join on id downstream would double them.
      if (counts.duplicateIds) options.logger.warn({ duplicate_ids: counts.duplicateIds }, describeDuplicates(counts.duplicateIds));
      verdict = statusOf(answered.stats.read, counts, options.maxErrorRate ?? 0);
      reason = reasonOf(verdict, counts.failed, counts.answered + counts.failed, answered.sameReason);
      const shaping = options.output;
      const calibrationSource = shaping?.calibrationSource ?? (shaping?.calibration === "batch" ? "batch" : "file");
      const reviewFile = shaping?.review ? (shaping.reviewFile ?? shaping.review.target.describe) : undefined;
      summary = runSummary(base, { written: counts, calibrationSource, reviewFile }, verdict);
      written = true;
    } catch (error) {
      ({ verdict, reason } = stageFailure(error, "write"));
      if (verdict === "internal-error") options.logger.debug({ err: error }, "writing the outputs failed");
      summary = runSummary(base, undefined, verdict);
    }
  }
  Object.assign(summary, { verdict, reason, journal: options.journalName ?? options.journalPath });
  endStorageRetries();
  await writeSummaries([options.usage, options.summaryJson], summary, options.logger);
  return { summary, verdict, status: verdict, reason, written, ...(written ? {} : { aborted: reason }) };
}

function reasonOf(verdict: Verdict, failed: number, finished: number, sameReason: string | undefined): string {
  if (verdict === "no-input") return "the input holds no records: check that it is the file you meant";
  if (verdict === "all-failed") return sameReason ?? `all ${failed} records failed: see the errors file`;
  if (verdict === "failures") return `${failed} of ${finished} records failed, more than --max-error-rate allows`;
  return "";
}

function summaryBase(options: RunOptions, identity: string, runs: readonly RunEntry[], answered: Answered | undefined): SummaryBase {
  const stats = answered?.stats ?? { read: 0, answered: 0, failed: 0, resumed: 0, otherShards: 0, inputTokens: 0 };
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
    thisRun: { started, seconds: (Date.now() - started) / 1000, stats, sent, pace: options.limiter.paceReport() },
  };
}

/** The verdict of an error that ended a stage after the check: a store failing is resumable; anything unforeseen is a bug. */
function stageFailure(error: unknown, stage: "journal" | "write" | "lock"): StageFailure {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof LockedError) return { verdict: "locked", reason: message };
  if (error instanceof LockLostError) return { verdict: "lock-lost", reason: message };
  if (isStorageFailure(error)) return { verdict: "storage-unavailable", reason: `${stage}: ${checkFailure(error).reason}` };
  return checkFailure(error);
}

/** Writes the usage summary and `--summary-json`; a store that refuses them is logged, never allowed to hide the verdict. */
async function writeSummaries(targets: readonly (OutputTarget | undefined)[], summary: UsageSummary, logger: Logger): Promise<void> {
  for (const target of targets) {
    if (!target) continue;
    try {
      const out = target.open();
      out.stream.write(`${JSON.stringify(summary, null, 2)}\n`);
      await out.commit();
    } catch (error) {
      // One line for the person reading the log; the stack is for a bug hunt, at debug level.
      logger.warn({ summary: target.describe }, `could not write the summary ${target.describe}: ${checkFailure(error).reason}`);
      logger.debug({ err: error }, "the summary's write failed");
    }
  }
}

/** What the `run` command hands the lifecycle: its options, read once, and the seams a test may replace. */
export interface RunRequest {
  settings: JobSettings;
  places: RunPlaces;
  shaping: ShapingSettings;
  rpm: number;
  tps: number;
  maxRetries: number;
  maxFailuresInARow: number;
  maxErrorRate: number;
  graceMs: number;
  /** Milliseconds between shipments of an S3 journal. */
  journalFlushMs: number;
  /** Take an S3 lock on a store that ignores conditional writes (`--unsafe-s3-lock`). */
  unsafeS3Lock?: boolean | undefined;
  stop?: AbortSignal | undefined;
  logger: Logger;
  onProgress?: AnswerOptions["onProgress"];
  openModel: OpenModel;
  openJournal?: OpenJournal | undefined;
  /** Output targets by location (S3, a path, stdout); a test may put failing ones in their place. */
  target?: ((location: string) => OutputTarget) | undefined;
}

/** How a run ended: its verdict, why, the summary written, and where the finished work is kept. */
export interface RunEnd {
  verdict: Verdict;
  reason: string;
  summary: UsageSummary;
  journal: string | undefined;
  paths: RunPaths | undefined;
  /** Whether the outputs were written. */
  written: boolean;
}

/** What the check stage found: everything the later stages need. */
interface Checked {
  paths: RunPaths;
  job: Job;
  shard: Shard | undefined;
  source: Source;
  shaping: ReturnType<typeof outputPolicy>;
}

/** Runs every stage in order; returns the verdict, having written the summaries for it. */
export function runLifecycle(request: RunRequest): Promise<RunEnd> {
  // A stop, and a store that failed for its whole window, leave the run's storage retries the grace in all.
  return withStorageStop(request.stop, () => runStages(request), request.graceMs);
}

async function runStages(request: RunRequest): Promise<RunEnd> {
  const logger = request.logger;
  const checked = await stage(logger, () => checkStage(request));
  if ("verdict" in checked) return endEarly(request, checked, undefined);
  const journal = journalShown(checked.paths);
  const held = await stage(logger, () => lockStage(request, checked.paths));
  if ("verdict" in held) return endEarly(request, held, checked);
  let evaluator: Evaluator | undefined;
  try {
    // The model's check comes after the lock: a refused run loads (or downloads) nothing.
    const opened = await stage(logger, () => openModelFor(request.settings, checked.job, request.openModel));
    if ("verdict" in opened) return await endEarly(request, opened, checked);
    evaluator = opened.evaluator;
    const verified = await stage(logger, async () => checked.shaping.verify(opened.evaluator));
    if (verified !== undefined && "verdict" in verified) return await endEarly(request, verified, checked);
    const result = await runJob(jobOptions(request, checked, opened, held.fence));
    return { verdict: result.verdict, reason: result.reason, summary: result.summary, journal, paths: checked.paths, written: result.written };
  } catch (error) {
    request.logger.debug({ err: error }, "the run failed unexpectedly");
    return await endEarly(request, { verdict: "internal-error", reason: (error as Error).message }, checked);
  } finally {
    await releaseStage(request.logger, evaluator, held);
  }
}

/** A stage's outcome, or its failure as a verdict (a bug included: the stack goes to the debug log). */
async function stage<T>(logger: Logger, run: () => Promise<T>): Promise<T | StageFailure> {
  try {
    return await run();
  } catch (error) {
    const failure = error instanceof LockedError ? { verdict: "locked" as const, reason: error.message } : checkFailure(error);
    if (failure.verdict === "internal-error") logger.debug({ err: error }, "a stage failed unexpectedly");
    return failure;
  }
}

/** The check stage: where everything goes, the job and its shaping, and the input's first record. No model is loaded yet. */
async function checkStage(request: RunRequest): Promise<Checked> {
  const { settings } = request;
  const job = readJob(settings.jobFile, settings.model);
  const paths = runPaths(settings, request.places);
  const shaping = outputPolicy(request.shaping, settings.jobFile, job, paths, request.logger);
  checkPlaces(paths, settings.input, shaping.policy.reviewFile);
  const shard = settings.shard ? parseShard(settings.shard) : undefined;
  const source = await checkFirstRecord(await openSource(settings, job, request.logger));
  return { paths, job, shard, source, shaping };
}

/** What the lock stage holds: the lock, the S3 mirror of the journal, and the fence checked before each request. */
interface Held {
  lock: Lock;
  mirror: S3Journal | undefined;
  fence: () => void;
}

/** The lock stage: one run per journal, refused at once while another holds it; an S3 journal is pulled (proving the store answers and is writable). */
async function lockStage(request: RunRequest, paths: RunPaths): Promise<Held> {
  const remote = paths.remoteJournal;
  if (!remote) {
    const lock = acquireLock(`${paths.journalPath}.lock`);
    return { lock, mirror: undefined, fence: () => lock.assertHeld() };
  }
  const lock = await acquireS3Lock(remote, { unsafe: request.unsafeS3Lock, onNote: (message) => request.logger.info({ lock: remote }, message) });
  try {
    const mirror = new S3Journal(remote, paths.journalPath, { flushMs: request.journalFlushMs });
    mirror.onError = (error) => {
      // One line at warn; the stack is for a bug hunt, at debug.
      request.logger.warn({ journal: remote }, `could not ship the journal to S3 (${checkFailure(error).reason}); retrying at the next flush`);
      request.logger.debug({ err: error }, "the journal's shipment failed");
    };
    const { segments } = await mirror.pull();
    request.logger.info({ journal: remote, segments }, segments ? `resuming from the journal in ${remote} (${segments} segments)` : `journaling to ${remote}`);
    mirror.start();
    // Before each request and before any output: the lock still ours, and the journal still reaching S3.
    const fence = () => {
      lock.assertHeld();
      mirror.assertShipping();
    };
    return { lock, mirror, fence };
  } catch (error) {
    await lock.release();
    throw error;
  }
}

/** The release stage: the model closed, the journal shipped, the lock given back; failures here are logged, the verdict stands. */
async function releaseStage(logger: Logger, evaluator: Evaluator | undefined, held: Held): Promise<void> {
  for (const step of [() => evaluator?.close(), () => held.mirror?.close(), () => held.lock.release()]) {
    try {
      await step();
    } catch (error) {
      logger.warn(`releasing the run: ${checkFailure(error).reason}`);
      logger.debug({ err: error }, "releasing the run failed");
    }
  }
}

function jobOptions(
  request: RunRequest,
  checked: Checked,
  opened: { evaluator: Evaluator; price: number; concurrency: number },
  fence: () => void,
): RunOptions {
  const { paths, job, source, shard } = checked;
  const target = request.target ?? targetOf;
  return {
    job,
    source,
    shard,
    evaluator: opened.evaluator,
    concurrency: opened.concurrency,
    jobName: request.settings.jobFile,
    journalPath: paths.journalPath,
    journalName: journalShown(paths),
    answers: { target: target(paths.output), format: paths.answersFormat },
    errors: paths.errors === undefined ? discarded() : target(paths.errors),
    usage: paths.usage === undefined ? undefined : target(paths.usage),
    summaryJson: paths.summaryJson === undefined ? undefined : target(paths.summaryJson),
    output: checked.shaping.policy,
    inputId: paths.inputId,
    limiter: new RunLimiter({ requestsPerMinute: request.rpm, tokensPerSecond: request.tps }),
    pricePerMillion: opened.price,
    maxRetries: request.maxRetries,
    timeoutMs: request.settings.timeoutSeconds * 1000,
    maxFailuresInARow: request.maxFailuresInARow,
    maxErrorRate: request.maxErrorRate,
    stop: request.stop,
    graceMs: request.graceMs,
    logger: request.logger,
    onProgress: request.onProgress,
    fence,
    openJournal: request.openJournal,
  };
}

/** An output nobody asked for (the errors of `-o -` without --errors): the journal keeps the failed records. */
function discarded(): OutputTarget {
  return {
    describe: "(the journal)",
    open: () => ({ stream: new Writable({ write: (_chunk, _encoding, done) => done() }), commit: async () => undefined, abort: async () => undefined }),
  };
}

/** A verdict before the journal stage: the summaries still say what happened and why. */
async function endEarly(request: RunRequest, failure: StageFailure, checked: Checked | undefined): Promise<RunEnd> {
  const { settings } = request;
  const summary = emptySummary(checked?.job.model ?? settings.model, settings.price ?? 0);
  const paths = checked?.paths ?? safePaths(request);
  // A journal is named only when there is one: a check that failed opened none.
  const journal = paths && (paths.remoteJournal || existsSync(paths.journalPath)) ? journalShown(paths) : undefined;
  Object.assign(summary, { status: failure.verdict, verdict: failure.verdict, reason: failure.reason, input: settings.input, job: settings.jobFile });
  if (paths) Object.assign(summary, { output: paths.output, ...(journal ? { journal } : {}) });
  const target = request.target ?? targetOf;
  const usage = paths?.usage === undefined ? undefined : target(paths.usage);
  const summaryJson = paths?.summaryJson ?? request.places.summaryJson;
  endStorageRetries();
  await writeSummaries([usage, summaryJson === undefined ? undefined : target(summaryJson)], finish(summary), request.logger);
  return { verdict: failure.verdict, reason: failure.reason, summary, journal, paths, written: false };
}

/** The run's places, when its options resolve to any (a check that failed early may not have got that far). */
function safePaths(request: RunRequest): RunPaths | undefined {
  try {
    return runPaths(request.settings, request.places);
  } catch {
    return undefined;
  }
}

/** Where the finished records are: the local journal, and the S3 prefix it is mirrored to (the local copy is kept until S3 has it). */
function journalShown(paths: Pick<RunPaths, "journalPath" | "remoteJournal">): string {
  return paths.remoteJournal ? `${paths.journalPath} (mirrored to ${paths.remoteJournal})` : paths.journalPath;
}
