/**
 * Crash recovery: kill -9 the runner at 20 moments spread over a run (at
 * start-up and while reading, while requests are in flight, while the outputs
 * are written, during the S3 multipart upload), rerunning after each. Then
 * finish the job and count records lost (goal 0), duplicated (goal 0) and
 * paid twice (reported).
 *
 * SOAK=1 kills 100 times over a larger input.
 */
import { spawn } from "node:child_process";
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, writeFileSync } from "node:fs";
import type { ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GetObjectCommand } from "@aws-sdk/client-s3";
import { startS3Store, type S3Store } from "../support/s3-proxy.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SystemOneRequest } from "../../src/api/schema.js";
import { plausibleAnswers } from "../support/answers.js";
import { BIN, runCli } from "../support/cli.js";
import { sendJson, startUpstream, type Upstream } from "../support/upstream.js";

const SOAK = process.env["SOAK"] === "1";
const RECORDS = SOAK ? 6000 : 1500;

let dir: string;
let upstreamUrl: string;
/** Requests the upstream answered, per record id: more than one means paid twice. */
const paid = new Map<string, number>();
/** Answers at once but for a few milliseconds of latency, so requests are in flight when the kill comes. */
function answer(res: ServerResponse, text: string): void {
  const body = JSON.parse(text) as SystemOneRequest;
  const id = String(body.state).split(" ")[1] as string;
  setTimeout(
    () => {
      paid.set(id, (paid.get(id) ?? 0) + 1);
      sendJson(res, 200, { model: "up-1.0.0", answers: plausibleAnswers(body.questions), usage: { input_tokens: 20, output_tokens: 1 } });
    },
    1 + Math.random() * 4,
  );
}
let upstream: Upstream;

let s3: S3Store;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "te-crash-"));
  // 30 ms an answer, 16 in flight: about 500 records/s, so each moment has a window to be killed in (answering at once,
  // the runner does 3,000 records/s and a 2 ms poll can miss a whole run's "requests" phase).
  upstream = await startUpstream((_req, res, text) => void setTimeout(() => answer(res, text), 30));
  upstreamUrl = upstream.url;
  // Through the proxy that gives s3rver the conditional writes an S3 journal's lock needs.
  s3 = await startS3Store(join(dir, "s3"), ["out"]);
  // Records carry a 4.5 KB field kept in the output: about 7 MB of answers, so writing takes a while and S3 uploads in parts.
  const pad = "p".repeat(4500);
  writeFileSync(join(dir, "in.jsonl"), `${Array.from({ length: RECORDS }, (_, i) => JSON.stringify({ id: `r${i}`, text: `record r${i}`, pad })).join("\n")}\n`);
  writeFileSync(
    join(dir, "job.json"),
    JSON.stringify({ state: "text", id: "id", keep: ["pad"], questions: { ok: { type: "noul" }, pick: { type: "choice", criteria: { a: null, b: null } } } }),
  );
}, 60_000);

afterAll(async () => {
  await upstream?.close();
  await s3?.close();
});

const env = () => ({
  ...process.env,
  TYPED_EVAL_LOG_LEVEL: "warn",
  TYPED_EVAL_API_KEY: "k",
  ...s3.env,
  NODE_NO_WARNINGS: "1",
});

const args = (output: string) => [
  "run",
  "in.jsonl",
  "--job",
  "job.json",
  "-o",
  output,
  "--journal",
  `${output.replace(/^s3:\/\/out\//, "")}.journal`,
  "--base-url",
  upstreamUrl,
  "--concurrency",
  "16",
  "--rpm",
  "1e9",
  "--tps",
  "1e12",
];

const lines = (path: string) => (existsSync(path) ? readFileSync(path, "utf8").split("\n").filter(Boolean).length : 0);

/** Counts a growing file's lines by reading only what was added since the last call (polled every 2 ms). */
function lineCounter(path: string): () => number {
  let offset = 0;
  let count = 0;
  const buffer = Buffer.alloc(1 << 20);
  return () => {
    if (!existsSync(path)) return count;
    const fd = openSync(path, "r");
    try {
      for (let n = readSync(fd, buffer, 0, buffer.length, offset); n > 0; n = readSync(fd, buffer, 0, buffer.length, offset)) {
        for (let i = buffer.indexOf(10); i !== -1 && i < n; i = buffer.indexOf(10, i + 1)) count++;
        offset += n;
      }
    } finally {
      closeSync(fd);
    }
    return count;
  };
}

type Moment = "start" | "requests" | "writing" | "upload";

/** Multipart uploads s3rver holds for the output bucket. */
function uploads(): string[] {
  const bucket = join(dir, "s3", "out");
  if (!existsSync(bucket)) return [];
  return readdirSync(bucket)
    .filter((name) => name.includes("uploads"))
    .flatMap((name) => readdirSync(join(bucket, name)));
}

/**
 * Runs once and kills it with SIGKILL at the moment asked for. Returns
 * whether the kill landed (the run may finish first).
 */
