/**
 * The answer stage: stream records (loop.ts), turn each into a request
 * (records.ts), skip what an earlier run finished (the journal), send
 * identical requests once (dedup.ts), pace and retry every attempt
 * (send.ts, limiter.ts), and journal each finished record. It ends in a
 * verdict, never an exception: a storage failure, a lost lock or a bug
 * stops the records in hand and says why.
 */
import { setMaxListeners } from "node:events";
import { TypedEvalError } from "../api/errors.js";
import type { Evaluator } from "../evaluator/evaluator.js";
import type { Logger } from "../logging/logger.js";
import type { Job } from "../records/job.js";
import { prepareItem, type Shard } from "./input/requests.js";
import type { Source, SourceItem } from "../records/source.js";
import { FailureWatch } from "./output/summary.js";
import { costOf } from "../records/usage.js";
import type { RunLimiter } from "./send/limiter.js";
import { forEachBounded } from "./send/loop.js";
import { AbortRun, Sender, type Outcome, type SendCounts } from "./send/send.js";
import { Dedup } from "./state/dedup.js";
import type { DoneIndex, Entry, ErrorEntry } from "./state/journal.js";
import { InputChangedError, isStorageFailure, LockLostError, type Verdict, SourceError } from "../api/verdict.js";

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

/** Where finished records go: the journal (a local file; a test may put a failing one in its place). */
export interface JournalSink {
  append(entry: Entry): void;
  close(): void;
}

/** What the answer stage needs of a run's options. */
export interface AnswerOptions {
  job: Job;
  /** The journal's local file: a resumed run primes its dedup cache from it. */
  journalPath: string;
  source: Source;
  evaluator: Evaluator;
  limiter: RunLimiter;
  concurrency: number;
  shard?: Shard | undefined;
  pricePerMillion: number;
  maxRetries?: number | undefined;
  timeoutMs?: number | undefined;
  dedupCache?: number | undefined;
  maxFailuresInARow?: number | undefined;
  earlyFailures?: number | undefined;
  stop?: AbortSignal | undefined;
  graceMs?: number | undefined;
  logger: Logger;
  onProgress?: ((progress: RunProgress) => void) | undefined;
  /** Checked before each record is sent and once at the end: throws LockLostError when another run took the journal over. */
  fence?: (() => void) | undefined;
}

export interface AnswerStats {
  read: number;
  answered: number;
  failed: number;
  resumed: number;
  otherShards: number;
  inputTokens: number;
}

/** How the answer stage ended: `verdict` undefined means every record of the input (or shard) is in the journal. */
export interface Answered {
  stats: AnswerStats;
  sent: SendCounts;
  started: number;
  verdict?: Verdict;
  reason?: string;
  /** The first records all failed for one reason, so far (named even when the input is shorter than the watch's window). */
  sameReason: string | undefined;
}

/** The first records all failed for one reason: nothing later will do better. */
class AllFailed extends Error {
  override name = "AllFailed";
}

/** The verdict a record's unexpected error stops the run with. */
function verdictOfTaskError(error: unknown): { verdict: Verdict; reason: string } {
  if (error instanceof AbortRun) return { verdict: "aborted", reason: error.message };
  if (error instanceof AllFailed) return { verdict: "all-failed", reason: error.message };
  if (error instanceof LockLostError) return { verdict: "lock-lost", reason: error.message };
  if (isStorageFailure(error)) return { verdict: "storage-unavailable", reason: (error as Error).message };
  return { verdict: "internal-error", reason: (error as Error).message };
}

