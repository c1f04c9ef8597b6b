import type { Argv, CommandModule } from "yargs";
import type { ArgsOf } from "./args.js";
import { createKey } from "../server/accounts.js";
import { UsageError } from "./exit.js";
import { env } from "../api/env.js";
import { checkWritable } from "./files.js";
import { ModelRegistry } from "../models/registry.js";

/** The accounts file option shared by `serve` and `keys`. */
export function accountsFileOption<T>(y: Argv<T>) {
  return y.option("accounts-file", {
    type: "string",
    default: env("TYPED_EVAL_ACCOUNTS_FILE"),
    describe: "accounts and key hashes ($TYPED_EVAL_ACCOUNTS_FILE)",
  });
}

function withCreateOptions<T>(y: Argv<T>) {
  return accountsFileOption(y)
    .option("account", { type: "string", demandOption: true, describe: "account name" })
    .option("models", {
      type: "array",
      string: true,
      default: [] as string[],
      describe: "models the account may use: names, aliases or versioned ids of the registry, or * (default: all, or unchanged)",
    })
    .option("models-file", {
      type: "string",
      default: env("TYPED_EVAL_MODELS_FILE"),
      defaultDescription: "$TYPED_EVAL_MODELS_FILE",
      describe: "the registry file `serve` extends the bundled one with, when --models names its models",
    });
}

/**
 * Refuses a model the server cannot have: the server serves models of its
 * registry (the bundled one, extended by --models-file as `serve` is), so a
 * name no registry entry answers to would give a key that works for nothing.
 * A `serve --alias` name need not be listed: the server allows an alias when
 * its target is allowed.
 */
function checkModels(models: readonly string[], modelsFile: string | undefined): void {
  const wanted = models.filter((m) => m !== "*");
  if (wanted.length === 0) return;
  const registry = ModelRegistry.load({ file: modelsFile });
  const unknown = wanted.filter((m) => registry.find(m) === undefined);
  if (unknown.length === 0) return;
  throw new UsageError(
    `--models: no model of the registry is named ${unknown.map((m) => JSON.stringify(m)).join(", ")}; known: ${registry.names().join(", ")}${modelsFile ? "" : " (models of your own registry: pass its --models-file)"}`,
  );
}

const createCommand: CommandModule<object, ArgsOf<typeof withCreateOptions>> = {
  command: "create",
  describe: "Create an API key for an account (created if new); prints the key once",
  builder: withCreateOptions,
  handler: (args) => {
    if (!/^[A-Za-z0-9][A-Za-z0-9._@-]*$/.test(args.account)) {
      throw new UsageError(`--account takes a name of letters, digits and . _ @ - (starting with a letter or digit), not ${JSON.stringify(args.account)}`);
    }
    checkModels(args.models, args["models-file"]);
    checkWritable(args["accounts-file"], "--accounts-file");
    const key = createKey(args["accounts-file"], args.account, args.models);
    process.stdout.write(`${key}\n`);
    process.stderr.write(
      `Created a key for account ${args.account} in ${args["accounts-file"]} (only its SHA-256 is stored). Keep it now: it cannot be shown again.\n`,
    );
  },
};

/** `typed-eval keys create`. */
export const keysCommand: CommandModule = {
  command: "keys <command>",
  describe: "Manage API keys of the server's accounts",
  builder: (y) => y.command(createCommand).demandCommand(1),
  handler: () => undefined,
};
