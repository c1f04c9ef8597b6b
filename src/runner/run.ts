/**
 * A run's lifecycle, its stages in order: check (check.ts: input, places),
 * lock, model (loaded or its key checked, a calibration's identity
 * matched), then the journal, answer and write stages (stages.ts), release.
 * A remote endpoint is first reached by the answer stage, when a record
 * must be asked.
 * Each stage ends in a verdict (`classify` and `decide`, api/verdict.ts); no
 * exception crosses a stage, the summaries are written whatever the verdict
 * (`--summary-json` first), and every ending is bounded: once a verdict is
 * reached, a failing store gets the stop's grace, not a fresh retry window.
 */
import type { Evaluator } from "../evaluator/evaluator.js";
import type { Logger } from "../logging/logger.js";
import type { AnswerOptions } from "./answer.js";
import { checkContextFits, checkPlaces, checkReviewPlace, ownFile, FIRST_WINDOW, readAhead, warnBareNumbers, warnMissingKeep } from "./check.js";
import type { FileFormat } from "../records/formats.js";
import { parseShard, type Shard } from "./input/requests.js";
import type { Source, SourceItem } from "../records/source.js";
import type { OutputTarget } from "./output/targets.js";
import { emptySummary, finish, type UsageSummary } from "../records/usage.js";
import {
  answersFormatOf,
  openSource,
  outputPolicy,
  openModelFor,
  readJob,
  runPaths,
  streamJournal,
  targetOf,
  type JobSettings,
  type OpenModel,
  type RunPaths,
  type RunPlaces,
  type ShapingSettings,
} from "./prepare.js";
import { RunLimiter } from "./send/limiter.js";
import { acquireLock, LockedError, type Lock } from "./state/lock.js";
import { S3Journal } from "./state/s3-journal.js";
import { acquireS3Lock } from "./state/s3-lock.js";
import { endStorageRetries, withStorageStop } from "../records/s3.js";
import { classify, LockRefusedError, type Ending, type Stage } from "../api/verdict.js";
import type { Job } from "../records/job.js";
import { closeSync, existsSync, openSync, readSync } from "node:fs";
import { resolve } from "node:path";
import { runJob, writeSummaries, type OpenJournal, type OpenedRun } from "./stages.js";

export { RUN_DEFAULTS, SPEND_INTERVAL_MS, type RunProgress } from "./answer.js";
export { runJob, type OpenJournal, type OpenedRun, type StagesOutcome } from "./stages.js";

/** One invocation of a run: what the `run` command hands the lifecycle (its options, read once) and the seams a test may replace. */
export interface RunInvocation {
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
  /** The first signal: no new records; those in flight finish within the grace. */
  stop?: AbortSignal | undefined;
  /** A second signal: the grace is over now; the run ends as fast as it can, its summary written. */
  stopNow?: AbortSignal | undefined;
  logger: Logger;
  onProgress?: AnswerOptions["onProgress"];
  openModel: OpenModel;
  openJournal?: OpenJournal | undefined;
  /** Output targets by location (S3, a path, stdout); a test may put failing ones in their place. */
  target?: ((location: string) => OutputTarget) | undefined;
}

/** How a whole run ended: its verdict, why, the summary written, and where the finished work is kept. */
export interface RunOutcome extends Ending {
  summary: UsageSummary;
  /** The journal, when it holds finished records (answered or failed). */
  journal: string | undefined;
  paths: RunPaths | undefined;
  /** Whether the outputs were written. */
  written: boolean;
}

/** What the check stage found: everything the later stages need. */
interface Checked {
  paths: RunPaths;
  answersFormat: FileFormat;
  job: Job;
  shard: Shard | undefined;
  source: Source;
  /** The input's first records, read at the check: what the kept fields and the context window are judged on. */
  window: SourceItem[];
  shaping: ReturnType<typeof outputPolicy>;
}

/** Runs every stage in order; returns the verdict, having written the summaries for it. */
export function runLifecycle(request: RunInvocation): Promise<RunOutcome> {
  // A stop, a verdict reached, and a store that failed for its whole window leave the run's storage retries the grace in all;
  // a second signal ends them at once.
  return withStorageStop(request.stop, () => runStages(request, endStorageRetries), request.graceMs, request.stopNow);
}

