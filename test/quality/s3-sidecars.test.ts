/**
 * The nightly gate on S3 answers, against a real store (Ceph RGW, started by
 * the tests: test/support/rgw.ts): `report` and `assess` read the errors file
 * and usage summary beside `s3://` answers, or where `--errors` and
 * `--usage` name them in S3, as they read them beside a local copy (the
 * answered cell, the usage and cost section, the model; an earlier run's
 * model for --compare; calibrate's model identity). A named file that
 * cannot be read is one line, exit 2.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PutObjectCommand } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Assessment } from "../../src/quality/assess.js";
import type { RunReport } from "../../src/quality/report.js";
import type { Verdict } from "../../src/quality/verdict.js";
import { runInProcess } from "../support/cli.js";
import { FIVE_QUESTIONS, IDENTITY_FILE, MODEL, writeRun } from "../support/label-sets.js";
import { RGW_MISSING, type RealS3, realS3 } from "../support/rgw.js";

const BUCKET = "gate-sidecars";
let s3: RealS3;
let dir: string;
let local: string;

type ReportJson = RunReport & { verdict: Verdict; assessment?: Assessment };

beforeAll(async () => {
  if (RGW_MISSING.length > 0) return;
  dir = mkdtempSync(join(tmpdir(), "te-s3-sidecars-"));
  local = join(dir, "part-1-4.jsonl");
  const { gold } = writeRun(local, { n: 300, seed: 5, questions: FIVE_QUESTIONS.slice(0, 2), model: MODEL, identity: IDENTITY_FILE, failed: 7 });
  writeFileSync(join(dir, "gold.csv"), gold);
  writeFileSync(join(dir, "not-usage.json"), JSON.stringify({ kind: "something else" }));
  s3 = await realS3();
  await s3.bucket(BUCKET);
  const put = (key: string, path: string) => s3.client.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: readFileSync(path) }));
  // The night as a run writes it to S3: answers with their errors and usage beside them.
  for (const suffix of ["", ".errors.jsonl", ".usage.json"]) await put(`answers/part-1-4.jsonl${suffix}`, `${local}${suffix}`);
  // The same answers alone, their sidecars elsewhere (named by --errors and --usage).
  await put("alone/part-1-4.jsonl", local);
  await put("side/errors.jsonl", `${local}.errors.jsonl`);
  await put("side/usage.json", `${local}.usage.json`);
}, 150_000);

afterAll(() => s3?.client.destroy());

const cli = (args: string[]) => runInProcess(args, { ...s3.env, TYPED_EVAL_LOG_LEVEL: "warn" }, { cwd: dir });

async function reportJson(args: string[]): Promise<ReportJson> {
  const r = await cli(["report", ...args, "--json"]);
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as ReportJson;
}

describe.skipIf(RGW_MISSING.length > 0)("the gate on S3 answers (Ceph RGW)", () => {
  it("report reads the errors and usage beside s3:// answers as beside local ones: the answered cell, usage and cost, the model", async () => {
    const onDisk = await reportJson([local, "-o", join(dir, "local.html")]);
    const inS3 = await reportJson([`s3://${BUCKET}/answers/part-1-4.jsonl`, "-o", join(dir, "r.html")]);
    expect(onDisk.failed_rows).toBe(7);
    expect(inS3.failed_rows).toBe(7);
    expect(inS3.errors).toEqual(onDisk.errors);
    expect(inS3.usage).toEqual(onDisk.usage);
    expect(inS3.usage?.records.answered).toBe(300);
    expect(inS3.provenance?.model_identity).toBe(IDENTITY_FILE);
    for (const q of inS3.verdict.questions) expect(q.cells.answered).toEqual({ mark: "act", text: "300 answered, 7 failed (2.3%)" });
    expect(inS3.verdict.questions.map((q) => q.cells.answered)).toEqual(onDisk.verdict.questions.map((q) => q.cells.answered));
    const page = readFileSync(join(dir, "r.html"), "utf8");
    expect(page).toContain("<h2>Usage</h2>");
    expect(page).not.toContain("failures not recorded");
  }, 60_000);

  it("report reads --errors s3://... and --usage s3://... where they are named", async () => {
    const bare = await reportJson([`s3://${BUCKET}/alone/part-1-4.jsonl`, "-o", join(dir, "bare.html")]);
    expect(bare.failed_rows).toBeUndefined();
    const named = await reportJson([
      `s3://${BUCKET}/alone/part-1-4.jsonl`,
      "--errors",
      `s3://${BUCKET}/side/errors.jsonl`,
      "--usage",
      `s3://${BUCKET}/side/usage.json`,
      "-o",
      join(dir, "named.html"),
    ]);
    expect(named.failed_rows).toBe(7);
    expect(named.errors?.by_type).toEqual({ invalid_record: 7 });
    expect(named.usage?.model).toBe(MODEL);
    expect(readFileSync(join(dir, "named.html"), "utf8")).toContain("<h2>Usage</h2>");
  }, 60_000);

  it("assess reads them beside s3:// answers too: the failed rows and the model in its provenance", async () => {
    const r = await cli(["assess", `s3://${BUCKET}/answers/part-1-4.jsonl`, "--gold", "gold.csv", "--bootstrap", "10", "--json"]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const a = JSON.parse(r.stdout) as Assessment & { verdict: Verdict };
    expect(a.failed_rows).toBe(7);
    expect(a.provenance?.model_identity).toBe(IDENTITY_FILE);
    for (const q of a.verdict.questions) expect(q.cells.answered.text).toBe("300 answered, 7 failed (2.3%)");
  }, 60_000);

  it("report --compare s3://... names the earlier run's model from its usage summary in S3; calibrate records the identity beside s3:// answers", async () => {
    const r = await reportJson([local, "--compare", `s3://${BUCKET}/answers/part-1-4.jsonl`, "-o", join(dir, "compare.html")]);
    expect(r.compare?.model_identity).toBe(IDENTITY_FILE);
    expect(r.verdict.model.changed).toBe(false);
    const c = await cli(["calibrate", `s3://${BUCKET}/answers/part-1-4.jsonl`, "--gold", "gold.csv", "-o", "cal.json"]);
    expect(c.code, c.stderr).toBe(0);
    expect(c.stderr).not.toMatch(/no model identity is known/);
    expect(JSON.parse(readFileSync(join(dir, "cal.json"), "utf8"))).toMatchObject({ identity: IDENTITY_FILE, model: MODEL });
  }, 60_000);

  it.each([
    [["--usage", "nosuch.json"], "typed-eval: cannot read --usage nosuch.json: no such file"],
    [["--usage", `s3://${BUCKET}/side/nosuch.json`], `typed-eval: cannot read --usage s3://${BUCKET}/side/nosuch.json: no such key`],
    [["--errors", `s3://${BUCKET}/side/nosuch.jsonl`], `typed-eval: cannot read --errors s3://${BUCKET}/side/nosuch.jsonl: no such key`],
    [["--usage", "not-usage.json"], "typed-eval: cannot read --usage not-usage.json: not a typed-eval usage summary: name a run's <output>.usage.json"],
    [
      ["--errors", `s3://${BUCKET}/alone/part-1-4.jsonl`],
      `typed-eval: cannot read --errors s3://${BUCKET}/alone/part-1-4.jsonl: line 1 is not a failed record (no "type"): name a run's <output>.errors.jsonl`,
    ],
  ])(
    "a named %j that cannot be read is exit 2, one line naming it, no report",
    async (flags, line) => {
      // Without and with gold (the assessment reads them as well), before the answers are read.
      for (const gold of [[], ["--gold", "gold.csv"]]) {
        const r = await cli(["report", `s3://${BUCKET}/answers/part-1-4.jsonl`, "-o", "refused.html", ...gold, ...flags]);
        expect(r.code).toBe(2);
        expect(r.stderr.trim().split("\n")).toEqual([line]);
        expect(existsSync(join(dir, "refused.html"))).toBe(false);
      }
    },
    60_000,
  );
});
