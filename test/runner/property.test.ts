/**
 * The property `done` stands on, checked on the real lifecycle (runLifecycle,
 * in process) with real files: whatever happens during a run (a stop at any
 * moment, a second signal, an input whose reading fails, the endpoint
 * failing records or going down) and whatever changed since the last run
 * (records deleted at the top, edited under the same id, appended; a
 * question reworded), exit 0 means the output holds exactly one row per
 * record of the current input, in input order, each answered for the
 * record's current request (its text and the job's current wording). And
 * whatever a run ended in, a rerun with nothing failing ends done with
 * exactly those rows: nothing is left that blocks it.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { UnprocessableEntityError, UpstreamError, UpstreamUnavailableError } from "../../src/api/errors.js";
import type { SystemOneRequest } from "../../src/api/schema.js";
import { exitCodeOf } from "../../src/api/verdict.js";
import { createLogger } from "../../src/logging/logger.js";
import { fnv1a } from "../../src/records/hash.js";
import { runLifecycle } from "../../src/runner/run.js";
import { plausibleAnswers } from "../support/answers.js";
import { FakeEvaluator } from "../support/fake-evaluator.js";
import { lifecycleRequest } from "../support/lifecycle.js";

const SOAK = process.env["SOAK"] === "1";
const _logger = createLogger({ level: "silent" });

/** The answer a record's current request gets: a function of its text and the question's wording, so a stale answer shows. */
function truth(text: string, wording: string): number {
  return ((fnv1a(`${text}|${wording}`) % 997) + 1) / 1000;
}

interface Fault {
  at: number;
  kind: "500" | "422" | "down";
}

interface RunPlan {
  /** Edits before this run (ignored for the first). */
  deleteTop: number;
  edit: number | null;
  append: number;
  reword: boolean;
  /**
   * When SIGTERM comes (null: never): at an evaluator call counted from the
   * start, or from the end (the last records in hand, the reading at its end:
   * where a stop was once taken for the input's end). A second signal may follow at once.
   */
  stopAt: { fromStart: number } | { fromEnd: number } | null;
  twice: boolean;
  faults: Fault[];
  /** Cut the end off a gzip input: its reading fails near the end. */
  truncate: boolean;
}

const plan: fc.Arbitrary<RunPlan> = fc.record({
  deleteTop: fc.integer({ min: 0, max: 5 }),
  edit: fc.option(fc.nat(40)),
  append: fc.integer({ min: 0, max: 5 }),
  reword: fc.boolean(),
  stopAt: fc.option(fc.oneof(fc.record({ fromStart: fc.nat(44) }), fc.record({ fromEnd: fc.nat(14) })), { freq: 4 }),
  twice: fc.boolean(),
  faults: fc.array(fc.record({ at: fc.nat(48), kind: fc.constantFrom("500" as const, "422" as const, "down" as const) }), { maxLength: 3 }),
  truncate: fc.boolean(),
});

const scenario = fc.record({
  records: fc.integer({ min: 1, max: 40 }),
  concurrency: fc.integer({ min: 1, max: 6 }),
  gzip: fc.boolean(),
  runs: fc.array(plan, { minLength: 1, maxLength: 3 }),
});

type Scenario = typeof scenario extends fc.Arbitrary<infer T> ? T : never;

/** One scenario in its own folder: the input and the job as they are now, and the runs over them. */
class World {
  readonly dir = mkdtempSync(join(tmpdir(), "te-property-"));
  records: { id: string; text: string }[] = [];
  wording = 0;
  private next = 0;
  readonly output = join(this.dir, "out.jsonl");
  readonly input: string;
  readonly job = join(this.dir, "job.json");

  constructor(
    count: number,
    private readonly gzip: boolean,
  ) {
    this.input = join(this.dir, gzip ? "in.jsonl.gz" : "in.jsonl");
    for (let i = 0; i < count; i++) this.add();
  }

  private add(): void {
    const id = `r${this.next++}`;
    this.records.push({ id, text: `text of ${id}` });
  }

  change(p: RunPlan): void {
    this.records.splice(0, Math.min(p.deleteTop, this.records.length - 1));
    const edited = p.edit === null ? undefined : this.records[p.edit % this.records.length];
    if (edited) edited.text = `${edited.text} (edited)`;
    for (let i = 0; i < p.append; i++) this.add();
    if (p.reword) this.wording++;
  }

  get instructions(): string {
    return `Is it fine? (wording ${this.wording})`;
  }

  /** Writes the input and the job as they are now; a truncated gzip input fails near its end. */
  write(truncate: boolean): void {
    const text = `${this.records.map((r) => JSON.stringify(r)).join("\n")}\n`;
    writeFileSync(this.input, this.gzip ? gzipSync(text) : text);
    if (this.gzip && truncate) truncateSync(this.input, Math.max(12, readFileSync(this.input).length - 9));
    writeFileSync(this.job, JSON.stringify({ state: "text", id: "id", questions: { ok: { type: "noul", instructions: this.instructions } } }));
  }

