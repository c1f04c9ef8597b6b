/**
 * The outputs are a function of (current input, current job, journal), in
 * process on real files: an input edited between runs, a job edited between
 * runs, a prompt that renders differently, a calibration changed (which must
 * repay nothing), an endpoint whose model changes mid-run, outputs and
 * summaries that cannot be written, a refused run beside the holder's files.
 * Each asserts the verdict and its exit code, the summary, and a rerun with
 * exactly the current input's records.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { UnprocessableEntityError } from "../../src/api/errors.js";
import type { SystemOneRequest } from "../../src/api/schema.js";
import { exitCodeOf, OutputClosedError, verdictLine } from "../../src/api/verdict.js";
import { createLogger } from "../../src/logging/logger.js";
import type { OutputTarget } from "../../src/runner/output/targets.js";
import { targetOf } from "../../src/runner/prepare.js";
import { runLifecycle } from "../../src/runner/run.js";
import { acquireLock } from "../../src/runner/state/lock.js";
import { describe as describeUsage, type UsageSummary } from "../../src/records/usage.js";
import { RemoteEvaluator } from "../../src/evaluator/remote.js";
import { plausibleAnswers } from "../support/answers.js";
import { FakeEvaluator } from "../support/fake-evaluator.js";
import { lifecycleRequest } from "../support/lifecycle.js";
import { startUpstream } from "../support/upstream.js";

const dir = mkdtempSync(join(tmpdir(), "te-truth-"));
const _logger = createLogger({ level: "silent" });

interface Rec {
  id: string;
  text: string;
}

const records = (n: number, from = 0): Rec[] => Array.from({ length: n }, (_, i) => ({ id: `r${from + i}`, text: `text ${from + i}` }));

function writeInput(name: string, recs: readonly Rec[]): string {
  const path = join(dir, `${name}.jsonl`);
  writeFileSync(path, `${recs.map((r) => JSON.stringify(r)).join("\n")}\n`);
  return path;
}

function writeJob(name: string, instructions: string): string {
  const path = join(dir, `${name}.job.json`);
  writeFileSync(path, JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul", instructions } } }));
  return path;
}

/** Answers with the request's own text in the model name, so each row shows what it was asked. */
function echo(options: { refuse?: (text: string) => boolean; model?: (call: number) => string; fingerprint?: string } = {}): FakeEvaluator {
  const evaluator = new FakeEvaluator((request: SystemOneRequest, call) => {
    const text = String(request.state);
    if (options.refuse?.(text)) throw new UnprocessableEntityError([{ type: "value_error", loc: ["body", "state"], msg: "refused" }]);
    return {
      response: {
        model: options.model?.(call) ?? "fake-1.0.0",
        answers: plausibleAnswers(request.questions, 0.5),
        usage: { input_tokens: 3, output_tokens: 1 },
      },
    };
  });
  if (options.fingerprint !== undefined) Object.assign(evaluator, { promptFingerprint: () => options.fingerprint });
  return evaluator;
}

const request = lifecycleRequest;

const lines = (path: string) =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { id: string; line: number; model: string; usage: { input_tokens: number } });
const summaryOf = (output: string) =>
  JSON.parse(readFileSync(`${output}.summary.json`, "utf8")) as {
    verdict: string;
    model: string;
    requested_model?: string;
    answered_by?: Record<string, number>;
    set_aside?: { other_versions: number; not_in_input: number };
    tokens: { input: number; output: number };
  };
const asked = (evaluator: FakeEvaluator) => evaluator.calls.map((c) => String(c.request.state));

