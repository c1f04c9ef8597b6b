/**
 * Where the server's added latency goes: `npx tsx bench/server-breakdown.ts`.
 * Not a `*.bench.ts` (it prints a breakdown, not a ratio). CPU time per call
 * (process.cpuUsage, so a crowded machine's waits do not count), median of
 * rounds: each stage of a POST /v1/systemone alone. Then whole HTTP round
 * trips, the minimal client (http-client.ts) in a child process, against a bare
 * node:http server, a bare fastify route, and the app with an evaluator that
 * answers at once (log level silent and info): wall time added and this
 * process's CPU, with handlers that answer at once and handlers that first
 * wait as long as the engine takes.
 */
import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import Fastify, { type FastifyInstance } from "fastify";
import { parseJsonBody } from "../src/api/json.js";
import type { SystemOneRequest } from "../src/api/schema.js";
import { validateRequest } from "../src/api/validate.js";
import { ModelRouter } from "../src/evaluator/router.js";
import { createLogger } from "../src/logging/logger.js";
import { buildServer } from "../src/server/app.js";
import { ServerMetrics } from "../src/server/metrics.js";
import { RateLimiter } from "../src/server/ratelimit.js";
import { AccountStore, hashKey } from "../src/server/accounts.js";
import { KEYS, testAccounts } from "../test/server/helpers.js";
import { answer, FakeEvaluator } from "../test/support/fake-evaluator.js";
import { median } from "./harness.js";
import { bareServer } from "./bare-server.js";
import { forkClient } from "./http-client.js";
import { CpuTally } from "./server-cpu.js";

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

for (const [name, micros] of rows) console.log(`  ${name.padEnd(50)} ${micros.toFixed(1).padStart(8)} µs CPU`);

// Round trips, the client in a child process. Each server's handler first waits `wait` ms (0, or about
// what the engine takes): after a wait the server's code and data have left the caches, as they do
// while the engine decodes, and its costs are those an engine-backed request pays.
const fixed = JSON.stringify(response);
const pause = (ms: number) => (ms > 0 ? new Promise<void>((resolve) => setTimeout(resolve, ms)) : Promise.resolve());
let wait = 0;
const fake = () => new FakeEvaluator(async (r) => pause(wait).then(() => answer(r)));
const { server: bare, port: barePort } = await bareServer(fake());
const fastify = Fastify();
fastify.post("/v1/systemone", async () => {
  await pause(wait);
  return JSON.parse(fixed) as unknown;
});
await fastify.listen({ host: "127.0.0.1", port: 0 });
// Limits far above the round trips' pace: the limiter still admits and settles every request.
const sha256 = hashKey(KEYS.all);
const unlimited = new AccountStore({
  accounts: [
    {
      name: "acme",
      models: ["*"],
      keys: [{ id: sha256.slice(0, 12), sha256, created: "2026-11-21T00:00:00Z" }],
      limits: { requests_per_minute: 1e9, tokens_per_second: 1e12 },
    },
  ],
});
const apps: FastifyInstance[] = [];
for (const level of ["silent", "info"] as const) {
  const app = buildServer({
    evaluator: new ModelRouter([{ names: ["tiny"], evaluator: fake() }]),
    accounts: unlimited,
    logger: createLogger({ level, destination: sink }),
    limiter: new RateLimiter(),
    maxQueue: 1000,
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  apps.push(app);
}
const portOf = (server: { address(): AddressInfo | string | null }) => (server.address() as AddressInfo).port;
const [silentApp, infoApp] = apps as [FastifyInstance, FastifyInstance];
const trips: [string, number][] = [
  ["bare node:http server", barePort],
  ["bare fastify route", portOf(fastify.server)],
  ["the app, log silent", portOf(silentApp.server)],
  ["the app, log info", portOf(infoApp.server)],
];
const client = await forkClient();
const WAIT_MS = 7;
console.log(
  `\nRound trips, client in a child process: p50 wall added over the handler's wait, and this process's CPU per request (incl. its IPC with the client)`,
);
console.log(`  ${"".padEnd(26)} ${"no wait".padStart(26)} ${`after a ${WAIT_MS} ms wait`.padStart(26)}`);
for (const [name, port] of trips) {
  const cells: string[] = [];
  for (const ms of [0, WAIT_MS]) {
    wait = ms;
    const calls = ms ? 200 : 1000;
    for (let i = 0; i < 50; i++) await client.post(port, requests[i % 8] as SystemOneRequest, "minimal");
    const tally = new CpuTally();
    const added: number[] = [];
    const stop = tally.start();
    for (let i = 0; i < calls; i++) {
      const posted = await client.post(port, requests[i % 8] as SystemOneRequest, "minimal");
      added.push(posted.ms - ms);
    }
    stop();
    const cpu = tally.perCall(calls);
    cells.push(`${median(added).toFixed(3)} ms, ${(cpu.main + cpu.others).toFixed(0)} µs CPU`.padStart(26));
  }
  console.log(`  ${name.padEnd(26)} ${cells.join(" ")}`);
}
client.close();
bare.close();
await fastify.close();
for (const app of apps) await app.close();
