/**
 * Server overhead: the same kind of request to the same tiny generated model,
 * called directly on the evaluator and POSTed over loopback HTTP, interleaved
 * (each call a record of its own, the paths in a fresh random order each round); then
 * requests/s at saturation with 16 concurrent clients.
 *
 * The HTTP clients run in a child process (bench/server-client.ts), as a real
 * client does: in this process their request building, parsing and writes
 * would count as the server's added latency. Four paths, side by side:
 * - direct: `evaluate` called in this process;
 * - the app, minimal client: the request's bytes on a keep-alive socket, the
 *   answer read by its Content-Length. What it adds over the direct call is
 *   the server's added latency: the app, node's HTTP stack and the loopback
 *   (the goal is judged here);
 * - the app, node:http client: the same plus what node:http's client costs
 *   on its side (a ClientRequest and a response stream per call);
 * - a bare node:http server with the same evaluator and no check at all
 *   (parse, evaluate, stringify), minimal client: the floor any Node server
 *   pays on this machine, so "app - bare" is what the app's checks cost.
 * The app logs at info (to a sink), as `serve` does.
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
import type { SystemOneRequest } from "../src/api/schema.js";
import { createLogger } from "../src/logging/logger.js";
import { buildServer } from "../src/server/app.js";
import { RateLimiter } from "../src/server/ratelimit.js";
import { testAccounts, testRouter } from "../test/server/helpers.js";
import { type Benchmark, median, type Ratio, shuffler } from "./harness.js";
import { bareServer } from "./bare-server.js";
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

const PATHS = ["direct", "app, minimal client", "app, node:http client", "bare node:http, minimal client"] as const;
type Path = (typeof PATHS)[number];

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
  const bare = await bareServer(router);
  const client = await forkClient();
  let serial = 0;
  const next = (i: number) => benchRequest(String(serial++), i);
  const call: Record<Path, (body: SystemOneRequest) => Promise<number>> = {
    direct: async (body) => {
      const start = process.hrtime.bigint();
      await router.evaluate(body);
      return Number(process.hrtime.bigint() - start) / 1e6;
    },
    "app, minimal client": async (body) => (await client.post(port, body, "minimal")).ms,
    "app, node:http client": async (body) => (await client.post(port, body, "node")).ms,
    "bare node:http, minimal client": async (body) => (await client.post(bare.port, body, "minimal")).ms,
  };
  // Every path warmed alike: the engine keeps the shared system text between requests.
  for (let i = 0; i < 20; i++) for (const path of PATHS) await call[path](next(i));
  const load = [loadavg()[0] as number];
  const wall = Object.fromEntries(PATHS.map((p) => [p, [] as number[]])) as Record<Path, number[]>;
  const cpu = Object.fromEntries(PATHS.map((p) => [p, new CpuTally()])) as Record<Path, CpuTally>;
  const order = shuffler();
  for (let i = 0; i < N; i++) {
    // A fresh random order each round, so no path always follows the same one.
    for (const path of order(PATHS)) {
      const stop = cpu[path].start();
      wall[path].push(await call[path](next(i)));
      stop();
    }
    if (i === N >> 1) load.push(loadavg()[0] as number);
  }
  load.push(loadavg()[0] as number);
  const seconds = Number(process.env["BENCH_SATURATION_SECONDS"] ?? 10);
  const rps = await client.saturate(port, 16, seconds);
  client.close();
  await app.close();
  await new Promise((resolve) => bare.server.close(resolve));
  await router.close();
  return {
    p50: (path: Path) => percentile(wall[path], 50),
    p99: (path: Path) => percentile(wall[path], 99),
    // This process only: the server, the engine's threads, and the IPC to the client (tens of µs).
    cpu: (path: Path) => cpu[path].perCall(N),
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
      for (const path of PATHS) {
        figures[`${tag}: ${path}: p50 ms`] = m.p50(path);
        figures[`${tag}: ${path}: p99 ms`] = m.p99(path);
        figures[`${tag}: ${path}: server main thread CPU µs/request`] = m.cpu(path).main;
        figures[`${tag}: ${path}: server other threads CPU µs/request`] = m.cpu(path).others;
      }
      figures[`${tag}: 16 clients (node:http), requests/s`] = m.rps;
      const added = (path: Path) => m.p50(path) - m.p50("direct");
      ratios.push(
        {
          name: `${tag}: server added latency at p50, minimal client (ms)`,
          value: added("app, minimal client"),
          ...(threads === 1 ? { goal: { max: 1 } } : {}),
        },
        { name: `${tag}: added at p50, node:http client (ms)`, value: added("app, node:http client") },
        { name: `${tag}: added at p50, bare node:http server (ms)`, value: added("bare node:http, minimal client") },
        { name: `${tag}: app - bare node:http at p50 (ms)`, value: m.p50("app, minimal client") - m.p50("bare node:http, minimal client") },
      );
    }
    return { figures, ratios };
  },
};
export default benchmark;
