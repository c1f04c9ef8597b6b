import { basename } from "node:path";
import type { Argv, CommandModule } from "yargs";
import { isS3 } from "../records/s3.js";
import type { ArgsOf } from "./args.js";
import { displayLabels, describeShifts, type RunReport } from "../quality/report.js";
import { parseConditions } from "../quality/gate.js";
import { displayPath } from "../quality/html.js";
import { checkGate, measure } from "../quality/measure.js";
import { DRIFT_METRICS } from "../quality/metric-table.js";
import { pct, tally } from "../quality/numbers.js";
import { qualityPage } from "../quality/pages.js";
import { describeVerdict } from "../quality/verdict.js";
import { favourSize, jobQuestions } from "./quality-setup.js";
import { numeric } from "./checks.js";
import { GateFailedError } from "../api/verdict.js";
import { checkWritableFile, writeWholeFile } from "../records/local-files.js";
import { extensionsText } from "../records/formats.js";

function withReportOptions<T>(y: Argv<T>) {
  return y
    .positional("answers", {
      type: "string",
      demandOption: true,
      describe: `answers a run wrote (${extensionsText()}): a path or s3://bucket/key; its .errors.jsonl and .usage.json are read when beside it, on disk or in S3`,
    })
    .option("compare", {
      type: "string",
      describe: "an earlier run's answers: label shift (PSI, Jensen-Shannon), agreement, flipped records, both runs' models",
    })
    .option("gold", { type: "string", describe: "gold labels (as assess takes them): agreement, calibration and rare classes join the verdict" })
    .option("id-field", { type: "string", describe: "gold field holding the record id (default: id, else the job's id field)" })
    .option("allow-unmatched", { type: "boolean", default: false, describe: "with --gold: go on when some gold ids are not in the answers" })
    .option("seed", numeric("seed", { integer: true }, { default: 1, describe: "with --gold: bootstrap and noise-floor seed" }))
    .option(
      "bootstrap",
      numeric("bootstrap", { integer: true, min: 0, max: 100_000 }, { default: 200, describe: "with --gold: bootstrap draws for the 95% intervals" }),
    )
    .option("job", { alias: "j", type: "string", describe: "the job file (option order and level texts)" })
    .option("output", { alias: "o", type: "string", describe: "the HTML report (default: <answers>.report.html; for s3:// answers, in this folder)" })
    .option("json", { type: "boolean", default: false, describe: "print the report's numbers and its verdict as JSON" })
    .option("errors", {
      type: "string",
      describe: "the errors file, a path or s3://bucket/key (default: <answers>.errors.jsonl; named and unreadable: exit 2)",
    })
    .option("usage", { type: "string", describe: "the usage summary, a path or s3://bucket/key (default: <answers>.usage.json; named and unreadable: exit 2)" })
    .option("fail-if", {
      type: "string",
      describe: `gate: exit 4 when a condition holds, e.g. "topic.psi>0.2,agreement<0.9,label_mass<0.5" (a bare metric: every question; metrics: ${DRIFT_METRICS.map((m) => m.name).join(", ")}, and with --gold those of assess)`,
    });
}

/** The report's lines for the terminal after the verdict: shares per question, then the comparison. */
function describeReport(report: RunReport, output: string): string {
  const lines = [`${tally(report.rows)} rows${report.errors ? `, ${tally(report.errors.total)} failed` : ""}`];
  for (const q of report.questions) {
    const names = displayLabels(q);
    lines.push(`${q.name} (${q.type}): ${q.label_counts.map((c, i) => `${names[i]} ${pct(c / (q.n || 1))}`).join(", ")}`);
  }
  if (report.compare) lines.push(describeShifts(report));
  lines.push(`report: ${output}`);
  return lines.join("\n");
}

/** `typed-eval report`: a run at a glance, optionally against an earlier run and gold labels. */
export const reportCommand: CommandModule<object, ArgsOf<typeof withReportOptions>> = {
  command: "report <answers>",
  describe: "A run at a glance as one HTML file: a verdict per question, label shares, confidence, label mass, errors, usage; --compare shows what moved",
  builder: withReportOptions,
  handler: async (args) => {
    favourSize();
    // Read before the answers, so a misspelt gate costs no pass over a night's answers.
    // An empty --fail-if ("", ",", "   ") is refused, not taken as no gate: a gate that checks nothing must not pass.
    const conditions = args["fail-if"] !== undefined ? parseConditions(args["fail-if"]) : [];
    checkGate(conditions, { gold: args.gold !== undefined, compare: args.compare !== undefined, command: "report" });
    // An S3 run's report lands in this folder by the answers' own name: reports are for reading, on this machine.
    const output = args.output ?? `${isS3(args.answers) ? basename(args.answers) : args.answers}.report.html`;
    checkWritableFile(output, "--output");
    const { questions, idField } = jobQuestions(args.job);
    const { report, assessment, verdict, gate } = await measure({
      answers: args.answers,
      report: true,
      gold: args.gold,
      compare: args.compare,
      errors: args.errors,
      usage: args.usage,
      job: args.job,
      questions,
      idField: args["id-field"],
      jobIdField: idField,
      allowUnmatched: args["allow-unmatched"],
      seed: args.seed,
      bootstrap: args.bootstrap,
      conditions,
    });
    const r = report as RunReport;
    writeWholeFile(output, qualityPage({ title: `Run report: ${displayPath(r.answers)}`, verdict, report: r, assessment, gate }), "--output");
    if (args.json) process.stdout.write(`${JSON.stringify({ ...r, verdict, ...(assessment ? { assessment } : {}) }, null, 2)}\n`);
    else process.stdout.write(`${describeVerdict(verdict)}\n\n${describeReport(r, output)}\n`);
    const lines = (gate?.breaches ?? []).map((b) => b.line);
    if (lines.length > 0) {
      // One line per breach; the last goes through the boundary with the gate's exit code.
      process.stderr.write(
        lines
          .slice(0, -1)
          .map((line) => `typed-eval: drift gate: ${line}\n`)
          .join(""),
      );
      throw new GateFailedError(`drift gate: ${lines.at(-1)}`);
    }
  },
};
