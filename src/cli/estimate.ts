import { setFlagsFromString } from "node:v8";
import type { Argv, CommandModule } from "yargs";
import { cliLogger } from "./logger.js";
import { describeEstimate, estimateWithHistory, type Estimate } from "../runner/estimate.js";
import { prepareJob, runPaths } from "../runner/prepare.js";
import { fromUsageOf, jobSettings, modelOpener, withJobOptions } from "./job-options.js";
import type { ArgsOf } from "./args.js";
import { NO_RECORDS, NoInputError } from "../api/verdict.js";

function withEstimateOptions<T>(y: Argv<T>) {
  return withJobOptions(y).option("json", { type: "boolean", default: false, describe: "print JSON" });
}

/**
 * `typed-eval estimate`: requests, tokens, cost and time of a job, without
 * calling any model; with a remote endpoint, projected from what earlier
 * runs were billed when their usage summaries are at hand.
 */
export const estimateCommand: CommandModule<object, ArgsOf<typeof withEstimateOptions>> = {
  command: "estimate <input>",
  describe: "Count a job's requests, tokens, cost and the time the limits allow, without calling any model",
  builder: withEstimateOptions,
  handler: async (args) => {
    // As `run` does: V8 otherwise lets the heap grow with the input before it collects (bench/RESULTS.md).
    setFlagsFromString("--optimize-for-size");
    // Nothing is sent: a remote endpoint's key is not needed to count.
    const settings = { ...jobSettings(args), noApiKey: true };
    const { job, source, evaluator, shard, price } = await prepareJob(settings, cliLogger(), modelOpener(args));
    let estimate: Estimate;
    try {
      // The usage summary of the output the same `run` would write (out/<job>-<input>.jsonl), when an earlier run left one.
      const own = runPaths(settings, {}).usage;
      estimate = await estimateWithHistory({ job, source, evaluator, shard, price, rpm: args.rpm, tps: args.tps }, fromUsageOf(args), own);
    } finally {
      await evaluator.close();
    }
    // As `run` ends on an input with no records: no-input, exit 6, which a scheduler may map to skipped.
    if (estimate.records === 0) throw new NoInputError(NO_RECORDS);
    process.stdout.write(args.json ? `${JSON.stringify(estimate, null, 2)}\n` : `${describeEstimate(estimate)}\n`);
  },
};
