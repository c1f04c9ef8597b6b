/**
 * The S3 lock against a real S3-compatible server (s3rver) behind the proxy
 * that gives it conditional writes (or not), in process: clocks stepped and
 * frozen, holders alive and dead, runs started together, and a store without
 * conditional writes refused; and a stop while an S3 output is uploaded.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { SystemOneRequest } from "../../src/api/schema.js";
import { exitCodeOf, LockLostError } from "../../src/api/verdict.js";
import { targetOf } from "../../src/runner/prepare.js";
import { runLifecycle } from "../../src/runner/run.js";
import { LockedError } from "../../src/runner/state/lock.js";
import { acquireS3Lock, type LockClock } from "../../src/runner/state/s3-lock.js";
import { plausibleAnswers } from "../support/answers.js";
import { runInProcess } from "../support/cli.js";
import { FakeEvaluator } from "../support/fake-evaluator.js";
import { lifecycleRequest } from "../support/lifecycle.js";
import { generatedModel, TINY } from "../support/models.js";
import { keepWriting, startS3Store, type S3Store } from "../support/s3-proxy.js";

let dir: string;
let store: S3Store;
/** Reaches the store through the proxy, as a run does. */
let client: S3Client;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "te-s3-lock-"));
  store = await startS3Store(join(dir, "s3"), ["locks"]);
  client = store.proxied;
}, 30_000);

afterAll(async () => {
  await store?.close();
});

afterEach(() => {
  vi.useRealTimers();
  store.proxy.conditional(true);
});

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Writes a holder's lock object, as another run would: through the proxy, so the run's reads never see half of it. */
async function holderAt(prefix: string, holder: object): Promise<void> {
  await client.send(new PutObjectCommand({ Bucket: "locks", Key: `${prefix}/lock.json`, Body: JSON.stringify(holder) }));
}

async function lockText(prefix: string): Promise<string | undefined> {
  try {
    return await (await store.client.send(new GetObjectCommand({ Bucket: "locks", Key: `${prefix}/lock.json` }))).Body?.transformToString();
  } catch {
    return undefined;
  }
}

/** A holder on another host whose wall clock reads `offsetMs` from ours; `beat` advances its heartbeat. */
function elsewhere(offsetMs: number) {
  let beat = 0;
  const holder = () => ({
    host: "elsewhere",
    pid: 7,
    started: new Date(Date.now() + offsetMs).toISOString(),
    nonce: "theirs",
    heartbeat: new Date(Date.now() + offsetMs).toISOString(),
    beat: beat++,
    staleMs: 600,
  });
  return holder;
}

describe("the test store", () => {
  it("gives a reader beside a writer whole objects, as S3's atomic replace does (s3rver alone gave cut bodies, 500s and 6 s stalls)", async () => {
    let writes = 0;
    const writer = keepWriting(() => holderAt("torn", { beat: writes++, pad: "x".repeat(writes % 97) }), 5);
    const seen = { whole: 0, torn: 0, failed: 0, slowest: 0 };
    const readOnce = async () => {
      const started = Date.now();
      try {
        JSON.parse((await (await client.send(new GetObjectCommand({ Bucket: "locks", Key: "torn/lock.json" }))).Body?.transformToString()) ?? "");
        seen.whole++;
      } catch (error) {
        if (error instanceof SyntaxError) seen.torn++;
        else seen.failed++;
      }
      seen.slowest = Math.max(seen.slowest, Date.now() - started);
    };
    try {
      await pause(50);
      for (const until = Date.now() + 1_500; Date.now() < until; ) await readOnce();
    } finally {
      await writer.stop();
    }
    expect(seen).toMatchObject({ torn: 0, failed: 0 });
    expect(writes).toBeGreaterThan(5);
    expect(seen.whole).toBeGreaterThan(5);
    expect(seen.slowest).toBeLessThan(3_000);
  });
});

