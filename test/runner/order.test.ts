/** Identity and order: outputs in input order whatever the completion order, repeated ids reported, dedup copies named by id. */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { UnprocessableEntityError } from "../../src/api/errors.js";
import type { SystemOneRequest } from "../../src/api/schema.js";
import { createLogger } from "../../src/logging/logger.js";
import { parseJob } from "../../src/records/job.js";
import { RunLimiter } from "../../src/runner/send/limiter.js";
import { localTarget } from "../../src/runner/output/outputs.js";
import { runJob, type OpenedRun } from "../../src/runner/run.js";
import { JSONL } from "../../src/records/jsonl.js";
import { openLocalSource } from "../../src/records/sources.js";
import { outputFormat } from "../../src/records/formats.js";
import { answer, FakeEvaluator } from "../support/fake-evaluator.js";

const dir = mkdtempSync(join(tmpdir(), "te-order-"));
const job = parseJob({ state: "text", id: "id", questions: { ok: { type: "noul" } } }, "job");
const logger = createLogger({ level: "silent" });

/** 120 records: some identical texts (dedup), some the model refuses (errors file), ids unique. */
function writeInput(name: string, records = 120): string {
  const path = join(dir, `${name}.jsonl`);
  const texts = Array.from({ length: records }, (_, i) => (i % 17 === 5 ? "same text" : i % 23 === 7 ? `refuse ${i}` : `record ${i}`));
  writeFileSync(path, `${texts.map((text, i) => JSON.stringify({ id: `r${i}`, text })).join("\n")}\n`);
  return path;
}

/** The record number in a request's text, for delays that scramble completion order. */
const numberOf = (r: SystemOneRequest) => Number(/\d+/.exec(String(r.state))?.[0] ?? 0);

/** Answers after `delay(request)` ms, with a label mass; refuses "refuse" records with a 422. */
function evaluator(delay: (r: SystemOneRequest) => number): FakeEvaluator {
  return new FakeEvaluator(async (r) => {
    await new Promise((resolve) => setTimeout(resolve, delay(r)));
    if (String(r.state).startsWith("refuse")) throw new UnprocessableEntityError([{ type: "value_error", loc: ["body", "state"], msg: "refused" }]);
    return { ...answer(r, (numberOf(r) % 10) / 10 + 0.05), labelMass: { ok: 0.5 + (numberOf(r) % 7) / 20 } };
  });
}

function options(name: string, data: string, ev: FakeEvaluator, over: Partial<OpenedRun> = {}): OpenedRun {
  const out = join(dir, `${name}.out.jsonl`);
  return {
    job,
    source: openLocalSource(data, JSONL),
    evaluator: ev,
    journalPath: `${out}.journal`,
    answers: { target: localTarget(out), format: outputFormat(out) },
    errors: localTarget(`${out}.errors.jsonl`),
    limiter: new RunLimiter({ requestsPerMinute: 1e9, tokensPerSecond: 1e12 }),
    concurrency: 16,
    pricePerMillion: 1,
    logger,
    maxErrorRate: 0.5,
    ...over,
  };
}

const read = (name: string) => readFileSync(join(dir, `${name}.out.jsonl`), "utf8");
const readErrors = (name: string) => readFileSync(join(dir, `${name}.out.jsonl.errors.jsonl`), "utf8");
const ids = (text: string) =>
  text
    .split("\n")
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { id: string }).id);

