import { basename } from "node:path";
import type { Argv, CommandModule } from "yargs";
import { isS3 } from "../records/s3.js";
import type { ArgsOf } from "./args.js";
import { applyGate, displayLabels, GATE_METRICS, reportConditions, reportHtml, runReport } from "../quality/report.js";
import { favourSize, jobQuestions } from "./assess.js";
import { GateFailedError } from "../api/verdict.js";
import { checkWritable, writeFileAtomic } from "./files.js";

function withReportOptions<T>(y: Argv<T>) {
  return y
    .positional("answers", {
      type: "string",
      demandOption: true,
      describe: "answers a run wrote (.jsonl, .csv or .parquet): a path or s3://bucket/key; its .errors.jsonl and .usage.json are read when beside it on disk",
    })
    .option("compare", { type: "string", describe: "an earlier run's answers: label shift (PSI, Jensen-Shannon), agreement, flipped records" })
    .option("job", { alias: "j", type: "string", describe: "the job file (option order and level texts)" })
    .option("output", { alias: "o", type: "string", describe: "the HTML report (default: <answers>.report.html; for s3:// answers, in this folder)" })
    .option("json", { type: "boolean", default: false, describe: "print the report's numbers as JSON" })
    .option("errors", { type: "string", describe: "the errors file (default: <answers>.errors.jsonl)" })
    .option("usage", { type: "string", describe: "the usage summary (default: <answers>.usage.json)" })
    .option("fail-if", {
      type: "string",
      describe: `drift gate: exit 4 when a condition holds, e.g. "topic.psi>0.2,agreement<0.9,label_mass<0.5" (a bare metric: every question; metrics: ${GATE_METRICS.join(", ")})`,
    });
}

/** `typed-eval report`: a run at a glance, optionally against an earlier run. */
export const reportCommand: CommandModule<object, ArgsOf<typeof withReportOptions>> = {
  command: "report <answers>",
  describe: "A run at a glance as one HTML file: label shares, confidence, label mass, errors, usage; --compare shows what moved",
  builder: withReportOptions,
  handler: async (args) => {
    favourSize();
    // Read before the answers, so a misspelt gate costs no pass over a night's answers.
    const conditions = args["fail-if"] ? reportConditions(args["fail-if"], args.compare !== undefined) : [];
    // An S3 run's report lands in this folder by the answers' own name: reports are for reading, on this machine.
    const output = args.output ?? `${isS3(args.answers) ? basename(args.answers) : args.answers}.report.html`;
    checkWritable(output, "--output");
    const { questions } = jobQuestions(args.job);
    const report = await runReport(args.answers, { questions, compare: args.compare, errors: args.errors, usage: args.usage, job: args.job });
    const breaches = args["fail-if"] ? applyGate(report, conditions) : [];
    writeFileAtomic(output, reportHtml(report));
    if (args.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    else {
      const lines = [`${report.rows} rows${report.errors ? `, ${report.errors.total} failed` : ""}`];
      for (const q of report.questions) {
        const names = displayLabels(q);
        const shares = q.label_counts.map((c, i) => `${names[i]} ${((c / (q.n || 1)) * 100).toFixed(1)}%`).join(", ");
        lines.push(`${q.name} (${q.type}): ${shares}`);
      }
      for (const s of report.compare?.shifts ?? []) {
        lines.push(
          `${s.question} vs ${report.compare?.answers}: PSI ${s.psi.toFixed(3)}, JS distance ${s.js_distance.toFixed(3)}, agreement ${(s.agreement * 100).toFixed(1)}% on ${s.shared} shared ids, ${s.flipped} flipped`,
        );
      }
      lines.push(`report: ${output}`);
      process.stdout.write(`${lines.join("\n")}\n`);
    }
    if (breaches.length > 0) {
      // One line per breach; the last goes through the boundary with the gate's exit code.
      process.stderr.write(
        breaches
          .slice(0, -1)
          .map((b) => `typed-eval: drift gate: ${b}\n`)
          .join(""),
      );
      throw new GateFailedError(`drift gate: ${breaches.at(-1)}`);
    }
  },
};
