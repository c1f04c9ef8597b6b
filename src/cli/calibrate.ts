/** `typed-eval calibrate`: parses the options, hands them to the workflow (quality/calibrate.ts), writes the file, prints the fit. */
import type { Argv, CommandModule } from "yargs";
import { DEFAULT_TIMEOUT_MS } from "../evaluator/remote.js";
import { loadJob } from "../records/job.js";
import { describeFit } from "../calibration/file.js";
import { CALIBRATION_METHODS, calibrateAnswers, fitsOnGold } from "../quality/calibrate.js";
import { openEvaluator } from "../runner/prepare.js";
import type { ArgsOf } from "./args.js";
import { extensionsText } from "../records/formats.js";
import { numeric } from "./checks.js";
import { duration } from "./duration.js";
import { UsageError } from "./exit.js";
import { checkWritableFile, writeWholeFile } from "../records/local-files.js";
import { modelOpener } from "./job-options.js";
import { withModelOptions } from "./model-options.js";
import { favourSize, jobQuestions } from "./quality-setup.js";

function withCalibrateOptions<T>(y: Argv<T>) {
  return withModelOptions(y)
    .positional("answers", { type: "string", demandOption: true, describe: `answers a run wrote (${extensionsText()}): a path or s3://bucket/key` })
    .option("gold", {
      type: "string",
      describe:
        "gold labels (JSONL, CSV, Parquet, or a Label Studio JSON export); needed by auto, temperature and platt; with batch, checks that a question's skew is not real",
    })
    .option("job", { alias: "j", type: "string", describe: "the job file (needed by contextual; gives option order and the id field)" })
    .option("method", {
      choices: CALIBRATION_METHODS,
      default: "auto" as const,
      describe: "auto: the best of temperature and platt by held-out log loss; batch and contextual need no gold",
    })
    .option("folds", numeric("folds", { integer: true, min: 2, max: 100 }, { default: 5, describe: "cross-validation folds" }))
    .option("seed", numeric("seed", { integer: true }, { default: 1, describe: "seed of the fold split" }))
    .option("output", { alias: "o", type: "string", demandOption: true, describe: "where to write the calibration file (JSON)" })
    .option("id-field", { type: "string", describe: "gold field holding the record id (default: id, else the job's id field)" })
    .option("allow-unmatched", { type: "boolean", default: false, describe: "fit even when some gold ids are not in the answers" })
    .option("force", {
      type: "boolean",
      default: false,
      describe: "batch: write the calibration even where it would flatten a skewed question (see --gold)",
    })
    .option("base-url", {
      type: "string",
      defaultDescription: "$TYPED_EVAL_BASE_URL",
      describe: "contextual: ask a remote /v1/systemone endpoint instead of the embedded model",
    })
    .option("api-key-env", { type: "string", default: "TYPED_EVAL_API_KEY", describe: "environment variable holding the remote endpoint's key" })
    .option("api-key", { type: "boolean", default: true, describe: "--no-api-key: the remote endpoint needs no key" })
    .option(
      "timeout",
      duration("timeout", { above: 0 }, { default: `${DEFAULT_TIMEOUT_MS / 1000}s`, describe: "contextual: how long to wait for a remote answer" }),
    );
}

type CalibrateArgs = ArgsOf<typeof withCalibrateOptions>;

/** Contextual calibration's job and how to open the evaluator that answered, from the options. */
function contextualOf(args: CalibrateArgs) {
  if (args.method !== "contextual" || !args.job) return undefined;
  const job = loadJob(args.job);
  if (args.model !== "default") job.model = args.model;
  const endpoint = {
    baseUrl: args["base-url"],
    apiKeyEnv: args["api-key-env"],
    noApiKey: args["api-key"] === false,
    timeoutSeconds: args.timeout,
    modelsFile: args["models-file"],
    jobFile: args.job,
  };
  const open = async () => (await openEvaluator(endpoint, job, modelOpener(args))).evaluator;
  return { job, open, where: args["base-url"] ?? "the model", keyEnv: args["api-key-env"] };
}

/** `typed-eval calibrate`: fit a calibration from gold labels (or without them) for `run --calibration`. */
export const calibrateCommand: CommandModule<object, CalibrateArgs> = {
  command: "calibrate <answers>",
  describe: "Fit a calibration on a run's answers (gold labels, or batch/contextual without them) for run --calibration",
  builder: withCalibrateOptions,
  handler: async (args) => {
    if (fitsOnGold(args.method) && !args.gold)
      throw new UsageError(`--method ${args.method} fits on gold labels: pass --gold (or use --method batch or contextual, which need none)`);
    if (args.method === "contextual" && !args.job) throw new UsageError("--method contextual asks the job's questions of content-free states: pass --job");
    checkWritableFile(args.output, "--output");
    favourSize();
    const { questions, idField } = jobQuestions(args.job);
    const { file, warnings } = await calibrateAnswers({
      answers: args.answers,
      gold: args.gold,
      method: args.method,
      folds: args.folds,
      seed: args.seed,
      questions,
      idField: args["id-field"],
      jobIdField: idField,
      allowUnmatched: args["allow-unmatched"],
      force: args.force,
      contextual: contextualOf(args),
    });
    writeWholeFile(args.output, `${JSON.stringify(file, null, 2)}\n`, "--output");
    const lines = [...Object.entries(file.questions).map(([name, q]) => describeFit(name, q)), ...warnings, `calibration: ${args.output}`];
    process.stdout.write(`${lines.join("\n")}\n`);
  },
};
