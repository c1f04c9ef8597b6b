/**
 * Every place a run writes is checked before its first request, in process
 * on real files: two flags naming one file, a place that is the input, an S3
 * output whose staging folder ($TYPED_EVAL_STAGING) cannot be written, an S3
 * location mistyped (`S3://`, `s3:/`). Each ends at the check (exit 2, one
 * line naming the place), nothing asked of the model, nothing left behind.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exitCodeOf } from "../../src/api/verdict.js";
import { runLifecycle } from "../../src/runner/run.js";
import { FakeEvaluator } from "../support/fake-evaluator.js";
import { lifecycleRequest } from "../support/lifecycle.js";
import { unprivileged } from "../support/unprivileged.js";
import { runInProcess } from "../support/cli.js";

const dir = mkdtempSync(join(tmpdir(), "te-places-"));
// Readable and writable by the unprivileged user the read-only case runs as.
chmodSync(dir, 0o777);
const job = join(dir, "job.json");
writeFileSync(job, JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul" } } }));
const input = join(dir, "in.jsonl");
const inputText = `${Array.from({ length: 5 }, (_, i) => JSON.stringify({ id: `r${i}`, text: `text ${i}` })).join("\n")}\n`;
writeFileSync(input, inputText);

/** A fresh folder for one case, writable by anyone. */
function folder(name: string): string {
  const path = join(dir, name);
  mkdirSync(path, { mode: 0o777 });
  chmodSync(path, 0o777);
  return path;
}

describe("two places, one file", () => {
  it.each([
    [
      "--errors a.jsonl -o a.jsonl",
      (d: string) => ({ output: join(d, "a.jsonl"), errors: join(d, "a.jsonl") }),
      /--output .*a\.jsonl and --errors .*a\.jsonl are one file/,
    ],
    [
      "--journal = --errors",
      (d: string) => ({ output: join(d, "a.jsonl"), errors: join(d, "x.jsonl"), journal: join(d, "x.jsonl") }),
      /--journal .*x\.jsonl and --errors .*x\.jsonl are one file: each place a run writes needs its own; name another for --errors$/,
    ],
    [
      "--summary-json = the usage summary",
      (d: string) => ({ output: join(d, "a.jsonl"), summaryJson: join(d, "a.jsonl.usage.json") }),
      /the usage summary .*a\.jsonl\.usage\.json and --summary-json .*a\.jsonl\.usage\.json are one file/,
    ],
    ["--errors through another spelling of -o", (d: string) => ({ output: join(d, "a.jsonl"), errors: join(d, "sub", "..", "a.jsonl") }), /are one file/],
    ["--errors = the input", () => ({ output: join(dir, "e.out.jsonl"), errors: input }), /--errors .*in\.jsonl is the input itself/],
    ["--summary-json = the input", () => ({ output: join(dir, "s.out.jsonl"), summaryJson: input }), /--summary-json .*in\.jsonl is the input itself/],
  ])("%s: exit 2 at the check, one line naming both, nothing asked", async (name, places, message) => {
    const d = folder(`apart-${name.replace(/\W+/g, "-")}`);
    mkdirSync(join(d, "sub"));
    const evaluator = new FakeEvaluator();
    const end = await runLifecycle(lifecycleRequest(input, job, join(d, "a.jsonl"), evaluator, { places: places(d) }));
    expect(end.verdict, end.reason).toBe("bad-input");
    expect(exitCodeOf(end)).toBe(2);
    expect(end.reason).toMatch(message);
    expect(end.reason).not.toMatch(/\n/);
    expect(evaluator.calls).toHaveLength(0);
    // The check's refusal replaces nothing: not the input, not the usage summary (the --summary-json of a refused run is not written over them).
    expect(readFileSync(input, "utf8")).toBe(inputText);
    // Nothing written but what the check leaves (the folders it made): no journal, no lock, no probe.
    expect(readdirSync(d).filter((f) => f !== "sub")).toEqual([]);
  });
});

it("a --summary-json refused as the journal of an earlier run leaves that journal as it was (it would have replaced the paid records)", async () => {
  const d = folder("summary-journal");
  const journal = join(d, "a.jsonl.journal");
  const paid = `${JSON.stringify({ k: "input", input })}\n`;
  writeFileSync(journal, paid);
  const evaluator = new FakeEvaluator();
  const end = await runLifecycle(lifecycleRequest(input, job, join(d, "a.jsonl"), evaluator, { places: { output: join(d, "a.jsonl"), summaryJson: journal } }));
  expect(end.verdict).toBe("bad-input");
  expect(end.reason).toMatch(/--journal .*a\.jsonl\.journal and --summary-json .*a\.jsonl\.journal are one file/);
  expect(readFileSync(journal, "utf8")).toBe(paid);
  expect(evaluator.calls).toHaveLength(0);
});

it("an S3 output under the input's prefix: exit 2 (a later run would read the answers as input), nothing asked", async () => {
  const d = folder("under-prefix");
  const evaluator = new FakeEvaluator();
  const output = "s3://bucket/tickets/answers.jsonl";
  const end = await runLifecycle(
    lifecycleRequest("s3://bucket/tickets/", job, output, evaluator, { places: { output, journal: join(d, "j"), summaryJson: join(d, "s.json") } }),
  );
  expect(end.verdict).toBe("bad-input");
  expect(end.reason).toBe(
    "--output s3://bucket/tickets/answers.jsonl is under the input prefix s3://bucket/tickets/: a later run would read it as input; write it elsewhere",
  );
  expect(evaluator.calls).toHaveLength(0);
});

