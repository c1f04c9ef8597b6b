/**
 * The output phase alone: `writeOutputs` of one journal, timed, for a side-by-side of two builds.
 * `node bench/write-outputs.ts <dist root> <journal> <job.json> <out>` (run each under /usr/bin/time -f %M).
 */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [root, journal, jobFile, out] = process.argv.slice(2) as [string, string, string, string];
const outputs = (await import(pathToFileURL(join(resolve(root), "dist/runner/output/outputs.js")).href)) as typeof import("../src/runner/output/outputs.js");
const jobs = (await import(pathToFileURL(join(resolve(root), "dist/records/job.js")).href)) as typeof import("../src/records/job.js");
const job = jobs.parseJob(JSON.parse(readFileSync(jobFile, "utf8")), jobFile);
const started = performance.now();
const counts = await outputs.writeOutputs(journal, job, { target: outputs.localTarget(out), format: "jsonl" }, outputs.localTarget(`${out}.errors`));
const seconds = (performance.now() - started) / 1000;
console.log(JSON.stringify({ root, answered: counts.answered, seconds: Number(seconds.toFixed(2)), rows_per_second: Math.round(counts.answered / seconds) }));
