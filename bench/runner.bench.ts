/**
 * The batch runner against a rate-limited upstream (its own process), with
 * limits scaled up so each regime runs in about a minute:
 * - at the request limit: 6,000 requests/min, small states;
 * - at the token limit: 100,000 tokens/s, states of about 1,000 tokens;
 * - sporadic faults: 5% 529 + 5% 500 + 2% resets per attempt, no retry headers;
 * - a 10-second storm in which every attempt gets 529;
 * - an upstream that silently allows half the configured limit;
 * then throughput and peak memory with an upstream that answers at once
 * (JSONL, and Parquet against JSONL side by side),
 * and the estimate against the tokens really used (embedded model).
 */
import Bottleneck from "bottleneck";
import { createWriteStream, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LlamaEngine } from "../src/engines/llama.js";
import { LocalEvaluator } from "../src/evaluator/local.js";
import { detectTemplate } from "../src/evaluator/prompt.js";
import { endpointEvaluator } from "../src/evaluator/factory.js";
import { ModelRouter } from "../src/evaluator/router.js";
import type { Evaluator } from "../src/evaluator/evaluator.js";
import { createLogger } from "../src/logging/logger.js";
import { estimateJob } from "../src/runner/estimate.js";
import { loadJob, parseJob, type Job } from "../src/records/job.js";
import { RunLimiter } from "../src/runner/send/limiter.js";
import { localTarget } from "../src/runner/output/outputs.js";
import { runJob } from "../src/runner/run.js";
import { JSONL } from "../src/records/jsonl.js";
import { openLocalSource } from "../src/records/sources.js";
import { outputFormat } from "../src/records/formats.js";
import { generatedModel, TINY } from "../test/support/models.js";
import { ByteWriter, ParquetWriter, type SchemaElement } from "hyparquet-writer";
import type { Benchmark, Ratio } from "./harness.js";
import { timedCli, upstreamProcess } from "./processes.js";
import type { UpstreamConfig } from "./upstream.js";

const dir = mkdtempSync(join(tmpdir(), "te-bench-runner-"));
const logger = createLogger({ level: "silent" });
const job: Job = parseJob(
  { state: "text", id: "id", questions: { ok: { type: "noul" }, pick: { type: "choice", criteria: { a: null, b: null } } } },
  "bench-job",
);

interface UpstreamStats {
  accepted: number;
  rejected: number;
  overloaded: number;
  failed: number;
  reset: number;
  first: number;
  last: number;
  attemptsPerSecond: number[];
  acceptedPerSecond: number[];
}

/** Requests the upstream accepted per second, between its first and last acceptance. */
function acceptedPerSecond(s: UpstreamStats): number {
  return (s.accepted - 1) / ((s.last - s.first) / 1000);
}

async function upstream(config: UpstreamConfig): Promise<{ url: string; stats(): Promise<UpstreamStats>; storm(ms: number): Promise<void>; stop(): void }> {
  const { url, stop } = await upstreamProcess(config);
  return {
    url,
    stats: async () => (await (await fetch(`${url}/stats`)).json()) as UpstreamStats,
    storm: async (ms) => void (await fetch(`${url}/storm?ms=${ms}`, { method: "POST" })),
    stop,
  };
}

async function writeInput(name: string, records: number, stateChars: number): Promise<string> {
  const path = join(dir, name);
  const out = createWriteStream(path);
  const pad = "x".repeat(Math.max(0, stateChars - 20));
  for (let i = 0; i < records; i++) {
    if (!out.write(`${JSON.stringify({ id: `r${i}`, text: `record ${i} ${pad}` })}\n`)) await new Promise<void>((r) => out.once("drain", () => r()));
  }
  await new Promise<void>((resolve) => out.end(resolve));
  return path;
}

async function run(input: string, evaluator: Evaluator, rpm: number, tps: number, concurrency: number, onProgress?: () => void) {
  const out = join(dir, `${Date.now()}-${Math.random()}.jsonl`);
  const started = Date.now();
  const result = await runJob({
    job,
    source: openLocalSource(input, JSONL),
    evaluator,
    journalPath: `${out}.journal`,
    answers: { target: localTarget(out), format: outputFormat(out) },
    errors: localTarget(`${out}.errors.jsonl`),
    limiter: new RunLimiter({ requestsPerMinute: rpm, tokensPerSecond: tps }),
    concurrency,
    pricePerMillion: 0.042,
    logger,
    ...(onProgress ? { onProgress } : {}),
  });
  return { result, seconds: (Date.now() - started) / 1000 };
}

