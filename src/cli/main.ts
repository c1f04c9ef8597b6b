/** The `typed-eval` command line: one yargs command per file in this folder. */
import yargs from "yargs";
import { hideBin } from "yargs/helpers";
import { openapiCommand } from "./openapi.js";
import { validateCommand } from "./validate.js";
import { EXIT } from "./exit.js";

await yargs(hideBin(process.argv))
  .scriptName("typed-eval")
  .usage("$0 <command> [options]\n\nTyped questions over a state, answered from a language model's next-token probabilities.")
  .command(validateCommand)
  .command(openapiCommand)
  .demandCommand(1, "Name a command; see the list above.")
  .strict()
  .recommendCommands()
  .fail((msg, err, y) => {
    if (err) throw err;
    process.stderr.write(`${y.help()}\n\n${msg}\n`);
    process.exit(EXIT.usage);
  })
  .help()
  .version()
  .parseAsync();