describe("an S3 output's staging copy ($TYPED_EVAL_STAGING)", () => {
  const saved: Record<string, string | undefined> = {};
  const settings = {
    TYPED_EVAL_STAGING: join(dir, "read-only", "staging"),
    AWS_ACCESS_KEY_ID: "test",
    AWS_SECRET_ACCESS_KEY: "test",
    AWS_REGION: "us-east-1",
    AWS_ENDPOINT_URL_S3: "http://127.0.0.1:9",
  };
  beforeAll(() => {
    for (const [k, v] of Object.entries(settings)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
  });
  afterAll(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  it("a staging folder that cannot be written: exit 2 at the check naming $TYPED_EVAL_STAGING, nothing asked, nothing made (was: records paid, then exit 9 'no such file or directory')", async () => {
    const readOnly = join(dir, "read-only");
    mkdirSync(readOnly, { mode: 0o555 });
    chmodSync(readOnly, 0o555);
    const d = folder("staging-case");
    const evaluator = new FakeEvaluator();
    // The journal local, so nothing but the staging copy needs the store: on the old code the records were paid first.
    const over = { places: { output: "s3://bucket/answers/a.jsonl", journal: join(d, "a.journal"), errors: join(d, "a.errors.jsonl") } };
    const end = await unprivileged(() => runLifecycle(lifecycleRequest(input, job, "s3://bucket/answers/a.jsonl", evaluator, over)));
    expect(end.verdict, end.reason).toBe("bad-input");
    expect(exitCodeOf(end)).toBe(2);
    expect(end.reason).toMatch(
      /^cannot write \$TYPED_EVAL_STAGING \(where --output s3:\/\/bucket\/answers\/a\.jsonl is assembled before its upload\) .*read-only\/staging\/bucket\/answers\/a\.jsonl: no permission to create files in .*read-only; choose another path$/,
    );
    expect(evaluator.calls).toHaveLength(0);
    expect(readdirSync(readOnly)).toEqual([]);
    expect(existsSync(join(d, "a.journal"))).toBe(false);
  });

  it("a staging folder that can be written is not made by the check", async () => {
    const d = folder("staging-fine");
    process.env["TYPED_EVAL_STAGING"] = join(d, "staging");
    try {
      // The input is refused later (it is absent): the check of the places passed without making the staging folder.
      const places = { output: "s3://bucket/answers/a.jsonl", journal: join(d, "a.journal"), summaryJson: join(d, "summary.json") };
      const end = await runLifecycle(lifecycleRequest(join(d, "none.jsonl"), job, "s3://bucket/answers/a.jsonl", new FakeEvaluator(), { places }));
      expect(end.verdict, end.reason).toBe("no-input");
      expect(existsSync(join(d, "staging"))).toBe(false);
    } finally {
      process.env["TYPED_EVAL_STAGING"] = settings.TYPED_EVAL_STAGING;
    }
  });
});

describe("an S3 location mistyped", () => {
  // The working directory is a temporary folder: read as local paths, the old code made folders named S3: and s3:bucket there.
  const cwd = process.cwd();
  const here = folder("typo-cwd");
  beforeAll(() => process.chdir(here));
  afterAll(() => process.chdir(cwd));

  it.each<[string, { input?: string; output?: string; errors?: string }, RegExp]>([
    [
      "the input S3://",
      { input: "S3://bucket/tickets/today.jsonl" },
      /^the input S3:\/\/bucket\/tickets\/today\.jsonl is not an S3 location as written: write it s3:\/\/bucket\/tickets\/today\.jsonl/,
    ],
    [
      "the input s3:/",
      { input: "s3:/bucket/tickets/" },
      /^the input s3:\/bucket\/tickets\/ is not an S3 location as written: write it s3:\/\/bucket\/tickets\//,
    ],
    [
      "-o S3://",
      { output: "S3://bucket/answers/a.jsonl" },
      /^--output S3:\/\/bucket\/answers\/a\.jsonl is not an S3 location as written: write it s3:\/\/bucket\/answers\/a\.jsonl/,
    ],
    ["--errors s3:", { errors: "s3:bucket/e.jsonl" }, /^--errors s3:bucket\/e\.jsonl is not an S3 location as written: write it s3:\/\/bucket\/e\.jsonl/],
  ])("%s: exit 2 naming the spelling that works (was: read as a local path: exit 6 'no input', or a folder named S3: made)", async (name, over, message) => {
    const d = folder(`typo-${name.replace(/\W+/g, "-")}`);
    const evaluator = new FakeEvaluator();
    const output = over.output ?? join(d, "a.jsonl");
    const request = lifecycleRequest(over.input ?? input, job, output, evaluator, {
      places: { output, ...(over.errors ? { errors: over.errors } : {}), summaryJson: join(d, "summary.json") },
    });
    const end = await runLifecycle(request);
    expect(end.verdict, end.reason).toBe("bad-input");
    expect(exitCodeOf(end)).toBe(2);
    expect(end.reason).toMatch(message);
    expect(evaluator.calls).toHaveLength(0);
    expect(readdirSync(here)).toEqual([]);
  });

  it("estimate names the same spelling (it read S3:// as an absent local file: exit 6)", async () => {
    const r = await runInProcess(["estimate", "S3://bucket/tickets/today.jsonl", "--job", job], { TYPED_EVAL_LOG_LEVEL: "error" });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(
      /^typed-eval: the input S3:\/\/bucket\/tickets\/today\.jsonl is not an S3 location as written: write it s3:\/\/bucket\/tickets\/today\.jsonl/,
    );
  });
});
