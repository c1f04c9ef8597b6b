/**
 * The output phase of a rerun: every record of an input already answered in
 * its journal, so the run reads the input, finds each record's entry and
 * writes the outputs, asking nothing. Timed, for a side-by-side of two builds.
 * `node --import tsx bench/write-outputs.ts <dist root> <input.jsonl> <journal> <job.json> <out>` (each under /usr/bin/time -f %M).
 */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [root, input, journal, jobFile, out] = process.argv.slice(2) as [string, string, string, string, string];
const load = async <T>(path: string) => (await import(pathToFileURL(join(resolve(root), "dist", path)).href)) as T;
const { runJob } = await load<typeof import("../src/runner/run.js")>("runner/run.js");
const { localTarget } = await load<typeof import("../src/runner/output/outputs.js")>("runner/output/outputs.js");
const { parseJob } = await load<typeof import("../src/records/job.js")>("records/job.js");
const { openLocalSource } = await load<typeof import("../src/records/sources.js")>("records/sources.js");
const { outputFormat } = await load<typeof import("../src/records/formats.js")>("records/formats.js");
const { JSONL } = await load<typeof import("../src/records/jsonl.js")>("records/jsonl.js");
const { RunLimiter } = await load<typeof import("../src/runner/send/limiter.js")>("runner/send/limiter.js");
const { createLogger } = await load<typeof import("../src/logging/logger.js")>("logging/logger.js");
const job = parseJob(JSON.parse(readFileSync(jobFile, "utf8")), jobFile);
// Every record is in the journal: a request would be a bug in the bench's setup.
const evaluator = {
  identity: () => "bench",
  estimateInputTokens: () => 1,
  exactTokenCounts: () => true,
  evaluate: () => Promise.reject(new Error("the journal should have answered every record")),
  models: () => [],
  close: async () => undefined,
};
const started = performance.now();
const result = await runJob({
  job,
  source: openLocalSource(input, JSONL),
  evaluator,
  journalPath: journal,
  answers: { target: localTarget(out), format: outputFormat(out) },
  errors: localTarget(`${out}.errors`),
  limiter: new RunLimiter({ requestsPerMinute: 1e12, tokensPerSecond: 1e15 }),
  concurrency: 64,
  pricePerMillion: 0,
  logger: createLogger({ level: "silent" }),
});
const seconds = (performance.now() - started) / 1000;
const rows = result.summary.records.answered;
console.log(
  JSON.stringify({ root, verdict: result.verdict, answered: rows, seconds: Number(seconds.toFixed(2)), rows_per_second: Math.round(rows / seconds) }),
);