/** Answers every record not done yet, journaling each; ends in a verdict (or none: complete). */
export async function answerRecords(options: AnswerOptions, journal: JournalSink, done: DoneIndex, identity: string): Promise<Answered> {
  const { job, source, evaluator, limiter, logger } = options;
  const started = Date.now();
  const stats: AnswerStats = { read: 0, answered: 0, failed: 0, resumed: 0, otherShards: 0, inputTokens: 0 };
  const abort = new AbortController();
  // Every request in flight listens on this one signal: as many listeners as --concurrency, by design.
  setMaxListeners(Math.max(10, options.concurrency * 2 + 10), abort.signal);
  const sender = new Sender({
    evaluator,
    limiter,
    maxRetries: options.maxRetries ?? RUN_DEFAULTS.maxRetries,
    timeoutMs: options.timeoutMs,
    signal: abort.signal,
    // Checked again at the wire, after the limiter's wait: a run paused there must not send once its lock is gone.
    fence: { assertHeld: () => options.fence?.() },
  });
  const sent = sender.counts;
  const dedup = new Dedup(options.dedupCache ?? RUN_DEFAULTS.dedupCache);
  // A resumed run copies what earlier runs answered, as one uninterrupted run would have: the same output file.
  if (done.size > 0) await dedup.prime(options.journalPath);
  const watch = new FailureWatch(options.earlyFailures ?? RUN_DEFAULTS.earlyFailures);
  const fence = options.fence ?? (() => undefined);

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
      fence();
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

  let reason: string | undefined;
  let verdict: Verdict | undefined;
  const stopWith = (why: string, as: Verdict, error: unknown) => {
    if (verdict === undefined) {
      reason = why;
      verdict = as;
    }
    abort.abort(error);
  };
  // What this run spent, journaled as it goes: a killed run's requests and time are not lost.
  const spent = { at: started, requests: 0, retries: 0, rateLimited: 0, overloaded: 0, wastedInput: 0 };
  const journalSpending = (final = false) => {
    const now = Date.now();
    if (!final && sent.requests === spent.requests) return;
    try {
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
    } catch (error) {
      // The journal's store failed between records: the same verdict as a record's failed append.
      const end = verdictOfTaskError(error);
      stopWith(end.reason, end.verdict, error);
      return;
    }
    Object.assign(spent, { at: now, ...sent });
  };
  const timer = setInterval(report, 500);
  const spendTimer = setInterval(() => journalSpending(), SPEND_INTERVAL_MS);
  try {
    const end = await forEachBounded(source.items, options.concurrency, processItem, {
      stop: options.stop,
      graceMs: options.graceMs ?? RUN_DEFAULTS.graceMs,
      halted: () => verdict !== undefined,
      onTaskError: (error) => {
        if (abort.signal.aborted && verdict !== undefined) return;
        const stopped = verdictOfTaskError(error);
        if (stopped.verdict === "internal-error") logger.debug({ err: error }, "record processing failed");
        stopWith(stopped.reason, stopped.verdict, error);
      },
      onSourceError: (error) => {
        // The source itself failed (a CSV syntax error, invalid UTF-8, a gzip or network error): stop, keep what finished.
        const as =
          error instanceof InputChangedError
            ? "input-changed"
            : error instanceof SourceError
              ? error.absent
                ? "no-input"
                : "bad-input"
              : isStorageFailure(error)
                ? "storage-unavailable"
                : "aborted";
        stopWith((error as Error).message, as, error);
      },
      onGraceOver: () => abort.abort(new Error("the grace period ran out")),
    }).catch(() => "halted" as const);
    if (end === "stopped" && verdict === undefined) {
      reason = "the records in flight finished and are kept";
      verdict = "stopped";
    }
  } finally {
    clearInterval(timer);
    clearInterval(spendTimer);
    report();
  }
  journalSpending(true);
  if (verdict === undefined) {
    // Done means every record taken is in the journal: one left out (a stop racing the last records) is a stop, not done.
    const finished = stats.answered + stats.failed + stats.resumed + stats.otherShards;
    if (finished < stats.read) {
      verdict = options.stop?.aborted ? "stopped" : "internal-error";
      reason = `${stats.read - finished} of the records read did not finish; the journal keeps the others`;
    }
  }
  if (verdict === undefined) {
    try {
      fence();
    } catch (error) {
      verdict = "lock-lost";
      reason = (error as Error).message;
    }
  }
  return { stats, sent, started, sameReason: watch.sameReason(), ...(verdict !== undefined ? { verdict, reason: reason ?? "" } : {}) };
}
