/**
 * A run's usage summary: this invocation's counts, every earlier run's (from
 * the journal), the outputs' totals, the models that answered them and the
 * journal entries set aside.
 */
import { totalVariation } from "../../calibration/maps.js";
import type { Job } from "../../records/job.js";
import type { Verdict } from "../../api/verdict.js";
import type { RunEntry } from "../state/journal.js";
import type { WrittenCounts } from "./outputs.js";
import type { PaceReport } from "../send/pacing.js";
import type { SendCounts } from "../send/send.js";
import type { AnswerStats } from "../answer.js";
import { costOf, emptySummary, finish, type UsageSummary } from "../../records/usage.js";
import { addSums, noBilling, type BillingSums } from "../../api/billing.js";
import { formatOfRows } from "../../api/prompt-format.js";

export interface ThisRun {
  started: number;
  seconds: number;
  stats: AnswerStats;
  sent: SendCounts;
  /** What this run's answered requests were billed, against their characters. */
  billed: BillingSums;
  pace: PaceReport;
}

export interface SummaryBase {
  job: Job;
  jobName?: string | undefined;
  identity: string;
  /** The versioned id of the model that ran, when the evaluator knows it (embedded models). */
  model?: string | undefined;
  /** The prompt format of the model's requests, when the evaluator renders them (embedded models). */
  promptFormat?: string | undefined;
  price: number;
  input: string;
  output: string;
  /** Earlier runs of this output, from the journal. */
  runs: readonly Omit<RunEntry, "k" | "started">[];
  /** Journal entries no record of this input asks for now, set aside (never written), and their answers' tokens. */
  setAside?: { otherVersions: number; notInInput: number; inputTokens: number; outputTokens: number } | undefined;
  /** How the run picked part of its input (`--limit 100`, `--shard 2/4`): journal entries of records it did not pick are not "no longer in the input". */
  selection?: string | undefined;
  thisRun: ThisRun;
}

export interface Written {
  written: WrittenCounts;
  calibrationSource: string;
  reviewFile: string | undefined;
}

/** The usage summary: of the output when `outputs` were written, else (a run that stopped early) of what the journal holds so far. */
export function runSummary(base: SummaryBase, outputs: Written | undefined, status: Verdict): UsageSummary {
  const { stats } = base.thisRun;
  // The model that ran, not the alias asked for: the one model every written row names (this run's answers, for a run that
  // wrote no outputs), else the evaluator's versioned id.
  const models = Object.keys(outputs ? outputs.written.models : stats.models);
  const answeredBy = models.length === 1 ? models[0] : undefined;
  const summary = emptySummary(answeredBy ?? base.model ?? base.job.model, base.price);
  if (summary.model !== base.job.model) summary.requested_model = base.job.model;
  summary.status = status;
  summary.model_identity = base.identity;
  if (base.promptFormat) summary.prompt_format = base.promptFormat;
  if (base.jobName) summary.job = base.jobName;
  summary.input = base.input;
  summary.output = base.output;
  summary.records.read = stats.read;
  summary.records.resumed = stats.resumed;
  summary.records.other_shards = stats.otherShards;
  const aside = base.setAside;
  if (aside)
    summary.set_aside = {
      other_versions: aside.otherVersions,
      // A run over part of the input cannot tell a record it did not pick from one deleted: both are "not selected".
      not_in_input: base.selection ? 0 : aside.notInInput,
      ...(base.selection ? { not_selected: aside.notInInput, selection: base.selection } : {}),
      input_tokens: aside.inputTokens,
      output_tokens: aside.outputTokens,
    };
  summary.this_run = thisRunOf(base);
  addRuns(summary, base);
  if (outputs) addOutputs(summary, outputs);
  else {
    summary.records.answered = stats.answered + stats.resumed;
    summary.records.failed = stats.failed;
    summary.tokens.input = stats.inputTokens;
  }
  // Paid is paid: the answers set aside (their records edited, or gone from the input) were paid for too.
  if (outputs && aside) {
    summary.tokens.input += aside.inputTokens;
    summary.tokens.output += aside.outputTokens;
  }
  return finish(summary);
}

/** This invocation's own figures. */
function thisRunOf(base: SummaryBase): NonNullable<UsageSummary["this_run"]> {
  const { stats, sent, seconds, pace } = base.thisRun;
  return {
    started: new Date(base.thisRun.started).toISOString(),
    seconds,
    records: { read: stats.read, answered: stats.answered, failed: stats.failed, resumed: stats.resumed },
    ...(Object.keys(stats.models).length > 0 ? { answered_by: stats.models } : {}),
    requests: { sent: sent.requests, retries: sent.retries, rate_limited: sent.rateLimited, overloaded: sent.overloaded },
    tokens: { input: stats.inputTokens, wasted_input: sent.wastedInput },
    cost_usd: costOf(stats.inputTokens + sent.wastedInput, base.price),
    pace: { lowest: pace.lowest, mean: pace.mean, seconds_below_limit: pace.seconds_below_limit, cuts: pace.cuts },
  };
}

/** Requests, wasted tokens, time and billing figures of every run of this output (the journal's) and this one. */
function addRuns(summary: UsageSummary, base: SummaryBase): void {
  const { sent, seconds } = base.thisRun;
  const billing = addSums(noBilling(), base.thisRun.billed);
  for (const run of base.runs) if (run.billing) addSums(billing, run.billing);
  if (billing.requests > 0) summary.billing = billing;
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
}

/** What the written outputs hold: their rows, tokens and models, the calibration applied, the review file. */
function addOutputs(summary: UsageSummary, outputs: Written): void {
  const { written } = outputs;
  if (written.calibration) {
    const shares = written.shares;
    const moved = (name: string) => (shares ? totalVariation(shares.before[name] ?? [], shares.after[name] ?? []) : 0);
    summary.calibration = {
      source: outputs.calibrationSource,
      questions: Object.fromEntries(
        [...written.calibration].map(([name, c]) => [name, { method: c.method, temperature: c.temperature, bias: c.bias, moved: moved(name) }]),
      ),
    };
  }
  if (outputs.reviewFile !== undefined) summary.review = { file: outputs.reviewFile, below_threshold: written.review, audit: written.audit };
  summary.records.answered = written.answered;
  summary.records.failed = written.failed;
  summary.records.deduplicated = written.deduplicated;
  if (Object.keys(written.models).length > 0) summary.answered_by = written.models;
  // The rows' own formats: an endpoint names its format (if at all) in each response.
  const format = formatOfRows(written.promptFormats);
  if (format) summary.prompt_format = format;
  if (Object.keys(written.promptFormats).length > 1) summary.prompt_formats = written.promptFormats;
  if (written.duplicateIds) summary.duplicate_ids = written.duplicateIds;
  summary.tokens.input = written.inputTokens;
  summary.tokens.output = written.outputTokens;
}
