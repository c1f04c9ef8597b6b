/**
 * Estimates from what was billed (issue 35, item 5). A real typed-eval
 * server is the endpoint, serving a generated model with Qwen3's real BPE
 * vocabulary (so tokens per character are a real tokenizer's): a first
 * night's run leaves its usage summary; `estimate --base-url --from-usage`
 * then projects a second night of other records, longer and shorter ones,
 * and the second night's run is billed. The projection must come within 10%
 * of the bill; characters / 4 of the requests, which leaves the server's
 * framing out, is far off and says so.
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LlamaEngine } from "../../src/engines/llama.js";
import { LocalEvaluator } from "../../src/evaluator/local.js";
import { detectTemplate, PROMPT_FORMAT } from "../../src/evaluator/prompt.js";
import { ModelRouter } from "../../src/evaluator/router.js";
import { emptySummary, type UsageSummary } from "../../src/records/usage.js";
import type { Estimate } from "../../src/runner/estimate.js";
import { buildServer } from "../../src/server/app.js";
import { runInProcess } from "../support/cli.js";
import { generatedModel, TINY_QWEN_VOCAB } from "../support/models.js";
import { KEYS, memoryLogger, testAccounts } from "../server/helpers.js";

const ROOT = join(import.meta.dirname, "../..");
const JOB = join(ROOT, "jobs/support-triage.json");

let dir: string;
let engine: LlamaEngine;
let router: ModelRouter;
let server: FastifyInstance;
let url: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "te-estimate-usage-"));
  engine = await LlamaEngine.load({ modelPath: generatedModel(TINY_QWEN_VOCAB), contextSize: 4096, sequences: 2, threads: 1 });
  const meta = { name: "default", description: "test model with Qwen3's vocabulary", release_date: "2026-11-21" };
  const evaluator = new LocalEvaluator(engine, { id: "qwenvocab-1.0.0", temperature: 1, template: detectTemplate(engine.chatTemplate), metadata: [meta] });
  router = new ModelRouter([{ names: ["default", "qwenvocab-1.0.0"], evaluator }]);
  server = buildServer({ evaluator: router, accounts: testAccounts(), logger: memoryLogger().logger });
  await server.listen({ host: "127.0.0.1", port: 0 });
  url = `http://127.0.0.1:${(server.server.address() as AddressInfo).port}`;
}, 120_000);

afterAll(async () => {
  await server?.close();
  await router?.close();
});

const cli = (args: string[]) => runInProcess(args, { TYPED_EVAL_API_KEY: KEYS.all, TYPED_EVAL_LOG_LEVEL: "warn" }, { cwd: dir });

const SUBJECTS = [
  "Where is my parcel",
  "Refund for a broken kettle",
  "Cannot log in after the password reset",
  "Invoice shows the wrong VAT number",
  "The app crashes when I open settings",
  "Please close my account and delete my data",
];
const SENTENCES = [
  "I ordered it two weeks ago and the tracking page has said 'label created' ever since.",
  "It arrived with a cracked lid and water leaks onto the counter every time I use it.",
  "The reset email came, I chose a new password, and now the site says my account is locked.",
  "Our finance team cannot book the invoice until the number matches our registration.",
  "Since yesterday's update the whole app closes as soon as I tap the gear icon.",
  "I have not used the service in a year and do not want you to keep my address any more.",
  "This is the third time I write about it and nobody has answered yet, which is frustrating.",
];

/** Night two: other tickets than night one's, from one sentence to nine, in other words. */
function secondNight(path: string, n: number): void {
  const lines = Array.from({ length: n }, (_, i) => {
    const body = Array.from({ length: 1 + ((i * 5) % 9) }, (_, k) => SENTENCES[(i + k) % SENTENCES.length]).join(" ");
    const ticket = { subject: SUBJECTS[i % SUBJECTS.length], body, channel: i % 2 ? "email" : "chat" };
    return JSON.stringify({ ticket_id: `N2-${i}`, created_at: "2026-11-22T08:00:00Z", customer: { tier: "gold" }, ticket });
  });
  writeFileSync(path, `${lines.join("\n")}\n`);
}

const summaryOf = (path: string) => JSON.parse(readFileSync(path, "utf8")) as UsageSummary;

