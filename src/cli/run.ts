import { createHash } from "node:crypto";
import { mkdirSync } from "node:fs";
import { setFlagsFromString } from "node:v8";
import { basename, dirname, resolve } from "node:path";
import type { Argv, CommandModule } from "yargs";
import { TypedEvalError } from "../api/errors.js";
import type { Evaluator } from "../evaluator/evaluator.js";
import { endpointEvaluator } from "../evaluator/factory.js";
import { DEFAULT_TIMEOUT_MS } from "../evaluator/remote.js";
import { createLogger, type Logger } from "../logging/logger.js";
import { ModelRegistry, RegistryError } from "../models/registry.js";
import { estimateJob, describeEstimate } from "../runner/estimate.js";
import { loadJob, type Job } from "../runner/job.js";
import { DEFAULT_LIMITS, RunLimiter } from "../runner/send/limiter.js";
import { localTarget, type OutputFormat, type OutputTarget } from "../runner/output/outputs.js";
import { parseShare } from "../runner/job.js";
import { reviewThresholds } from "../runner/output/labels.js";
import { calibrationFor, loadCalibration } from "../quality/calibrate.js";
import { questionLabels } from "../evaluator/calibration.js";
import { fieldsRead, parseShard, prepareItem, type Shard } from "../runner/input/records.js";
import { firstRecords, sampleRecords } from "../runner/input/selection.js";
import { RUN_DEFAULTS, runJob, type RunOptions } from "../runner/run.js";
import { isS3, setStorageRetry, STORAGE_RETRY_MS } from "../runner/s3.js";
import { LockLostError, StorageError, VERDICTS } from "../runner/verdict.js";
import { openS3Source } from "../runner/input/s3-source.js";
import { s3Target } from "../runner/output/s3-target.js";
import { formatNamed, formatOf, openLocalSource } from "../runner/input/sources.js";
import type { Source } from "../runner/input/source.js";
import { describe as describeUsage } from "../runner/output/usage.js";
import { EXIT, type ExitCode } from "../api/exit-codes.js";
import { UsageError } from "./exit.js";
import { acquireLock, LockedError, type Lock } from "../runner/state/lock.js";
import { acquireS3Lock, S3_FLUSH_MS, S3Journal } from "../runner/state/s3-journal.js";
import type { RunStatus } from "../runner/output/summary.js";
import { folderFor } from "./files.js";
import { numeric } from "./checks.js";
import { isStdin } from "./input.js";
import { openModelFromArgs, withModelOptions, type ModelArgs } from "./model-options.js";
import type { ArgsOf } from "./args.js";
import { progressBar } from "./progress.js";

