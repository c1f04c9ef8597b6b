/** The runner against remote endpoints: our own server over HTTP, and a faulty upstream. */
import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SystemOneRequest } from "../../src/api/schema.js";
import { plausibleAnswers } from "../support/answers.js";
import { runCli, runInProcess } from "../support/cli.js";
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
/** The same in this process: its verdict line and summaries are what is checked, not its log lines. */
const inProcess = (args: string[], env: Record<string, string>) => runInProcess(args, { TYPED_EVAL_LOG_LEVEL: "warn", ...env }, { cwd: dir });

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

  it("aborts with exit 3 on a refused key before its first request (was 19 sent, all 401), keeps nothing it did not finish, and resumes with a good one", async () => {
    const { input, jobPath, out } = setup("auth", 19);
    const summary = join(dir, "auth.summary.json");
    const refused = await cli(["run", input, "--job", jobPath, "-o", out, "--base-url", oursUrl, "--summary-json", summary], {
      TYPED_EVAL_API_KEY: "te_wrong",
    });
    expect(refused.code).toBe(3);
    expect(refused.stderr).toMatch(/aborted: the endpoint refused the API key \(HTTP 401/);
    expect(refused.stderr).toMatch(/rerun the same command to resume/);
    // Found by the listing, which nobody bills: not one request sent, and nothing finished is said to be kept.
    expect((JSON.parse(readFileSync(summary, "utf8")) as UsageSummary).requests.sent).toBe(0);
    expect(refused.stderr).not.toMatch(/Finished records are kept/);
    const resumed = await cli(["run", input, "--job", jobPath, "-o", out, "--base-url", oursUrl], { TYPED_EVAL_API_KEY: KEYS.all });
    expect(resumed.code).toBe(0);
    expect(lines(out)).toHaveLength(19);
  }, 60_000);

  it("a key the model is not open to (403) costs the one request sent alone, not the batch in flight", async () => {
    const { input, jobPath, out } = setup("forbidden", 19);
    const summary = join(dir, "forbidden.summary.json");
    const args = ["run", input, "--job", jobPath, "-o", out, "--base-url", oursUrl, "--model", "other", "--summary-json", summary];
    const denied = await inProcess(args, { TYPED_EVAL_API_KEY: KEYS.tinyOnly });
    expect(denied.code).toBe(3);
    expect(denied.stderr).toMatch(/aborted: the endpoint refused the API key \(HTTP 403/);
    expect((JSON.parse(readFileSync(summary, "utf8")) as UsageSummary).requests.sent).toBe(1);
  }, 60_000);

  it("a key read from a file saved on Windows (a trailing CR) is trimmed and works; a key no header can carry is exit 2 naming the variable, nothing sent", async () => {
    const { input, jobPath, out } = setup("crlf", 3);
    const trimmed = await inProcess(["run", input, "--job", jobPath, "-o", out, "--base-url", oursUrl], { TYPED_EVAL_API_KEY: `${KEYS.all}\r\n` });
    expect(trimmed.code).toBe(0);
    expect(lines(out)).toHaveLength(3);
    for (const [bad, what] of [
      [`${KEYS.all.slice(0, 10)}\r${KEYS.all.slice(10)}`, /a carriage return \(U\+000D\) at character 11 of/],
      [`Bearer ${KEYS.all}`, /a space \(U\+0020\) at character 7 of .*without "Bearer "/],
      [`${KEYS.all}\u201d`, /a non-ASCII character \(U\+201D\)/],
    ] as const) {
      const summary = join(dir, "crlf.summary.json");
      const r = await inProcess(["run", input, "--job", jobPath, "-o", join(dir, "crlf-bad.jsonl"), "--base-url", oursUrl, "--summary-json", summary], {
        TYPED_EVAL_API_KEY: bad,
      });
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/\$TYPED_EVAL_API_KEY holds /);
      expect(r.stderr).toMatch(what);
      expect(r.stderr).not.toContain(KEYS.all.slice(0, 10));
      expect((JSON.parse(readFileSync(summary, "utf8")) as UsageSummary).requests.sent).toBe(0);
    }
  }, 90_000);
});

describe("a rerun that asks nothing reaches nothing (issue 35, item 3)", () => {
  it("writes a fully journaled rerun's outputs with the endpoint down (exit 0); with one record to ask, exits 3 and leaves the outputs as they were", async () => {
    // An endpoint of its own, stopped after the first run: the same address, nothing listening (the address is part of every request's hash).
    const own = buildServer({ evaluator: router, accounts: testAccounts(), logger: memoryLogger().logger });
    await own.listen({ host: "127.0.0.1", port: 0 });
    const url = `http://127.0.0.1:${(own.server.address() as AddressInfo).port}`;
    const { input, jobPath, out } = setup("journaled", 5);
    const args = ["run", input, "--job", jobPath, "-o", out, "--base-url", url];
    const first = await inProcess(args, { TYPED_EVAL_API_KEY: KEYS.all });
    expect(first.code).toBe(0);
    await own.close();
    const answers = readFileSync(out, "utf8");
    rmSync(out);
    const rerun = await inProcess(args, { TYPED_EVAL_API_KEY: KEYS.all });
    expect(rerun.stderr).not.toMatch(/nothing answers/);
    expect(rerun.code).toBe(0);
    expect(readFileSync(out, "utf8")).toBe(answers);
    const usage = readFileSync(`${out}.usage.json`, "utf8");
    expect((JSON.parse(usage) as UsageSummary).this_run?.requests.sent).toBe(0);
    // One more record: it must be asked, and nothing answers.
    appendFileSync(input, `\n${JSON.stringify({ id: "r5", text: "record 5" })}`);
    const missing = await inProcess(args, { TYPED_EVAL_API_KEY: KEYS.all });
    expect(missing.code).toBe(3);
    expect(missing.stderr).toMatch(/aborted: nothing answers at http:\/\/127\.0\.0\.1:\d+ \(connection refused/);
    // The five answered before are kept, and said to be.
    expect(missing.stderr).toMatch(/Finished records are kept in /);
    // The outputs and their usage summary are the last good run's, byte for byte; nothing half-written beside them.
    expect(readFileSync(out, "utf8")).toBe(answers);
    expect(readFileSync(`${out}.usage.json`, "utf8")).toBe(usage);
    expect(readdirSync(dir).filter((f) => f.startsWith("journaled") && f.endsWith(".partial"))).toEqual([]);
  }, 90_000);
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

  it("aborts with exit 3 at the first contact, in seconds, when nothing listens at the endpoint (was 77 attempts over 48 s)", async () => {
    const { input, jobPath, out } = setup("down", 3);
    const started = Date.now();
    const r = await cli(["run", input, "--job", jobPath, "-o", out, "--base-url", "http://127.0.0.1:9"], { TYPED_EVAL_API_KEY: "k" });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/aborted: nothing answers at http:\/\/127\.0\.0\.1:9 \(connection refused by 127\.0\.0\.1:9.*check --base-url/);
    expect(r.stderr).not.toMatch(/Finished records are kept/);
    expect(Date.now() - started).toBeLessThan(10_000);
  }, 60_000);
});