describe("estimate --base-url --from-usage", () => {
  it("projects a second night's tokens within 10% of what it is billed, from the first night's usage summary", async () => {
    const night1 = join(ROOT, "examples/data/tickets.jsonl");
    const out1 = join(dir, "night1.jsonl");
    const first = await cli(["run", night1, "--job", JOB, "-o", out1, "--base-url", url]);
    expect(first.code).toBe(0);
    const usage1 = summaryOf(`${out1}.usage.json`);
    // The summary keeps what each answered request was billed, against its characters.
    // (24 tickets, 5 of them copies of others: 19 requests billed.)
    expect(usage1.billing).toMatchObject({ requests: usage1.records.answered - usage1.records.deduplicated, input_tokens: usage1.tokens.input });
    expect(usage1.billing?.requests).toBe(19);

    const night2 = join(dir, "night2.jsonl");
    secondNight(night2, 30);
    const plain = await cli(["estimate", night2, "--job", JOB, "--base-url", url, "--json"]);
    expect(plain.code).toBe(0);
    const characters = JSON.parse(plain.stdout) as Estimate;
    expect(characters.method).toBe("characters");
    const told = await cli(["estimate", night2, "--job", JOB, "--base-url", url]);
    expect(told.stdout).toMatch(
      /not counted: the endpoint's own framing .* rendered as the embedded model renders them and counted the same way, these requests come to about [\d,]+ tokens \([\d.]+ times as many\)/,
    );

    const projected = await cli(["estimate", night2, "--job", JOB, "--base-url", url, "--from-usage", `${out1}.usage.json`, "--json"]);
    expect(projected.code).toBe(0);
    const estimate = JSON.parse(projected.stdout) as Estimate;
    expect(estimate.method).toBe("billed");
    expect(estimate.projection?.rates?.fit).toBe("least-squares");
    expect(estimate.projection?.formats).toBeUndefined();
    // The server names its prompt format and the summary keeps it; a summary of another format (an endpoint that changed
    // its framing between the nights) is named with its format, since the rates fitted on both mix two framings.
    expect(usage1.prompt_format).toBe(PROMPT_FORMAT);
    const older = join(dir, "older.usage.json");
    writeFileSync(older, JSON.stringify({ ...usage1, prompt_format: "typed-eval/2" }));
    const mixed = await cli(["estimate", night2, "--job", JOB, "--base-url", url, "--from-usage", `${out1}.usage.json`, older]);
    expect(mixed.code).toBe(0);
    expect(mixed.stdout).toContain(
      `note: the summaries' answers were read from prompts of more than one format (${out1}.usage.json: ${PROMPT_FORMAT}, ${older}: typed-eval/2): the endpoint's framing changed`,
    );

    const out2 = join(dir, "night2-answers.jsonl");
    const second = await cli(["run", night2, "--job", JOB, "-o", out2, "--base-url", url]);
    expect(second.code).toBe(0);
    const billed = summaryOf(`${out2}.usage.json`).tokens.input;
    const error = (tokens: number) => Math.abs(tokens - billed) / billed;
    console.log(
      JSON.stringify({
        figure: "estimate vs billed, second night",
        billed,
        from_usage: estimate.inputTokens,
        from_usage_error: +error(estimate.inputTokens).toFixed(4),
        characters_over_4: characters.inputTokens,
        characters_error: +error(characters.inputTokens).toFixed(4),
        embedded_rendering: characters.renderedInputTokens,
        embedded_rendering_error: +error(characters.renderedInputTokens ?? 0).toFixed(4),
        // One rate for every character (what the fit falls back to), for comparison.
        one_ratio: Math.round(
          ((usage1.billing?.input_tokens ?? 0) / ((usage1.billing?.state_chars ?? 0) + (usage1.billing?.question_chars ?? 1))) * characters.inputTokens * 4,
        ),
        rates: estimate.projection?.rates,
      }),
    );
    expect(error(estimate.inputTokens)).toBeLessThan(0.1);
    // What it replaces: characters / 4 of the requests leaves the server's framing out (20% under on the 2026-11-28 run, prompt format typed-eval/3; 3.7% for the projection).
    expect(error(characters.inputTokens)).toBeGreaterThan(2 * error(estimate.inputTokens));
    expect(characters.inputTokens).toBeLessThan(billed);

    // The output's own summary, when there is one, is read without being named: a dry run writing to night one's output.
    const dry = await cli(["run", night2, "--job", JOB, "-o", out1, "--base-url", url, "--dry-run"]);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain(`input tokens:   ${estimate.inputTokens.toLocaleString("en-US")} (projected from what 1 usage summary billed for 19 requests`);
  }, 240_000);

  it("refuses what it cannot project from: a file that is no usage summary, a summary with nothing answered; and --from-usage on a run", async () => {
    const input = join(dir, "few.jsonl");
    secondNight(input, 3);
    const notSummary = await cli(["estimate", input, "--job", JOB, "--base-url", url, "--from-usage", input]);
    expect(notSummary.code).toBe(2);
    expect(notSummary.stderr).toMatch(/cannot read usage summary|is not a typed-eval usage summary/);
    const empty = join(dir, "empty.usage.json");
    writeFileSync(
      empty,
      // A run whose every record failed: a summary, with nothing billed in it.
      JSON.stringify({ ...emptySummary("m", 0), records: { read: 3, answered: 0, failed: 3, deduplicated: 0, resumed: 0, other_shards: 0 } }),
    );
    const nothing = await cli(["estimate", input, "--job", JOB, "--base-url", url, "--from-usage", empty]);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toMatch(/holds no answered request to project from/);
    const run = await cli(["run", input, "--job", JOB, "-o", join(dir, "few-out.jsonl"), "--base-url", url, "--from-usage", empty]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/--from-usage goes with --dry-run/);
  }, 60_000);
});
