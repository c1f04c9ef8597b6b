/**
 * Where the server's added latency goes: `npx tsx bench/server-breakdown.ts`.
 * Not a `*.bench.ts` (it prints a breakdown, not a ratio). CPU time per call
 * (process.cpuUsage, so a crowded machine's waits do not count), median of
 * rounds: each stage of a POST /v1/systemone alone, then whole HTTP round
 * trips (client and server in this process, keep-alive node:http client)
 * against a bare node:http server, a bare fastify route, and the app with an
 * evaluator that answers at once, log level silent and info.
 */
import { randomUUID } from "node:crypto";
import { Agent, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import Fastify from "fastify";
import { parseJsonBody } from "../src/api/json.js";
import type { SystemOneRequest } from "../src/api/schema.js";
import { validateRequest } from "../src/api/validate.js";
import { ModelRouter } from "../src/evaluator/router.js";
import { createLogger } from "../src/logging/logger.js";
import { buildServer } from "../src/server/app.js";
import { ServerMetrics } from "../src/server/metrics.js";
import { RateLimiter } from "../src/server/ratelimit.js";
import { KEYS, testAccounts } from "../test/server/helpers.js";
import { answer, FakeEvaluator } from "../test/support/fake-evaluator.js";
import { median } from "./harness.js";
import { systemOnePoster } from "./http-client.js";

const ROUNDS = 7;
const requests: SystemOneRequest[] = Array.from({ length: 8 }, (_, i) => ({
  state: { ticket: `Ticket ${i}: my order ${"never arrived ".repeat(1 + i)}` },
  model: "tiny",
  questions: { refund: { type: "noul" }, team: { type: "choice", criteria: { a: null, b: null, c: null } } },
}));
const body = JSON.stringify(requests[3]);
const response = answer(requests[3] as SystemOneRequest).response;
const sink = new Writable({
  write(_chunk, _encoding, done) {
    done();
  },
});

/** Median CPU µs per call of `fn` over ROUNDS rounds of `calls`. */
async function cpuMicros(fn: () => unknown, calls: number): Promise<number> {
  const rounds: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const start = process.cpuUsage();
    for (let i = 0; i < calls; i++) await fn();
    const used = process.cpuUsage(start);
    rounds.push((used.user + used.system) / calls);
  }
  return median(rounds);
}

const rows: [string, number][] = [];
const accounts = testAccounts();
const metrics = new ServerMetrics();
const limiter = new RateLimiter();
const logger = createLogger({ level: "info", destination: sink });
const stages: [string, () => unknown][] = [
  ["request id", () => `req_${randomUUID().replaceAll("-", "")}`],
  ["auth (sha256, compare with every key)", () => accounts.authenticate(KEYS.all)],
  ["parse body", () => parseJsonBody(body)],
  ["validate", () => validateRequest(JSON.parse(body), { lenient: false })],
  [
    "rate limiter admit + settle",
    () => {
      limiter.admit("bench", { requests_per_minute: 1e12, tokens_per_second: 1e12 }, 100);
      limiter.settle("bench", 100, 100);
    },
  ],
  [
    "metrics (in progress, tokens, requests, latency)",
    () => {
      metrics.inProgress.set(1);
      metrics.inputTokens.inc({ model: "m" }, 100);
      metrics.outputTokens.inc({ model: "m" }, 2);
      metrics.inProgress.set(0);
      metrics.requests.inc({ route: "/v1/systemone", method: "POST", status: "200" });
      metrics.latency.observe({ route: "/v1/systemone" }, 0.02);
    },
  ],
  ["abort controller + close listener", () => new AbortController().signal],
  ["serialise response", () => JSON.stringify(response)],
  [
    "log line (info, after the response is sent)",
    () =>
      logger.info(
        { requestId: "req_x", method: "POST", url: "/v1/systemone", status: 200, ms: 3, account: "acme", model: "tiny", questions: 2, inputTokens: 300 },
        "request",
      ),
  ],
];
for (const [name, fn] of stages) rows.push([name, await cpuMicros(fn, 5000)]);

const agent = new Agent({ keepAlive: true, maxSockets: 32 });
const poster = (port: number) => systemOnePoster(port, agent);
const fixed = JSON.stringify(response);
const bare = createServer((req, res) => {
  let text = "";
  req.on("data", (c: Buffer) => (text += c.toString()));
  req.on("end", () => {
    JSON.parse(text);
    res.writeHead(200, { "content-type": "application/json" }).end(fixed);
  });
});
await new Promise<void>((resolve) => bare.listen(0, "127.0.0.1", resolve));
const fastify = Fastify();
fastify.post("/v1/systemone", async () => JSON.parse(fixed) as unknown);
await fastify.listen({ host: "127.0.0.1", port: 0 });
const apps = [];
for (const level of ["silent", "info"] as const) {
  const app = buildServer({
    evaluator: new ModelRouter([{ names: ["tiny"], evaluator: new FakeEvaluator() }]),
    accounts,
    logger: createLogger({ level, destination: sink }),
    limiter: new RateLimiter(),
    maxQueue: 1000,
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  apps.push(app);
}
const trips: [string, number][] = [
  ["round trip: bare node:http server", (bare.address() as AddressInfo).port],
  ["round trip: bare fastify route", (fastify.server.address() as AddressInfo).port],
  ["round trip: the app, log silent", (apps[0]!.server.address() as AddressInfo).port],
  ["round trip: the app, log info", (apps[1]!.server.address() as AddressInfo).port],
];
for (const [name, port] of trips) {
  const post = poster(port);
  let i = 0;
  // 7 rounds of 150 stay under the test account's 1,200 requests per minute.
  rows.push([name, await cpuMicros(() => post(requests[i++ % 8] as SystemOneRequest), 150)]);
}
agent.destroy();
bare.close();
await fastify.close();
for (const app of apps) await app.close();
for (const [name, micros] of rows) console.log(`  ${name.padEnd(50)} ${micros.toFixed(1).padStart(8)} µs CPU`);
