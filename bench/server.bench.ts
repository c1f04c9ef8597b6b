/**
 * Server overhead: the same requests to the same tiny generated model, called
 * directly on the evaluator and POSTed over loopback HTTP (keep-alive
 * node:http client), interleaved; then requests/s at saturation with 16
 * concurrent clients.
 *
 * Run twice: llama.cpp on 1 thread, so the HTTP work has a core of its own
 * (the goal is judged here), and on both cores, where any work on the main
 * thread stalls llama.cpp's spinning threads and shows as added latency.
 */
import { Agent } from "node:http";
import type { AddressInfo } from "node:net";
import type { SystemOneRequest } from "../src/api/schema.js";
import { buildServer } from "../src/server/app.js";
import { createLogger } from "../src/logging/logger.js";
import { RateLimiter } from "../src/server/ratelimit.js";
import { testAccounts, testRouter } from "../test/server/helpers.js";
import type { Benchmark, Ratio } from "./harness.js";
import { systemOnePoster } from "./http-client.js";

const N = Number(process.env["BENCH_REQUESTS"] ?? 400);

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

async function measure(threads: number) {
  const { router } = await testRouter(threads);
  const app = buildServer({
    evaluator: router,
    accounts: testAccounts(),
    logger: createLogger({ level: "silent" }),
    limiter: new RateLimiter(),
    maxQueue: 1000,
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const port = (app.server.address() as AddressInfo).port;
  const agent = new Agent({ keepAlive: true, maxSockets: 32 });
  // Every call a record of its own: the engine keeps each sequence's prefix, and a record answered
  // directly and then again over HTTP would find its whole state cached the second time.
  let serial = 0;
  const next = (i: number): SystemOneRequest => ({
    state: { ticket: `Ticket ${serial++}: my order ${"never arrived ".repeat(1 + (i % 8))}` },
    model: "tiny",
    questions: { refund: { type: "noul" }, team: { type: "choice", criteria: { a: null, b: null, c: null } } },
  });
  const post = systemOnePoster(port, agent);
  const timed = async (fn: () => Promise<unknown>) => {
    const start = process.hrtime.bigint();
    await fn();
    return Number(process.hrtime.bigint() - start) / 1e6;
  };
  for (let i = 0; i < 20; i++) {
    await router.evaluate(next(i));
    await post(next(i));
  }
  const direct: number[] = [];
  const http: number[] = [];
  for (let i = 0; i < N; i++) {
    // Alternate which path goes first, so neither always follows the other.
    const [a, b] = [next(i), next(i)];
    const d = () => timed(() => router.evaluate(a));
    const h = () => timed(() => post(b));
    if (i % 2 === 0) {
      direct.push(await d());
      http.push(await h());
    } else {
      http.push(await h());
      direct.push(await d());
    }
  }
  // Saturation: 16 clients, each sending its next request when the last answers.
  const seconds = Number(process.env["BENCH_SATURATION_SECONDS"] ?? 10);
  let done = 0;
  const until = Date.now() + seconds * 1000;
  const start = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: 16 }, async (_, c) => {
      for (let i = c; Date.now() < until; i += 16) {
        await post(next(i));
        done++;
      }
    }),
  );
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  agent.destroy();
  await app.close();
  await router.close();
  return {
    p50: [percentile(direct, 50), percentile(http, 50)] as const,
    p99: [percentile(direct, 99), percentile(http, 99)] as const,
    rps: done / elapsed,
  };
}

const benchmark: Benchmark = {
  name: "server",
  description: `HTTP server overhead over loopback, tiny generated model, ${N} requests per path`,
  async run() {
    const figures: Record<string, number> = {};
    const ratios: Ratio[] = [];
    for (const threads of [1, 2]) {
      const m = await measure(threads);
      const tag = `llama ${threads} thread${threads > 1 ? "s" : ""}`;
      figures[`${tag}: direct p50 ms`] = m.p50[0];
      figures[`${tag}: direct p99 ms`] = m.p99[0];
      figures[`${tag}: HTTP p50 ms`] = m.p50[1];
      figures[`${tag}: HTTP p99 ms`] = m.p99[1];
      figures[`${tag}: added at p99 ms`] = m.p99[1] - m.p99[0];
      figures[`${tag}: 16 clients, requests/s`] = m.rps;
      ratios.push({ name: `${tag}: added at p50 (ms)`, value: m.p50[1] - m.p50[0], ...(threads === 1 ? { goal: { max: 2 } } : {}) });
    }
    return { figures, ratios };
  },
};
export default benchmark;
