import { existsSync } from "node:fs";
import type { Argv, CommandModule } from "yargs";
import type { ArgsOf } from "./args.js";
import { createKey, type KeyRow, listKeys, revokeKey, rotateKey } from "../server/accounts.js";
import { UsageError } from "./exit.js";
import { env } from "../api/env.js";
import { checkWritableFile } from "../records/local-files.js";
import { durationRule, inWords } from "./duration.js";
import { ModelRegistry } from "../models/registry.js";
import { accountsFileOption } from "./accounts-option.js";

/** What every change says about a running server. */
const NOTICE = "a running `serve` follows the file within --accounts-reload (1s by default), or at once on SIGHUP";

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
    checkWritableFile(args["accounts-file"], "--accounts-file");
    const key = createKey(args["accounts-file"], args.account, args.models);
    process.stdout.write(`${key}\n`);
    process.stderr.write(
      `Created a key for account ${args.account} in ${args["accounts-file"]} (only its SHA-256 is stored). Keep it now: it cannot be shown again.\n`,
    );
  },
};

/** The accounts file a command changes or reads must exist (create makes one). */
function existingFile(path: string): string {
  if (!existsSync(path)) throw new UsageError(`no accounts file at ${path}; make one with: typed-eval keys create --account NAME --accounts-file ${path}`);
  return path;
}

function withRevokeOptions<T>(y: Argv<T>) {
  return accountsFileOption(y).positional("key", {
    type: "string",
    demandOption: true,
    describe: "the key's id, as `keys list` shows it, or the key itself",
  });
}

const revokeCommand: CommandModule<object, ArgsOf<typeof withRevokeOptions>> = {
  command: "revoke <key>",
  describe: "Revoke a key at once: requests with it get 401",
  builder: withRevokeOptions,
  handler: (args) => {
    checkWritableFile(existingFile(args["accounts-file"]), "--accounts-file");
    const revoked = revokeKey(args["accounts-file"], args.key);
    const what = `key ${revoked.id} of account ${revoked.account}`;
    process.stderr.write(revoked.already ? `${what} was already revoked.\n` : `Revoked ${what} in ${args["accounts-file"]}; ${NOTICE}.\n`);
  },
};

function withRotateOptions<T>(y: Argv<T>) {
  return accountsFileOption(y)
    .option("account", { type: "string", demandOption: true, describe: "the account whose key is replaced" })
    .option("key", { type: "string", describe: "the id of the key to replace (needed when the account has several live keys)" })
    .option("grace", {
      type: "string",
      demandOption: true,
      requiresArg: true,
      coerce: durationRule("grace", { min: 0 }),
      describe: "how long the old key keeps working, such as 1h or 24h; 0 ends it now (500ms, 30s, 2m, 1h; a bare number is seconds)",
    });
}

const rotateCommand: CommandModule<object, ArgsOf<typeof withRotateOptions>> = {
  command: "rotate",
  describe: "Replace an account's key: prints the new key once; the old one works until --grace is over",
  builder: withRotateOptions,
  handler: (args) => {
    checkWritableFile(existingFile(args["accounts-file"]), "--accounts-file");
    const grace = args.grace;
    const rotated = rotateKey(args["accounts-file"], { account: args.account, graceMs: grace * 1000, ...(args.key ? { keyId: args.key } : {}) });
    process.stdout.write(`${rotated.key}\n`);
    const until = grace > 0 ? `keeps working until ${rotated.old.expires} (${inWords(grace)})` : "stops working now";
    process.stderr.write(
      `New key ${rotated.id} for account ${args.account} (only its SHA-256 is stored; keep it now: it cannot be shown again). The old key ${rotated.old.id} ${until}; ${NOTICE}.\n`,
    );
  },
};

/** A key's state in words, with how long until (or since) its end. */
function stateText(row: KeyRow, now: number): string {
  if (row.at === undefined) return row.state;
  const seconds = Math.abs(Date.parse(row.at) - now) / 1000;
  return row.state === "expiring" ? `expires ${row.at} (in ${inWords(seconds)})` : `${row.state} ${row.at}`;
}

function withListOptions<T>(y: Argv<T>) {
  return accountsFileOption(y).option("json", { type: "boolean", default: false, describe: "one JSON object per key instead of a table" });
}

const listCommand: CommandModule<object, ArgsOf<typeof withListOptions>> = {
  command: "list",
  describe: "List accounts and their keys (ids and states, never the keys)",
  builder: withListOptions,
  handler: (args) => {
    const now = new Date();
    const rows = listKeys(existingFile(args["accounts-file"]), now);
    if (args.json) {
      for (const row of rows) process.stdout.write(`${JSON.stringify(row)}\n`);
      return;
    }
    const table = [
      ["ACCOUNT", "KEY ID", "CREATED", "STATE", "MODELS"],
      ...rows.map((r) => [r.account, r.id, r.created, stateText(r, now.getTime()), r.models.join(",")]),
    ];
    const widths = table[0]!.map((_, i) => Math.max(...table.map((line) => (line[i] as string).length)));
    for (const line of table)
      process.stdout.write(
        `${line
          .map((cell, i) => cell.padEnd(widths[i] as number))
          .join("  ")
          .trimEnd()}\n`,
      );
  },
};

/** `typed-eval keys create|list|rotate|revoke`. */
export const keysCommand: CommandModule = {
  command: "keys <command>",
  describe: "Manage API keys of the server's accounts",
  builder: (y) => y.command(createCommand).command(listCommand).command(rotateCommand).command(revokeCommand).demandCommand(1),
  handler: () => undefined,
};
