/** runJob in-process with a fake evaluator: the branches between the modules, without spawning a CLI. */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { UpstreamError } from "../../src/api/errors.js";
import { createLogger } from "../../src/logging/logger.js";
import { parseJob } from "../../src/records/job.js";
import { RunLimiter } from "../../src/runner/send/limiter.js";
import { localTarget } from "../../src/runner/output/outputs.js";
import { runJob, type OpenedRun } from "../../src/runner/run.js";
import { JSONL } from "../../src/records/jsonl.js";
import { openLocalSource } from "../../src/records/sources.js";
import { outputFormat } from "../../src/records/formats.js";
import { answer, FakeEvaluator } from "../support/fake-evaluator.js";

const dir = mkdtempSync(join(tmpdir(), "te-runcore-"));
const job = parseJob({ state: "text", id: "id", questions: { ok: { type: "noul" } } }, "job");
const logger = createLogger({ level: "silent" });

function input(name: string, texts: string[]): string {
  const path = join(dir, `${name}.jsonl`);
  writeFileSync(path, texts.map((text, i) => JSON.stringify({ id: `${name}${i}`, text })).join("\n"));
  return path;
}

function options(name: string, data: string, evaluator: FakeEvaluator, over: Partial<OpenedRun> = {}): OpenedRun {
  const out = join(dir, `${name}.out.jsonl`);
  return {
    job,
    source: openLocalSource(data, JSONL),
    evaluator,
    journalPath: `${out}.journal`,
    answers: { target: localTarget(out), format: outputFormat(out) },
    errors: localTarget(`${out}.errors.jsonl`),
    usage: localTarget(`${out}.usage.json`),
    limiter: new RunLimiter({ requestsPerMinute: 1e9, tokensPerSecond: 1e12 }),
    concurrency: 4,
    pricePerMillion: 1,
    logger,
    ...over,
  };
}
const rows = (path: string) =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { id: string; dedup_of?: number });

describe("runJob in-process", () => {
  it("answers, sends identical requests once, and a rerun resumes without asking again", async () => {
    const data = input("a", ["same", "x", "same", "y", "same"]);
    const evaluator = new FakeEvaluator();
    const first = await runJob(options("a", data, evaluator));
    expect(first.status).toBe("done");
    expect(evaluator.calls).toHaveLength(3);
    expect(first.summary.records).toMatchObject({ read: 5, answered: 5, deduplicated: 2 });
    expect(rows(join(dir, "a.out.jsonl")).filter((r) => r.dedup_of !== undefined)).toHaveLength(2);
    const again = new FakeEvaluator();
    const second = await runJob(options("a", data, again));
    expect(again.calls).toHaveLength(0);
    expect(second.summary.records.resumed).toBe(5);
    expect(second.summary.this_run?.requests.sent).toBe(0);
    expect(second.summary.requests.sent).toBe(3); // every run of this output
  });

  it("fails a record after its retries and counts every attempt; the status follows --max-error-rate", async () => {
    const data = input("b", ["ok 1", "ok 2", "bad", "ok 3"]);
    const failing = () =>
      new FakeEvaluator((r) => {
        if (r.state === "bad") throw new UpstreamError(500, "boom");
        return answer(r);
      });
    const strict = await runJob(options("b1", data, failing(), { maxRetries: 1 }));
    expect(strict.status).toBe("failures");
    expect(strict.summary.this_run?.requests).toMatchObject({ sent: 5, retries: 1 });
    const lenient = await runJob(options("b2", data, failing(), { maxRetries: 0, maxErrorRate: 0.25 }));
    expect(lenient.status).toBe("done");
    expect(JSON.parse(readFileSync(join(dir, "b2.out.jsonl.errors.jsonl"), "utf8"))).toMatchObject({ status: 500, type: "upstream_error" });
  });

  it("stops early when the first records all fail for one reason, writing no output", async () => {
    const path = join(dir, "c.jsonl");
    writeFileSync(path, Array.from({ length: 500 }, (_, i) => JSON.stringify({ id: `c${i}`, body: "no text field" })).join("\n"));
    const evaluator = new FakeEvaluator();
    const result = await runJob(options("c", path, evaluator, { earlyFailures: 10, concurrency: 1 }));
    expect(result.status).toBe("all-failed");
    expect(result.aborted).toMatch(/first 10 records all failed .*no state field "text"/);
    expect(result.summary.records.read).toBeLessThan(20);
    expect(existsSync(join(dir, "c.out.jsonl"))).toBe(false);
  });

  it("a stop signal ends the run as stopped, keeping what finished; the rerun completes it", async () => {
    const data = input(
      "d",
      Array.from({ length: 200 }, (_, i) => `record ${i}`),
    );
    const stop = new AbortController();
    const evaluator = new FakeEvaluator(async (r, call) => {
      if (call === 10) stop.abort();
      await new Promise((resolve) => setTimeout(resolve, 5));
      return answer(r);
    });
    const result = await runJob(options("d", data, evaluator, { stop: stop.signal, graceMs: 5000 }));
    expect(result.status).toBe("stopped");
    expect(result.summary.records.answered).toBe(evaluator.calls.length);
    const rest = new FakeEvaluator();
    const rerun = await runJob(options("d", data, rest));
    expect(rerun.status).toBe("done");
    expect(evaluator.calls.length + rest.calls.length).toBe(200);
  });

  it("an empty input is no-input, and the summary says so", async () => {
    const data = join(dir, "e.jsonl");
    writeFileSync(data, "");
    const result = await runJob(options("e", data, new FakeEvaluator()));
    expect(result.status).toBe("no-input");
    expect(result.summary.status).toBe("no-input");
  });
});
