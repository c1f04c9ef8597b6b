/**
 * The batch job: stream records, turn each into a request, skip what an
 * earlier run finished, send identical requests once, pace every attempt
 * through the limiter, journal each finished record, then write the outputs
 * and the usage summary from the journal.
 */
import { setMaxListeners } from "node:events";
import pLimit from "p-limit";
import {
  AuthenticationError,
  OverloadedError,
  PermissionDeniedError,
  RateLimitError,
  RequestTimeoutError,
  TypedEvalError,
  UpstreamError,
  UpstreamUnavailableError,
} from "../api/errors.js";
import { backoffMs, DEFAULT_RETRY } from "../api/retry.js";
import type { Answer, SystemOneRequest, Usage } from "../api/schema.js";
import type { Evaluation, Evaluator } from "../evaluator/evaluator.js";
import type { Logger } from "../logging/logger.js";
import type { Job } from "./job.js";
import { Journal, type AnswerEntry, type ErrorEntry } from "./journal.js";
import type { RunLimiter } from "./limiter.js";
import { writeOutputs, type OutputFormat, type OutputPolicy, type OutputTarget } from "./outputs.js";
import { totalVariation } from "../evaluator/calibration.js";
import { prepareItem, type Shard } from "./records.js";
import { SourceError, type Source, type SourceItem } from "./sources.js";
import { costOf, emptySummary, finish, type UsageSummary } from "./usage.js";

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
  limiter: RunLimiter;
  concurrency: number;
  shard?: Shard | undefined;
  pricePerMillion: number;
  /** Attempts per record beyond the first, for 408, 429, 5xx and unreachable upstreams. */
  maxRetries?: number;
  /** Responses kept for identical requests later in the run. */
  dedupCache?: number;
  /**
   * Records in a row that may fail on the endpoint's side (5xx, timeouts,
   * resets, invalid answers, after their retries) before the run aborts as
   * resumable instead of filling the errors file. Default 50.
   */
  maxFailuresInARow?: number;
  logger: Logger;
  onProgress?: (progress: RunProgress) => void;
  /** The input the journal belongs to (a resolved path, an S3 location, "stdin"); a journal of another input is refused. */
  inputId?: string | undefined;
  /** Calibration, review routing and CSV options applied when the outputs are written. */
  output?: (OutputPolicy & { calibrationSource?: string | undefined; reviewFile?: string | undefined }) | undefined;
}

export interface RunResult {
  summary: UsageSummary;
  /** 0 all answered, 1 some failed, 2 the input is unreadable past some point, 3 aborted and resumable. */
  exitCode: 0 | 1 | 2 | 3;
  aborted?: string;
}

/** The run stops: auth refused, or the upstream unreachable. Rerunning resumes. */
class AbortRun extends Error {
  override name = "AbortRun";
}

type Outcome = { ok: true; evaluation: Evaluation } | { ok: false; error: ErrorEntry["type"]; status: number; message: string };

/** A bounded map that forgets the oldest entries. */
class Lru<K, V> {
  private readonly map = new Map<K, V>();
  constructor(private readonly capacity: number) {}
  get(key: K): V | undefined {
    const value = this.map.get(key);
    if (value !== undefined) {
      this.map.delete(key);
      this.map.set(key, value);
    }
    return value;
  }
  set(key: K, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value as K);
  }
}

