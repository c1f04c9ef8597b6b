/**
 * `typed-eval estimate` and `run --dry-run`: read the input, build every
 * request, count tokens, and report requests, tokens, cost and the time the
 * limits allow. No model is called. Tokens are counted exactly with an
 * embedded model's tokenizer. A remote endpoint frames each request its own
 * way (system text, question blocks, option labels), which characters / 4
 * of the request cannot see: with earlier usage summaries (`--from-usage`,
 * and the output's own), the count is projected from what those runs were
 * billed per character of state and of questions (api/billing.ts); without
 * them it is characters / 4, said to leave the framing out, beside what the
 * embedded model's rendering of the same requests would come to.
 */
import { existsSync } from "node:fs";
import { InvocationError } from "../api/errors.js";
import { readJsonFile } from "../api/json.js";
import { addSums, billingRates, noBilling, projectTokens, requestChars, type BillingRates } from "../api/billing.js";
import type { EvaluatorRequest } from "../api/schema.js";
import type { Evaluator } from "../evaluator/evaluator.js";
import { embeddedRenderingChars } from "../evaluator/remote.js";
import type { Job } from "../records/job.js";
import { prepareItem, type Shard } from "./input/requests.js";
import type { Source } from "../records/source.js";
import { costOf, isSummary } from "../records/usage.js";
import { MIXED_PROMPT_FORMATS, recordedPromptFormat } from "../api/prompt-format.js";

export interface Estimate {
  records: number;
  invalid: number;
  otherShards: number;
  requests: number;
  duplicates: number;
  inputTokens: number;
  costUsd: number;
  /** Seconds the rate limits allow at best. */
  seconds: number;
  exact: boolean;
  /** How `inputTokens` was counted: the model's tokenizer, characters / 4 of the requests, or projected from what earlier runs were billed. */
  method: "tokenizer" | "characters" | "billed";
  /** With `billed`: where from, and at what rates. */
  projection?: Projection;
  /** With `characters`: the same requests rendered as the embedded model renders them (system text, question blocks, labels), counted the same way. */
  renderedInputTokens?: number;
}

/** What an estimate projects from: the usage summaries read, summed. */
export interface Projection {
  files: string[];
  /** Tokens per character of state and of questions, fitted on the summaries' billing figures. */
  rates?: BillingRates;
  /** Else (summaries written before they had billing figures): input tokens per paid answer. */
  perRequest?: number;
  /** Summaries billed by another endpoint or model than this estimate's: their framing may differ. */
  others: string[];
  /** When the summaries projected from name more than one prompt format (or one is mixed): each file with its format. */
  formats?: string[];
}

export interface EstimateOptions {
  job: Job;
  source: Source;
  evaluator: Evaluator;
  shard?: Shard | undefined;
  price: number;
  rpm: number;
  tps: number;
  /** Identical requests remembered (the run's dedup cache). */
  dedupWindow?: number | undefined;
  /** Earlier runs' billing, to project from (a remote endpoint). */
  projection?: Projection | undefined;
  /** Characters of a request as the embedded model renders it (a remote endpoint without a projection: what its framing may add). */
  rendered?: ((request: EvaluatorRequest) => number) | undefined;
}

/**
 * The estimate `estimate` and `run --dry-run` print. For a remote endpoint
 * it projects from the usage summaries named (`fromUsage`) and the output's
 * own (`ownUsage`, when it exists); without any, it counts characters / 4
 * and tells what the embedded rendering of the same requests comes to.
 */
export function estimateWithHistory(options: EstimateOptions, fromUsage: readonly string[], ownUsage: string | undefined): Promise<Estimate> {
  const { evaluator, job } = options;
  if (evaluator.exactTokenCounts(job.model)) {
    if (fromUsage.length > 0)
      throw new InvocationError("--from-usage projects what a remote endpoint bills; the embedded model's count is exact: leave it out, or pass --base-url");
    return estimateJob(options);
  }
  const projection = readProjection(fromUsage, ownUsage, evaluator.identity(job.model));
  if (!projection && fromUsage.length > 0)
    throw new InvocationError(
      `--from-usage: ${fromUsage.join(", ")} hold${fromUsage.length === 1 ? "s" : ""} no answered request to project from; name a summary of a run that answered records`,
    );
  return estimateJob({ ...options, projection, rendered: embeddedRenderingChars });
}

