/**
 * The HTTP API of spec sections 4-8 on fastify: bearer auth, validation,
 * per-account limits, a bounded queue, request ids, and JSON errors for
 * everything. `buildServer` returns the app unstarted, so tests can `inject`.
 */
import { randomUUID } from "node:crypto";
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import {
  AuthenticationError,
  BadRequestError,
  InternalServerError,
  MethodNotAllowedError,
  NotFoundError,
  OverloadedError,
  PayloadTooLargeError,
  PermissionDeniedError,
  RateLimitError,
  TypedEvalError,
  UnprocessableEntityError,
  UnsupportedMediaTypeError,
  UpstreamUnavailableError,
} from "../api/errors.js";
import { buildOpenAPIDocument } from "../api/openapi.js";
import type { ModelMetadataList, SystemOneRequest, SystemOneResponse } from "../api/schema.js";
import { ServerMetrics } from "./metrics.js";
import { validateRequest } from "../api/validate.js";
import type { ModelSet } from "../evaluator/evaluator.js";
import type { Logger } from "../logging/logger.js";
import { limitsOf, type Account, type AccountStore } from "./accounts.js";
import { parseJsonBody } from "../api/json.js";
import { MAX_BODY_BYTES } from "../api/limits.js";
import { RateLimiter } from "./ratelimit.js";

/** The server's defaults, in one place: `buildServer`/`startServer` fall back to them and `serve`'s flags show them. */
export const SERVER_DEFAULTS = {
  /** Requests in progress beyond which new ones get 529. */
  maxQueue: 64,
  /** How long SIGTERM waits for requests in flight. */
  shutdownGraceMs: 30_000,
} as const;

export interface ServerOptions {
  evaluator: ModelSet;
  accounts: AccountStore;
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

/** What a request did, for its log line. */
interface RequestInfo {
  account?: string;
  model?: string;
  questions?: number;
  inputTokens?: number;
  retryCount?: string;
}

declare module "fastify" {
  interface FastifyRequest {
    info: RequestInfo;
    account: Account | undefined;
  }
}

const V1_ROUTES: Record<string, string> = { "/v1/systemone": "POST", "/v1/models": "GET" };
const ALL_METHODS = ["DELETE", "GET", "HEAD", "PATCH", "POST", "PUT", "OPTIONS"] as const;

/** Maps fastify's own errors (parsing, content type, size) onto our error classes. */
function fromFastifyError(error: FastifyError): TypedEvalError {
  switch (error.code) {
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return new UnsupportedMediaTypeError("Content-Type must be application/json");
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return new PayloadTooLargeError(`${error.message}; split the request or send a smaller state`);
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return new UnprocessableEntityError([{ type: "missing", loc: ["body"], msg: "Field required" }]);
    default:
      if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) return new BadRequestError(error.message);
      return new InternalServerError("internal error; the request id identifies it in the server log");
  }
}

function bearerKey(header: string | undefined): string {
  if (!header) throw new AuthenticationError("Missing API key: send the header `Authorization: Bearer <API key>`");
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match) throw new AuthenticationError("Malformed Authorization header: expected `Bearer <API key>`");
  return match[1] as string;
}

