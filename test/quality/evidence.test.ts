/**
 * A verdict needs evidence (issue 37): no ok on nothing measured, in the
 * terminal, the JSON and the page; no gate that checks nothing (empty, a
 * limit no figure can pass) and gates that ask for support (`min N`) or
 * judge a figure's interval (`interval`); a gold sample chosen by
 * confidence (a review queue) named as such; a rare class's precision next
 * to its recall; one noise floor and one way of writing counts. On
 * synthetic nights of 2,000 and 5,000 rows with known truth (test/support/label-sets.ts);
 * the in-sample calibration flow through real commands is in
 * quality-cli.test.ts.
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parseConditions } from "../../src/quality/gate.js";
import { compareConfidence, ConfidenceCounts } from "../../src/quality/sample.js";
import { measure } from "../../src/quality/measure.js";
import { qualityPage } from "../../src/quality/pages.js";
import type { RunReport } from "../../src/quality/report.js";
import type { Verdict } from "../../src/quality/verdict.js";
import { runInProcess } from "../support/cli.js";
import { FIVE_QUESTIONS, IDENTITY_FILE, MODEL, type QuestionSpec, writeRun } from "../support/label-sets.js";

const dir = mkdtempSync(join(tmpdir(), "te-evidence-"));
const at = (name: string) => join(dir, name);
const cli = (args: string[]) => runInProcess(args, { TYPED_EVAL_LOG_LEVEL: "warn" });
/** Rows of the five-question night: enough for thousands in the counts, few enough to keep the file quick. */
const N = 2000;

/** A rare class the model over-answers: it finds most of its rows, and most of its answers are wrong. */
const FRAUD: QuestionSpec = { name: "is_fraud", type: "noul", prior: [0.95, 0.05], skill: 3, lean: [0, 3.5] };

let golds: number[][];

beforeAll(() => {
  const night = writeRun(at("tonight.jsonl"), { n: N, seed: 3, questions: FIVE_QUESTIONS, model: MODEL, identity: IDENTITY_FILE });
  golds = night.golds;
  writeFileSync(at("gold.csv"), night.gold);
  // Every answer the same label: only the answered cell has evidence.
  writeRun(at("one-label.jsonl"), {
    n: N,
    seed: 4,
    questions: [{ name: "is_spam", type: "noul", prior: [0.9999, 0.0001], skill: 12 }],
    model: MODEL,
    identity: IDENTITY_FILE,
  });
  const fraud = writeRun(at("fraud.jsonl"), { n: 5000, seed: 7, questions: [FRAUD], model: MODEL, identity: IDENTITY_FILE });
  writeFileSync(at("fraud.gold.csv"), fraud.gold);
  // Twelve rows of a choice: the fraud class has two gold rows, one of them found.
  const labels = ["billing", "shipping", "fraud"];
  const rows = ["billing", "billing", "billing", "billing", "shipping", "shipping", "shipping", "shipping", "billing", "shipping", "fraud", "billing"];
  const gold = ["billing", "billing", "billing", "billing", "shipping", "shipping", "shipping", "shipping", "billing", "shipping", "fraud", "fraud"];
  writeFileSync(
    at("few.jsonl"),
    rows
      .map((answer, i) => {
        const probabilities = Object.fromEntries(labels.map((l) => [l, l === answer ? 0.8 : 0.1]));
        return JSON.stringify({ id: `F${i}`, answers: { team: { type: "choice", choice: answer, probabilities, confidence: 0.7 } } });
      })
      .join("\n"),
  );
  writeFileSync(at("few.gold.csv"), `id,team\n${gold.map((g, i) => `F${i},${g}`).join("\n")}\n`);
});

