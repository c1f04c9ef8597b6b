/**
 * The batch runner against a rate-limited upstream (its own process), with
 * limits scaled up so each regime runs in about a minute:
 * - at the request limit: 6,000 requests/min, small states;
 * - at the token limit: 100,000 tokens/s, states of about 1,000 tokens;
 * then throughput and peak memory with an upstream that answers at once,
 * and the estimate against the tokens really used (embedded model).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import Bottleneck from "bottleneck";
import { createWriteStream, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LlamaEngine } from "../src/engines/llama.js";
import { LocalEvaluator } from "../src/evaluator/local.js";
import { detectTemplate } from "../src/evaluator/prompt.js";
import { RemoteEvaluator } from "../src/evaluator/remote.js";
import { ModelRouter } from "../src/evaluator/router.js";
import type { Evaluator } from "../src/evaluator/evaluator.js";
import { createLogger } from "../src/logging/logger.js";
import { estimateJob } from "../src/runner/estimate.js";
import { loadJob, parseJob, type Job } from "../src/runner/job.js";
import { RunLimiter } from "../src/runner/limiter.js";
import { localTarget } from "../src/runner/outputs.js";
import { runJob } from "../src/runner/run.js";
import { openLocalSource } from "../src/runner/sources.js";
import { generatedModel, TINY } from "../test/support/models.js";
import type { Benchmark, Ratio } from "./harness.js";

const dir = mkdtempSync(join(tmpdir(), "te-bench-runner-"));
const logger = createLogger({ level: "silent" });
const job: Job = parseJob(
  { state: "text", id: "id", questions: { ok: { type: "noul" }, pick: { type: "choice", criteria: { a: null, b: null } } } },
  "bench-job",
);

async function upstream(minMs: number, maxMs: number, rpm: number, tps: number): Promise<{ url: string; stats(): Promise<{ accepted: number; rejected: number; first: number; last: number }>; stop(): void }> {
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", join(import.meta.dirname, "upstream.ts"), String(minMs), String(maxMs), String(rpm), String(tps)], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const port = await new Promise<string>((resolve) => child.stdout!.once("data", (d: Buffer) => resolve(d.toString().trim())));
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    stats: async () => (await (await fetch(`${url}/stats`)).json()) as { accepted: number; rejected: number; first: number; last: number },
    stop: () => child.kill(),
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
    source: openLocalSource(input, "jsonl"),
    evaluator,
    journalPath: `${out}.journal`,
    answers: { target: localTarget(out), format: "jsonl" },
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
  const up = await upstream(50, 150, rpm, tps);
  try {
    const input = await writeInput(`${label}.jsonl`, records, stateChars);
    const remote = new RemoteEvaluator({ baseUrl: up.url, retry: { maxRetries: 0 } });
    const { result } = await run(input, remote, rpm, tps, 32);
    const s = await up.stats();
    const span = (s.last - s.first) / 1000;
    const perSecond = (s.accepted - 1) / span;
    const tokensPerRequest = result.summary.tokens.input / result.summary.records.answered;
    const limitPerSecond = Math.min(rpm / 60, tps / tokensPerRequest);
    figures[`${label}: records`] = records;
    figures[`${label}: seconds`] = span;
    figures[`${label}: requests/s sustained`] = perSecond;
    figures[`${label}: requests/s the limits allow`] = limitPerSecond;
    figures[`${label}: tokens per request`] = tokensPerRequest;
    figures[`${label}: rejected (429)`] = s.rejected;
    ratios.push({ name: `${label}: sustained / limit`, value: perSecond / limitPerSecond, goal: { min: 0.97 } });
    ratios.push({ name: `${label}: rejected / sent`, value: s.rejected / (s.accepted + s.rejected), goal: { max: 0.005 } });
  } finally {
    up.stop();
  }
}

/**
 * Throughput and memory: the CLI itself (its peak RSS from /usr/bin/time), an
 * upstream that answers at once, limits far away, at several input sizes
 * (BENCH_RECORDS) to show memory stays flat.
 */