describe("the S3 lock", () => {
  it("a wall clock stepped 5 minutes forward, then back, never ends a lone run's lease (the lease is on the monotonic clock)", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() });
    // A renewal (a PUT to s3rver, served by this process) may be 1 s late and keep the 1.35 s lease: with a 0.4 s
    // stale period (0.36 s lease) a renewal 0.26 s late lost it in two whole-suite runs under load (6-15 on 2 cores).
    const lock = await acquireS3Lock("s3://locks/stepped/", { client, staleMs: 1500 });
    try {
      for (const step of [5 * 60_000, -10 * 60_000, 5 * 60_000]) {
        vi.setSystemTime(Date.now() + step);
        // Several renewals' worth (every 0.375 s), and past the 1.35 s lease on the wall clock's reading.
        await pause(1450);
        expect(() => lock.assertHeld()).not.toThrow();
        expect(lock.lost).toBe(false);
      }
    } finally {
      await lock.release();
    }
    expect(await lockText("stepped")).toBeUndefined();
  });

  it("times its own lease on the clock it is given: a monotonic clock jumping past the lease stops the run (exit 8's error)", async () => {
    let offset = 0;
    const clock: LockClock = { monotonic: () => performance.now() + offset, wall: () => Date.now() };
    const lock = await acquireS3Lock("s3://locks/frozen/", { client, staleMs: 60_000, clock });
    expect(() => lock.assertHeld()).not.toThrow();
    offset = 55_000;
    expect(() => lock.assertHeld()).toThrow(LockLostError);
    await lock.release();
  });

  it("judges another host's lock by whether its heartbeat moves while it watches, never by the time written in it", async () => {
    // Another host's clock 10 minutes ahead, its run dead: stale once the heartbeat stood still for the stale period.
    const ahead = elsewhere(10 * 60_000);
    await holderAt("ahead", ahead());
    const started = performance.now();
    const taken = await acquireS3Lock("s3://locks/ahead/", { client, staleMs: 600 });
    expect(performance.now() - started).toBeGreaterThanOrEqual(550);
    // Its lease starts at its own write, not when it began to watch.
    expect(() => taken.assertHeld()).not.toThrow();
    expect(JSON.parse((await lockText("ahead")) ?? "{}")).toMatchObject({ host: hostname(), pid: process.pid });
    await taken.release();
    // Another host's clock an hour behind, its run alive (renewing): refused, however old its heartbeat reads.
    const behind = elsewhere(-60 * 60_000);
    await holderAt("behind", behind());
    const renewing = keepWriting(() => holderAt("behind", behind()), 100);
    try {
      await expect(acquireS3Lock("s3://locks/behind/", { client, staleMs: 600 })).rejects.toThrow(
        /another run holds s3:\/\/locks\/behind\/lock\.json: pid 7 on elsewhere.*stood still for 1 s/,
      );
    } finally {
      await renewing.stop();
    }
    expect(JSON.parse((await lockText("behind")) ?? "{}")).toMatchObject({ nonce: "theirs" });
  });

  it("takes a fresh lock of a dead process on this host at once", async () => {
    const now = new Date().toISOString();
    await holderAt("dead", { host: hostname(), pid: 2 ** 22 + 17, started: now, nonce: "x", heartbeat: now, beat: 0, staleMs: 60_000 });
    const started = performance.now();
    const lock = await acquireS3Lock("s3://locks/dead/", { client, staleMs: 60_000 });
    expect(performance.now() - started).toBeLessThan(5_000);
    await lock.release();
  });

  it("of five runs that take the lock at the same moment, exactly one holds it", async () => {
    // Five hosts (in one process a lock naming this host and pid with another nonce is a previous incarnation's).
    const tries = await Promise.allSettled(
      Array.from({ length: 5 }, (_, i) => acquireS3Lock("s3://locks/race/", { client, staleMs: 600, as: { host: `racer-${i}`, pid: 1 } })),
    );
    const held = tries.filter((t) => t.status === "fulfilled");
    expect(held).toHaveLength(1);
    for (const t of tries) if (t.status === "rejected") expect(t.reason).toBeInstanceOf(LockedError);
    await (held[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof acquireS3Lock>>>).value.release();
  });

  it("refuses a store without conditional writes, naming --unsafe-s3-lock, before anything is paid, and leaves nothing behind; with it, takes the lock", async () => {
    store.proxy.conditional(false);
    const cwd = join(dir, "plain-run");
    mkdirSync(cwd, { recursive: true });
    writeFileSync(join(cwd, "in.jsonl"), '{"id":"a","text":"x"}\n{"id":"b","text":"y"}\n');
    writeFileSync(join(cwd, "job.json"), JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul" } } }));
    const runEnv = { ...store.env, TYPED_EVAL_MODEL_PATH: generatedModel(TINY), TYPED_EVAL_LOG_LEVEL: "error" };
    const refused = await runInProcess(["run", "in.jsonl", "--job", "job.json", "-o", "s3://locks/plain/out.jsonl"], runEnv, { cwd });
    expect(refused.stderr).toMatch(/ignores conditional writes .* pass --unsafe-s3-lock to run at that risk/);
    expect(refused.stderr).not.toMatch(/\n\s+at /);
    expect(refused.code).toBe(2);
    // No lock, no probe object and no journal left behind.
    const left = await store.client.send(new ListObjectsV2Command({ Bucket: "locks", Prefix: "plain/out.jsonl.journal/" }));
    expect(left.KeyCount ?? 0).toBe(0);
    const unsafe = await acquireS3Lock("s3://locks/plain/out.jsonl.journal/", { client, unsafe: true });
    expect(JSON.parse((await lockText("plain/out.jsonl.journal")) ?? "{}")).toMatchObject({ pid: process.pid });
    await unsafe.release();
    expect(await lockText("plain/out.jsonl.journal")).toBeUndefined();
  }, 60_000);
});