export async function runJob(options: RunOptions): Promise<RunResult> {
  const { job, source, evaluator, limiter, logger } = options;
  const maxRetries = options.maxRetries ?? 6;
  // Part of every record's done key: a rerun on other weights or another endpoint answers again.
  const identity = evaluator.identity(job.model);
  const started = Date.now();
  const { journal, done, runs } = await Journal.open(options.journalPath, options.inputId, job.keep ?? []);
  const stats = { read: 0, answered: 0, failed: 0, resumed: 0, otherShards: 0, requests: 0, retries: 0, rateLimited: 0, overloaded: 0, wastedInput: 0, inputTokens: 0 };
  const abort = new AbortController();
  // Every request in flight listens on this one signal: as many listeners as --concurrency, by design.
  setMaxListeners(Math.max(10, options.concurrency * 2 + 10), abort.signal);
  const inFlight = new Map<string, Promise<Outcome>>();
  // Kept as JSON text: a parsed answer graph costs about 7 KB of heap, its text under 1 KB.
  const answered = new Lru<string, { seq: number; json: string }>(options.dedupCache ?? 50_000);
  const recall = (hit: { json: string }) => JSON.parse(hit.json) as { model: string; answers: Record<string, Answer> };

  const report = () =>
    options.onProgress?.({
      read: stats.read,
      answered: stats.answered,
      failed: stats.failed,
      resumed: stats.resumed,
      inputTokens: stats.inputTokens,
      costUsd: costOf(stats.inputTokens + stats.wastedInput, options.pricePerMillion),
      bytes: source.progress().bytes,
      totalBytes: source.progress().total,
    });

  const fail = (item: { seq: number; line: number; source: string }, id: string, status: number, type: string, message: string, h?: string) => {
    const entry: ErrorEntry = { k: "error", seq: item.seq, line: item.line, source: item.source, id, status, type, message, ...(h ? { h } : {}) };
    journal.append(entry);
    stats.failed++;
  };

  // An endpoint that fails every record is down, not picky: stop, and let a rerun resume, rather than
  // write the whole input to the errors file.
  const maxInARow = options.maxFailuresInARow ?? 50;
  let failuresInARow = 0;
  const endpointFailed = (outcome: Outcome) => {
    if (outcome.ok) failuresInARow = 0;
    else if ((outcome.status === 0 || outcome.status === 408 || outcome.status >= 500) && ++failuresInARow >= maxInARow) {
      throw new AbortRun(`the endpoint failed ${failuresInARow} records in a row with nothing answered between them (the last: ${outcome.message})`);
    }
  };

  /** One request, with retries; every attempt goes through the limiter. */
  const send = async (request: SystemOneRequest, estimate: number): Promise<Outcome> => {
    for (let attempt = 0; ; attempt++) {
      abort.signal.throwIfAborted();
      try {
        const evaluation = await limiter.schedule(estimate, () => {
          stats.requests++;
          if (attempt > 0) stats.retries++;
          return evaluator.evaluate(request, { retryCount: attempt, signal: abort.signal });
        });
        await limiter.settle(estimate, evaluation.response.usage.input_tokens);
        return { ok: true, evaluation };
      } catch (error) {
        if (abort.signal.aborted) throw abort.signal.reason;
        if (error instanceof AuthenticationError || error instanceof PermissionDeniedError) {
          throw new AbortRun(`the endpoint refused the API key (HTTP ${error.status}: ${error.message})`);
        }
        const typed = error instanceof TypedEvalError ? error : undefined;
        const retryable = !!typed && typed.retryable;
        if (!retryable || attempt >= maxRetries) {
          if (error instanceof UpstreamUnavailableError && error.unreachable) {
            throw new AbortRun(`the endpoint is unreachable (${error.message})`);
          }
          return { ok: false, error: typed?.code ?? "internal_error", status: typed?.status ?? 0, message: (error as Error).message };
        }
        if (error instanceof RateLimitError || error instanceof OverloadedError) {
          // Slow the whole run down rather than retrying in lockstep.
          if (error instanceof RateLimitError) stats.rateLimited++;
          else stats.overloaded++;
          limiter.pause(error.retryAfterMs > 0 && error.retryAfterMs <= DEFAULT_RETRY.maxServerDelayMs ? error.retryAfterMs : backoffMs(attempt));
        } else {
          if (error instanceof UpstreamError || error instanceof RequestTimeoutError) stats.wastedInput += estimate;
          await new Promise((resolve) => setTimeout(resolve, backoffMs(attempt)));
        }
      }
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
    const zero: Usage = { input_tokens: 0, output_tokens: 0 };

    const earlier = answered.get(hash);
    if (earlier) {
      const { model, answers } = recall(earlier);
      journal.append({ k: "answer", ...base, model, answers, usage: zero, dedup_of: earlier.seq } satisfies AnswerEntry);
      stats.answered++;
      return;
    }
    const pending = inFlight.get(hash);
    if (pending) {
      const outcome = await pending;
      if (!outcome.ok) return fail(item, id, outcome.status, outcome.error, `line ${item.line}: ${outcome.message}`, h);
      const first = answered.get(hash);
      journal.append({ k: "answer", ...base, model: outcome.evaluation.response.model, answers: outcome.evaluation.response.answers, usage: zero, ...(first ? { dedup_of: first.seq } : {}) });
      stats.answered++;
      return;
    }
    let estimate: number;
    try {
      estimate = evaluator.estimateInputTokens(request);
    } catch (error) {
      const typed = error instanceof TypedEvalError ? error : undefined;
      return fail(item, id, typed?.status ?? 0, typed?.code ?? "internal_error", `line ${item.line}: ${(error as Error).message}`, h);
    }
    const attempt = send(request, estimate);
    inFlight.set(hash, attempt);
    try {
      const outcome = await attempt;
      endpointFailed(outcome);
      if (!outcome.ok) return fail(item, id, outcome.status, outcome.error, `line ${item.line}: ${outcome.message}`, h);
      const { response, labelMass } = outcome.evaluation;
      journal.append({ k: "answer", ...base, model: response.model, answers: response.answers, usage: response.usage, ...(labelMass ? { label_mass: labelMass } : {}) });
      answered.set(hash, { seq: item.seq, json: JSON.stringify({ model: response.model, answers: response.answers }) });
      stats.answered++;
      stats.inputTokens += response.usage.input_tokens;
    } finally {
      inFlight.delete(hash);
    }
  };

  // Records are read only as fast as they are processed: at most 2 x concurrency in hand.
  const limit = pLimit(options.concurrency);
  const slots = options.concurrency * 2;
  let freed: (() => void) | undefined;
  let aborted: string | undefined;
  let badInput = false;
  const tasks = new Set<Promise<void>>();
  // What this run spent, journaled as it goes: a killed run's requests and time are not lost.
  const spent = { at: started, requests: 0, retries: 0, rateLimited: 0, overloaded: 0, wastedInput: 0 };
  const journalSpending = (final = false) => {
    const now = Date.now();
    if (!final && stats.requests === spent.requests) return;
    journal.append({
      k: "run",
      started: new Date(started).toISOString(),
      seconds: (now - spent.at) / 1000,
      requests: stats.requests - spent.requests,
      retries: stats.retries - spent.retries,
      rate_limited: stats.rateLimited - spent.rateLimited,
      overloaded: stats.overloaded - spent.overloaded,
      wasted_input_tokens: stats.wastedInput - spent.wastedInput,
    });
    Object.assign(spent, { at: now, requests: stats.requests, retries: stats.retries, rateLimited: stats.rateLimited, overloaded: stats.overloaded, wastedInput: stats.wastedInput });
  };
  const timer = setInterval(report, 500);
  const spendTimer = setInterval(() => journalSpending(), SPEND_INTERVAL_MS);
  try {
    for await (const item of source.items) {
      if (aborted) break;
      while (limit.activeCount + limit.pendingCount >= slots) await new Promise<void>((resolve) => (freed = resolve));
      const task = limit(() => processItem(item))
        .catch((error: unknown) => {
          if (error instanceof AbortRun) {
            aborted ??= error.message;
            abort.abort(error);
          } else if (!abort.signal.aborted) {
            aborted ??= `internal error: ${(error as Error).message}`;
            abort.abort(error);
            logger.error({ err: error }, "record processing failed");
          }
        })
        .finally(() => {
          tasks.delete(task);
          freed?.();
        });
      tasks.add(task);
    }
    await Promise.all(tasks);
  } catch (error) {
    // The source itself failed (a CSV syntax error, invalid UTF-8, a gzip or network error): stop, keep what finished.
    badInput = !aborted && error instanceof SourceError;
    aborted ??= (error as Error).message;
    abort.abort(error);
    await Promise.allSettled(tasks);
  } finally {
    clearInterval(timer);
    clearInterval(spendTimer);
    report();
  }

  const seconds = (Date.now() - started) / 1000;
  journalSpending(true);
  journal.close();
  await limiter.stop();

  const summary = emptySummary(job.model, options.pricePerMillion);
  summary.model_identity = identity;
  if (options.jobName) summary.job = options.jobName;
  summary.input = source.name;
  summary.output = options.answers.target.describe;
  summary.records.read = stats.read;
  summary.records.resumed = stats.resumed;
  summary.records.other_shards = stats.otherShards;
  summary.this_run = {
    started: new Date(started).toISOString(),
    seconds,
    records: { read: stats.read, answered: stats.answered, failed: stats.failed, resumed: stats.resumed },
    requests: { sent: stats.requests, retries: stats.retries, rate_limited: stats.rateLimited, overloaded: stats.overloaded },
    tokens: { input: stats.inputTokens, wasted_input: stats.wastedInput },
    cost_usd: costOf(stats.inputTokens + stats.wastedInput, options.pricePerMillion),
  };
  for (const run of [...runs, { seconds, requests: stats.requests, retries: stats.retries, rate_limited: stats.rateLimited, overloaded: stats.overloaded, wasted_input_tokens: stats.wastedInput }]) {
    summary.requests.sent += run.requests;
    summary.requests.retries += run.retries;
    summary.requests.rate_limited += run.rate_limited;
    summary.requests.overloaded += run.overloaded;
    summary.tokens.wasted_input += run.wasted_input_tokens;
    summary.seconds += run.seconds;
  }
  if (aborted) {
    // Outputs are not written for an aborted run: they would look complete. The journal keeps the work.
    summary.records.answered = stats.answered + stats.resumed;
    summary.records.failed = stats.failed;
    summary.tokens.input = stats.inputTokens;
    return { summary: finish(summary), exitCode: badInput ? 2 : 3, aborted };
  }
  const written = await writeOutputs(options.journalPath, job, options.answers, options.errors, options.output);
  if (written.calibration) {
    const shares = written.shares;
    summary.calibration = {
      source: options.output?.calibrationSource ?? (options.output?.calibration === "batch" ? "batch" : "file"),
      questions: Object.fromEntries(
        [...written.calibration].map(([name, c]) => [name, { method: c.method, temperature: c.temperature, bias: c.bias, moved: shares ? totalVariation(shares.before[name] ?? [], shares.after[name] ?? []) : 0 }]),
      ),
    };
  }
  if (options.output?.review) summary.review = { file: options.output.reviewFile ?? options.output.review.target.describe, below_threshold: written.review, audit: written.audit };
  summary.records.answered = written.answered;
  summary.records.failed = written.failed;
  summary.records.deduplicated = written.deduplicated;
  summary.tokens.input = written.inputTokens;
  summary.tokens.output = written.outputTokens;
  finish(summary);
  if (options.usage) {
    const out = options.usage.open();
    out.stream.write(`${JSON.stringify(summary, null, 2)}\n`);
    await out.commit();
  }
  return { summary, exitCode: written.failed > 0 ? 1 : 0 };
}
