/**
 * Golden outputs: what a user sees must not change when the code is
 * restructured. Three artefacts are compared with files committed beside this
 * test: the answers `make eval` writes on the generated tiny model (JSONL,
 * and the same run's CSV), the `assess --json` of committed answers and gold
 * labels, and the OpenAPI document.
 *
 * `UPDATE_GOLDEN=1 npx vitest run test/golden` rewrites the files; do that
 * only for a change meant to alter the output, and say so in the commit.
 * The answers last moved when each question's reply hint left the system
 * text for the question's own suffix (issue 35; CHANGELOG.md): prompt
 * format typed-eval/3, which every row names.
 *
 * Adding a question type must move no existing answer: the answers are
 * compared with a test-only type (`test/questions/multilabel.ts`)
 * registered in this process, while the files were written without it.
 *
 * The model's probabilities come from llama.cpp's CPU kernels, which differ in
 * the last bits between CPU families (vector widths, FMA): on the CPU the
 * files were written on (`cpu.txt`: its vector extensions) the answers must match byte for byte;
 * elsewhere every string must match and every number within 1e-6.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { buildOpenAPIDocument } from "../../src/api/openapi.js";
import { runInProcess } from "../support/cli.js";
import { generatedModel, TINY } from "../support/models.js";
import { registerMultiLabel } from "../questions/multilabel.js";

const HERE = import.meta.dirname;
const UPDATE = process.env["UPDATE_GOLDEN"] === "1";
const golden = (name: string) => join(HERE, name);
/** The vector extensions llama.cpp's CPU kernels choose between: the same set gives the same bits. */
function cpuKernels(): string {
  const info = existsSync("/proc/cpuinfo") ? readFileSync("/proc/cpuinfo", "utf8") : "";
  const flags = new Set(info.match(/\b(?:avx[a-z0-9_]*|fma|f16c|amx[a-z0-9_]*)\b/g) ?? []);
  return `${process.arch} ${[...flags].sort().join(" ")}`.trim();
}

/** Compares with the committed file, or writes it under UPDATE_GOLDEN. */
function expectGolden(name: string, actual: string, numbers: "exact" | "close" = "exact"): void {
  if (UPDATE) {
    writeFileSync(golden(name), actual);
    return;
  }
  const expected = readFileSync(golden(name), "utf8");
  if (numbers === "exact") {
    expect(actual, `${name} differs from the golden file`).toBe(expected);
    return;
  }
  expect(withoutNumbers(actual), `${name}: text differs from the golden file`).toBe(withoutNumbers(expected));
  const a = numbersIn(actual);
  const e = numbersIn(expected);
  expect(a.length).toBe(e.length);
  a.forEach((x, i) => expect(Math.abs(x - (e[i] as number)), `${name}: number ${i}`).toBeLessThan(1e-6));
}

const NUMBER = /-?\d+(?:\.\d+)?(?:e[-+]?\d+)?/gi;
const withoutNumbers = (s: string) => s.replace(NUMBER, "#");
const numbersIn = (s: string) => (s.match(NUMBER) ?? []).map(Number);

/** A seeded Park-Miller generator: the synthetic fixtures are the same on every machine. */
function seeded(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 16807) % 2147483647;
    return s / 2147483647;
  };
}

/** Softmax-ish probabilities from a seed: one option favoured, the rest random. */
function distribution(random: () => number, n: number, sharp: number): number[] {
  const w = Array.from({ length: n }, () => random() ** sharp);
  const total = w.reduce((x, y) => x + y, 0);
  return w.map((x) => x / total);
}

function pick(random: () => number, p: number[]): number {
  let u = random();
  for (let i = 0; i < p.length; i++) {
    u -= p[i] as number;
    if (u <= 0) return i;
  }
  return p.length - 1;
}

