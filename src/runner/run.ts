/**
 * The batch job: stream records (loop.ts), turn each into a request
 * (records.ts), skip what an earlier run finished (the journal), send
 * identical requests once (dedup.ts), pace and retry every attempt
 * (send.ts, limiter.ts), journal each finished record, then write the outputs
 * and the usage summary from the journal (summary.ts).
 */
import { setMaxListeners } from "node:events";
import { TypedEvalError } from "../api/errors.js";
import type { Evaluator } from "../evaluator/evaluator.js";
import type { Logger } from "../logging/logger.js";
import { Dedup } from "./state/dedup.js";
import type { Job } from "./job.js";
import { Journal, type ErrorEntry } from "./state/journal.js";
import type { RunLimiter } from "./send/limiter.js";
import { forEachBounded } from "./send/loop.js";
import { writeOutputs, type OutputFormat, type OutputPolicy, type OutputTarget } from "./output/outputs.js";
import { prepareItem, type Shard } from "./input/records.js";
import { AbortRun, Sender, type Outcome } from "./send/send.js";
import { SourceError, type Source, type SourceItem } from "./input/source.js";
import { FailureWatch, runSummary, statusOf, type RunStatus } from "./output/summary.js";
import { costOf, type UsageSummary } from "./output/usage.js";
import { describeDuplicates } from "./output/duplicate-ids.js";

/** The defaults of a run, in one place: `runJob` falls back to them and the `run` command's flags show them. */
export const RUN_DEFAULTS = {
  maxRetries: 6,
  maxFailuresInARow: 50,
  maxErrorRate: 0,
  earlyFailures: 20,
  graceMs: 30_000,
  dedupCache: 50_000,
} as const;

/** How often a run journals what it has spent: a kill -9 loses at most this much of its request and time counts. */
export const SPEND_INTERVAL_MS = 2000;

export interface RunProgress {
  read: number;
  answered: number;
  failed: number;
  resumed: number;
  inputTokens: number;
  costUsd: number;
  bytes: number;
  totalBytes: number | undefined;
  /** The share of the configured limits the endpoint's signals allow now (1: the limits themselves). */
  pace: number;
}

export interface RunOptions {
  job: Job;
  jobName?: string;
  source: Source;
  evaluator: Evaluator;
  journalPath: string;
  answers: { target: OutputTarget; format: OutputFormat };
  errors: OutputTarget;
  /** Where the usage summary JSON goes, if anywhere. */
  usage?: OutputTarget | undefined;
  /** A second copy of the summary for a scheduler (`--summary-json`), written whatever the outcome. */
  summaryJson?: OutputTarget | undefined;
  limiter: RunLimiter;
  concurrency: number;
  shard?: Shard | undefined;
  pricePerMillion: number;
  /** Attempts per record beyond the first, for 408, 429, 5xx and unreachable upstreams. Default 6. */
  maxRetries?: number | undefined;
  /** Per attempt, for remote endpoints. */
  timeoutMs?: number | undefined;
  /** Responses kept for identical requests later in the run. */
  dedupCache?: number | undefined;
  /**
   * Records in a row that may fail on the endpoint's side (5xx, timeouts,
   * resets, invalid answers, after their retries) before the run aborts as
   * resumable instead of filling the errors file. Default 50.
   */
  maxFailuresInARow?: number | undefined;
  /** The share of records that may fail with the run still a success. Default 0. */
  maxErrorRate?: number | undefined;
  /** The first this-many finished records all failing for one reason stop the run (status all-failed). Default 20. */
  earlyFailures?: number | undefined;
  /** Stop taking records (SIGTERM, SIGINT): what is in flight finishes within `graceMs`, the journal keeps it, the run is resumable. */
  stop?: AbortSignal | undefined;
  graceMs?: number | undefined;
  logger: Logger;
  onProgress?: (progress: RunProgress) => void;
  /** The input the journal belongs to (a resolved path, an S3 location, "stdin"); a journal of another input is refused. */
  inputId?: string | undefined;
  /** Calibration, review routing and CSV options applied when the outputs are written. */
  output?: (OutputPolicy & { calibrationSource?: string | undefined; reviewFile?: string | undefined }) | undefined;
}

export interface RunResult {
  summary: UsageSummary;
  status: RunStatus;
  /** Why the run stopped before the end, when it did. */
  aborted?: string;
}

/** The first records all failed for one reason: nothing later will do better. */
class AllFailed extends Error {
  override name = "AllFailed";
}

