/**
 * The prompt format has a name (issue 35): every row and the usage summary
 * record it, `--print-prompt` shows it, and a run resumed under another
 * format asks again, setting the other format's entries aside (never
 * written). On the real embedded engine and a generated model.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "csv-parse/sync";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LlamaEngine } from "../../src/engines/llama.js";
import type { Evaluation, Evaluator } from "../../src/evaluator/evaluator.js";
import { LocalEvaluator } from "../../src/evaluator/local.js";
import { detectTemplate, PROMPT_FORMAT } from "../../src/evaluator/prompt.js";
import { describe as describeUsage, type UsageSummary } from "../../src/records/usage.js";
import { runLifecycle } from "../../src/runner/run.js";
import { runInProcess } from "../support/cli.js";
import { plausibleAnswers } from "../support/answers.js";
import { lifecycleRequest } from "../support/lifecycle.js";
import { generatedModel, TINY } from "../support/models.js";
import { sendJson, startUpstream } from "../support/upstream.js";
import { PROMPT_FORMAT_HEADER } from "../../src/api/prompt-format.js";
import type { SystemOneRequest } from "../../src/api/schema.js";

const dir = mkdtempSync(join(tmpdir(), "te-prompt-format-"));
const at = (name: string) => join(dir, name);
let modelPath: string;
let local: LocalEvaluator;

const N = 6;
const job = {
  model: "default",
  state: "text",
  id: "id",
  questions: {
    urgent: { type: "noul", instructions: "Is it urgent?" },
    team: { type: "choice", criteria: { shipping: null, billing: "Charges" } },
  },
};

beforeAll(async () => {
  modelPath = generatedModel(TINY);
  writeFileSync(at("job.json"), JSON.stringify(job));
  writeFileSync(at("in.jsonl"), Array.from({ length: N }, (_, i) => `${JSON.stringify({ id: `T${i}`, text: `Ticket ${i}: my parcel is late.` })}\n`).join(""));
  const engine = await LlamaEngine.load({ modelPath, contextSize: 4096, sequences: 1 });
  local = new LocalEvaluator(engine, { id: "tiny-1.0.0", temperature: 1, template: detectTemplate(engine.chatTemplate), metadata: [] });
}, 60_000);

afterAll(async () => {
  await local?.close();
  rmSync(dir, { recursive: true, force: true });
});

const cli = (args: string[]) => runInProcess(args, { TYPED_EVAL_MODEL_PATH: modelPath, TYPED_EVAL_LOG_LEVEL: "error" }, { cwd: dir });
const rows = (path: string) =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { id: string; prompt_format?: string; answers: Record<string, { noul?: number }> });
const summaryOf = (output: string) => JSON.parse(readFileSync(`${output}.usage.json`, "utf8")) as UsageSummary;

/** The same embedded model as released under another prompt format: what a release that renames the format looks like to a run. */
function releasedAs(format: string, asked: { n: number }): Evaluator {
  return Object.assign(Object.create(local) as LocalEvaluator, {
    promptFormat: () => format,
    evaluate: async (...args: Parameters<LocalEvaluator["evaluate"]>): Promise<Evaluation> => {
      asked.n++;
      return { ...(await local.evaluate(...args)), promptFormat: format };
    },
    // A run closes its model at its end; the next run here asks the same one.
    close: async () => undefined,
  });
}

