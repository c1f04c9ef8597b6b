/**
 * The S3 lock where the store misbehaves, in process: s3rver behind the fault
 * proxy (test/support/s3-proxy.ts), which gives it conditional writes as S3
 * has them, or none, or refuses the ones that hold, and delays requests. The
 * lock on a real store is s3-lock.test.ts (Ceph RGW). Also the test store's
 * own check, and a stop while an S3 output is uploaded.
 */
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { SystemOneRequest } from "../../src/api/schema.js";
import { exitCodeOf } from "../../src/api/verdict.js";
import { etagFormOf } from "../../src/records/s3.js";
import { targetOf } from "../../src/runner/prepare.js";
import { runLifecycle } from "../../src/runner/run.js";
import { acquireS3Lock } from "../../src/runner/state/s3-lock.js";
import { plausibleAnswers } from "../support/answers.js";
import { runInProcess } from "../support/cli.js";
import { answer, FakeEvaluator } from "../support/fake-evaluator.js";
import { lifecycleRequest, runFolder } from "../support/lifecycle.js";
import { generatedModel, TINY } from "../support/models.js";
import { keepWriting, startS3Store, type S3Store } from "../support/s3-proxy.js";

let dir: string;
let store: S3Store;
/** Reaches the store through the proxy, as a run does. */
let client: S3Client;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "te-s3-lock-faults-"));
  store = await startS3Store(join(dir, "s3"), ["locks"]);
  client = store.proxied;
}, 30_000);

afterAll(async () => {
  await store?.close();
});

afterEach(() => {
  store.proxy.conditional(true);
  store.proxy.faults([]);
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

describe("a store whose conditional writes do not hold", () => {
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

  it("refuses a store that answers 412 to a condition that holds (If-Match on the object's own ETag, quoted and bare), naming it", async () => {
    store.proxy.faults([{ method: "PUT", when: (req) => req.headers["if-match"] !== undefined, status: 412 }]);
    await expect(acquireS3Lock("s3://locks/refusing/", { client })).rejects.toThrow(
      /the store behind s3:\/\/locks\/refusing\/lock\.json refuses a write under If-Match naming the object's own ETag \(HTTP 412, quoted and bare\).*--unsafe-s3-lock/,
    );
    expect(await lockText("refusing")).toBeUndefined();
    // Told --unsafe-s3-lock, the run writes its lock with no condition at all, and renews it (every second).
    const unsafe = await acquireS3Lock("s3://locks/refusing/", { client, unsafe: true, staleMs: 4_000 });
    await pause(2_500);
    expect(() => unsafe.assertHeld()).not.toThrow();
    expect(JSON.parse((await lockText("refusing")) ?? "{}").beat).toBeGreaterThanOrEqual(2);
    await unsafe.release();
    expect(await lockText("refusing")).toBeUndefined();
  });

  it("a store that starts refusing the quoted form mid-run: the renewal is retried bare, and the lock goes on in that form", async () => {
    const lock = await acquireS3Lock("s3://locks/form-change/", { client, staleMs: 4_000 });
    try {
      expect(etagFormOf(client)).toBe("quoted");
      store.proxy.faults([{ method: "PUT", when: (req) => (req.headers["if-match"] ?? "").startsWith('"'), status: 412 }]);
      // Renewals every second: two of them, each refused quoted and taken bare.
      await pause(2_500);
      expect(() => lock.assertHeld()).not.toThrow();
      expect(etagFormOf(client)).toBe("bare");
      expect(JSON.parse((await lockText("form-change")) ?? "{}")).toMatchObject({ pid: process.pid, beat: expect.any(Number) });
      expect(JSON.parse((await lockText("form-change")) ?? "{}").beat).toBeGreaterThanOrEqual(2);
    } finally {
      store.proxy.faults([]);
      await lock.release();
    }
    expect(await lockText("form-change")).toBeUndefined();
  });

  it("a renewal refused while no other run holds the lock: the store's conditional writes named (exit 2), never a stall", async () => {
    const { cwd, input, job, restore } = runFolder(dir, "refused-renewal", 80, { ...store.env, TYPED_EVAL_S3_LOCK_STALE_MS: "4000" });
    const output = "s3://locks/refused/out.jsonl";
    let calls = 0;
    const evaluator = new FakeEvaluator(async (request) => {
      // From the fifth answer on, every write under If-Match is refused (renewals every second, a lease of 3.6 s).
      if (++calls === 5) store.proxy.faults([{ method: "PUT", when: (req) => req.headers["if-match"] !== undefined, status: 412 }]);
      await pause(50);
      return answer(request);
    });
    try {
      const end = await runLifecycle(
        lifecycleRequest(input, job, output, evaluator, {
          settings: { input, jobFile: job, model: "default", apiKeyEnv: "TYPED_EVAL_API_KEY", timeoutSeconds: 5, seed: 1, concurrency: 1 },
          places: { output, summaryJson: join(cwd, "s.json") },
        }),
      );
      expect(end.reason).toMatch(
        /^the store behind s3:\/\/locks\/refused\/out\.jsonl\.journal\/lock\.json refused the lock's renewal under If-Match naming the lock's own ETag \(quoted and bare\), though no other run holds it: its conditional writes do not work/,
      );
      expect(end.reason).not.toMatch(/stalled/);
      expect(exitCodeOf(end)).toBe(2);
      // It stopped at the first renewal after the refusals began (within about 1 s: 20 answers), not at the end of its lease
      // (72 answers) or of the input (80).
      expect(evaluator.calls.length).toBeLessThan(60);
    } finally {
      store.proxy.faults([]);
      restore();
    }
  }, 30_000);
});

describe("a stop while an S3 output is uploaded", () => {
  it("abandons the upload: stopped (143), nothing in S3, the staged file kept; the rerun uploads it asking nothing", async () => {
    const { cwd, input, job, staging, restore } = runFolder(dir, "stop-upload", 20, store.env);
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
