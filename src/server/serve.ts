/** Runs the API server until SIGTERM or SIGINT, then drains in-flight requests (bounded) and exits 0. */
import type { FastifyInstance } from "fastify";
import type { ModelSet } from "../evaluator/evaluator.js";
import type { Logger } from "../logging/logger.js";
import type { Accounts } from "./accounts.js";
import Fastify from "fastify";
import { buildServer, type ServerOptions, SERVER_DEFAULTS } from "./app.js";
import { metricsReply, ServerMetrics } from "./metrics.js";

export interface ServeOptions extends Omit<ServerOptions, "evaluator" | "accounts" | "logger"> {
  host: string;
  port: number;
  evaluator: ModelSet;
  accounts: Accounts;
  logger: Logger;
  /** How long SIGTERM waits for in-flight requests before exiting anyway. Default 30 s. */
  shutdownGraceMs?: number;
  /** Serve `/metrics` on this port (same host) instead of the API's port. */
  metricsPort?: number | undefined;
}

export interface RunningServer {
  app: FastifyInstance;
  url: string;
  /** Where `/metrics` is scraped when it has a port of its own. */
  metricsUrl?: string;
  /** Stops accepting, waits for in-flight requests (bounded), stops watching the accounts, closes the models. */
  shutdown(reason: string): Promise<void>;
}

export async function startServer(options: ServeOptions): Promise<RunningServer> {
  const { evaluator, accounts, logger } = options;
  const metrics = options.metrics ?? new ServerMetrics({ processMetrics: true });
  const separate = options.metricsPort !== undefined;
  const app = buildServer({ ...options, metrics, metricsRoute: !separate });
  const url = await app.listen({ host: options.host, port: options.port });
  let scrape: FastifyInstance | undefined;
  let metricsUrl: string | undefined;
  if (separate) {
    // Operators scrape from inside: the metrics stay off the public port.
    scrape = Fastify({ logger: false });
    scrape.get("/metrics", async (_request, reply) => metricsReply(metrics, reply));
    metricsUrl = await scrape.listen({ host: options.host, port: options.metricsPort as number });
    logger.info({ metricsUrl }, `metrics on ${metricsUrl}/metrics`);
  }
  logger.info(
    { url, models: evaluator.names(), accounts: accounts.accounts.length },
    `listening on ${url} with ${evaluator.models().length} model names and ${accounts.accounts.length} accounts`,
  );
  let closing: Promise<void> | undefined;
  const shutdown = (reason: string): Promise<void> => {
    closing ??= (async () => {
      const grace = options.shutdownGraceMs ?? SERVER_DEFAULTS.shutdownGraceMs;
      logger.info({ reason, graceMs: grace }, "shutting down: no new requests, finishing those in flight");
      const timer = new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), grace).unref());
      const outcome = await Promise.race([app.close().then(() => "drained" as const), timer]);
      if (outcome === "timeout") logger.warn({ graceMs: grace }, "shutdown grace period over; closing with requests still in flight");
      await scrape?.close();
      accounts.close?.();
      await evaluator.close();
      logger.info({ outcome }, "stopped");
    })();
    return closing;
  };
  return { app, url, ...(metricsUrl ? { metricsUrl } : {}), shutdown };
}
