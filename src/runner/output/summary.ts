/**
 * How a run ended, and its usage summary: this invocation's counts, every
 * earlier run's (from the journal), and the outputs' totals.
 */
import { totalVariation } from "../../calibration/maps.js";
import type { Job } from "../../records/job.js";
import type { Verdict } from "../../api/verdict.js";
import type { RunEntry } from "../state/journal.js";
import type { WrittenCounts } from "./outputs.js";
import type { PaceReport } from "../send/pacing.js";
import type { SendCounts } from "../send/send.js";
import { costOf, emptySummary, finish, type UsageSummary } from "../../records/usage.js";

/** How a run ended: one of the verdicts of verdict.ts (done, failures, all-failed, no-input, bad-input, aborted, stopped, ...). */
export type RunStatus = Verdict;

/** The status of a run that read its whole input. */
export function statusOf(read: number, written: Pick<WrittenCounts, "answered" | "failed">, maxErrorRate: number): RunStatus {
  if (read === 0) return "no-input";
  const { answered, failed } = written;
  if (failed > 0 && answered === 0) return "all-failed";
  if (failed > 0 && failed / (answered + failed) > maxErrorRate) return "failures";
  return "done";
}

/**
 * Watches the first records that finish: when the first `window` of them all
 * failed for one reason (a wrong state field, the wrong format, a path
 * typo), the rest will too, and the run should stop in seconds, not at dawn.
 * Failures on the endpoint's side are left to the in-a-row abort, which is
 * resumable.
 */
export class FailureWatch {
  private seen = 0;
  private reason: string | undefined;
  private first: string | undefined;
  private decided = false;

  constructor(private readonly window: number) {}

  answered(): void {
    this.decided = true;
  }

  /** The reason the records finished so far all failed for, when they did (however few they are). */
  sameReason(): string | undefined {
    if (this.decided || this.seen === 0) return undefined;
    return `${this.seen === 1 ? "the only record" : `all ${this.seen} records`} failed for the same reason (${this.first})`;
  }

  /** Counts a failure; returns the reason to stop for when the first `window` records all failed alike. */
  failed(status: number, type: string, message: string): string | undefined {
    if (this.decided) return undefined;
    const endpointSide = (status === 0 && type !== "invalid_record") || status === 408 || status === 429 || status >= 500;
    if (endpointSide) {
      this.decided = true;
      return undefined;
    }
    const text = message.replace(/^line \d+: /, "");
    const key = `${type}\u0000${text.replace(/\d+/g, "#")}`;
    if (this.seen === 0) {
      this.reason = key;
      this.first = `${type}: ${text}`;
    } else if (key !== this.reason) {
      this.decided = true;
      return undefined;
    }
    if (++this.seen < this.window) return undefined;
    this.decided = true;
    return `the first ${this.seen} records all failed for the same reason (${this.first}); check the job's state and id fields, --format and the input path`;
  }
}

export interface ThisRun {
  started: number;
  seconds: number;
  stats: { read: number; answered: number; failed: number; resumed: number; otherShards: number; inputTokens: number };
  sent: SendCounts;
  pace: PaceReport;
}

export interface SummaryBase {
  job: Job;
  jobName?: string | undefined;
  identity: string;
  /** The versioned id of the model that ran, when the evaluator knows it (embedded models). */
  model?: string | undefined;
  price: number;
  input: string;
  output: string;
  /** Earlier runs of this output, from the journal. */
  runs: readonly Omit<RunEntry, "k" | "started">[];
  thisRun: ThisRun;
}

export interface Written {
  written: WrittenCounts;
  calibrationSource: string;
  reviewFile: string | undefined;
}

/** The usage summary: of the output when `outputs` were written, else (a run that stopped early) of what the journal holds so far. */
export function runSummary(base: SummaryBase, outputs: Written | undefined, status: RunStatus): UsageSummary {
  const { stats, sent, seconds, pace } = base.thisRun;
  // The model that ran, not the alias asked for: the one model every written row names, else the evaluator's versioned id.
  const answeredBy = outputs?.written.models.length === 1 ? outputs.written.models[0] : undefined;
  const summary = emptySummary(answeredBy ?? base.model ?? base.job.model, base.price);
  if (summary.model !== base.job.model) summary.requested_model = base.job.model;
  summary.status = status;
  summary.model_identity = base.identity;
  if (base.jobName) summary.job = base.jobName;
  summary.input = base.input;
  summary.output = base.output;
  summary.records.read = stats.read;
  summary.records.resumed = stats.resumed;
  summary.records.other_shards = stats.otherShards;
  summary.this_run = {
    started: new Date(base.thisRun.started).toISOString(),
    seconds,
    records: { read: stats.read, answered: stats.answered, failed: stats.failed, resumed: stats.resumed },
    requests: { sent: sent.requests, retries: sent.retries, rate_limited: sent.rateLimited, overloaded: sent.overloaded },
    tokens: { input: stats.inputTokens, wasted_input: sent.wastedInput },
    cost_usd: costOf(stats.inputTokens + sent.wastedInput, base.price),
    pace: { lowest: pace.lowest, mean: pace.mean, seconds_below_limit: pace.seconds_below_limit, cuts: pace.cuts },
  };
  const now = {
    seconds,
    requests: sent.requests,
    retries: sent.retries,
    rate_limited: sent.rateLimited,
    overloaded: sent.overloaded,
    wasted_input_tokens: sent.wastedInput,
  };
  for (const run of [...base.runs, now]) {
    summary.requests.sent += run.requests;
    summary.requests.retries += run.retries;
    summary.requests.rate_limited += run.rate_limited;
    summary.requests.overloaded += run.overloaded;
    summary.tokens.wasted_input += run.wasted_input_tokens;
    summary.seconds += run.seconds;
  }
  if (!outputs) {
    summary.records.answered = stats.answered + stats.resumed;
    summary.records.failed = stats.failed;
    summary.tokens.input = stats.inputTokens;
    return finish(summary);
  }
  const { written } = outputs;
  if (written.calibration) {
    const shares = written.shares;
    summary.calibration = {
      source: outputs.calibrationSource,
      questions: Object.fromEntries(
        [...written.calibration].map(([name, c]) => [
          name,
          {
            method: c.method,
            temperature: c.temperature,
            bias: c.bias,
            moved: shares ? totalVariation(shares.before[name] ?? [], shares.after[name] ?? []) : 0,
          },
        ]),
      ),
    };
  }
  if (outputs.reviewFile !== undefined) summary.review = { file: outputs.reviewFile, below_threshold: written.review, audit: written.audit };
  summary.records.answered = written.answered;
  summary.records.failed = written.failed;
  summary.records.deduplicated = written.deduplicated;
  if (written.duplicateIds) summary.duplicate_ids = written.duplicateIds;
  summary.tokens.input = written.inputTokens;
  summary.tokens.output = written.outputTokens;
  return finish(summary);
}