/** The run's dedup cache size (RUN_DEFAULTS.dedupCache in answer.ts, which imports nothing from here). */
const DEDUP_WINDOW = 50_000;

/** Counts a job's requests and tokens; memory stays flat: duplicates are remembered over the run's dedup window, as the run sends them. */
export async function estimateJob(options: EstimateOptions): Promise<Estimate> {
  const { job, source, evaluator } = options;
  // The run sends an identical request once within its dedup cache (RUN_DEFAULTS.dedupCache), not across the whole input:
  // the estimate remembers as many, oldest forgotten first, so it counts what the run pays and never grows with the input.
  const seen = new Set<string>();
  const window = options.dedupWindow ?? DEDUP_WINDOW;
  const exact = evaluator.exactTokenCounts(job.model);
  const projection = exact ? undefined : options.projection;
  const rates = projection?.rates;
  const rendered = exact || projection ? undefined : options.rendered;
  const method = exact ? "tokenizer" : projection ? "billed" : "characters";
  const e: Estimate = { records: 0, invalid: 0, otherShards: 0, requests: 0, duplicates: 0, inputTokens: 0, costUsd: 0, seconds: 0, exact, method };
  let projected = 0;
  let renderedChars = 0;
  for await (const item of source.items) {
    e.records++;
    const prepared = prepareItem(job, item, options.shard);
    if (prepared.kind === "other-shard") {
      e.otherShards++;
      continue;
    }
    if (prepared.kind === "invalid") {
      e.invalid++;
      continue;
    }
    const hash = prepared.hash.slice(0, 16);
    if (seen.has(hash)) {
      e.duplicates++;
      continue;
    }
    seen.add(hash);
    if (seen.size > window) seen.delete(seen.values().next().value as string);
    try {
      e.inputTokens += evaluator.estimateInputTokens(prepared.request);
      e.requests++;
    } catch {
      e.invalid++;
      continue;
    }
    if (rates) projected += projectTokens(rates, requestChars(prepared.request));
    if (rendered) renderedChars += rendered(prepared.request);
  }
  if (projection) {
    e.inputTokens = Math.round(rates ? projected : (projection.perRequest ?? 0) * e.requests);
    e.projection = projection;
  }
  if (rendered) e.renderedInputTokens = Math.ceil(renderedChars / 4);
  e.costUsd = costOf(e.inputTokens, options.price);
  e.seconds = Math.max((e.requests / options.rpm) * 60, e.inputTokens / options.tps);
  return e;
}

export function describeEstimate(e: Estimate): string {
  const time = e.seconds < 120 ? `${e.seconds.toFixed(1)} s` : `${(e.seconds / 60).toFixed(1)} min`;
  return [
    `records:        ${e.records.toLocaleString("en-US")}${e.otherShards ? ` (${e.otherShards.toLocaleString("en-US")} in other shards)` : ""}`,
    `requests:       ${e.requests.toLocaleString("en-US")} (${e.duplicates.toLocaleString("en-US")} duplicates sent once, ${e.invalid.toLocaleString("en-US")} invalid records)`,
    `input tokens:   ${e.inputTokens.toLocaleString("en-US")} (${howCounted(e)})`,
    ...notCounted(e),
    `cost:           $${e.costUsd.toFixed(4)}`,
    `time at limits: ${time} at best`,
  ].join("\n");
}

