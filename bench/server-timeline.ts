/**
 * Where an HTTP request's extra time goes, against the direct call:
 * `npx tsx bench/server-timeline.ts` (BENCH_REQUESTS, default 200).
 *
 * Three paths interleaved, each call a record of its own, rotating which goes
 * first: the evaluator called directly, POSTed by a client in a child process,
 * and POSTed by a client in this process. Timestamps on one monotonic clock
 * (process.hrtime.bigint, shared with the child): the client's send, the
 * server's request event, its hooks, the token estimate, the evaluator call,
 * onSend, and the client's end of answer; this process's CPU over the
 * segments before, during and after the evaluator call. Then CPU per request
 * by thread and GC pauses per path, which a crowded machine's waits do not
 * distort.
 */
import type { AddressInfo } from "node:net";
import { Agent } from "node:http";
import { PerformanceObserver } from "node:perf_hooks";
import type { ModelSet } from "../src/evaluator/evaluator.js";
import { createLogger } from "../src/logging/logger.js";
import { buildServer } from "../src/server/app.js";
import { RateLimiter } from "../src/server/ratelimit.js";
import { testAccounts, testRouter } from "../test/server/helpers.js";
import { median } from "./harness.js";
import { benchRequest, forkClient, systemOnePoster } from "./http-client.js";
import { CpuTally } from "./server-cpu.js";

const N = Number(process.env["BENCH_REQUESTS"] ?? 200);
/**
 * This process's CPU: exact at any moment (getrusage counts the running thread up to now, where
 * schedstat is only updated when a thread is switched out). Outside the evaluator's decodes only the
 * main thread and V8's helpers run, so a segment outside them is the server's own work.
 */
const cpuNow = () => process.cpuUsage();
const cpuAt: Record<string, NodeJS.CpuUsage> = {};
const now = () => process.hrtime.bigint();
const ms = (a: bigint, b: bigint) => Number(b - a) / 1e6;

const { router } = await testRouter(1);
let mark: Record<string, bigint> = {};
const timed = new Proxy(router, {
  get(target, property) {
    if (property === "estimateInputTokens") {
      return (request: Parameters<ModelSet["estimateInputTokens"]>[0]) => {
        mark["estimate"] = now();
        const tokens = target.estimateInputTokens(request);
        mark["estimated"] = now();
        return tokens;
      };
    }
    if (property === "evaluate") {
      return async (...args: Parameters<ModelSet["evaluate"]>) => {
        mark["evaluate"] = now();
        cpuAt["evaluate"] = cpuNow();
        try {
          return await target.evaluate(...args);
        } finally {
          mark["evaluated"] = now();
          cpuAt["evaluated"] = cpuNow();
        }
      };
    }
    const value = Reflect.get(target, property) as unknown;
    return typeof value === "function" ? value.bind(target) : value;
  },
});
const app = buildServer({ evaluator: timed, accounts: testAccounts(), logger: createLogger({ level: "silent" }), limiter: new RateLimiter(), maxQueue: 1000 });
// Added after the app's own hooks, so each marks the end of the app's work at that stage.
app.addHook("onRequest", (_request, _reply, done) => {
  mark["hooked"] = now();
  done();
});
app.addHook("preHandler", (_request, _reply, done) => {
  mark["parsed"] = now();
  done();
});
app.addHook("onSend", (_request, _reply, payload, done) => {
  mark["send"] = now();
  done(null, payload);
});
await app.listen({ host: "127.0.0.1", port: 0 });
const port = (app.server.address() as AddressInfo).port;
app.server.prependListener("request", (_req, res) => {
  mark["arrive"] = now();
  cpuAt["arrive"] = cpuNow();
  res.once("finish", () => {
    mark["finish"] = now();
    cpuAt["finish"] = cpuNow();
  });
});
const client = await forkClient();
const inProcess = systemOnePoster(port, new Agent({ keepAlive: true, maxSockets: 32 }));
let serial = 0;
for (let i = 0; i < 20; i++) {
  await router.evaluate(benchRequest(`warm ${serial++}`, i));
  await client.post(port, benchRequest(`warm ${serial++}`, i));
  await inProcess(benchRequest(`warm ${serial++}`, i));
}

const rows = new Map<string, number[]>();
const row = (name: string, value: number) => rows.set(name, [...(rows.get(name) ?? []), value]);
const cpuRow = (name: string, from: NodeJS.CpuUsage | undefined, to: NodeJS.CpuUsage | undefined) => {
  if (!from || !to) return;
  // getrusage's total is exact; its user/system split is sampled at ticks, so only the total is shown.
  row(`${name} (CPU µs)`, to.user + to.system - from.user - from.system);
};