export async function runJob(options: RunOptions): Promise<RunResult> {
  const { job, source, evaluator, limiter, logger } = options;
  // Part of every record's done key: a rerun on other weights or another endpoint answers again.
  const identity = evaluator.identity(job.model);
  const started = Date.now();
  const { journal, done, runs } = await Journal.open(options.journalPath, options.inputId, job.keep ?? []);
  const stats = { read: 0, answered: 0, failed: 0, resumed: 0, otherShards: 0, inputTokens: 0 };
  const abort = new AbortController();
  // Every request in flight listens on this one signal: as many listeners as --concurrency, by design.
  setMaxListeners(Math.max(10, options.concurrency * 2 + 10), abort.signal);
  const sender = new Sender({
    evaluator,
    limiter,
    maxRetries: options.maxRetries ?? RUN_DEFAULTS.maxRetries,
    timeoutMs: options.timeoutMs,
    signal: abort.signal,
  });
  const sent = sender.counts;
  const dedup = new Dedup(options.dedupCache ?? RUN_DEFAULTS.dedupCache);
  // A resumed run copies what earlier runs answered, as one uninterrupted run would have: the same output file.
  if (done.size > 0) await dedup.prime(options.journalPath);
  const watch = new FailureWatch(options.earlyFailures ?? RUN_DEFAULTS.earlyFailures);

  const report = () =>
    options.onProgress?.({
      read: stats.read,
      answered: stats.answered,
      failed: stats.failed,
      resumed: stats.resumed,
      inputTokens: stats.inputTokens,
      costUsd: costOf(stats.inputTokens + sent.wastedInput, options.pricePerMillion),
      bytes: source.progress().bytes,
      totalBytes: source.progress().total,
      pace: limiter.paceReport().current,
    });

  const fail = (item: { seq: number; line: number; source: string }, id: string, status: number, type: string, message: string, h?: string) => {
    const entry: ErrorEntry = { k: "error", seq: item.seq, line: item.line, source: item.source, id, status, type, message, ...(h ? { h } : {}) };
    journal.append(entry);
    stats.failed++;
    const reason = watch.failed(status, type, message);
    if (reason) throw new AllFailed(reason);
  };
  const succeeded = () => {
    stats.answered++;
    watch.answered();
  };

  // An endpoint that fails every record is down, not picky: stop, and let a rerun resume, rather than
  // write the whole input to the errors file.
  const maxInARow = options.maxFailuresInARow ?? RUN_DEFAULTS.maxFailuresInARow;
  let failuresInARow = 0;
  const endpointFailed = (outcome: Outcome) => {
    if (outcome.ok) failuresInARow = 0;
    else if ((outcome.status === 0 || outcome.status === 408 || outcome.status >= 500) && ++failuresInARow >= maxInARow) {
      throw new AbortRun(`the endpoint failed ${failuresInARow} records in a row with nothing answered between them (the last: ${outcome.message})`);
    }
  };

  const processItem = async (item: SourceItem): Promise<void> => {
    stats.read++;
    const prepared = prepareItem(job, item, options.shard, identity);
    if (prepared.kind === "other-shard") return void stats.otherShards++;
    if (prepared.kind === "invalid") return fail(item, prepared.id, prepared.status, prepared.type, prepared.message);
    const { request, hash, id } = prepared;
    const h = hash.slice(0, 16);
    if (done.has(item.seq, h)) {
      // Answered before, while the job kept other fields: keep what the job keeps now, from the input.
      if (done.staleKeep(item.seq)) journal.append({ k: "keep", seq: item.seq, keep: prepared.keep });
      return void stats.resumed++;
    }
    const base = { seq: item.seq, line: item.line, source: item.source, id, h, ...(job.keep ? { keep: prepared.keep } : {}) };

    // Identical requests are sent once (state/dedup.ts): a copy names its original by id and carries its label mass, with zero usage.
    const { outcome, copyOf } = await dedup.answer(h, id, () => {
      let estimate: number;
      try {
        estimate = evaluator.estimateInputTokens(request);
      } catch (error) {
        const typed = error instanceof TypedEvalError ? error : undefined;
        return Promise.resolve({ ok: false, status: typed?.status ?? 0, error: typed?.code ?? "internal_error", message: (error as Error).message } as const);
      }
      return sender.send(request, estimate);
    });
    if (copyOf === undefined) endpointFailed(outcome);
    if (!outcome.ok) return fail(item, id, outcome.status, outcome.error, `line ${item.line}: ${outcome.message}`, h);
    const { response, labelMass } = outcome.evaluation;
    journal.append({
      k: "answer",
      ...base,
      model: response.model,
      answers: response.answers,
      usage: response.usage,
      ...(labelMass ? { label_mass: labelMass } : {}),
      ...(copyOf !== undefined ? { dedup_of: copyOf } : {}),
    });
    stats.inputTokens += response.usage.input_tokens;
    succeeded();
  };

  let aborted: string | undefined;
  let status: RunStatus | undefined;
  // What this run spent, journaled as it goes: a killed run's requests and time are not lost.
  const spent = { at: started, requests: 0, retries: 0, rateLimited: 0, overloaded: 0, wastedInput: 0 };
  const journalSpending = (final = false) => {
    const now = Date.now();
    if (!final && sent.requests === spent.requests) return;
    journal.append({
      k: "run",
      started: new Date(started).toISOString(),
      seconds: (now - spent.at) / 1000,
      requests: sent.requests - spent.requests,
      retries: sent.retries - spent.retries,
      rate_limited: sent.rateLimited - spent.rateLimited,
      overloaded: sent.overloaded - spent.overloaded,
      wasted_input_tokens: sent.wastedInput - spent.wastedInput,
    });
    Object.assign(spent, { at: now, ...sent });
  };
  const timer = setInterval(report, 500);
  const spendTimer = setInterval(() => journalSpending(), SPEND_INTERVAL_MS);
  const stopWith = (why: string, as: RunStatus, error: unknown) => {
    if (aborted === undefined) {
      aborted = why;
      status = as;
    }
    abort.abort(error);
  };
  try {
    const end = await forEachBounded(source.items, options.concurrency, processItem, {
      stop: options.stop,
      graceMs: options.graceMs ?? RUN_DEFAULTS.graceMs,
      halted: () => aborted !== undefined,
      onTaskError: (error) => {
        if (error instanceof AbortRun) stopWith(error.message, "aborted", error);
        else if (error instanceof AllFailed) stopWith(error.message, "all-failed", error);
        else if (!abort.signal.aborted) {
          stopWith(`internal error: ${(error as Error).message}`, "aborted", error);
          logger.error({ err: error }, "record processing failed");
        }
      },
      onSourceError: (error) => {
        // The source itself failed (a CSV syntax error, invalid UTF-8, a gzip or network error): stop, keep what finished.
        stopWith((error as Error).message, error instanceof SourceError ? (error.absent ? "no-input" : "bad-input") : "aborted", error);
      },
      onGraceOver: () => abort.abort(new Error("the grace period ran out")),
    }).catch(() => "halted" as const);
    if (end === "stopped" && aborted === undefined) {
      aborted = "the records in flight finished and are kept";
      status = "stopped";
    }
  } finally {
    clearInterval(timer);
    clearInterval(spendTimer);
    report();
  }

  const seconds = (Date.now() - started) / 1000;
  journalSpending(true);
  journal.close();
  await limiter.stop();
  const base = {
    job,
    jobName: options.jobName,
    identity,
    model: evaluator.versionedId?.(job.model),
    price: options.pricePerMillion,
    input: source.name,
    output: options.answers.target.describe,
    runs,
    thisRun: { started, seconds, stats, sent, pace: limiter.paceReport() },
  };
  let summary: UsageSummary;
  if (aborted !== undefined) {
    // Outputs are not written for a run that stopped early: they would look complete. The journal keeps the work.
    summary = runSummary(base, undefined, status ?? "aborted");
  } else {
    const written = await writeOutputs(options.journalPath, job, options.answers, options.errors, options.output);
    // Repeated ids are kept (each row is its own record) but said out loud: a join on id downstream would double them.
    if (written.duplicateIds) logger.warn({ duplicate_ids: written.duplicateIds }, describeDuplicates(written.duplicateIds));
    status = statusOf(stats.read, written, options.maxErrorRate ?? RUN_DEFAULTS.maxErrorRate);
    const shaping = options.output;
    summary = runSummary(
      base,
      {
        written,
        calibrationSource: shaping?.calibrationSource ?? (shaping?.calibration === "batch" ? "batch" : "file"),
        reviewFile: shaping?.review ? (shaping.reviewFile ?? shaping.review.target.describe) : undefined,
      },
      status,
    );
    if (options.usage) await writeJson(options.usage, summary);
  }
  if (options.summaryJson) await writeJson(options.summaryJson, summary);
  return { summary, status: status ?? "aborted", ...(aborted !== undefined ? { aborted } : {}) };
}

async function writeJson(target: OutputTarget, value: unknown): Promise<void> {
  const out = target.open();
  out.stream.write(`${JSON.stringify(value, null, 2)}\n`);
  await out.commit();
}
