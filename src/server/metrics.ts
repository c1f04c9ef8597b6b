/**
 * Server metrics in the Prometheus text format (prom-client, one registry per
 * server so several servers in one process do not share counters): requests
 * by route and status, latency, tokens, requests in progress, 429s and 529s
 * per account, and which models are loaded. Scraped at `GET /metrics`, on
 * the API's port or, with `--metrics-port`, on a port of its own. The plugin
 * counts every answered request in its own hook.
 */
import type { FastifyReply } from "fastify";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { shared } from "./plugin.js";

export class ServerMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: "typed_eval_http_requests_total",
    help: "HTTP requests answered, by route and status.",
    labelNames: ["route", "method", "status"],
    registers: [this.registry],
  });
  readonly latency = new Histogram({
    name: "typed_eval_http_request_duration_seconds",
    help: "Time from request to response, by route.",
    labelNames: ["route"],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly inputTokens = new Counter({
    name: "typed_eval_input_tokens_total",
    help: "Billable input tokens of answered requests, by model.",
    labelNames: ["model"],
    registers: [this.registry],
  });
  readonly outputTokens = new Counter({
    name: "typed_eval_output_tokens_total",
    help: "Output tokens (answer positions read) of answered requests, by model.",
    labelNames: ["model"],
    registers: [this.registry],
  });
  readonly inProgress = new Gauge({
    name: "typed_eval_requests_in_progress",
    help: "Admitted /v1/systemone requests evaluating or waiting for a model sequence.",
    registers: [this.registry],
  });
  readonly maxQueue = new Gauge({
    name: "typed_eval_requests_in_progress_limit",
    help: "Requests in progress beyond which new ones get 529.",
    registers: [this.registry],
  });
  readonly rateLimited = new Counter({
    name: "typed_eval_rate_limited_total",
    help: "Requests refused with 429, by account.",
    labelNames: ["account"],
    registers: [this.registry],
  });
  readonly overloaded = new Counter({
    name: "typed_eval_overloaded_total",
    help: "Requests refused with 529, by account.",
    labelNames: ["account"],
    registers: [this.registry],
  });
  readonly modelLoaded = new Gauge({
    name: "typed_eval_model_loaded",
    help: "1 for each model name this server answers to.",
    labelNames: ["model"],
    registers: [this.registry],
  });

  constructor(options: { processMetrics?: boolean } = {}) {
    // Process figures (memory, event-loop lag, GC) only for a real server: a test process would report its own.
    if (options.processMetrics) collectDefaultMetrics({ register: this.registry, prefix: "typed_eval_" });
  }

  async text(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}

/** The Prometheus text of a server's metrics. */
export async function metricsReply(metrics: ServerMetrics, reply: FastifyReply): Promise<FastifyReply> {
  const { contentType, body } = await metrics.text();
  return reply.type(contentType).send(body);
}

export interface MetricsOptions {
  metrics: ServerMetrics;
  /** The model names the server answers to. */
  models: readonly string[];
  /** Serve `GET /metrics` on this app (else it has a port of its own). */
  route: boolean;
}

/** Counts each answered request by route and status; serves `/metrics` when asked. */
export const metricsPlugin = shared<MetricsOptions>((app, { metrics, models, route }, done) => {
  for (const name of models) metrics.modelLoaded.set({ model: name }, 1);
  app.addHook("onResponse", (request, reply, next) => {
    const status = reply.statusCode;
    // Unknown paths count under one label, so a scanner cannot grow the series without bound. routeOptions builds a new object on every read: read it once.
    const url = request.routeOptions.url ?? "unmatched";
    metrics.requests.inc({ route: url, method: request.method, status: String(status) });
    metrics.latency.observe({ route: url }, reply.elapsedTime / 1000);
    if (status === 429) metrics.rateLimited.inc({ account: request.info.account ?? "" });
    if (status === 529) metrics.overloaded.inc({ account: request.info.account ?? "" });
    next();
  });
  if (route) app.get("/metrics", async (_request, reply) => metricsReply(metrics, reply));
  done();
});