async function atLimit(label: string, records: number, stateChars: number, rpm: number, tps: number, figures: Record<string, number>, ratios: Ratio[]) {
  const up = await upstream({ minMs: 50, maxMs: 150, rpm, tps });
  try {
    const input = await writeInput(`${label}.jsonl`, records, stateChars);
    const remote = endpointEvaluator({ baseUrl: up.url });
    const { result } = await run(input, remote, rpm, tps, 32);
    const s = await up.stats();
    const span = (s.last - s.first) / 1000;
    const perSecond = acceptedPerSecond(s);
    const tokensPerRequest = result.summary.tokens.input / result.summary.records.answered;
    const limitPerSecond = Math.min(rpm / 60, tps / tokensPerRequest);
    figures[`${label}: records`] = records;
    figures[`${label}: seconds`] = span;
    figures[`${label}: requests/s sustained`] = perSecond;
    figures[`${label}: requests/s the limits allow`] = limitPerSecond;
    figures[`${label}: tokens per request`] = tokensPerRequest;
    figures[`${label}: rejected (429)`] = s.rejected;
    ratios.push({ name: `${label}: sustained / limit`, value: perSecond / limitPerSecond, goal: { min: 0.98 } });
    ratios.push({ name: `${label}: rejected / sent`, value: s.rejected / (s.accepted + s.rejected), goal: { max: 0.002 } });
  } finally {
    up.stop();
  }
}

/** One CLI run against an upstream that answers at once, limits far away: wall seconds and peak RSS (from /usr/bin/time). */
function timedRun(input: string, out: string, url: string, command: "run" | "estimate" = "run"): { seconds: number; peakMiB: number } {
  const jobPath = join(dir, "job.json");
  writeFileSync(jobPath, JSON.stringify(job));
  const output = command === "run" ? ["-o", out] : [];
  const run = timedCli([command, input, "--job", jobPath, ...output, "--base-url", url, "--rpm", "1e12", "--tps", "1e15", "--concurrency", "64"]);
  if (run.code !== 0) throw new Error(`${command} failed: ${run.stderr}`);
  return { seconds: run.seconds, peakMiB: run.peakMiB };
}

/**
 * Throughput and memory: the CLI itself, an upstream that answers at once,
 * at several input sizes (BENCH_RECORDS) to show memory stays flat.
 */
async function throughput(figures: Record<string, number>, ratios: Ratio[]): Promise<void> {
  const up = await upstream({ minMs: 0, maxMs: 0, rpm: 1e12, tps: 1e15 });
  try {
    const sizes = (process.env["BENCH_RECORDS"] ?? "20000,100000").split(",").map(Number);
    const peaks: number[] = [];
    const rates: number[] = [];
    for (const n of sizes) {
      const input = await writeInput(`throughput-${n}.jsonl`, n, 900);
      const { seconds, peakMiB } = timedRun(input, join(dir, `throughput-${n}.out.jsonl`), up.url);
      peaks.push(peakMiB);
      rates.push(n / seconds);
      figures[`throughput ${n} records (${((n * 960) / 2 ** 20).toFixed(0)} MiB): records/s`] = n / seconds;
      figures[`throughput ${n} records: peak RSS MiB`] = peakMiB;
      rmSync(input, { force: true }); // a 1,000,000-record input is about 1 GB
    }
    ratios.push({ name: "throughput: records/s, largest input", value: rates.at(-1)!, goal: { min: 3000 } });
    ratios.push({ name: "throughput: peak RSS MiB, largest input", value: peaks.at(-1)!, goal: { max: 300 } });
    ratios.push({ name: "throughput: peak RSS largest / smallest input", value: peaks.at(-1)! / peaks[0]! });
  } finally {
    up.stop();
  }
}

/**
 * `estimate`'s memory at several input sizes (BENCH_ESTIMATE_RECORDS), every
 * record distinct (the worst case for remembering duplicates): it must stay
 * flat and under the run's ceiling.
 */