async function runStages(request: RunInvocation, verdictReached: () => void): Promise<RunOutcome> {
  const checked = await stage(request.logger, "check", () => checkStage(request));
  if ("verdict" in checked) return endEarly(request, checked, undefined, verdictReached);
  let held: Held;
  try {
    held = await lockStage(request, checked.paths);
  } catch (error) {
    return endEarly(request, classify(error, "lock"), checked, verdictReached, holderSummary(error));
  }
  let evaluator: Evaluator | undefined;
  try {
    // The model's check comes after the lock: a refused run loads (or downloads) nothing.
    const opened = await stage(request.logger, "model", () => modelStage(request, checked));
    if ("verdict" in opened) return await endEarly(request, opened, checked, verdictReached);
    evaluator = opened.evaluator;
    const result = await runJob({ ...jobOptions(request, checked, opened, held.fence), onEnding: verdictReached });
    const journal = result.kept ? journalShown(checked.paths) : undefined;
    return { ...result, journal, paths: checked.paths };
  } catch (error) {
    request.logger.debug({ err: error }, "the run failed unexpectedly");
    return await endEarly(request, classify(error, "release"), checked, verdictReached, undefined, true);
  } finally {
    await releaseStage(request.logger, evaluator, held);
  }
}

/** A stage's outcome, or its failure as a verdict (a bug included: the stack goes to the debug log). */
async function stage<T>(logger: Logger, name: Stage, run: () => Promise<T>): Promise<T | Ending> {
  try {
    return await run();
  } catch (error) {
    const failure = classify(error, name);
    if (failure.verdict === "internal-error") logger.debug({ err: error }, `the ${name} stage failed unexpectedly`);
    return failure;
  }
}

/** The check stage: where everything goes, the job and its shaping, and the input's first record. No model is loaded yet. */
async function checkStage(request: RunInvocation): Promise<Checked> {
  const { settings } = request;
  const job = readJob(settings.jobFile, settings.model);
  const paths = runPaths(settings, request.places);
  // The places first: an output that is a folder or an S3 prefix is named as one before its name is read for a format.
  checkPlaces(paths, settings.input);
  const answersFormat = answersFormatOf(paths.output, request.places);
  const shaping = outputPolicy(request.shaping, settings.jobFile, job, { sidecar: paths.sidecar, answersFormat }, request.logger);
  if (shaping.policy.reviewFile !== undefined) checkReviewPlace(paths, settings.input, shaping.policy.reviewFile);
  // An earlier run's review file is removed once the outputs are written: never one that is another place of this run.
  const former = shaping.policy.formerReview;
  if (former !== undefined && !ownFile(former, "the review file", paths, settings.input)) shaping.policy.formerReview = undefined;
  const shard = settings.shard ? parseShard(settings.shard) : undefined;
  const { source, window } = await readAhead(await openSource(settings, job, request.logger), FIRST_WINDOW);
  warnMissingKeep(job, window, request.logger);
  warnBareNumbers(job, window, request.logger);
  // Stdin to stdout: the journal is named from the stream's first records (its folder was checked above).
  const records = window.map((item) => ("record" in item ? item.record : item));
  return { paths: streamJournal(settings, paths, records), answersFormat, job, shard, source, window, shaping };
}

/**
 * The model stage: the model opened (a remote endpoint's key read and
 * checked, nothing sent), a calibration fitted for it. A remote endpoint is
 * first contacted when a record must be asked (send/send.ts): a rerun whose
 * records are all journaled writes its outputs with the endpoint down.
 */
async function modelStage(request: RunInvocation, checked: Checked): Promise<Awaited<ReturnType<typeof openModelFor>>> {
  const opened = await openModelFor(request.settings, checked.job, request.openModel);
  try {
    checkContextFits(opened.evaluator, checked.job, checked.window, checked.shard);
    checked.shaping.verify(opened.evaluator);
    return opened;
  } catch (error) {
    await opened.evaluator.close();
    throw error;
  }
}

/** What the lock stage holds: the lock, the S3 mirror of the journal, and the fence checked before each request. */
interface Held {
  lock: Lock;
  mirror: S3Journal | undefined;
  fence: () => void;
}

/** The lock stage: one run per journal, refused at once while another holds it; an S3 journal is pulled (proving the store answers and is writable). */
async function lockStage(request: RunInvocation, paths: RunPaths): Promise<Held> {
  try {
    return await takeLock(request, paths);
  } catch (error) {
    if (!(error instanceof LockedError)) throw error;
    throw new LockRefusedError(error.message, { cause: error, next: error.next });
  }
}

async function takeLock(request: RunInvocation, paths: RunPaths): Promise<Held> {
  const remote = paths.remoteJournal;
  if (!remote) {
    const lock = acquireLock(`${paths.journalPath}.lock`, paths.summaryJson === undefined ? undefined : resolve(paths.summaryJson));
    return { lock, mirror: undefined, fence: () => lock.assertHeld() };
  }
  const lock = await acquireS3Lock(remote, { unsafe: request.unsafeS3Lock, onNote: (message) => request.logger.info({ lock: remote }, message) });
  try {
    const mirror = new S3Journal(remote, paths.journalPath, { flushMs: request.journalFlushMs });
    mirror.onError = (error) => {
      // One line at warn; the stack is for a bug hunt, at debug.
      request.logger.warn({ journal: remote }, `could not ship the journal to S3 (${classify(error, "journal").reason}); retrying at the next flush`);
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
      logger.warn(`releasing the run: ${classify(error, "release").reason}`);
      logger.debug({ err: error }, "releasing the run failed");
    }
  }
}

