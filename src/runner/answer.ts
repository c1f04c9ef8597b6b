/**
 * The answer stage: stream records (send/loop.ts), take each in input order
 * (input/order.ts: what the outputs will hold), turn it into a request
 * (input/requests.ts), skip what the journal already answered for this very
 * request (state/index.ts), send identical requests once (state/dedup.ts),
 * pace and retry every attempt (send/send.ts, send/limiter.ts), and journal
 * each finished record. It ends in facts, never an exception: whether the
 * input's end was reached, which records have no result yet, and the first
 * thing that ended it early (send/ending.ts).
 */
import { ContextTooSmallError } from "../evaluator/evaluator.js";
import { contextSizeFor } from "../engines/llama.js";
import { createHash } from "node:crypto";
import { TypedEvalError } from "../api/errors.js";
import type { Evaluator } from "../evaluator/evaluator.js";
import type { Logger } from "../logging/logger.js";
import type { Job } from "../records/job.js";
import { prepareItem, type Shard } from "./input/requests.js";
import type { Source, SourceItem } from "../records/source.js";
import { costOf } from "../records/usage.js";
import type { RunLimiter } from "./send/limiter.js";
import { forEachBounded } from "./send/loop.js";
import { NotSent, Sender, type Outcome, type SendCounts } from "./send/send.js";
import { Dedup } from "./state/dedup.js";
import { keptHash, type JournalIndex } from "./state/index.js";
import type { AnswerEntry, Entry, ErrorEntry } from "./state/journal.js";
import { classify, type Ending, type Stage } from "../api/verdict.js";
import { InputOrder } from "./input/order.js";
import { RunEnding } from "./send/ending.js";
import { RecordWatch } from "./send/watch.js";
import { SpendingJournal } from "./state/spending.js";
import type { EvaluatorRequest } from "../api/schema.js";
import type { BillingSums } from "../api/billing.js";

/** The defaults of a run, in one place: `runJob` falls back to them and the `run` command's flags show them. */
export const RUN_DEFAULTS = {
  maxRetries: 6,
  maxFailuresInARow: 50,
  maxErrorRate: 0,
  earlyFailures: 20,
  graceMs: 30_000,
  dedupCache: 50_000,
} as const;

export { SPEND_INTERVAL_MS } from "./state/spending.js";

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
  /** Appends an entry; returns where it lies in the journal. */
  append(entry: Entry): number;
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
  /** The first signal: take no more records, let those in flight finish within the grace. */
  stop?: AbortSignal | undefined;
  /** A second signal: stop at once. */
  stopNow?: AbortSignal | undefined;
  graceMs?: number | undefined;
  logger: Logger;
  onProgress?: ((progress: RunProgress) => void) | undefined;
  /** Checked before each record is sent and once at the end: throws LockLostError when another run took the journal over. */
  fence?: (() => void) | undefined;
  /** Called once with the stage's first ending, when something ends it early. */
  onEnding?: ((ending: Ending) => void) | undefined;
}

export interface AnswerStats {
  read: number;
  answered: number;
  failed: number;
  resumed: number;
  otherShards: number;
  inputTokens: number;
  /** This run's answers by the model that gave them (the endpoint's versioned name). */
  models: Record<string, number>;
}

/** Counts before any record is read. */
export function noStats(): AnswerStats {
  return { read: 0, answered: 0, failed: 0, resumed: 0, otherShards: 0, inputTokens: 0, models: {} };
}

/** What the answer stage found: the facts the run's verdict is decided from (`decide` in api/verdict.ts). */
export interface Answered {
  stats: AnswerStats;
  sent: SendCounts;
  /** What this run's answered requests were billed, against their characters. */
  billed: BillingSums;
  started: number;
  /** When the stage began on the monotonic clock (`performance.now()`): elapsed time from it is never negative, whatever the wall clock does. */
  startedMonotonic: number;
  /** The records of the input as read, in order: what the outputs hold. */
  order: InputOrder;
  /** The reader reached the input's real end. */
  inputEnded: boolean;
  /** Records read without a journaled result for their current request. */
  unfinished: number;
  /** What ended the stage early, if anything did. */
  ended: Ending | undefined;
  /** The first records all failed for one reason, so far (named even when the input is shorter than the watch's window). */
  sameReason: string | undefined;
}

/** A record taken from the input and due to be asked: its key in the index and its request. */
interface Asking {
  item: SourceItem;
  key: number;
  id: string;
  h: string;
  request: EvaluatorRequest;
  keep: Record<string, unknown> | undefined;
}

/** Answers every record not answered yet for its current request, journaling each; ends in facts, never an exception. */
export function answerRecords(options: AnswerOptions, journal: JournalSink, index: JournalIndex, identity: string): Promise<Answered> {
  return new AnswerStage(options, journal, index, identity).run();
}

