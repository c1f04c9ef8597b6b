import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { goldClass, infoOf, readAnswers, readGold, type QuestionInfo } from "../../src/quality/answers.js";
import { loadJob } from "../../src/records/job.js";

const dir = mkdtempSync(join(tmpdir(), "te-answers-"));
const write = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

describe("gold labels", () => {
  const noul: QuestionInfo = { name: "u", type: "noul", labels: ["false", "true"] };
  const choice: QuestionInfo = { name: "t", type: "choice", labels: ["shipping", "billing"] };
  const score: QuestionInfo = { name: "m", type: "score", labels: ["0", "1", "2"], levels: ["calm", "annoyed", "angry"] };

  it("read noul as true/false, yes/no or 1/0; choice by option name; score by index or level text; empty as unlabeled", () => {
    for (const yes of [true, "true", "Yes", "1", 1, "y"]) expect(goldClass(noul, yes, "w")).toBe(1);
    for (const no of [false, "false", "NO", "0", 0]) expect(goldClass(noul, no, "w")).toBe(0);
    expect(goldClass(choice, "billing", "w")).toBe(1);
    expect(goldClass(choice, "Billing ", "w")).toBe(1);
    expect(goldClass(score, 2, "w")).toBe(2);
    expect(goldClass(score, "1", "w")).toBe(1);
    expect(goldClass(score, "Angry", "w")).toBe(2);
    for (const empty of ["", null, undefined]) expect(goldClass(choice, empty, "w")).toBeUndefined();
    expect(() => goldClass(score, "3", "line 4, field m")).toThrow(/line 4, field m: level "3" is outside 0\.\.2/);
    expect(() => goldClass(choice, 3, "w")).toThrow(/not an option name/);
  });

  it("the bundled hand-labeled tickets read cleanly against their job", async () => {
    const job = loadJob("jobs/support-triage.json");
    const questions = Object.entries(job.questions).map(([n, q]) => infoOf(n, q));
    const gold = await readGold("examples/data/tickets.gold.csv", questions, { jobIdField: job.id });
    expect(gold.rows.size).toBe(24);
    expect(gold.ignored).toEqual([]);
    // Every question labeled on every row.
    expect(Array.from(gold.labels.subarray(0, 24 * 3)).every((v) => v >= 0)).toBe(true);
  });

  it("collect every problem of a gold file at once", async () => {
    const path = write("g.csv", "id,t\nA,billing\nB,refunds\n,billing\nA,shipping\n");
    await expect(readGold(path, [choice], {})).rejects.toThrow(
      /3 problems:\n.*line 3, field t: "refunds".*\n.*line 4: no id in field "id".*\n.*line 5: id "A" is labeled twice/,
    );
  });
});

describe("answers files", () => {
  it("discover the questions of a CSV answers file from its header, and read raw columns of a calibrated run", async () => {
    const path = write(
      "a.csv",
      "id,line,source,model,t.choice,t.confidence,t.p.x,t.p.y,t.raw.p.x,t.raw.p.y,u.noul,u.raw.noul\nr1,1,s,m,x,0.2,0.6,0.4,0.9,0.1,0.3,0.2\n",
    );
    let found: QuestionInfo[] = [];
    const rows = [];
    for await (const r of await readAnswers(path, { onQuestions: (q) => (found = q) })) rows.push(r);
    expect(found.map((q) => [q.name, q.type, q.labels])).toEqual([
      ["t", "choice", ["x", "y"]],
      ["u", "noul", ["false", "true"]],
    ]);
    expect(rows[0]!.dist.get("t")).toEqual([0.6, 0.4]);
    expect(rows[0]!.raw?.get("t")).toEqual([0.9, 0.1]);
    expect(rows[0]!.raw!.get("u")![1]).toBeCloseTo(0.2, 15);
  });

  it("refuse a file that is not answers, naming the line", async () => {
    const path = write("not.jsonl", '{"id": "a", "answers": {"t": {"type": "choice", "probabilities": {"x": 1.5}}}}\n');
    const rows = await readAnswers(path, {});
    await expect(rows.next()).rejects.toThrow(/line 1: t probability of x: 1\.5 is not a probability/);
    await expect((await readAnswers(write("x.jsonl", '{"a": 1}\n'), {})).next()).rejects.toThrow(/holds no answers typed-eval wrote/);
  });
});
