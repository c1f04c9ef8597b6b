/** The runner against remote endpoints: our own server over HTTP, and a faulty upstream. */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SystemOneRequest } from "../../src/api/schema.js";
import { plausibleAnswers } from "../support/answers.js";
import { runCli } from "../support/cli.js";
import { sendJson, startUpstream } from "../support/upstream.js";
import type { ModelRouter } from "../../src/evaluator/router.js";
import { buildServer } from "../../src/server/app.js";
import type { UsageSummary } from "../../src/records/usage.js";
import { KEYS, memoryLogger, testAccounts, testRouter } from "../server/helpers.js";

let dir: string;
let router: ModelRouter;
let ours: FastifyInstance;
let oursUrl: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "te-remote-"));
  ({ router } = await testRouter());
  ours = buildServer({ evaluator: router, accounts: testAccounts(), logger: memoryLogger().logger });
  await ours.listen({ host: "127.0.0.1", port: 0 });
  oursUrl = `http://127.0.0.1:${(ours.server.address() as AddressInfo).port}`;
}, 60_000);

afterAll(async () => {
  await ours?.close();
  await router?.close();
});

/** Runs the CLI (the servers live in this process). */
const cli = (args: string[], env: Record<string, string>) => runCli(args, { cwd: dir, env: { ...process.env, TYPED_EVAL_LOG_LEVEL: "warn", ...env } });

const job = { state: "text", id: "id", model: "tiny", questions: { ok: { type: "noul" }, pick: { type: "choice", criteria: { a: null, b: null, c: null } } } };

function setup(name: string, n: number, poison: number[] = []) {
  const input = join(dir, `${name}.jsonl`);
  writeFileSync(
    input,
    Array.from({ length: n }, (_, i) => JSON.stringify({ id: `r${i}`, text: poison.includes(i) ? `POISON ${i}` : `record ${i}` })).join("\n"),
  );
  const jobPath = join(dir, `${name}.job.json`);
  writeFileSync(jobPath, JSON.stringify(job));
  return { input, jobPath, out: join(dir, `${name}.out.jsonl`) };
}

const lines = (path: string) =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { id: string; status?: number; message?: string });

