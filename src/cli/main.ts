/** The `typed-eval` command line: one yargs command per file in this folder. */
import yargs from "yargs";
import { hideBin } from "yargs/helpers";
import { askCommand } from "./ask.js";
import { estimateCommand } from "./estimate.js";
import { runCommand } from "./run.js";
import { usageCommand } from "./usage.js";
import { keysCommand } from "./keys.js";
import { modelsCommand } from "./models.js";
import { serveCommand } from "./serve.js";
import { openapiCommand } from "./openapi.js";
import { validateCommand } from "./validate.js";
import { EXIT, UsageError } from "./exit.js";
import { assessCommand, thresholdsCommand } from "./assess.js";
import { reportCommand } from "./report.js";
import { calibrateCommand } from "./calibrate.js";
import { QualityInputError } from "../quality/answers.js";
import { DownloadError } from "../models/download.js";
import { RegistryError } from "../models/registry.js";
import { AccountsError } from "../server/accounts.js";
import { JobError } from "../runner/job.js";
import { SourceError } from "../runner/sources.js";

/** Errors that mean the invocation, a file it names, or the input cannot be used: one line, exit 2. */
const USAGE_ERRORS = [RegistryError, DownloadError, AccountsError, JobError, SourceError, QualityInputError, UsageError];

await yargs(hideBin(process.argv))
  .scriptName("typed-eval")
  .usage("$0 <command> [options]\n\nTyped questions over a state, answered from a language model's next-token probabilities.")
  .command(runCommand)
  .command(estimateCommand)
  .command(usageCommand)
  .command(assessCommand)
  .command(calibrateCommand)
  .command(thresholdsCommand)
  .command(reportCommand)
  .command(askCommand)
  .command(modelsCommand)
  .command(serveCommand)
  .command(keysCommand)
  .command(validateCommand)
  .command(openapiCommand)
  .demandCommand(1, "Name a command; see the list above.")
  .strict()
  .recommendCommands()
  .fail((msg, err, y) => {
    // Bad invocation, job file, input, registry, download or accounts file: one line, exit 2.
    if (USAGE_ERRORS.some((kind) => err instanceof kind)) {
      process.stderr.write(`typed-eval: ${err.message}\n`);
      process.exit(EXIT.usage);
    }
    if (err) throw err;
    process.stderr.write(`${y.help()}\n\n${msg}\n`);
    process.exit(EXIT.usage);
  })
  .help()
  .version()
  .parseAsync();