  /** The evaluator of one run: each answer its request's truth; SIGTERM and faults at given calls. */
  evaluator(p: RunPlan | undefined, stop: AbortController, now: AbortController): FakeEvaluator {
    const stopAt = !p?.stopAt ? -1 : "fromStart" in p.stopAt ? p.stopAt.fromStart : this.records.length - 1 - p.stopAt.fromEnd;
    return new FakeEvaluator(async (request: SystemOneRequest, call) => {
      if (call === stopAt && p) {
        stop.abort();
        if (p.twice) now.abort();
      }
      await new Promise((resolve) => setTimeout(resolve, call % 3));
      const fault = p?.faults.find((f) => f.at === call)?.kind;
      if (fault === "500") throw new UpstreamError(500, "boom");
      if (fault === "422") throw new UnprocessableEntityError([{ type: "value_error", loc: ["body", "state"], msg: "refused" }]);
      if (fault === "down") throw new UpstreamUnavailableError("connection refused", { unreachable: true });
      const question = request.questions["ok"] as { instructions?: string };
      const noul = truth(String(request.state), question.instructions ?? "");
      return { response: { model: "fake-1.0.0", answers: plausibleAnswers(request.questions, noul), usage: { input_tokens: 1, output_tokens: 1 } } };
    });
  }

  async run(p: RunPlan | undefined): Promise<{ code: number; verdict: string }> {
    this.write(p?.truncate ?? false);
    const stop = new AbortController();
    const now = new AbortController();
    const evaluator = this.evaluator(p, stop, now);
    const request = lifecycleRequest(this.input, this.job, this.output, evaluator, {
      settings: {
        input: this.input,
        jobFile: this.job,
        model: "default",
        apiKeyEnv: "TYPED_EVAL_API_KEY",
        timeoutSeconds: 5,
        seed: 1,
        concurrency: this.concurrency,
      },
      places: { output: this.output, summaryJson: join(this.dir, "summary.json") },
      graceMs: 200,
      stop: stop.signal,
      stopNow: now.signal,
    });
    const end = await runLifecycle(request);
    const summary = JSON.parse(readFileSync(join(this.dir, "summary.json"), "utf8")) as { verdict: string };
    expect(summary.verdict).toBe(end.verdict);
    expect(existsSync(`${this.output}.journal.lock`), "the lock is released whatever the verdict").toBe(false);
    return { code: exitCodeOf(end), verdict: end.verdict };
  }

  concurrency = 1;

  /** Exit 0: exactly the current input's records, in order, each answered for its current request. */
  expectTruth(): void {
    const rows = readFileSync(this.output, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { id: string; answers: { ok: { noul: number } } });
    expect(rows.map((r) => r.id)).toEqual(this.records.map((r) => r.id));
    const texts = new Map(this.records.map((r) => [r.id, r.text]));
    for (const row of rows) expect(row.answers.ok.noul, `row ${row.id}`).toBe(truth(texts.get(row.id) ?? "", this.instructions));
  }
}

/** The counts of what the scenarios ended in, printed with the figure. */
const seen = new Map<string, number>();

async function check(s: Scenario): Promise<void> {
  const world = new World(s.records, s.gzip);
  world.concurrency = s.concurrency;
  try {
    for (const [i, p] of s.runs.entries()) {
      if (i > 0) world.change(p);
      const { code, verdict } = await world.run(p);
      seen.set(verdict, (seen.get(verdict) ?? 0) + 1);
      if (code === 0) world.expectTruth();
    }
    // Whatever the last run ended in, a rerun with nothing failing completes exactly the current input.
    const rerun = await world.run(undefined);
    expect(rerun.verdict).toBe("done");
    world.expectTruth();
  } finally {
    rmSync(world.dir, { recursive: true, force: true });
  }
}

describe("the done property", () => {
  it("exit 0 means exactly one row per record of the current input, answered for its current request; a clean rerun always completes", {
    timeout: SOAK ? 1_800_000 : 60_000,
  }, async () => {
    const numRuns = SOAK ? 500 : 20;
    await fc.assert(fc.asyncProperty(scenario, check), { numRuns });
    console.log(JSON.stringify({ figure: "done property", scenarios: numRuns, verdicts: Object.fromEntries([...seen].sort()) }));
    // The scenarios reached the endings they are meant to: stops, failures and done among them.
    expect(seen.get("done")).toBeGreaterThan(0);
    expect(seen.get("stopped")).toBeGreaterThan(0);
  });
});