const n = (x: number, digits = 0) => x.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** How the input tokens were counted, for people. */
function howCounted(e: Estimate): string {
  if (e.method === "tokenizer") return "exact, the model's tokenizer";
  if (e.method === "characters") return "approximate: characters / 4 of each request's state and questions as JSON";
  const p = e.projection as Projection;
  const from = `${p.files.length} usage summar${p.files.length === 1 ? "y" : "ies"}`;
  if (!p.rates) return `projected from what ${from} billed per request: ${n(p.perRequest ?? 0, 1)} tokens (written before summaries kept billing figures)`;
  const r = p.rates;
  const rates =
    r.fit === "least-squares"
      ? `${n(r.per_state_char, 3)} tokens per character of state, ${n(r.per_question_char, 3)} per character of questions`
      : `${n(r.per_state_char, 3)} tokens per character`;
  return `projected from what ${from} billed for ${n(r.requests)} requests: ${rates}`;
}

/** What the count leaves out, said plainly: a remote endpoint's framing, and summaries of another endpoint. */
function notCounted(e: Estimate): string[] {
  const lines: string[] = [];
  if (e.method === "characters" && e.renderedInputTokens !== undefined && e.inputTokens > 0) {
    const times = e.renderedInputTokens / e.inputTokens;
    lines.push(
      `                not counted: the endpoint's own framing (its system text, question blocks and option labels); rendered as the embedded model renders them and counted the same way, these requests come to about ${n(e.renderedInputTokens)} tokens (${n(times, 1)} times as many). Pass --from-usage with an earlier run's usage summary to project from what it was billed`,
    );
  }
  const others = e.projection?.others ?? [];
  if (others.length > 0)
    lines.push(
      `                note: ${others.join(", ")} ${others.length === 1 ? "was" : "were"} billed by another endpoint or model: its framing may differ`,
    );
  const formats = e.projection?.formats;
  if (formats)
    lines.push(
      `                note: the summaries' answers were read from prompts of more than one format (${formats.join(", ")}): the endpoint's framing changed, and the projection mixes both; name only summaries since the change`,
    );
  return lines;
}

/**
 * The projection from usage summaries: `files` named (each must be one),
 * and `own` (the output's summary) when it exists. Billing figures add
 * across them; summaries without any (an earlier release's) give tokens per
 * paid answer. None with a billed answer: undefined.
 */
export function readProjection(files: readonly string[], own: string | undefined, identity: string): Projection | undefined {
  const paths = [...files, ...(own !== undefined && existsSync(own) && !files.includes(own) ? [own] : [])];
  const billing = noBilling();
  let tokens = 0;
  let paid = 0;
  const used: string[] = [];
  const billed: string[] = [];
  const others: string[] = [];
  const formats = new Map<string, string>();
  for (const path of paths) {
    const json = readJsonFile(path, "usage summary");
    if (!isSummary(json)) throw new InvocationError(`--from-usage: ${path} is not a typed-eval usage summary (a run's <output>.usage.json)`);
    const answered = json.records.answered - json.records.deduplicated;
    if (answered <= 0 && !json.billing) continue;
    used.push(path);
    formats.set(path, recordedPromptFormat(json.prompt_format));
    if (json.model_identity !== undefined && json.model_identity !== identity) others.push(path);
    if (json.billing) {
      addSums(billing, json.billing);
      billed.push(path);
    } else {
      tokens += json.tokens.input;
      paid += answered;
    }
  }
  if (used.length === 0) return undefined;
  const rates = billingRates(billing);
  // Summaries with billing figures are what the rates come from; the others' per-answer figure would only blur them.
  if (rates) return { files: billed, rates, others: others.filter((o) => billed.includes(o)), ...formatsOf(billed, formats) };
  return paid > 0 ? { files: used, perRequest: tokens / paid, others, ...formatsOf(used, formats) } : undefined;
}

/** The files' prompt formats, when they are not all one named format: the endpoint's framing then changed between (or within) them. */
function formatsOf(files: readonly string[], formats: ReadonlyMap<string, string>): Pick<Projection, "formats"> {
  const named = new Set(files.map((f) => formats.get(f)));
  if (named.size <= 1 && !named.has(MIXED_PROMPT_FORMATS)) return {};
  return { formats: files.map((f) => `${f}: ${formats.get(f)}`) };
}