async function estimateMemory(figures: Record<string, number>, ratios: Ratio[]): Promise<void> {
  const sizes = (process.env["BENCH_ESTIMATE_RECORDS"] ?? "100000,1000000").split(",").map(Number);
  const peaks: number[] = [];
  for (const n of sizes) {
    const input = await writeInput(`estimate-${n}.jsonl`, n, 200);
    const { seconds, peakMiB } = timedRun(input, "", "http://127.0.0.1:9", "estimate");
    peaks.push(peakMiB);
    figures[`estimate ${n} records: seconds`] = seconds;
    figures[`estimate ${n} records: peak RSS MiB`] = peakMiB;
    rmSync(input, { force: true });
  }
  ratios.push({ name: "estimate: peak RSS MiB, largest input", value: peaks.at(-1)!, goal: { max: 300 } });
  ratios.push({ name: "estimate: peak RSS largest / smallest input", value: peaks.at(-1)! / peaks[0]! });
}

/** The records of `writeInput` as a Parquet file (100,000-row groups, Snappy), written with hyparquet-writer. */
async function writeParquetInput(name: string, records: number, stateChars: number): Promise<string> {
  const path = join(dir, name);
  const out = createWriteStream(path);
  const bytes = new ByteWriter();
  const schema: SchemaElement[] = [
    { name: "root", num_children: 2 },
    { name: "id", type: "BYTE_ARRAY", converted_type: "UTF8", repetition_type: "REQUIRED" },
    { name: "text", type: "BYTE_ARRAY", converted_type: "UTF8", repetition_type: "REQUIRED" },
  ];
  const writer = new ParquetWriter({ writer: bytes, schema });
  const pad = "x".repeat(Math.max(0, stateChars - 20));
  const ship = async () => {
    if (!out.write(Buffer.from(bytes.getBytes()))) await new Promise<void>((r) => out.once("drain", () => r()));
    bytes.index = 0;
  };
  for (let start = 0; start < records; start += 100_000) {
    const ids: string[] = [];
    const texts: string[] = [];
    for (let i = start; i < Math.min(records, start + 100_000); i++) {
      ids.push(`r${i}`);
      texts.push(`record ${i} ${pad}`);
    }
    writer.write({
      columnData: [
        { name: "id", data: ids },
        { name: "text", data: texts },
      ],
      rowGroupSize: ids.length,
    });
    await ship();
  }
  writer.finish();
  await ship();
  await new Promise<void>((resolve) => out.end(resolve));
  return path;
}

/**
 * Parquet against JSONL, side by side in one run: the same records (BENCH_PARQUET_RECORDS,
 * default 1,000,000) read from a Parquet file and answered into a Parquet output, then
 * from a JSONL file into a JSONL output; records/s and peak RSS of each.
 */
async function parquet(figures: Record<string, number>, ratios: Ratio[]): Promise<void> {
  const up = await upstream({ minMs: 0, maxMs: 0, rpm: 1e12, tps: 1e15 });
  try {
    const n = Number(process.env["BENCH_PARQUET_RECORDS"] ?? 1_000_000);
    const rates: Record<string, number> = {};
    for (const format of ["parquet", "jsonl"] as const) {
      const input = format === "parquet" ? await writeParquetInput(`p-${n}.parquet`, n, 900) : await writeInput(`p-${n}.jsonl`, n, 900);
      const { seconds, peakMiB } = timedRun(input, join(dir, `p-${n}.out.${format}`), up.url);
      rates[format] = n / seconds;
      figures[`${format} in and out, ${n} records: records/s`] = n / seconds;
      figures[`${format} in and out, ${n} records: peak RSS MiB`] = peakMiB;
      if (format === "parquet") ratios.push({ name: "parquet: peak RSS MiB", value: peakMiB, goal: { max: 300 } });
      rmSync(input, { force: true });
    }
    ratios.push({ name: "parquet / jsonl records/s", value: (rates["parquet"] as number) / (rates["jsonl"] as number), goal: { min: 0.8 } });
  } finally {
    up.stop();
  }
}

