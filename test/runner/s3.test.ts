/**
 * S3 inputs and outputs against a real S3 store, Ceph RGW (Debian's radosgw,
 * started by the tests: test/support/rgw.ts): one key and prefixes, Parquet
 * by ranges, multipart and gzip outputs, the journal and its lock across a
 * kill -9, inputs read as the version first seen, and the setup mistakes
 * (credentials the store rejects, a permission it denies) that exit 2.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, PutBucketVersioningCommand, PutObjectCommand, type S3Client } from "@aws-sdk/client-s3";
import { gunzipSync } from "node:zlib";
import { InputChangedError } from "../../src/api/verdict.js";
import { getPinned, rememberEtagForm } from "../../src/records/s3.js";
import type { SystemOneRequest } from "../../src/api/schema.js";
import { plausibleAnswers } from "../support/answers.js";
import { BIN, runCli, runInProcess } from "../support/cli.js";
import { sendJson, startUpstream } from "../support/upstream.js";
import { RGW_MISSING, type RealS3, realS3 } from "../support/rgw.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generatedModel, TINY } from "../support/models.js";
import { DuckDBInstance } from "@duckdb/node-api";
import { plainValue } from "../../src/records/parquet.js";

const ROOT = join(import.meta.dirname, "../..");

/** Runs SQL in DuckDB, paths resolved against `cwd`; rows as plain JSON-able objects. */
async function duck(sql: string, cwd = dir): Promise<Record<string, unknown>[]> {
  const db = await DuckDBInstance.create(":memory:");
  const c = await db.connect();
  try {
    await c.run(`SET file_search_path = '${cwd}'`);
    return (await c.runAndReadAll(sql)).getRowObjectsJS().map((r) => plainValue(r) as Record<string, unknown>);
  } finally {
    c.closeSync();
  }
}

async function putFile(bucket: string, key: string, path: string): Promise<void> {
  await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: readFileSync(path) }));
}

async function download(bucket: string, key: string, path: string): Promise<void> {
  const object = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  writeFileSync(path, await object.Body!.transformToByteArray());
}

let s3: RealS3;
let client: S3Client;
let dir: string;

beforeAll(async () => {
  if (RGW_MISSING.length > 0) return;
  dir = mkdtempSync(join(tmpdir(), "te-s3-"));
  s3 = await realS3();
  client = s3.client;
  for (const bucket of ["data", "bucket", "versioned"]) await s3.bucket(bucket);
}, 150_000);

afterAll(() => {
  client?.destroy();
});

const env = () => ({
  ...process.env,
  ...s3.env,
  TYPED_EVAL_MODEL_PATH: generatedModel(TINY),
  TYPED_EVAL_LOG_LEVEL: "warn",
  NODE_NO_WARNINGS: "1",
});

/** In this process, where what is read and written is the point (the logger's lines are not seen). */
const inProcess = (args: string[]) => {
  const { AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, TYPED_EVAL_MODEL_PATH } = env();
  return runInProcess(
    args,
    { AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, TYPED_EVAL_MODEL_PATH, TYPED_EVAL_LOG_LEVEL: "error" },
    { cwd: dir },
  );
};

async function put(key: string, body: string): Promise<void> {
  await client.send(new PutObjectCommand({ Bucket: "data", Key: key, Body: body }));
}

async function get(key: string): Promise<string> {
  const object = await client.send(new GetObjectCommand({ Bucket: "data", Key: key }));
  return object.Body!.transformToString();
}

