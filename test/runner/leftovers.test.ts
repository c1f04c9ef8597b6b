/**
 * What a run leaves behind, and what it spends without a word, in process on
 * real files: an earlier run's review file beside answers that replaced its
 * own; the journal of stdin-to-stdout runs across nights; a journal that
 * cannot be read; states that say nothing ("", "NaN", a bare number).
 */
import { spawnSync } from "node:child_process";
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { Writable } from "node:stream";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/logging/logger.js";
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
      lifecycleRequest(input, job, output, new FakeEvaluator(), { shaping: { forceCalibration: false, auditSeed: 1, formats: {}, reviewBelow: 0.9 } }),
    );
    expect(first.verdict).toBe("done");
    expect(readFileSync(review, "utf8").trim().split("\n")).toHaveLength(10);
    // The rerun, calibrated on the way out (batch) and without --review-below: the old review rows were for uncalibrated answers.
    const second = await runLifecycle(
      lifecycleRequest(input, job, output, new FakeEvaluator(), {
        shaping: { forceCalibration: true, auditSeed: 1, formats: {}, calibration: "batch" },
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

describe("a journal that cannot be read", () => {
  /** A logger whose warnings the test reads. */
  function warnings() {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk, _encoding, done) {
        lines.push(String(chunk));
        done();
      },
    });
    return { logger: createLogger({ destination, level: "warn" }), lines: () => lines.map((l) => (JSON.parse(l) as { msg: string }).msg) };
  }

  it.each([
    ["a line of garbage among the entries, and zeros at its end (a disk that lost data it had sized)", "some"],
    ["zeros from start to end (no newline left: it was cut to nothing in silence)", "all"],
  ])("%s: set aside with a loud warning naming the copy kept, and only the lost records asked again", async (_what, how) => {
    const name = `garbage-${how}`;
    const input = writeInput(
      name,
      Array.from({ length: 10 }, (_, i) => `text ${i}`),
    );
    const job = writeJob(name);
    const output = join(dir, `${name}.out.jsonl`);
    expect((await runLifecycle(lifecycleRequest(input, job, output, new FakeEvaluator()))).verdict).toBe("done");
    const journal = `${output}.journal`;
    const good = readFileSync(journal, "utf8");
    let broken: string;
    if (how === "some") {
      // The answer of r3 overwritten by garbage of the same length; zeros appended.
      const lines = good.split("\n");
      const at = lines.findIndex((l) => l.includes('"id":"r3"'));
      lines[at] = "\u0000".repeat(8) + "x".repeat((lines[at] as string).length - 8);
      broken = `${lines.join("\n")}${"\u0000".repeat(512)}`;
    } else {
      broken = "\u0000".repeat(good.length);
    }
    writeFileSync(journal, broken);
    const { logger, lines } = warnings();
    const rerun = new FakeEvaluator();
    const end = await runLifecycle(lifecycleRequest(input, job, output, rerun, { logger }));
    expect(end.verdict, end.reason).toBe("done");
    const asked = rerun.calls.map((c) => String(c.request.state));
    expect(asked).toEqual(how === "some" ? ["text 3"] : Array.from({ length: 10 }, (_, i) => `text ${i}`));
    const warned = lines().find((m) => m.includes("no run wrote"));
    expect(warned, lines().join("\n")).toMatch(
      /^the journal .*\.journal held \d+ lines? \(\d+ bytes\) that no run wrote \(a disk or file system that failed, or another program\): the records they held, if any, are asked and paid again; the journal as it was is kept at .*\.journal\.unreadable-/,
    );
    const keptAt = /kept at (\S+)$/.exec(warned as string)?.[1] as string;
    expect(readFileSync(keptAt, "utf8")).toBe(broken);
    // The journal is readable again: a third run asks nothing and says nothing.
    const quiet = warnings();
    const third = new FakeEvaluator();
    expect((await runLifecycle(lifecycleRequest(input, job, output, third, { logger: quiet.logger }))).verdict).toBe("done");
    expect(third.calls).toHaveLength(0);
    expect(quiet.lines().filter((m) => m.includes("no run wrote"))).toEqual([]);
  });

  it("a torn last line, as a crash leaves it, is repaired without a word", async () => {
    const input = writeInput("torn", ["a", "b", "c"]);
    const job = writeJob("torn");
    const output = join(dir, "torn.out.jsonl");
    expect((await runLifecycle(lifecycleRequest(input, job, output, new FakeEvaluator()))).verdict).toBe("done");
    appendFileSync(`${output}.journal`, '{"k":"answer","seq":9,"line":');
    const { logger, lines } = warnings();
    const rerun = new FakeEvaluator();
    expect((await runLifecycle(lifecycleRequest(input, job, output, rerun, { logger }))).verdict).toBe("done");
    expect(rerun.calls).toHaveLength(0);
    expect(lines().filter((m) => m.includes("no run wrote"))).toEqual([]);
    expect(readdirSync(dir).filter((f) => f.startsWith("torn.out.jsonl.journal.unreadable"))).toEqual([]);
  });
});

describe("states that say nothing", () => {
  it('"", blank and a missing value\'s mark ("NaN", "None") fail as their records, never sent; bare numbers are sent with a warning at the check', async () => {
    const input = writeInput("states", ["a ticket", "", "   ", "NaN", "None", 42, "3.5", "another ticket"]);
    const job = writeJob("states");
    const output = join(dir, "states.out.jsonl");
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk, _encoding, done) {
        lines.push((JSON.parse(String(chunk)) as { msg: string }).msg);
        done();
      },
    });
    const evaluator = new FakeEvaluator();
    const end = await runLifecycle(lifecycleRequest(input, job, output, evaluator, { logger: createLogger({ destination, level: "warn" }) }));
    // Before: all 8 sent and paid, without a word.
    expect(evaluator.calls.map((c) => c.request.state)).toEqual(["a ticket", "42", "3.5", "another ticket"]);
    expect(end.verdict).toBe("failures");
    const errors = readFileSync(`${output}.errors.jsonl`, "utf8")
      .trim()
      .split("\n")
      .map((l) => (JSON.parse(l) as { message: string }).message);
    expect(errors).toEqual([
      'line 2: state field "text" is empty: nothing to label, not sent',
      'line 3: state field "text" is blank: nothing to label, not sent',
      'line 4: state field "text" is "NaN", the mark of a missing value: nothing to label, not sent',
      'line 5: state field "text" is "None", the mark of a missing value: nothing to label, not sent',
    ]);
    expect(lines).toContain(
      'state: 2 of the first 8 records\' "text" are bare numbers (such as 42): they are sent as text and paid for; check that "text" is the field the job means',
    );
  });
});
