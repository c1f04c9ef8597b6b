/** The options `run` and `estimate` share, declared once, and the job settings the runner takes from them. */
import type { Argv } from "yargs";
import { DEFAULT_TIMEOUT_MS } from "../evaluator/remote.js";
import { BASE_URL_ENV, type JobSettings, type OpenModel } from "../runner/prepare.js";
import { parseShard } from "../runner/input/requests.js";
import { DEFAULT_LIMITS } from "../runner/send/limiter.js";
import { bundledJobs } from "../records/bundled-jobs.js";
import { extensionsText, formatNames } from "../records/formats.js";
import type { ArgsOf } from "./args.js";
import { numeric } from "./checks.js";
import { duration } from "./duration.js";
import { UsageError } from "./exit.js";
import { isStdin } from "./input.js";
import { openModelFromArgs, withModelOptions, type ModelArgs } from "./model-options.js";
import { formatSettingsOf, withFormatOptions } from "./format-options.js";

/** Options shared by `run` and `estimate`, declared once: their types are `JobArgs`. */
export function withJobOptions<T>(y: Argv<T>) {
  return withModelOptions(
    withFormatOptions(y, "read")
      .positional("input", {
        type: "string",
        demandOption: true,
        describe: "JSONL or CSV (optionally .gz) or Parquet: a path, - for stdin (not Parquet), s3://bucket/key or s3://bucket/prefix/",
      })
      .option("job", {
        alias: "j",
        type: "string",
        demandOption: true,
        describe: `job file (questions, model, state and id fields), or a bundled job's name when no such file exists: ${bundledJobs().join(", ")}`,
      })
      .option("format", {
        choices: formatNames(),
        describe: `input format (default: from the extension, ${extensionsText()}, else JSONL; under an S3 prefix, each key's own)`,
      })
      .option("base-url", {
        type: "string",
        defaultDescription: `$${BASE_URL_ENV}`,
        describe: "a remote /v1/systemone endpoint instead of the embedded model",
      })
      .option("api-key-env", { type: "string", default: "TYPED_EVAL_API_KEY", describe: "environment variable holding the remote endpoint's key" })
      .option("api-key", {
        type: "boolean",
        default: true,
        describe: "--no-api-key: the remote endpoint needs no key (without it, a remote run with the key's variable unset stops at the check)",
      })
      .option("rpm", numeric("rpm", { above: 0 }, { default: DEFAULT_LIMITS.requestsPerMinute, describe: "requests per minute allowed" }))
      .option("tps", numeric("tps", { above: 0 }, { default: DEFAULT_LIMITS.tokensPerSecond, describe: "input tokens per second allowed" }))
      .option(
        "concurrency",
        numeric("concurrency", { integer: true, min: 1, max: 10_000 }, { describe: "requests in flight (default: 4 embedded, 32 remote)" }),
      )
      .option(
        "timeout",
        duration(
          "timeout",
          { above: 0 },
          { default: `${DEFAULT_TIMEOUT_MS / 1000}s`, describe: "how long to wait for an answer before the attempt counts as failed" },
        ),
      )
      .option("shard", { type: "string", coerce: shardText, describe: "process shard i of n (i/n, 1-based): a deterministic 1/n of the records" })
      .option("price", numeric("price", { min: 0 }, { describe: "USD per million input tokens (default: the registry's, or 0.042 for remote models)" }))
      .option("limit", numeric("limit", { integer: true, min: 1 }, { describe: "only the first N records (try a job before a night's run)" }))
      .option(
        "sample",
        numeric("sample", { integer: true, min: 1 }, { describe: "only a random N records, the same for the same --seed (reads the whole input)" }),
      )
      .option("seed", numeric("seed", { integer: true }, { default: 1, describe: "seed of --sample" }))
      .option("from-usage", {
        type: "string",
        array: true,
        describe:
          "estimate (and run --dry-run) with a remote endpoint: usage summaries of earlier runs (*.usage.json) to project the tokens from what they were billed (the output's own summary is read too, when there is one)",
      })
      .conflicts("limit", "sample"),
  );
}

export type JobArgs = ArgsOf<typeof withJobOptions>;

/** Checks `--shard` when it is parsed, so a bad one is a one-line usage error; keeps the text (it names the journal). */
function shardText(value: unknown): string {
  if (Array.isArray(value)) throw new UsageError("--shard is given more than once; give it once, as i/n");
  try {
    parseShard(String(value));
  } catch {
    throw new UsageError(`--shard takes i/n with 1 <= i <= n, such as 2/3 (the second of three shards), not ${JSON.stringify(value)}`);
  }
  return String(value);
}

/** The settings of a job from its options, for `run` and `estimate`: the runner reads environment defaults, not the CLI. */
export function jobSettings(args: JobArgs & { "api-key"?: boolean }): JobSettings {
  // yargs turns a lone "-" into "": both mean stdin.
  if (isStdin(args.input)) args.input = "-";
  return {
    input: args.input,
    jobFile: args.job,
    format: args.format,
    formats: formatSettingsOf(args, "read"),
    model: args.model,
    modelsFile: args["models-file"],
    baseUrl: args["base-url"],
    apiKeyEnv: args["api-key-env"],
    noApiKey: args["api-key"] === false,
    timeoutSeconds: args.timeout,
    shard: args.shard,
    price: args.price,
    concurrency: args.concurrency,
    limit: args.limit,
    sample: args.sample,
    seed: args.seed,
  };
}

/** The usage summaries an estimate projects from (`--from-usage`), each a path. */
export function fromUsageOf(args: JobArgs): string[] {
  return (args["from-usage"] ?? []).map(String);
}

/** How a command opens the embedded model a job names. */
export function modelOpener(args: ModelArgs): OpenModel {
  return (model) => openModelFromArgs({ ...args, model }, { announce: true });
}
