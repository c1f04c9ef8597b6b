import type { Argv, CommandModule } from "yargs";
import type { ArgsOf } from "./args.js";
import { loadJob } from "../records/job.js";
import { unitInfos } from "../quality/answers.js";
import { requireContent, requireInput } from "./input.js";
import { refuseOtherKinds } from "../records/file-kind.js";
import { goldFile, labelingConfig, readLabelStudioGold, reviewTasks } from "../quality/labelstudio.js";
import { plural } from "../quality/numbers.js";
import { checkWritableFile, writeWholeFile } from "../records/local-files.js";
import { extensionsText, outputFormat } from "../records/formats.js";

function withExportOptions<T>(y: Argv<T>) {
  return y
    .positional("review", {
      type: "string",
      demandOption: true,
      describe: `the review file a run wrote (<output>.review${extensionsText()}), or any answers file of the job`,
    })
    .option("job", { alias: "j", type: "string", demandOption: true, describe: "the job file of the run (questions, state, kept fields)" })
    .option("output", { alias: "o", type: "string", demandOption: true, describe: "where to write the tasks (JSON, for Label Studio's import)" })
    .option("config", { type: "string", describe: "also write the labeling config (XML) the tasks and predictions match" })
    .option("input", {
      type: "string",
      describe: "the file the run read (default: the source each review row names), for the state the model read when the job does not keep it",
    });
}

const exportCommand: CommandModule<object, ArgsOf<typeof withExportOptions>> = {
  command: "export <review>",
  describe: "Write a review file as Label Studio tasks, the model's answers as pre-annotations",
  builder: withExportOptions,
  handler: async (args) => {
    checkWritableFile(args.output, "--output");
    if (args.config) checkWritableFile(args.config, "--config");
    const job = loadJob(args.job);
    // Everything is built before anything is written: a bad row leaves no file behind.
    const config = labelingConfig(job);
    const tasks = await reviewTasks(args.review, job, { input: args.input });
    if (args.config) writeWholeFile(args.config, config, "--config");
    writeWholeFile(args.output, `${JSON.stringify(tasks, null, 1)}\n`, "--output");
    process.stderr.write(
      `${tasks.length} task${tasks.length === 1 ? "" : "s"}: ${args.output}${args.config ? `; labeling config: ${args.config}` : ""}. Import both into a Label Studio project; label; export as JSON, JSON-MIN or CSV; then pass the export as --gold.\n`,
    );
  },
};

function withImportOptions<T>(y: Argv<T>) {
  return y
    .positional("export", {
      type: "string",
      demandOption: true,
      describe: "a Label Studio export of the tasks, labelled: JSON, JSON-MIN (.json) or CSV (.csv)",
    })
    .option("job", { alias: "j", type: "string", demandOption: true, describe: "the job file (questions and their options)" })
    .option("output", {
      alias: "o",
      type: "string",
      demandOption: true,
      describe: `where to write the gold labels, id and one column per question (${extensionsText()})`,
    });
}

const importCommand: CommandModule<object, ArgsOf<typeof withImportOptions>> = {
  command: "import <export>",
  describe:
    "Write a Label Studio export (JSON, JSON-MIN or CSV) as a gold CSV, joined by the record id (assess, calibrate and thresholds also read the export directly as --gold)",
  builder: withImportOptions,
  handler: async (args) => {
    checkWritableFile(args.output, "--output");
    const file = outputFormat(args.output, { what: "gold" });
    requireInput(args.export, "Label Studio export");
    requireContent(args.export, "Label Studio export");
    refuseOtherKinds(args.export, ["Label Studio export"], "a Label Studio export");
    const job = loadJob(args.job);
    const gold = await readLabelStudioGold(args.export, unitInfos(job.questions));
    writeWholeFile(args.output, goldFile(gold, file), "--output");
    const skipped = gold.skipped ? ` (${plural(gold.skipped, "task")} skipped in Label Studio, left out)` : "";
    process.stderr.write(`${plural(gold.lines.length, "gold row")}${skipped}: ${args.output}\n`);
  },
};

/** `typed-eval labelstudio export|import`: the review round trip through Label Studio. */
export const labelstudioCommand: CommandModule = {
  command: "labelstudio <command>",
  describe: "Review rows in Label Studio: export the review queue as tasks, read the labelled export back as gold",
  builder: (y) => y.command(exportCommand).command(importCommand).demandCommand(1),
  handler: () => undefined,
};
