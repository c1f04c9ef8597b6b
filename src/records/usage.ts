/**
 * Usage summaries: what a job read, answered, sent and spent. Written as
 * `<output>.usage.json` and merged by `typed-eval usage` across shards and
 * nights into totals, cost per 1,000 records and a projection. The quality
 * tools read them as a run's provenance.
 */

import { addSums, noBilling, type BillingSums } from "../api/billing.js";
import { formatOfRows, recordedPromptFormat } from "../api/prompt-format.js";

/** Rows whose id repeats an earlier row's (runner/output/duplicate-ids.ts counts them). */
export interface DuplicateIds {
  /** Rows whose id an earlier row (in input order) already had. */
  rows: number;
  /**
   * The first repeats in input order: the id, the line it first appeared on, the line that repeats it, and
   * when the two are in different files (the objects of an S3 prefix), both files.
   */
  examples: { id: string; first_line: number; line: number; first_source?: string; source?: string }[];
}

/** One line for people: how many rows repeat an id, and the first of them (with their files, when two files hold them). */
export function describeDuplicates(d: DuplicateIds): string {
  const where = (e: DuplicateIds["examples"][number]) =>
    e.first_source !== undefined && e.source !== undefined
      ? `${e.first_source} line ${e.first_line} and ${e.source} line ${e.line}`
      : `lines ${e.first_line} and ${e.line}`;
  const shown = d.examples.map((e) => `${JSON.stringify(e.id)} (${where(e)})`).join(", ");
  return `${d.rows.toLocaleString("en-US")} row${d.rows === 1 ? " repeats an id" : "s repeat an id"} an earlier row has, such as ${shown}: every row is kept; assess, calibrate and report key rows by id and line`;
}

export interface UsageSummary {
  /** Schema marker, so `usage` can refuse other JSON. */
  kind: "typed-eval.usage";
  /** How the run ended: its verdict (api/verdict.ts), kept under this name for readers of older summaries. */
  status?: string;
  /** How the run ended: done, failures, all-failed, no-input, bad-input, locked, lock-lost, storage-unavailable, aborted, stopped, internal-error. */
  verdict?: string;
  /** Why, in one line (empty for done). */
  reason?: string;
  /** Where the run's finished records are kept (its journal), when it opened one. */
  journal?: string;
  job?: string;
  input?: string;
  output?: string;
  /** The versioned id of the model that answered (`<name>-<major.minor.patch>`). */
  model: string;
  /** The name the job or `--model` asked for, when it is not `model` (an alias such as `default`). */
  requested_model?: string;
  /** What stands behind the model name (weights, template, endpoint): calibrations are fitted for one identity. */
  model_identity?: string;
  /**
   * The prompt format the rows were read from (`src/api/prompt-format.ts`):
   * the embedded model's (`typed-eval/3`), a remote endpoint's as it names
   * it, else `endpoint`; `mixed` when the rows hold several (`prompt_formats`
   * counts them). A summary without it reads as `unknown`.
   */
  prompt_format?: string;
  prompt_formats?: Record<string, number>;
  price_per_million_input_tokens: number;
  records: {
    read: number;
    answered: number;
    failed: number;
    /** Answered by copying an identical request's answers (paid once). */
    deduplicated: number;
    /** Answered by an earlier run of the same job and kept. */
    resumed: number;
    /** Left to other shards. */
    other_shards: number;
  };
  requests: { sent: number; retries: number; rate_limited: number; overloaded: number };
  tokens: { input: number; output: number; wasted_input: number };
  cost_usd: number;
  seconds: number;
  records_per_second: number;
  tokens_per_second: number;
  /** The calibration applied to the answers, and how far it moved each question's mean label distribution (total variation). */
  calibration?: { source: string; questions: Record<string, { method: string; temperature: number; bias: number[]; moved: number }> };
  /**
   * This invocation alone. The other figures cover every run of this output
   * (its journal): records answered and tokens are the output's, requests and
   * seconds those of every run, killed ones included.
   */
  this_run?: {
    started: string;
    seconds: number;
    records: { read: number; answered: number; failed: number; resumed: number };
    /** This run's answers by the model that gave them: named whatever the verdict, outputs written or not. */
    answered_by?: Record<string, number>;
    requests: { sent: number; retries: number; rate_limited: number; overloaded: number };
    tokens: { input: number; wasted_input: number };
    cost_usd: number;
    /** The pace the endpoint's signals allowed, as a share of the configured limits (1: the limits themselves). */
    pace?: { lowest: number; mean: number; seconds_below_limit: number; cuts: number };
  };
  /** Rows whose id an earlier row already had: all are written; the quality tools key rows by id and line. */
  duplicate_ids?: DuplicateIds;
  /** Each model that answered the output's rows, with its count of rows (`model` is the requested name when there is more than one). */
  answered_by?: Record<string, number>;
  /**
   * Journal entries no record of the input asks for now, set aside and never
   * written: answers or errors for another version of a record (the record or
   * the job changed since), and for records no longer in the input.
   */
  /** Journal entries set aside (never written), and the tokens their answers were paid for: counted in `tokens` and the cost. */
  set_aside?: {
    other_versions: number;
    not_in_input: number;
    /** With `selection`: entries of records this run did not pick (or that left the input: a partial read cannot tell). */
    not_selected?: number;
    /** How the run picked part of its input: `--limit 100`, `--sample 50`, `--shard 2/4`. */
    selection?: string;
    input_tokens?: number;
    output_tokens?: number;
  };
  /** Review routing: rows below their threshold, and rows sampled for audit. */
  review?: { file: string; below_threshold: number; audit: number };
  /**
   * What the answered requests of every run of this output were billed,
   * against the characters of their state and questions: the sums
   * `estimate --from-usage` fits its rates on (api/billing.ts). Absent in
   * summaries written before it, and when no request was answered.
   */
  billing?: BillingSums;
}