/** A run's folder with `records` and a one-question job; the store's variables and a staging folder set, and the folder made the working directory (the journal's local copy goes there) until `restore`. */
function runFolder(name: string, records: number) {
  const cwd = join(dir, name);
  mkdirSync(cwd, { recursive: true });
  const input = join(cwd, "in.jsonl");
  writeFileSync(input, Array.from({ length: records }, (_, i) => `${JSON.stringify({ id: `s${i}`, text: `record ${i}` })}\n`).join(""));
  const job = join(cwd, "job.json");
  writeFileSync(job, JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul" } } }));
  const staging = join(cwd, "staging");
  const saved = { ...process.env };
  const home = process.cwd();
  Object.assign(process.env, store.env, { TYPED_EVAL_STAGING: staging });
  process.chdir(cwd);
  const restore = () => {
    process.env = saved;
    process.chdir(home);
  };
  return { cwd, input, job, staging, restore };
}

describe("a stop while an S3 output is uploaded", () => {
  it("abandons the upload: stopped (143), nothing in S3, the staged file kept; the rerun uploads it asking nothing", async () => {
    const { cwd, input, job, staging, restore } = runFolder("stop-upload", 20);
    const get = async (key: string) => (await store.client.send(new GetObjectCommand({ Bucket: "locks", Key: key }))).Body?.transformToString() ?? "";
    const evaluator = () =>
      new FakeEvaluator((request: SystemOneRequest) => ({
        response: { model: "fake-1.0.0", answers: plausibleAnswers(request.questions, 0.5), usage: { input_tokens: 3, output_tokens: 1 } },
      }));
    const output = "s3://locks/stop/out.jsonl";
    try {
      store.proxy.faults([{ method: "PUT", path: /^\/locks\/stop\/out\.jsonl(\?|$)/, delayMs: 2000 }]);
      const stop = new AbortController();
      // The stop comes 200 ms into the answers' upload, every record answered and journaled.
      const target = (location: string) => {
        const made = targetOf(location);
        if (location !== output) return made;
        return {
          describe: made.describe,
          open: () => {
            const sink = made.open();
            return { ...sink, commit: (signal?: AbortSignal) => (setTimeout(() => stop.abort(), 200), sink.commit(signal)) };
          },
        };
      };
      const first = evaluator();
      const started = Date.now();
      const end = await runLifecycle(
        lifecycleRequest(input, job, output, first, { stop: stop.signal, graceMs: 30_000, target, places: { output, summaryJson: join(cwd, "s.json") } }),
      );
      expect(end.verdict).toBe("stopped");
      expect(exitCodeOf(end)).toBe(143);
      expect(Date.now() - started).toBeLessThan(1800);
      expect(first.calls).toHaveLength(20);
      expect(
        readFileSync(join(staging, "locks", "stop", "out.jsonl"), "utf8")
          .split("\n")
          .filter(Boolean),
      ).toHaveLength(20);
      // Past the proxy's delay: the abandoned PUT never reached the store.
      await new Promise((resolve) => setTimeout(resolve, 2100 - (Date.now() - started)));
      await expect(get("stop/out.jsonl")).rejects.toThrow();
      store.proxy.faults([]);
      const rerun = evaluator();
      expect((await runLifecycle(lifecycleRequest(input, job, output, rerun, { places: { output, summaryJson: join(cwd, "s.json") } }))).verdict).toBe("done");
      expect(rerun.calls).toHaveLength(0);
      // The done summary names the journal in S3, not the local copy deleted once S3 held it.
      expect(JSON.parse(readFileSync(join(cwd, "s.json"), "utf8"))).toMatchObject({ verdict: "done", journal: expect.stringMatching(/^s3:\/\/locks\/stop\//) });
      expect((await get("stop/out.jsonl")).split("\n").filter(Boolean)).toHaveLength(20);
    } finally {
      store.proxy.faults([]);
      restore();
    }
  }, 30_000);
});

describe("an S3 setup mistake", () => {
  it("a missing bucket: exit 2, its --summary-json says why, no usage summary staged or left behind", async () => {
    const { cwd, input, job, staging, restore } = runFolder("no-bucket", 1);
    try {
      const output = "s3://no-such-bucket/out.jsonl";
      const summaryJson = join(cwd, "s.json");
      const end = await runLifecycle(
        lifecycleRequest(
          input,
          job,
          output,
          new FakeEvaluator(() => ({ response: { model: "m", answers: {}, usage: { input_tokens: 1, output_tokens: 1 } } })),
          { places: { output, summaryJson } },
        ),
      );
      expect(exitCodeOf(end)).toBe(2);
      expect(JSON.parse(readFileSync(summaryJson, "utf8"))).toMatchObject({ verdict: "bad-input" });
      expect(existsSync(staging)).toBe(false);
    } finally {
      restore();
    }
  });
});
