/**
 * The runner as schedulers run it, end to end through the CLI against a
 * stand-in upstream: SIGTERM then rerun, one run per journal, exit codes a
 * scheduler can act on, the summary where it collects it, one retry layer.
 */
import { spawn } from "node:child_process";
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SystemOneRequest } from "../../src/api/schema.js";
import { plausibleAnswers } from "../support/answers.js";
import { BIN, runCli, runInProcess } from "../support/cli.js";
import { sendJson, startUpstream, type Upstream } from "../support/upstream.js";
import { whenFile } from "../support/watch.js";

const SOAK = process.env["SOAK"] === "1";
let dir: string;
let upstream: Upstream;
/** Requests the upstream received, by record id; answers after `delayMs`; records whose text starts with FAIL get a 500. */
const received = new Map<string, number>();
let delayMs = 0;
let retryCounts: (string | undefined)[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "te-sched-"));
  upstream = await startUpstream((req, res, text) => {
    const body = JSON.parse(text) as SystemOneRequest;
    const id = String(body.state).split(" ")[1] ?? "";
    received.set(id, (received.get(id) ?? 0) + 1);
    retryCounts.push(req.headers["x-service-retry-count"] as string | undefined);
    const reply = () => {
      if (String(body.state).startsWith("FAIL")) return sendJson(res, 500, { detail: "boom" });
      sendJson(res, 200, { model: "up-1.0.0", answers: plausibleAnswers(body.questions), usage: { input_tokens: 5, output_tokens: 1 } });
    };
    if (delayMs > 0) setTimeout(reply, delayMs);
    else reply();
  });
}, 30_000);

afterAll(async () => {
  await upstream?.close();
});

const env = () => ({ ...process.env, TYPED_EVAL_LOG_LEVEL: "warn", TYPED_EVAL_API_KEY: "k", NODE_NO_WARNINGS: "1" });
/** In this process, where the exit code a run computes is what is tested, not the process's signals or locks. */
const inProcess = (args: string[]) => runInProcess(args, { TYPED_EVAL_LOG_LEVEL: "error", TYPED_EVAL_API_KEY: "k" }, { cwd: dir });
const job = () => {
  const path = join(dir, "job.json");
  writeFileSync(path, JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul" } } }));
  return path;
};
function input(name: string, n: number, text = (i: number) => `record r${name}${i}`): string {
  const path = join(dir, `${name}.jsonl`);
  writeFileSync(path, Array.from({ length: n }, (_, i) => JSON.stringify({ id: `${name}${i}`, text: text(i) })).join("\n"));
  return path;
}
const rows = (path: string) =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { id: string });
const journalAnswers = (path: string) =>
  existsSync(path)
    ? readFileSync(path, "utf8")
        .split("\n")
        .filter((l) => l.includes('"k":"answer"')).length
    : 0;