describe("outputs are the current input's records, each answered for its current request", () => {
  it("the input edited between runs (10 deleted at the top, 1 edited under its id, 5 appended): exactly 195 rows, 6 asked, none repaid", async () => {
    const job = writeJob("edit", "Is it fine?");
    const output = join(dir, "edit.out.jsonl");
    const first = records(200);
    const input = writeInput("edit", first);
    expect((await runLifecycle(request(input, job, output, echo()))).verdict).toBe("done");
    const now = [...first.slice(10), ...records(5, 200)];
    const edited = now[50] as Rec;
    edited.text = "text 60, edited";
    writeInput("edit", now);
    const rerun = echo();
    const end = await runLifecycle(request(input, job, output, rerun));
    expect(end.verdict).toBe("done");
    expect(exitCodeOf(end)).toBe(0);
    const rows = lines(output);
    expect(rows.map((r) => r.id)).toEqual(now.map((r) => r.id));
    // Lines are the input's as read now, not the journal's from before the deletion.
    expect(rows[0]).toMatchObject({ id: "r10", line: 1 });
    // The edited record and the appended ones were asked; nothing below the deletion was repaid.
    expect(asked(rerun).sort()).toEqual(["text 200", "text 201", "text 202", "text 203", "text 204", "text 60, edited"]);
    // Paid is paid: the 11 answers set aside (3 input tokens each) count in the totals with the 195 rows'.
    expect(summaryOf(output).set_aside).toEqual({ other_versions: 1, not_in_input: 10, input_tokens: 33, output_tokens: 11 });
    expect(summaryOf(output).tokens).toMatchObject({ input: 600 + 6 * 3, output: 200 + 6 });
  });

  it("a rerun over part of the input (--limit, --sample, --shard) on a full run's output: the records it did not select are set aside as not selected, not as gone from the input", async () => {
    const job = writeJob("part", "Is it fine?");
    const output = join(dir, "part.out.jsonl");
    const input = writeInput("part", records(40));
    expect((await runLifecycle(request(input, job, output, echo()))).verdict).toBe("done");
    const base = request(input, job, output, echo());
    const cases: [string, Partial<typeof base.settings>, number][] = [
      ["--limit 10", { limit: 10 }, 10],
      ["--sample 5", { sample: 5 }, 5],
      ["--shard 1/2", { shard: "1/2" }, -1],
    ];
    for (const [selection, settings, rows] of cases) {
      const again = echo();
      const end = await runLifecycle({ ...base, settings: { ...base.settings, ...settings }, openModel: async () => again });
      expect(end.verdict, selection).toBe("done");
      expect(again.calls, selection).toHaveLength(0);
      const written = lines(output).length;
      if (rows >= 0) expect(written, selection).toBe(rows);
      const summary = summaryOf(output) as unknown as UsageSummary;
      expect(summary.set_aside, selection).toMatchObject({ other_versions: 0, not_in_input: 0, not_selected: 40 - written, selection });
      expect(describeUsage(summary), selection).toContain(`${40 - written} for records this run did not select (${selection}) or no longer in the input`);
      expect(describeUsage(summary), selection).not.toContain("for records no longer in the input");
    }
    // The whole input again: nothing is set aside, nothing asked.
    const whole = echo();
    expect((await runLifecycle(request(input, job, output, whole))).verdict).toBe("done");
    expect(whole.calls).toHaveLength(0);
    expect(summaryOf(output).set_aside).toMatchObject({ other_versions: 0, not_in_input: 0 });
    expect(lines(output)).toHaveLength(40);
  });

  it("kept fields edited in the input under the same job: the output holds the values as read now, nothing asked; a third run journals no keep entry", async () => {
    const output = join(dir, "kept.out.jsonl");
    const job = join(dir, "kept.job.json");
    writeFileSync(job, JSON.stringify({ state: "text", id: "id", keep: ["meta"], questions: { ok: { type: "noul", instructions: "Is it fine?" } } }));
    const input = join(dir, "kept.jsonl");
    const write = (meta: string) =>
      writeFileSync(
        input,
        records(10)
          .map((r) => `${JSON.stringify({ ...r, meta })}\n`)
          .join(""),
      );
    write("m1");
    const first = await runLifecycle(request(input, job, output, echo()));
    expect(first.verdict).toBe("done");
    write("m2");
    const rerun = echo();
    expect((await runLifecycle(request(input, job, output, rerun))).verdict).toBe("done");
    expect(rerun.calls).toHaveLength(0);
    const kept = () =>
      readFileSync(output, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as { fields: { meta: string } }).fields.meta);
    expect(kept()).toEqual(Array(10).fill("m2"));
    const journal = first.paths?.journalPath ?? "";
    const keeps = () => readFileSync(journal, "utf8").split('"k":"keep"').length - 1;
    expect(keeps()).toBe(10);
    expect((await runLifecycle(request(input, job, output, echo()))).verdict).toBe("done");
    expect(keeps()).toBe(10);
    expect(kept()).toEqual(Array(10).fill("m2"));
  });

  it("the job edited between runs (a question reworded), 10 records failing under it: those 10 are failures, exit 1, never the old answers", async () => {
    const output = join(dir, "reword.out.jsonl");
    const input = writeInput("reword", records(50));
    expect((await runLifecycle(request(input, writeJob("reword", "Is it fine?"), output, echo()))).verdict).toBe("done");
    const failing = new Set(records(10).map((r) => r.text));
    const rerun = echo({ refuse: (text) => failing.has(text) });
    const end = await runLifecycle(request(input, writeJob("reword", "Is it really fine?"), output, rerun));
    expect(end.verdict).toBe("failures");
    expect(exitCodeOf(end)).toBe(1);
    // Every record asked again under the new wording; the 10 refused are in the errors file only.
    expect(rerun.calls).toHaveLength(50);
    expect(lines(output).map((r) => r.id)).toEqual(
      records(50, 0)
        .slice(10)
        .map((r) => r.id),
    );
    expect(lines(`${output}.errors.jsonl`).map((r) => r.id)).toEqual(records(10).map((r) => r.id));
    expect(summaryOf(output)).toMatchObject({ verdict: "failures", set_aside: { other_versions: 50, not_in_input: 0 } });
    // A rerun under the same wording retries exactly the failures.
    const again = echo();
    expect((await runLifecycle(request(input, writeJob("reword", "Is it really fine?"), output, again))).verdict).toBe("done");
    expect(asked(again).sort()).toEqual([...failing].sort());
  });

  it("a prompt the evaluator renders differently is asked again; a calibration changed between runs repays nothing", async () => {
    const job = writeJob("prompt", "Is it fine?");
    const output = join(dir, "prompt.out.jsonl");
    const input = writeInput("prompt", records(30));
    expect((await runLifecycle(request(input, job, output, echo({ fingerprint: "system text v1" })))).verdict).toBe("done");
    const reworded = echo({ fingerprint: "system text v2" });
    expect((await runLifecycle(request(input, job, output, reworded))).verdict).toBe("done");
    expect(reworded.calls).toHaveLength(30);
    const calibrated = echo({ fingerprint: "system text v2" });
    const shaping = { forceCalibration: false, auditSeed: 1, formats: {}, calibration: "batch" };
    const end = await runLifecycle(request(input, job, output, calibrated, { shaping }));
    // Batch calibration refuses to flatten the fake's identical answers, or applies; either way nothing is asked.
    expect(["done", "bad-input"]).toContain(end.verdict);
    expect(calibrated.calls).toHaveLength(0);
  });

  it("an endpoint whose model changes mid-run: every row names its model, the summary counts each and falls back to the requested name", async () => {
    const output = join(dir, "models.out.jsonl");
    const input = writeInput("models", records(40));
    const end = await runLifecycle(request(input, writeJob("models", "Is it fine?"), output, echo({ model: (call) => (call < 25 ? "up-1.0.0" : "up-1.1.0") })));
    expect(end.verdict).toBe("done");
    const rows = lines(output);
    expect(new Set(rows.map((r) => r.model))).toEqual(new Set(["up-1.0.0", "up-1.1.0"]));
    expect(summaryOf(output)).toMatchObject({ model: "default", answered_by: { "up-1.0.0": 25, "up-1.1.0": 15 } });
    // The warning does not claim when: the change may have come between runs of the output.
    expect(describeUsage(summaryOf(output) as unknown as UsageSummary)).toMatch(/model changed during this run or since an earlier run of this output/);
  });
  it("a run stopped before its outputs still names the models of its own answers (this_run.answered_by), and warns when there were two", async () => {
    const output = join(dir, "stopped-models.out.jsonl");
    const input = writeInput("stopped-models", records(200));
    const stop = new AbortController();
    const evaluator = echo({
      model: (call) => {
        if (call === 30) stop.abort();
        return call < 10 ? "up-1.0.0" : "up-1.1.0";
      },
    });
    const end = await runLifecycle(request(input, writeJob("stopped-models", "Is it fine?"), output, evaluator, { stop: stop.signal }));
    expect(end.verdict).toBe("stopped");
    expect(existsSync(output)).toBe(false);
    const summary = JSON.parse(readFileSync(`${output}.summary.json`, "utf8")) as UsageSummary;
    const by = summary.this_run?.answered_by ?? {};
    expect(by["up-1.0.0"]).toBe(10);
    expect(by["up-1.1.0"]).toBeGreaterThanOrEqual(10);
    expect(summary.this_run?.records.answered).toBe(Object.values(by).reduce((a, b) => a + b, 0));
    expect(summary.model).toBe("default");
    expect(describeUsage(summary)).toMatch(/answered by 2 models/);
    // One model: the stopped run's summary names it, not the alias asked for.
    const one = new AbortController();
    const single = echo({
      model: (call) => {
        if (call === 5) one.abort();
        return "up-2.0.0";
      },
    });
    const output2 = join(dir, "stopped-one.out.jsonl");
    expect((await runLifecycle(request(input, writeJob("stopped-one", "Is it fine?"), output2, single, { stop: one.signal }))).verdict).toBe("stopped");
    expect(JSON.parse(readFileSync(`${output2}.summary.json`, "utf8"))).toMatchObject({ model: "up-2.0.0", requested_model: "default" });
  });
});