/** 300 answered rows of three questions and gold labels drawn near them (somewhat overconfident answers). */
function syntheticFixtures(): { answers: string; gold: string } {
  const random = seeded(20261124);
  const teams = ["shipping and deliveries", "billing", "product defects", "account and login"];
  const moods = ["calm", "annoyed", "angry"];
  const answerLines: string[] = [];
  const goldLines = ["id,urgent,team,mood"];
  for (let i = 0; i < 300; i++) {
    const id = `R-${String(i).padStart(4, "0")}`;
    const pYes = random() ** 1.5;
    const team = distribution(random, teams.length, 4);
    const mood = distribution(random, moods.length, 3);
    const top = team.indexOf(Math.max(...team));
    const expected = mood.reduce((acc, p, k) => acc + k * p, 0);
    answerLines.push(
      JSON.stringify({
        id,
        answers: {
          urgent: { type: "noul", noul: pYes },
          team: { type: "choice", choice: teams[top], probabilities: Object.fromEntries(teams.map((t, k) => [t, team[k]])), confidence: 0 },
          mood: {
            type: "score",
            score: expected,
            legend: Object.fromEntries(moods.map((m, k) => [String(k), m])),
            probabilities: Object.fromEntries(mood.map((p, k) => [String(k), p])),
            confidence: 0,
          },
        },
      }),
    );
    // Gold from a softened version of the answers: the model is overconfident.
    const soften = (p: number[]) => {
      const s = p.map((x) => Math.sqrt(x));
      const t = s.reduce((x, y) => x + y, 0);
      return s.map((x) => x / t);
    };
    const yes = random() < 0.15 + 0.7 * pYes;
    goldLines.push([id, yes ? "yes" : "no", `"${teams[pick(random, soften(team))]}"`, String(pick(random, soften(mood)))].join(","));
  }
  return { answers: `${answerLines.join("\n")}\n`, gold: `${goldLines.join("\n")}\n` };
}

describe("golden outputs", () => {
  it("make eval on the generated tiny model, with a type registered that the job does not ask: the answers file, JSONL and CSV", {
    timeout: 120_000,
  }, async () => {
    if (!UPDATE) registerMultiLabel();
    const model = generatedModel(TINY);
    const dir = mkdtempSync(join(tmpdir(), "typed-eval-golden-"));
    const journal = join(dir, "eval.journal");
    const base = ["examples/data/tickets.jsonl", "--job", "jobs/support-triage.json", "--model-path", model, "--journal", journal];
    const env = { TYPED_EVAL_LOG_LEVEL: "warn", TYPED_EVAL_THREADS: "1" };
    const jsonl = await runInProcess(["run", ...base, "--output", join(dir, "eval.jsonl")], env);
    expect(jsonl.code, jsonl.stderr).toBe(0);
    // The same journal written as CSV: every answer comes from the journal, none from the model.
    const csv = await runInProcess(["run", ...base, "--output", join(dir, "eval.csv")], env);
    expect(csv.code, csv.stderr).toBe(0);
    if (UPDATE) writeFileSync(golden("cpu.txt"), `${cpuKernels()}\n`);
    const sameCpu = existsSync(golden("cpu.txt")) && readFileSync(golden("cpu.txt"), "utf8").trim() === cpuKernels();
    expectGolden("eval.jsonl", readFileSync(join(dir, "eval.jsonl"), "utf8"), sameCpu ? "exact" : "close");
    expectGolden("eval.csv", readFileSync(join(dir, "eval.csv"), "utf8"), sameCpu ? "exact" : "close");
  });

  it("assess --json on the committed answers and gold labels", { timeout: 60_000 }, async () => {
    if (UPDATE) {
      const { answers, gold } = syntheticFixtures();
      writeFileSync(golden("answers.jsonl"), answers);
      writeFileSync(golden("gold.csv"), gold);
    }
    const r = await runInProcess(["assess", "test/golden/answers.jsonl", "--gold", "test/golden/gold.csv", "--json", "--bootstrap", "50"], {
      TYPED_EVAL_LOG_LEVEL: "warn",
    });
    expect(r.code, r.stderr).toBe(0);
    expectGolden("assess.json", r.stdout);
  });

  it("the OpenAPI document", () => {
    expectGolden("openapi.json", `${JSON.stringify(buildOpenAPIDocument(), null, 2)}\n`);
  });
});