/** Resolves once `check` holds, looking again whenever the file changes or every 20 ms. */
async function until(check: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function start(args: string[]) {
  const child = spawn(process.execPath, [BIN, ...args], { cwd: dir, env: env(), stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; stderr: string }>((resolve) => child.on("exit", (code) => resolve({ code, stderr })));
  return { child, exited };
}

describe("scheduler-grade runs", () => {
  it("SIGTERM: finishes what is in flight, exits 143 resumably, and the rerun pays no record twice", async () => {
    received.clear();
    delayMs = 100;
    const data = input("t", 300);
    const out = join(dir, "t.out.jsonl");
    const run = start(["run", data, "--job", job(), "-o", out, "--base-url", upstream.url, "--rpm", "1e6", "--concurrency", "8"]);
    await until(() => journalAnswers(`${out}.journal`) >= 16, "16 answers in the journal");
    run.child.kill("SIGTERM");
    const first = await run.exited;
    expect(first.code).toBe(143);
    expect(first.stderr).toMatch(/SIGTERM: finishing the records in flight/);
    expect(first.stderr).toMatch(/rerun the same command to resume. Exit 143/);
    expect(existsSync(out)).toBe(false); // no output that would look complete
    // Everything sent was journaled: the in-flight requests finished.
    const sentBefore = [...received.values()].reduce((a, b) => a + b, 0);
    expect(journalAnswers(`${out}.journal`)).toBe(sentBefore);
    expect(sentBefore).toBeLessThan(300);
    delayMs = 0;
    const second = await runCli(["run", data, "--job", job(), "-o", out, "--base-url", upstream.url, "--rpm", "1e6"], { cwd: dir, env: env() });
    expect(second.code).toBe(0);
    expect(rows(out)).toHaveLength(300);
    expect(new Set(rows(out).map((r) => r.id)).size).toBe(300);
    expect(received.size).toBe(300);
    expect([...received.values()].every((n) => n === 1)).toBe(true);
  }, 60_000);

  // Before: the stop waited for every request queued in the limiter, one per window: exit 90 s after SIGTERM at --rpm 2, 182 s at --rpm 1.
  for (const [rpm, signal, code] of [
    ["2", "SIGTERM", 143],
    ["1", "SIGINT", 130],
  ] as const) {
    it(`a stop at --rpm ${rpm} (${signal}) ends within its grace: what waits in the limiter is dropped unsent, and the rerun asks it`, async () => {
      received.clear();
      delayMs = 0;
      const data = input(`rpm${rpm}`, 12);
      const out = join(dir, `rpm${rpm}.out.jsonl`);
      const summary = join(dir, `rpm${rpm}.summary.json`);
      // The remote default concurrency (32): every record is read and queued behind the first.
      const args = ["run", data, "--job", job(), "-o", out, "--base-url", upstream.url, "--rpm", rpm, "--grace", "2s", "--summary-json", summary];
      const run = start(args);
      await until(() => journalAnswers(`${out}.journal`) >= 1, "the first answer in the journal");
      const signalled = Date.now();
      run.child.kill(signal);
      const ended = await run.exited;
      const seconds = (Date.now() - signalled) / 1000;
      process.stdout.write(`${JSON.stringify({ figure: "stop at a low rpm", rpm: Number(rpm), signal, grace_s: 2, exit_s: seconds })}\n`);
      expect(ended.code).toBe(code);
      // The grace (2 s) bounds the ending, with room for a loaded machine; one window at this rpm is 30-60 s.
      expect(seconds).toBeLessThan(6);
      expect(JSON.parse(readFileSync(summary, "utf8"))).toMatchObject({ verdict: "stopped", requests: { sent: 1 } });
      expect([...received.values()].reduce((a, b) => a + b, 0)).toBe(1);
      expect(journalAnswers(`${out}.journal`)).toBe(1);
      const rerun = await runCli(
        args.map((a) => (a === rpm ? "1e6" : a)),
        { cwd: dir, env: env() },
      );
      expect(rerun.code).toBe(0);
      expect(rows(out)).toHaveLength(12);
      expect([...received.values()].every((n) => n === 1)).toBe(true);
    }, 90_000);
  }

  it("SIGTERM while the CLI is still loading: stopped (143) with its line and --summary-json, not a silent death", async () => {
    const data = input("early", 20);
    const out = join(dir, "early.out.jsonl");
    const summary = join(dir, "early.summary.json");
    const run = start(["run", data, "--job", job(), "-o", out, "--base-url", upstream.url, "--summary-json", summary]);
    // Node is up and the bin's first lines ran; the CLI's imports take a second or more after that.
    await new Promise((resolve) => setTimeout(resolve, 400));
    run.child.kill("SIGTERM");
    const ended = await run.exited;
    expect(ended.code).toBe(143);
    expect(ended.stderr).toMatch(/^typed-eval: stopped by SIGTERM/m);
    expect(JSON.parse(readFileSync(summary, "utf8"))).toMatchObject({ verdict: "stopped" });
  }, 60_000);

  it("SIGTERM with the last records in hand (the reading at its end, records queued): stopped, 143, never done with records missing", async () => {
    received.clear();
    delayMs = 100;
    // 20 windows of 8 at 100 ms: 2 s before the last records are in hand (400 records took 5 s to get there).
    const n = 160;
    const data = input("z", n);
    const out = join(dir, "z.out.jsonl");
    const summary = join(dir, "z.summary.json");
    const args = ["run", data, "--job", job(), "-o", out, "--base-url", upstream.url, "--rpm", "1e6", "--concurrency", "8", "--summary-json", summary];
    const run = start(args);
    const countAnswers = (text: string) => text.split("\n").filter((l) => l.includes('"k":"answer"')).length;
    // Two windows from the end: 8 in flight, the last 8 read and queued, none of them sent yet.
    const ready = await whenFile(`${out}.journal`, (text) => countAnswers(text) >= n - 16, run.child);
    expect(ready).toBe("ready");
    run.child.kill("SIGTERM");
    const first = await run.exited;
    // A stop is a stop: the outputs cannot have been written before the last records were answered.
    expect(first.code).toBe(143);
    const written = JSON.parse(readFileSync(summary, "utf8")) as { verdict: string; records: { read: number } };
    expect(written.verdict).toBe("stopped");
    expect(existsSync(out)).toBe(false);
    expect(first.stderr).toMatch(/^typed-eval: stopped by SIGTERM: /m);
    const rerun = start(args.slice(0, -2));
    expect((await rerun.exited).code).toBe(0);
    const ids = rows(out).map((r) => r.id);
    expect(ids).toEqual(Array.from({ length: n }, (_, i) => `z${i}`));
  }, 90_000);

  it("two SIGTERMs 0.3 s apart: stopped (143) at once, one line, its summary written, the lock released; the rerun completes", async () => {
    received.clear();
    delayMs = 400;
    const n = 200;
    const data = input("dbl", n);
    const out = join(dir, "dbl.out.jsonl");
    const summary = join(dir, "dbl.summary.json");
    const args = ["run", data, "--job", job(), "-o", out, "--base-url", upstream.url, "--rpm", "1e6", "--concurrency", "8", "--grace", "30s"];
    const run = start([...args, "--summary-json", summary]);
    await until(() => journalAnswers(`${out}.journal`) >= 8, "8 answers in the journal");
    run.child.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 300));
    const second = Date.now();
    run.child.kill("SIGTERM");
    const first = await run.exited;
    // Not the 30 s grace: the second signal ends it now.
    expect(Date.now() - second).toBeLessThan(5000);
    expect(first.code).toBe(143);
    expect(first.stderr).not.toMatch(/\n\s+at /);
    expect(first.stderr).toMatch(/typed-eval: stopped by SIGTERM: a second signal stopped it at once/);
    expect(JSON.parse(readFileSync(summary, "utf8"))).toMatchObject({ verdict: "stopped" });
    expect(existsSync(`${out}.journal.lock`)).toBe(false);
    delayMs = 0;
    const rerun = await runCli(args, { cwd: dir, env: env() });
    expect(rerun.code).toBe(0);
    expect(rows(out).map((r) => r.id)).toEqual(Array.from({ length: n }, (_, i) => `dbl${i}`));
  }, 90_000);

  // In make test, targets.test.ts closes a real pipe on the output in process; here the process's own exit code.
  it.runIf(SOAK)(
    "-o - piped into head -1 (the reader closes stdout, EPIPE): stopped, exit 141, the journal kept; the rerun writes everything",
    async () => {
      delayMs = 0;
      // About 150 KB of rows: more than a pipe holds, so the run writes after the reader has gone.
      const n = 1000;
      const data = input("pipe", n);
      const journal = join(dir, "pipe.journal");
      const args = ["run", data, "--job", job(), "-o", "-", "--journal", journal, "--base-url", upstream.url, "--rpm", "1e9", "--tps", "1e12"];
      const child = spawn(process.execPath, [BIN, ...args], { cwd: dir, env: env(), stdio: ["ignore", "pipe", "pipe"] });
      let stderr = "";
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      // `head -1`: read the first line, then close the pipe.
      let got = "";
      child.stdout.on("data", (d: Buffer) => {
        got += d.toString();
        if (got.includes("\n")) child.stdout.destroy();
      });
      const code = await new Promise<number | null>((resolve) => child.on("exit", (c) => resolve(c)));
      expect(JSON.parse(got.split("\n")[0] as string)).toMatchObject({ id: "pipe0" });
      expect(code).toBe(141);
      expect(stderr).toMatch(/typed-eval: stopped: the output was closed: whoever read the output closed it \(EPIPE\)/);
      expect(stderr).not.toMatch(/\n\s+at /);
      expect(journalAnswers(journal)).toBe(n);
      // Not spawnSync: the upstream answering it lives in this process.
      const again = spawn(process.execPath, [BIN, ...args], { cwd: dir, env: env(), stdio: ["ignore", "pipe", "ignore"] });
      let all = "";
      again.stdout.on("data", (d: Buffer) => (all += d.toString()));
      expect(await new Promise((resolve) => again.on("exit", resolve))).toBe(0);
      expect(all.split("\n").filter(Boolean)).toHaveLength(n);
    },
    90_000,
  );

  it.runIf(SOAK)(
    "-o - > /dev/full after records were paid: exit 9 with one line, the journal kept",
    async () => {
      delayMs = 0;
      const data = input("full", 50);
      const journal = join(dir, "full.journal");
      const full = openSync("/dev/full", "w");
      try {
        const child = spawn(process.execPath, [BIN, "run", data, "--job", job(), "-o", "-", "--journal", journal, "--base-url", upstream.url, "--rpm", "1e9"], {
          cwd: dir,
          env: env(),
          stdio: ["ignore", full, "pipe"],
        });
        let stderr = "";
        child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
        const code = await new Promise((resolve) => child.on("exit", resolve));
        expect(stderr).toMatch(/typed-eval: stopped: storage unavailable: no space left on the device/);
        expect(stderr).not.toMatch(/\n\s+at /);
        expect(code).toBe(9);
      } finally {
        closeSync(full);
      }
      expect(journalAnswers(journal)).toBe(50);
    },
    60_000,
  );

  it("a second run on the same journal exits 7 at once, naming the holder; a dead holder's lock is taken over", async () => {
    received.clear();
    delayMs = 200;
    const data = input("l", 200);
    const out = join(dir, "l.out.jsonl");
    const args = ["run", data, "--job", job(), "-o", out, "--base-url", upstream.url, "--rpm", "1e6", "--concurrency", "2"];
    const first = start(args);
    // Until it names its holder: read between the lock's create and its write, it is empty for a moment.
    const named = () => {
      try {
        return JSON.parse(readFileSync(`${out}.journal.lock`, "utf8")) as { pid: number };
      } catch {
        return undefined;
      }
    };
    await until(() => named() !== undefined, "the lock naming its holder");
    const holder = named() as { pid: number };
    const started = Date.now();
    const second = await runCli(args, { cwd: dir, env: env() });
    expect(second.code).toBe(7);
    expect(second.stderr).toMatch(new RegExp(`another run holds .*l\\.out\\.jsonl\\.journal\\.lock: pid ${holder.pid} on .*, started 20`));
    expect(Date.now() - started).toBeLessThan(5000);
    // kill -9 leaves the lock behind; the next run finds its holder gone and takes over.
    first.child.kill("SIGKILL");
    await first.exited;
    expect(existsSync(`${out}.journal.lock`)).toBe(true);
    delayMs = 0;
    const third = await runCli(args, { cwd: dir, env: env() });
    expect(third.code).toBe(0);
    expect(rows(out)).toHaveLength(200);
    expect(existsSync(`${out}.journal.lock`)).toBe(false);
  }, 60_000);

  it("exit codes: 1 only above --max-error-rate, 5 when every record fails, 6 for an empty input; --summary-json equals the usage file", async () => {
    delayMs = 0;
    // 1 failing record in 200: 0.5%.
    const some = input("e", 200, (i) => (i === 7 ? `FAIL r${i}` : `record re${i}`));
    const strict = join(dir, "e1.out.jsonl");
    const r1 = await inProcess(["run", some, "--job", job(), "-o", strict, "--base-url", upstream.url, "--rpm", "1e6", "--max-retries", "0"]);
    expect(r1.code).toBe(1);
    const lenient = join(dir, "e2.out.jsonl");
    const summaryPath = join(dir, "xcom", "return.json");
    const { mkdirSync } = await import("node:fs");
    mkdirSync(join(dir, "xcom"), { recursive: true });
    const r2 = await inProcess([
      "run",
      some,
      "--job",
      job(),
      "-o",
      lenient,
      "--base-url",
      upstream.url,
      "--rpm",
      "1e6",
      "--max-retries",
      "0",
      "--max-error-rate",
      "0.01",
      "--summary-json",
      summaryPath,
    ]);
    expect(r2.code).toBe(0);
    const summary = JSON.parse(readFileSync(summaryPath, "utf8")) as { status: string; records: { failed: number } };
    expect(summary).toEqual(JSON.parse(readFileSync(`${lenient}.usage.json`, "utf8")));
    expect(summary.status).toBe("done");
    expect(summary.records.failed).toBe(1);

    // A wrong state field: the first 20 records fail alike, and the run stops in seconds, naming why.
    const wrongJob = join(dir, "wrong.json");
    writeFileSync(wrongJob, JSON.stringify({ state: "body", id: "id", questions: { ok: { type: "noul" } } }));
    const many = input("w", 5000);
    const r3 = await inProcess(["run", many, "--job", wrongJob, "-o", join(dir, "w.out.jsonl"), "--base-url", upstream.url, "--rpm", "1e6"]);
    expect(r3.code).toBe(5);
    expect(r3.stderr).toMatch(/the first 20 records all failed for the same reason \(invalid_record: record has no state field "body"\)/);

    const empty = join(dir, "empty.jsonl");
    writeFileSync(empty, "");
    const emptySummary = join(dir, "empty.summary.json");
    const r4 = await inProcess([
      "run",
      empty,
      "--job",
      job(),
      "-o",
      join(dir, "empty.out.jsonl"),
      "--base-url",
      upstream.url,
      "--rpm",
      "1e6",
      "--summary-json",
      emptySummary,
    ]);
    expect(r4.code).toBe(6);
    expect(JSON.parse(readFileSync(emptySummary, "utf8"))).toMatchObject({ status: "no-input" });
  }, 60_000);

  it("one retry layer: a registry remote model against an always-500 upstream gets max-retries + 1 attempts, all counted", async () => {
    retryCounts = [];
    delayMs = 0;
    const registry = join(dir, "registry.json");
    writeFileSync(
      registry,
      JSON.stringify({
        models: [
          {
            name: "faraway",
            aliases: [],
            version: "1.0.0",
            description: "remote",
            release_date: "2026-01-01",
            engine: "remote",
            base_url: upstream.url,
            context_size: 8192,
            temperature: 1,
            price_per_million_input_tokens: 1,
          },
        ],
      }),
    );
    const data = input("f", 1, () => "FAIL rf0");
    const out = join(dir, "f.out.jsonl");
    const r = await runCli(["run", data, "--job", job(), "-o", out, "--model", "faraway", "--models-file", registry, "--max-retries", "2"], {
      cwd: dir,
      env: env(),
    });
    expect(r.code).toBe(5); // its only record failed
    expect(retryCounts).toEqual([undefined, "1", "2"]);
    const summary = JSON.parse(readFileSync(`${out}.usage.json`, "utf8")) as { status: string; requests: { sent: number; retries: number } };
    expect(summary).toMatchObject({ status: "all-failed", requests: { sent: 3, retries: 2 } });
  }, 60_000);
});
