import type { Argv, CommandModule } from "yargs";
import type { ArgsOf } from "./args.js";
import { type Assessment, describeAssessment, joinGold, parseConditions } from "../quality/assess.js";
import { describeThresholds, MIN_SUPPORT, thresholds } from "../quality/thresholds.js";
import { displayPath } from "../quality/html.js";
import { checkGate, measure } from "../quality/measure.js";
import { qualityPage } from "../quality/pages.js";
import { describeShifts } from "../quality/report.js";
import { DEFAULT_SUSPECT_METHOD, describeSuspects, SUSPECT_METHODS, Suspects } from "../quality/suspects.js";
import { describeVerdict } from "../quality/verdict.js";
import { type Breach, breachValue, breachWhy } from "../quality/gate.js";
import { GateFailedError } from "../api/verdict.js";
import { numeric } from "./checks.js";
import { UsageError } from "./exit.js";
import { checkWritableFile, writeWholeFile } from "../records/local-files.js";
import { favourSize, jobQuestions } from "./quality-setup.js";
import { extensionsText, outputFormat } from "../records/formats.js";

/** Options of the commands that join answers with gold labels: assess and thresholds. */
function withGoldOptions<T>(y: Argv<T>) {
  return y
    .positional("answers", {
      type: "string",
      demandOption: true,
      describe: `answers a run wrote (${extensionsText()}; text formats optionally .gz): a path or s3://bucket/key`,
    })
    .option("gold", {
      type: "string",
      demandOption: true,
      describe: "gold labels: JSONL, CSV or Parquet with the record id and one field per question, or a Label Studio JSON export",
    })
    .option("job", { alias: "j", type: "string", describe: "the job file (option order, level texts, id field); default: read from the answers" })
    .option("id-field", { type: "string", describe: "gold field holding the record id (default: id, else the job's id field)" })
    .option("allow-unmatched", { type: "boolean", default: false, describe: "go on when some gold ids are not in the answers (they are reported)" });
}

function withAssessOptions<T>(y: Argv<T>) {
  return withGoldOptions(y)
    .option("seed", numeric("seed", { integer: true }, { default: 1, describe: "bootstrap and noise-floor seed: the same seed gives the same numbers" }))
    .option("bootstrap", numeric("bootstrap", { integer: true, min: 0, max: 100_000 }, { default: 200, describe: "bootstrap draws for the 95% intervals" }))
    .option("json", { type: "boolean", default: false, describe: "print the assessment and its verdict as JSON" })
    .option("html", { type: "string", describe: "write a self-contained HTML report here" })
    .option("compare", {
      type: "string",
      describe: "an earlier run's answers: drift (PSI, Jensen-Shannon, agreement) joins the verdict, and both runs' models are named",
    })
    .option("fail-if", {
      type: "string",
      describe: 'exit 4 when a condition holds, e.g. "urgent.ece>0.05,team.recall[\\"billing\\"]<0.6" (every metric: docs/metrics.md)',
    })
    .option("raw", { type: "boolean", default: false, describe: "assess the raw probabilities of a calibrated run" })
    .option("suspects", {
      type: "string",
      describe: `list the gold labels the answers contradict (confident learning), per question sorted by margin; with a file (${extensionsText()}), write them all there`,
    })
    .option("suspects-method", {
      choices: SUSPECT_METHODS,
      describe: `how --suspects names rows (default ${DEFAULT_SUSPECT_METHOD}): confident-joint, its off-diagonal rows; noise-rate, prune by noise rate (more found, less precise; docs/quality.md)`,
    });
}

/** A failed condition as the JSON lists it: its figure (null when it could not be computed), or a verdict condition's mark. */
function failedJson(f: Breach) {
  return {
    condition: f.condition.text,
    question: f.question,
    actual: Number.isNaN(f.actual) || f.mark !== undefined ? null : f.actual,
    ...(f.mark !== undefined ? { mark: f.mark } : {}),
  };
}

