/**
 * Admission: the per-account rate limits (429, with when capacity frees) and
 * the bounded queue of requests in progress (529, with the recent request
 * time as its retry-after). Routes ask it before paying for an evaluation
 * and give the slot back when it is over.
 */
import type { FastifyRequest } from "fastify";
import { OverloadedError, RateLimitError } from "../api/errors.js";
import { type Account, limitsOf } from "./accounts.js";
import type { ServerMetrics } from "./metrics.js";
import { shared } from "./plugin.js";
import type { RateLimiter } from "./ratelimit.js";

export interface Admission {
  /**
   * Admits `request` of `tokens` estimated input tokens for `account`, or
   * throws the 429 or 529 it gets. Returns the slot's release, to be called
   * once, with the real input tokens when the evaluation answered.
   */
  admit(request: FastifyRequest, account: Account, tokens: number): (actualTokens?: number) => void;
  /** Requests admitted and not yet released. */
  readonly inFlight: number;
}

declare module "fastify" {
  interface FastifyInstance {
    admission: Admission;
  }
  interface FastifyRequest {
    /** Whether it went through admission (its time counts towards a 529's retry-after). */
    admitted: boolean;
  }
}

export interface LimitsOptions {
  limiter: RateLimiter;
  /** Requests in progress beyond which new ones get 529. */
  maxQueue: number;
  metrics: ServerMetrics;
}

/** Decorates the app with `admission`; its hook keeps the recent request time. */
export const limitsPlugin = shared<LimitsOptions>((app, { limiter, maxQueue, metrics }, done) => {
  metrics.maxQueue.set(maxQueue);
  let inFlight = 0;
  // Recent request time, for a 529's retry-after.
  let averageMs = 1000;

  const admission: Admission = {
    get inFlight() {
      return inFlight;
    },
    admit(request, account, tokens) {
      const decision = limiter.admit(account.name, limitsOf(account), tokens);
      if (!decision.ok) {
        const wait = (decision.retryAfterMs / 1000).toFixed(1);
        throw new RateLimitError(`Rate limit of ${decision.limit} exceeded for account ${account.name}; retry in ${wait} s`, decision.retryAfterMs);
      }
      if (inFlight >= maxQueue) {
        limiter.settle(account.name, tokens, 0);
        throw new OverloadedError(`Server overloaded: ${inFlight} requests in progress; retry shortly`, averageMs);
      }
      request.admitted = true;
      metrics.inProgress.set(++inFlight);
      return (actualTokens) => {
        if (actualTokens !== undefined) limiter.settle(account.name, tokens, actualTokens);
        metrics.inProgress.set(--inFlight);
      };
    },
  };
  app.decorate("admission", admission);
  app.decorateRequest("admitted", false);
  app.addHook("onResponse", (request, reply, next) => {
    if (request.admitted && reply.statusCode === 200) averageMs = 0.8 * averageMs + 0.2 * reply.elapsedTime;
    next();
  });
  done();
});
