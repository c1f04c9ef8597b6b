/**
 * The HTTP API of spec sections 4-8 on fastify, as plugins each with its own
 * hooks: request ids and the log line, errors, bodies, metrics, admission
 * (rate limits and the bounded queue), and the routes with auth in front of
 * the API's two. `buildServer` returns the app unstarted, so tests can `inject`.
 */
import { randomUUID } from "node:crypto";
import Fastify, { type FastifyInstance } from "fastify";
import { MAX_BODY_BYTES } from "../api/limits.js";
import type { ModelSet } from "../evaluator/evaluator.js";
import type { Logger } from "../logging/logger.js";
import type { Accounts } from "./accounts.js";
import { bodyPlugin } from "./body.js";
import { errorsPlugin } from "./errors.js";
import { limitsPlugin } from "./limits.js";
import { metricsPlugin, ServerMetrics } from "./metrics.js";
import { RateLimiter } from "./ratelimit.js";
import { requestsPlugin } from "./requests.js";
import { routesPlugin } from "./routes.js";

/** The server's defaults, in one place: `buildServer`/`startServer` fall back to them and `serve`'s flags show them. */
export const SERVER_DEFAULTS = {
  /** Requests in progress beyond which new ones get 529. */
  maxQueue: 64,
  /** How long SIGTERM waits for requests in flight. */
  shutdownGraceMs: 30_000,
  /** How often `serve` looks at the accounts file for a change. */
  accountsPollMs: 1_000,
} as const;

export interface ServerOptions {
  evaluator: ModelSet;
  /** The accounts and keys: a fixed `AccountStore`, or `ReloadingAccounts` following the file. */
  accounts: Accounts;
  logger: Logger;
  limiter?: RateLimiter;
  /** Largest request body in bytes. Default 8 MiB. */
  bodyLimit?: number;
  /** Requests evaluating or waiting beyond which new ones get 529. Default 64. */
  maxQueue?: number;
  /** Ignore unknown keys inside questions, noul criteria keys other than true/false, images and videos (`serve --lenient`). */
  lenient?: boolean;
  /** Where the server counts what it does; `GET /metrics` serves it unless `metricsRoute` is false. */
  metrics?: ServerMetrics;
  /** Serve `/metrics` on this app (the default), or not (it is served on a port of its own). */
  metricsRoute?: boolean;
}

/** The app, its plugins registered in the order their hooks run. */
export function buildServer(options: ServerOptions): FastifyInstance {
  const { evaluator, accounts, logger } = options;
  const metrics = options.metrics ?? new ServerMetrics();
  const app = Fastify({
    logger: false,
    bodyLimit: options.bodyLimit ?? MAX_BODY_BYTES,
    genReqId: () => `req_${randomUUID().replaceAll("-", "")}`,
    return503OnClosing: true,
  });
  app.register(requestsPlugin, { logger });
  app.register(errorsPlugin, { logger });
  app.register(bodyPlugin);
  app.register(metricsPlugin, { metrics, models: evaluator.names(), route: options.metricsRoute ?? true });
  app.register(limitsPlugin, { limiter: options.limiter ?? new RateLimiter(), maxQueue: options.maxQueue ?? SERVER_DEFAULTS.maxQueue, metrics });
  app.register(routesPlugin, { evaluator, accounts, metrics, lenient: options.lenient ?? false });
  return app;
}
