/**
 * The label-quality commands end to end through the CLI, on answers the tiny
 * generated model really gave (random weights: these tests prove the
 * plumbing and the arithmetic, never answer quality).
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "csv-parse/sync";
import { beforeAll, describe, expect, it } from "vitest";
import type { Answer, Question } from "../../src/api/schema.js";
import { answerDistribution, applyMap } from "../../src/calibration/maps.js";
import type { CalibrationFile } from "../../src/calibration/file.js";
import type { Assessment } from "../../src/quality/assess.js";
import { displayLabels, type RunReport } from "../../src/quality/report.js";
import type { Verdict } from "../../src/quality/verdict.js";
import type { UsageSummary } from "../../src/records/usage.js";
import { BIN, runInProcess } from "../support/cli.js";
import { whenFile } from "../support/watch.js";
import { generatedModel, TINY } from "../support/models.js";

let modelPath: string;
let dir: string;

/** The quality commands in this process (same parser and boundary as the CLI): the process itself is not what these tests are about. */
const inProcess = (args: string[], env: Record<string, string> = {}) =>
  runInProcess(args, { TYPED_EVAL_MODEL_PATH: modelPath, TYPED_EVAL_LOG_LEVEL: "warn", ...env });

function cli(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    encoding: "utf8",
    timeout: 120_000,
    env: { ...process.env, TYPED_EVAL_MODEL_PATH: modelPath, TYPED_EVAL_LOG_LEVEL: "warn", ...env },
    cwd: dir,
    maxBuffer: 64 * 1024 * 1024,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const file = (name: string, content: string) => {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
};

const questions: Record<string, Question> = {
  urgent: { type: "noul", instructions: "Is it urgent?" },
  team: { type: "choice", criteria: { shipping: null, billing: null, product: null } },
  mood: { type: "score", criteria: ["calm", "annoyed", "angry"] },
};
const job = { state: "ticket.body", id: "ticket_id", keep: ["tier"], questions };
const bodies = ["my parcel is late", "refund the double charge", "the blender smells of smoke", "where is my order", "I was billed twice", "the app crashes"];

function tickets(n: number): string {
  return `${Array.from({ length: n }, (_, i) => JSON.stringify({ ticket_id: `T${i}`, tier: i % 2 ? "free" : "gold", ticket: { body: `Ticket ${i}: ${bodies[i % bodies.length]}` } })).join("\n")}\n`;
}

interface Row {
  id: string;
  answers: Record<string, Answer>;
  raw?: Record<string, number | Record<string, number>>;
  review_reasons?: { question: string; confidence: number; threshold: number }[];
  audit?: boolean;
}
const rows = (path: string): Row[] =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Row);

/** Seeded gold labels near the model's own answers, so the metrics have something to measure. */
function goldFor(answers: Row[]): string {
  let s = 11;
  const random = () => ((s = (s * 16807) % 2147483647), s / 2147483647);
  const lines = ["id,urgent,team,mood"];
  for (const r of answers) {
    const team = r.answers["team"] as Extract<Answer, { type: "choice" }>;
    const mood = r.answers["mood"] as Extract<Answer, { type: "score" }>;
    const urgent = (r.answers["urgent"] as Extract<Answer, { type: "noul" }>).noul;
    const options = Object.keys(team.probabilities);
    lines.push(
      [
        r.id,
        random() < 0.75 === urgent > 0.5 ? "yes" : "no",
        random() < 0.7 ? team.choice : options[Math.floor(random() * options.length)],
        random() < 0.6 ? Math.round(mood.score) : Math.floor(random() * 3),
      ].join(","),
    );
  }
  return `${lines.join("\n")}\n`;
}

/** Records of the shared run: enough for every metric to be defined, few enough to keep the suite quick. */
const N = 48;
let out: string;
let outCsv: string;
let outParquet: string;
let gold: string;
let jobPath: string;