/** A target whose writes fail as a full disk's do. */
function fullDisk(location: string): OutputTarget {
  return {
    describe: location,
    open: () => ({
      write: async () => {
        throw Object.assign(new Error(`ENOSPC: no space left on device, write`), { code: "ENOSPC", path: location });
      },
      commit: async () => undefined,
      abort: async () => undefined,
    }),
  };
}

describe("every write checked", () => {
  it.each([
    ["answers", ".out.jsonl"],
    ["errors", ".errors.jsonl"],
    ["usage summary", ".usage.json"],
    ["--summary-json", ".summary.json"],
  ])("a full disk at the %s after records were paid: exit 9, no output made final, the rerun asks only the failed record", async (_name, suffix) => {
    const name = `full-${suffix.replaceAll(".", "")}`;
    const output = join(dir, `${name}.out.jsonl`);
    const input = writeInput(name, records(20));
    const job = writeJob(name, "Is it fine?");
    const target = (location: string) => (location.endsWith(suffix) ? fullDisk(location) : targetOf(location));
    // One record fails, so every output has rows to write.
    const end = await runLifecycle(request(input, job, output, echo({ refuse: (text) => text === "text 3" }), { target }));
    expect(end.verdict).toBe("storage-unavailable");
    expect(exitCodeOf(end)).toBe(9);
    if (suffix !== ".summary.json") expect(summaryOf(output).verdict).toBe("storage-unavailable");
    if (suffix === ".out.jsonl" || suffix === ".errors.jsonl") expect(existsSync(output)).toBe(false);
    const rerun = echo();
    expect((await runLifecycle(request(input, job, output, rerun))).verdict).toBe("done");
    expect(asked(rerun)).toEqual(["text 3"]);
    expect(lines(output)).toHaveLength(20);
  });

  it("an output whose reader closed it (EPIPE) ends the run stopped with SIGPIPE's code, 141, the journal kept; the rerun asks nothing", async () => {
    const output = join(dir, "closed.out.jsonl");
    const input = writeInput("closed", records(20));
    const job = writeJob("closed", "Is it fine?");
    const closed = (location: string): OutputTarget =>
      location.endsWith(".out.jsonl")
        ? {
            describe: "stdout",
            open: () => ({
              write: async () => {
                throw new OutputClosedError("whoever read the output closed it (EPIPE)");
              },
              commit: async () => undefined,
              abort: async () => undefined,
            }),
          }
        : targetOf(location);
    const end = await runLifecycle(request(input, job, output, echo(), { target: closed }));
    expect(end).toMatchObject({ verdict: "stopped", signal: "SIGPIPE" });
    expect(exitCodeOf(end)).toBe(141);
    expect(verdictLine(end)).toMatch(/^typed-eval: stopped: the output was closed: .*EPIPE/);
    // The reader may have had rows (`| head -1`): the line does not say none was written.
    expect(verdictLine(end)).toMatch(/Whatever the reader took is not the whole output/);
    expect(verdictLine(end)).not.toMatch(/No output was written/);
    const rerun = echo();
    expect((await runLifecycle(request(input, job, output, rerun))).verdict).toBe("done");
    expect(rerun.calls).toHaveLength(0);
  });

  it("a failed summary leaves a run that did not succeed with its own code", async () => {
    const output = join(dir, "full-stop.out.jsonl");
    const input = writeInput("full-stop", records(20));
    const stop = new AbortController();
    stop.abort();
    const target = (location: string) => (location.endsWith(".summary.json") ? fullDisk(location) : targetOf(location));
    const end = await runLifecycle(request(input, writeJob("full-stop", "Is it fine?"), output, echo(), { target, stop: stop.signal }));
    expect(end.verdict).toBe("stopped");
  });
});