const cpu = { direct: new CpuTally(), http: new CpuTally() };
const gcs = { direct: { count: 0, ms: 0 }, http: { count: 0, ms: 0 } };
let gcPath: "direct" | "http" | undefined;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    if (!gcPath) continue;
    gcs[gcPath].count++;
    gcs[gcPath].ms += entry.duration;
  }
}).observe({ entryTypes: ["gc"] });

const direct = async (i: number) => {
  const body = benchRequest(`d ${serial++}`, i);
  // The direct call tokenizes inside evaluate; this shows what part of it that is (on a copy, so nothing is cached).
  const t0 = now();
  router.estimateInputTokens(structuredClone(body));
  row("direct: of which tokenize", ms(t0, now()));
  const stop = cpu.direct.start();
  gcPath = "direct";
  const t = now();
  const c = cpuNow();
  await router.evaluate(body);
  row("direct", ms(t, now()));
  cpuRow("direct: evaluate", c, cpuNow());
  gcPath = undefined;
  stop();
};
const http = async (i: number) => {
  mark = {};
  const stop = cpu.http.start();
  gcPath = "http";
  const posted = await client.post(port, benchRequest(`h ${serial++}`, i));
  gcPath = undefined;
  stop();
  const m = mark as Record<"arrive" | "hooked" | "parsed" | "estimate" | "estimated" | "evaluate" | "evaluated" | "send" | "finish", bigint>;
  row("HTTP, client in a child process", posted.ms);
  row("  client sent -> server request event", ms(posted.sent, m.arrive));
  row("  request event -> onRequest hooks done", ms(m.arrive, m.hooked));
  row("  hooks done -> body parsed", ms(m.hooked, m.parsed));
  row("  parsed -> token estimate (validate, route)", ms(m.parsed, m.estimate));
  row("  token estimate (tokenize)", ms(m.estimate, m.estimated));
  row("  estimate -> evaluate (limits, metrics, abort)", ms(m.estimated, m.evaluate));
  row("  evaluate", ms(m.evaluate, m.evaluated));
  row("  evaluate -> onSend (serialise)", ms(m.evaluated, m.send));
  row("  onSend -> client has the answer", ms(m.send, posted.received));
  row("  onSend -> response finished (server side)", ms(m.send, m.finish));
  cpuRow("  request event -> evaluate, incl. tokenize", cpuAt["arrive"], cpuAt["evaluate"]);
  cpuRow("  evaluate", cpuAt["evaluate"], cpuAt["evaluated"]);
  cpuRow("  evaluated -> response finished", cpuAt["evaluated"], cpuAt["finish"]);
};
const local = async (i: number) => {
  const t = now();
  await inProcess(benchRequest(`l ${serial++}`, i));
  row("HTTP, client in this process", ms(t, now()));
};
const paths = [direct, http, local];
for (let i = 0; i < N; i++) {
  for (let k = 0; k < paths.length; k++) await (paths[(i + k) % paths.length] as (i: number) => Promise<void>)(i);
}
client.close();
await app.close();
await router.close();

console.log(`p50 over ${N} requests per path (ms):`);
for (const [name, values] of rows) console.log(`  ${name.padEnd(48)} ${median(values).toFixed(3).padStart(8)}`);
const p50 = (name: string) => median(rows.get(name) ?? [Number.NaN]);
console.log(`  ${"added at p50, client in a child process".padEnd(48)} ${(p50("HTTP, client in a child process") - p50("direct")).toFixed(3).padStart(8)}`);
console.log(`  ${"added at p50, client in this process".padEnd(48)} ${(p50("HTTP, client in this process") - p50("direct")).toFixed(3).padStart(8)}`);
console.log("CPU µs per request, this process (HTTP includes the IPC to the client):   direct     HTTP");
for (const name of new Set([...cpu.direct.byThread.keys(), ...cpu.http.byThread.keys()])) {
  const per = (t: CpuTally) => ((t.byThread.get(name) ?? 0) / N / 1000).toFixed(0).padStart(8);
  if (per(cpu.direct).trim() !== "0" || per(cpu.http).trim() !== "0") console.log(`  ${name.padEnd(72)} ${per(cpu.direct)} ${per(cpu.http)}`);
}
console.log(`GC pauses: direct ${gcs.direct.count} (${gcs.direct.ms.toFixed(1)} ms), HTTP ${gcs.http.count} (${gcs.http.ms.toFixed(1)} ms)`);
