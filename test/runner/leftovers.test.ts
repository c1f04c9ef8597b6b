/**
 * What a run leaves behind, and what it spends without a word, in process on
 * real files: an earlier run's review file beside answers that replaced its
 * own; the journal of stdin-to-stdout runs across nights; a journal that
 * cannot be read; states that say nothing ("", "NaN", a bare number).
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runLifecycle } from "../../src/runner/run.js";
import { FakeEvaluator } from "../support/fake-evaluator.js";
import { lifecycleRequest } from "../support/lifecycle.js";
import { BIN } from "../support/cli.js";
import { generatedModel, TINY } from "../support/models.js";

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

describe("stdin to stdout across nights", () => {
  const cwd = join(dir, "nightly");
  mkdirSync(cwd);
  const job = writeJob("nightly");
  const summary = join(dir, "nightly.summary.json");
  /** `cat night.jsonl | typed-eval run - --job ... > answers.jsonl`, as a process: the summary it wrote, and its exit code. */
  function night(texts: readonly unknown[]) {
    const stdin = `${texts.map((text, i) => JSON.stringify({ id: `r${i}`, text })).join("\n")}\n`;
    const r = spawnSync(process.execPath, [BIN, "run", "-", "--job", job, "--summary-json", summary], {
      cwd,
      input: stdin,
      encoding: "utf8",
      env: { ...process.env, TYPED_EVAL_MODEL_PATH: generatedModel(TINY), TYPED_EVAL_LOG_LEVEL: "warn", TYPED_EVAL_BASE_URL: "" },
    });
    const written = JSON.parse(readFileSync(summary, "utf8")) as {
      verdict: string;
      journal?: string;
      records: { read: number; answered: number; resumed: number };
      requests: { sent: number };
      set_aside?: { not_in_input: number };
    };
    return { code: r.status, stdout: r.stdout, stderr: r.stderr, summary: written };
  }
  const journals = () => (existsSync(join(cwd, ".typed-eval")) ? readdirSync(join(cwd, ".typed-eval")).filter((f) => f.startsWith("journal-")) : []);

  it("each night's stream has its own journal, kept only until its run is done: night 2 reports nothing of night 1 and pays its own", () => {
    const first = night(["monday 1", "monday 2", "monday 3"]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout.trim().split("\n")).toHaveLength(3);
    expect(first.summary).toMatchObject({ verdict: "done", records: { read: 3, answered: 3, resumed: 0 }, requests: { sent: 3 } });
    expect(first.summary.journal).toBeUndefined();
    // Done: nothing later resumes it, so nothing piles up in .typed-eval/.
    expect(journals()).toEqual([]);
    const second = night(["tuesday 1", "tuesday 2"]);
    expect(second.code, second.stderr).toBe(0);
    // Before: 5 requests in the totals, "3 for records no longer in the input", and one journal growing for good.
    expect(second.summary).toMatchObject({ verdict: "done", records: { read: 2, answered: 2, resumed: 0 }, requests: { sent: 2 } });
    expect(second.summary.set_aside?.not_in_input ?? 0).toBe(0);
    expect(journals()).toEqual([]);
  }, 60_000);

  it("a night that does not finish keeps its journal, named in its line; the same stream again resumes it, another stream does not", () => {
    // One record without its state field fails (exit 1, failures): the journal keeps the answered ones.
    const texts = ["wednesday 1", "wednesday 2", null, "wednesday 4"];
    const first = night(texts);
    expect(first.code, first.stderr).toBe(1);
    expect(journals()).toHaveLength(1);
    expect(first.summary.journal).toBe(join(".typed-eval", journals()[0] as string));
    const again = night(texts);
    expect(again.code).toBe(1);
    expect(again.summary.records).toMatchObject({ read: 4, answered: 3, resumed: 3 });
    expect(journals()).toHaveLength(1);
    // Thursday's stream is not Wednesday's: its own journal, nothing resumed from Wednesday's.
    const thursday = night(["thursday 1", "thursday 2"]);
    expect(thursday.code).toBe(0);
    expect(thursday.summary).toMatchObject({ records: { read: 2, answered: 2, resumed: 0 }, requests: { sent: 2 } });
    expect(journals()).toHaveLength(1);
  }, 60_000);
});
