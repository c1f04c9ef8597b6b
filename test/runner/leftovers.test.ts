/**
 * What a run leaves behind, and what it spends without a word, in process on
 * real files: an earlier run's review file beside answers that replaced its
 * own; the journal of stdin-to-stdout runs across nights; a journal that
 * cannot be read; states that say nothing ("", "NaN", a bare number).
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runLifecycle } from "../../src/runner/run.js";
import { FakeEvaluator } from "../support/fake-evaluator.js";
import { lifecycleRequest } from "../support/lifecycle.js";

const dir = mkdtempSync(join(tmpdir(), "te-leftovers-"));

function writeJob(name: string, extra: Record<string, unknown> = {}): string {
  const path = join(dir, `${name}.job.json`);
  writeFileSync(path, JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul" } }, ...extra }));
  return path;
}

function writeInput(name: string, texts: readonly unknown[]): string {
  const path = join(dir, `${name}.jsonl`);
  writeFileSync(path, `${texts.map((text, i) => JSON.stringify({ id: `r${i}`, text })).join("\n")}\n`);
  return path;
}

describe("an earlier run's review file", () => {
  it("a rerun that routes nothing to review removes the review file the earlier run left beside the answers it replaces", async () => {
    const input = writeInput(
      "review",
      Array.from({ length: 10 }, (_, i) => `text ${i}`),
    );
    const job = writeJob("review");
    const output = join(dir, "review.out.jsonl");
    const review = `${output}.review.jsonl`;
    // p(yes) 0.5 on every row: below a review threshold of 0.9, every row is routed.
    const first = await runLifecycle(
      lifecycleRequest(input, job, output, new FakeEvaluator(), { shaping: { forceCalibration: false, auditSeed: 1, csvBom: false, reviewBelow: 0.9 } }),
    );
    expect(first.verdict).toBe("done");
    expect(readFileSync(review, "utf8").trim().split("\n")).toHaveLength(10);
    // The rerun, calibrated on the way out (batch) and without --review-below: the old review rows were for uncalibrated answers.
    const second = await runLifecycle(
      lifecycleRequest(input, job, output, new FakeEvaluator(), {
        shaping: { forceCalibration: true, auditSeed: 1, csvBom: false, calibration: "batch" },
      }),
    );
    expect(second.verdict, second.reason).toBe("done");
    expect(existsSync(review)).toBe(false);
    expect(second.summary.review).toBeUndefined();
    expect(readFileSync(output, "utf8").trim().split("\n")).toHaveLength(10);
  });

  it("is never another place of the run: --errors named as the review file is written, not removed", async () => {
    const input = writeInput("review-errors", ["a", "b"]);
    const job = writeJob("review-errors");
    const output = join(dir, "review-errors.out.jsonl");
    const errors = `${output}.review.jsonl`;
    const end = await runLifecycle(lifecycleRequest(input, job, output, new FakeEvaluator(), { places: { output, errors } }));
    expect(end.verdict).toBe("done");
    expect(existsSync(errors)).toBe(true);
  });
});
