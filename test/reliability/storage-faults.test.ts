/**
 * The storage half of the fault matrix: a real S3-compatible server (s3rver)
 * behind a fault-injecting proxy (503s, resets, 403s from a given moment or
 * for given keys), a real filesystem, the compiled CLI. Each case asserts the
 * exit code, no stack trace, the verdict of the `--summary-json` file, what
 * is left behind, and that the rerun ends with every id exactly once and at
 * most the documented bound paid twice. The fencing case (SIGSTOP past the
 * S3 lock's lease) and the wall clock stepped under libfaketime run with SOAK=1.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { GetObjectCommand, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SystemOneRequest } from "../../src/api/schema.js";
import { plausibleAnswers } from "../support/answers.js";
import { BIN, runCli } from "../support/cli.js";
import { keepWriting, startS3Store, type S3Proxy, type S3Store } from "../support/s3-proxy.js";
import { sendJson, startUpstream, type Upstream } from "../support/upstream.js";

const SOAK = process.env["SOAK"] === "1";
/** Debian's libfaketime (`apt-get install faketime`), for the clock step in a real process. */
const FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
const STACK = /\n\s+at .+:\d+:\d+\)?\n/;

let dir: string;
let store: S3Store;
let proxy: S3Proxy;
let client: S3Client;
let upstream: Upstream;
/** Requests the endpoint received, per record id. */
const asked = new Map<string, number>();
/** The state of every request the endpoint received. */
const states: string[] = [];
/** Called with the running request count, to inject a fault at a given moment. */
let onRequest: (count: number) => void = () => undefined;
let delayMs = 5;
let requests = 0;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "te-storage-"));
  store = await startS3Store(join(dir, "s3"), ["data"]);
  ({ proxy, client } = store);
  upstream = await startUpstream((_req, res, text) => {
    const body = JSON.parse(text) as SystemOneRequest;
    const id = String(body.state).split(" ")[1] ?? "";
    asked.set(id, (asked.get(id) ?? 0) + 1);
    states.push(String(body.state));
    onRequest(++requests);
    setTimeout(
      () => sendJson(res, 200, { model: "up-1.0.0", answers: plausibleAnswers(body.questions), usage: { input_tokens: 3, output_tokens: 1 } }),
      delayMs,
    );
  });
}, 30_000);

afterAll(async () => {
  await upstream?.close();
  await store?.close();
});

function reset(): void {
  asked.clear();
  states.length = 0;
  requests = 0;
  delayMs = 5;
  onRequest = () => undefined;
  proxy.faults([]);
}

const env = (extra: Record<string, string> = {}) => ({
  ...process.env,
  ...store.env,
  TYPED_EVAL_API_KEY: "k",
  TYPED_EVAL_LOG_LEVEL: "warn",
  NODE_NO_WARNINGS: "1",
  ...extra,
});

function jobFile(): string {
  const path = join(dir, "job.json");
  writeFileSync(path, JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul" } } }));
  return path;
}

const lines = (prefix: string, n: number) =>
  `${Array.from({ length: n }, (_, i) => JSON.stringify({ id: `${prefix}${i}`, text: `record ${prefix}${i}` })).join("\n")}\n`;

async function put(key: string, body: string): Promise<void> {
  await client.send(new PutObjectCommand({ Bucket: "data", Key: key, Body: body }));
}

async function get(key: string): Promise<string> {
  return (await client.send(new GetObjectCommand({ Bucket: "data", Key: key }))).Body!.transformToString();
}

const idsOf = (text: string) =>
  text
    .split("\n")
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { id: string }).id);

const paidTwice = () => [...asked.values()].filter((k) => k > 1).length;

function expectEachOnce(ids: string[], n: number): void {
  expect(ids).toHaveLength(n);
  expect(new Set(ids).size).toBe(n);
}

/** Every run writes its `--summary-json` here, in its working directory (local even when the outputs go to S3). */
const SUMMARY = "summary.json";

