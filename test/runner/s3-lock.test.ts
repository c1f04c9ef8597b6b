/**
 * The S3 lock against a real S3 store, Ceph RGW (test/support/rgw.ts), in
 * process: the probe of its conditional writes, renewals across a run longer
 * than several of them, clocks stepped and frozen, holders alive, dead and
 * stale, runs started together, the release. The store failing or lacking
 * conditional writes is s3-lock-faults.test.ts (s3rver behind the fault proxy).
 */
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { GetObjectCommand, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { exitCodeOf, LockLostError } from "../../src/api/verdict.js";
import { etagFormOf } from "../../src/records/s3.js";
import { runLifecycle } from "../../src/runner/run.js";
import { LockedError } from "../../src/runner/state/lock.js";
import { acquireS3Lock, type LockClock } from "../../src/runner/state/s3-lock.js";
import { answer, FakeEvaluator } from "../support/fake-evaluator.js";
import { lifecycleRequest, runFolder } from "../support/lifecycle.js";
import { RGW_MISSING, type RealS3, realS3 } from "../support/rgw.js";
import { keepWriting } from "../support/s3-proxy.js";

const SOAK = process.env["SOAK"] === "1";
const BUCKET = "locks";
let dir: string;
let s3: RealS3;
let client: S3Client;

beforeAll(async () => {
  if (RGW_MISSING.length > 0) return;
  dir = mkdtempSync(join(tmpdir(), "te-s3-lock-"));
  s3 = await realS3();
  client = s3.client;
  await s3.bucket(BUCKET);
}, 150_000);

afterAll(() => {
  client?.destroy();
});

afterEach(() => {
  vi.useRealTimers();
});

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Writes a holder's lock object, as another run would. */
async function holderAt(prefix: string, holder: object): Promise<void> {
  await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: `${prefix}/lock.json`, Body: JSON.stringify(holder) }));
}

async function lockText(prefix: string): Promise<string | undefined> {
  try {
    return await (await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: `${prefix}/lock.json` }))).Body?.transformToString();
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

describe.skipIf(RGW_MISSING.length > 0)("the S3 lock on Ceph RGW", () => {
  it("finds the ETag form the store takes (bare: RGW 16 refuses a quoted If-Match on PUT) and renews with it", async () => {
    // What the store does, shown: the quoted ETag S3 returns, sent back in If-Match, is refused though it is the object's own.
    const put = await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: "form/probe-by-hand", Body: "x" }));
    const quoted = put.ETag ?? "";
    expect(quoted).toMatch(/^"[0-9a-f]{32}"$/);
    await expect(client.send(new PutObjectCommand({ Bucket: BUCKET, Key: "form/probe-by-hand", Body: "y", IfMatch: quoted }))).rejects.toMatchObject({
      $metadata: { httpStatusCode: 412 },
    });
    await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: "form/probe-by-hand", Body: "y", IfMatch: quoted.replace(/"/g, "") }));
    // The lock: every renewal (every 0.5 s) goes through, and its lease (1.8 s) holds for 3 s.
    const lock = await acquireS3Lock(`s3://${BUCKET}/form/`, { client, staleMs: 2_000 });
    try {
      expect(etagFormOf(client)).toBe("bare");
      await pause(3_000);
      expect(() => lock.assertHeld()).not.toThrow();
      expect(JSON.parse((await lockText("form")) ?? "{}").beat).toBeGreaterThanOrEqual(4);
    } finally {
      await lock.release();
    }
    expect(await lockText("form")).toBeUndefined();
  });

  it("a wall clock stepped 5 minutes forward, then back, never ends a lone run's lease (the lease is on the monotonic clock)", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() });
    // A 1.5 s stale period: a renewal may be 1 s late under load (6-15 on 2 cores) and keep the 1.35 s lease.
    const lock = await acquireS3Lock(`s3://${BUCKET}/stepped/`, { client, staleMs: 1500 });
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
    const lock = await acquireS3Lock(`s3://${BUCKET}/frozen/`, { client, staleMs: 60_000, clock });
    expect(() => lock.assertHeld()).not.toThrow();
    offset = 55_000;
    expect(() => lock.assertHeld()).toThrow(LockLostError);
    await lock.release();
  });

  it("takes over a holder whose heartbeat stood still for the stale period (If-Match on its ETag), and refuses one whose heartbeat moves", async () => {
    // Another host's clock 10 minutes ahead, its run dead: stale once the heartbeat stood still for the stale period.
    const ahead = elsewhere(10 * 60_000);
    await holderAt("ahead", ahead());
    const started = performance.now();
    const taken = await acquireS3Lock(`s3://${BUCKET}/ahead/`, { client, staleMs: 600 });
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
      await expect(acquireS3Lock(`s3://${BUCKET}/behind/`, { client, staleMs: 600 })).rejects.toThrow(
        /another run holds s3:\/\/locks\/behind\/lock\.json: pid 7 on elsewhere.*stood still for 1 s/,
      );
    } finally {
      await renewing.stop();
    }
    expect(JSON.parse((await lockText("behind")) ?? "{}")).toMatchObject({ nonce: "theirs" });
  });

  it("refuses a live holder that renews through the store (a real lock of another host)", async () => {
    const holder = await acquireS3Lock(`s3://${BUCKET}/live/`, { client, staleMs: 2_000, as: { host: "pod-a", pid: 1 } });
    try {
      await expect(acquireS3Lock(`s3://${BUCKET}/live/`, { client, staleMs: 2_000, as: { host: "pod-b", pid: 1 } })).rejects.toThrow(LockedError);
      expect(() => holder.assertHeld()).not.toThrow();
    } finally {
      await holder.release();
    }
  });

  it("takes a fresh lock of a dead process on this host at once", async () => {
    const now = new Date().toISOString();
    await holderAt("dead", { host: hostname(), pid: 2 ** 22 + 17, started: now, nonce: "x", heartbeat: now, beat: 0, staleMs: 60_000 });
    const started = performance.now();
    const lock = await acquireS3Lock(`s3://${BUCKET}/dead/`, { client, staleMs: 60_000 });
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(JSON.parse((await lockText("dead")) ?? "{}")).toMatchObject({ host: hostname(), pid: process.pid });
    await lock.release();
  });

  it("of five runs that take the lock at the same moment, exactly one holds it", async () => {
    // Five hosts (in one process a lock naming this host and pid with another nonce is a previous incarnation's). The losers
    // watch the winner's heartbeat (every 1.25 s) and see it move: a short stale period on a loaded machine (0.6 s at load 20)
    // let one of them take a winner's lock over that had not renewed in time, which is the lock working, not two holders.
    const tries = await Promise.allSettled(
      Array.from({ length: 5 }, (_, i) => acquireS3Lock(`s3://${BUCKET}/race/`, { client, staleMs: 5_000, as: { host: `racer-${i}`, pid: 1 } })),
    );
    const held = tries.filter((t) => t.status === "fulfilled");
    expect(held).toHaveLength(1);
    for (const t of tries) if (t.status === "rejected") expect(t.reason).toBeInstanceOf(LockedError);
    await (held[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof acquireS3Lock>>>).value.release();
  });
});