describe("run --base-url against our own server", () => {
  it("answers every record through HTTP with the server's model id, with no warning on the way", async () => {
    // More records than Node's default of 10 listeners on one abort signal, all in flight at once (--rpm: at the default
    // rate they were sent 20 a second).
    const { input, jobPath, out } = setup("ours", 40);
    const r = await cli(["run", input, "--job", jobPath, "-o", out, "--base-url", oursUrl, "--rpm", "1e6"], { TYPED_EVAL_API_KEY: KEYS.all });
    expect(r.code).toBe(0);
    expect(r.stderr).not.toMatch(/Warning/);
    const rows = lines(out) as unknown as { id: string; model: string }[];
    expect(rows).toHaveLength(40);
    expect(rows.every((row) => row.model === "tiny-1.0.0")).toBe(true);
  }, 60_000);

  it("aborts with exit 3 on a refused key, keeps its work, and resumes with a good one", async () => {
    const { input, jobPath, out } = setup("auth", 6);
    const refused = await cli(["run", input, "--job", jobPath, "-o", out, "--base-url", oursUrl], { TYPED_EVAL_API_KEY: "te_wrong" });
    expect(refused.code).toBe(3);
    expect(refused.stderr).toMatch(/aborted: the endpoint refused the API key \(HTTP 401/);
    expect(refused.stderr).toMatch(/rerun the same command to resume/);
    const resumed = await cli(["run", input, "--job", jobPath, "-o", out, "--base-url", oursUrl], { TYPED_EVAL_API_KEY: KEYS.all });
    expect(resumed.code).toBe(0);
    expect(lines(out)).toHaveLength(6);
  }, 60_000);
});

/** A test upstream: answers any valid request, after the faults scripted for each request number. */
async function faultyUpstream(fault: (n: number, body: SystemOneRequest) => "429" | "429-bare" | "529" | "500" | "reset" | "422" | undefined) {
  let n = 0;
  const retryCounts: (string | undefined)[] = [];
  const upstream = await startUpstream((req, res, text) => {
    const body = JSON.parse(text) as SystemOneRequest;
    retryCounts.push(req.headers["x-service-retry-count"] as string | undefined);
    const what = fault(n++, body);
    if (what === "reset") return void req.socket.destroy();
    if (what === "429") return sendJson(res, 429, { detail: "slow down" }, { "retry-after-ms": "30" });
    if (what === "429-bare") return sendJson(res, 429, { detail: "slow down" });
    if (what === "529") return sendJson(res, 529, { detail: "overloaded" }, { "retry-after": "0" });
    if (what === "500") return sendJson(res, 500, { detail: "boom" });
    if (what === "422") return sendJson(res, 422, { detail: [{ loc: ["body", "state"], msg: "poison", type: "value_error" }] });
    sendJson(res, 200, { model: "upstream-1.0.0", answers: plausibleAnswers(body.questions), usage: { input_tokens: 100, output_tokens: 2 } });
  });
  return { ...upstream, retryCounts, count: () => n };
}

describe("run --base-url against a faulty upstream", () => {
  it("ends every record answered or in the errors file, retrying 429, 529, 500 and resets", async () => {
    const plan = ["429", "429-bare", "529", "500", "reset"] as const;
    const upstream = await faultyUpstream((n, body) => {
      if (typeof body.state === "string" && body.state.startsWith("POISON")) return "422";
      return n % 4 === 1 ? plan[(n >> 2) % plan.length] : undefined;
    });
    const url = upstream.url;
    try {
      const { input, jobPath, out } = setup("faulty", 30, [7, 19]);
      const r = await cli(["run", input, "--job", jobPath, "-o", out, "--base-url", url, "--concurrency", "4", "--rpm", "1e6"], { TYPED_EVAL_API_KEY: "k" });
      expect(r.code).toBe(1);
      const answered = lines(out).map((row) => row.id);
      const failed = lines(`${out}.errors.jsonl`);
      expect(failed.map((f) => f.id).sort()).toEqual(["r19", "r7"]);
      expect(failed.every((f) => f.status === 422)).toBe(true);
      expect([...answered, ...failed.map((f) => f.id)].sort()).toEqual(Array.from({ length: 30 }, (_, i) => `r${i}`).sort());
      expect(new Set(answered).size).toBe(28);
      const summary = JSON.parse(readFileSync(`${out}.usage.json`, "utf8")) as UsageSummary;
      expect(summary.requests.rate_limited).toBeGreaterThan(0);
      expect(summary.requests.overloaded).toBeGreaterThan(0);
      expect(summary.requests.retries).toBeGreaterThan(0);
      // Every attempt the runner counted reached the upstream, retries included.
      expect(summary.requests.sent).toBe(upstream.count());
      // Retries say so; first attempts do not; 422s are never retried.
      expect(upstream.retryCounts.filter((c) => c !== undefined).length).toBe(summary.requests.retries);
      expect(upstream.retryCounts.filter((c) => c === undefined).length).toBe(30);
    } finally {
      await upstream.close();
    }
  }, 120_000);

  it("aborts with exit 3 at the model's check, in seconds, when nothing listens at the endpoint (was 77 attempts over 48 s)", async () => {
    const { input, jobPath, out } = setup("down", 3);
    const started = Date.now();
    const r = await cli(["run", input, "--job", jobPath, "-o", out, "--base-url", "http://127.0.0.1:9"], { TYPED_EVAL_API_KEY: "k" });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/aborted: nothing answers at http:\/\/127\.0\.0\.1:9 \(connection refused by 127\.0\.0\.1:9.*check --base-url/);
    expect(r.stderr).not.toMatch(/Finished records are kept/);
    expect(Date.now() - started).toBeLessThan(10_000);
  }, 60_000);
});