export function buildServer(options: ServerOptions): FastifyInstance {
  const { evaluator, accounts, logger } = options;
  const limiter = options.limiter ?? new RateLimiter();
  const maxQueue = options.maxQueue ?? SERVER_DEFAULTS.maxQueue;
  const metrics = options.metrics ?? new ServerMetrics();
  metrics.maxQueue.set(maxQueue);
  for (const name of evaluator.names()) metrics.modelLoaded.set({ model: name }, 1);
  let inFlight = 0;
  // Recent request time, for a 529's retry-after.
  let averageMs = 1000;

  const app = Fastify({
    logger: false,
    bodyLimit: options.bodyLimit ?? MAX_BODY_BYTES,
    genReqId: () => `req_${randomUUID().replaceAll("-", "")}`,
    return503OnClosing: true,
  });
  app.decorateRequest("info", null as unknown as RequestInfo);
  app.decorateRequest("account", undefined);

  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "string" }, (_request, body, done) => {
    try {
      done(null, parseJsonBody(body as string));
    } catch (error) {
      done(error as Error, undefined);
    }
  });

  // The hooks take callbacks rather than being async: each async hook costs a promise and a turn of the microtask queue per request.
  app.addHook("onRequest", (request, reply, done) => {
    request.info = {};
    const retry = request.headers["x-service-retry-count"] ?? request.headers["x-typesafe-retry-count"];
    if (typeof retry === "string") request.info.retryCount = retry;
    reply.header("x-service-request-id", request.id).header("x-typesafe-request-id", request.id);
    // routeOptions builds a new object on every read: read it once.
    const route = request.routeOptions.url;
    if (route !== undefined && V1_ROUTES[route] === request.method) {
      try {
        const account = accounts.authenticate(bearerKey(request.headers.authorization));
        if (!account) throw new AuthenticationError("Invalid API key");
        request.account = account;
        request.info.account = account.name;
      } catch (error) {
        done(error as Error);
        return;
      }
    }
    done();
  });

  // While closing, answers to requests in flight close their connection, so a drain does not wait on idle keep-alives.
  let closing = false;
  app.addHook("preClose", async () => {
    closing = true;
  });
  app.addHook("onSend", (_request, reply, payload, done) => {
    if (closing) reply.header("connection", "close");
    done(null, payload);
  });

  app.addHook("onResponse", (request, reply, done) => {
    const ms = reply.elapsedTime;
    const status = reply.statusCode;
    // Unknown paths count under one label, so a scanner cannot grow the series without bound.
    const route = request.routeOptions.url ?? "unmatched";
    metrics.requests.inc({ route, method: request.method, status: String(status) });
    metrics.latency.observe({ route }, ms / 1000);
    if (status === 429) metrics.rateLimited.inc({ account: request.info.account ?? "" });
    if (status === 529) metrics.overloaded.inc({ account: request.info.account ?? "" });
    if (route === "/v1/systemone" && status === 200) averageMs = 0.8 * averageMs + 0.2 * ms;
    logger.info({ requestId: request.id, method: request.method, url: request.url, status, ms: Math.round(ms), ...request.info }, "request");
    done();
  });

  app.setErrorHandler((error: FastifyError | TypedEvalError, request: FastifyRequest, reply: FastifyReply) => {
    if (reply.raw.destroyed) {
      logger.info({ requestId: request.id }, "client went away before the answer");
      return;
    }
    const mapped = error instanceof TypedEvalError ? error : fromFastifyError(error);
    if (mapped.status >= 500) logger.error({ requestId: request.id, err: error }, "request failed");
    return reply.code(mapped.status).headers(mapped.headers()).type("application/json").send(mapped.body());
  });

  app.setNotFoundHandler((request, reply) => {
    const error = new NotFoundError(`No route ${request.method} ${request.url.split("?")[0]}; the API serves POST /v1/systemone and GET /v1/models`);
    return reply.code(404).type("application/json").send(error.body());
  });

  const allowed = (account: Account, model: string): boolean => {
    if (account.models.includes("*")) return true;
    const target = evaluator.lookup(model);
    return account.models.some((name) => evaluator.lookup(name) === target);
  };

  /**
   * Label mass on request (`?x_label_mass=true` or the header `x-label-mass: true`), as SGLang's
   * `x_label_mass` field: off by default, so clients that pin the answers' exact keys are unaffected.
   */
  const wantsLabelMass = (request: FastifyRequest): boolean => {
    const query = (request.query as Record<string, unknown> | undefined)?.["x_label_mass"];
    const header = request.headers["x-label-mass"];
    return [query, header].some((v) => typeof v === "string" && /^(1|true|yes)$/i.test(v));
  };

  app.post("/v1/systemone", async (request, reply) => {
    const account = request.account as Account;
    const checked = validateRequest(request.body, { lenient: options.lenient ?? false });
    if (!checked.ok) throw new UnprocessableEntityError(checked.errors);
    const body: SystemOneRequest = checked.value;
    request.info.model = body.model;
    request.info.questions = Object.keys(body.questions).length;
    evaluator.route(body.model); // unknown model: 422 before any other check
    if (!allowed(account, body.model)) {
      throw new PermissionDeniedError(`Account ${account.name} may not use model '${body.model}'`);
    }
    const tokens = evaluator.estimateInputTokens(body);
    request.info.inputTokens = tokens;
    const limits = limitsOf(account);
    const admission = limiter.admit(account.name, limits, tokens);
    if (!admission.ok) {
      throw new RateLimitError(
        `Rate limit of ${admission.limit} exceeded for account ${account.name}; retry in ${(admission.retryAfterMs / 1000).toFixed(1)} s`,
        admission.retryAfterMs,
      );
    }
    if (inFlight >= maxQueue) {
      limiter.settle(account.name, tokens, 0);
      throw new OverloadedError(`Server overloaded: ${inFlight} requests in progress; retry shortly`, averageMs);
    }
    inFlight++;
    metrics.inProgress.set(inFlight);
    const abort = new AbortController();
    // The response closes early only when the client goes away: stop spending on its request.
    reply.raw.on("close", () => {
      if (!reply.raw.writableFinished) abort.abort(new Error("client closed the connection"));
    });
    try {
      const { response, labelMass } = await evaluator.evaluate(body, {
        signal: abort.signal,
        ...(request.info.retryCount ? { retryCount: Number(request.info.retryCount) || 0 } : {}),
      });
      limiter.settle(account.name, tokens, response.usage.input_tokens);
      request.info.inputTokens = response.usage.input_tokens;
      metrics.inputTokens.inc({ model: response.model }, response.usage.input_tokens);
      metrics.outputTokens.inc({ model: response.model }, response.usage.output_tokens);
      return reply.send(wantsLabelMass(request) ? withLabelMass(response, labelMass) : response);
    } catch (error) {
      // An upstream that refuses this server's own credentials is a gateway failure, not the caller's.
      if (error instanceof AuthenticationError || error instanceof PermissionDeniedError) {
        throw new UpstreamUnavailableError(`the upstream endpoint refused this server's credentials: ${error.message}`);
      }
      throw error;
    } finally {
      inFlight--;
      metrics.inProgress.set(inFlight);
    }
  });

  app.get("/v1/models", async (request): Promise<ModelMetadataList> => {
    const account = request.account as Account;
    return { models: evaluator.models().filter((m) => allowed(account, m.name)) };
  });

  const openapi = buildOpenAPIDocument();
  app.get("/openapi.json", async () => openapi);
  // `/health` too: the path other servers of this API (llama.cpp, SGLang) answer on.
  for (const url of ["/healthz", "/health"]) app.get(url, async () => ({ status: "ok", in_flight: inFlight }));
  if (options.metricsRoute ?? true) app.get("/metrics", async (_request, reply) => metricsReply(metrics, reply));

  for (const [url, method] of Object.entries(V1_ROUTES)) {
    const others = ALL_METHODS.filter((m) => m !== method && !(method === "GET" && m === "HEAD"));
    app.route({
      method: [...others],
      url,
      handler: async () => {
        throw new MethodNotAllowedError(`${url} accepts ${method} only`, [method]);
      },
    });
  }
  return app;
}

/** Each answer with `x_label_mass`: the share of the next-token distribution on its labels (when the model reports it). */
function withLabelMass(response: SystemOneResponse, mass: Record<string, number> | undefined): SystemOneResponse {
  if (!mass) return response;
  const answers = Object.fromEntries(
    Object.entries(response.answers).map(([name, a]) => [name, mass[name] === undefined ? a : { ...a, x_label_mass: mass[name] }]),
  );
  return { ...response, answers: answers as SystemOneResponse["answers"] };
}

/** The Prometheus text of a server's metrics. */
export async function metricsReply(metrics: ServerMetrics, reply: FastifyReply): Promise<FastifyReply> {
  const { contentType, body } = await metrics.text();
  return reply.type(contentType).send(body);
}