describe.skipIf(RGW_MISSING.length > 0)("a run with its journal and lock in Ceph RGW", () => {
  // make test: a 2 s stale period (renewals every 0.5 s) over a 6 s run; make soak: the defaults (60 s, every 15 s) over 70 s.
  const staleMs = SOAK ? 60_000 : 2_000;
  const records = SOAK ? 700 : 60;
  it(`renews its lock across a run of ${SOAK ? "70" : "6"} s (${SOAK ? "4" : "12"} renewals), ends done with every row, and releases the lock`, async () => {
    const { cwd, input, job, restore } = runFolder(dir, "long", records, { ...s3.env, TYPED_EVAL_S3_LOCK_STALE_MS: String(staleMs) });
    const output = `s3://${BUCKET}/long/out.jsonl`;
    // 100 ms an answer, one at a time.
    const evaluator = new FakeEvaluator(async (request) => {
      await pause(100);
      return answer(request);
    });
    const beats: number[] = [];
    const watching = keepWriting(async () => {
      const text = await lockText("long/out.jsonl.journal");
      if (text) beats.push((JSON.parse(text) as { beat: number }).beat);
    }, 200);
    const started = performance.now();
    try {
      const end = await runLifecycle(
        lifecycleRequest(input, job, output, evaluator, {
          settings: { input, jobFile: job, model: "default", apiKeyEnv: "TYPED_EVAL_API_KEY", timeoutSeconds: 5, seed: 1, concurrency: 1 },
          places: { output, summaryJson: join(cwd, "s.json") },
          journalFlushMs: 500,
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      expect(end.reason).toBe("");
      expect(end.verdict).toBe("done");
      expect(exitCodeOf(end)).toBe(0);
      expect(seconds).toBeGreaterThan(SOAK ? 65 : 5.5);
      expect(evaluator.calls).toHaveLength(records);
    } finally {
      await watching.stop();
      restore();
    }
    expect(Math.max(...beats)).toBeGreaterThanOrEqual(SOAK ? 4 : 8);
    const rows = ((await (await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: "long/out.jsonl" }))).Body?.transformToString()) ?? "")
      .split("\n")
      .filter(Boolean)
      .map((line) => (JSON.parse(line) as { id: string }).id);
    expect(rows).toEqual(Array.from({ length: records }, (_, i) => `s${i}`));
    expect(await lockText("long/out.jsonl.journal")).toBeUndefined();
  }, 150_000);

  it("a missing bucket: exit 2, its --summary-json says why, no usage summary staged or left behind", async () => {
    const { cwd, input, job, staging, restore } = runFolder(dir, "no-bucket", 1, s3.env);
    try {
      const output = "s3://no-such-bucket/out.jsonl";
      const summaryJson = join(cwd, "s.json");
      const end = await runLifecycle(lifecycleRequest(input, job, output, new FakeEvaluator(), { places: { output, summaryJson } }));
      expect(exitCodeOf(end)).toBe(2);
      expect(JSON.parse(readFileSync(summaryJson, "utf8"))).toMatchObject({ verdict: "bad-input" });
      expect(existsSync(staging)).toBe(false);
    } finally {
      restore();
    }
  });
});
