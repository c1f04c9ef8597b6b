/**
 * Jobs checked before they pay, on the generated tiny model: a question with
 * one possible answer refused in a job file; `--context-size` below
 * llama.cpp's smallest context refused, not raised; a window too small for
 * the fixed part of the prompt, or for a record of the first window,
 * refused at the check with the size that would do; a later record that
 * does not fit its own error naming `--context-size`; a kept field that no
 * record of the first window has, warned about once, by name.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/logging/logger.js";
import { readAhead, warnMissingKeep, FIRST_WINDOW } from "../../src/runner/check.js";
import { parseJob } from "../../src/records/job.js";
import type { Source, SourceItem } from "../../src/records/source.js";
import { runInProcess } from "../support/cli.js";
import { generatedModel, TINY } from "../support/models.js";

const dir = mkdtempSync(join(tmpdir(), "te-job-checks-"));
const env = { TYPED_EVAL_MODEL_PATH: generatedModel(TINY), TYPED_EVAL_BASE_URL: undefined };
const run = (argv: string[]) => runInProcess(argv, env, { cwd: dir });

/** A one-question job on `text` (short, so the fixed part of the prompt is small). */
function job(name: string, extra: Record<string, unknown> = {}): string {
  const path = join(dir, `${name}.json`);
  writeFileSync(path, JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul", instructions: "Fine?" } }, ...extra }));
  return path;
}

function input(name: string, texts: string[]): string {
  const path = join(dir, `${name}.jsonl`);
  writeFileSync(path, `${texts.map((text, i) => JSON.stringify({ id: `r${i + 1}`, text, customer: { tier: "gold" } })).join("\n")}\n`);
  return path;
}

describe("a job file", () => {
  it("refuses a question with fewer than two possible answers (each would be p=1, paid for nothing)", async () => {
    const oneLevel = {
      ok: { type: "score", instructions: "How urgent?", criteria: ["only"] },
      pick: { type: "choice", instructions: "Which?", criteria: { a: null } },
    };
    expect(() => parseJob({ questions: oneLevel }, "j.json")).toThrow(/questions\.ok: 1 possible answer: every answer would be certain \(p=1\)/);
    expect(() => parseJob({ questions: oneLevel }, "j.json")).toThrow(/questions\.pick: 1 possible answer/);
    const two = { ok: { type: "score", instructions: "How urgent?", criteria: ["low", "high"] } };
    expect(parseJob({ questions: two }, "j.json").questions["ok"]).toBeDefined();
    const path = join(dir, "one-level.json");
    writeFileSync(path, JSON.stringify({ state: "text", questions: oneLevel }));
    const data = input("one-level", ["a"]);
    for (const command of ["run", "estimate"]) {
      const r = await run([command, data, "--job", path, ...(command === "run" ? ["-o", join(dir, "one-level.out.jsonl")] : [])]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/questions\.ok: 1 possible answer/);
    }
    expect(existsSync(join(dir, "one-level.out.jsonl"))).toBe(false);
  });
});

describe("--context-size, checked before the first request", () => {
  it("a value below llama.cpp's smallest context (256) is refused, not raised", async () => {
    const r = await run(["run", input("small", ["a"]), "--job", job("small"), "--context-size", "64"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--context-size takes a whole number from 256 to/);
  });

  it("a window too small for the fixed part of the prompt, or for a record of the first window: exit 2 naming the size that would do, nothing paid", async () => {
    const long = "x".repeat(3000);
    const fixed = await run(["run", input("fixed", ["a"]), "--job", job("fixed"), "-o", join(dir, "fixed.out.jsonl"), "--context-size", "256"]);
    expect(fixed.code, fixed.stderr).toBe(2);
    expect(fixed.stderr).toMatch(
      /--context-size: the context window is 256 tokens, but the fixed part of the prompt .* needs \d+: pass --context-size \d+ or more/,
    );
    const early = ["a", "b", long, "c"];
    const out = join(dir, "early.out.jsonl");
    const sj = join(dir, "early.summary.json");
    const r = await run(["run", input("early", early), "--job", job("early"), "-o", out, "--context-size", "1024", "--summary-json", sj]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/the record on line 3 \(of the first 4\) needs (\d+) with its longest question: pass --context-size (\d+) or more/);
    // A run that ends before paying writes only the scheduler's summary (the output's usage file belongs to an output).
    const summary = JSON.parse(readFileSync(sj, "utf8")) as { requests: { sent: number } };
    expect(summary.requests.sent).toBe(0);
    expect(existsSync(`${out}.usage.json`)).toBe(false);
    // The size it names does take that record.
    const needed = /pass --context-size (\d+) or more/.exec(r.stderr)?.[1] as string;
    const again = await run(["run", input("early", early), "--job", job("early"), "-o", out, "--context-size", needed]);
    expect(again.code, again.stderr).toBe(0);
  }, 30_000);

  it("questions whose instructions alone are over the model's limits (100 KB): exit 2 at the check naming the limit, nothing paid (was: every record failed, exit 5)", async () => {
    const path = join(dir, "huge.json");
    writeFileSync(path, JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul", instructions: "x ".repeat(50_000) } } }));
    const out = join(dir, "huge.out.jsonl");
    const sj = join(dir, "huge.summary.json");
    const r = await run(["run", input("huge", ["a", "b", "c"]), "--job", path, "-o", out, "--summary-json", sj]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(
      /^typed-eval: stopped: bad input: the job's questions alone \(with an empty state\) are over the model's limits, so every record would fail: .*State plus question 'ok' is 100,\d{3} tokens; the limit is 32,768\. Shorten the instructions/m,
    );
    expect(existsSync(`${out}.errors.jsonl`)).toBe(false);
    expect((JSON.parse(readFileSync(sj, "utf8")) as { records: { failed: number } }).records.failed).toBe(0);
  }, 30_000);

  it(`a record after the first ${FIRST_WINDOW} that does not fit is its own error, naming --context-size; the others are answered`, async () => {
    const texts = [...Array.from({ length: FIRST_WINDOW }, (_, i) => `short ${i}`), "y".repeat(3000)];
    const out = join(dir, "later.out.jsonl");
    const r = await run(["run", input("later", texts), "--job", job("later"), "-o", out, "--context-size", "1024", "--max-error-rate", "0.1"]);
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(out, "utf8").trim().split("\n")).toHaveLength(FIRST_WINDOW);
    const errors = readFileSync(`${out}.errors.jsonl`, "utf8").trim().split("\n");
    expect(errors).toHaveLength(1);
    expect(JSON.parse(errors[0] as string)).toMatchObject({ line: FIRST_WINDOW + 1, status: 422 });
    expect(errors[0]).toMatch(/context window is 1,024.*Pass --context-size \d+ or more to answer it/);
  }, 30_000);
});

describe("kept fields", () => {
  /** A source of `records`, and what the logger wrote. */
  function setUp(records: unknown[]) {
    const items: SourceItem[] = records.map((record, i) => ({ seq: i, line: i + 1, source: "in.jsonl", record }));
    const source: Source = {
      name: "in.jsonl",
      items: (async function* () {
        yield* items;
      })(),
      progress: () => ({ bytes: 0, total: undefined }),
    };
    const lines: string[] = [];
    const destination = new Writable({
      write: (chunk, _encoding, done) => {
        lines.push(String(chunk));
        done();
      },
    });
    const logger = createLogger({ destination });
    return { source, lines, logger };
  }

  it("warns once, naming the field, when no record of the first window has it; a field some record has is not named", async () => {
    const records = Array.from({ length: 30 }, (_, i) => ({ id: i, text: "t", customer: { tier: "gold" }, ...(i === 25 ? { late: 1 } : {}) }));
    const { source, lines, logger } = setUp(records);
    const ahead = await readAhead(source, FIRST_WINDOW);
    expect(ahead.window).toHaveLength(FIRST_WINDOW);
    const keep = ["customer.tierr", "customer.tier", "late"];
    warnMissingKeep(parseJob({ state: "text", keep, questions: { ok: { type: "noul", instructions: "Fine?" } } }, "j.json"), ahead.window, logger);
    const warned = lines.map((l) => JSON.parse(l) as { level: number; keep: string; msg: string });
    expect(warned.map((w) => w.keep)).toEqual(["customer.tierr", "late"]);
    expect(warned[0]?.level).toBe(40);
    expect(warned[0]?.msg).toBe(
      'keep: none of the first 20 records has the field "customer.tierr": its column will be empty in every row; check its spelling in the job file',
    );
    // Read ahead, not lost: the source still yields every record, in order.
    const all: number[] = [];
    for await (const item of ahead.source.items) all.push(item.line);
    expect(all).toEqual(records.map((_, i) => i + 1));
  });
});