export function emptySummary(model: string, price: number): UsageSummary {
  return {
    kind: "typed-eval.usage",
    model,
    price_per_million_input_tokens: price,
    records: { read: 0, answered: 0, failed: 0, deduplicated: 0, resumed: 0, other_shards: 0 },
    requests: { sent: 0, retries: 0, rate_limited: 0, overloaded: 0 },
    tokens: { input: 0, output: 0, wasted_input: 0 },
    cost_usd: 0,
    seconds: 0,
    records_per_second: 0,
    tokens_per_second: 0,
  };
}

/** Cost of input tokens at a price per million (output tokens are free). */
export function costOf(inputTokens: number, pricePerMillion: number): number {
  return (inputTokens * pricePerMillion) / 1_000_000;
}

/** Fills the derived fields (cost, rates) from the counts. */
export function finish(summary: UsageSummary): UsageSummary {
  // Seconds to the millisecond: runs' times summed in binary read 10.844999999999999, not 10.845.
  summary.seconds = Math.round(summary.seconds * 1000) / 1000;
  if (summary.this_run) summary.this_run.seconds = Math.round(summary.this_run.seconds * 1000) / 1000;
  // Paid tokens: those of kept answers plus those of attempts that were sent and lost.
  summary.cost_usd = costOf(summary.tokens.input + summary.tokens.wasted_input, summary.price_per_million_input_tokens);
  const done = summary.records.answered + summary.records.failed;
  summary.records_per_second = summary.seconds > 0 ? done / summary.seconds : 0;
  summary.tokens_per_second = summary.seconds > 0 ? summary.tokens.input / summary.seconds : 0;
  return summary;
}

function money(usd: number): string {
  return usd < 0.01 ? `$${usd.toFixed(6)}` : `$${usd.toFixed(2)}`;
}

