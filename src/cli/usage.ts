import { readJsonFile } from "../api/json.js";
import type { Argv, CommandModule } from "yargs";
import type { ArgsOf } from "./args.js";
import { isSummary, mergeSummaries, type UsageSummary } from "../records/usage.js";
import { UsageError } from "./exit.js";
import { requireInput } from "./input.js";
import { numeric } from "./checks.js";

function withUsageOptions<T>(y: Argv<T>) {
  return y
    .positional("files", { type: "string", array: true, demandOption: true, describe: "usage summary files" })
    .option("project", numeric("project", { min: 0 }, { describe: "project the cost of this many records from what these runs used" }))
    .option("json", { type: "boolean", default: false, describe: "print JSON" });
}

/** `typed-eval usage`: totals of any number of usage summaries (shards, nights), per-1,000 cost and a projection. */
export const usageCommand: CommandModule<object, ArgsOf<typeof withUsageOptions>> = {
  command: "usage <files..>",
  describe: "Merge usage summaries (*.usage.json) into totals, cost per 1,000 records and a projection",
  builder: withUsageOptions,
  handler: (args) => {
    const summaries: UsageSummary[] = [];
    for (const file of args.files) {
      requireInput(file, "usage summary");
      const json = readJsonFile(file, "usage summary", UsageError);
      if (!isSummary(json)) {
        throw new UsageError(`${file} is not a typed-eval usage summary`);
      }
      summaries.push(json);
    }
    const merged = mergeSummaries(summaries, args.project);
    if (args.json) {
      process.stdout.write(`${JSON.stringify(merged, null, 2)}\n`);
      return;
    }
    const t = merged.totals;
    const lines = [
      `${merged.files} summaries, model${merged.models.length > 1 ? "s" : ""} ${merged.models.join(", ")}`,
      `records:   ${t.records.read.toLocaleString("en-US")} read, ${t.records.answered.toLocaleString("en-US")} answered, ${t.records.failed} failed, ${t.records.deduplicated} deduplicated`,
      `requests:  ${t.requests.sent.toLocaleString("en-US")} (${t.requests.retries} retries, ${t.requests.rate_limited} rate-limited)`,
      `tokens:    ${t.tokens.input.toLocaleString("en-US")} input, ${t.tokens.output.toLocaleString("en-US")} output`,
      `cost:      $${t.cost_usd.toFixed(4)}; $${merged.cost_per_1000_records.toFixed(4)} per 1,000 records; ${merged.input_tokens_per_record.toFixed(1)} input tokens per record`,
    ];
    const projected = (p: NonNullable<typeof merged.projection>) =>
      `${p.records.toLocaleString("en-US")} records -> ${p.input_tokens.toLocaleString("en-US")} input tokens, $${p.cost_usd.toFixed(2)}`;
    if (merged.projection) lines.push(`projected: ${projected(merged.projection)}`);
    if (merged.warning) {
      lines.unshift(`warning: ${merged.warning}`);
      for (const g of merged.groups) {
        lines.push(
          `${g.job} on ${g.model} (${g.files} summar${g.files === 1 ? "y" : "ies"}): ${g.records.answered.toLocaleString("en-US")} answered, $${g.cost_usd.toFixed(4)}; $${g.cost_per_1000_records.toFixed(4)} per 1,000 records${g.projection ? `; projected: ${projected(g.projection)}` : ""}`,
        );
      }
    }
    process.stdout.write(`${lines.join("\n")}\n`);
  },
};