function runArgs(input: string, output: string, extra: string[] = []): string[] {
  return [
    "run",
    input,
    "--job",
    jobFile(),
    "-o",
    output,
    "--base-url",
    upstream.url,
    "--rpm",
    "1e6",
    "--concurrency",
    "4",
    "--summary-json",
    SUMMARY,
    ...extra,
  ];
}

/** The verdict the last run in `cwd` wrote to its `--summary-json`. */
function verdictIn(cwd: string): string {
  return (JSON.parse(readFileSync(join(cwd, SUMMARY), "utf8")) as { verdict: string }).verdict;
}

/** A pid that was alive a moment ago on this host and is not any more. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" });
  return Number(child.stdout);
}

describe("storage faults (S3 behind a fault-injecting proxy)", () => {
  for (const fault of [
    { name: "503", rule: { status: 503 } },
    { name: "connection resets", rule: { reset: true } },
  ]) {
    it(`the store behind the journal and the output answers ${fault.name} from mid-run on: exit 9 within --storage-retry plus the grace, nothing finished is lost, the rerun repays at most what was in flight`, async () => {
      reset();
      const n = 200;
      const name = `mid-${fault.name.replace(/\W/g, "")}`;
      await put(`in/${name}.jsonl`, lines("m", n));
      const cwd = join(dir, name);
      mkdirSync(cwd, { recursive: true });
      const args = runArgs(`s3://data/in/${name}.jsonl`, `s3://data/out/${name}.jsonl`, ["--journal-flush", "0.2", "--storage-retry", "2", "--grace", "1"]);
      // Slow enough answers that the store's outage (2 s of retries) ends the run with records still to send, however fast
      // the machine: 140 records after the fault take about 3.5 s at 4 in flight.
      delayMs = 100;
      let faultAt = 0;
      onRequest = (count) => {
        if (count !== 60) return;
        faultAt = Date.now();
        proxy.faults([fault.rule]);
      };
      const first = await runCli(args, { cwd, env: env() });
      const tookMs = Date.now() - faultAt;
      expect(first.stderr).not.toMatch(STACK);
      // Warn lines carry one-line reasons; stacks go to the debug log.
      expect(first.stderr).not.toMatch(/"stack"/);
      expect(first.stderr).toMatch(/stopped: storage unavailable/);
      expect(first.stderr).toMatch(/Finished records are kept in \.typed-eval\/journal-/);
      expect(first.code).toBe(9);
      expect(verdictIn(cwd)).toBe("storage-unavailable");
      // The shipment that met the outage retried for 2 s; everything written after (the usage summary, the last shipment,
      // the lock) shared the 1 s grace instead of 2 s each. 2 s of slack for a loaded machine.
      expect(tookMs).toBeLessThan(2_000 + 1_000 + 2_000);
      const sentFirst = requests;
      expect(sentFirst).toBeLessThan(n);
      // The store is back: the rerun on this machine resumes from the local copy, ahead of S3 (answers at full speed:
      // only the first run needed slow ones).
      proxy.faults([]);
      delayMs = 5;
      const second = await runCli(args, { cwd, env: env() });
      expect(second.stderr).not.toMatch(STACK);
      expect(second.code).toBe(0);
      expect(verdictIn(cwd)).toBe("done");
      expectEachOnce(idsOf(await get(`out/${name}.jsonl`)), n);
      // Paid twice: none. The requests in flight when the store failed finished into the local journal, as after a signal.
      expect(paidTwice()).toBe(0);
      // Every request sent, by both runs, is counted.
      const usage = JSON.parse(await get(`out/${name}.jsonl.usage.json`)) as { requests: { sent: number } };
      expect(usage.requests.sent).toBe(requests);
      // S3 holds the whole journal now: its local copy is gone (they piled up in .typed-eval/ night after night).
      expect(readdirSync(join(cwd, ".typed-eval")).filter((f) => f.startsWith("journal-"))).toEqual([]);
      console.log(
        `matrix: S3 ${fault.name} mid-run (--storage-retry 2s --grace 1s): exit ${first.code} ${tookMs} ms after the fault, rerun exit ${second.code}, paid twice ${paidTwice()}`,
      );
    }, 120_000);
  }

  it("an S3 input overwritten while it is read, its connection dropped: exit 10, finished records kept, the rerun answers exactly the input as it is now", async () => {
    reset();
    const n = 300;
    const key = "in/changing.jsonl";
    await put(key, lines("c", n));
    const cwd = join(dir, "changing");
    mkdirSync(cwd, { recursive: true });
    const args = runArgs(`s3://data/${key}`, "out.jsonl");
    // The new version: the first 50 records edited (same length, same ids), 7 appended.
    const edited = lines("c", n)
      .split("\n")
      .map((line, i) => (i < 50 ? line.replace('"record ', '"edited ') : line))
      .join("\n");
    proxy.faults([{ method: "GET", path: /^\/data\/in\/changing\.jsonl/, cutAfterBytes: 3_000, times: 1, atCut: () => put(key, `${edited}${lines("d", 7)}`) }]);
    const first = await runCli(args, { cwd, env: env() });
    expect(first.stderr).not.toMatch(STACK);
    expect(first.stderr).toMatch(/stopped: the input changed while it was read: s3:\/\/data\/in\/changing\.jsonl changed while it was read/);
    expect(first.code).toBe(10);
    expect(verdictIn(cwd)).toBe("input-changed");
    expect(existsSync(join(cwd, "out.jsonl"))).toBe(false);
    const paidFirst = requests;
    expect(paidFirst).toBeGreaterThan(0);
    expect(paidFirst).toBeLessThan(n);
    proxy.faults([]);
    const second = await runCli(args, { cwd, env: env() });
    expect(second.stderr).not.toMatch(STACK);
    expect(second.code).toBe(0);
    const ids = idsOf(readFileSync(join(cwd, "out.jsonl"), "utf8"));
    expectEachOnce(ids, n + 7);
    expect(ids.slice(-7)).toEqual(Array.from({ length: 7 }, (_, i) => `d${i}`));
    // Every edited record was asked as it is now; of the rest, at most what was in flight at the stop (4) was asked again.
    for (let i = 0; i < 50; i++) expect(states).toContain(`edited c${i}`);
    expect(paidTwice()).toBeLessThanOrEqual(50 + 4);
    console.log(`matrix: S3 input overwritten mid-read: exit ${first.code} after ${paidFirst} requests, rerun exit ${second.code}, paid twice ${paidTwice()}`);
  }, 60_000);

  it("the final S3 upload gets 403 after every record was paid: exit 9, the output kept on local disk, the rerun uploads it without asking the model", async () => {
    reset();
    const n = 50;
    await put("in/c403.jsonl", lines("f", n));
    const cwd = join(dir, "c403");
    mkdirSync(cwd, { recursive: true });
    const args = runArgs("s3://data/in/c403.jsonl", "s3://data/out/c403.jsonl", ["--storage-retry", "1"]);
    proxy.faults([
      { method: "PUT", path: /^\/data\/out\/c403\.jsonl(\?|$)/, status: 403 },
      { method: "POST", path: /^\/data\/out\/c403\.jsonl(\?|$)/, status: 403 },
    ]);
    const first = await runCli(args, { cwd, env: env() });
    expect(first.stderr).not.toMatch(STACK);
    // A permission lost after every record was paid: the resumable storage exit, not a setup mistake (2).
    expect(first.stderr).toMatch(/HTTP 403 AccessDenied\b.*: the store denied the credentials in use/);
    const kept = /the output is kept at (\S+), and rerunning/.exec(first.stderr)?.[1];
    expect(kept).toBe(".typed-eval/outputs/data/out/c403.jsonl");
    expectEachOnce(idsOf(readFileSync(join(cwd, kept!), "utf8")), n);
    expect(first.code).toBe(9);
    expect(verdictIn(cwd)).toBe("storage-unavailable");
    expect(requests).toBe(n);
    proxy.faults([]);
    const second = await runCli(args, { cwd, env: env() });
    expect(second.stderr).not.toMatch(STACK);
    expect(second.code).toBe(0);
    expect(verdictIn(cwd)).toBe("done");
    expect(requests).toBe(n);
    expect(paidTwice()).toBe(0);
    expectEachOnce(idsOf(await get("out/c403.jsonl")), n);
    expect(existsSync(join(cwd, kept!))).toBe(false);
    console.log(`matrix: final upload 403: exit ${first.code}, rerun exit ${second.code}, paid twice ${paidTwice()}`);
  }, 120_000);

  it("SIGTERM during an S3 outage: the run stops within its grace (not the storage retry window), resumable, its summary written", async () => {
    reset();
    const n = 200;
    await put("in/term.jsonl", lines("t", n));
    const cwd = join(dir, "term");
    mkdirSync(cwd, { recursive: true });
    // Retries that would outlast the test by far: only the stop may end them.
    const args = runArgs("s3://data/in/term.jsonl", "s3://data/out/term.jsonl", ["--journal-flush", "0.2", "--storage-retry", "300", "--grace", "2"]);
    delayMs = 50;
    const child = spawn(process.execPath, [BIN, ...args], { cwd, env: env(), stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    let signalled = 0;
    onRequest = (count) => {
      if (count === 40) proxy.faults([{ status: 503 }]);
      if (count === 60) {
        signalled = Date.now();
        child.kill("SIGTERM");
      }
    };
    const code = await exited;
    const stoppedAfter = Date.now() - signalled;
    expect(signalled).toBeGreaterThan(0);
    expect(stderr).not.toMatch(STACK);
    expect(code).toBe(143);
    expect(verdictIn(cwd)).toBe("stopped");
    // The grace (2 s) and the records in flight, not the 300 s of storage retries.
    expect(stoppedAfter).toBeLessThan(20_000);
    proxy.faults([]);
    onRequest = () => undefined;
    delayMs = 5;
    const second = await runCli(args, { cwd, env: env() });
    expect(second.stderr).not.toMatch(STACK);
    expect(second.code).toBe(0);
    expect(verdictIn(cwd)).toBe("done");
    expectEachOnce(idsOf(await get("out/term.jsonl")), n);
    expect(paidTwice()).toBeLessThanOrEqual(4);
    console.log(`matrix: SIGTERM during an S3 outage: exit ${code} after ${stoppedAfter} ms, rerun exit ${second.code}, paid twice ${paidTwice()}`);
  }, 120_000);

  it("S3 down from mid-run to the end: exit 9 within --storage-retry plus the grace (every write after the verdict gets the grace, not a fresh window), its summary written", async () => {
    reset();
    const n = 100;
    await put("in/down.jsonl", lines("d", n));
    const cwd = join(dir, "down");
    mkdirSync(cwd, { recursive: true });
    // After the verdict: the journal's last shipment, the usage summary and the lock's release all go to the failing store.
    const args = runArgs("s3://data/in/down.jsonl", "s3://data/out/down.jsonl", ["--journal-flush", "0.2", "--storage-retry", "1.5", "--grace", "0.5"]);
    delayMs = 50;
    let failedAt = 0;
    onRequest = (count) => {
      if (count === 40) {
        failedAt = Date.now();
        proxy.faults([{ status: 503 }]);
      }
    };
    const first = await runCli(args, { cwd, env: env() });
    const took = Date.now() - failedAt;
    expect(first.stderr).not.toMatch(STACK);
    expect(first.code).toBe(9);
    expect(verdictIn(cwd)).toBe("storage-unavailable");
    // 1.5 s of retries to the verdict, then at most the 0.5 s grace for what remains (was a fresh window for each write: at
    // the default 120 s the run had not ended after 180 s); 3 s of slack for a loaded machine.
    expect(took).toBeLessThan(1500 + 500 + 3000);
    proxy.faults([]);
    onRequest = () => undefined;
    delayMs = 5;
    const second = await runCli(args, { cwd, env: env() });
    expect(second.code).toBe(0);
    expectEachOnce(idsOf(await get("out/down.jsonl")), n);
    expect(paidTwice()).toBe(0);
    console.log(`matrix: S3 down to the end: exit ${first.code} ${took} ms after the store failed, rerun exit ${second.code}, paid twice ${paidTwice()}`);
  }, 120_000);

  it("an unreachable S3 input at start is the resumable storage exit (9), not a usage error, and leaves no lock", async () => {
    reset();
    const cwd = join(dir, "unreachable");
    mkdirSync(cwd, { recursive: true });
    const r = await runCli(runArgs("s3://data/in/none.jsonl", "out.jsonl", ["--storage-retry", "1"]), {
      cwd,
      env: env({ AWS_ENDPOINT_URL_S3: `http://127.0.0.1:${deadPort()}` }),
    });
    expect(r.stderr).not.toMatch(STACK);
    expect(r.stderr).toMatch(/stopped: storage unavailable: reading s3:\/\/data\/in\/none\.jsonl: the store kept failing for 1 s \(ECONNREFUSED/);
    expect(r.code).toBe(9);
    expect(verdictIn(cwd)).toBe("storage-unavailable");
    expect(existsSync(join(cwd, "out.jsonl.journal.lock"))).toBe(false);
    expect(requests).toBe(0);
  }, 60_000);

  describe("S3 locks", () => {
    // Another host's lock, written through the proxy: a run's read never meets half a write (s3rver rewrites in place).
    const lockAt = async (name: string, holder: object) => {
      await store.proxied.send(new PutObjectCommand({ Bucket: "data", Key: `out/${name}.jsonl.journal/lock.json`, Body: JSON.stringify(holder) }));
    };
    const s3Run = async (name: string, n: number, extra: Record<string, string> = {}) => {
      await put(`in/${name}.jsonl`, lines(name, n));
      const cwd = join(dir, name);
      mkdirSync(cwd, { recursive: true });
      return runCli(runArgs(`s3://data/in/${name}.jsonl`, `s3://data/out/${name}.jsonl`), { cwd, env: env(extra) });
    };

    it("a live lock from another host refuses (exit 7) and says when a rerun may take it over; a still one is taken over, whatever its clock said", async () => {
      reset();
      const stale = { TYPED_EVAL_S3_LOCK_STALE_MS: "1500" };
      // Another host, its clock an hour behind ours, its run alive: its heartbeat moves.
      let beat = 0;
      const behind = () => new Date(Date.now() - 3_600_000).toISOString();
      const holder = () => ({ host: "elsewhere", pid: 1, started: behind(), nonce: "x", heartbeat: behind(), beat: beat++, staleMs: 1500 });
      await lockAt("live", holder());
      const renewing = keepWriting(() => lockAt("live", holder()), 200);
      let live: Awaited<ReturnType<typeof s3Run>>;
      try {
        live = await s3Run("live", 5, stale);
      } finally {
        await renewing.stop();
      }
      expect(live.stderr).not.toMatch(STACK);
      expect(live.stderr).toContain("a rerun takes its lock over once its heartbeat has stood still for 2 s");
      expect(live.code).toBe(7);
      expect(verdictIn(join(dir, "live"))).toBe("locked");
      expect(requests).toBe(0);
      // Another host, its clock ten minutes ahead, its run gone: the heartbeat stands still, and 1.5 s later the lock is ours.
      const ahead = new Date(Date.now() + 600_000).toISOString();
      await lockAt("stale", { host: "elsewhere", pid: 1, started: ahead, nonce: "x", heartbeat: ahead, beat: 0, staleMs: 1500 });
      const taken = await s3Run("stale", 5, stale);
      expect(taken.code).toBe(0);
      expectEachOnce(idsOf(await get("out/stale.jsonl")), 5);
    }, 60_000);

    it("a fresh lock held by a dead process on this host is taken over at once", async () => {
      reset();
      const now = new Date().toISOString();
      await lockAt("deadpid", { host: hostname(), pid: deadPid(), started: now, nonce: "x", heartbeat: now });
      const started = Date.now();
      const r = await s3Run("deadpid", 5);
      expect(r.stderr).not.toMatch(STACK);
      expect(r.code).toBe(0);
      // Not the 60 s expiry.
      expect(Date.now() - started).toBeLessThan(45_000);
      expectEachOnce(idsOf(await get("out/deadpid.jsonl")), 5);
    }, 60_000);
  });

  describe("local locks", () => {
    const localRun = (name: string, n: number) => {
      const cwd = join(dir, name);
      mkdirSync(cwd, { recursive: true });
      writeFileSync(join(cwd, "in.jsonl"), lines(name, n));
      return { cwd, run: () => runCli(runArgs("in.jsonl", "out.jsonl"), { cwd, env: env() }) };
    };

    it("a live holder refuses (exit 7); a dead pid on this host is taken over at once", async () => {
      reset();
      const live = localRun("local-live", 5);
      writeFileSync(join(live.cwd, "out.jsonl.journal.lock"), JSON.stringify({ host: hostname(), pid: process.pid, started: new Date().toISOString() }));
      const refused = await live.run();
      expect(refused.stderr).not.toMatch(STACK);
      expect(refused.code).toBe(7);
      expect(verdictIn(live.cwd)).toBe("locked");
      expect(requests).toBe(0);
      const dead = localRun("local-dead", 5);
      writeFileSync(join(dead.cwd, "out.jsonl.journal.lock"), JSON.stringify({ host: hostname(), pid: deadPid(), started: new Date().toISOString() }));
      const taken = await dead.run();
      expect(taken.code).toBe(0);
      expect(existsSync(join(dead.cwd, "out.jsonl.journal.lock"))).toBe(false);
      expectEachOnce(idsOf(readFileSync(join(dead.cwd, "out.jsonl"), "utf8")), 5);
    }, 60_000);

    it("a failed run's empty journal does not block the next real run on the same output", async () => {
      reset();
      const { cwd } = localRun("empty-journal", 5);
      // A first run on another input that finishes no record: its endpoint is unreachable (no retries: their backoff
      // is not what is tested, and took 15 s).
      writeFileSync(join(cwd, "other.jsonl"), lines("o", 3));
      const failed = await runCli(
        runArgs("other.jsonl", "out.jsonl", ["--max-retries", "0"]).map((a) => (a === upstream.url ? `http://127.0.0.1:${deadPort()}` : a)),
        { cwd, env: env() },
      );
      expect(failed.code).toBe(3);
      expect(verdictIn(cwd)).toBe("aborted");
      const real = await runCli(runArgs("in.jsonl", "out.jsonl"), { cwd, env: env() });
      expect(real.stderr).not.toMatch(/holds the records of/);
      expect(real.code).toBe(0);
      expectEachOnce(idsOf(readFileSync(join(cwd, "out.jsonl"), "utf8")), 5);
    }, 60_000);
  });

  it.runIf(SOAK && existsSync(FAKETIME))(
    "a wall clock stepped 5 minutes forward mid-run, as NTP does on a VM that slept (libfaketime, the monotonic clock left alone): the lone run keeps its S3 lock and finishes",
    async () => {
      reset();
      delayMs = 40;
      const n = 300;
      await put("in/stepped.jsonl", lines("k", n));
      const cwd = join(dir, "stepped");
      mkdirSync(cwd, { recursive: true });
      const stamp = join(cwd, "faketime");
      writeFileSync(stamp, "+0");
      // Forward only: a step back holds the rate limiter (Bottleneck times its queue on the wall clock) for the step's length;
      // the lease itself is shown to survive steps back by the in-process test (test/runner/s3-lock.test.ts).
      onRequest = (count) => {
        if (count === 60) writeFileSync(stamp, "+5m");
      };
      // A lease of 1.8 s renewed every 0.5 s: each step is minutes past it on the wall clock.
      const stepped = env({
        LD_PRELOAD: FAKETIME,
        FAKETIME_TIMESTAMP_FILE: stamp,
        FAKETIME_NO_CACHE: "1",
        FAKETIME_DONT_FAKE_MONOTONIC: "1",
        TYPED_EVAL_S3_LOCK_STALE_MS: "2000",
      });
      const r = await runCli(runArgs("s3://data/in/stepped.jsonl", "s3://data/out/stepped.jsonl"), { cwd, env: stepped });
      expect(r.stderr).not.toMatch(STACK);
      expect(r.stderr).not.toMatch(/took the journal over|stalled past/);
      expect(r.code).toBe(0);
      expect(verdictIn(cwd)).toBe("done");
      expectEachOnce(idsOf(await get("out/stepped.jsonl")), n);
      expect(paidTwice()).toBe(0);
      console.log(`matrix: wall clock stepped +5 min mid-run (libfaketime): exit ${r.code}`);
    },
    120_000,
  );

  it.runIf(SOAK)(
    "fencing: a run paused (SIGSTOP) past its S3 lock's lease, another taking over, then resumed: it sends nothing more, writes no output, exits 8",
    async () => {
      reset();
      delayMs = 20;
      const n = 400;
      await put("in/fence.jsonl", lines("z", n));
      const args = runArgs("s3://data/in/fence.jsonl", "s3://data/out/fence.jsonl", ["--journal-flush", "0.25"]);
      const lockEnv = env({ TYPED_EVAL_S3_LOCK_STALE_MS: "2000" });
      // Two working directories: two machines as far as the local journal copies go.
      const [a, b] = [join(dir, "fence-a"), join(dir, "fence-b")];
      mkdirSync(a, { recursive: true });
      mkdirSync(b, { recursive: true });
      const child = spawn(process.execPath, [BIN, ...args], { cwd: a, env: lockEnv, stdio: ["ignore", "ignore", "pipe"] });
      let stderrA = "";
      child.stderr.on("data", (d: Buffer) => (stderrA += d.toString()));
      const exitedA = new Promise<number | null>((resolve) => child.on("exit", resolve));
      while (requests < 80) await new Promise((r) => setTimeout(r, 20));
      child.kill("SIGSTOP");
      const atPause = requests;
      await new Promise((r) => setTimeout(r, 3000));
      const second = await runCli(args, { cwd: b, env: lockEnv });
      expect(second.code).toBe(0);
      const afterB = requests;
      const outputB = await get("out/fence.jsonl");
      child.kill("SIGCONT");
      const codeA = await exitedA;
      expect(stderrA).not.toMatch(STACK);
      expect(stderrA).toMatch(/stalled past its lock's lease|took the lock .* over/);
      expect(codeA).toBe(8);
      expect(verdictIn(a)).toBe("lock-lost");
      // The paused run sent nothing after it resumed, and did not overwrite the output.
      expect(requests).toBe(afterB);
      expect(await get("out/fence.jsonl")).toBe(outputB);
      expectEachOnce(idsOf(outputB), n);
      // Paid twice: what the first run finished in its last flush window (0.25 s) and had in flight, not what it did before.
      console.log(`matrix: fencing SIGSTOP: A exit ${codeA}, B exit ${second.code}, paid twice ${paidTwice()} (A had sent ${atPause})`);
      expect(paidTwice()).toBeLessThanOrEqual(60);
    },
    180_000,
  );
});

/** A loopback port nothing listens on. */
function deadPort(): number {
  return 1;
}