async function throughput(figures: Record<string, number>, ratios: Ratio[]): Promise<void> {
  const up = await upstream(0, 0, 1e12, 1e15);
  try {
    const jobPath = join(dir, "job.json");
    writeFileSync(jobPath, JSON.stringify(job));
    const sizes = (process.env["BENCH_RECORDS"] ?? "20000,100000").split(",").map(Number);
    const peaks: number[] = [];
    for (const n of sizes) {
      const input = await writeInput(`throughput-${n}.jsonl`, n, 900);
      const out = join(dir, `throughput-${n}.out.jsonl`);
      const started = Date.now();
      const time = spawnSync(
        "/usr/bin/time",
        ["-f", "%M", process.execPath, join(import.meta.dirname, "../bin/typed-eval.js"), "run", input, "--job", jobPath, "-o", out, "--base-url", up.url, "--rpm", "1e12", "--tps", "1e15", "--concurrency", "64"],
        { encoding: "utf8", env: { ...process.env, TYPED_EVAL_LOG_LEVEL: "silent", TYPED_EVAL_API_KEY: "k" }, maxBuffer: 1 << 26 },
      );
      const seconds = (Date.now() - started) / 1000;
      if (time.status !== 0) throw new Error(`run failed: ${time.stderr}`);
      const peakMiB = Number(time.stderr.trim().split("\n").at(-1)) / 1024;
      peaks.push(peakMiB);
      figures[`throughput ${n} records (${((n * 960) / 2 ** 20).toFixed(0)} MiB): records/s`] = n / seconds;
      figures[`throughput ${n} records: peak RSS MiB`] = peakMiB;
      rmSync(input, { force: true }); // a 1,000,000-record input is about 1 GB
    }
    ratios.push({ name: "throughput: peak RSS MiB, largest input", value: peaks.at(-1)!, goal: { max: 300 } });
    ratios.push({ name: "throughput: peak RSS largest / smallest input", value: peaks.at(-1)! / peaks[0]! });
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
}

const benchmark: Benchmark = {
  name: "runner",
  description: "batch runner: at the request limit, at the token limit, throughput and memory, estimate accuracy",
  async run() {
    const figures: Record<string, number> = {};
    const ratios: Ratio[] = [];
    // BENCH_PARTS picks parts (limits,throughput,bottleneck,estimate), e.g. for the 1,000,000-record run alone.
    const parts = new Set((process.env["BENCH_PARTS"] ?? "limits,throughput,bottleneck,estimate").split(","));
    const seconds = Number(process.env["BENCH_LIMIT_SECONDS"] ?? 60);
    if (parts.has("limits")) {
      await atLimit("request-bound", 100 * seconds, 40, 6000, 1e9, figures, ratios);
      await atLimit("token-bound", 100 * seconds, 4000, 1e9, 100_000, figures, ratios);
    }

    if (parts.has("throughput")) await throughput(figures, ratios);
    if (parts.has("bottleneck")) await bottleneckCeiling(figures);
    if (!parts.has("estimate")) return { figures, ratios };

    // Estimate accuracy with the embedded model (exact tokenizer) on the bundled example job.
    const engine = await LlamaEngine.load({ modelPath: generatedModel(TINY), contextSize: 8192 });
    const local = new LocalEvaluator(engine, { id: "tiny-1.0.0", temperature: 1, template: detectTemplate(engine.chatTemplate), metadata: [] });
    const router = new ModelRouter([{ names: ["default"], evaluator: local }]);
    const triage = loadJob("jobs/support-triage.json");
    const estimate = await estimateJob({ job: triage, source: openLocalSource("examples/data/tickets.jsonl", "jsonl"), evaluator: router, price: 0.042, rpm: 1200, tps: 250_000 });
    const out = join(dir, "estimate.jsonl");
    const real = await runJob({
      job: triage,
      source: openLocalSource("examples/data/tickets.jsonl", "jsonl"),
      evaluator: router,
      journalPath: `${out}.journal`,
      answers: { target: localTarget(out), format: "jsonl" },
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
