/** `typed-eval run`: parses the options, hands them to the run's lifecycle (runner/run.ts), prints how it ended. */
import { setFlagsFromString } from "node:v8";
import { setStorageRetry, STORAGE_RETRY_MS } from "../records/s3.js";
import type { Argv, CommandModule } from "yargs";
import type { Logger } from "../logging/logger.js";
import { cliLogger } from "./logger.js";
import { scrub } from "../logging/secrets.js";
import { describeEstimate, estimateWithHistory } from "../runner/estimate.js";
import { parseShare } from "../records/job.js";
import { describe as describeUsage } from "../records/usage.js";
import { firstPrompt, prepareJob, runPaths } from "../runner/prepare.js";
import { RUN_DEFAULTS, runLifecycle, type RunOutcome, type RunProgress, type RunInvocation } from "../runner/run.js";
import { S3_FLUSH_MS } from "../runner/state/s3-journal.js";
import { exitCodeOf, VERDICTS, verdictLine } from "../api/verdict.js";
import { endNow, Told } from "./boundary.js";
import type { ArgsOf } from "./args.js";
import { numeric } from "./checks.js";
import { duration } from "./duration.js";
import { UsageError } from "./exit.js";
import { takeEarlySignals } from "./early-signals.js";
import { progressBar } from "./progress.js";
import { fromUsageOf, jobSettings, modelOpener, withJobOptions } from "./job-options.js";
import { formatSettingsOf, withFormatOptions } from "./format-options.js";
import { extensionsText, formatNames } from "../records/formats.js";

/** A share option (5% or 0.05), checked when it is parsed. */
function shareOf(flag: string) {
  return (value: unknown): number => {
    if (Array.isArray(value)) throw new UsageError(`${flag} is given more than once; give it once`);
    const share = parseShare(String(value));
    if (share === undefined) throw new UsageError(`${flag} takes a share between 0 and 1, such as 5% or 0.05, not ${JSON.stringify(value)}`);
    return share;
  };
}

/**
 * The options of `run`, declared once: their types are `RunArgs`.
 * Long: one declaration per flag, in the order `--help` shows them; split, a flag's type and its help would live apart.
 */