beforeAll(() => {
  modelPath = generatedModel(TINY);
  dir = mkdtempSync(join(tmpdir(), "te-quality-"));
  jobPath = file("job.json", JSON.stringify(job));
  const input = file("t.jsonl", tickets(N));
  out = join(dir, "out.jsonl");
  outCsv = join(dir, "out.csv");
  expect(cli(["run", input, "--job", jobPath, "-o", out]).code).toBe(0);
  expect(cli(["run", input, "--job", jobPath, "-o", outCsv]).code).toBe(0);
  outParquet = join(dir, "out.parquet");
  expect(cli(["run", input, "--job", jobPath, "-o", outParquet]).code).toBe(0);
  gold = file("gold.csv", goldFor(rows(out)));
}, 300_000);

describe("assess", () => {
  it("reports every metric of each type, the same numbers on every run, and the same from CSV as from JSONL answers", async () => {
    // The real process once (end to end); the other assess cases run in this process.
    const a = cli(["assess", out, "--gold", gold, "--json"]);
    expect(a.code).toBe(0);
    const assessment = JSON.parse(a.stdout) as Assessment;
    expect(assessment.rows).toMatchObject({ matched: N, gold: N, answers: N, gold_only: 0, answers_only: 0 });
    const byName = Object.fromEntries(assessment.questions.map((q) => [q.name, q]));
    expect(Object.keys(byName["urgent"]!.metrics)).toEqual(
      expect.arrayContaining(["accuracy", "balanced_accuracy", "auroc", "auprc", "brier", "log_loss", "ece", "ace", "mce", "aurc"]),
    );
    expect(Object.keys(byName["team"]!.metrics)).toEqual(
      expect.arrayContaining(["accuracy", "macro_f1", "balanced_accuracy", "kappa", "top2_accuracy", "brier", "log_loss"]),
    );
    expect(Object.keys(byName["mood"]!.metrics)).toEqual(expect.arrayContaining(["accuracy", "within_one", "mae", "qwk", "spearman", "rps"]));
    for (const q of assessment.questions) {
      // Every interval holds its own estimate, the ECE's (noise removed) included.
      expect(Object.keys(q.intervals)).toEqual(expect.arrayContaining(["accuracy", "ece_debiased"]));
      for (const [m, [lo, hi]] of Object.entries(q.intervals)) {
        expect(lo, m).toBeLessThanOrEqual(q.metrics[m]!);
        expect(hi, m).toBeGreaterThanOrEqual(q.metrics[m]!);
      }
      expect(q.metrics["ece_debiased"]!).toBeLessThanOrEqual(q.metrics["ece"]!);
      expect(q.ece_noise_floor.median).toBeGreaterThan(0);
      expect(q.risk_coverage.at.map((p) => p.coverage)).toEqual([0.5, 0.8, 0.9, 1]);
      expect(q.label_mass).toBeDefined(); // the embedded model's answers carry label mass
    }
    expect((await inProcess(["assess", out, "--gold", gold, "--json"])).stdout).toBe(a.stdout);
    const fromCsv = JSON.parse((await inProcess(["assess", outCsv, "--gold", gold, "--json", "--job", jobPath])).stdout) as Assessment;
    fromCsv.questions.forEach((q, i) => {
      for (const [m, v] of Object.entries(q.metrics)) expect(v).toBeCloseTo(assessment.questions[i]!.metrics[m]!, 9);
    });
  });

  it("--fail-if exits 4 when a condition holds and 0 when none does; an unknown metric is exit 2", async () => {
    const a = JSON.parse((await inProcess(["assess", out, "--gold", gold, "--json"])).stdout) as Assessment;
    const acc = a.questions.find((q) => q.name === "team")!.metrics["accuracy"]!;
    const failing = await inProcess(["assess", out, "--gold", gold, "--fail-if", `team.accuracy<${acc + 0.01},urgent.ece>0.99`]);
    expect(failing.code).toBe(4);
    expect(failing.stderr).toMatch(/quality gate failed: team\.accuracy</);
    expect(failing.stderr).not.toMatch(/urgent\.ece/);
    expect((await inProcess(["assess", out, "--gold", gold, "--fail-if", `team.accuracy<${acc - 0.01}`])).code).toBe(0);
    const unknown = await inProcess(["assess", out, "--gold", gold, "--fail-if", "team.f2<0.5"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(
      /^typed-eval: --fail-if: no metric "f2" \(in "team.f2<0.5"\); assess gates on accuracy, .*, label_mass, verdict, with --compare on psi, js_distance, agreement \(docs\/metrics\.md\)\n$/,
    );
  });

  const badGold: [string, string, RegExp][] = [
    ["unknown-id.csv", "id,team\nT1,billing\nX9,billing\n", /1 gold id is not in .*X9 \(gold line 3\).*--allow-unmatched/],
    ["bad-option.csv", "id,team\nT1,billing\nT2,refunds\n", /line 3, field team: "refunds" is not an option of team; options: shipping, billing, product/],
    ["bad-noul.jsonl", '{"id": "T1", "urgent": "maybe"}\n', /line 1, field urgent: "maybe" is not a noul label/],
    ["bad-level.csv", "id,mood\nT1,7\n", /line 2, field mood: level "7" is outside 0\.\.2/],
    ["empty.csv", "", /holds no gold rows/],
    ["no-question.csv", "id,colour\nT1,red\n", /labels none of the questions/],
    ["twice.csv", "id,team\nT1,billing\nT1,shipping\n", /line 3: id "T1" is labeled twice \(first on line 2\)/],
  ];
  it.each(badGold)("refuses a bad gold file (%s) with the row and field, exit 2, and writes no report", async (name, content, message) => {
    const html = join(dir, `${name}.html`);
    const r = await inProcess(["assess", out, "--gold", file(name, content), "--html", html]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(existsSync(html)).toBe(false);
  });

  it("refuses a job naming a question the answers lack, exit 2", async () => {
    const extra = file("extra-job.json", JSON.stringify({ ...job, questions: { ...questions, language: { type: "noul" } } }));
    const r = await inProcess(["assess", out, "--gold", gold, "--job", extra]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/no answer to language/);
  });
});

describe("calibrate and run --calibration", () => {
  it("fits on gold, records the model identity, and a run applies it with the raw probabilities kept", async () => {
    const cal = join(dir, "cal.json");
    const r = await inProcess(["calibrate", out, "--gold", gold, "--job", jobPath, "--method", "temperature", "-o", cal]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/held out \(5-fold\): log loss/);
    const file = JSON.parse(readFileSync(cal, "utf8")) as CalibrationFile;
    const usage = JSON.parse(readFileSync(`${out}.usage.json`, "utf8")) as UsageSummary;
    expect(file.identity).toBe(usage.model_identity);
    expect(Object.keys(file.questions).sort()).toEqual(["mood", "team", "urgent"]);

    const calibrated = join(dir, "cal-out.jsonl");
    expect(cli(["run", join(dir, "t.jsonl"), "--job", jobPath, "-o", calibrated, "--calibration", cal]).code).toBe(0);
    const before = Object.fromEntries(rows(out).map((x) => [x.id, x]));
    for (const row of rows(calibrated)) {
      for (const [name, q] of Object.entries(questions)) {
        const raw = answerDistribution(q, before[row.id]!.answers[name]!);
        const kept = row.raw![name]!;
        expect(typeof kept === "number" ? kept : kept).toEqual(
          q.type === "noul" ? raw[1] : (before[row.id]!.answers[name] as { probabilities: Record<string, number> }).probabilities,
        );
        const expected = applyMap(file.questions[name]!, raw);
        answerDistribution(q, row.answers[name]!).forEach((p, i) => expect(p).toBeCloseTo(expected[i]!, 12));
      }
    }
    const summary = JSON.parse(readFileSync(`${calibrated}.usage.json`, "utf8")) as UsageSummary;
    expect(summary.calibration?.source).toBe(cal);
    expect(Object.keys(summary.calibration!.questions).sort()).toEqual(["mood", "team", "urgent"]);
  });

  it("assessing on the gold rows a calibration was fitted on marks calibration in-sample, naming the file's held-out ECE", async () => {
    const lines = readFileSync(gold, "utf8").trim().split("\n");
    const half = file("half.gold.csv", `${lines.slice(0, 25).join("\n")}\n`);
    const otherHalf = file("other-half.gold.csv", `${[lines[0], ...lines.slice(25)].join("\n")}\n`);
    const cal = join(dir, "in-sample.cal.json");
    expect((await inProcess(["calibrate", out, "--gold", half, "--job", jobPath, "--method", "temperature", "-o", cal])).code).toBe(0);
    const fitted = JSON.parse(readFileSync(cal, "utf8")) as CalibrationFile;
    // The file records which gold rows it was fitted on (24), beside the held-out figures it always had.
    expect(fitted.fitted_on.gold_ids!.count).toBe(24);
    const calibrated = join(dir, "in-sample.jsonl");
    expect(cli(["run", join(dir, "t.jsonl"), "--job", jobPath, "-o", calibrated, "--calibration", cal]).code).toBe(0);
    type Assessed = Assessment & { verdict: Verdict };
    const assessed = async (g: string, ...more: string[]) =>
      JSON.parse((await inProcess(["assess", calibrated, "--gold", g, "--job", jobPath, "--json", "--bootstrap", "10", ...more])).stdout) as Assessed;
    const all = await assessed(gold);
    for (const q of all.questions) {
      const heldOut = fitted.questions[q.name]!.cross_validation!.held_out["temperature"]!.ece;
      expect(q.sample!.in_sample).toEqual({ rows: 24, of: N, method: "temperature", held_out_ece: heldOut, folds: 5, by: "record ids" });
      const cell = all.verdict.questions.find((x) => x.name === q.name)!.cells.calibration;
      expect(cell.mark, q.name).not.toBe("ok");
      expect(cell.text).toContain(`; in-sample: 24 of ${N} gold rows fitted the calibration; held out (5-fold), its ECE was ${heldOut.toFixed(3)}`);
    }
    expect(all.verdict.sample).toMatch(
      /^Calibration is in-sample: the answers' calibration was fitted on these gold rows, so its figures may flatter it; the calibration file's ECE on held-out rows: urgent /,
    );
    // The other half was never fitted on, and the raw probabilities are not the calibration's: nothing is in-sample.
    for (const a of [await assessed(otherHalf), await assessed(gold, "--raw")]) {
      expect(a.questions.map((q) => q.sample?.in_sample)).toEqual([undefined, undefined, undefined]);
      expect(a.verdict.sample).toBeUndefined();
    }
  }, 90_000);

  it("refuses a calibration fitted for other weights unless forced", async () => {
    const cal = join(dir, "cal2.json");
    expect((await inProcess(["calibrate", out, "--gold", gold, "-o", cal])).code).toBe(0);
    // Other weights: the same shapes with another seed.
    const other = generatedModel({ ...TINY, shape: { ...TINY.shape, seed: TINY.shape.seed + 1 } });
    const refused = cli(["run", join(dir, "t.jsonl"), "--job", jobPath, "-o", join(dir, "other.jsonl"), "--calibration", cal, "--model-path", other]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/was fitted for .*but this run's model is .*sha256:.*--force-calibration/);
    expect(existsSync(join(dir, "other.jsonl"))).toBe(false);
    const forced = cli([
      "run",
      join(dir, "t.jsonl"),
      "--job",
      jobPath,
      "-o",
      join(dir, "other.jsonl"),
      "--calibration",
      cal,
      "--model-path",
      other,
      "--force-calibration",
    ]);
    expect(forced.code).toBe(0);
  });

  it("run --calibration batch divides out each question's label prior and says how far it moved the labels", () => {
    const batch = join(dir, "batch.jsonl");
    // The tiny model's answers are skewed: moving them more than 10% is refused (it may be a real skew), before any output.
    const refused = cli(["run", join(dir, "t.jsonl"), "--job", jobPath, "-o", batch, "--calibration", "batch"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/typed-eval: stopped: bad input: batch calibration would move \w+'s label shares by \d+% .*rerun with --force-calibration/);
    expect(existsSync(batch)).toBe(false);
    expect(cli(["run", join(dir, "t.jsonl"), "--job", jobPath, "-o", batch, "--calibration", "batch", "--force-calibration"]).code).toBe(0);
    const summary = JSON.parse(readFileSync(`${batch}.usage.json`, "utf8")) as UsageSummary;
    expect(summary.calibration?.source).toBe("batch");
    // After dividing out the prior, the mean distribution is much closer to uniform than before.
    const k = 3;
    const mean = Array.from({ length: k }, (_, i) => rows(batch).reduce((s, r) => s + answerDistribution(questions["team"]!, r.answers["team"]!)[i]!, 0) / N);
    const meanBefore = Array.from(
      { length: k },
      (_, i) => rows(out).reduce((s, r) => s + answerDistribution(questions["team"]!, r.answers["team"]!)[i]!, 0) / N,
    );
    const spread = (m: number[]) => Math.max(...m) - Math.min(...m);
    expect(spread(mean)).toBeLessThan(spread(meanBefore) / 2);
    expect(summary.calibration!.questions["team"]!.moved).toBeGreaterThan(0);
  }, 90_000);

  it("thresholds picks, per question, a cut whose accepted rows reach the target", async () => {
    const r = await inProcess(["thresholds", out, "--gold", gold, "--target-accuracy", "0.6", "--json"]);
    expect(r.code).toBe(0);
    const list = JSON.parse(r.stdout) as { question: string; threshold: number | null; accuracy: number; coverage: number }[];
    expect(list.map((t) => t.question).sort()).toEqual(["mood", "team", "urgent"]);
    for (const t of list) if (t.threshold !== null) expect(t.accuracy).toBeGreaterThanOrEqual(0.6);
    expect((await inProcess(["thresholds", out, "--gold", gold, "--target-accuracy", "1.5"])).code).toBe(2);
  });

  it("thresholds targets one class's precision, asks for one target, and refuses a cut under the minimum support", async () => {
    const r = await inProcess(["thresholds", out, "--gold", gold, "--target-precision", "0.6", "--class", "team=billing", "--json"]);
    expect(r.code, r.stderr).toBe(0);
    const [t, ...rest] = JSON.parse(r.stdout) as {
      question: string;
      target_metric: string;
      target_class: string;
      figure: { value: number; support: number };
    }[];
    expect(rest).toEqual([]);
    expect(t).toMatchObject({ question: "team", target_metric: "precision", target_class: "billing" });
    if (t!.figure.support > 0) expect(t!.figure.value).toBeGreaterThanOrEqual(0.6);
    const none = await inProcess(["thresholds", out, "--gold", gold]);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/thresholds takes one target/);
    expect((await inProcess(["thresholds", out, "--gold", gold, "--target-recall", "0.9"])).stderr).toMatch(/needs --class/);
    const strict = await inProcess(["thresholds", out, "--gold", gold, "--target-accuracy", "0.6", "--min-support", "1000000", "--json"]);
    expect(strict.code, strict.stderr).toBe(0);
    for (const x of JSON.parse(strict.stdout) as { threshold: number | null; review_below: number }[])
      expect(x).toMatchObject({ threshold: null, review_below: 1 });
  });
});

describe("review routing", () => {
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const top = (q: Question, a: Answer) => Math.max(...answerDistribution(q, a));

  it("writes exactly the rows below their thresholds, plus a reproducible audit sample of the rest", () => {
    const threshold = median(rows(out).map((r) => top(questions["team"]!, r.answers["team"]!)));
    const reviewJob = file("review-job.json", JSON.stringify({ ...job, review_below: { team: threshold }, audit_sample: "25%" }));
    const target = join(dir, "rev.jsonl");
    const r = cli(["run", join(dir, "t.jsonl"), "--job", reviewJob, "-o", target, "--audit-seed", "7"]);
    expect(r.code).toBe(0);
    const below = new Set(
      rows(target)
        .filter((x) => top(questions["team"]!, x.answers["team"]!) < threshold)
        .map((x) => x.id),
    );
    const review = rows(`${target}.review.jsonl`);
    expect(new Set(review.filter((x) => !x.audit).map((x) => x.id))).toEqual(below);
    for (const x of review.filter((x) => !x.audit)) expect(x.review_reasons![0]).toMatchObject({ question: "team", threshold });
    const audit = review.filter((x) => x.audit).map((x) => x.id);
    expect(audit.length).toBeGreaterThan(0);
    for (const id of audit) expect(below.has(id)).toBe(false);
    const first = readFileSync(`${target}.review.jsonl`, "utf8");
    expect(cli(["run", join(dir, "t.jsonl"), "--job", reviewJob, "-o", target, "--audit-seed", "7"]).code).toBe(0);
    expect(readFileSync(`${target}.review.jsonl`, "utf8")).toBe(first);
    expect(cli(["run", join(dir, "t.jsonl"), "--job", reviewJob, "-o", target, "--audit-seed", "8"]).code).toBe(0);
    expect(
      rows(`${target}.review.jsonl`)
        .filter((x) => x.audit)
        .map((x) => x.id),
    ).not.toEqual(audit);
    const usage = JSON.parse(readFileSync(`${target}.usage.json`, "utf8")) as UsageSummary;
    expect(usage.review?.below_threshold).toBe(below.size);
  });

  it("writes a CSV review file beside a CSV output, with the reason first, and a BOM when asked", () => {
    const target = join(dir, "rev.csv");
    expect(cli(["run", join(dir, "t.jsonl"), "--job", jobPath, "-o", target, "--review-below", "0.999", "--csv-bom"]).code).toBe(0);
    expect(readFileSync(target).subarray(0, 3)).toEqual(Buffer.from([0xef, 0xbb, 0xbf]));
    expect(readFileSync(`${target}.review.csv`).subarray(0, 3)).toEqual(Buffer.from([0xef, 0xbb, 0xbf]));
    const table = parse(readFileSync(`${target}.review.csv`, "utf8"), { columns: true, bom: true }) as Record<string, string>[];
    expect(table).toHaveLength(N);
    expect(Object.keys(table[0]!).slice(0, 6)).toEqual(["id", "line", "source", "model", "review_reason", "audit"]);
    expect(table[0]!["review_reason"]).toMatch(/< 0\.999/);
  });

  it("a run killed mid-way and resumed writes each review row once", async () => {
    const big = file("big.jsonl", tickets(100));
    const target = join(dir, "killed.jsonl");
    const args = [BIN, "run", big, "--job", jobPath, "-o", target, "--review-below", "0.9"];
    const env = { ...process.env, TYPED_EVAL_MODEL_PATH: modelPath, TYPED_EVAL_LOG_LEVEL: "warn" };
    const child = spawn(process.execPath, args, { cwd: dir, env, stdio: "ignore" });
    // Kill once the journal holds some finished records.
    // (100 records at the default 1,200 requests/min take 5 s: the run cannot end first.)
    const when = await whenFile(`${target}.journal`, (text) => text.split("\n").length > 20, child);
    expect(when, "the run finished before it could be killed").toBe("ready");
    child.kill("SIGKILL");
    await new Promise((resolve) => child.on("exit", resolve).exitCode !== null && resolve(undefined));
    expect(existsSync(`${target}.review.jsonl`)).toBe(false);
    expect(cli(["run", big, "--job", jobPath, "-o", target, "--review-below", "0.9"]).code).toBe(0);
    const ids = rows(`${target}.review.jsonl`).map((x) => x.id);
    expect(new Set(ids).size).toBe(ids.length);
    const expected = rows(target)
      .filter((x) => Object.entries(questions).some(([n, q]) => top(q, x.answers[n]!) < 0.9))
      .map((x) => x.id);
    expect(ids.sort()).toEqual(expected.sort());
  }, 120_000);
});

/** An earlier run in which every third record's team was answered differently; the other questions as now. */
function earlierRun(name: string): string {
  const earlier = rows(out).map((r, i) => {
    if (i % 3 !== 0) return r;
    const team = r.answers["team"] as Extract<Answer, { type: "choice" }>;
    const options = Object.keys(team.probabilities);
    const other = options.find((o) => o !== team.choice)!;
    return {
      ...r,
      answers: { ...r.answers, team: { ...team, choice: other, probabilities: Object.fromEntries(options.map((o) => [o, o === other ? 1 : 0])) } },
    };
  });
  return file(name, `${earlier.map((r) => JSON.stringify(r)).join("\n")}\n`);
}

describe("report", () => {
  it("compares two runs: shift, agreement and the flipped records", async () => {
    const earlierPath = earlierRun("earlier.jsonl");
    const html = join(dir, "report.html");
    // The real process once (end to end); the other report cases run in this process.
    const r = cli(["report", out, "--compare", earlierPath, "-o", html, "--json"]);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as {
      rows: number;
      compare: { shifts: { question: string; flipped: number; agreement: number; psi: number; flips: { id: string }[] }[] };
    };
    expect(report.rows).toBe(N);
    const team = report.compare.shifts.find((s) => s.question === "team")!;
    expect(team.flipped).toBe(Math.ceil(N / 3));
    expect(team.agreement).toBeCloseTo(1 - Math.ceil(N / 3) / N, 12);
    expect(team.flips.length).toBe(Math.ceil(N / 3));
    expect(report.compare.shifts.find((s) => s.question === "urgent")!.flipped).toBe(0);
    expect(existsSync(html)).toBe(true);
  });

  it("--fail-if is a drift gate: exit 4 naming each breach on its own line, 0 when the night is close enough", async () => {
    const earlierPath = earlierRun("drift-earlier.jsonl");
    const html = join(dir, "drift.html");
    // Random weights give tiny label masses (1e-11 and up): the label-mass limits are set from this night's own figures.
    const plain = JSON.parse((await inProcess(["report", out, "--compare", earlierPath, "--json", "-o", html])).stdout) as RunReport;
    const masses = Object.fromEntries(plain.questions.map((q) => [q.name, q.mean_label_mass!]));
    const below = Math.min(...Object.values(masses)) / 2;
    const gate = `team.agreement<0.9,urgent.psi>0.2,label_mass<${below}`;
    const failed = await inProcess(["report", out, "--compare", earlierPath, "--fail-if", gate, "-o", html, "--json"]);
    expect(failed.code).toBe(4);
    const report = JSON.parse(failed.stdout) as RunReport;
    const agreement = report.compare!.shifts.find((s) => s.question === "team")!.agreement;
    expect(agreement).toBeCloseTo(1 - Math.ceil(N / 3) / N, 12);
    // Only team moved: one breach, one line, naming question, metric and value.
    const lines = failed.stderr.trim().split("\n");
    expect(lines).toEqual([`typed-eval: drift gate: team.agreement = ${agreement!.toFixed(4)}, breaking team.agreement<0.9`]);
    expect(report.gate!.breaches.map((b) => `${b.question}.${b.metric}`)).toEqual(["team.agreement"]);
    // Unchanged questions: PSI 0 over the same bins, full agreement.
    const urgent = report.compare!.shifts.find((s) => s.question === "urgent")!;
    expect(urgent.psi).toBe(0);
    expect(urgent.psi_earlier).toHaveLength(10);
    expect(readFileSync(html, "utf8")).toContain("Gate failed");
    // A bare metric checks every question: each breach its own line.
    const every = await inProcess(["report", out, "--compare", earlierPath, "--fail-if", "agreement<1.01", "-o", html]);
    expect(every.code).toBe(4);
    expect(
      every.stderr
        .trim()
        .split("\n")
        .map((l) => l.replace(/ = .*/, "")),
    ).toEqual(["typed-eval: drift gate: urgent.agreement", "typed-eval: drift gate: team.agreement", "typed-eval: drift gate: mood.agreement"]);
    const mass = await inProcess(["report", out, "--compare", earlierPath, "--fail-if", `mood.label_mass<${masses["mood"]! * 2}`, "-o", html]);
    expect(mass.code).toBe(4);
    expect(mass.stderr).toMatch(/^typed-eval: drift gate: mood\.label_mass = \S+, breaking mood\.label_mass</);
    const passed = await inProcess(["report", out, "--compare", earlierPath, "--fail-if", `team.agreement<0.5,psi>5,label_mass<${below}`, "-o", html]);
    expect(passed.stderr).toBe("");
    expect(passed.code).toBe(0);
    expect(readFileSync(html, "utf8")).toContain("Gate passed");
  });

  it("--fail-if names an unknown metric or question in one line, exit 2, and writes no report", async () => {
    const cases: [string[], RegExp][] = [
      [
        ["--compare", out, "--fail-if", "team.pis>0.2"],
        /^typed-eval: --fail-if: no metric "pis" \(in "team.pis>0.2"\); report gates on psi, js_distance, agreement, label_mass, verdict, with --gold on accuracy, .*\(docs\/metrics\.md\)\n$/,
      ],
      [
        ["--compare", out, "--fail-if", "topic.psi>0.2"],
        /^typed-eval: --fail-if: no question "topic" in "topic.psi>0.2"; the questions are urgent, team, mood\n$/,
      ],
      [["--fail-if", "agreement<0.9"], /^typed-eval: --fail-if: agreement \(in "agreement<0.9"\) compares two nights; add --compare <earlier answers>\n$/],
      [["--compare", out, "--fail-if", "psi>>0.2"], /^typed-eval: --fail-if: cannot read "psi>>0.2"/],
    ];
    for (const [args, message] of cases) {
      const html = join(dir, "never.html");
      const r = await inProcess(["report", out, "-o", html, ...args]);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr).toMatch(message);
      expect(existsSync(html)).toBe(false);
    }
    const folder = await inProcess(["report", out, "-o", dir]);
    expect(folder.code).toBe(2);
    expect(folder.stderr).toMatch(/^typed-eval: cannot write --output .*: it is a directory, not a file; choose another path\n$/);
  });

  it("prints the same verdict from assess --compare and report --gold, first in the terminal and under verdict in the JSON; exit 0 without --fail-if", async () => {
    const earlierPath = earlierRun("verdict-earlier.jsonl");
    const html = join(dir, "verdict.html");
    const a = await inProcess(["assess", out, "--gold", gold, "--compare", earlierPath, "--json", "--bootstrap", "10"]);
    const r = await inProcess(["report", out, "--gold", gold, "--compare", earlierPath, "--json", "--bootstrap", "10", "-o", html]);
    expect([a.code, r.code]).toEqual([0, 0]);
    const fromAssess = JSON.parse(a.stdout) as { verdict: Verdict; compare: RunReport["compare"] };
    const fromReport = JSON.parse(r.stdout) as RunReport & { verdict: Verdict; assessment: Assessment };
    expect(fromAssess.verdict).toEqual(fromReport.verdict);
    expect(fromAssess.compare).toEqual(fromReport.compare);
    // team moved on a third of the records: its drift cell is act, yet nothing fails without a gate.
    const team = fromReport.verdict.questions.find((q) => q.name === "team")!;
    expect(team.cells.drift.mark).toBe("act");
    expect(fromReport.verdict.mark).toBe("act");
    expect(fromReport.assessment.rows.matched).toBe(N);
    const terminal = await inProcess(["report", out, "--gold", gold, "--compare", earlierPath, "--bootstrap", "10", "-o", html]);
    expect(terminal.code).toBe(0);
    expect(terminal.stdout.split("\n")[0]).toBe(`Can these labels be used? ${fromReport.verdict.sentence}`);
    expect(terminal.stdout).not.toMatch(/NaN/);
  });

  it("gives the same report from CSV and Parquet answers as from JSONL: level names, shares, histograms, label mass", async () => {
    const report = async (path: string) => JSON.parse((await inProcess(["report", path, "--json", "-o", join(dir, "same.html")])).stdout) as RunReport;
    const jsonl = await report(out);
    const mood = jsonl.questions.find((q) => q.name === "mood")!;
    expect(displayLabels(mood)).toEqual(["0: calm", "1: annoyed", "2: angry"]);
    expect(mood.label_mass_rows).toBe(N);
    for (const path of [outCsv, outParquet]) {
      const other = await report(path);
      expect(other.questions.map((q) => displayLabels(q))).toEqual(jsonl.questions.map((q) => displayLabels(q)));
      other.questions.forEach((q, i) => {
        const want = jsonl.questions[i]!;
        expect(q.label_counts).toEqual(want.label_counts);
        expect(q.value_histogram).toEqual(want.value_histogram);
        expect(q.confidence_histogram).toEqual(want.confidence_histogram);
        expect(q.label_mass_histogram).toEqual(want.label_mass_histogram);
        expect(q.mean_label_mass).toBeCloseTo(want.mean_label_mass!, 12);
        q.mean_probabilities.forEach((p, j) => expect(p).toBeCloseTo(want.mean_probabilities[j]!, 12));
      });
      const text = (await inProcess(["report", path, "-o", join(dir, "same.html")])).stdout;
      expect(text).toMatch(/mood \(score\): 0: calm \d/);
      expect(readFileSync(join(dir, "same.html"), "utf8")).toContain("0: calm");
    }
  });
});
