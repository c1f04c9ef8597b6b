/**
 * Where an HTTP request's extra time goes, against the direct call:
 * `npx tsx bench/server-timeline.ts` (BENCH_REQUESTS, default 200).
 *
 * Three paths interleaved, each call a record of its own, in a fresh random
 * order each round: the evaluator called directly, POSTed to the app and POSTed to a bare
 * node:http server with the same evaluator and no checks, both by the minimal
 * client in a child process (http-client.ts). Timestamps on one monotonic
 * clock (process.hrtime.bigint, shared with the child): the client's send, the
 * server's request event, the app's hooks, the token estimate, the evaluator
 * call, onSend, and the client's end of answer; this process's CPU over the
 * segments before, during and after the evaluator call. Then CPU per request
 * by thread and GC pauses per path, which a crowded machine's waits do not
 * distort.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { AddressInfo } from "node:net";
import { PerformanceObserver } from "node:perf_hooks";
import type { ModelSet } from "../src/evaluator/evaluator.js";
import { createLogger } from "../src/logging/logger.js";
import { buildServer } from "../src/server/app.js";
import { RateLimiter } from "../src/server/ratelimit.js";
import { testAccounts, testRouter } from "../test/server/helpers.js";
import { median, shuffler } from "./harness.js";
import { bareServer } from "./bare-server.js";
import { benchRequest, forkClient } from "./http-client.js";
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
// Route-level hooks run after the app's own (its plugins' and auth's), so each marks the end of the app's work at that stage.
app.addHook("onRoute", (route) => {
  const at =
    (stage: string) =>
    (_request: FastifyRequest, _reply: FastifyReply, done: () => void): void => {
      mark[stage] = now();
      done();
    };
  route.onRequest = [...[route.onRequest ?? []].flat(), at("hooked")];
  route.preHandler = [...[route.preHandler ?? []].flat(), at("parsed")];
  route.onSend = [
    ...[route.onSend ?? []].flat(),
    (_request, _reply, payload, done) => {
      mark["send"] = now();
      done(null, payload);
    },
  ];
});
await app.listen({ host: "127.0.0.1", port: 0 });
const port = (app.server.address() as AddressInfo).port;
// The floor: node:http with the same (timed) evaluator and nothing else.
const { server: bare, port: barePort } = await bareServer(timed, () => {
  mark["send"] = now();
});
for (const server of [app.server, bare]) {
  server.prependListener("request", (_req, res) => {
    mark["arrive"] = now();
    cpuAt["arrive"] = cpuNow();
    res.once("finish", () => {
      mark["finish"] = now();
      cpuAt["finish"] = cpuNow();
    });
  });
}
const client = await forkClient();
let serial = 0;
for (let i = 0; i < 20; i++) {
  await router.evaluate(benchRequest(`warm ${serial++}`, i));
  await client.post(port, benchRequest(`warm ${serial++}`, i), "minimal");
  await client.post(barePort, benchRequest(`warm ${serial++}`, i), "minimal");
}

const rows = new Map<string, number[]>();
const row = (name: string, value: number) => rows.set(name, [...(rows.get(name) ?? []), value]);
const cpuRow = (name: string, from: NodeJS.CpuUsage | undefined, to: NodeJS.CpuUsage | undefined) => {
  if (!from || !to) return;
  // getrusage's total is exact; its user/system split is sampled at ticks, so only the total is shown.
  row(`${name} (CPU µs)`, to.user + to.system - from.user - from.system);
};

const cpu = { direct: new CpuTally(), http: new CpuTally(), bare: new CpuTally() };
const gcs = { direct: { count: 0, ms: 0 }, http: { count: 0, ms: 0 }, bare: { count: 0, ms: 0 } };
let gcPath: keyof typeof gcs | undefined;
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
/** One POST by the minimal client in the child, to the app or to the bare server, with the server's marks. */
const viaHttp = (path: "http" | "bare") => async (i: number) => {
  mark = {};
  const stop = cpu[path].start();
  gcPath = path;
  const posted = await client.post(path === "http" ? port : barePort, benchRequest(`${path} ${serial++}`, i), "minimal");
  gcPath = undefined;
  stop();
  const m = mark as Record<"arrive" | "hooked" | "parsed" | "estimate" | "estimated" | "evaluate" | "evaluated" | "send" | "finish", bigint>;
  if (path === "bare") {
    row("bare node:http, same evaluator", posted.ms);
    row("  client sent -> bare server's request event", ms(posted.sent, m.arrive));
    row("  request event -> evaluate (body, JSON.parse)", ms(m.arrive, m.evaluate));
    row("  evaluate, incl. tokenize", ms(m.evaluate, m.evaluated));
    row("  evaluate -> response written (serialise)", ms(m.evaluated, m.send));
    row("  response written -> client has the answer", ms(m.send, posted.received));
    row("  response written -> finished (server side)", ms(m.send, m.finish));
    return;
  }
  row("the app", posted.ms);
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
const paths = [direct, viaHttp("http"), viaHttp("bare")];
const order = shuffler();
for (let i = 0; i < N; i++) {
  for (const path of order(paths)) await path(i);
}
client.close();
await app.close();
await new Promise((resolve) => bare.close(resolve));
await router.close();

console.log(`p50 over ${N} requests per path (ms):`);
for (const [name, values] of rows) console.log(`  ${name.padEnd(48)} ${median(values).toFixed(3).padStart(8)}`);
const p50 = (name: string) => median(rows.get(name) ?? [Number.NaN]);
console.log(`  ${"added at p50, the app".padEnd(48)} ${(p50("the app") - p50("direct")).toFixed(3).padStart(8)}`);
console.log(`  ${"added at p50, bare node:http".padEnd(48)} ${(p50("bare node:http, same evaluator") - p50("direct")).toFixed(3).padStart(8)}`);
console.log("CPU µs per request, this process (HTTP includes the IPC to the client):   direct      app     bare");
for (const name of new Set(Object.values(cpu).flatMap((tally) => [...tally.byThread.keys()]))) {
  const per = (t: CpuTally) => ((t.byThread.get(name) ?? 0) / N / 1000).toFixed(0).padStart(8);
  const cells = [cpu.direct, cpu.http, cpu.bare].map(per);
  if (cells.some((c) => c.trim() !== "0")) console.log(`  ${name.padEnd(72)} ${cells.join(" ")}`);
}
console.log(
  `GC pauses: ${Object.entries(gcs)
    .map(([path, g]) => `${path} ${g.count} (${g.ms.toFixed(1)} ms)`)
    .join(", ")}`,
);