const records = (from: number, n: number) => Array.from({ length: n }, (_, i) => JSON.stringify({ id: `s${from + i}`, text: `record ${from + i}` })).join("\n");
const jobFile = () => {
  const path = join(dir, "job.json");
  writeFileSync(path, JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul" } } }));
  return path;
};

describe.skipIf(RGW_MISSING.length > 0)("S3 on Ceph RGW", () => {
  it("reads one key and writes the answers to S3; the local copy of its S3 journal is gone once S3 holds it", async () => {
    await put("in/one.jsonl", records(0, 5));
    const cwd = join(dir, "one");
    mkdirSync(cwd, { recursive: true });
    const r = await runCli(["run", "s3://data/in/one.jsonl", "--job", jobFile(), "-o", "s3://data/out/one.jsonl"], { cwd, env: env() });
    expect(r.stderr).not.toMatch(/Error/);
    expect(r.code).toBe(0);
    // Nothing piles up in .typed-eval/ night after night: the journal is in S3.
    expect(readdirSync(join(cwd, ".typed-eval")).filter((f) => f.startsWith("journal-"))).toEqual([]);
    const rows = (await get("out/one.jsonl"))
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { id: string });
    expect(rows.map((x) => x.id).sort()).toEqual(["s0", "s1", "s2", "s3", "s4"]);
    expect(JSON.parse(await get("out/one.jsonl.usage.json"))).toMatchObject({ records: { answered: 5 } });
  }, 60_000);

  it("reads every object under a prefix, in key order, as one input", async () => {
    await put("batch/part-1.jsonl", records(10, 3));
    await put("batch/part-2.jsonl", records(13, 4));
    const out = join(dir, "prefix.jsonl");
    const r = await inProcess(["run", "s3://data/batch/", "--job", jobFile(), "-o", out]);
    expect(r.code).toBe(0);
    const { readFileSync } = await import("node:fs");
    const rows = readFileSync(out, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { id: string; source: string });
    expect(rows.map((x) => x.id).sort()).toEqual(["s10", "s11", "s12", "s13", "s14", "s15", "s16"]);
    expect(new Set(rows.map((x) => x.source))).toEqual(new Set(["s3://data/batch/part-1.jsonl", "s3://data/batch/part-2.jsonl"]));
  }, 60_000);

  it("names the files of an id repeated across the objects of a prefix (it said 'lines 1 and 1')", async () => {
    // Each night's part restarts its line numbers: s20 is line 1 of both.
    await put("dups/part-1.jsonl", records(20, 2));
    await put("dups/part-2.jsonl", records(20, 1));
    const out = join(dir, "dups.jsonl");
    const r = await inProcess(["run", "s3://data/dups/", "--job", jobFile(), "-o", out]);
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(readFileSync(`${out}.usage.json`, "utf8")) as { duplicate_ids: unknown };
    expect(summary.duplicate_ids).toEqual({
      rows: 1,
      examples: [{ id: "s20", first_line: 1, line: 1, first_source: "s3://data/dups/part-1.jsonl", source: "s3://data/dups/part-2.jsonl" }],
    });
    expect(r.stderr).toMatch(
      /1 row repeats an id an earlier row has, such as "s20" \(s3:\/\/data\/dups\/part-1\.jsonl line 1 and s3:\/\/data\/dups\/part-2\.jsonl line 1\)/,
    );
  }, 60_000);

  it("writes a large output by multipart upload (several 5 MiB parts)", async () => {
    // 1,500 records whose answers carry a long kept field: about 12 MB of output.
    const big = Array.from({ length: 1500 }, (_, i) => JSON.stringify({ id: `b${i}`, text: `r${i % 3}`, pad: "p".repeat(8000) })).join("\n");
    await put("in/big.jsonl", big);
    const job = join(dir, "big-job.json");
    writeFileSync(job, JSON.stringify({ state: "text", id: "id", keep: ["pad"], questions: { ok: { type: "noul" } } }));
    const r = await inProcess(["run", "s3://data/in/big.jsonl", "--job", job, "-o", "s3://data/out/big.jsonl"]);
    expect(r.code).toBe(0);
    const text = await get("out/big.jsonl");
    expect(text.length).toBeGreaterThan(10 * 1024 * 1024);
    expect(text.split("\n").filter(Boolean)).toHaveLength(1500);
  }, 120_000);

  it("writes a gzipped output (.jsonl.gz) that reads back whole", async () => {
    await put("in/gz.jsonl", records(30, 40));
    const r = await inProcess(["run", "s3://data/in/gz.jsonl", "--job", jobFile(), "-o", "s3://data/out/gz.jsonl.gz"]);
    expect(r.code).toBe(0);
    const object = await client.send(new GetObjectCommand({ Bucket: "data", Key: "out/gz.jsonl.gz" }));
    const bytes = Buffer.from(await object.Body!.transformToByteArray());
    // The gzip magic number: the object holds gzip, not JSON lines.
    expect(bytes.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
    const ids = gunzipSync(bytes)
      .toString("utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => (JSON.parse(l) as { id: string }).id);
    expect(ids).toEqual(Array.from({ length: 40 }, (_, i) => `s${30 + i}`));
  }, 60_000);

  it("reads a zero-byte object as an empty input: exit 6, an empty output", async () => {
    await put("in/empty.jsonl", "");
    const out = join(dir, "empty.jsonl");
    const r = await inProcess(["run", "s3://data/in/empty.jsonl", "--job", jobFile(), "-o", out]);
    expect(r.code).toBe(6);
    expect(r.stderr).toMatch(/holds no records/);
    const { readFileSync } = await import("node:fs");
    expect(readFileSync(out, "utf8")).toBe("");
  }, 60_000);

  it("skips Hadoop-style marker objects under a prefix, and says so", async () => {
    await put("spark/_SUCCESS", "");
    await put("spark/part-00000.jsonl", records(20, 3));
    await put("spark/.part-00000.jsonl.crc", "binary checksum");
    await put("spark/_committed_123", "{}");
    await put("spark/part-00001.jsonl", "");
    const out = join(dir, "spark.jsonl");
    const r = await runCli(["run", "s3://data/spark/", "--job", jobFile(), "-o", out], { cwd: dir, env: { ...env(), TYPED_EVAL_LOG_LEVEL: "info" } });
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/skipped 3 marker objects under s3:\/\/data\/spark\//);
    const { readFileSync } = await import("node:fs");
    expect(
      readFileSync(out, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as { id: string }).id)
        .sort(),
    ).toEqual(["s20", "s21", "s22"]);
  }, 60_000);

  it("reads Parquet parts under a prefix (no flag, _SUCCESS skipped) and writes Parquet answers to S3", async () => {
    for (const part of [0, 1]) {
      const local = join(dir, `part-${part}.parquet`);
      await duck(
        `COPY (SELECT 'p' || (${part * 100} + i) AS id, 'record ' || i AS text, repeat('x', 500) AS unused FROM range(100) t(i)) TO '${local}' (FORMAT parquet)`,
      );
      await putFile("data", `pq/part-0000${part}.snappy.parquet`, local);
    }
    await put("pq/_SUCCESS", "");
    // --rpm: 200 records are not about pacing (3 s of the default rate).
    const r = await inProcess(["run", "s3://data/pq/", "--job", jobFile(), "-o", "s3://data/out/pq.parquet", "--rpm", "1e6"]);
    expect(r.stderr).not.toMatch(/Error/);
    expect(r.code).toBe(0);
    const local = join(dir, "pq-out.parquet");
    await download("data", "out/pq.parquet", local);
    const rows = await duck(`SELECT id, line, source, "ok.noul" AS p FROM '${local}' ORDER BY source, line`);
    expect(rows).toHaveLength(200);
    expect(rows[0]).toMatchObject({ id: "p0", line: 1, source: "s3://data/pq/part-00000.snappy.parquet" });
    expect(rows[199]).toMatchObject({ id: "p199", line: 100, source: "s3://data/pq/part-00001.snappy.parquet" });
    expect(rows.every((row) => typeof row["p"] === "number" && row["p"] >= 0 && row["p"] <= 1)).toBe(true);
  }, 60_000);

  it("runs the Parquet examples of docs/runner.md as written (local, S3, assess, and the DuckDB query)", async () => {
    const readme = readFileSync(join(ROOT, "docs/runner.md"), "utf8");
    const block = /<!-- parquet-examples[^>]*-->\s*```sh\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(block).toBeDefined();
    const lines = (block as string).trim().split("\n");
    // The commands run in a folder that holds the repository's examples/ and jobs/, as the README's own checkout does.
    const cwd = mkdtempSync(join(tmpdir(), "te-readme-"));
    symlinkSync(join(ROOT, "examples"), join(cwd, "examples"));
    symlinkSync(join(ROOT, "jobs"), join(cwd, "jobs"));
    await putFile("bucket", "tickets/part-00000.parquet", join(ROOT, "examples/data/tickets.parquet"));
    let ran = 0;
    for (const line of lines) {
      if (line.startsWith("npx typed-eval ")) {
        const r = await runCli(line.slice("npx typed-eval ".length).split(/\s+/), { cwd, env: env() });
        expect(r.code, `${line}\n${r.stderr}`).toBe(0);
      } else {
        const sql = /^duckdb -c "(.*)"$/.exec(line)?.[1];
        expect(sql, line).toBeDefined();
        const rows = await duck((sql as string).replaceAll('\\"', '"'), cwd);
        expect(rows).toHaveLength(5);
        expect(Object.keys(rows[0] as object)).toEqual(["id", "team.choice", "team.confidence", "urgency.level"]);
      }
      ran++;
    }
    expect(ran).toBe(4);
    const labelled = join(cwd, "labels.parquet");
    await download("bucket", "labels/tickets.parquet", labelled);
    expect(await duck(`SELECT count(*) AS n FROM '${labelled}'`)).toEqual([{ n: 24 }]);
  }, 120_000);

  it("says clearly when a key does not exist, exit 6 (input absent)", async () => {
    const r = await inProcess(["run", "s3://data/in/missing.jsonl", "--job", jobFile(), "-o", join(dir, "m.jsonl")]);
    expect(r.code).toBe(6);
    expect(r.stderr).toMatch(/cannot read s3:\/\/data\/in\/missing\.jsonl: no such key/);
  }, 60_000);

  it("an S3 journal and its lock: a rival refused while the run lives (7); killed -9, the lock taken over from another machine once stale, resumed; no record lost or duplicated", async () => {
    const n = 400;
    await put("in/journal.jsonl", Array.from({ length: n }, (_, i) => JSON.stringify({ id: `j${i}`, text: `record j${i}` })).join("\n"));
    const asked = new Map<string, number>();
    let delay = 40;
    // Holds the first run's answers while its rival tries the lock: a loaded machine must not let the first run finish first.
    let held: Promise<void> | undefined;
    const upstream = await startUpstream((_req, res, text) => {
      const body = JSON.parse(text) as SystemOneRequest;
      const id = String(body.state).split(" ")[1]!;
      asked.set(id, (asked.get(id) ?? 0) + 1);
      const answer = () =>
        setTimeout(
          () => sendJson(res, 200, { model: "up-1.0.0", answers: plausibleAnswers(body.questions), usage: { input_tokens: 3, output_tokens: 1 } }),
          delay,
        );
      if (held) void held.then(answer);
      else answer();
    });
    const segments = async () => (await client.send(new ListObjectsV2Command({ Bucket: "data", Prefix: "out/journal.jsonl.journal/segments/" }))).KeyCount ?? 0;
    const args = [
      "run",
      "s3://data/in/journal.jsonl",
      "--job",
      jobFile(),
      "-o",
      "s3://data/out/journal.jsonl",
      "--base-url",
      upstream.url,
      "--rpm",
      "1e6",
      "--concurrency",
      "4",
      "--journal-flush",
      "0.25",
    ];
    const first = join(dir, "worker-1");
    const second = join(dir, "worker-2");
    mkdirSync(first, { recursive: true });
    mkdirSync(second, { recursive: true });
    // A lock whose heartbeat beats every second: the rival sees it is alive within a second or two.
    const runEnv = { ...env(), TYPED_EVAL_API_KEY: "k", TYPED_EVAL_S3_LOCK_STALE_MS: "4000" };
    try {
      const child = spawn(process.execPath, [BIN, ...args], { cwd: first, env: runEnv, stdio: "ignore" });
      const exited = new Promise((resolve) => child.on("exit", resolve));
      while ((await segments()) < 3) await new Promise((r) => setTimeout(r, 50));
      let release: () => void = () => undefined;
      held = new Promise<void>((resolve) => {
        release = resolve;
      });
      // A second run on the same S3 journal, from another machine, is refused while the first holds it.
      const rival = await runCli(args, { cwd: join(dir), env: runEnv });
      expect(rival.code).toBe(7);
      expect(rival.stderr).toMatch(/another run holds s3:\/\/data\/out\/journal\.jsonl\.journal\/lock\.json/);
      child.kill("SIGKILL");
      await exited;
      held = undefined;
      release();
      const paidBefore = [...asked.values()].reduce((a, b) => a + b, 0);
      expect(paidBefore).toBeLessThan(n);
      delay = 0;
      // As if the dead worker had been another machine (a pod replaced): its lock names a host whose processes this one
      // cannot see, so the rerun takes it over only once its heartbeat has stood still for the stale period (4 s).
      const lockKey = "out/journal.jsonl.journal/lock.json";
      const lock = JSON.parse(await get(lockKey)) as { host: string };
      await put(lockKey, JSON.stringify({ ...lock, host: "pod-gone" }));
      const started = performance.now();
      const resumed = await runCli(args, { cwd: second, env: { ...runEnv, TYPED_EVAL_LOG_LEVEL: "info" } });
      expect(resumed.stderr).toMatch(/held by pid \d+ on pod-gone: watching its heartbeat for up to 4 s before taking it over/);
      expect(resumed.stderr).toMatch(/resuming from the journal in s3:\/\/data\/out\/journal\.jsonl\.journal\/ \(\d+ segments\)/);
      expect(resumed.code).toBe(0);
      expect(performance.now() - started).toBeGreaterThan(4_000);
      const rows = (await get("out/journal.jsonl"))
        .split("\n")
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as { id: string }).id);
      expect(rows).toHaveLength(n);
      expect(new Set(rows).size).toBe(n);
      expect(asked.size).toBe(n);
      // Paid twice: at most what the first worker finished in its last flush interval (4 in flight at 40 ms each: at most
      // 100 a second, 25 in 0.25 s), plus the 4 in flight, plus slack for the shipment's own time.
      const twice = [...asked.values()].filter((k) => k > 1).length;
      expect(twice).toBeLessThanOrEqual(40);
    } finally {
      await upstream.close();
    }
  }, 90_000);

  describe("an input read as the version first seen", () => {
    const location = (key: string) => `s3://data/${key}`;
    const head = async (bucket: string, key: string) => {
      const got = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
      return { etag: got.ETag, versionId: got.VersionId, size: got.ContentLength ?? 0 };
    };

    it("reads the pinned version under If-Match in either ETag form, and an overwrite ends the read (InputChangedError, exit 10's)", async () => {
      await put("pin/in.jsonl", records(0, 3));
      const first = await head("data", "pin/in.jsonl");
      for (const form of ["quoted", "bare"] as const) {
        const reader = s3.clientAs({ accessKeyId: s3.env.AWS_ACCESS_KEY_ID, secretAccessKey: s3.env.AWS_SECRET_ACCESS_KEY });
        rememberEtagForm(reader, form);
        const got = await getPinned(reader, location("pin/in.jsonl"), first, { from: 0 }, undefined);
        expect(await got.Body!.transformToString()).toBe(records(0, 3));
        reader.destroy();
      }
      await put("pin/in.jsonl", records(0, 4));
      // The store refuses the old version (412), and the reader says which.
      await expect(getPinned(client, location("pin/in.jsonl"), first, { from: 10 }, undefined)).rejects.toThrow(InputChangedError);
      await expect(getPinned(client, location("pin/in.jsonl"), first, { from: 10 }, undefined)).rejects.toThrow(
        /s3:\/\/data\/pin\/in\.jsonl changed while it was read \(it is no longer the version of ETag "[0-9a-f]{32}" first read\)/,
      );
    });

    it("in a versioned bucket, reads the version first seen by its VersionId, undisturbed by an overwrite", async () => {
      await client.send(new PutBucketVersioningCommand({ Bucket: "versioned", VersioningConfiguration: { Status: "Enabled" } }));
      await client.send(new PutObjectCommand({ Bucket: "versioned", Key: "in.jsonl", Body: records(0, 3) }));
      const first = await head("versioned", "in.jsonl");
      expect(first.versionId).toBeDefined();
      await client.send(new PutObjectCommand({ Bucket: "versioned", Key: "in.jsonl", Body: records(100, 5) }));
      const got = await getPinned(client, "s3://versioned/in.jsonl", first, { from: 0 }, undefined);
      expect(await got.Body!.transformToString()).toBe(records(0, 3));
    });
  });

  describe("setup mistakes: exit 2, one line naming the setting, nothing paid", () => {
    /**
     * Runs `args` in this process, or (`asProcess`) as one: a process makes its S3 client from its own environment,
     * where this one keeps the client it made first for an endpoint, whatever credentials come after.
     */
    const setup = async (args: string[], extra: Record<string, string | undefined>, firstLine = /^typed-eval: stopped: bad input: /, asProcess = false) => {
      const cwd = join(dir, `setup-${Math.random().toString(36).slice(2)}`);
      mkdirSync(cwd, { recursive: true });
      writeFileSync(join(cwd, "in.jsonl"), records(0, 2));
      const { AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, TYPED_EVAL_MODEL_PATH } = env();
      const argv = ["run", ...args, "--job", jobFile(), "--storage-retry", "1"];
      const vars = { AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, TYPED_EVAL_MODEL_PATH, TYPED_EVAL_LOG_LEVEL: "error", ...extra };
      const r = asProcess ? await runCli(argv, { cwd, env: { ...env(), ...vars } }) : await runInProcess(argv, vars, { cwd });
      expect(r.stderr).not.toMatch(/\n\s+at |internal error/);
      expect(r.stderr.trim().split("\n")[0]).toMatch(firstLine);
      return r;
    };

    it("an endpoint without its scheme", async () => {
      // A setting of the environment, refused with the others before the run begins (api/env.ts).
      const r = await setup(["s3://data/in/one.jsonl", "-o", "out.jsonl"], { AWS_ENDPOINT_URL_S3: "127.0.0.1:9000" }, /^typed-eval: /);
      expect(r.stderr).toMatch(/\$AWS_ENDPOINT_URL_S3 takes an http:\/\/ or https:\/\/ URL, not "127\.0\.0\.1:9000"/);
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
      expect(r.code).toBe(2);
    });

    it("a bucket that does not exist, as the input and as the output", async () => {
      const input = await setup(["s3://no-such-bucket/in.jsonl", "-o", "out.jsonl"], {});
      expect(input.stderr).toMatch(/the bucket no-such-bucket does not exist \(s3:\/\/no-such-bucket\/in\.jsonl\): create it, or correct its name/);
      expect(input.code).toBe(2);
      const output = await setup(["in.jsonl", "-o", "s3://no-such-bucket/out.jsonl"], {});
      expect(output.stderr).toMatch(/the bucket no-such-bucket does not exist/);
      expect(output.code).toBe(2);
    });

    it("a prefix where the output object goes", async () => {
      const r = await setup(["in.jsonl", "-o", "s3://data/answers/"], {});
      expect(r.stderr).toMatch(
        /--output s3:\/\/data\/answers\/ is a prefix, where an object goes: name the object, such as s3:\/\/data\/answers\/answers\.jsonl/,
      );
      expect(r.code).toBe(2);
      // Refused at the check: no journal, no lock in the bucket.
      expect((await client.send(new ListObjectsV2Command({ Bucket: "data", Prefix: "answers/.journal" }))).KeyCount ?? 0).toBe(0);
    });

    it("a secret the store rejects (SignatureDoesNotMatch), for an S3 input: names AWS_SECRET_ACCESS_KEY", async () => {
      // The input's first request is a HEAD, whose 403 says nothing: the reason comes from a one-byte GET.
      const input = await setup(["s3://data/in/one.jsonl", "-o", "out.jsonl"], { AWS_SECRET_ACCESS_KEY: "not-the-secret" }, undefined, true);
      expect(input.stderr).toMatch(
        /reading s3:\/\/data\/in\/one\.jsonl: HTTP 403 SignatureDoesNotMatch: the store rejected the request's signature: AWS_SECRET_ACCESS_KEY .* is not the secret of the access key in use/,
      );
      expect(input.code).toBe(2);
      expect(input.stderr).not.toMatch(/once the store is back/);
    });

    it("an access key the store does not know (InvalidAccessKeyId), for an S3 output: names AWS_ACCESS_KEY_ID", async () => {
      // An S3 output: its journal's lock is the first request (before: exit 9, "rerun once the store is back", which schedulers retry).
      const r = await setup(["in.jsonl", "-o", "s3://data/out/denied.jsonl"], { AWS_ACCESS_KEY_ID: "TENOSUCHKEY0000000" }, undefined, true);
      expect(r.stderr).toMatch(
        /probing conditional writes at s3:\/\/data\/out\/denied\.jsonl\.journal\/lock\.json: HTTP 403 InvalidAccessKeyId: the store does not know the access key in use: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY/,
      );
      expect(r.code).toBe(2);
    });

    it("another user's credentials, which may not read or write this bucket (AccessDenied): names the permission", async () => {
      const other = await s3.user("te-other");
      const credentials = { AWS_ACCESS_KEY_ID: other.accessKeyId, AWS_SECRET_ACCESS_KEY: other.secretAccessKey };
      const input = await setup(["s3://data/in/one.jsonl", "-o", "out.jsonl"], credentials, undefined, true);
      expect(input.stderr).toMatch(
        /reading s3:\/\/data\/in\/one\.jsonl: HTTP 403 AccessDenied: the store denied the credentials in use .* this access: grant it/,
      );
      expect(input.code).toBe(2);
      const output = await setup(["in.jsonl", "-o", "s3://data/out/denied.jsonl"], credentials, undefined, true);
      expect(output.stderr).toMatch(/HTTP 403 AccessDenied: the store denied the credentials in use/);
      expect(output.code).toBe(2);
      // Nothing of the refused runs reached the bucket.
      expect((await client.send(new ListObjectsV2Command({ Bucket: "data", Prefix: "out/denied" }))).KeyCount ?? 0).toBe(0);
    });

    it("no AWS credentials anywhere", async () => {
      const none = join(dir, "no-aws");
      const r = await setup(["s3://data/in/one.jsonl", "-o", "out.jsonl"], {
        // Another spelling of the same endpoint: a client of its own, which finds no credentials.
        AWS_ENDPOINT_URL_S3: `${s3.endpoint}/`,
        AWS_ACCESS_KEY_ID: undefined,
        AWS_SECRET_ACCESS_KEY: undefined,
        AWS_PROFILE: undefined,
        AWS_SHARED_CREDENTIALS_FILE: join(none, "credentials"),
        AWS_CONFIG_FILE: join(none, "config"),
        AWS_EC2_METADATA_DISABLED: "true",
      });
      expect(r.stderr).toMatch(/no AWS credentials to reach s3:\/\/data\/in\/one\.jsonl: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE/);
      expect(r.code).toBe(2);
    });
  });
});
