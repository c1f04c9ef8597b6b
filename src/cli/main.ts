/** The `typed-eval` command line: one yargs command per file in this folder. */
import yargs, { type CommandModule } from "yargs";
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
import { EXIT } from "../api/exit-codes.js";
import { UsageError } from "./exit.js";
import { InvocationError } from "../api/errors.js";
import { assessCommand, thresholdsCommand } from "./assess.js";
import { reportCommand } from "./report.js";
import { calibrateCommand } from "./calibrate.js";
import { labelstudioCommand } from "./labelstudio.js";
import { SourceError } from "../runner/input/source.js";

const COMMANDS = [
  runCommand,
  estimateCommand,
  usageCommand,
  assessCommand,
  calibrateCommand,
  thresholdsCommand,
  reportCommand,
  labelstudioCommand,
  askCommand,
  modelsCommand,
  serveCommand,
  keysCommand,
  validateCommand,
  openapiCommand,
];

/** Options that take several values; any other option given twice is a usage error (yargs would pass an array). */
const LISTS = new Set(["files", "models", "alias"]);

function onceEach(argv: Record<string, unknown>): true {
  for (const [key, value] of Object.entries(argv)) {
    // Single letters are aliases of a long name, which is checked (and named) instead.
    if (key === "_" || key.length === 1 || LISTS.has(key) || !Array.isArray(value)) continue;
    throw new UsageError(`--${key} is given ${value.length} times; give it once`);
  }
  return true;
}

/** One line and exit 2 for a usage error, wherever it is thrown. */
function usageExit(err: unknown): void {
  // yargs rewraps what a `coerce` throws (our option checks) as a YError: also a usage error.
  if (err instanceof InvocationError || (err instanceof Error && err.name === "YError")) {
    process.stderr.write(`typed-eval: ${(err as Error).message}\n`);
    process.exit(err instanceof SourceError && err.absent ? EXIT.noInput : EXIT.usage);
  }
}

try {
  await yargs(hideBin(process.argv))
    .scriptName("typed-eval")
    .check(onceEach, true)
    .usage("$0 <command> [options]\n\nTyped questions over a state, answered from a language model's next-token probabilities.")
    .command(COMMANDS as CommandModule[])
    .demandCommand(1, "Name a command; see the list above.")
    .strict()
    .recommendCommands()
    .fail((msg, err, y) => {
      // Bad invocation, job file, input, registry, download or accounts file: one line, exit 2.
      usageExit(err);
      if (err) throw err;
      // No command: the overview. A mistake in a command's options: one line, and where to read more.
      const command = hideBin(process.argv).find((a) => !a.startsWith("-"));
      if (command === undefined || !COMMANDS.some((c) => String(c.command).split(" ")[0] === command)) process.stderr.write(`${y.help()}\n\n${msg}\n`);
      else process.stderr.write(`typed-eval: ${msg}\nSee: typed-eval ${command} --help\n`);
      process.exit(EXIT.usage);
    })
    .help()
    .version()
    .parseAsync();
} catch (err) {
  // What yargs throws past `fail` (a check in a middleware): the same one-line treatment.
  usageExit(err);
  throw err;
}
