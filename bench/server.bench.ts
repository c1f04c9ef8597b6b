/**
 * Server overhead: the same kind of request to the same tiny generated model,
 * called directly on the evaluator and POSTed over loopback HTTP, interleaved
 * (each call a record of its own, the paths alternating which goes first);
 * then requests/s at saturation with 16 concurrent clients.
 *
 * The HTTP client runs in a child process (bench/server-client.ts), as a real
 * client does: in this process its request building, parsing and writes
 * would count as the server's added latency. The server logs at info (to a
 * sink), as `serve` does.
 *
 * Run twice: llama.cpp on 1 thread, so the HTTP work has a core of its own
 * (the goal is judged here), and on both cores, where any work on the main
 * thread stalls llama.cpp's spinning threads and shows as added latency
 * (BENCH_THREADS=1 runs the first only).
 * Wall times on a crowded machine are noise, so the run also reports the
 * load average and this process's CPU per request on each path.
 */
import type { AddressInfo } from "node:net";
import { loadavg } from "node:os";
import { Writable } from "node:stream";
import { createLogger } from "../src/logging/logger.js";
import { buildServer } from "../src/server/app.js";
import { RateLimiter } from "../src/server/ratelimit.js";
import { testAccounts, testRouter } from "../test/server/helpers.js";
import { type Benchmark, median, type Ratio } from "./harness.js";
import { benchRequest, forkClient } from "./http-client.js";
import { CpuTally } from "./server-cpu.js";

const N = Number(process.env["BENCH_REQUESTS"] ?? 400);

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

const sink = new Writable({
  write(_chunk, _encoding, done) {
    done();
  },
});

async function measure(threads: number) {
  const { router } = await testRouter(threads);
  const app = buildServer({
    evaluator: router,
    accounts: testAccounts(),
    logger: createLogger({ level: "info", destination: sink }),
    limiter: new RateLimiter(),
    maxQueue: 1000,
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const port = (app.server.address() as AddressInfo).port;
  const client = await forkClient();
  let serial = 0;
  const next = (i: number) => benchRequest(String(serial++), i);
  // Both paths warmed alike: the engine keeps the shared system text between requests.
  for (let i = 0; i < 20; i++) {
    await router.evaluate(next(i));
    await client.post(port, next(i));
  }
  const load = [loadavg()[0] as number];
  const direct: number[] = [];
  const http: number[] = [];
  const cpu = { direct: new CpuTally(), http: new CpuTally() };
  const cpuOf = async (path: "direct" | "http", fn: () => Promise<number>) => {
    const stop = cpu[path].start();
    const ms = await fn();
    stop();
    return ms;
  };
  for (let i = 0; i < N; i++) {
    const [a, b] = [next(i), next(i)];
    const d = () =>
      cpuOf("direct", async () => {
        const start = process.hrtime.bigint();
        await router.evaluate(a);
        return Number(process.hrtime.bigint() - start) / 1e6;
      });
    const h = () => cpuOf("http", async () => (await client.post(port, b)).ms);
    // Alternate which path goes first, so neither always follows the other.
    if (i % 2 === 0) {
      direct.push(await d());
      http.push(await h());
    } else {
      http.push(await h());
      direct.push(await d());
    }
    if (i === N >> 1) load.push(loadavg()[0] as number);
  }
  load.push(loadavg()[0] as number);
  const seconds = Number(process.env["BENCH_SATURATION_SECONDS"] ?? 10);
  const rps = await client.saturate(port, 16, seconds);
  client.close();
  await app.close();
  await router.close();
  return {
    p50: [percentile(direct, 50), percentile(http, 50)] as const,
    p99: [percentile(direct, 99), percentile(http, 99)] as const,
    // This process only: the server, the engine's threads, and the IPC to the client (tens of µs).
    cpu: [cpu.direct.perCall(N), cpu.http.perCall(N)] as const,
    load: median(load),
    rps,
  };
}

const benchmark: Benchmark = {
  name: "server",
  description: `HTTP server overhead over loopback (client in a child process), tiny generated model, ${N} requests per path`,
  async run() {
    const figures: Record<string, number> = {};
    const ratios: Ratio[] = [];
    // BENCH_THREADS runs one row only (the 2-thread row takes minutes on a crowded machine).
    const rows = process.env["BENCH_THREADS"] ? [Number(process.env["BENCH_THREADS"])] : [1, 2];
    for (const threads of rows) {
      const m = await measure(threads);
      const tag = `llama ${threads} thread${threads > 1 ? "s" : ""}`;
      figures[`${tag}: load average (1 min) during`] = m.load;
      figures[`${tag}: direct p50 ms`] = m.p50[0];
      figures[`${tag}: direct p99 ms`] = m.p99[0];
      figures[`${tag}: HTTP p50 ms`] = m.p50[1];
      figures[`${tag}: HTTP p99 ms`] = m.p99[1];
      figures[`${tag}: added at p99 ms`] = m.p99[1] - m.p99[0];
      figures[`${tag}: server main thread CPU µs/request, direct`] = m.cpu[0].main;
      figures[`${tag}: server main thread CPU µs/request, HTTP`] = m.cpu[1].main;
      figures[`${tag}: server other threads CPU µs/request, direct`] = m.cpu[0].others;
      figures[`${tag}: server other threads CPU µs/request, HTTP`] = m.cpu[1].others;
      figures[`${tag}: 16 clients, requests/s`] = m.rps;
      ratios.push({ name: `${tag}: added at p50 (ms)`, value: m.p50[1] - m.p50[0], ...(threads === 1 ? { goal: { max: 1 } } : {}) });
    }
    return { figures, ratios };
  },
};
export default benchmark;
