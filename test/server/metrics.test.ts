/** GET /metrics in the Prometheus text format, parsed by an independent parser; counters move with each status. */
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ModelRouter } from "../../src/evaluator/router.js";
import type { SystemOneResponse } from "../../src/api/schema.js";
import { buildServer } from "../../src/server/app.js";
import { startServer } from "../../src/server/serve.js";
import { call, KEYS, memoryLogger, testAccounts, testRouter } from "./helpers.js";

let router: ModelRouter;
beforeAll(async () => {
  ({ router } = await testRouter(1));
}, 60_000);
afterAll(async () => {
  await router?.close();
});

const good = { state: "My parcel is late.", model: "tiny", questions: { late: { type: "noul" } } };

function value(text: string, name: string, labels: Record<string, string> = {}): number {
  const family = parsePrometheusTextFormat(text).find((f) => f.name === name);
  const sample = family?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  return sample?.value === undefined ? (sample?.count !== undefined ? Number(sample.count) : 0) : Number(sample.value);
}

describe("GET /metrics", () => {
  it("counts requests by route and status, tokens, 429s per account, and lists the models loaded", async () => {
    const app = buildServer({ evaluator: router, accounts: testAccounts(), logger: memoryLogger().logger });
    await app.listen({ host: "127.0.0.1", port: 0 });
    try {
      const scrape = async () => {
        const r = await call(app, "http", "GET", "/metrics", { key: null });
        expect(r.status).toBe(200);
        expect(r.headers["content-type"]).toMatch(/^text\/plain; version=0\.0\.4/);
        return r.text;
      };
      const before = await scrape();
      const ok = await call(app, "http", "POST", "/v1/systemone", { body: good });
      expect(ok.status).toBe(200);
      expect((await call(app, "http", "POST", "/v1/systemone", { body: { ...good, questions: {} } })).status).toBe(422);
      expect((await call(app, "http", "POST", "/v1/systemone", { body: good, key: "te_wrong" })).status).toBe(401);
      expect((await call(app, "http", "GET", "/nowhere", { key: null })).status).toBe(404);
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await call(app, "http", "POST", "/v1/systemone", { body: good, key: KEYS.slow })).status);
      expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(0);
      const after = await scrape();
      const moved = (labels: Record<string, string>) =>
        value(after, "typed_eval_http_requests_total", labels) - value(before, "typed_eval_http_requests_total", labels);
      expect(moved({ route: "/v1/systemone", status: "200" })).toBe(1 + statuses.filter((s) => s === 200).length);
      expect(moved({ route: "/v1/systemone", status: "422" })).toBe(1);
      expect(moved({ route: "/v1/systemone", status: "401" })).toBe(1);
      expect(moved({ route: "unmatched", status: "404" })).toBe(1);
      expect(value(after, "typed_eval_rate_limited_total", { account: "slowpoke" })).toBe(statuses.filter((s) => s === 429).length);
      const usage = (ok.json as SystemOneResponse).usage;
      expect(value(after, "typed_eval_input_tokens_total", { model: "tiny-1.0.0" })).toBe(usage.input_tokens * (1 + statuses.filter((s) => s === 200).length));
      expect(value(after, "typed_eval_model_loaded", { model: "tiny" })).toBe(1);
      expect(value(after, "typed_eval_requests_in_progress")).toBe(0);
      // That parser keeps a histogram's buckets but drops their labels: the route's count is read from the text.
      expect(parsePrometheusTextFormat(after).find((f) => f.name === "typed_eval_http_request_duration_seconds")?.type).toBe("HISTOGRAM");
      const count = /typed_eval_http_request_duration_seconds_count\{route="\/v1\/systemone"\} (\d+)/.exec(after);
      expect(Number(count?.[1])).toBe(3 + statuses.length);
    } finally {
      await app.close();
    }
  }, 60_000);

  it("with --metrics-port, serves metrics only there, off the API's port", async () => {
    const { router: own } = await testRouter(1);
    const server = await startServer({ host: "127.0.0.1", port: 0, metricsPort: 0, evaluator: own, accounts: testAccounts(), logger: memoryLogger().logger });
    try {
      expect((await fetch(`${server.url}/metrics`)).status).toBe(404);
      const r = await fetch(`${server.metricsUrl}/metrics`);
      expect(r.status).toBe(200);
      const text = await r.text();
      expect(value(text, "typed_eval_model_loaded", { model: "tiny" })).toBe(1);
      expect(text).toContain("typed_eval_process_resident_memory_bytes");
    } finally {
      await server.shutdown("test");
    }
  }, 60_000);
});