describe("no verdict without evidence", () => {
  it("report with nothing to compare is n/a in the terminal, the JSON and the page, and says what to add", async () => {
    const html = at("bare.html");
    const terminal = await cli(["report", at("tonight.jsonl"), "-o", html]);
    expect(terminal.code).toBe(0);
    expect(terminal.stdout.split("\n")[0]).toBe(
      "Can these labels be used? Cannot tell: nothing beyond the answered rows was measured. Not measured: agreement with gold, calibration and weakest class (no gold labels given: add --gold <labels>); drift (no earlier run given: add --compare <earlier answers>); suspects (not looked for: run assess --suspects).",
    );
    expect(terminal.stdout).toMatch(/^is_spam \(noul\): n\/a$/m);
    const json = JSON.parse((await cli(["report", at("tonight.jsonl"), "-o", html, "--json"])).stdout) as RunReport & { verdict: Verdict };
    expect(json.verdict.mark).toBe("n/a");
    expect(json.verdict.questions.map((q) => q.mark)).toEqual(["n/a", "n/a", "n/a", "n/a", "n/a"]);
    expect(json.verdict.not_measured.map((n) => [n.column, n.add])).toEqual([
      ["agreement", "add --gold <labels>"],
      ["calibration", "add --gold <labels>"],
      ["drift", "add --compare <earlier answers>"],
      ["suspects", "run assess --suspects"],
      ["weakest_class", "add --gold <labels>"],
    ]);
    const page = readFileSync(html, "utf8");
    expect(page).toContain('<p class="sentence m-na"><span class="mark">n/a</span>Cannot tell: nothing beyond the answered rows was measured.');
    expect(page).not.toMatch(/class="sentence m-ok"/);
  });

  it("answers all of one label with only the answered cell measured are n/a, not 'Yes'", async () => {
    const { verdict, report } = await measure({ answers: at("one-label.jsonl"), report: true });
    expect(report!.questions[0]!.label_counts).toEqual([N, 0]);
    expect(verdict.questions[0]!.cells.answered).toEqual({ mark: "ok", text: "2,000 answered, 0 failed" });
    expect(verdict.mark).toBe("n/a");
    expect(verdict.sentence).toMatch(/^Cannot tell: nothing beyond the answered rows was measured\./);
  });

  it("is ok on drift alone, and n/a overall while one question has nothing measured", async () => {
    writeRun(at("same.jsonl"), { n: N, seed: 3, questions: FIVE_QUESTIONS, model: MODEL, identity: IDENTITY_FILE });
    const compared = await measure({ answers: at("tonight.jsonl"), compare: at("same.jsonl"), report: true });
    expect(compared.verdict.mark).toBe("ok");
    expect(compared.verdict.sentence).toMatch(/^Yes: every question is ok on what was measured\. Not measured: /);
    // Gold for wants_refund and tone only: those two are ok, the three without gold rows cannot be told, so the verdict is n/a.
    const partial = at("partial.gold.csv");
    writeFileSync(partial, `id,wants_refund,tone\n${golds.map((g, i) => `R${i},${g[3] ? "yes" : "no"},${g[4]}`).join("\n")}\n`);
    const some = await measure({ answers: at("tonight.jsonl"), gold: partial, bootstrap: 10 });
    expect(some.verdict.questions.map((q) => [q.name, q.mark])).toEqual([
      ["wants_refund", "ok"],
      ["tone", "ok"],
      ["is_spam", "n/a"],
      ["team", "n/a"],
      ["urgency", "n/a"],
    ]);
    expect(some.verdict.mark).toBe("n/a");
    expect(some.verdict.sentence).toMatch(/^Cannot tell for is_spam, team and urgency: nothing beyond their answered rows was measured; the rest is ok\./);
  });

  it("--fail-if verdict>ok fails a night nobody measured, exit 4, and passes one measured ok", async () => {
    const html = at("gate.html");
    const none = await cli(["report", at("tonight.jsonl"), "-o", html, "--fail-if", "verdict>ok"]);
    expect(none.code).toBe(4);
    expect(none.stderr.split("\n")[0]).toBe(
      "typed-eval: drift gate: is_spam.verdict = n/a (nothing beyond the answered rows was measured), breaking verdict>ok",
    );
    expect(none.stderr.trim().split("\n")).toHaveLength(5);
    const measured = await cli(["report", at("tonight.jsonl"), "--compare", at("same.jsonl"), "-o", html, "--fail-if", "verdict>ok"]);
    expect([measured.code, measured.stderr]).toEqual([0, ""]);
    const assessed = await cli(["assess", at("tonight.jsonl"), "--gold", at("gold.csv"), "--bootstrap", "10", "--fail-if", "team.verdict>=act"]);
    expect(assessed.code).toBe(4);
    expect(assessed.stderr).toBe("typed-eval: quality gate failed: team.verdict>=act (actual act)\n");
  });
});