/** Options shared by `run` and `estimate`, declared once: their types are `JobArgs`. */
export function withJobOptions<T>(y: Argv<T>) {
  return withModelOptions(
    y
      .positional("input", {
        type: "string",
        demandOption: true,
        describe: "JSONL or CSV (optionally .gz) or Parquet: a path, - for stdin (not Parquet), s3://bucket/key or s3://bucket/prefix/",
      })
      .option("job", { alias: "j", type: "string", demandOption: true, describe: "job file (questions, model, state and id fields)" })
      .option("format", {
        choices: ["jsonl", "csv", "parquet"] as const,
        describe: "input format (default: from the extension, .csv, .parquet, else JSONL; under an S3 prefix, each key's own)",
      })
      .option("base-url", {
        type: "string",
        default: process.env["TYPED_EVAL_BASE_URL"],
        describe: "a remote /v1/systemone endpoint instead of the embedded model ($TYPED_EVAL_BASE_URL)",
      })
      .option("api-key-env", { type: "string", default: "TYPED_EVAL_API_KEY", describe: "environment variable holding the remote endpoint's key" })
      .option("rpm", numeric("rpm", { above: 0 }, { default: DEFAULT_LIMITS.requestsPerMinute, describe: "requests per minute allowed" }))
      .option("tps", numeric("tps", { above: 0 }, { default: DEFAULT_LIMITS.tokensPerSecond, describe: "input tokens per second allowed" }))
      .option(
        "concurrency",
        numeric("concurrency", { integer: true, min: 1, max: 10_000 }, { describe: "requests in flight (default: 4 embedded, 32 remote)" }),
      )
      .option(
        "timeout",
        numeric(
          "timeout",
          { above: 0 },
          { default: DEFAULT_TIMEOUT_MS / 1000, describe: "seconds to wait for a remote answer before the attempt counts as failed" },
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

/**
 * What `run` and `estimate` both set up: job, source, evaluator, price, shard.
 * `beforeModel` runs once the input is open and the flags are checked, before
 * a model is loaded (or downloaded).
 */
export async function prepareJob(args: JobArgs, logger: Logger, job: Job = readJob(args), beforeModel?: () => void | Promise<void>) {
  const shard: Shard | undefined = args.shard ? parseShard(args.shard) : undefined;
  const fields = fieldsRead(job);
  let source: Source = isS3(args.input)
    ? await openS3Source(args.input, args.format, { fields, onNote: (message, keys) => logger.info({ skipped: keys }, message) })
    : openLocalSource(args.input, formatOf(args.input, args.format), { fields });
  if (args.limit !== undefined) source = firstRecords(source, args.limit);
  if (args.sample !== undefined) source = sampleRecords(source, args.sample, args.seed);
  checkBaseUrl(args["base-url"]);
  await beforeModel?.();
  const { evaluator, entry } = await openEvaluator(args, job, logger);
  // An embedded model knows its price (0 for a file the registry does not know); a remote one costs the hosted price unless told.
  const price = args.price ?? evaluator.pricePerMillion?.(job.model) ?? (args["base-url"] ? 0.042 : (entry?.price_per_million_input_tokens ?? 0.042));
  const concurrency = args.concurrency ?? (args["base-url"] ? 32 : 4);
  return { job, shard, source, evaluator, price, concurrency };
}

/** The prompt text of the first record that makes a request (shard and bad records skipped). */
async function firstPrompt(job: Job, source: Source, evaluator: Evaluator, shard: Shard | undefined): Promise<string> {
  if (!evaluator.promptText) throw new UsageError("--print-prompt shows the embedded model's prompt; a remote endpoint renders its own");
  for await (const item of source.items) {
    const prepared = prepareItem(job, item, shard);
    if (prepared.kind !== "request") continue;
    return `# line ${item.line} of ${item.source}, id ${prepared.id}\n${evaluator.promptText(prepared.request)}`;
  }
  throw new UsageError(`${source.name} holds no record that makes a request (see typed-eval run without --print-prompt for the reasons)`);
}

/** The job file, with the --model override. */
function readJob(args: JobArgs): Job {
  // yargs turns a lone "-" into "": both mean stdin.
  if (isStdin(args.input)) args.input = "-";
  const job: Job = loadJob(args.job);
  if (args.model !== "default") job.model = args.model;
  return job;
}

/** The evaluator a job runs on: the remote endpoint of --base-url, else the job's model embedded. */
export async function openEvaluator(args: ModelArgs & Pick<JobArgs, "base-url" | "api-key-env" | "timeout" | "job">, job: Job, logger: Logger) {
  const registry = ModelRegistry.load({ file: args["models-file"] });
  const entry = registry.find(job.model);
  let evaluator: Evaluator;
  const baseUrl = args["base-url"];
  checkBaseUrl(baseUrl);
  if (baseUrl) {
    const apiKey = process.env[args["api-key-env"]];
    if (!apiKey) logger.warn({ env: args["api-key-env"] }, `$${args["api-key-env"]} is not set: sending requests without an API key`);
    evaluator = endpointEvaluator({ baseUrl, apiKey, timeoutMs: args.timeout * 1000 });
  } else {
    if (!entry)
      throw new RegistryError(`unknown model "${job.model}" in ${args.job}; known: ${registry.names().join(", ")} (or pass --base-url for a remote model)`);
    evaluator = await openModelFromArgs({ ...args, model: job.model }, { announce: true });
  }
  return { evaluator, entry };
}

function checkBaseUrl(baseUrl: string | undefined): void {
  if (baseUrl === undefined) return;
  // An empty value is a mistake (an unset variable in `--base-url $TYPED_EVAL_BASE_URL`), never "use the embedded model".
  if (baseUrl.trim() === "")
    throw new UsageError(
      "--base-url is empty (is the variable it came from set?): pass an endpoint such as https://host, or leave the flag out to use the embedded model",
    );
  if (!/^https?:\/\/[^/]/i.test(baseUrl)) throw new UsageError(`--base-url takes an http:// or https:// URL, not ${JSON.stringify(baseUrl)}`);
}

/**
 * Calibration and review routing from the flags and the job file (flags win),
 * checked before any model is loaded; `verify` then checks the calibration's
 * model identity against the evaluator the run opened.
 */
function outputPolicy(
  args: RunArgs,
  job: Job,
  sidecar: string,
  format: OutputFormat,
  logger: Logger,
): { policy: NonNullable<RunOptions["output"]>; verify(evaluator: Evaluator): void } {
  const policy: NonNullable<RunOptions["output"]> = { csvBom: args["csv-bom"] };
  let verify: (evaluator: Evaluator) => void = () => {};
  const calibration =
    args.calibration ?? (job.calibration === undefined ? undefined : job.calibration === "batch" ? "batch" : resolve(dirname(args.job), job.calibration));
  if (calibration === "batch") {
    policy.calibration = "batch";
    policy.calibrationSource = "batch";
    policy.forceBatch = args["force-calibration"];
  } else if (calibration !== undefined) {
    const file = loadCalibration(calibration);
    policy.calibration = calibrationFor(file, calibration, job.questions, questionLabels);
    policy.calibrationSource = calibration;
    verify = (evaluator) => {
      const identity = evaluator.identity(job.model);
      if (file.identity === identity) return;
      const why = file.identity === null ? "names no model identity (its answers had no usage file beside them)" : `was fitted for ${file.identity}`;
      if (!args["force-calibration"]) {
        throw new UsageError(
          `${calibration} ${why}, but this run's model is ${identity}; calibrate on this model's answers, or pass --force-calibration to apply it anyway`,
        );
      }
      logger.warn({ calibration, fitted_for: file.identity, model: identity }, `applying a calibration that ${why} (--force-calibration)`);
    };
  }
  const below = args["review-below"] ?? job.review_below;
  const auditText = args["audit-sample"] ?? job.audit_sample;
  const auditRate = auditText === undefined ? 0 : parseShare(auditText);
  if (auditRate === undefined) throw new UsageError(`--audit-sample takes a share such as 1% or 0.01, not ${JSON.stringify(auditText)}`);
  if (below !== undefined || auditRate > 0) {
    const reviewFile = `${sidecar}.review.${format}`;
    policy.review = {
      policy: { thresholds: below === undefined ? {} : reviewThresholds(job.questions, below), auditRate, seed: args["audit-seed"] },
      target: target(reviewFile),
    };
    policy.reviewFile = reviewFile;
  }
  return { policy, verify };
}

/**
 * The journal's default place: beside a path output, else in .typed-eval/
 * under a name unique to the job (for an S3 journal, the local copy it is
 * pulled into and shipped from).
 */
function defaultJournal(args: RunArgs, output: string, remote?: string): string {
  if (output !== "-" && !isS3(output) && !remote) return `${output}.journal`;
  const key = createHash("sha256")
    .update(JSON.stringify([resolve(args.job), args.input, output, args.shard ?? "", ...(remote ? [remote] : [])]))
    .digest("hex")
    .slice(0, 16);
  mkdirSync(".typed-eval", { recursive: true });
  return `.typed-eval/journal-${key}.jsonl`;
}

function target(location: string): OutputTarget {
  return isS3(location) ? s3Target(location) : localTarget(location);
}

/** The options of `run`, declared once: their types are `RunArgs`. */
function withRunOptions<T>(y: Argv<T>) {
  return withJobOptions(y)
    .option("output", {
      alias: "o",
      type: "string",
      describe: "answers: a path (.jsonl, .csv or .parquet), - for stdout, or s3://bucket/key (default: out/<job>-<input>.jsonl)",
    })
    .option("output-format", { choices: ["jsonl", "csv", "parquet"] as const, describe: "answers format (default: from the output's extension)" })
    .option("errors", { type: "string", describe: "failed records, JSONL (default: <output>.errors.jsonl)" })
    .option("journal", {
      type: "string",
      describe: "the resumable run state: a path, or s3://bucket/prefix/ to resume on any machine (default: <output>.journal, an S3 prefix for an S3 output)",
    })
    .option(
      "journal-flush",
      numeric(
        "journal-flush",
        { above: 0 },
        { default: S3_FLUSH_MS / 1000, describe: "seconds between shipments of an S3 journal: a lost worker repays at most this much work" },
      ),
    )
    .option(
      "storage-retry",
      numeric(
        "storage-retry",
        { min: 0 },
        {
          describe: `seconds S3 may fail (5xx, resets, timeouts) before the run stops, resumable (exit 9) (default: $TYPED_EVAL_STORAGE_RETRY or ${STORAGE_RETRY_MS / 1000})`,
        },
      ),
    )
    .option("dry-run", { type: "boolean", default: false, describe: "estimate requests, tokens, cost and time without calling any model" })
    .option(
      "max-retries",
      numeric(
        "max-retries",
        { integer: true, min: 0, max: 100 },
        { default: RUN_DEFAULTS.maxRetries, describe: "retries per record on 408, 429, 5xx and network errors" },
      ),
    )
    .option(
      "max-error-rate",
      numeric(
        "max-error-rate",
        { min: 0, max: 1 },
        { default: RUN_DEFAULTS.maxErrorRate, describe: "the share of records that may fail with the run still exiting 0; above it, exit 1" },
      ),
    )
    .option("summary-json", {
      type: "string",
      describe: "also write the usage summary (with the run's status) here, whatever the outcome: e.g. /airflow/xcom/return.json",
    })
    .option(
      "grace",
      numeric(
        "grace",
        { min: 0 },
        {
          default: RUN_DEFAULTS.graceMs / 1000,
          describe: "seconds SIGTERM/SIGINT lets the requests in flight finish before the run stops (exit 143/130, resumable)",
        },
      ),
    )
    .option(
      "max-failures-in-a-row",
      numeric(
        "max-failures-in-a-row",
        { integer: true, min: 1 },
        { default: RUN_DEFAULTS.maxFailuresInARow, describe: "abort, resumably (exit 3), once this many records in a row fail on the endpoint's side" },
      ),
    )
    .option("calibration", {
      type: "string",
      describe: "apply a calibration file (typed-eval calibrate), or \"batch\" to divide out each question's label prior estimated from this run's answers",
    })
    .option("force-calibration", {
      type: "boolean",
      default: false,
      describe: "apply a calibration fitted for another model identity, or batch calibration that moves a question's label shares by more than 10%",
    })
    .option(
      "review-below",
      numeric(
        "review-below",
        { min: 0, max: 1 },
        { describe: "write rows whose top-label probability is below this, for any question, to <output>.review.jsonl (or .csv)" },
      ),
    )
    .option("audit-sample", { type: "string", describe: "also send this share of accepted rows to the review file, e.g. 1% (seeded by --audit-seed)" })
    .option("audit-seed", numeric("audit-seed", { integer: true }, { default: 1, describe: "seed of the audit sample: the same seed picks the same records" }))
    .option("csv-bom", { type: "boolean", default: false, describe: "start CSV outputs with a UTF-8 byte order mark (for Excel)" })
    .option("print-prompt", {
      type: "boolean",
      default: false,
      describe: "print the exact text the embedded model reads for the first usable record, and stop",
    });
}

type RunArgs = ArgsOf<typeof withRunOptions>;

/** `typed-eval run`: the batch job. */
export const runCommand: CommandModule<object, RunArgs> = {
  command: "run <input>",
  describe: "Answer a job's questions for every record of a JSONL, CSV or Parquet input; resumable",
  builder: withRunOptions,
  handler: async (args) => {
    // A batch run allocates short-lived garbage per record, and V8 otherwise
    // lets the heap grow with the input before it collects (260 MiB peak at
    // 30,000 records, 355 MiB at 90,000). This flag is read at every GC, so
    // setting it here works: measured 149 MiB at 30,000 records, at about
    // the same speed (bench/RESULTS.md).
    setFlagsFromString("--optimize-for-size");
    const logger = createLogger();
    let lock: Lock | undefined;
    if (args["storage-retry"] !== undefined) setStorageRetry(args["storage-retry"]);
    let journalShown: string | undefined;
    try {
      // Where everything goes, checked before a model is loaded or downloaded.
      if (isStdin(args.input)) args.input = "-";
      if (args.output === "") args.output = "-";
      const inputName = args.input === "-" ? "stdin" : basename(args.input).replace(/\.(jsonl|ndjson|json|csv|parquet|parq|pq)(\.gz)?$/i, "");
      const output = args.output ?? (args.input === "-" ? "-" : `out/${basename(args.job).replace(/\.json$/, "")}-${inputName}.jsonl`);
      const sidecar = output === "-" ? "typed-eval" : output;
      const errorsPath = args.errors ?? `${sidecar}.errors.jsonl`;
      // The journal: a local file, mirrored to S3 when it is an S3 location (by default beside an S3 output).
      const journalLocation = args.journal ?? (isS3(output) ? `${output}.journal/` : defaultJournal(args, output));
      const remoteJournal = isS3(journalLocation) ? journalLocation : undefined;
      const journalPath = remoteJournal ? defaultJournal(args, output, remoteJournal) : journalLocation;
      journalShown = remoteJournal ? `${journalPath} (mirrored to ${remoteJournal})` : journalPath;
      if (output !== "-" && !isS3(output) && args.input !== "-" && !isS3(args.input) && resolve(output) === resolve(args.input)) {
        throw new UsageError(`-o ${output} is the input itself: the answers would replace it; write them elsewhere`);
      }
      if (!args["dry-run"] && !args["print-prompt"]) {
        if (output !== "-" && !isS3(output)) folderFor(output, "--output");
        if (!isS3(errorsPath)) folderFor(errorsPath, "--errors");
        folderFor(journalPath, "--journal");
        const summaryJson = args["summary-json"];
        if (summaryJson !== undefined && !isS3(summaryJson)) folderFor(summaryJson, "--summary-json");
      }
      const job = readJob(args);
      const answersFormat: OutputFormat = args["output-format"] ?? formatNamed(output);
      const shaping = args["dry-run"] || args["print-prompt"] ? undefined : outputPolicy(args, job, sidecar, answersFormat, logger);
      let mirror: S3Journal | undefined;
      const { shard, source, evaluator, price, concurrency } = await prepareJob(args, logger, job, async () => {
        if (args["dry-run"] || args["print-prompt"]) return;
        // One run per journal, refused at once (before a model loads) while another holds it.
        if (!remoteJournal) return void (lock = acquireLock(`${journalPath}.lock`));
        lock = await acquireS3Lock(remoteJournal);
        mirror = new S3Journal(remoteJournal, journalPath, { flushMs: args["journal-flush"] * 1000 });
        mirror.onError = (error) => logger.warn({ err: error, journal: remoteJournal }, "could not ship the journal to S3; retrying at the next flush");
        const { segments } = await mirror.pull();
        logger.info(
          { journal: remoteJournal, segments },
          segments ? `resuming from the journal in ${remoteJournal} (${segments} segments)` : `journaling to ${remoteJournal}`,
        );
        mirror.start();
      });
      try {
        shaping?.verify(evaluator);
      } catch (error) {
        await evaluator.close();
        throw error;
      }
      if (args["print-prompt"]) {
        try {
          process.stdout.write(await firstPrompt(job, source, evaluator, shard));
        } finally {
          await evaluator.close();
        }
        return;
      }
      if (args["dry-run"]) {
        const estimate = await estimateJob({ job, source, evaluator, shard, price, rpm: args.rpm, tps: args.tps });
        process.stdout.write(`${describeEstimate(estimate)}\n`);
        await evaluator.close();
        return;
      }
      const bar = process.stderr.isTTY ? progressBar("records", "bytes") : undefined;
      let lastLog = 0;
      // SIGTERM (a scheduler's stop, a pod's eviction) and SIGINT (Ctrl-C): take no new records, let those in flight
      // finish within --grace, journal them, exit resumable. A second signal stops at once.
      const stop = new AbortController();
      let signalled: NodeJS.Signals | undefined;
      const onSignal = (signal: NodeJS.Signals) => {
        if (signalled) process.exit(EXIT.aborted);
        signalled = signal;
        logger.warn(
          { signal, grace_seconds: args.grace },
          `${signal}: finishing the records in flight (at most ${args.grace} s), then stopping; rerun the same command to resume`,
        );
        stop.abort();
      };
      process.on("SIGTERM", onSignal).on("SIGINT", onSignal);
      let result: Awaited<ReturnType<typeof runJob>>;
      try {
        result = await runJob({
          job,
          jobName: args.job,
          source,
          evaluator,
          journalPath,
          answers: { target: target(output), format: answersFormat },
          errors: target(errorsPath),
          usage: output === "-" ? undefined : target(`${output}.usage.json`),
          summaryJson: args["summary-json"] === undefined ? undefined : target(args["summary-json"]),
          output: shaping?.policy,
          fence: {
            assertHeld: () => {
              lock?.assertHeld();
              mirror?.assertShipping();
            },
          },
          inputId: args.input === "-" ? "stdin" : isS3(args.input) ? args.input : resolve(args.input),
          limiter: new RunLimiter({ requestsPerMinute: args.rpm, tokensPerSecond: args.tps }),
          concurrency,
          shard,
          pricePerMillion: price,
          maxRetries: args["max-retries"],
          timeoutMs: args.timeout * 1000,
          maxFailuresInARow: args["max-failures-in-a-row"],
          maxErrorRate: args["max-error-rate"],
          stop: stop.signal,
          graceMs: args.grace * 1000,
          logger,
          onProgress: (p) => {
            const pace = p.pace < 1 ? `, pace ${(p.pace * 100).toFixed(0)}%` : "";
            const note = `${p.read} read, ${p.answered} answered, ${p.failed} failed, ${p.resumed} resumed, ${p.inputTokens.toLocaleString("en-US")} tokens, $${p.costUsd.toFixed(4)}${pace}`;
            if (bar) bar.update(p.bytes, p.totalBytes, note);
            else if (Date.now() - lastLog > 10_000) {
              lastLog = Date.now();
              logger.info({ progress: p }, note);
            }
          },
        });
      } finally {
        process.off("SIGTERM", onSignal).off("SIGINT", onSignal);
        bar?.finish();
        await evaluator.close();
        await mirror?.close();
      }
      const code = exitCodeOf(result.status, signalled);
      if (result.aborted) {
        const what = {
          stopped: `stopped by ${signalled ?? "a signal"}`,
          "bad-input": "stopped: bad input",
          "no-input": "stopped: no input",
          "all-failed": "stopped: every record fails",
          aborted: "aborted",
          done: "",
          failures: "",
        }[result.status];
        const next =
          result.status === "all-failed"
            ? "fix the cause (the failed records are kept in the journal) and rerun the same command"
            : "rerun the same command to resume";
        process.stderr.write(
          `typed-eval: ${what}: ${result.aborted}\nNo output was written. Finished records are kept in ${remoteJournal ?? journalPath}; ${next}. Exit ${code}.\n`,
        );
        process.stderr.write(`${describeUsage(result.summary)}\n`);
        process.exitCode = code;
        return;
      }
      if (result.status === "no-input")
        logger.warn({ input: args.input }, `the input holds no records: check that it is the file you meant (exit ${EXIT.noInput})`);
      process.stderr.write(`${describeUsage(result.summary)}\n`);
      const review = result.summary.review;
      process.stderr.write(
        `answers: ${output}${result.summary.records.failed ? `; failed records: ${errorsPath}` : ""}${review ? `; review: ${review.file} (${review.below_threshold} below threshold, ${review.audit} audit)` : ""}\n`,
      );
      process.exitCode = code;
    } catch (error) {
      // TODO(lifecycle): these become the storage-unavailable (9) and lock-lost (8) verdicts, with --summary-json written.
      if (error instanceof StorageError || error instanceof LockLostError) {
        const verdict = error instanceof StorageError ? "storage-unavailable" : "lock-lost";
        const row = VERDICTS[verdict];
        const code = row.exit();
        const kept = journalShown ? ` Finished records are kept in ${journalShown}.` : "";
        process.stderr.write(`typed-eval: ${row.headline}: ${error.message}.${kept} ${row.next}. Exit ${code}.\n`);
        process.exitCode = code;
        return;
      }
      if (error instanceof LockedError) {
        process.stderr.write(`typed-eval: ${error.message}\n`);
        process.exitCode = EXIT.locked;
        return;
      }
      if (error instanceof TypedEvalError) {
        process.stderr.write(`typed-eval: ${error.message}\n`);
        process.exitCode = EXIT.aborted;
        return;
      }
      throw error;
    } finally {
      await lock?.release();
    }
  },
};

/** The exit code a scheduler acts on, from how the run ended (and the signal that stopped it). */
export function exitCodeOf(status: RunStatus, signal?: NodeJS.Signals): ExitCode {
  switch (status) {
    case "done":
      return EXIT.ok;
    case "failures":
      return EXIT.partial;
    case "bad-input":
      return EXIT.usage;
    case "aborted":
      return EXIT.aborted;
    case "all-failed":
      return EXIT.allFailed;
    case "no-input":
      return EXIT.noInput;
    case "stopped":
      return signal === "SIGINT" ? EXIT.interrupted : EXIT.terminated;
    default: {
      const never: never = status;
      throw new Error(`unknown run status ${String(never)}`);
    }
  }
}
