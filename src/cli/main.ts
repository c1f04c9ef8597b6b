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
import { UsageError } from "./exit.js";
import { assessCommand, thresholdsCommand } from "./assess.js";
import { reportCommand } from "./report.js";
import { calibrateCommand } from "./calibrate.js";
import { labelstudioCommand } from "./labelstudio.js";
import { ComposedUsage, exitWith } from "./boundary.js";
import { outputClosed } from "../api/verdict.js";
import { quietThirdPartyNotices } from "./notices.js";
import { checkEnvironment, env } from "../api/env.js";
import { setStorageRetry } from "../records/s3.js";
import { jobPath } from "../records/bundled-jobs.js";

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
const LISTS = new Set(["files", "models", "alias", "from-usage", "fromUsage"]);

function onceEach(argv: Record<string, unknown>): true {
  for (const [key, value] of Object.entries(argv)) {
    // Single letters are aliases of a long name, which is checked (and named) instead.
    if (key === "_" || key.length === 1 || LISTS.has(key) || !Array.isArray(value)) continue;
    throw new UsageError(`--${key} is given ${value.length} times; give it once`);
  }
  return true;
}

/**
 * Parses `argv` and runs its command. Every failure is thrown (never printed
 * here), so the boundary in `main` ends each the same way and tests can run
 * commands in this process.
 */
export async function typedEval(argv: readonly string[]): Promise<void> {
  // Every setting in the environment is checked before any command runs: a malformed one is exit 2 naming it.
  checkEnvironment();
  setStorageRetry(env("TYPED_EVAL_STORAGE_RETRY"));
  await yargs([...argv])
    .scriptName("typed-eval")
    .check(onceEach, true)
    // `--job NAME`: a bundled job when no file NAME exists (records/bundled-jobs.ts), for every command that takes one.
    .middleware((args) => {
      if (typeof args["job"] === "string") args["job"] = args["j"] = jobPath(args["job"]);
    })
    .usage("$0 <command> [options]\n\nTyped questions over a state, answered from a language model's next-token probabilities.")
    .command(COMMANDS as CommandModule[])
    .demandCommand(1, "Name a command; see the list above.")
    .strict()
    .recommendCommands()
    .fail((msg, err, y) => {
      // A command's error, or a check of ours (rewrapped by yargs as a YError): the boundary decides.
      if (err) throw err;
      // No command: the overview. A mistake in a command's options: one line, and where to read more.
      const command = argv.find((a) => !a.startsWith("-"));
      if (command === undefined || !COMMANDS.some((c) => String(c.command).split(" ")[0] === command)) throw new ComposedUsage(`${y.help()}\n\n${msg}`);
      throw new UsageError(`${msg}\nSee: typed-eval ${command} --help`);
    })
    .help()
    .version()
    .parseAsync();
}

/** The process: `typed-eval` with the process's arguments, every error through one boundary. */
export async function main(): Promise<void> {
  quietThirdPartyNotices();
  // What escapes a command's promise later (an emitter's error, a stray rejection) ends the same way.
  process.on("uncaughtException", (error) => exitWith(error));
  process.on("unhandledRejection", (reason) => exitWith(reason));
  // The reader closing stdout (`assess --json | head -c 100`): exit 141 for every command, as `run -o - | head` ends.
  // A run writing its answers to stdout listens itself (its sink), and ends stopped with its summary written.
  process.stdout.on("error", (error) => {
    if (process.stdout.listenerCount("error") > 1) return;
    exitWith(outputClosed(error) ?? error);
  });
  try {
    await typedEval(hideBin(process.argv));
  } catch (error) {
    exitWith(error);
  }
}
