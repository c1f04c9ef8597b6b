/**
 * Calibration without gold labels, where it can go wrong: contextual
 * calibration's endpoint failing (one line, the usual exit codes), and batch
 * calibration on a question whose true labels really are skewed 80/20 (it
 * would flatten them: refused, exit 2, unless gold labels or --force say so).
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Answer, Question } from "../../src/api/schema.js";
import { answerFrom, batchFlattens } from "../../src/calibration/maps.js";
import { seededRandom } from "../../src/quality/metrics.js";
import { runCli } from "../support/cli.js";
import { sendJson, startUpstream, type Upstream } from "../support/upstream.js";
import { PriorEstimate, refuseFlattening } from "../../src/calibration/label-free.js";

const questions: Record<string, Question> = {
  urgent: { type: "noul", instructions: "Is it urgent?" },
  team: { type: "choice", criteria: { shipping: null, billing: null } },
};
let dir: string;
let answersPath: string;
let goldPath: string;
let jobPath: string;
const N = 400;

/** Answers that are calibrated and skewed: urgent is yes for about 80% of records, and each answer's p(yes) is its true probability. */
function answersOf(): { rows: Record<string, Answer>[]; gold: string[] } {
  const random = seededRandom(4);
  const rows: Record<string, Answer>[] = [];
  const gold = ["id,urgent,team"];
  for (let i = 0; i < N; i++) {
    const p = 0.65 + 0.3 * random();
    const t = 0.35 + 0.3 * random();
    rows.push({ urgent: answerFrom(questions["urgent"]!, [1 - p, p]), team: answerFrom(questions["team"]!, [t, 1 - t]) });
    gold.push(`r${i},${random() < p ? "yes" : "no"},${random() < t ? "shipping" : "billing"}`);
  }
  return { rows, gold };
}

const env = () => ({ ...process.env, TYPED_EVAL_LOG_LEVEL: "warn" });
const cli = (args: string[]) => runCli(args, { cwd: dir, env: env() });

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "te-label-free-"));
  const { rows, gold } = answersOf();
  answersPath = join(dir, "answers.jsonl");
  writeFileSync(answersPath, `${rows.map((answers, i) => JSON.stringify({ id: `r${i}`, answers })).join("\n")}\n`);
  goldPath = join(dir, "gold.csv");
  writeFileSync(goldPath, `${gold.join("\n")}\n`);
  jobPath = join(dir, "job.json");
  writeFileSync(jobPath, JSON.stringify({ state: "text", model: "remote-model", questions }));
});

describe("batch calibration on a question whose 80/20 skew is real", () => {
  it("refuses without gold labels in one line, exit 2, and writes nothing", async () => {
    const output = join(dir, "batch.json");
    const r = await cli(["calibrate", answersPath, "--method", "batch", "-o", output]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(/typed-eval: batch calibration would move urgent's label shares by \d+% \(0\.20\/0\.80 to 0\.[45]\d\/0\.[45]\d\)/);
    expect(r.stderr).toMatch(/pass --gold .* or --force/);
    // The balanced question moves little and is not named.
    expect(r.stderr).not.toMatch(/team/);
    expect(existsSync(output)).toBe(false);
  });

  it("with gold labels that are 80/20 too, says the skew is real and refuses", async () => {
    const output = join(dir, "batch-gold.json");
    const r = await cli(["calibrate", answersPath, "--method", "batch", "--gold", goldPath, "-o", output]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(/away from the gold labels' 0\.[12]\d\/0\.[78]\d: the skew is real/);
    expect(existsSync(output)).toBe(false);
  });

  it("--force writes it, with the warning", async () => {
    const output = join(dir, "batch-forced.json");
    const r = await runCli(["calibrate", answersPath, "--method", "batch", "--force", "-o", output], { cwd: dir, env: env() });
    expect(r.code).toBe(0);
    const file = JSON.parse(readFileSync(output, "utf8")) as { questions: Record<string, { moved: number }> };
    expect(file.questions["urgent"]!.moved).toBeGreaterThan(0.2);
    expect(file.questions["team"]!.moved).toBeLessThan(0.1);
  });

  it("run --calibration batch refuses the same before writing (the runner's check)", async () => {
    const { rows } = answersOf();
    const before = new PriorEstimate(questions);
    for (const r of rows) before.add(r);
    async function* again() {
      yield* rows;
    }
    await expect(refuseFlattening(questions, before.maps(), before, again())).rejects.toThrow(/urgent's label shares by \d+% .*rerun with --force-calibration/);
    // Without the skewed question there is nothing to refuse.
    const teamOnly = { team: questions["team"]! };
    const balanced = new PriorEstimate(teamOnly);
    for (const r of rows) balanced.add(r);
    await expect(refuseFlattening(teamOnly, balanced.maps(), balanced, again())).resolves.toBeUndefined();
  });

  it("gold labels that disagree with the skew let batch calibration through", () => {
    // The answers say 80/20, the gold 50/50: dividing out the prior moves toward the gold, which backs it.
    expect(batchFlattens("q", [0.8, 0.2], [0.52, 0.48], [0.5, 0.5])).toBeUndefined();
    expect(batchFlattens("q", [0.8, 0.2], [0.52, 0.48], [0.8, 0.2])).toMatch(/the skew is real/);
    expect(batchFlattens("q", [0.55, 0.45], [0.5, 0.5])).toBeUndefined();
  });
});

describe("contextual calibration against a failing endpoint", () => {
  let upstream: Upstream;
  let status = 422;
  beforeAll(async () => {
    upstream = await startUpstream((_req, res) =>
      status === 422
        ? sendJson(res, 422, { detail: [{ loc: ["body", "model"], msg: "unknown model remote-model", type: "value_error" }] })
        : sendJson(res, status, { detail: "invalid API key", type: "authentication_error" }),
    );
  });
  afterAll(async () => {
    await upstream?.close();
  });

  const contextual = (url: string) =>
    cli(["calibrate", answersPath, "--method", "contextual", "--job", jobPath, "--base-url", url, "--no-api-key", "-o", join(dir, "ctx.json")]);

  it("a 422 is one line naming the endpoint's reason, exit 2", async () => {
    status = 422;
    const r = await contextual(upstream.url);
    expect(r.code).toBe(2);
    expect(
      r.stderr
        .trim()
        .split("\n")
        .filter((l) => l.startsWith("typed-eval:")),
    ).toHaveLength(1);
    expect(r.stderr).toMatch(/rejected the request with HTTP 422 \(body\.model: unknown model remote-model\)/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it("a 401 is one line about the key, exit 3", async () => {
    status = 401;
    const r = await contextual(upstream.url);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/refused the key in \$TYPED_EVAL_API_KEY \(HTTP 401: invalid API key\)/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it("a refused connection is one line, exit 3, and nothing is written", async () => {
    const gone = await startUpstream(() => {});
    const url = gone.url;
    await gone.close();
    const r = await contextual(url);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/and got no answer \(.*ECONNREFUSED.*\): check --base-url/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(existsSync(join(dir, "ctx.json"))).toBe(false);
  });
});