class AnswerStage {
  private readonly stats = noStats();
  private readonly order = new InputOrder();
  private readonly ending: RunEnding;
  private readonly sender: Sender;
  private readonly dedup: Dedup;
  private readonly watch: RecordWatch;
  private readonly spending: SpendingJournal;
  private readonly started = Date.now();
  private readonly startedMonotonic = performance.now();

  constructor(
    private readonly options: AnswerOptions,
    private readonly journal: JournalSink,
    private readonly index: JournalIndex,
    private readonly identity: string,
  ) {
    this.ending = new RunEnding(options.graceMs ?? RUN_DEFAULTS.graceMs, { stop: options.stop, now: options.stopNow, concurrency: options.concurrency });
    this.sender = new Sender({
      evaluator: options.evaluator,
      limiter: options.limiter,
      maxRetries: options.maxRetries ?? RUN_DEFAULTS.maxRetries,
      timeoutMs: options.timeoutMs,
      signal: this.ending.abort.signal,
      // Whatever ends the run drops what waits short of the wire at once: the grace is for requests in flight, not queued ones.
      halt: this.ending.halt.signal,
      // Checked again at the wire, after the limiter's wait: a run paused there must not send once its lock is gone.
      fence: { assertHeld: () => options.fence?.() },
    });
    this.dedup = new Dedup(options.dedupCache ?? RUN_DEFAULTS.dedupCache);
    this.watch = new RecordWatch(options.earlyFailures ?? RUN_DEFAULTS.earlyFailures, options.maxFailuresInARow ?? RUN_DEFAULTS.maxFailuresInARow);
    this.spending = new SpendingJournal(journal, this.sender.counts, this.started, this.sender.billed);
  }

  async run(): Promise<Answered> {
    // A resumed run copies what earlier runs answered, as one uninterrupted run would have: the same output file.
    if (this.index.size > 0) await this.dedup.prime(this.options.journalPath);
    const timers = [setInterval(() => this.report(), 500), setInterval(() => this.spend(false), this.spending.intervalMs)];
    let inputEnded = false;
    try {
      ({ inputEnded } = await forEachBounded(this.options.source.items, this.options.concurrency, {
        halt: this.ending.halt.signal,
        take: (item) => this.take(item),
        onTaskError: (error) => this.fail(error, "answer"),
        onSourceError: (error) => this.fail(error, "answer"),
      }));
    } finally {
      for (const timer of timers) clearInterval(timer);
      this.ending.dispose();
      this.report();
    }
    this.spend(true);
    this.checkFence();
    return this.facts(inputEnded);
  }

  private facts(inputEnded: boolean): Answered {
    let unfinished = 0;
    for (let i = 0; i < this.order.length; i++) if (!this.index.hasResult(this.order.keyAt(i))) unfinished++;
    const { stats, order, started } = this;
    return {
      stats,
      sent: this.sender.counts,
      billed: this.sender.billed,
      started,
      startedMonotonic: this.startedMonotonic,
      order,
      inputEnded,
      unfinished,
      ended: this.ending.ended,
      sameReason: this.watch.sameReason(),
    };
  }

  /** Ends the stage on an error met at `stage` (the first ending wins). */
  private fail(error: unknown, stage: Stage): void {
    // A request dropped unsent because the run is ending: its record has no result, and the ending is told already.
    if (error instanceof NotSent) return;
    const ending = classify(error, stage, { paid: true });
    if (ending.verdict === "internal-error") this.options.logger.debug({ err: error }, "answering a record failed unexpectedly");
    const first = this.ending.ended === undefined;
    this.ending.end(ending, error);
    if (first) this.options.onEnding?.(ending);
  }

  /** Done only with the lock still ours: a run that lost it in its last moments writes nothing. */
  private checkFence(): void {
    if (this.ending.ended) return;
    try {
      this.options.fence?.();
    } catch (error) {
      this.fail(error, "answer");
    }
  }

  /**
   * Takes a record read, in input order: it joins the order the outputs
   * follow, and gets a task unless it needs none (another shard's, answered
   * already for this request, or a repeat of a record taken before).
   */
  private take(item: SourceItem): (() => Promise<void>) | undefined {
    const { job, shard } = this.options;
    this.stats.read++;
    const prepared = prepareItem(job, item, shard, this.identity);
    if (prepared.kind === "other-shard") return void this.stats.otherShards++;
    if (prepared.kind === "invalid") {
      // An unusable record fails under this very problem: its key carries the message, so a fixed record is a new one.
      const h = invalidHash(item, prepared.message);
      const key = this.index.key(prepared.id, h);
      this.order.push(key, item.line, item.source);
      if (!this.index.see(key)) return undefined;
      return async () => this.failed(item, key, prepared.id, h, { status: prepared.status, type: prepared.type, message: prepared.message }, false);
    }
    const h = prepared.hash.slice(0, 16);
    const key = this.index.key(prepared.id, h);
    this.order.push(key, item.line, item.source);
    if (!this.index.see(key)) return undefined;
    if (this.index.isAnswered(key)) return void this.resume(item, key, prepared.id, h, prepared.keep);
    const keep = job.keep ? prepared.keep : undefined;
    const asking: Asking = { item, key, id: prepared.id, h, request: prepared.request, keep };
    return () => this.ask(asking);
  }