describe("output order", () => {
  it("is input order: runs whose records finish in opposite orders write the same bytes", async () => {
    const data = writeInput("order");
    // Early records slowest in one run, fastest in the other: completion orders far apart.
    const slowFirst = evaluator((r) => Math.max(0, 30 - numberOf(r) / 4));
    const fastFirst = evaluator((r) => numberOf(r) % 9);
    const a = await runJob(options("order-a", data, slowFirst));
    const b = await runJob(options("order-b", data, fastFirst));
    expect([a.status, b.status]).toEqual(["done", "done"]);
    const journalIds = (name: string) =>
      readFileSync(join(dir, `${name}.out.jsonl.journal`), "utf8")
        .split("\n")
        .filter((l) => l.includes('"k":"answer"'))
        .map((l) => (JSON.parse(l) as { id: string }).id);
    // The journals really are in different orders...
    expect(journalIds("order-a")).not.toEqual(journalIds("order-b"));
    // ...the outputs are not.
    expect(read("order-a")).toBe(read("order-b"));
    expect(readErrors("order-a")).toBe(readErrors("order-b"));
    const written = ids(read("order-a"));
    const failed = ids(readErrors("order-a"));
    expect(written.length + failed.length).toBe(120);
    expect(failed.length).toBeGreaterThan(3);
    const number = (id: string) => Number(id.slice(1));
    expect(written.map(number)).toEqual([...written.map(number)].sort((x, y) => x - y));
    expect(failed.map(number)).toEqual([...failed.map(number)].sort((x, y) => x - y));
    expect(a.summary.records.deduplicated).toBe(6);
  });

  it("is the same file after a stop and a resume as after one run", async () => {
    const data = writeInput("resume");
    const whole = await runJob(
      options(
        "resume-whole",
        data,
        evaluator((r) => numberOf(r) % 5),
      ),
    );
    expect(whole.status).toBe("done");
    const stop = new AbortController();
    let calls = 0;
    const interrupted = evaluator((r) => {
      if (++calls === 40) stop.abort();
      return (numberOf(r) * 7) % 11;
    });
    const first = await runJob(options("resume-split", data, interrupted, { stop: stop.signal, graceMs: 5000 }));
    expect(first.status).toBe("stopped");
    const rest = evaluator((r) => 10 - (numberOf(r) % 10));
    const second = await runJob(options("resume-split", data, rest));
    expect(second.status).toBe("done");
    expect(rest.calls.length).toBeGreaterThan(0);
    expect(read("resume-split")).toBe(read("resume-whole"));
    expect(readErrors("resume-split")).toBe(readErrors("resume-whole"));
  });

  it("dedup copies name their original by id and carry its label mass", async () => {
    const data = writeInput("copies");
    await runJob(
      options(
        "copies",
        data,
        evaluator(() => 1),
      ),
    );
    const rows = read("copies")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { id: string; dedup_of?: string; label_mass?: Record<string, number>; usage: { input_tokens: number } });
    const copies = rows.filter((r) => r.dedup_of !== undefined);
    expect(copies).toHaveLength(6);
    for (const c of copies) {
      expect(c.dedup_of).toBe("r5");
      expect(c.label_mass).toEqual(rows.find((r) => r.id === "r5")?.label_mass);
      expect(c.usage.input_tokens).toBe(0);
    }
  });
});

describe("repeated ids", () => {
  it("keeps every row, and reports the count and the first examples in the summary", async () => {
    const path = join(dir, "dupids.jsonl");
    const idsIn = ["a", "b", "a", "c", "b", "a", "d", "e", "f", "g", "e", "f", "g", "h", "h"];
    writeFileSync(path, idsIn.map((id, i) => JSON.stringify({ id, text: `text ${i}` })).join("\n"));
    const result = await runJob(
      options(
        "dupids",
        path,
        evaluator(() => 0),
      ),
    );
    expect(result.status).toBe("done");
    expect(ids(read("dupids"))).toEqual(idsIn);
    expect(result.summary.duplicate_ids).toEqual({
      rows: 7,
      examples: [
        { id: "a", first_line: 1, line: 3 },
        { id: "b", first_line: 2, line: 5 },
        { id: "e", first_line: 8, line: 11 },
        { id: "f", first_line: 9, line: 12 },
        { id: "g", first_line: 10, line: 13 },
      ],
    });
    const unique = await runJob(
      options(
        "uniq",
        writeInput("uniq", 30),
        evaluator(() => 0),
      ),
    );
    expect(unique.summary.duplicate_ids).toBeUndefined();
  });
});