/** Faults injected per attempt at 6,000 requests/min: the share of the limit achieved, and every record accounted for. */
async function sporadicFaults(seconds: number, figures: Record<string, number>, ratios: Ratio[]): Promise<void> {
  const rpm = 6000;
  const up = await upstream({ minMs: 50, maxMs: 150, rpm, tps: 1e9, p529: 0.05, p500: 0.05, pReset: 0.02 });
  try {
    const records = 100 * seconds;
    const input = await writeInput("faults.jsonl", records, 40);
    const { result } = await run(input, endpointEvaluator({ baseUrl: up.url }), rpm, 1e9, 32);
    const s = await up.stats();
    const r = result.summary.records;
    figures["faults: records answered"] = r.answered;
    figures["faults: records failed"] = r.failed;
    figures["faults: attempts 529 / 500 / reset"] = s.overloaded + s.failed + s.reset;
    figures["faults: pace cuts"] = result.summary.this_run?.pace?.cuts ?? 0;
    figures["faults: mean pace"] = result.summary.this_run?.pace?.mean ?? 1;
    ratios.push({ name: "faults (5% 529, 5% 500, 2% reset): answered requests/s / limit", value: acceptedPerSecond(s) / (rpm / 60), goal: { min: 0.8 } });
    ratios.push({ name: "faults: records answered or in the errors file / records", value: (r.answered + r.failed) / records, goal: { min: 1, max: 1 } });
  } finally {
    up.stop();
  }
}

/** A 10-second storm of 529s in the middle of a run: what was sent during it, and how fast the run got back. */
async function storm(figures: Record<string, number>, ratios: Ratio[]): Promise<void> {
  const rpm = 6000;
  const perSecond = rpm / 60;
  const up = await upstream({ minMs: 20, maxMs: 60, rpm, tps: 1e9 });
  try {
    const input = await writeInput("storm.jsonl", perSecond * 45, 40);
    const running = run(input, endpointEvaluator({ baseUrl: up.url }), rpm, 1e9, 32);
    await new Promise((r) => setTimeout(r, 10_000));
    const stormStart = (await up.stats()).attemptsPerSecond.length;
    await up.storm(10_000);
    await running;
    const s = await up.stats();
    // Whole seconds after the storm began (the first partial second is dropped).
    const during = s.attemptsPerSecond.slice(stormStart, stormStart + 10).reduce((a, b) => a + b, 0);
    const after = s.acceptedPerSecond.slice(stormStart + 10);
    const back = after.findIndex((n) => n >= 0.9 * perSecond);
    figures["storm: attempts during the 10 s storm"] = during;
    figures["storm: seconds after it until 90% of the limit"] = back < 0 ? Infinity : back + 1;
    ratios.push({ name: "storm: attempts during it / what the limit allows", value: during / (perSecond * 10), goal: { max: 0.1 } });
    ratios.push({ name: "storm: seconds until back above 90% of the limit", value: back < 0 ? Infinity : back + 1, goal: { max: 10 } });
  } finally {
    up.stop();
  }
}

/** An upstream that silently allows half the configured limit: what the pace finds. */
async function halfLimit(seconds: number, figures: Record<string, number>, ratios: Ratio[]): Promise<void> {
  const rpm = 6000;
  const up = await upstream({ minMs: 50, maxMs: 150, rpm: rpm / 2, rps: rpm / 120, tps: 1e9, silent: true });
  try {
    const records = 50 * seconds;
    const input = await writeInput("half.jsonl", records, 40);
    const { result } = await run(input, endpointEvaluator({ baseUrl: up.url }), rpm, 1e9, 32);
    const s = await up.stats();
    figures["half: records answered"] = result.summary.records.answered;
    figures["half: 429s"] = s.rejected;
    figures["half: mean pace"] = result.summary.this_run?.pace?.mean ?? 1;
    ratios.push({ name: "half-limit upstream: answered requests/s / configured limit", value: acceptedPerSecond(s) / (rpm / 60), goal: { min: 0.45 } });
    ratios.push({ name: "half-limit upstream: rejected / sent", value: s.rejected / (s.accepted + s.rejected), goal: { max: 0.05 } });
  } finally {
    up.stop();
  }
}

