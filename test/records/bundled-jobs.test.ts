/** `--job NAME` runs a bundled job when no file NAME exists; a file that exists always wins; neither names the bundled jobs. */
import { mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { bundledJobs, jobPath } from "../../src/records/bundled-jobs.js";
import { runInProcess } from "../support/cli.js";
import { generatedModel, TINY } from "../support/models.js";

const dir = mkdtempSync(join(tmpdir(), "te-bundled-jobs-"));
const JOBS = resolve(import.meta.dirname, "../../jobs");
writeFileSync(join(dir, "in.jsonl"), `${JSON.stringify({ ticket_id: "T-1", ticket: "My parcel is late." })}\n`);
const env = { TYPED_EVAL_BASE_URL: undefined, TYPED_EVAL_MODEL_PATH: generatedModel(TINY) };

describe("bundled jobs", () => {
  it("are the package's jobs/ folder, by name with or without .json; other values pass through", () => {
    expect(bundledJobs()).toEqual(
      readdirSync(JOBS)
        .filter((f) => f.endsWith(".json"))
        .map((f) => f.replace(/\.json$/, ""))
        .sort(),
    );
    expect(bundledJobs()).toContain("support-triage");
    expect(jobPath("support-triage")).toBe(join(JOBS, "support-triage.json"));
    expect(jobPath("support-triage.json")).toBe(join(JOBS, "support-triage.json"));
    expect(jobPath("/app/jobs/support-triage.json")).toBe("/app/jobs/support-triage.json");
    expect(jobPath("jobs/nope.json")).toBe("jobs/nope.json");
  });

  it("run --job support-triage works from any folder; a file of that name there wins; neither is exit 2 naming the bundled jobs", async () => {
    const byName = await runInProcess(["run", "in.jsonl", "--job", "support-triage", "--print-prompt"], env, { cwd: dir });
    expect(byName.code, byName.stderr).toBe(0);
    expect(byName.stdout).toMatch(/My parcel is late\./);
    writeFileSync(join(dir, "support-triage"), "{ not json");
    const file = await runInProcess(["run", "in.jsonl", "--job", "support-triage", "--print-prompt"], env, { cwd: dir });
    expect(file.code).toBe(2);
    expect(file.stderr).toMatch(/support-triage is not valid JSON/);
    const neither = await runInProcess(["run", "in.jsonl", "--job", "/app/jobs/support-triage.json", "-o", "out.jsonl"], env, { cwd: dir });
    expect(neither.code).toBe(2);
    expect(neither.stderr).toMatch(
      new RegExp(`cannot read job file /app/jobs/support-triage\\.json: .*--job also takes a bundled job's name: ${bundledJobs().join(", ")}`),
    );
  }, 30_000);
});