function runAndKill(output: string, moment: Moment, journal: string, partial: string): Promise<{ killed: boolean; code: number | null }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args(output)], { cwd: dir, env: env(), stdio: "ignore" });
    const journaled = lineCounter(journal);
    const target = journaled() + 1 + Math.floor(Math.random() * 60);
    let killed = false;
    const kill = () => {
      if (killed) return;
      killed = true;
      clearInterval(poll);
      child.kill("SIGKILL");
    };
    const uploadsBefore = new Set(uploads());
    let uploadAt: number | undefined;
    const poll = setInterval(() => {
      if (moment === "requests" && journaled() >= target) kill();
      if (moment === "writing" && existsSync(partial)) kill();
      // s3rver keeps each multipart upload in a directory: a new one means the upload has begun.
      if (moment === "upload" && uploadAt === undefined && uploads().some((u) => !uploadsBefore.has(u))) uploadAt = Date.now() + Math.random() * 15;
      if (uploadAt !== undefined && Date.now() >= uploadAt) kill();
    }, 2);
    if (moment === "start") setTimeout(kill, Math.random() * 1500);
    child.on("exit", (code, signal) => {
      clearInterval(poll);
      resolve({ killed: signal === "SIGKILL", code });
    });
  });
}

/** The text of an S3 object, or undefined when there is none. */
async function s3Text(key: string): Promise<string | undefined> {
  try {
    const object = await s3.proxied.send(new GetObjectCommand({ Bucket: "out", Key: key }));
    return await object.Body!.transformToString();
  } catch {
    return undefined;
  }
}

describe("kill -9 at 20 moments, then finish", () => {
  it(
    "loses no record, duplicates none, and reports what was paid twice",
    async () => {
      const kills = SOAK ? 100 : 20;
      // Three quarters of the kills write to a local file: at start-up, then while requests are in flight, then (the
      // job done, each rerun rewriting the outputs) while writing. The rest write to S3: requests, then the upload.
      const local = join(dir, "out.jsonl");
      const bucketKey = "s3://out/answers.jsonl";
      const n = Math.round(kills * 0.75);
      const m = kills - n;
      const plan: { output: string; moment: Moment }[] = [
        ...Array.from({ length: n }, (_, k): { output: string; moment: Moment } => ({
          output: local,
          moment: k < n * 0.2 ? "start" : k < n * 0.75 ? "requests" : "writing",
        })),
        ...Array.from({ length: m }, (_, k): { output: string; moment: Moment } => ({ output: bucketKey, moment: k < m * 0.4 ? "requests" : "upload" })),
      ];

      const landed: Record<Moment, number> = { start: 0, requests: 0, writing: 0, upload: 0 };
      const missed: string[] = [];
      for (const { output, moment } of plan) {
        const s3 = output.startsWith("s3://");
        const journal = join(dir, s3 ? "answers.jsonl.journal" : "out.jsonl.journal");
        const { killed, code } = await runAndKill(output, moment, journal, `${local}.partial`);
        if (killed) landed[moment]++;
        else {
          missed.push(`${s3 ? "s3" : "local"} ${moment}`);
          expect(code).toBe(0);
        }
        // Whatever the moment, an output that exists is complete: never a half-written file or object.
        if (s3) {
          const text = await s3Text("answers.jsonl");
          if (text !== undefined) expect(text.split("\n").filter(Boolean)).toHaveLength(RECORDS);
        } else if (existsSync(local)) expect(lines(local)).toBe(RECORDS);
      }

      // Finish both jobs and check the outputs.
      const finishLocal = await runCli(args(local), { cwd: dir, env: env() });
      expect(finishLocal.code).toBe(0);
      const finishS3 = await runCli(args("s3://out/answers.jsonl"), { cwd: dir, env: env() });
      expect(finishS3.code).toBe(0);
      for (const text of [readFileSync(local, "utf8"), (await s3Text("answers.jsonl")) ?? ""]) {
        const ids = text
          .split("\n")
          .filter(Boolean)
          .map((l) => (JSON.parse(l) as { id: string }).id);
        const unique = new Set(ids);
        const lost = RECORDS - unique.size;
        const duplicated = ids.length - unique.size;
        expect(lost).toBe(0);
        expect(duplicated).toBe(0);
      }
      // Paid twice: what the upstream answered beyond one answer per record per job. At most what was in flight at each kill.
      const sent = [...paid.values()].reduce((a, b) => a + b, 0);
      const paidTwice = sent - 2 * RECORDS;
      expect(paidTwice).toBeGreaterThanOrEqual(0);
      expect(paidTwice).toBeLessThanOrEqual(16 * plan.length);
      // Every planned kill landed: the moments are real, not runs that finished first.
      expect(missed).toEqual([]);
      console.log(
        JSON.stringify({
          figure: "crash recovery",
          records: RECORDS,
          kills: plan.length,
          landed,
          lost: 0,
          duplicated: 0,
          requests: sent,
          paid_twice: paidTwice,
        }),
      );
    },
    SOAK ? 3_600_000 : 600_000,
  );
});