function withRunOptions<T>(y: Argv<T>) {
  return withFormatOptions(withJobOptions(y), "write")
    .option("output", {
      alias: "o",
      type: "string",
      describe: `answers: a path (${extensionsText()}; text formats also .gz), - for stdout, or s3://bucket/key (default: out/<job>-<input>.jsonl)`,
    })
    .option("output-format", { choices: formatNames(), describe: "answers format (default: from the output's extension; JSONL for stdout)" })
    .option("errors", { type: "string", describe: "failed records, JSONL (default: <output>.errors.jsonl)" })
    .option("journal", {
      type: "string",
      describe: "the resumable run state: a path, or s3://bucket/prefix/ to resume on any machine (default: <output>.journal, an S3 prefix for an S3 output)",
    })
    .option(
      "journal-flush",
      duration(
        "journal-flush",
        { above: 0 },
        { default: `${S3_FLUSH_MS / 1000}s`, describe: "time between shipments of an S3 journal: a lost worker repays at most this much work" },
      ),
    )
    .option(
      "storage-retry",
      duration(
        "storage-retry",
        { min: 0, env: "TYPED_EVAL_STORAGE_RETRY" },
        { default: `${STORAGE_RETRY_MS / 1000}s`, describe: "how long S3 may fail (5xx, resets, timeouts) before the run stops, resumable (exit 9)" },
      ),
    )
    .option("unsafe-s3-lock", {
      type: "boolean",
      default: false,
      describe: "take an S3 journal's lock on a store that ignores conditional writes: two runs started together may then both pay",
    })
    .option("dry-run", { type: "boolean", default: false, describe: "estimate requests, tokens, cost and time without calling any model" })
    .option(
      "max-retries",
      numeric(
        "max-retries",
        { integer: true, min: 0, max: 100 },
        { default: RUN_DEFAULTS.maxRetries, describe: "retries per record on 408, 429, 5xx and network errors" },
      ),
    )
    .option("max-error-rate", {
      type: "string",
      default: String(RUN_DEFAULTS.maxErrorRate),
      coerce: shareOf("--max-error-rate"),
      describe: "the share of records that may fail with the run still exiting 0, such as 5% or 0.05; above it, exit 1",
    })
    .option("summary-json", {
      type: "string",
      describe: "also write the usage summary (with the run's status) here, whatever the outcome: e.g. /airflow/xcom/return.json",
    })
    .option(
      "grace",
      duration(
        "grace",
        { min: 0 },
        {
          default: `${RUN_DEFAULTS.graceMs / 1000}s`,
          describe: "how long SIGTERM/SIGINT lets the requests in flight finish before the run stops (exit 143/130, resumable)",
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
    .option("force-calibration", { type: "boolean", default: false, describe: "apply a calibration fitted for another model identity" })
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
    .option("print-prompt", {
      type: "boolean",
      default: false,
      describe: "print the exact text the embedded model reads for the first usable record, and stop",
    });
}

type RunArgs = ArgsOf<typeof withRunOptions>;

/** `--print-prompt` and `--dry-run`: no run, no lock, nothing paid. */
async function preview(args: RunArgs, logger: Logger): Promise<void> {
  // Nothing is sent: a remote endpoint's key is not needed to preview.
  const settings = { ...jobSettings(args), noApiKey: true };
  const { job, source, evaluator, shard, price } = await prepareJob(settings, logger, modelOpener(args));
  try {
    if (args["print-prompt"]) process.stdout.write(await firstPrompt(job, source, evaluator, shard));
    else {
      const own = runPaths(settings, { output: args.output }).usage;
      const estimate = await estimateWithHistory({ job, source, evaluator, shard, price, rpm: args.rpm, tps: args.tps }, fromUsageOf(args), own);
      process.stdout.write(`${describeEstimate(estimate)}\n`);
    }
  } finally {
    await evaluator.close();
  }
}

/** The lifecycle's request from the options. */
function runRequest(args: RunArgs, logger: Logger, signals: Signals, onProgress: RunInvocation["onProgress"]): RunInvocation {
  if (args.output === "") args.output = "-";
  return {
    settings: jobSettings(args),
    places: { output: args.output, outputFormat: args["output-format"], errors: args.errors, journal: args.journal, summaryJson: args["summary-json"] },
    shaping: {
      calibration: args.calibration,
      forceCalibration: args["force-calibration"],
      reviewBelow: args["review-below"],
      auditSample: args["audit-sample"],
      auditSeed: args["audit-seed"],
      formats: formatSettingsOf(args, "write"),
    },
    rpm: args.rpm,
    tps: args.tps,
    maxRetries: args["max-retries"],
    maxFailuresInARow: args["max-failures-in-a-row"],
    maxErrorRate: args["max-error-rate"],
    graceMs: args.grace * 1000,
    journalFlushMs: args["journal-flush"] * 1000,
    unsafeS3Lock: args["unsafe-s3-lock"],
    stop: signals.stop.signal,
    stopNow: signals.now.signal,
    logger,
    onProgress,
    openModel: modelOpener(args),
  };
}

/** How long a run may take to write its summary and release its lock after a second signal (or its grace), before the process ends regardless. */
const SECOND_SIGNAL_BOUND_MS = 10_000;

/**
 * SIGTERM (a scheduler's stop, a pod's eviction) and SIGINT (Ctrl-C): the
 * first takes no new records and lets those in flight finish within --grace;
 * a second ends the grace at once. Either way the run ends `stopped`, its
 * journal kept, its summary written and its lock released; should that take
 * longer than a few seconds after the second signal, the process ends anyway.
 */
interface Signals {
  stop: AbortController;
  now: AbortController;
  /** The first signal received. */
  received: NodeJS.Signals | undefined;
  detach(): void;
}

function listenForSignals(logger: Logger, graceSeconds: number, early: readonly NodeJS.Signals[]): Signals {
  const signals: Signals = { stop: new AbortController(), now: new AbortController(), received: undefined, detach: () => undefined };
  // The bounds on a stop's ending: cleared once the run has ended (its exit is the boundary's then).
  const bounds: NodeJS.Timeout[] = [];
  const onSignal = (signal: NodeJS.Signals) => {
    if (signals.received) {
      logger.warn({ signal }, `${signal} again: stopping now; the records finished so far are kept`);
      signals.now.abort();
      const first = signals.received;
      const bound = setTimeout(
        () =>
          endNow(
            { verdict: "stopped", reason: "", signal: first },
            `typed-eval: stopped by ${first}: the run did not end within ${SECOND_SIGNAL_BOUND_MS / 1000} s of the second signal; rerun the same command to resume`,
          ),
        SECOND_SIGNAL_BOUND_MS,
      );
      bounds.push(bound.unref());
      return;
    }
    signals.received = signal;
    logger.warn(
      { signal, grace_seconds: graceSeconds },
      `${signal}: finishing the records in flight (at most ${graceSeconds} s), then stopping; rerun the same command to resume`,
    );
    signals.stop.abort();
    // The grace bounds the whole ending: should anything outlast it (a model still loading), the process ends anyway.
    const bound = setTimeout(
      () =>
        endNow(
          { verdict: "stopped", reason: "", signal },
          `typed-eval: stopped by ${signal}: the run did not end within its grace (${graceSeconds} s) and ${SECOND_SIGNAL_BOUND_MS / 1000} s more; rerun the same command to resume`,
        ),
      graceSeconds * 1000 + SECOND_SIGNAL_BOUND_MS,
    );
    bounds.push(bound.unref());
  };
  process.on("SIGTERM", onSignal).on("SIGINT", onSignal);
  signals.detach = () => {
    process.off("SIGTERM", onSignal).off("SIGINT", onSignal);
    for (const bound of bounds) clearTimeout(bound);
  };
  // Those received while the CLI loaded: the lifecycle starts stopped, and still says so and writes its summary.
  for (const signal of early) onSignal(signal);
  return signals;
}

/** Progress on stderr: a bar on a terminal, else a log line every 10 s. */
function progressReporter(logger: Logger) {
  const bar = process.stderr.isTTY ? progressBar("records", "bytes") : undefined;
  let lastLog = 0;
  const onProgress = (p: RunProgress) => {
    const pace = p.pace < 1 ? `, pace ${(p.pace * 100).toFixed(0)}%` : "";
    const note = `${p.read} read, ${p.answered} answered, ${p.failed} failed, ${p.resumed} resumed, ${p.inputTokens.toLocaleString("en-US")} tokens, $${p.costUsd.toFixed(4)}${pace}`;
    if (bar) bar.update(p.bytes, p.totalBytes, note);
    else if (Date.now() - lastLog > 10_000) {
      lastLog = Date.now();
      logger.info({ progress: p }, note);
    }
  };
  return { onProgress, finish: () => bar?.finish() };
}

/** What a run's end prints: the usage, and where the outputs are, or the verdict's line. */
function printEnd(end: RunOutcome): void {
  const summary = end.summary.this_run ? `${describeUsage(end.summary)}\n` : "";
  if (!end.written) {
    process.stderr.write(`${verdictLine(end)}${summary}`);
    return;
  }
  if (end.verdict !== "done" && end.reason) process.stderr.write(scrub(`typed-eval: ${VERDICTS[end.verdict].headline}: ${end.reason}\n`));
  const review = end.summary.review;
  const errors = end.summary.records.failed && end.paths?.errors ? `; failed records: ${end.paths.errors}` : "";
  const routed = review ? `; review: ${review.file} (${review.below_threshold} below threshold, ${review.audit} audit)` : "";
  process.stderr.write(`${summary}answers: ${end.paths?.output ?? "-"}${errors}${routed}\n`);
}

/** `typed-eval run`: the batch job. */
export const runCommand: CommandModule<object, RunArgs> = {
  command: "run <input>",
  describe: "Answer a job's questions for every record of a JSONL, CSV or Parquet input; resumable",
  builder: withRunOptions,
  handler: async (args) => {
    // A batch run allocates short-lived garbage per record, and V8 otherwise lets the heap grow with the input before it
    // collects (355 MiB peak at 90,000 records); read at every GC, so setting it here works (bench/RESULTS.md).
    setFlagsFromString("--optimize-for-size");
    const logger = cliLogger();
    setStorageRetry(args["storage-retry"]);
    const early = takeEarlySignals();
    if (fromUsageOf(args).length > 0 && !args["dry-run"])
      throw new UsageError("--from-usage goes with --dry-run (or typed-eval estimate): a run counts what it is billed");
    if (args["print-prompt"] || args["dry-run"]) {
      if (early[0]) process.kill(process.pid, early[0]);
      return preview(args, logger);
    }
    const signals = listenForSignals(logger, args.grace, early);
    const progress = progressReporter(logger);
    let end: RunOutcome;
    try {
      end = await runLifecycle(runRequest(args, logger, signals, progress.onProgress));
    } finally {
      signals.detach();
      progress.finish();
    }
    // A stop names the signal that caused it (the lifecycle knows only a closed output's).
    const ending = end.verdict === "stopped" ? { ...end, signal: end.signal ?? signals.received } : end;
    printEnd(ending);
    if (exitCodeOf(ending) !== 0) throw new Told(ending);
  },
};