/** `typed-eval assess`: how right a run's labels are, against a hand-labeled sample. */
export const assessCommand: CommandModule<object, ArgsOf<typeof withAssessOptions>> = {
  command: "assess <answers>",
  describe: "Measure a run's answers against gold labels: a verdict per question, accuracy, calibration, rare classes, drift; gate on them",
  builder: withAssessOptions,
  handler: async (args) => {
    favourSize();
    // An empty --fail-if ("", ",", "   ") is refused, not taken as no gate: a gate that checks nothing must not pass.
    const conditions = args["fail-if"] !== undefined ? parseConditions(args["fail-if"]) : [];
    checkGate(conditions, { gold: true, compare: args.compare !== undefined, command: "assess" });
    if (args["suspects-method"] !== undefined && args.suspects === undefined)
      throw new UsageError("--suspects-method picks how --suspects names suspect gold labels: pass --suspects as well");
    // Every file it writes is checked before a row is read: a night's assessment is never computed to be lost at the end.
    if (args.html) checkWritableFile(args.html, "--html");
    if (args.suspects) checkWritableFile(args.suspects, "--suspects");
    // A suspects file no format can be written as is refused before the answers are read.
    if (args.suspects) outputFormat(args.suspects, { what: "suspects" });
    const { questions, idField } = jobQuestions(args.job);
    const suspects = args.suspects !== undefined ? new Suspects(args["suspects-method"] ?? DEFAULT_SUSPECT_METHOD) : undefined;
    const measured = await measure({
      answers: args.answers,
      gold: args.gold,
      compare: args.compare,
      questions,
      idField: args["id-field"],
      jobIdField: idField,
      raw: args.raw,
      allowUnmatched: args["allow-unmatched"],
      seed: args.seed,
      bootstrap: args.bootstrap,
      suspects,
      job: args.job,
      conditions,
    });
    const a = measured.assessment as Assessment;
    if (suspects && args.suspects) {
      await suspects.write(args.suspects);
      a.suspects = suspects.summary();
    }
    const { verdict, report, gate, breaches: failed } = measured;
    if (args.html) writeWholeFile(args.html, qualityPage({ title: `Assessment: ${displayPath(a.answers)}`, verdict, assessment: a, report, gate }), "--html");
    process.stdout.write(
      args.json
        ? `${JSON.stringify(
            {
              ...a,
              verdict,
              ...(report?.compare ? { compare: report.compare } : {}),
              ...(gate ? { gate } : {}),
              failed_conditions: failed.map(failedJson),
            },
            null,
            2,
          )}\n`
        : `${describeVerdict(verdict)}\n\n${describeAssessment(a)}${a.suspects ? describeSuspects(a.suspects) : ""}${report?.compare ? `\n\n${describeShifts(report)}` : ""}\n`,
    );
    if (args.html) process.stderr.write(`report: ${args.html}\n`);
    if (failed.length > 0) {
      throw new GateFailedError(
        `quality gate failed: ${failed.map((f) => `${f.condition.question === undefined ? `${f.question}: ` : ""}${f.condition.text} (actual ${breachValue(f, breachWhy(f))})`).join("; ")}`,
      );
    }
  },
};

function withThresholdOptions<T>(y: Argv<T>) {
  const target = (what: string) => numeric(`target-${what}`, { above: 0, max: 1 }, { describe: `${what} the accepted rows must reach, e.g. 0.95` });
  return withGoldOptions(y)
    .option("target-accuracy", target("accuracy"))
    .option("target-precision", { ...target("precision"), describe: "precision of --class among the accepted rows answered with it, e.g. 0.9" })
    .option("target-recall", { ...target("recall"), describe: "recall of --class among the accepted rows whose gold is it, e.g. 0.9" })
    .option("class", { type: "string", describe: "the class a precision or recall target is for: question=label (e.g. team=fraud)" })
    .option(
      "min-support",
      numeric(
        "min-support",
        { integer: true, min: 1 },
        { default: MIN_SUPPORT, describe: "fewest rows the target figure may rest on at the threshold picked" },
      ),
    )
    .option("json", { type: "boolean", default: false, describe: "print JSON" });
}

/** `typed-eval thresholds`: per-question review thresholds for a target accuracy, from gold labels. */
export const thresholdsCommand: CommandModule<object, ArgsOf<typeof withThresholdOptions>> = {
  command: "thresholds <answers>",
  describe: "Pick per-question review thresholds that reach a target accuracy (or a class's precision or recall) on gold labels, with the coverage each gives",
  builder: withThresholdOptions,
  handler: async (args) => {
    favourSize();
    const given = (["accuracy", "precision", "recall"] as const).flatMap((metric) => {
      const value = args[`target-${metric}`];
      return value === undefined ? [] : [{ metric, value, class: args.class }];
    });
    const target = given[0];
    if (!target || given.length > 1)
      throw new UsageError("thresholds takes one target: --target-accuracy, or --target-precision or --target-recall with --class");
    if (target.metric === "accuracy" && args.class !== undefined)
      throw new UsageError("--class goes with --target-precision or --target-recall, not --target-accuracy");
    const { questions, idField } = jobQuestions(args.job);
    const joined = await joinGold(args.answers, args.gold, {
      questions,
      idField: args["id-field"],
      jobIdField: idField,
      allowUnmatched: args["allow-unmatched"],
    });
    const list = thresholds(joined, target, { minSupport: args["min-support"] });
    process.stdout.write(args.json ? `${JSON.stringify(list, null, 2)}\n` : `${describeThresholds(list)}\n`);
  },
};
