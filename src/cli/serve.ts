import { existsSync } from "node:fs";
import { createServer } from "node:net";
import type { Argv, CommandModule } from "yargs";
import { MAX_BODY_BYTES } from "../api/limits.js";
import { cliLogger } from "./logger.js";
import { env } from "../api/env.js";
import type { Logger } from "../logging/logger.js";
import { ReloadingAccounts } from "../server/accounts-reload.js";
import { SERVER_DEFAULTS } from "../server/app.js";
import { startServer } from "../server/serve.js";
import { shutDown } from "./boundary.js";
import { UsageError } from "./exit.js";
import { numeric } from "./checks.js";
import { duration } from "./duration.js";
import { AliasError } from "../evaluator/router.js";
import { openModelFromArgs, withModelOptions } from "./model-options.js";
import type { ArgsOf } from "./args.js";
import { accountsFileOption } from "./accounts-option.js";

/** How the server runs: its queue, bodies, reloads, drain and metrics port. */
function withOperationOptions<T>(y: Argv<T>) {
  return y
    .option(
      "max-queue",
      numeric("max-queue", { integer: true, min: 1 }, { default: SERVER_DEFAULTS.maxQueue, describe: "requests in progress beyond which new ones get 529" }),
    )
    .option("body-limit", numeric("body-limit", { integer: true, min: 1 }, { default: MAX_BODY_BYTES, describe: "largest request body in bytes (413 beyond)" }))
    .option(
      "accounts-reload",
      duration(
        "accounts-reload",
        { min: 0 },
        {
          default: `${SERVER_DEFAULTS.accountsPollMs / 1000}s`,
          describe: "how often the accounts file is looked at for a change (0: only on SIGHUP, which always reloads it at once)",
        },
      ),
    )
    .option(
      "shutdown-grace",
      duration(
        "shutdown-grace",
        { min: 0, wasMilliseconds: true },
        { default: `${SERVER_DEFAULTS.shutdownGraceMs / 1000}s`, describe: "how long SIGTERM waits for the requests in flight" },
      ),
    )
    .option(
      "metrics-port",
      numeric(
        "metrics-port",
        { integer: true, min: 0, max: 65535 },
        { describe: "serve GET /metrics (Prometheus) on this port instead of the API's, which then has none" },
      ),
    );
}

function withServeOptions<T>(y: Argv<T>) {
  return withModelOptions(
    withOperationOptions(
      accountsFileOption(y)
        .option("host", { type: "string", default: env("TYPED_EVAL_HOST"), describe: "address to listen on ($TYPED_EVAL_HOST)" })
        .option("port", numeric("port", { integer: true, min: 0, max: 65535 }, { default: env("TYPED_EVAL_PORT"), describe: "port ($TYPED_EVAL_PORT)" }))
        .option("models", {
          type: "array",
          string: true,
          default: [] as string[],
          describe: "models to serve (names, aliases or versioned ids); default: --model",
        })
        .option("sequences", numeric("sequences", { integer: true, min: 1, max: 256 }, { describe: "requests a local model evaluates at once (default 4)" }))
        .option("lenient", {
          type: "boolean",
          default: false,
          describe:
            "ignore unknown keys inside questions, noul criteria keys other than true/false, images and videos, instead of a 422 (for clients that send extensions)",
        })
        .option("alias", {
          type: "array",
          string: true,
          default: [] as string[],
          describe: "NAME=MODEL: another name for a served model, e.g. jev-latest=default (the official SDK's default model); repeatable",
        }),
    ),
  );
}

/**
 * Rejects with the listen error (address in use, not this machine's, a
 * privileged port) when `host:port` cannot be listened on now, so a taken
 * port is reported before a model loads, not after. The real listen is
 * still checked: something may take the port in between.
 */
function canListen(host: string, port: number): Promise<void> {
  if (port === 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()));
  });
}

/**
 * The accounts the server starts with; a bad invocation (exit 2) when there
 * is no file or no live key in it: a server nobody can use.
 */
function openAccounts(path: string, logger: Logger): ReloadingAccounts {
  const create = `Create one with: typed-eval keys create --account NAME --accounts-file ${path}`;
  if (!existsSync(path)) throw new UsageError(`no accounts file at ${path}: the server needs at least one account.\n${create}`);
  const accounts = new ReloadingAccounts(path, { logger });
  if (accounts.liveKeys === 0) throw new UsageError(`${path} holds no live API keys. ${create}`);
  return accounts;
}

/** `typed-eval serve`: the System One v1 HTTP API. */
export const serveCommand: CommandModule<object, ArgsOf<typeof withServeOptions>> = {
  command: "serve",
  describe: "Serve the System One v1 HTTP API (POST /v1/systemone, GET /v1/models)",
  builder: withServeOptions,
  handler: async (args) => {
    const aliases = args.alias.map((text) => {
      const at = text.indexOf("=");
      if (at <= 0 || at === text.length - 1) throw new UsageError(`--alias takes NAME=MODEL, such as jev-latest=default, not ${JSON.stringify(text)}`);
      return { alias: text.slice(0, at), target: text.slice(at + 1) };
    });
    if (args["metrics-port"] !== undefined && args["metrics-port"] === args.port && args.port !== 0) {
      throw new UsageError(`--metrics-port ${args.port} is the API's --port: choose another port for the metrics, or leave it out`);
    }
    const logger = cliLogger();
    const accounts = openAccounts(args["accounts-file"], logger);
    await canListen(args.host, args.port);
    if (args["metrics-port"] !== undefined) await canListen(args.host, args["metrics-port"]);
    const evaluator = await openModelFromArgs(args, { announce: true, models: args.models, sequences: args.sequences });
    let server: Awaited<ReturnType<typeof startServer>>;
    try {
      for (const { alias, target } of aliases) evaluator.addAlias(alias, target);
      server = await startServer({
        host: args.host,
        port: args.port,
        evaluator,
        accounts,
        logger,
        maxQueue: args["max-queue"],
        bodyLimit: args["body-limit"],
        shutdownGraceMs: args["shutdown-grace"] * 1000,
        lenient: args.lenient,
        metricsPort: args["metrics-port"],
      });
    } catch (error) {
      await evaluator.close();
      throw error instanceof AliasError ? new UsageError(error.message) : error;
    }
    const stop = (signal: string) => {
      void server.shutdown(signal).then(() => shutDown());
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
    accounts.watch(args["accounts-reload"] * 1000);
    // SIGHUP's default would end the server: here it means "read the accounts file now".
    process.on("SIGHUP", () => accounts.reload("SIGHUP"));
  },
};
