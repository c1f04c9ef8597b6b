/** S3 inputs and outputs against a real S3-compatible server (s3rver) started by the test. */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GetObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import S3rver from "s3rver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../support/cli.js";
import { generatedModel, TINY } from "../support/models.js";

let server: S3rver;
let endpoint: string;
let client: S3Client;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "te-s3-"));
  server = new S3rver({ port: 0, address: "127.0.0.1", silent: true, directory: join(dir, "s3"), configureBuckets: [{ name: "data", configs: [] }] });
  const address = await server.run();
  endpoint = `http://127.0.0.1:${address.port}`;
  client = new S3Client({ endpoint, forcePathStyle: true, region: "us-east-1", credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" } });
}, 30_000);

afterAll(async () => {
  await server?.close();
});

const env = () => ({
  ...process.env,
  AWS_ENDPOINT_URL_S3: endpoint,
  AWS_ACCESS_KEY_ID: "S3RVER",
  AWS_SECRET_ACCESS_KEY: "S3RVER",
  TYPED_EVAL_MODEL_PATH: generatedModel(TINY),
  TYPED_EVAL_LOG_LEVEL: "warn",
  NODE_NO_WARNINGS: "1",
});

const cli = (args: string[]) => runCli(args, { cwd: dir, env: env() });

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

describe("S3", () => {
  it("reads one key and writes the answers to S3", async () => {
    await put("in/one.jsonl", records(0, 5));
    const r = await cli(["run", "s3://data/in/one.jsonl", "--job", jobFile(), "-o", "s3://data/out/one.jsonl"]);
    expect(r.stderr).not.toMatch(/Error/);
    expect(r.code).toBe(0);
    const rows = (await get("out/one.jsonl")).split("\n").filter(Boolean).map((l) => JSON.parse(l) as { id: string });
    expect(rows.map((x) => x.id).sort()).toEqual(["s0", "s1", "s2", "s3", "s4"]);
    expect(JSON.parse(await get("out/one.jsonl.usage.json"))).toMatchObject({ records: { answered: 5 } });
  }, 60_000);

  it("reads every object under a prefix, in key order, as one input", async () => {
    await put("batch/part-1.jsonl", records(10, 3));
    await put("batch/part-2.jsonl", records(13, 4));
    const out = join(dir, "prefix.jsonl");
    const r = await cli(["run", "s3://data/batch/", "--job", jobFile(), "-o", out]);
    expect(r.code).toBe(0);
    const { readFileSync } = await import("node:fs");
    const rows = readFileSync(out, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as { id: string; source: string });
    expect(rows.map((x) => x.id).sort()).toEqual(["s10", "s11", "s12", "s13", "s14", "s15", "s16"]);
    expect(new Set(rows.map((x) => x.source))).toEqual(new Set(["s3://data/batch/part-1.jsonl", "s3://data/batch/part-2.jsonl"]));
  }, 60_000);

  it("writes a large output by multipart upload (several 5 MiB parts)", async () => {
    // 1,500 records whose answers carry a long kept field: about 12 MB of output.
    const big = Array.from({ length: 1500 }, (_, i) => JSON.stringify({ id: `b${i}`, text: `r${i % 3}`, pad: "p".repeat(8000) })).join("\n");
    await put("in/big.jsonl", big);
    const job = join(dir, "big-job.json");
    writeFileSync(job, JSON.stringify({ state: "text", id: "id", keep: ["pad"], questions: { ok: { type: "noul" } } }));
    const r = await cli(["run", "s3://data/in/big.jsonl", "--job", job, "-o", "s3://data/out/big.jsonl"]);
    expect(r.code).toBe(0);
    const text = await get("out/big.jsonl");
    expect(text.length).toBeGreaterThan(10 * 1024 * 1024);
    expect(text.split("\n").filter(Boolean)).toHaveLength(1500);
  }, 120_000);

  it("reads a zero-byte object as an empty input: exit 6, an empty output", async () => {
    await put("in/empty.jsonl", "");
    const out = join(dir, "empty.jsonl");
    const r = await cli(["run", "s3://data/in/empty.jsonl", "--job", jobFile(), "-o", out]);
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
    expect(readFileSync(out, "utf8").split("\n").filter(Boolean).map((l) => (JSON.parse(l) as { id: string }).id).sort()).toEqual(["s20", "s21", "s22"]);
  }, 60_000);

  it("says clearly when a key does not exist, exit 6 (input absent)", async () => {
    const r = await cli(["run", "s3://data/in/missing.jsonl", "--job", jobFile(), "-o", join(dir, "m.jsonl")]);
    expect(r.code).toBe(6);
    expect(r.stderr).toMatch(/cannot read s3:\/\/data\/in\/missing\.jsonl: no such key/);
  }, 60_000);
});
