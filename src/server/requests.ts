/**
 * What every request gets, whatever its route: request ids in both headers,
 * the client's retry count, one log line when it is answered, and
 * `connection: close` on answers sent while the server drains.
 */
import type { Logger } from "../logging/logger.js";
import { shared } from "./plugin.js";

/** What a request did, for its log line. */
export interface RequestInfo {
  account?: string;
  keyId?: string;
  model?: string;
  questions?: number;
  inputTokens?: number;
  retryCount?: string;
}

declare module "fastify" {
  interface FastifyRequest {
    info: RequestInfo;
  }
}

/** Request ids, retry counts, drain and the log line. */
export const requestsPlugin = shared<{ logger: Logger }>((app, { logger }, done) => {
  app.decorateRequest("info", null as unknown as RequestInfo);

  // The hooks take callbacks rather than being async: each async hook costs a promise and a turn of the microtask queue per request.
  app.addHook("onRequest", (request, reply, next) => {
    request.info = {};
    const retry = request.headers["x-service-retry-count"] ?? request.headers["x-typesafe-retry-count"];
    if (typeof retry === "string") request.info.retryCount = retry;
    reply.header("x-service-request-id", request.id).header("x-typesafe-request-id", request.id);
    next();
  });

  // While closing, answers to requests in flight close their connection, so a drain does not wait on idle keep-alives.
  let closing = false;
  app.addHook("preClose", async () => {
    closing = true;
  });
  app.addHook("onSend", (_request, reply, payload, next) => {
    if (closing) reply.header("connection", "close");
    next(null, payload);
  });

  app.addHook("onResponse", (request, reply, next) => {
    const { statusCode: status, elapsedTime: ms } = reply;
    logger.info({ requestId: request.id, method: request.method, url: request.url, status, ms: Math.round(ms), ...request.info }, "request");
    next();
  });
  done();
});
