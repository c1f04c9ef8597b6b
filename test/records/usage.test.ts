/** The usage summary's numbers for people: seconds to the millisecond, no speed for a run that sent nothing. */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { describe as describeUsage, emptySummary, finish, mergeSummaries, type UsageSummary } from "../../src/records/usage.js";
import { runInProcess } from "../support/cli.js";

describe("usage summary", () => {
  it("rounds seconds summed over runs to the millisecond", () => {
    const s = emptySummary("m-1.0.0", 0);
    // Two runs' seconds summed in binary: 10.844999999999999 before rounding.
    s.seconds = 4.345 + 6.5;
    s.this_run = {
      started: "2026-11-23T02:00:00.000Z",
      seconds: 0.1 + 0.2,
      records: { read: 0, answered: 0, failed: 0, resumed: 0 },
      requests: { sent: 0, retries: 0, rate_limited: 0, overloaded: 0 },
      tokens: { input: 0, wasted_input: 0 },
      cost_usd: 0,
    };
    expect(s.seconds).not.toBe(10.845);
    const done = finish(s);
    expect(done.seconds).toBe(10.845);
    expect(done.this_run?.seconds).toBe(0.3);
    expect(JSON.stringify(done)).not.toMatch(/\d\.\d{10,}/);
  });

  it("prints no records/s when no request was sent (a run answered from its journal)", () => {
    const s = emptySummary("m-1.0.0", 0);
    s.records.read = s.records.answered = s.records.resumed = 500;
    s.seconds = 1;
    expect(describeUsage(finish(s))).not.toMatch(/records\/s/);
    s.requests.sent = 500;
    expect(describeUsage(finish(s))).toMatch(/, 500\.0 records\/s$/);
  });
});

/** A run's summary: `answered` records of `job` on `model` at `tokens` input tokens each, priced per million. */
function ran(job: string, model: string, answered: number, tokens: number, price = 0.042): UsageSummary {
  const s = emptySummary(model, price);
  s.job = job;
  s.records.read = s.records.answered = answered;
  s.tokens.input = answered * tokens;
  s.requests.sent = answered;
  return finish(s);
}

describe("usage across jobs and models", () => {
  it("shards of one job on one model: one projection, no warning, as before", () => {
    const merged = mergeSummaries([ran("/a/jobs/triage.json", "m-1.0.0", 100, 500), ran("/b/jobs/triage.json", "m-1.0.0", 100, 500)], 1_000_000);
    expect(merged.warning).toBeUndefined();
    expect(merged.groups).toHaveLength(1);
    expect(merged.projection?.input_tokens).toBe(500_000_000);
  });

  it("two jobs and two models: split, each projected on its own, and said (one projection of the mix was given without a word)", async () => {
    // A five-question job (2,500 tokens a record) and a one-question one (500), one of them on a model at ten times the price.
    const summaries = [ran("jobs/triage.json", "m-1.0.0", 100, 2500), ran("jobs/sentiment.json", "big-2.0.0", 300, 500, 0.42)];
    const merged = mergeSummaries(summaries, 1_000_000);
    expect(merged.warning).toBe(
      "these summaries are of 2 jobs and 2 models: their costs per record differ, so each job and model is projected on its own (a projection of their mix would hold only for the same mix)",
    );
    expect(merged.projection).toBeUndefined();
    expect(merged.groups.map((g) => [g.job, g.model, g.files, g.projection?.input_tokens])).toEqual([
      ["triage", "m-1.0.0", 1, 2_500_000_000],
      ["sentiment", "big-2.0.0", 1, 500_000_000],
    ]);
    expect(merged.groups[1]?.projection?.cost_usd).toBeCloseTo(0.42 * 500, 6);
    // The totals still add what was spent.
    expect(merged.totals.cost_usd).toBeCloseTo(summaries[0]!.cost_usd + summaries[1]!.cost_usd, 12);
    const dir = mkdtempSync(join(tmpdir(), "te-usage-"));
    const files = summaries.map((summary, i) => {
      const path = join(dir, `${i}.usage.json`);
      writeFileSync(path, JSON.stringify(summary));
      return path;
    });
    const r = await runInProcess(["usage", ...files, "--project", "1000000"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split("\n")[0]).toBe(`warning: ${merged.warning}`);
    expect(r.stdout).toMatch(/^triage on m-1\.0\.0 \(1 summary\): 100 answered, .*; projected: 1,000,000 records -> 2,500,000,000 input tokens, \$105\.00$/m);
    expect(r.stdout).toMatch(
      /^sentiment on big-2\.0\.0 \(1 summary\): 300 answered, .*; projected: 1,000,000 records -> 500,000,000 input tokens, \$210\.00$/m,
    );
    expect(r.stdout).not.toMatch(/^projected:/m);
  });
});
