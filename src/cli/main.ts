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
import { EXIT } from "./exit.js";
import { DownloadError } from "../models/download.js";
import { RegistryError } from "../models/registry.js";
import { AccountsError } from "../server/accounts.js";
import { JobError } from "../runner/job.js";
import { SourceError } from "../runner/sources.js";

await yargs(hideBin(process.argv))
  .scriptName("typed-eval")
  .usage("$0 <command> [options]\n\nTyped questions over a state, answered from a language model's next-token probabilities.")
  .command(runCommand)
  .command(estimateCommand)
  .command(usageCommand)
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
    if (
      err instanceof RegistryError ||
      err instanceof DownloadError ||
      err instanceof AccountsError ||
      err instanceof JobError ||
      err instanceof SourceError
    ) {
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