/** Bottleneck's own scheduling ceiling: trivial jobs through a bare limiter. */
async function bottleneckCeiling(figures: Record<string, number>): Promise<void> {
  const bare = new Bottleneck({ maxConcurrent: 64 });
  const jobs = Number(process.env["BENCH_BOTTLENECK_JOBS"] ?? 2000);
  const started = Date.now();
  await Promise.all(Array.from({ length: jobs }, () => bare.schedule(() => new Promise<void>((r) => setImmediate(r)))));
  figures["Bottleneck alone (maxConcurrent 64): trivial jobs/s"] = jobs / ((Date.now() - started) / 1000);
  await bare.stop();
  const leased = new RunLimiter({ requestsPerMinute: 1e12, tokensPerSecond: 1e15 });
  const many = jobs * 20;
  const t0 = Date.now();
  await Promise.all(Array.from({ length: many }, () => leased.schedule(1000, () => new Promise<void>((r) => setImmediate(r)))));
  figures["RunLimiter (leases from Bottleneck): trivial jobs/s"] = many / ((Date.now() - t0) / 1000);
  figures["RunLimiter: Bottleneck jobs for those"] = leased.leases;
  await leased.stop();
}

const benchmark: Benchmark = {
  name: "runner",
  description: "batch runner: at the request limit, at the token limit, throughput and memory, estimate accuracy",
  async run() {
    const figures: Record<string, number> = {};
    const ratios: Ratio[] = [];
    // BENCH_PARTS picks parts (limits,faults,storm,half,throughput,parquet,bottleneck,estimate-memory,estimate), e.g. for the 1,000,000-record run alone.
    const parts = new Set((process.env["BENCH_PARTS"] ?? "limits,faults,storm,half,throughput,parquet,bottleneck,estimate-memory,estimate").split(","));
    const seconds = Number(process.env["BENCH_LIMIT_SECONDS"] ?? 60);
    if (parts.has("limits")) {
      await atLimit("request-bound", 100 * seconds, 40, 6000, 1e9, figures, ratios);
      await atLimit("token-bound", 100 * seconds, 4000, 1e9, 100_000, figures, ratios);
    }

    if (parts.has("faults")) await sporadicFaults(seconds, figures, ratios);
    if (parts.has("storm")) await storm(figures, ratios);
    if (parts.has("half")) await halfLimit(seconds, figures, ratios);
    if (parts.has("throughput")) await throughput(figures, ratios);
    if (parts.has("parquet")) await parquet(figures, ratios);
    if (parts.has("bottleneck")) await bottleneckCeiling(figures);
    if (parts.has("estimate-memory")) await estimateMemory(figures, ratios);
    if (!parts.has("estimate")) return { figures, ratios };

    // Estimate accuracy with the embedded model (exact tokenizer) on the bundled example job.
    const engine = await LlamaEngine.load({ modelPath: generatedModel(TINY), contextSize: 8192 });
    const local = new LocalEvaluator(engine, { id: "tiny-1.0.0", temperature: 1, template: detectTemplate(engine.chatTemplate), metadata: [] });
    const router = new ModelRouter([{ names: ["default"], evaluator: local }]);
    const triage = loadJob("jobs/support-triage.json");
    const estimate = await estimateJob({
      job: triage,
      source: openLocalSource("examples/data/tickets.jsonl", JSONL),
      evaluator: router,
      price: 0.042,
      rpm: 1200,
      tps: 250_000,
    });
    const out = join(dir, "estimate.jsonl");
    const real = await runJob({
      job: triage,
      source: openLocalSource("examples/data/tickets.jsonl", JSONL),
      evaluator: router,
      journalPath: `${out}.journal`,
      answers: { target: localTarget(out), format: outputFormat(out) },
      errors: localTarget(`${out}.errors.jsonl`),
      limiter: new RunLimiter({ requestsPerMinute: 1200, tokensPerSecond: 250_000 }),
      concurrency: 4,
      pricePerMillion: 0.042,
      logger,
    });
    await router.close();
    figures["estimate: input tokens estimated"] = estimate.inputTokens;
    figures["estimate: input tokens used"] = real.summary.tokens.input;
    ratios.push({ name: "estimate / used (embedded model)", value: estimate.inputTokens / real.summary.tokens.input, goal: { min: 0.99, max: 1.01 } });
    return { figures, ratios };
  },
};
export default benchmark;