describe("gates that check nothing are refused", () => {
  it.each([
    ["", /^typed-eval: --fail-if: "" holds no condition, so it would check nothing; write question\.metric>number/],
    [",", /^typed-eval: --fail-if: "," holds no condition/],
    ["   ", /^typed-eval: --fail-if: " {3}" holds no condition/],
    ["team.ece>5", /^typed-eval: --fail-if: ece is between 0 and 1, so "team\.ece>5" can never hold and would check nothing; set a limit inside that range\n$/],
    ["accuracy>1", /accuracy is between 0 and 1, so "accuracy>1" can never hold/],
    ["team.kappa<-1", /kappa is between -1 and 1, so "team\.kappa<-1" can never hold/],
    ['team.recall["billing"]>=1.01', /recall is between 0 and 1/],
    ["mae<0", /mae is 0 or more, so "mae<0" can never hold/],
    ["verdict>act", /the verdict|verdict is ok < look < act, so "verdict>act" can never hold/],
    [
      "team.ece<0.1 interval",
      /^typed-eval: --fail-if: ece has no interval to judge \(in "team\.ece<0\.1 interval"\); those with one: accuracy, weakest_recall, weakest_precision, macro_f1/,
    ],
    ["verdict>ok min 30", /the verdict rests on no row count of its own/],
    ["team.accuracy<0.9 min 0", /cannot read "team\.accuracy<0\.9 min 0"/],
    ["team.accuracy<0.9 often", /cannot read "team\.accuracy<0\.9 often"/],
    ["verdict>fine", /the verdict is ok, look, act; cannot read "fine" as one/],
  ])("assess --fail-if %j: exit 2 before any answers are read", async (gate, message) => {
    const r = await cli(["assess", at("tonight.jsonl"), "--gold", at("gold.csv"), "--fail-if", gate]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe("");
  });

  it("report refuses the empty gate and the impossible one alike, and a drift limit below zero", async () => {
    for (const [gate, message] of [
      ["", /holds no condition/],
      ["psi<0", /psi is 0 or more, so "psi<0" can never hold/],
      ["agreement>1", /agreement is between 0 and 1/],
      ["label_mass>1", /label_mass is between 0 and 1/],
    ] as const) {
      const html = at("refused.html");
      const r = await cli(["report", at("tonight.jsonl"), "--compare", at("tonight.jsonl"), "-o", html, "--fail-if", gate]);
      expect(r.code, gate).toBe(2);
      expect(r.stderr).toMatch(message);
    }
  });

  it("a bare metric checks the questions that have it: weakest_recall beside score questions", async () => {
    // Before: "question urgency has no metric weakest_recall", exit 2.
    const m = await measure({ answers: at("tonight.jsonl"), gold: at("gold.csv"), bootstrap: 10, conditions: parseConditions("weakest_recall<0.5") });
    expect(m.breaches.map((b) => b.question)).toEqual(["is_spam"]);
    expect(m.gate!.breaches[0]!.line).toMatch(/^is_spam\.weakest_recall = 0\.\d{4}, breaking weakest_recall<0\.5$/);
    await expect(
      measure({ answers: at("tonight.jsonl"), gold: at("gold.csv"), bootstrap: 10, conditions: parseConditions("urgency.weakest_recall<0.5") }),
    ).rejects.toThrow(/question urgency has no metric "weakest_recall"/);
  });
});

describe("gates that ask for evidence", () => {
  it("min N holds on a recall of 1 of 2 that the bare condition passes", async () => {
    const args = ["assess", at("few.jsonl"), "--gold", at("few.gold.csv"), "--bootstrap", "10", "--json"];
    const bare = await cli([...args, "--fail-if", 'team.recall["fraud"]<0.4']);
    expect(bare.code).toBe(0);
    const fraud = (JSON.parse(bare.stdout) as { questions: { classes: { label: string; hits: number; gold: number }[] }[] }).questions[0]!.classes.find(
      (c) => c.label === "fraud",
    )!;
    expect([fraud.hits, fraud.gold]).toEqual([1, 2]);
    const min = await cli([...args, "--fail-if", 'team.recall["fraud"]<0.4 min 30']);
    expect(min.code).toBe(4);
    expect(min.stderr).toBe('typed-eval: quality gate failed: team.recall["fraud"]<0.4 min 30 (actual 0.5000 on 2 rows (under min 30))\n');
    const out = JSON.parse(min.stdout) as { gate: { breaches: { support: number; line: string }[] } };
    expect(out.gate.breaches[0]!.support).toBe(2);
    // Enough rows: the bare comparison decides (billing has 6 gold rows, all found).
    expect((await cli([...args, "--fail-if", 'team.recall["billing"]<0.4 min 5'])).code).toBe(0);
  });

  it("interval judges the whole 95% interval: a recall of 1 of 2 cannot clear 0.2, though its point does", async () => {
    const m = await measure({
      answers: at("few.jsonl"),
      gold: at("few.gold.csv"),
      bootstrap: 10,
      conditions: parseConditions('team.recall["fraud"]<0.2 interval'),
    });
    // Wilson's 95% interval of 1 of 2: 0.0945-0.9055.
    expect(m.gate!.breaches.map((b) => b.line)).toEqual(['team.recall["fraud"] = 0.5000 (95%: 0.0945–0.9055), breaking team.recall["fraud"]<0.2 interval']);
    const point = await measure({ answers: at("few.jsonl"), gold: at("few.gold.csv"), bootstrap: 10, conditions: parseConditions('team.recall["fraud"]<0.2') });
    expect(point.breaches).toEqual([]);
    // A lower limit between the interval's bottom and the point breaks only when judged on the interval; an upper limit reads its top.
    const plain = await measure({ answers: at("tonight.jsonl"), gold: at("gold.csv"), bootstrap: 50 });
    const refund = plain.assessment!.questions.find((q) => q.name === "wants_refund")!;
    const spam = plain.assessment!.questions.find((q) => q.name === "is_spam")!;
    const below = (refund.metrics["accuracy"]! + refund.intervals["accuracy"]![0]) / 2;
    const above = (spam.metrics["ece_debiased"]! + spam.intervals["ece_debiased"]![1]) / 2;
    expect(refund.intervals["accuracy"]![0]).toBeLessThan(refund.metrics["accuracy"]!);
    expect(spam.intervals["ece_debiased"]![1]).toBeGreaterThan(spam.metrics["ece_debiased"]!);
    const gates = `wants_refund.accuracy<${below},is_spam.ece_debiased>${above}`;
    const judged = await measure({
      answers: at("tonight.jsonl"),
      gold: at("gold.csv"),
      bootstrap: 50,
      conditions: parseConditions(`${gates.replace(",", " interval,")} interval`),
    });
    expect(judged.breaches.map((b) => `${b.question}.${b.condition.metric}`)).toEqual(["wants_refund.accuracy", "is_spam.ece_debiased"]);
    expect(judged.gate!.breaches[0]!.interval).toEqual(refund.intervals["accuracy"]);
    const points = await measure({ answers: at("tonight.jsonl"), gold: at("gold.csv"), bootstrap: 50, conditions: parseConditions(gates) });
    expect(points.breaches).toEqual([]);
  });
});

describe("rare-class precision in the verdict", () => {
  it("a rare class the model over-answers: precision with its Wilson interval beside recall, marked act though recall reads well", async () => {
    const m = await measure({ answers: at("fraud.jsonl"), gold: at("fraud.gold.csv"), bootstrap: 10 });
    const q = m.assessment!.questions[0]!;
    const yes = q.classes!.find((c) => c.label === "yes")!;
    // Counted independently from the files: predicted yes where p(yes) > 0.5.
    const answers = readFileSync(at("fraud.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => (JSON.parse(l) as { answers: { is_fraud: { noul: number } } }).answers.is_fraud.noul > 0.5);
    const gold = readFileSync(at("fraud.gold.csv"), "utf8")
      .trim()
      .split("\n")
      .slice(1)
      .map((l) => l.endsWith(",yes"));
    const hits = answers.filter((a, i) => a && gold[i]).length;
    expect([hits, gold.filter(Boolean).length, answers.filter(Boolean).length]).toEqual([134, 146, 429]);
    expect([yes.hits, yes.gold, yes.predicted]).toEqual([134, 146, 429]);
    // Wilson intervals: SciPy's binomtest(...).proportion_ci(method="wilson") (test/quality/fixtures/make_sample.py).
    const ref = (JSON.parse(readFileSync(new URL("fixtures/sample.json", import.meta.url), "utf8")) as { wilson: Record<string, [number, number]> }).wilson;
    yes.recall_interval!.forEach((x, i) => expect(x).toBeCloseTo(ref["134/146"]![i]!, 12));
    yes.precision_interval!.forEach((x, i) => expect(x).toBeCloseTo(ref["134/429"]![i]!, 12));
    expect(q.metrics["weakest_precision"]).toBeCloseTo(134 / 429, 15);
    expect(q.intervals["weakest_precision"]).toEqual(yes.precision_interval);
    expect(q.support["weakest_precision"]).toBe(429);
    const cell = m.verdict.questions[0]!.cells.weakest_class;
    expect(cell).toEqual({
      mark: "act",
      text: "yes (rare, 2.9%): recall 0.918 (95%: 0.862–0.952), 134 of 146; precision 0.312 (95%: 0.270–0.358), 134 of 429",
    });
    // The page leads with both class figures, each with its interval and counts.
    const page = qualityPage({ title: "t", verdict: m.verdict, assessment: m.assessment });
    expect(page).toContain("precision of yes, the least precise class (rare)");
    expect(page).toContain("95%: 0.270 – 0.358; 134 of 429 answers right");
    // And the gate reads it by name, with its support.
    const gated = await measure({
      answers: at("fraud.jsonl"),
      gold: at("fraud.gold.csv"),
      bootstrap: 10,
      conditions: parseConditions("weakest_precision<0.5 min 100"),
    });
    expect(gated.gate!.breaches.map((b) => b.line)).toEqual(["is_fraud.weakest_precision = 0.3124 on 429 rows, breaking weakest_precision<0.5 min 100"]);
  });
});

describe("what the gold sample is", () => {
  /** Gold for the rows a review queue would hold: team below 0.7, plus every 50th other row (a 2% audit sample). */
  function reviewQueueGold(): { path: string; rows: number } {
    const lines = readFileSync(at("tonight.jsonl"), "utf8").trim().split("\n");
    const goldLines = readFileSync(at("gold.csv"), "utf8").trim().split("\n");
    const picked = lines.flatMap((l, i) => {
      const team = (JSON.parse(l) as { answers: { team: { probabilities: Record<string, number> } } }).answers.team;
      return Math.max(...Object.values(team.probabilities)) < 0.7 || i % 50 === 0 ? [goldLines[i + 1]!] : [];
    });
    const path = at("queue.gold.csv");
    writeFileSync(path, `${[goldLines[0], ...picked].join("\n")}\n`);
    return { path, rows: picked.length };
  }

  it("names gold chosen by confidence, marks what it measures look, and leaves a random sample alone", async () => {
    const queue = reviewQueueGold();
    const m = await measure({ answers: at("tonight.jsonl"), gold: queue.path, bootstrap: 10 });
    const team = m.assessment!.questions.find((q) => q.name === "team")!;
    const c = team.sample!.confidence!;
    expect(c).toMatchObject({ chosen: true, direction: "less sure", gold_rows: queue.rows, run_rows: N });
    expect(c.distance).toBeGreaterThan(0.5);
    expect(c.p).toBeLessThan(1e-10);
    // Selection on team says nothing about the other questions' confidence: their gold is a random sample of theirs.
    for (const q of m.assessment!.questions.filter((x) => x.name !== "team")) expect(q.sample?.confidence?.chosen, q.name).toBe(false);
    const row = m.verdict.questions.find((q) => q.name === "team")!;
    for (const column of ["agreement", "calibration", "weakest_class"] as const) {
      expect(row.cells[column].mark, column).toBe("look");
      expect(row.cells[column].text).toMatch(/; on gold chosen by confidence \(less sure than the run\)$/);
    }
    expect(m.verdict.sample).toMatch(
      /^The gold of team was chosen by confidence: its rows are less sure than the run's \(median confidence 0\.\d\d against 0\.\d\d; KS distance 0\.\d\d, p < 0\.0001\), as a review queue's are: its figures describe the rows the model was least sure of \(accuracy and recall likely below the run's\), not the run\. Label a random sample/,
    );
    expect(describeFirstLines(m.verdict)).toContain(m.verdict.sample);
    const page = qualityPage({ title: "t", verdict: m.verdict, assessment: m.assessment });
    expect(page).toContain('<p class="model changed sample">The gold of team was chosen by confidence');
    // The same night's whole gold is no sample of anything: nothing said.
    const whole = await measure({ answers: at("tonight.jsonl"), gold: at("gold.csv"), bootstrap: 10 });
    expect(whole.verdict.sample).toBeUndefined();
  });

  it("flags no random sample and every review queue: 0 of 5,000 random golds of 300 rows; queues below 0.6 to 0.95, all", () => {
    const names = FIVE_QUESTIONS.map((q) => q.name);
    // Each question's top-label confidence on every row, as assess counts the run's rows.
    const tops = names.map(() => new Float64Array(N));
    readFileSync(at("tonight.jsonl"), "utf8")
      .trim()
      .split("\n")
      .forEach((line, i) => {
        const answers = (JSON.parse(line) as { answers: Record<string, { noul?: number; probabilities?: Record<string, number> }> }).answers;
        names.forEach((name, j) => {
          const a = answers[name]!;
          tops[j]![i] = a.noul !== undefined ? Math.max(a.noul, 1 - a.noul) : Math.max(...Object.values(a.probabilities!));
        });
      });
    const runs = tops.map((t) => {
      const c = new ConfidenceCounts();
      for (const x of t) c.add([x]);
      return c;
    });
    let seed = 17;
    const random = () => ((seed = (seed * 16807) % 2147483647), seed / 2147483647);
    let flagged = 0;
    for (let trial = 0; trial < 1000; trial++)
      tops.forEach((t, j) => {
        const picked = new Float64Array(300);
        for (let i = 0; i < 300; i++) picked[i] = t[Math.floor(random() * N)]!;
        if (compareConfidence(picked, runs[j]!)!.chosen) flagged++;
      });
    expect(flagged).toBe(0);
    // A review queue at any usual threshold, with a 2% audit sample of the rest: chosen, less sure, once the rows below the threshold are most of it.
    let queues = 0;
    for (const threshold of [0.6, 0.7, 0.8, 0.9, 0.95])
      tops.forEach((t, j) => {
        const below = Array.from(t).filter((x) => x < threshold).length;
        const queue = Array.from(t).filter((x, i) => x < threshold || i % 50 === 0);
        if (below < queue.length / 2 || queue.length > N * 0.8) return;
        queues++;
        expect(compareConfidence(Float64Array.from(queue), runs[j]!), `${names[j]} below ${threshold}`).toMatchObject({ chosen: true, direction: "less sure" });
      });
    expect(queues).toBeGreaterThanOrEqual(10);
  });
});

describe("one way to write a figure", () => {
  it("counts have thousands separators everywhere, and the noise floor is one figure in the terminal, the verdict and the page", async () => {
    const assess = await cli(["assess", at("tonight.jsonl"), "--gold", at("gold.csv"), "--bootstrap", "10"]);
    const report = await cli(["report", at("tonight.jsonl"), "--gold", at("gold.csv"), "--bootstrap", "10", "-o", at("numbers.html")]);
    const calibrate = await cli(["calibrate", at("tonight.jsonl"), "--gold", at("gold.csv"), "-o", at("numbers.cal.json")]);
    expect(calibrate.stdout).toMatch(/^is_spam \(noul, 2,000 rows\): /m);
    for (const text of [assess.stdout, report.stdout, calibrate.stdout]) {
      // Before: "5000 of 5,000 gold rows matched".
      expect(text.match(/(?<![\d.,\w-])\d{4,}(?![\d,])/g)).toBeNull();
      expect(text).toContain("2,000");
    }
    const json = JSON.parse((await cli(["assess", at("tonight.jsonl"), "--gold", at("gold.csv"), "--bootstrap", "10", "--json"])).stdout) as {
      questions: { name: string; ece_noise_floor: { median: number; p95: number } }[];
    };
    const page = readFileSync(at("numbers.html"), "utf8");
    for (const q of json.questions) {
      const floor = q.ece_noise_floor.p95.toFixed(3);
      // Before: the table printed the median as the noise floor, the verdict the 95th percentile.
      const block = assess.stdout.slice(assess.stdout.indexOf(`\n${q.name} (`));
      expect(block.match(/noise floor (\d\.\d+)/)?.[1], q.name).toBe(floor);
      const section = page.slice(page.indexOf(`id="q-${q.name}"`));
      expect(section.match(/noise floor (\d\.\d+)/)?.[1], q.name).toBe(floor);
    }
    for (const floor of [...assess.stdout.matchAll(/noise floor (\d\.\d+)/g)].map((x) => x[1])) {
      expect(json.questions.map((q) => q.ece_noise_floor.p95.toFixed(3))).toContain(floor);
    }
  });

  it("report --gold never suggests --suspects, which report does not take", async () => {
    const r = await cli(["report", at("tonight.jsonl"), "--gold", at("gold.csv"), "--bootstrap", "10", "-o", at("suspects.html")]);
    expect(r.stdout).not.toMatch(/add --suspects/);
    expect(r.stdout).toContain("suspects (not looked for: run assess --suspects)");
    expect(readFileSync(at("suspects.html"), "utf8")).not.toMatch(/add --suspects/);
  });
});

/** The verdict's first lines as the terminal prints them. */
function describeFirstLines(v: Verdict): string {
  return [v.sentence, v.model.text, v.sample ?? ""].join("\n");
}