describe("endings", () => {
  it("a run refused by a live lock writes none of the holder's files: not its usage summary, not its --summary-json", async () => {
    const output = join(dir, "held.out.jsonl");
    const input = writeInput("held", records(5));
    const job = writeJob("held", "Is it fine?");
    const theirs = `${output}.summary.json`;
    writeFileSync(theirs, '{"theirs":true}\n');
    writeFileSync(`${output}.usage.json`, '{"theirs":true}\n');
    const lock = acquireLock(`${output}.journal.lock`, resolve(theirs));
    // Held by a live process of this host (the parent), naming its --summary-json.
    const held = JSON.parse(readFileSync(`${output}.journal.lock`, "utf8")) as object;
    writeFileSync(`${output}.journal.lock`, JSON.stringify({ ...held, pid: process.ppid }));
    try {
      const same = await runLifecycle(request(input, job, output, echo()));
      expect(same.verdict).toBe("locked");
      expect(exitCodeOf(same)).toBe(7);
      expect(readFileSync(theirs, "utf8")).toBe('{"theirs":true}\n');
      expect(readFileSync(`${output}.usage.json`, "utf8")).toBe('{"theirs":true}\n');
      // Its own --summary-json, elsewhere, says locked.
      const mine = join(dir, "held.mine.json");
      const other = await runLifecycle(request(input, job, output, echo(), { places: { output, summaryJson: mine } }));
      expect(other.verdict).toBe("locked");
      expect(JSON.parse(readFileSync(mine, "utf8"))).toMatchObject({ verdict: "locked" });
      expect(readFileSync(`${output}.usage.json`, "utf8")).toBe('{"theirs":true}\n');
    } finally {
      writeFileSync(`${output}.journal.lock`, JSON.stringify(held));
      lock.release();
    }
  });

  it("a run that ends before paying (input deleted: 6; the journal of another input: 2) leaves the last good run's usage summary; --summary-json says why", async () => {
    const output = join(dir, "unpaid.out.jsonl");
    const input = writeInput("unpaid", records(12));
    const job = writeJob("unpaid", "Is it fine?");
    expect((await runLifecycle(request(input, job, output, echo()))).verdict).toBe("done");
    const usage = readFileSync(`${output}.usage.json`, "utf8");
    expect(JSON.parse(usage)).toMatchObject({ verdict: "done", records: { answered: 12 } });
    const other = writeInput("unpaid-other", records(3));
    const mismatch = await runLifecycle(request(other, job, output, echo()));
    expect(exitCodeOf(mismatch)).toBe(2);
    expect(readFileSync(`${output}.usage.json`, "utf8")).toBe(usage);
    expect(summaryOf(output).verdict).toBe("bad-input");
    rmSync(input);
    const gone = await runLifecycle(request(input, job, output, echo()));
    expect(exitCodeOf(gone)).toBe(6);
    expect(readFileSync(`${output}.usage.json`, "utf8")).toBe(usage);
    expect(summaryOf(output).verdict).toBe("no-input");
  });

  it("a wall clock stepped back an hour mid-run: the summary's seconds are elapsed time (monotonic), never negative", async () => {
    const output = join(dir, "stepped.out.jsonl");
    const input = writeInput("stepped", records(10));
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() });
    try {
      const evaluator = new FakeEvaluator(async (r, call) => {
        if (call === 3) vi.setSystemTime(Date.now() - 3_600_000);
        return { response: { model: "m-1.0.0", answers: plausibleAnswers(r.questions), usage: { input_tokens: 1, output_tokens: 1 } } };
      });
      expect((await runLifecycle(request(input, writeJob("stepped", "Is it fine?"), output, evaluator))).verdict).toBe("done");
    } finally {
      vi.useRealTimers();
    }
    const summary = JSON.parse(readFileSync(`${output}.summary.json`, "utf8")) as { seconds: number; this_run: { seconds: number } };
    expect(summary.seconds).toBeGreaterThanOrEqual(0);
    expect(summary.seconds).toBeLessThan(60);
    expect(summary.this_run.seconds).toBeGreaterThanOrEqual(0);
  });

  it("the closing line names the journal only when it holds finished records", async () => {
    const output = join(dir, "closing.out.jsonl");
    const input = writeInput("closing", records(20));
    const job = writeJob("closing", "Is it fine?");
    const stop = new AbortController();
    stop.abort();
    // Stopped before anything finished: nothing is kept, and the line says nothing about it.
    const early = await runLifecycle(request(input, job, output, echo(), { stop: stop.signal }));
    expect(early.verdict).toBe("stopped");
    expect(early.journal).toBeUndefined();
    expect(verdictLine(early)).not.toMatch(/Finished records are kept/);
    const later = new AbortController();
    const evaluator = new FakeEvaluator(async (r, call) => {
      if (call === 5) later.abort();
      return { response: { model: "m-1.0.0", answers: plausibleAnswers(r.questions), usage: { input_tokens: 1, output_tokens: 1 } } };
    });
    const stopped = await runLifecycle(request(input, job, output, evaluator, { stop: later.signal }));
    expect(stopped.verdict).toBe("stopped");
    expect(verdictLine(stopped)).toMatch(/Finished records are kept in .*closing\.out\.jsonl\.journal/);
  });
});

