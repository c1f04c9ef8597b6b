/**
 * Server metrics in the Prometheus text format (prom-client, one registry per
 * server so several servers in one process do not share counters): requests
 * by route and status, latency, tokens, requests in progress, 429s and 529s
 * per account, and which models are loaded. Scraped at `GET /metrics`, on
 * the API's port or, with `--metrics-port`, on a port of its own.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

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