describe("the prompt format", () => {
  it("is named in every row (JSONL and CSV), in the usage summary and by --print-prompt", async () => {
    const out = at("named.jsonl");
    expect((await cli(["run", "in.jsonl", "--job", "job.json", "-o", out])).code).toBe(0);
    expect(PROMPT_FORMAT).toMatch(/^typed-eval\/\d+$/);
    expect(rows(out).map((r) => r.prompt_format)).toEqual(Array(N).fill(PROMPT_FORMAT));
    expect(summaryOf(out).prompt_format).toBe(PROMPT_FORMAT);
    // The same journal as CSV: the column beside the rows' other provenance.
    const csv = at("named.csv");
    expect((await cli(["run", "in.jsonl", "--job", "job.json", "-o", csv, "--journal", `${out}.journal`])).code).toBe(0);
    const table = parse(readFileSync(csv, "utf8"), { columns: true }) as Record<string, string>[];
    expect(table.map((r) => r["prompt_format"])).toEqual(Array(N).fill(PROMPT_FORMAT));
    const printed = await cli(["run", "in.jsonl", "--job", "job.json", "--print-prompt"]);
    expect(printed.code).toBe(0);
    expect(printed.stdout).toContain(`=== prompt format ${PROMPT_FORMAT} (recorded with every answer) ===`);
    // The report of a CSV output with no usage summary beside it reads the format from its rows.
    rmSync(`${csv}.usage.json`);
    const report = await cli(["report", csv, "--json"]);
    expect(report.code, report.stderr).toBe(0);
    expect((JSON.parse(report.stdout) as { provenance: { prompt_format: string } }).provenance.prompt_format).toBe(PROMPT_FORMAT);
  });

  it("is part of every request's hash: a run under another format asks again and sets the other's entries aside, never writing them", async () => {
    const output = at("resumed.jsonl");
    const first = { n: 0 };
    expect((await runLifecycle(lifecycleRequest(at("in.jsonl"), at("job.json"), output, releasedAs(PROMPT_FORMAT, first)))).verdict).toBe("done");
    expect(first.n).toBe(N);
    const before = rows(output);
    const next = { n: 0 };
    expect((await runLifecycle(lifecycleRequest(at("in.jsonl"), at("job.json"), output, releasedAs("typed-eval/99", next)))).verdict).toBe("done");
    expect(next.n).toBe(N);
    expect(rows(output).map((r) => r.prompt_format)).toEqual(Array(N).fill("typed-eval/99"));
    expect(summaryOf(output)).toMatchObject({ prompt_format: "typed-eval/99", set_aside: { other_versions: N } });
    // Back under the first format: the journal still holds its answers; nothing is asked, the other format's are set aside.
    const again = { n: 0 };
    expect((await runLifecycle(lifecycleRequest(at("in.jsonl"), at("job.json"), output, releasedAs(PROMPT_FORMAT, again)))).verdict).toBe("done");
    expect(again.n).toBe(0);
    expect(rows(output)).toEqual(before);
    expect(summaryOf(output)).toMatchObject({ prompt_format: PROMPT_FORMAT, set_aside: { other_versions: N } });
  });

  it("of a remote endpoint is what each response names: rows say so, and a change within an output is mixed, counted and warned of", async () => {
    let calls = 0;
    const upstream = await startUpstream((_req, res, text) => {
      const request = JSON.parse(text) as SystemOneRequest;
      calls++;
      // The first two answers name one format, the next two another, the rest none.
      const header = calls <= 2 ? { [PROMPT_FORMAT_HEADER]: "hosted/1" } : calls <= 4 ? { [PROMPT_FORMAT_HEADER]: "hosted/2" } : {};
      sendJson(res, 200, { model: "hosted-1.0.0", answers: plausibleAnswers(request.questions), usage: { input_tokens: 10, output_tokens: 2 } }, header);
    });
    try {
      const out = at("remote.jsonl");
      const r = await cli(["run", "in.jsonl", "--job", "job.json", "-o", out, "--base-url", upstream.url, "--no-api-key", "--concurrency", "1"]);
      expect(r.code, r.stderr).toBe(0);
      expect(rows(out).map((row) => row.prompt_format)).toEqual(["hosted/1", "hosted/1", "hosted/2", "hosted/2", "endpoint", "endpoint"]);
      const summary = summaryOf(out);
      expect(summary).toMatchObject({ prompt_format: "mixed", prompt_formats: { "hosted/1": 2, "hosted/2": 2, endpoint: 2 } });
      expect(describeUsage(summary)).toMatch(/warning: the rows were read from 3 prompt formats: hosted\/1 \(2\), hosted\/2 \(2\), endpoint \(2\)/);
    } finally {
      await upstream.close();
    }
  });
});
