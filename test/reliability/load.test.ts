/**
 * Load: many accounts each sending 10x their rate limit over real HTTP, and
 * one greedy account sending 100x, against the server on the tiny model.
 * 429s must be exactly what each account's limit implies, the greedy
 * account must not take anything from the others, memory must stay bounded,
 * and the latency of admitted requests is reported.
 *
 * SOAK=1 runs for three minutes instead of ten seconds.
 */
import { Agent, request, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gc } from "../support/gc.js";
import type { ModelRouter } from "../../src/evaluator/router.js";
import { AccountStore, hashKey } from "../../src/server/accounts.js";
import { buildServer } from "../../src/server/app.js";
import { memoryLogger, testRouter } from "../server/helpers.js";

const SOAK = process.env["SOAK"] === "1";
const SECONDS = SOAK ? 180 : 10;
const ACCOUNTS = 10;
const RPM = 60;

const keyOf = (i: number) => `te_load_account_${String(i).padStart(3, "0")}_0123456789abcdef`;
const GREEDY = ACCOUNTS; // the last account is the greedy one

let router: ModelRouter;
let app: FastifyInstance;
let url: URL;
const log = memoryLogger();

beforeAll(async () => {
  ({ router } = await testRouter(1));
  const accounts = new AccountStore({
    accounts: Array.from({ length: ACCOUNTS + 1 }, (_, i) => {
      const sha256 = hashKey(keyOf(i));
      return {
        name: `load-${i}`,
        models: ["*"],
        keys: [{ id: sha256.slice(0, 12), sha256, created: "2026-11-21T00:00:00Z" }],
        limits: { requests_per_minute: RPM },
      };
    }),
  });
  // A deep queue, so that overload (529) does not blur the per-account 429s under test.
  app = buildServer({ evaluator: router, accounts, logger: log.logger, maxQueue: 10_000 });
  await app.listen({ host: "127.0.0.1", port: 0 });
  url = new URL(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1/systemone`);
}, 60_000);

afterAll(async () => {
  await app?.close();
  await router?.close();
});

interface Outcome {
  status: number;
  ms: number;
  retryAfterMs: number | undefined;
}

// No socket limit: admitted requests wait on the model, and a client-side queue would delay the 429s behind them.
const agent = new Agent({ keepAlive: true, maxSockets: Infinity });
const body = JSON.stringify({ state: "load test", model: "tiny", questions: { q: { type: "noul" } } });

function send(key: string): Promise<Outcome> {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = request(
      url,
      { method: "POST", agent, headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
      (res) => {
        res.resume();
        res.on("end", () => {
          const after = res.headers["retry-after-ms"];
          resolve({ status: res.statusCode ?? 0, ms: performance.now() - started, retryAfterMs: after === undefined ? undefined : Number(after) });
        });
      },
    );
    req.on("error", () => resolve({ status: 0, ms: performance.now() - started, retryAfterMs: undefined }));
    req.end(body);
  });
}

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;

describe(`load: ${ACCOUNTS} accounts at 10x their limit and one at 100x, for ${SECONDS} s`, () => {
  it(
    "admits exactly what each limit allows, starves no one, and keeps memory bounded",
    async () => {
      log.lines.length = 0;
      gc();
      const heapBefore = process.memoryUsage().heapUsed;
      const rssBefore = process.memoryUsage().rss;
      const outcomes: Outcome[][] = Array.from({ length: ACCOUNTS + 1 }, () => []);
      // When each account's requests reach the server: under CPU contention they arrive later and more
      // spread out than they were sent, and the limit applies to arrivals.
      const arrivals: { first: number; last: number }[] = Array.from({ length: ACCOUNTS + 1 }, () => ({ first: Infinity, last: 0 }));
      const onArrival = (req: IncomingMessage) => {
        const i = Number(/te_load_account_(\d+)_/.exec(req.headers.authorization ?? "")?.[1]);
        const at = performance.now();
        arrivals[i]!.first = Math.min(arrivals[i]!.first, at);
        arrivals[i]!.last = Math.max(arrivals[i]!.last, at);
      };
      app.server.on("request", onArrival);
      const pending: Promise<void>[] = [];
      const perSecond = RPM / 60;
      const started = performance.now();
      // Open loop: each account fires on its own schedule, whatever the answers.
      const timers = Array.from({ length: ACCOUNTS + 1 }, (_, i) => {
        const rate = perSecond * (i === GREEDY ? 100 : 10);
        return setInterval(() => {
          if (performance.now() - started > SECONDS * 1000) return;
          pending.push(send(keyOf(i)).then((o) => void outcomes[i]!.push(o)));
        }, 1000 / rate);
      });
      await new Promise((resolve) => setTimeout(resolve, SECONDS * 1000));
      for (const timer of timers) clearInterval(timer);
      await Promise.all(pending);
      const elapsed = (performance.now() - started) / 1000;
      app.server.off("request", onArrival);

      // A bucket of RPM requests refilling at RPM/60 per second: what a limit allows over an account's arrivals.
      const allowanceOf = (i: number) => RPM + (perSecond * (arrivals[i]!.last - arrivals[i]!.first)) / 1000;
      const admitted = outcomes.map((list) => list.filter((o) => o.status === 200).length);
      const refused = outcomes.map((list) => list.filter((o) => o.status === 429));
      const other = outcomes.flat().filter((o) => o.status !== 200 && o.status !== 429);
      expect(other).toEqual([]);
      for (const [i, count] of admitted.entries()) {
        expect(count, `account ${i}`).toBeLessThanOrEqual(Math.ceil(allowanceOf(i)) + 1);
        // Every account, the greedy one's neighbours included, gets its whole allowance.
        expect(count, `account ${i}`).toBeGreaterThanOrEqual(Math.floor(allowanceOf(i)) - 2);
        // Every refusal says when to come back, within one refill interval.
        for (const o of refused[i]!) expect(o.retryAfterMs).toBeGreaterThan(0);
        for (const o of refused[i]!) expect(o.retryAfterMs).toBeLessThanOrEqual(1000 / perSecond + 50);
      }
      const latencies = outcomes
        .flat()
        .filter((o) => o.status === 200)
        .map((o) => o.ms)
        .sort((a, b) => a - b);
      const refusedLatencies = outcomes
        .flat()
        .filter((o) => o.status === 429)
        .map((o) => o.ms)
        .sort((a, b) => a - b);
      // The server's memory: the test's own records of every request (35,000 in a soak) are let go first.
      const sent = outcomes.flat().length;
      const admittedTotal = admitted.reduce((a, b) => a + b, 0);
      const refusedTotal = refused.reduce((a, r) => a + r.length, 0);
      pending.length = 0;
      log.lines.length = 0; // the test's capture of the server's log lines
      for (const list of outcomes) list.length = 0;
      for (const list of refused) list.length = 0;
      await new Promise((resolve) => setTimeout(resolve, 100));
      gc();
      const heapGrowthMiB = (process.memoryUsage().heapUsed - heapBefore) / 2 ** 20;
      console.log(
        JSON.stringify({
          figure: "load",
          seconds: Number(elapsed.toFixed(1)),
          accounts: ACCOUNTS + 1,
          sent,
          admitted: admittedTotal,
          refused_429: refusedTotal,
          allowance_per_account: Number(allowanceOf(0).toFixed(1)),
          admitted_normal_min: Math.min(...admitted.slice(0, ACCOUNTS)),
          admitted_normal_max: Math.max(...admitted.slice(0, ACCOUNTS)),
          admitted_greedy: admitted[GREEDY],
          admitted_ms_p50: Number(quantile(latencies, 0.5).toFixed(1)),
          admitted_ms_p99: Number(quantile(latencies, 0.99).toFixed(1)),
          refused_ms_p50: Number(quantile(refusedLatencies, 0.5).toFixed(1)),
          heap_growth_mib: Number(heapGrowthMiB.toFixed(1)),
          rss_growth_mib: Math.round((process.memoryUsage().rss - rssBefore) / 2 ** 20),
        }),
      );
      expect(heapGrowthMiB).toBeLessThan(16);
    },
    SOAK ? 600_000 : 120_000,
  );
});