function jobOptions(request: RunInvocation, checked: Checked, opened: Awaited<ReturnType<typeof openModelFor>>, fence: () => void): OpenedRun {
  const { paths, answersFormat, job, source, shard } = checked;
  const target = request.target ?? targetOf;
  return {
    job,
    source,
    shard,
    evaluator: opened.evaluator,
    concurrency: opened.concurrency,
    jobName: request.settings.jobFile,
    journalPath: paths.journalPath,
    // The summary names where the journal lives for good: a mirrored one's local copy is deleted once S3 holds it.
    journalName: paths.remoteJournal ?? paths.journalPath,
    dropJournalWhenDone: paths.transient,
    answers: { target: target(paths.output), format: answersFormat },
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
    stopNow: request.stopNow,
    graceMs: request.graceMs,
    logger: request.logger,
    onProgress: request.onProgress,
    fence,
    openJournal: request.openJournal,
  };
}

/** An output nobody asked for (the errors of `-o -` without --errors): the journal keeps the failed records. */
function discarded(): OutputTarget {
  return { describe: "(the journal)", open: () => ({ write: async () => undefined, commit: async () => undefined, abort: async () => undefined }) };
}

/**
 * A verdict before the journal stage: `--summary-json` still says what
 * happened and why. The output's usage summary is not written: it belongs to
 * the output beside it, which a run that paid nothing leaves as the last good
 * run made it (`paid`: a failure nobody anticipated after the answers began).
 * A run refused by a lock writes its `--summary-json` only when that is not
 * the holder's own (else it says its verdict on stderr only).
 */
async function endEarly(
  request: RunInvocation,
  failure: Ending,
  checked: Checked | undefined,
  verdictReached: () => void,
  holdersSummary?: string,
  paid = false,
): Promise<RunOutcome> {
  verdictReached();
  const { settings } = request;
  const paths = checked?.paths ?? safePaths(request);
  const journal = paths && holdsRecords(paths.journalPath) ? journalShown(paths) : undefined;
  const summarise = (ending: Ending) => {
    const summary = emptySummary(checked?.job.model ?? settings.model, settings.price ?? 0);
    Object.assign(summary, { status: ending.verdict, verdict: ending.verdict, reason: ending.reason, input: settings.input, job: settings.jobFile });
    if (paths) Object.assign(summary, { output: paths.output, ...(journal ? { journal } : {}) });
    return finish(summary);
  };
  const target = request.target ?? targetOf;
  const refused = failure.verdict === "locked";
  const usage = paths?.usage === undefined || !paid ? undefined : target(paths.usage);
  const summaryJson = paths?.summaryJson ?? request.places.summaryJson;
  // Never over the input or another place of the run (the check refused that, and says so on stderr).
  const apart = paths === undefined || summaryJson === undefined || ownFile(summaryJson, "--summary-json", paths, settings.input);
  const own = summaryJson !== undefined && apart && !(refused && holdersSummary === resolve(summaryJson)) ? target(summaryJson) : undefined;
  const { ending, summary } = await writeSummaries([own, usage], failure, summarise, request.logger);
  return { ...ending, summary, journal, paths, written: false };
}

/** The `--summary-json` of the run holding a lock that refused this one, when its lock names it. */
function holderSummary(error: unknown): string | undefined {
  const cause = error instanceof LockRefusedError ? error.cause : undefined;
  return cause instanceof LockedError ? cause.holder?.summary : undefined;
}

/** The run's places, when its options resolve to any (a check that failed early may not have got that far). */
function safePaths(request: RunInvocation): RunPaths | undefined {
  try {
    return runPaths(request.settings, request.places);
  } catch {
    return undefined;
  }
}

/** Whether a journal file holds a finished record (an answer or an error), reading no further than the first one. */
function holdsRecords(path: string): boolean {
  if (!existsSync(path)) return false;
  const fd = openSync(path, "r");
  try {
    const chunk = Buffer.alloc(1 << 16);
    let carry = "";
    for (let at = 0; ; ) {
      const n = readSync(fd, chunk, 0, chunk.length, at);
      if (n === 0) return false;
      at += n;
      const text = carry + chunk.toString("utf8", 0, n);
      if (/"k":"(answer|error)"/.test(text)) return true;
      carry = text.slice(-16);
    }
  } finally {
    closeSync(fd);
  }
}

/** Where the finished records are: the local journal, and the S3 prefix it is mirrored to (the local copy is kept until S3 has it). */
function journalShown(paths: Pick<RunPaths, "journalPath" | "remoteJournal">): string {
  return paths.remoteJournal ? `${paths.journalPath} (mirrored to ${paths.remoteJournal})` : paths.journalPath;
}
