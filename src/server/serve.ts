/** Runs the API server until SIGTERM or SIGINT, then drains in-flight requests (bounded) and exits 0. */
import type { FastifyInstance } from "fastify";
import type { ModelRouter } from "../evaluator/router.js";
import type { Logger } from "../logging/logger.js";
import type { AccountStore } from "./accounts.js";
import { buildServer, type ServerOptions } from "./app.js";

export interface ServeOptions extends Omit<ServerOptions, "evaluator" | "accounts" | "logger"> {
  host: string;
  port: number;
  evaluator: ModelRouter;
  accounts: AccountStore;
  logger: Logger;
  /** How long SIGTERM waits for in-flight requests before exiting anyway. Default 30 s. */
  shutdownGraceMs?: number;
}

export interface RunningServer {
  app: FastifyInstance;
  url: string;
  /** Stops accepting, waits for in-flight requests (bounded), closes the models. */
  shutdown(reason: string): Promise<void>;
}

export async function startServer(options: ServeOptions): Promise<RunningServer> {
  const { evaluator, accounts, logger } = options;
  const app = buildServer(options);
  const url = await app.listen({ host: options.host, port: options.port });
  logger.info(
    { url, models: evaluator.names(), accounts: accounts.accounts.length },
    `listening on ${url} with ${evaluator.models().length} model names and ${accounts.accounts.length} accounts`,
  );
  let closing: Promise<void> | undefined;
  const shutdown = (reason: string): Promise<void> => {
    closing ??= (async () => {
      const grace = options.shutdownGraceMs ?? 30_000;
      logger.info({ reason, graceMs: grace }, "shutting down: no new requests, finishing those in flight");
      const timer = new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), grace).unref());
      const outcome = await Promise.race([app.close().then(() => "drained" as const), timer]);
      if (outcome === "timeout") logger.warn({ graceMs: grace }, "shutdown grace period over; closing with requests still in flight");
      await evaluator.close();
      logger.info({ outcome }, "stopped");
    })();
    return closing;
  };
  return { app, url, shutdown };
}
