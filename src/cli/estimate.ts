import type { CommandModule } from "yargs";
import { createLogger } from "../logging/logger.js";
import { describeEstimate, estimateJob } from "../runner/estimate.js";
import { prepareJob, withJobOptions, type JobArgs } from "./run.js";

interface EstimateArgs extends JobArgs {
  json: boolean;
}

/** `typed-eval estimate`: requests, tokens, cost and time of a job, without calling any model. */
export const estimateCommand: CommandModule<object, EstimateArgs> = {
  command: "estimate <input>",
  describe: "Count a job's requests, tokens, cost and the time the limits allow, without calling any model",
  builder: (y) => withJobOptions(y).option("json", { type: "boolean", default: false, describe: "print JSON" }),
  handler: async (args) => {
    const { job, source, evaluator, shard, price } = await prepareJob(args, createLogger());
    const estimate = await estimateJob({ job, source, evaluator, shard, price, rpm: args.rpm, tps: args.tps });
    await evaluator.close();
    process.stdout.write(args.json ? `${JSON.stringify(estimate, null, 2)}\n` : `${describeEstimate(estimate)}\n`);
  },
};
