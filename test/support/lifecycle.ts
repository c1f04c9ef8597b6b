/** What the run lifecycle tests share: a run's request in process (limits out of the way), and whether a tmpfs can be mounted. */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Evaluator } from "../../src/evaluator/evaluator.js";
import { createLogger } from "../../src/logging/logger.js";
import type { RunInvocation } from "../../src/runner/run.js";

const silent = createLogger({ level: "silent" });

/** A `run` of `input` with `job` into `output` (its --summary-json beside it), answered by `evaluator`; `over` replaces any setting. */
export function lifecycleRequest(input: string, job: string, output: string, evaluator: Evaluator, over: Partial<RunInvocation> = {}): RunInvocation {
  return {
    settings: { input, jobFile: job, model: "default", apiKeyEnv: "TYPED_EVAL_API_KEY", timeoutSeconds: 5, seed: 1, concurrency: 4 },
    places: { output, summaryJson: `${output}.summary.json` },
    shaping: { forceCalibration: false, auditSeed: 1, formats: {} },
    rpm: 1e9,
    tps: 1e12,
    maxRetries: 0,
    maxFailuresInARow: 50,
    maxErrorRate: 0,
    graceMs: 1000,
    journalFlushMs: 1000,
    logger: silent,
    openModel: async () => evaluator,
    ...over,
  };
}

/** Whether this process may mount a tmpfs (root on Linux): the real full-disk cases run only then. */
export function canMountTmpfs(): boolean {
  if (process.platform !== "linux" || process.getuid?.() !== 0) return false;
  const probe = mkdtempSync(join(tmpdir(), "te-mount-"));
  const ok = spawnSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", probe]).status === 0;
  if (ok) spawnSync("umount", [probe]);
  return ok;
}

/**
 * A run's folder under `root` with `records` (ids s0, s1, ...) and a
 * one-question job; `env` (a store's variables) and a staging folder set in
 * this process, and the folder made the working directory (an S3 journal's
 * local copy goes there), until `restore`.
 */
export function runFolder(root: string, name: string, records: number, env: Record<string, string>) {
  const cwd = join(root, name);
  mkdirSync(cwd, { recursive: true });
  const input = join(cwd, "in.jsonl");
  writeFileSync(input, Array.from({ length: records }, (_, i) => `${JSON.stringify({ id: `s${i}`, text: `record ${i}` })}\n`).join(""));
  const job = join(cwd, "job.json");
  writeFileSync(job, JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul" } } }));
  const staging = join(cwd, "staging");
  const saved = { ...process.env };
  const home = process.cwd();
  Object.assign(process.env, env, { TYPED_EVAL_STAGING: staging });
  process.chdir(cwd);
  const restore = () => {
    process.env = saved;
    process.chdir(home);
  };
  return { cwd, input, job, staging, restore };
}
