/**
 * `typed-eval estimate` and `run --dry-run`: read the input, build every
 * request, count tokens (exactly with a local model's tokenizer; for remote
 * models the documented approximation of the remote evaluator), and report
 * requests, tokens, cost and the time the limits allow. No model is called.
 */
import type { Evaluator } from "../evaluator/evaluator.js";
import type { Job } from "../records/job.js";
import { prepareItem, type Shard } from "./input/requests.js";
import type { Source } from "../records/source.js";
import { costOf } from "../records/usage.js";

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
  const e: Estimate = { records: 0, invalid: 0, otherShards: 0, requests: 0, duplicates: 0, inputTokens: 0, costUsd: 0, seconds: 0, exact };
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
    }
  }
  e.costUsd = costOf(e.inputTokens, options.price);
  e.seconds = Math.max((e.requests / options.rpm) * 60, e.inputTokens / options.tps);
  return e;
}

export function describeEstimate(e: Estimate): string {
  const time = e.seconds < 120 ? `${e.seconds.toFixed(1)} s` : `${(e.seconds / 60).toFixed(1)} min`;
  return [
    `records:        ${e.records.toLocaleString("en-US")}${e.otherShards ? ` (${e.otherShards.toLocaleString("en-US")} in other shards)` : ""}`,
    `requests:       ${e.requests.toLocaleString("en-US")} (${e.duplicates.toLocaleString("en-US")} duplicates sent once, ${e.invalid.toLocaleString("en-US")} invalid records)`,
    `input tokens:   ${e.inputTokens.toLocaleString("en-US")} (${e.exact ? "exact, the model's tokenizer" : "approximate: characters / 4"})`,
    `cost:           $${e.costUsd.toFixed(4)}`,
    `time at limits: ${time} at best`,
  ].join("\n");
}