describe("an address that is not the API", () => {
  it.each([
    ["a 404 page (a --base-url ending in /v1)", 404],
    ["a 501 page (a static file server)", 501],
  ])("%s: exit 2 naming --base-url at the first answers, not 20 paid attempts; one short line", async (_name, status) => {
    let requests = 0;
    const upstream = await startUpstream((_req, res) => {
      requests++;
      res.writeHead(status, { "content-type": "text/html" });
      res.end(`<!DOCTYPE HTML>\n<html><body>\n<h1>Error response</h1>\n<p>Error code: ${status}</p>\n${"<p>explanation</p>\n".repeat(20)}</body></html>\n`);
    });
    try {
      const output = join(dir, `notapi${status}.out.jsonl`);
      const remote = new RemoteEvaluator({ baseUrl: `${upstream.url}/v1`, timeoutMs: 2000, retry: { maxRetries: 0 } });
      const end = await runLifecycle(
        request(writeInput(`notapi${status}`, records(40)), writeJob(`notapi${status}`, "Is it fine?"), output, remote, { maxRetries: 3 }),
      );
      expect(end.verdict).toBe("bad-input");
      expect(exitCodeOf(end)).toBe(2);
      expect(end.reason).toMatch(/not a System One API; check --base-url/);
      expect(verdictLine(end).trim().split("\n")).toHaveLength(2);
      // About the first answers of those sent at once (concurrency 4), none retried: not 20 records with their retries.
      expect(requests).toBeLessThanOrEqual(8);
    } finally {
      await upstream.close();
    }
  });
});
