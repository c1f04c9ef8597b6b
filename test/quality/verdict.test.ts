/**
 * The verdict on a night of five questions of all three types
 * (test/support/label-sets.ts): a rare class the model misses is act while
 * accuracy reads above 0.95; a model change is named at the top; a
 * comparison with no shared id says n/a with its reason, and no NaN is
 * printed in the terminal, the JSON or the page; a cell without evidence is
 * n/a, never ok. (The commands' own flags, JSON and exit codes:
 * quality-cli.test.ts.)
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parseConditions } from "../../src/quality/gate.js";
import { measure } from "../../src/quality/measure.js";
import { qualityPage } from "../../src/quality/pages.js";
import { describeShifts } from "../../src/quality/report.js";
import { describeVerdict } from "../../src/quality/verdict.js";
import { FIVE_QUESTIONS, IDENTITY_FILE, IDENTITY_SHA, MODEL, writeRun } from "../support/label-sets.js";

const dir = mkdtempSync(join(tmpdir(), "te-verdict-"));
const at = (name: string) => join(dir, name);

beforeAll(() => {
  const night = { n: 1000, seed: 3, questions: FIVE_QUESTIONS, model: MODEL };
  const tonight = writeRun(at("tonight.jsonl"), { ...night, identity: IDENTITY_FILE });
  writeFileSync(at("gold.csv"), tonight.gold);
  writeRun(at("same.jsonl"), { ...night, identity: IDENTITY_FILE });
  writeRun(at("other-model.jsonl"), { ...night, identity: IDENTITY_SHA, sharpness: 1.8 });
  writeRun(at("disjoint.jsonl"), { ...night, identity: IDENTITY_FILE, firstId: 100_000 });
});

describe("the verdict", () => {
  it("marks a rare class the model misses act, though accuracy reads above 0.95", async () => {
    const m = await measure({ answers: at("tonight.jsonl"), gold: at("gold.csv"), bootstrap: 10 });
    const spam = m.assessment!.questions.find((q) => q.name === "is_spam")!;
    expect(spam.metrics["accuracy"]).toBeGreaterThan(0.95);
    const yes = spam.classes!.find((c) => c.label === "yes")!;
    expect(yes.rare).toBe(true);
    expect(yes.hits / yes.gold).toBeLessThan(0.3);
    expect(spam.headline).toBe("weakest_recall");
    const row = m.verdict.questions.find((q) => q.name === "is_spam")!;
    expect(row.cells.weakest_class.mark).toBe("act");
    expect(row.cells.weakest_class.text).toMatch(
      new RegExp(`^yes \\(rare, \\d\\.\\d%\\): recall 0\\.\\d{3} \\(95%: 0\\.\\d{3}–0\\.\\d{3}\\), ${yes.hits} of ${yes.gold}; precision `),
    );
    expect(row.cells.agreement.mark).not.toBe("act");
    expect(m.verdict.mark).toBe("act");
    expect(m.verdict.sentence).toMatch(/^Not yet: act on is_spam \(weakest class\)/);
    const text = describeVerdict(m.verdict);
    expect(text.split("\n")[0]).toBe(`Can these labels be used? ${m.verdict.sentence}`);
    expect(text).toMatch(/\n {2}weakest class +act +yes \(rare/);
    // A gate on the class marks the cell where it is shown, with the condition and the value.
    const gated = await measure({
      answers: at("tonight.jsonl"),
      gold: at("gold.csv"),
      bootstrap: 10,
      conditions: parseConditions('is_spam.recall["yes"]<0.5'),
    });
    expect(gated.breaches).toHaveLength(1);
    expect(gated.verdict.questions.find((q) => q.name === "is_spam")!.cells.weakest_class.gate).toEqual([
      `is_spam.recall["yes"]<0.5 (${(yes.hits / yes.gold).toFixed(3)})`,
    ]);
  });

  it("names both runs' models and flags a model change at the top", async () => {
    const changed = await measure({ answers: at("tonight.jsonl"), compare: at("other-model.jsonl"), report: true });
    expect(changed.verdict.model.changed).toBe(true);
    expect(changed.verdict.model.text).toBe(
      "The model changed: the earlier run was answered by qwen2.5-0.5b-instruct-1.0.0: local, sha256 67c4f157…, chatml, this one by qwen2.5-0.5b-instruct-1.0.0: local file qwen2.5-0.5b-instruct-q4_k_m.gguf, 398 MB, chatml; what moved may be the model, not the data.",
    );
    expect(describeVerdict(changed.verdict).split("\n")[1]).toBe(changed.verdict.model.text);
    // The sharper model moves the noul and score distributions, not the top labels: every drift cell names the change.
    for (const q of changed.verdict.questions) expect(q.cells.drift.text).toMatch(/another model$/);
    const html = qualityPage({ title: "t", verdict: changed.verdict, report: changed.report });
    expect(html.indexOf('class="model changed"')).toBeGreaterThan(0);
    expect(html.indexOf('class="model changed"')).toBeLessThan(html.indexOf('<table class="verdict"'));
    const same = await measure({ answers: at("tonight.jsonl"), compare: at("same.jsonl"), report: true });
    expect(same.verdict.model.changed).toBe(false);
    for (const q of same.verdict.questions) expect(q.cells.drift).toEqual({ mark: "ok", text: "PSI 0.000, JS 0.000, agreement 100.0%" });
  });

  it("with no id in both runs says n/a and why; no NaN in the terminal, the JSON or the page", async () => {
    const m = await measure({ answers: at("tonight.jsonl"), compare: at("disjoint.jsonl"), report: true, conditions: parseConditions("team.agreement<0.9") });
    const r = m.report!;
    expect(r.compare!.shifts.every((s) => s.agreement === null)).toBe(true);
    expect(describeShifts(r)).toContain("agreement n/a: no id is in both runs");
    expect(m.verdict.questions[0]!.cells.drift.text).toContain("agreement n/a: no id in both runs");
    // A gate on agreement fails closed, saying why.
    expect(m.gate!.breaches.map((b) => b.line)).toEqual(["team.agreement = n/a (no ids in both runs), breaking team.agreement<0.9"]);
    const texts = [
      describeVerdict(m.verdict),
      describeShifts(r),
      JSON.stringify({ ...r, verdict: m.verdict }),
      qualityPage({ title: "t", verdict: m.verdict, report: r, gate: m.gate }),
    ];
    for (const text of texts) expect(text).not.toMatch(/NaN|Infinity/);
  });

  it("says n/a with the reason where there is no evidence, and never counts it ok", async () => {
    const { verdict } = await measure({ answers: at("tonight.jsonl"), report: true });
    for (const q of verdict.questions) {
      for (const column of ["agreement", "calibration", "weakest_class"] as const)
        expect(q.cells[column]).toEqual({ mark: "n/a", text: "n/a: no gold labels given", add: "add --gold <labels>" });
      expect(q.cells.suspects).toEqual({ mark: "n/a", text: "n/a: not looked for", add: "run assess --suspects" });
      expect(q.cells.drift).toEqual({ mark: "n/a", text: "n/a: no earlier run given", add: "add --compare <earlier answers>" });
      // The answered cell is ok, but rows answered say nothing of their labels: the question is n/a, not ok.
      expect(q.cells.answered.mark).toBe("ok");
      expect(q.mark).toBe("n/a");
    }
    expect(verdict.mark).toBe("n/a");
    expect(verdict.not_measured.map((n) => n.column)).toEqual(["agreement", "calibration", "drift", "suspects", "weakest_class"]);
    expect(verdict.sentence).toBe(
      "Cannot tell: nothing beyond the answered rows was measured. Not measured: agreement with gold, calibration and weakest class (no gold labels given: add --gold <labels>); drift (no earlier run given: add --compare <earlier answers>); suspects (not looked for: run assess --suspects).",
    );
    // No failures recorded anywhere: the answered cell is n/a too, not ok.
    const bare = at("bare.jsonl");
    writeRun(bare, { n: 50, seed: 9, questions: FIVE_QUESTIONS.slice(0, 1), model: "m", identity: IDENTITY_FILE });
    rmSync(`${bare}.errors.jsonl`);
    rmSync(`${bare}.usage.json`);
    const alone = await measure({ answers: bare, report: true });
    expect(alone.verdict.questions[0]!.cells.answered).toEqual({
      mark: "n/a",
      text: "n/a: 50 answered; failures not recorded (no errors file or usage summary beside the answers)",
    });
    expect(alone.verdict.sentence).toMatch(/^Cannot tell: nothing beyond the answered rows was measured\./);
    expect(alone.verdict.mark).toBe("n/a");
  });
});