/** Lines for people at the end of a run: what this run did, then the output's totals over every run. */
export function describe(s: UsageSummary): string {
  const r = s.records;
  const n = (x: number) => x.toLocaleString("en-US");
  const requests = (q: UsageSummary["requests"]) =>
    `${n(q.sent)} requests (${q.retries} retries, ${q.rate_limited} rate-limited 429, ${q.overloaded} overloaded 529)`;
  const head =
    `${n(r.read)} records: ${n(r.answered)} answered` +
    ` (${r.deduplicated} deduplicated, ${r.resumed} from an earlier run), ${r.failed} failed` +
    (r.other_shards ? `, ${r.other_shards} left to other shards` : "");
  const t = s.this_run;
  const pace =
    t?.pace && t.pace.cuts > 0
      ? `; pace cut ${t.pace.cuts === 1 ? "once" : `${t.pace.cuts} times`}, lowest ${(t.pace.lowest * 100).toFixed(0)}%, mean ${(t.pace.mean * 100).toFixed(0)}% of the limits, ${t.pace.seconds_below_limit.toFixed(1)} s below them`
      : "";
  const now = t ? `this run: ${requests(t.requests)}, ${n(t.tokens.input)} input tokens, ${money(t.cost_usd)}, ${t.seconds.toFixed(1)} s${pace}` : undefined;
  const all = `all runs of this output: ${requests(s.requests)}, ${n(s.tokens.input)} input tokens, ${money(s.cost_usd)}, ${s.seconds.toFixed(1)} s${
    // A run that sent nothing (all resumed or deduplicated) has no speed to speak of.
    s.requests.sent > 0 ? `, ${s.records_per_second.toFixed(1)} records/s` : ""
  }`;
  const repeats = s.duplicate_ids ? [describeDuplicates(s.duplicate_ids)] : [];
  // A run that wrote no outputs names the models of its own answers.
  const by = s.answered_by ?? s.this_run?.answered_by;
  const models = by && Object.keys(by).length > 1 ? [describeModels(by)] : [];
  if (s.prompt_formats) models.push(describeFormats(s.prompt_formats));
  const aside =
    s.set_aside && s.set_aside.other_versions + s.set_aside.not_in_input + (s.set_aside.not_selected ?? 0) > 0 ? [describeSetAside(s.set_aside)] : [];
  return [head, ...models, ...repeats, ...aside, ...(now ? [now] : []), all].join("\n");
}

/** "a (3), b (1,200)": rows counted by what they came from. */
const rowCounts = (counts: Record<string, number>) =>
  Object.entries(counts)
    .map(([name, rows]) => `${name} (${rows.toLocaleString("en-US")})`)
    .join(", ");

/** One line for people: the rows came from more than one model, and how many from each. */
export function describeModels(answeredBy: Record<string, number>): string {
  return `warning: the rows were answered by ${Object.keys(answeredBy).length} models: ${rowCounts(answeredBy)}; the endpoint's model changed during this run or since an earlier run of this output`;
}

/** One line for people: the rows were read from more than one prompt format, and how many from each. */
function describeFormats(formats: Record<string, number>): string {
  return `warning: the rows were read from ${Object.keys(formats).length} prompt formats: ${rowCounts(formats)}; the endpoint's prompt changed during this run or since an earlier run of this output`;
}

/** One line for people: journal entries that no record of the input asks for now. */
function describeSetAside(aside: NonNullable<UsageSummary["set_aside"]>): string {
  const paid = aside.input_tokens ? ` (their ${aside.input_tokens.toLocaleString("en-US")} input tokens were paid, and are counted below)` : "";
  const gone =
    aside.selection !== undefined
      ? `${(aside.not_selected ?? 0).toLocaleString("en-US")} for records this run did not select (${aside.selection}) or no longer in the input`
      : `${aside.not_in_input.toLocaleString("en-US")} for records no longer in the input`;
  return `set aside from the journal: ${aside.other_versions.toLocaleString("en-US")} entries for other versions of records (the job or the record changed), ${gone}${paid}`;
}

/** Whether JSON is a usage summary. */
export function isSummary(json: unknown): json is UsageSummary {
  return !!json && typeof json === "object" && (json as { kind?: unknown }).kind === "typed-eval.usage";
}

/** What a set of summaries cost per record and would cost for more: one job and model's, or their mix's. */
interface PerRecord {
  cost_per_1000_records: number;
  input_tokens_per_record: number;
  projection?: { records: number; input_tokens: number; cost_usd: number };
}

/** The summaries of one job run on one model: what a projection may rest on. */
export interface UsageGroup extends PerRecord {
  /** The job's name (its file without folder or `.json`), "(no job named)" for summaries that name none. */
  job: string;
  model: string;
  files: number;
  records: { read: number; answered: number; failed: number };
  cost_usd: number;
}

export interface MergedUsage extends PerRecord {
  files: number;
  models: string[];
  totals: UsageSummary;
  /** Each job and model on its own, with its own cost per record and projection. */
  groups: UsageGroup[];
  /** Set when the summaries' rows were read from more than one prompt format: which, with their rows (`totals.prompt_formats`). */
  formats?: string;
  /**
   * Said when the summaries are of more than one job or model: a projection
   * of their mix holds only for the same mix, so `projection` is then given
   * per group only.
   */
  warning?: string;
}

/** A summary's job as a name: its file without folder or `.json` (the same job from two checkouts is one job). */
function jobName(summary: UsageSummary): string {
  if (summary.job === undefined) return "(no job named)";
  return summary.job.replace(/^.*[\\/]/, "").replace(/\.json$/i, "");
}