  /** A record answered before for this same request: kept; its kept fields journaled anew when the job keeps others now or their values were edited. */
  private resume(item: SourceItem, key: number, id: string, h: string, keep: Record<string, unknown>): void {
    this.stats.resumed++;
    const hash = keptHash(keep);
    if (!this.index.staleKeep(key, hash)) return;
    const offset = this.append({ k: "keep", seq: item.seq, id, h, keep });
    if (offset === undefined) return;
    this.index.rekept.set(key, offset);
    this.index.markKeep(key, hash);
  }

  /** Sends a record's request (or copies an identical one's answer) and journals the outcome. */
  private async ask(asking: Asking): Promise<void> {
    const { item, key, id, h, request } = asking;
    // Identical requests are sent once (state/dedup.ts): a copy names its original by id and carries its label mass, with zero usage.
    const { outcome, copyOf } = await this.dedup.answer(h, id, () => this.send(request));
    if (!outcome.ok)
      return this.failed(
        item,
        key,
        id,
        h,
        { status: outcome.status, type: outcome.error, message: `line ${item.line}: ${outcome.message}` },
        copyOf === undefined,
      );
    const { response, labelMass } = outcome.evaluation;
    const entry: AnswerEntry = {
      k: "answer",
      seq: item.seq,
      line: item.line,
      source: item.source,
      id,
      h,
      ...(asking.keep ? { keep: asking.keep } : {}),
      model: response.model,
      answers: response.answers,
      usage: response.usage,
      ...(labelMass ? { label_mass: labelMass } : {}),
      ...(copyOf !== undefined ? { dedup_of: copyOf } : {}),
    };
    const offset = this.append(entry);
    if (offset === undefined) return;
    this.index.answered(key, offset, copyOf !== undefined);
    this.stats.answered++;
    this.stats.models[response.model] = (this.stats.models[response.model] ?? 0) + 1;
    this.stats.inputTokens += response.usage.input_tokens;
    this.watch.answered();
  }

  /** One attempt series through the limiter; a request the evaluator refuses to estimate fails as itself. */
  private send(request: EvaluatorRequest): Promise<Outcome> {
    let estimate: number;
    try {
      estimate = this.options.evaluator.estimateInputTokens(request);
    } catch (error) {
      const typed = error instanceof TypedEvalError ? error : undefined;
      // A record longer than the first window's: its own error, saying which setting would take it.
      const message =
        error instanceof ContextTooSmallError
          ? `${error.message} Pass --context-size ${contextSizeFor(error.need)} or more to answer it.`
          : (error as Error).message;
      return Promise.resolve({ ok: false, status: typed?.status ?? 0, error: typed?.code ?? "internal_error", message } as const);
    }
    this.options.fence?.();
    return this.sender.send(request, estimate);
  }

  /** Journals a record's failure; the watch may end the run (the endpoint down, or every record failing alike). */
  private failed(item: SourceItem, key: number, id: string, h: string, why: Pick<ErrorEntry, "status" | "type" | "message">, sent: boolean): void {
    const offset = this.append({ k: "error", seq: item.seq, line: item.line, source: item.source, id, h, ...why });
    if (offset === undefined) return;
    this.index.failed(key, offset, true);
    this.stats.failed++;
    this.watch.failed(why.status, why.type, why.message, sent);
  }

  /** Appends to the journal; nothing once another run holds it (undefined then). */
  private append(entry: Entry): number | undefined {
    if (this.ending.lockLost) return undefined;
    return this.journal.append(entry);
  }

  /** What this run spent, journaled as it goes: a killed run's requests and time are not lost. */
  private spend(final: boolean): void {
    if (this.ending.lockLost) return;
    try {
      this.spending.record(final);
    } catch (error) {
      // The journal's store failed between records: the same ending as a record's failed append.
      this.fail(error, "answer");
    }
  }

  private report(): void {
    const { stats, options } = this;
    const progress = options.source.progress();
    options.onProgress?.({
      read: stats.read,
      answered: stats.answered,
      failed: stats.failed,
      resumed: stats.resumed,
      inputTokens: stats.inputTokens,
      costUsd: costOf(stats.inputTokens + this.sender.counts.wastedInput, options.pricePerMillion),
      bytes: progress.bytes,
      totalBytes: progress.total,
      pace: options.limiter.paceReport().current,
    });
  }
}

/** The request hash of a record that makes no request: its place and its problem (each such record is its own, failed anew every run). */
function invalidHash(item: SourceItem, message: string): string {
  return createHash("sha256").update(`invalid\n${item.source}\n${item.line}\n${message}`).digest("hex").slice(0, 16);
}
