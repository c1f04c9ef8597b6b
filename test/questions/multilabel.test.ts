/**
 * The question-type recipe, proved: a multi-label type defined in the test
 * suite only (`multilabel.ts`), registered in process, goes end to end
 * (server excluded) with nothing else changed: asked through the local
 * evaluator on the tiny model, run to JSONL, CSV and Parquet, assessed,
 * calibrated, thresholded, routed to review, reported and exported to Label
 * Studio, each of its options a unit of its own. The wire stays the spec's:
 * the server's validation and the remote evaluator refuse the type. And the
 * files that name the type are counted: adding it took at most four.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { parse as parseCsv } from "csv-parse/sync";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { responseViolations } from "../../src/api/consistency.js";
import { buildOpenAPIDocument } from "../../src/api/openapi.js";
import type { EvaluatorRequest } from "../../src/api/schema.js";
import { validateEvaluatorRequest, validateRequest } from "../../src/api/validate.js";
import { LlamaEngine } from "../../src/engines/llama.js";
import { LocalEvaluator } from "../../src/evaluator/local.js";
import { detectTemplate } from "../../src/evaluator/prompt.js";
import { RemoteEvaluator } from "../../src/evaluator/remote.js";
import { findKind, registerKind, unitsOf } from "../../src/questions/index.js";
import { parseJob } from "../../src/records/job.js";
import { reviewThresholds } from "../../src/runner/output/review.js";
import { runInProcess } from "../support/cli.js";
import { generatedModel, TINY } from "../support/models.js";
import { multilabel, type MultiLabelAnswer, registerMultiLabel } from "./multilabel.js";

const ROOT = resolve(import.meta.dirname, "../..");
const TICKETS = join(ROOT, "examples/data/tickets.jsonl");

registerMultiLabel();

const topics = {
  type: "multilabel",
  instructions: "Which topics does the ticket raise?",
  criteria: { shipping: "Deliveries, parcels, couriers", billing: "Charges, invoices, refunds", account: null },
};
const job = {
  state: "ticket",
  id: "ticket_id",
  questions: { topics, urgent: { type: "noul", instructions: "Is it urgent?" } },
};
const UNITS = ["topics.shipping", "topics.billing", "topics.account", "urgent"];

describe("a multi-label type registered in process", () => {
  const dir = mkdtempSync(join(tmpdir(), "te-multilabel-"));
  const model = generatedModel(TINY);
  const jobFile = join(dir, "job.json");
  writeFileSync(jobFile, JSON.stringify(job));
  const journal = join(dir, "run.journal");
  const env = { TYPED_EVAL_LOG_LEVEL: "warn", TYPED_EVAL_THREADS: "1" };
  const run = (...args: string[]) => runInProcess(["run", TICKETS, "--job", jobFile, "--model-path", model, "--journal", journal, ...args], env);
  const cli = (...args: string[]) => runInProcess(args, env, { cwd: dir });

  it("takes at most four files, each named here: the type, this test and the golden test that registers it", () => {
    const skip = new Set(["node_modules", ".git", "dist", "models", "out", ".cache", ".typed-eval"]);
    const files = (at: string): string[] =>
      readdirSync(at, { withFileTypes: true }).flatMap((e) =>
        skip.has(e.name) ? [] : e.isDirectory() ? files(join(at, e.name)) : /\.(ts|js|json|md|jsonl|csv)$/.test(e.name) ? [join(at, e.name)] : [],
      );
    // A file names the type when it holds its tag or imports its module.
    const naming = files(ROOT)
      .filter((f) => /"multilabel"|\/multilabel\.js"/.test(readFileSync(f, "utf8")))
      .map((f) => relative(ROOT, f))
      .sort();
    expect(naming).toEqual(["test/golden/golden.test.ts", "test/questions/multilabel.test.ts", "test/questions/multilabel.ts"]);
    expect(naming.length).toBeLessThanOrEqual(4);
  });

  it("leaves the wire as the spec's: the server's validation refuses it, the OpenAPI document does not name it", () => {
    expect(findKind("multilabel")?.parts).toBeDefined();
    const body = { state: "s", model: "m", questions: { topics } };
    const wire = validateRequest(body);
    expect(wire.ok).toBe(false);
    expect(!wire.ok && wire.errors[0]).toMatchObject({
      type: "union_tag_invalid",
      loc: ["body", "questions", "topics"],
      ctx: { expected_tags: "'noul', 'choice', 'score'" },
    });
    expect(validateEvaluatorRequest(body).ok).toBe(true);
    expect(JSON.stringify(buildOpenAPIDocument())).not.toMatch(/multi/i);
    const bad = validateEvaluatorRequest({ ...body, questions: { topics: { ...topics, criteria: {} } } });
    expect(!bad.ok && bad.errors[0]?.loc).toEqual(["body", "questions", "topics", "multilabel", "criteria"]);
  });

  it("is refused by the remote evaluator before anything is sent, and by a run on a remote endpoint before its first request", async () => {
    // Port 9 (discard): were anything sent, the error would be an unreachable endpoint, not this one.
    const remote = new RemoteEvaluator({ baseUrl: "http://127.0.0.1:9", timeoutMs: 1000 });
    await expect(remote.evaluate({ state: "s", model: "m", questions: { topics } } as EvaluatorRequest)).rejects.toThrow(
      /takes the spec's question types only: question topics is a multilabel question, a type registered in this process/,
    );
    await remote.close();
    const r = await runInProcess(
      [
        "run",
        TICKETS,
        "--job",
        jobFile,
        "--base-url",
        "http://127.0.0.1:9",
        "--no-api-key",
        "-o",
        join(dir, "remote.jsonl"),
        "--journal",
        join(dir, "remote.journal"),
      ],
      env,
    );
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/question topics is a multilabel question.*ask it with the embedded model/);
    expect(existsSync(join(dir, "remote.journal"))).toBe(false);
  });

  it("is a job's question like any other: its parts have review thresholds of their own, and no question may take a part's name", () => {
    registerMultiLabel();
    expect(() => registerKind({ ...multilabel })).toThrow(/a question type "multilabel" is registered already/);
    const parsed = parseJob({ ...job, review_below: { topics: 0.8, "topics.account": 0.6 } }, "j");
    expect(reviewThresholds(parsed.questions, parsed.review_below as Record<string, number>)).toEqual({
      "topics.shipping": 0.8,
      "topics.billing": 0.8,
      "topics.account": 0.6,
    });
    expect(reviewThresholds(parsed.questions, 0.7)).toEqual(Object.fromEntries(UNITS.map((u) => [u, 0.7])));
    expect(() => parseJob({ ...job, review_below: { "topics.other": 0.5 } }, "j")).toThrow(/review_below\.topics\.other: no such question or part/);
    expect(() => parseJob({ questions: { ...job.questions, "topics.billing": { type: "noul" } } }, "j")).toThrow(
      /questions\.topics\.billing: the name of a part of topics/,
    );
    expect(() => parseJob({ questions: { topics: { ...topics, criteria: { a: null }, extra: 1 } } }, "j")).toThrow(
      /topics\.multilabel\.extra: Extra inputs are not permitted/,
    );
  });

  describe("through the local evaluator on the tiny model", () => {
    let engine: LlamaEngine;
    let evaluator: LocalEvaluator;
    beforeAll(async () => {
      engine = await LlamaEngine.load({ modelPath: model, contextSize: 2048, sequences: 1, threads: 1 });
      evaluator = new LocalEvaluator(engine, { id: "tiny-1.0.0", temperature: 1, template: detectTemplate(engine.chatTemplate), metadata: [] });
    });
    afterAll(async () => evaluator.close());

    it("answers each option as the noul it is a part of, bit for bit, and the answer keeps its rules", async () => {
      const request = { state: "My parcel is late and I was charged twice.", model: "tiny", questions: { topics } } as EvaluatorRequest;
      const { response, labelMass } = await evaluator.evaluate(request);
      const answer = response.answers["topics"] as MultiLabelAnswer;
      expect(answer.type).toBe("multilabel");
      expect(Object.keys(answer.probabilities)).toEqual(["shipping", "billing", "account"]);
      expect(responseViolations(request, response)).toEqual([]);
      expect(Object.keys(labelMass ?? {})).toEqual(["topics.shipping", "topics.billing", "topics.account"]);
      // The parts asked as nouls of their own: the same prompts (one type asked, the noul), the same bits.
      const parts = Object.fromEntries([...unitsOf(request.questions)].map(([name, unit]) => [name, unit.question]));
      const direct = await evaluator.evaluate({ ...request, questions: parts });
      for (const option of Object.keys(topics.criteria)) {
        expect(direct.response.answers[`topics.${option}`]).toEqual({ type: "noul", noul: answer.probabilities[option] });
      }
      expect(direct.response.usage).toEqual(response.usage);
      expect(evaluator.promptText(request)).toContain('Does "billing" apply?');
    });
  });

  it("runs to JSONL, CSV and Parquet; is assessed, calibrated, thresholded, routed to review, reported and exported to Label Studio", {
    timeout: 60_000,
  }, async () => {
    const jsonl = await run("-o", join(dir, "out.jsonl"), "--review-below", "0.9");
    expect(jsonl.code, jsonl.stderr).toBe(0);
    const rows = readFileSync(join(dir, "out.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { id: string; answers: { topics: MultiLabelAnswer; urgent: { noul: number } }; label_mass: Record<string, number> });
    expect(rows).toHaveLength(24);
    expect(Object.keys(rows[0]!.label_mass)).toEqual(UNITS);
    // The same journal as CSV and Parquet: each option's columns as a noul's, named by its unit.
    for (const format of ["csv", "parquet"]) {
      const r = await run("-o", join(dir, `out.${format}`));
      expect(r.code, r.stderr).toBe(0);
    }
    const csv = parseCsv(readFileSync(join(dir, "out.csv")), { columns: true }) as Record<string, string>[];
    for (const unit of UNITS) expect(Object.keys(csv[0]!)).toEqual(expect.arrayContaining([`${unit}.noul`, `${unit}.label_mass`]));
    csv.forEach((row, i) => expect(Number(row["topics.billing.noul"])).toBe(rows[i]!.answers.topics.probabilities["billing"]));
    const duck = await (await DuckDBInstance.create(":memory:")).connect();
    const parquet = (await duck.runAndReadAll(`SELECT "topics.account.noul" AS p FROM '${join(dir, "out.parquet")}' ORDER BY line`)).getRowObjects();
    parquet.forEach((row, i) => expect(row["p"]).toBe(rows[i]!.answers.topics.probabilities["account"]));
    duck.closeSync();

    // Review routing: each option has its own threshold, and a row names the options below it.
    const review = readFileSync(join(dir, "out.jsonl.review.jsonl"), "utf8").trim().split("\n");
    const reasons = review.flatMap((l) => (JSON.parse(l) as { review_reasons: { question: string }[] }).review_reasons.map((r) => r.question));
    expect(reasons.filter((r) => !UNITS.includes(r))).toEqual([]);
    expect(reasons.some((r) => r.startsWith("topics."))).toBe(true);

    // Gold labels by unit, the way a person writes them: agreeing with the model but on every third row.
    const gold = [`id,${UNITS.join(",")}`];
    rows.forEach((row, i) => {
      const p = [...Object.values(row.answers.topics.probabilities), row.answers.urgent.noul];
      gold.push([row.id, ...p.map((x, j) => (x >= 0.5 !== ((i + j) % 3 === 0) ? "yes" : "no"))].join(","));
    });
    writeFileSync(join(dir, "gold.csv"), `${gold.join("\n")}\n`);

    // Assess: from the JSONL with the job, and from CSV and Parquet by their headers alone: the same units, the same numbers.
    const assessed = async (answers: string, ...more: string[]) => {
      const r = await cli("assess", answers, "--gold", "gold.csv", "--json", "--bootstrap", "20", ...more);
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout) as { questions: { name: string; type: string; n: number; metrics: Record<string, number> }[] };
    };
    const a = await assessed("out.jsonl", "--job", "job.json");
    expect(a.questions.map((q) => [q.name, q.type, q.n])).toEqual(UNITS.map((u) => [u, "noul", 24]));
    expect(a.questions[0]?.metrics["accuracy"]).toBeGreaterThan(0);
    for (const answers of ["out.csv", "out.parquet"]) expect((await assessed(answers)).questions).toEqual(a.questions);

    // Calibrate each option on the gold, apply it on a rerun that asks the model nothing, and read it back.
    const calibrated = await cli("calibrate", "out.jsonl", "--gold", "gold.csv", "--job", "job.json", "--method", "platt", "-o", "calibration.json");
    expect(calibrated.code, calibrated.stderr).toBe(0);
    const file = JSON.parse(readFileSync(join(dir, "calibration.json"), "utf8")) as { questions: Record<string, { type: string; labels: string[] }> };
    expect(Object.entries(file.questions).map(([name, q]) => [name, q.type, q.labels])).toEqual(UNITS.map((u) => [u, "noul", ["false", "true"]]));
    const rerun = await run("-o", join(dir, "calibrated.jsonl"), "--calibration", join(dir, "calibration.json"));
    expect(rerun.code, rerun.stderr).toBe(0);
    const after = readFileSync(join(dir, "calibrated.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { answers: { topics: MultiLabelAnswer }; raw: Record<string, number> });
    expect(Object.keys(after[0]!.raw)).toEqual(UNITS);
    after.forEach((row, i) => {
      expect(row.raw["topics.billing"]).toBe(rows[i]!.answers.topics.probabilities["billing"]);
      expect(findKind("multilabel")?.violations("t", topics as never, row.answers.topics as never)).toEqual([]);
    });
    expect(after.some((row, i) => row.answers.topics.probabilities["billing"] !== rows[i]!.answers.topics.probabilities["billing"])).toBe(true);
    const raw = await assessed("calibrated.jsonl", "--job", "job.json", "--raw");
    expect(raw.questions.map((q) => q.metrics["brier"])).toEqual(a.questions.map((q) => q.metrics["brier"]));

    // Thresholds and the report, per option.
    const thresholds = await cli("thresholds", "out.jsonl", "--gold", "gold.csv", "--job", "job.json", "--target-accuracy", "0.6");
    expect(thresholds.code, thresholds.stderr).toBe(0);
    for (const unit of UNITS) expect(thresholds.stdout).toContain(unit);
    const report = await cli("report", "out.jsonl", "--job", "job.json", "--gold", "gold.csv", "--json", "-o", "report.html");
    expect(report.code, report.stderr).toBe(0);
    expect((JSON.parse(report.stdout) as { questions: { name: string }[] }).questions.map((q) => q.name)).toEqual(UNITS);

    // Label Studio: one control per option, the model's answer pre-filled, read back as gold.
    const exported = await cli(
      "labelstudio",
      "export",
      "out.jsonl.review.jsonl",
      "--job",
      "job.json",
      "-o",
      "tasks.json",
      "--config",
      "config.xml",
      "--input",
      TICKETS,
    );
    expect(exported.code, exported.stderr).toBe(0);
    const config = readFileSync(join(dir, "config.xml"), "utf8");
    for (const unit of UNITS) expect(config).toContain(`name="te_q_${unit.replace(".", "_")}"`);
    const tasks = JSON.parse(readFileSync(join(dir, "tasks.json"), "utf8")) as {
      predictions: { result: { from_name: string; value: { choices: string[] } }[] }[];
    }[];
    expect(tasks).toHaveLength(review.length);
    expect(tasks[0]?.predictions[0]?.result.map((r) => r.from_name)).toEqual(UNITS.map((u) => `te_q_${u.replace(".", "_")}`));
  });
});