/** Cost and tokens per answered record, and the projection for `records` of them. */
function perRecord(answered: number, cost: number, inputTokens: number, records: number | undefined): PerRecord {
  const perRecordCost = answered > 0 ? cost / answered : 0;
  const perRecordTokens = answered > 0 ? inputTokens / answered : 0;
  return {
    cost_per_1000_records: perRecordCost * 1000,
    input_tokens_per_record: perRecordTokens,
    ...(records === undefined ? {} : { projection: { records, input_tokens: Math.round(perRecordTokens * records), cost_usd: perRecordCost * records } }),
  };
}

/** Adds a summary to its job and model's group. */
function addToGroup(groups: Map<string, UsageGroup & { inputTokens: number }>, s: UsageSummary): void {
  const job = jobName(s);
  const key = JSON.stringify([job, s.model]);
  const group = groups.get(key) ?? {
    job,
    model: s.model,
    files: 0,
    records: { read: 0, answered: 0, failed: 0 },
    cost_usd: 0,
    inputTokens: 0,
    cost_per_1000_records: 0,
    input_tokens_per_record: 0,
  };
  group.files++;
  group.records.read += s.records.read;
  group.records.answered += s.records.answered;
  group.records.failed += s.records.failed;
  group.cost_usd += s.cost_usd;
  group.inputTokens += s.tokens.input;
  groups.set(key, group);
}

/**
 * Adds summaries together; the projection scales what past runs really used
 * per answered record. Summaries of different jobs or models are also split
 * into groups, each projected on its own, and the merge says so: a job of
 * five questions and one of one, or a model at another price, have different
 * costs per record, and one projection of their mix would hold only for that
 * same mix.
 */
export function mergeSummaries(summaries: readonly UsageSummary[], projectRecords?: number): MergedUsage {
  const first = summaries[0];
  const totals = emptySummary(first?.model ?? "", first?.price_per_million_input_tokens ?? 0);
  let cost = 0;
  const groups = new Map<string, UsageGroup & { inputTokens: number }>();
  // Rows by the prompt format they were read from (a summary before formats were named: unknown).
  const formats: Record<string, number> = {};
  for (const s of summaries) {
    for (const [format, rows] of Object.entries(s.prompt_formats ?? { [recordedPromptFormat(s.prompt_format)]: s.records.answered }))
      formats[format] = (formats[format] ?? 0) + rows;
    for (const key of Object.keys(totals.records) as (keyof UsageSummary["records"])[]) totals.records[key] += s.records[key];
    for (const key of Object.keys(totals.requests) as (keyof UsageSummary["requests"])[]) totals.requests[key] += s.requests[key];
    for (const key of Object.keys(totals.tokens) as (keyof UsageSummary["tokens"])[]) totals.tokens[key] += s.tokens[key];
    totals.seconds += s.seconds;
    cost += s.cost_usd;
    if (s.billing) totals.billing = addSums(totals.billing ?? noBilling(), s.billing);
    addToGroup(groups, s);
  }
  finish(totals);
  // Summaries may carry different prices: the total is the sum of their costs.
  totals.cost_usd = cost;
  const format = formatOfRows(formats);
  if (format) totals.prompt_format = format;
  if (Object.keys(formats).length > 1) totals.prompt_formats = formats;
  const mixed = groups.size > 1;
  const split = [...groups.values()].map(({ inputTokens, ...group }) => ({
    ...group,
    ...perRecord(group.records.answered, group.cost_usd, inputTokens, projectRecords),
  }));
  const jobs = new Set(split.map((g) => g.job)).size;
  const models = new Set(split.map((g) => g.model)).size;
  const overall = perRecord(totals.records.answered, cost, totals.tokens.input, mixed ? undefined : projectRecords);
  return {
    files: summaries.length,
    models: [...new Set(summaries.map((s) => s.model))],
    totals,
    ...overall,
    groups: split,
    ...(totals.prompt_formats ? { formats: rowCounts(totals.prompt_formats) } : {}),
    ...(mixed
      ? {
          warning: `these summaries are of ${jobs} job${jobs === 1 ? "" : "s"} and ${models} model${models === 1 ? "" : "s"}: their costs per record differ, so each job and model is ${projectRecords === undefined ? "shown" : "projected"} on its own (a projection of their mix would hold only for the same mix)`,
        }
      : {}),
  };
}
