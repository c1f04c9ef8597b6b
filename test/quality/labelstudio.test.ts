/**
 * The review round trip through Label Studio: a review file written by the
 * runner's own encoders becomes tasks with pre-annotations; an export built
 * from Label Studio's documented JSON export format (tasks with
 * `annotations[].result` choices, `was_cancelled`, `ground_truth`) reads back
 * as gold for assess, calibrate and thresholds; bad exports are exit 2,
 * naming the task, with nothing written.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { Question } from "../../src/api/schema.js";
import { answerFrom } from "../../src/calibration/maps.js";
import { infoOf } from "../../src/quality/answers.js";
import { isLabelStudioExport, readLabelStudioGold, reviewTasks, type LabelStudioTask } from "../../src/quality/labelstudio.js";
import type { AnswerEntry } from "../../src/runner/state/journal.js";
import { encoderFor } from "../../src/runner/output/outputs.js";
import type { Job } from "../../src/records/job.js";
import { seededRandom } from "../../src/quality/metrics.js";
import { BIN } from "../support/cli.js";
import { reviewVerdict } from "../../src/runner/output/review.js";

const dir = mkdtempSync(join(tmpdir(), "te-labelstudio-"));
const questions: Record<string, Question> = {
  refund: { type: "noul", instructions: "Does the customer ask for their money back?", criteria: { true: "A refund or chargeback", false: "Anything else" } },
  team: { type: "choice", instructions: "Which team?", criteria: { shipping: "Late or lost deliveries", billing: "Charges & invoices", product: null } },
  mood: { type: "score", instructions: "How upset?", criteria: ["calm", "annoyed", "furious"] },
};
const job: Job = { model: "default", state: "ticket", id: "ticket_id", keep: ["customer.tier", "ticket"], questions };
const N = 40;

function cli(args: string[]) {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8", cwd: dir, timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** What a person chose for row i (index into each question's labels): the model's top answer on most rows, another on some. */
const person = (i: number, k: number, top: number) => (i % 5 === 0 ? (top + 1) % k : top);

let jobPath: string;
let review: { jsonl: string; csv: string; parquet: string };
let tops: Record<string, number>[];

/** A Label Studio JSON export of the exported tasks, labelled by `person` (ids 1001...), as Label Studio writes one. */
function exported(tasks: LabelStudioTask[], edit: (task: Record<string, unknown>, i: number) => void = () => undefined): string {
  const out = tasks.map((t, i) => {
    const result = t.predictions[0]!.result.map((r) => {
      const values = choicesOf(r.from_name);
      const top = values.indexOf(r.value.choices[0] as string);
      return {
        id: `r${i}${r.from_name}`,
        from_name: r.from_name,
        to_name: r.to_name,
        type: "choices",
        origin: "manual",
        value: { choices: [values[person(i, values.length, top)]] },
      };
    });
    const task: Record<string, unknown> = {
      id: 1001 + i,
      data: t.data,
      annotations: [
        {
          id: 5000 + i,
          completed_by: 1,
          result,
          was_cancelled: false,
          ground_truth: false,
          created_at: "2026-11-23T10:00:00.000000Z",
          updated_at: "2026-11-23T10:00:00.000000Z",
          lead_time: 4.2,
          prediction: {},
          result_count: 0,
          task: 1001 + i,
          project: 7,
        },
      ],
      predictions: t.predictions,
      drafts: [],
      meta: {},
      created_at: "2026-11-23T09:00:00.000000Z",
      updated_at: "2026-11-23T10:00:00.000000Z",
      inner_id: i + 1,
      total_annotations: 1,
      cancelled_annotations: 0,
      total_predictions: 1,
      project: 7,
    };
    edit(task, i);
    return task;
  });
  return JSON.stringify(out, null, 2);
}

let config: string;
function choicesOf(name: string): string[] {
  const block = new RegExp(`<Choices name="${name}"[^>]*>([\\s\\S]*?)</Choices>`).exec(config)?.[1] ?? "";
  return [...block.matchAll(/<Choice value="([^"]*)"/g)].map((m) => (m[1] as string).replaceAll("&amp;", "&"));
}

beforeAll(() => {
  jobPath = join(dir, "job.json");
  writeFileSync(jobPath, JSON.stringify(job));
  const random = seededRandom(4);
  const entries: AnswerEntry[] = [];
  tops = [];
  for (let i = 0; i < N; i++) {
    const answers: AnswerEntry["answers"] = {};
    const top: Record<string, number> = {};
    for (const [name, q] of Object.entries(questions)) {
      const k = q.type === "noul" ? 2 : q.type === "choice" ? 3 : 3;
      const w = Array.from({ length: k }, () => random() ** 2);
      const s = w.reduce((a, b) => a + b, 0);
      const p = w.map((x) => x / s);
      answers[name] = answerFrom(q, p);
      top[name] = p.indexOf(Math.max(...p));
    }
    tops.push(top);
    entries.push({
      k: "answer",
      seq: i,
      line: i + 1,
      source: "tickets.jsonl",
      id: `T${i}`,
      h: "0",
      model: "qwen-test-1",
      answers,
      usage: { input_tokens: 10, output_tokens: 3 },
      keep: { "customer.tier": i % 2 ? "free" : "gold", ticket: `Ticket ${i}: "where is my parcel", says the customer, twice` },
    } as AnswerEntry);
  }
  const policy = { thresholds: { team: 0.99 }, auditRate: 0, seed: 1 };
  review = { jsonl: join(dir, "out.review.jsonl"), csv: join(dir, "out.review.csv"), parquet: join(dir, "out.review.parquet") };
  for (const format of ["jsonl", "csv", "parquet"] as const) {
    const encoder = encoderFor(format, { job, shape: { calibrated: new Set(), review: true } });
    const parts = entries.map((entry) => encoder.row({ entry, answers: entry.answers, review: reviewVerdict(policy, questions, entry.answers, entry.id) }));
    parts.push(encoder.end());
    writeFileSync(review[format], Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p) : p))));
  }
  const r = cli(["labelstudio", "export", review.jsonl, "--job", jobPath, "-o", "tasks.json", "--config", "config.xml"]);
  expect(r.code, r.stderr).toBe(0);
  config = readFileSync(join(dir, "config.xml"), "utf8");
}, 60_000);

const tasksOf = (path: string) => JSON.parse(readFileSync(join(dir, path), "utf8")) as LabelStudioTask[];

describe("labelstudio export", () => {
  it("writes one task per review row: id, reason and kept fields as data, the answers as choices pre-annotations the config matches", () => {
    const tasks = tasksOf("tasks.json");
    expect(tasks).toHaveLength(N);
    const t = tasks[3]!;
    expect(t.data).toEqual({
      id: "T3",
      review_reason: expect.stringMatching(/^team 0\.\d{3} < 0\.99$/),
      customer_tier: "free",
      ticket: 'Ticket 3: "where is my parcel", says the customer, twice',
    });
    const p = t.predictions[0]!;
    expect(p.model_version).toBe("qwen-test-1");
    expect(p.result.map((r) => [r.from_name, r.to_name, r.type])).toEqual([
      ["refund", "text_ticket", "choices"],
      ["team", "text_ticket", "choices"],
      ["mood", "text_ticket", "choices"],
    ]);
    // The model's top answer, named as the config names it, with its probability; the task scored by its least sure answer.
    for (const r of p.result) expect(r.value.choices).toEqual([choicesOf(r.from_name)[tops[3]![r.from_name]!]]);
    expect(p.score).toBe(Math.min(...p.result.map((r) => r.score)));
    expect(choicesOf("refund")).toEqual(["no", "yes"]);
    expect(choicesOf("team")).toEqual(["shipping", "billing", "product"]);
    expect(choicesOf("mood")).toEqual(["0: calm", "1: annoyed", "2: furious"]);
    expect(config).toContain('<Text name="text_ticket" value="$ticket"/>');
    expect(config).toContain('<Choice value="billing" hint="Charges &amp; invoices"/>');
    expect(config).toContain('<Choices name="team" toName="text_ticket" choice="single-radio"');
  });

  it("gives the same tasks from a CSV or Parquet review file", async () => {
    const a = tasksOf("tasks.json");
    for (const path of [review.csv, review.parquet]) {
      const b = await reviewTasks(path, job);
      expect(b.map((t) => t.data)).toEqual(a.map((t) => t.data));
      expect(b.map((t) => t.predictions[0]!.result.map((x) => x.value.choices[0]))).toEqual(
        a.map((t) => t.predictions[0]!.result.map((x) => x.value.choices[0])),
      );
    }
  });

  it("a review row without an id is exit 2 naming its line, and no tasks file", () => {
    const bad = join(dir, "bad.review.jsonl");
    const lines = readFileSync(review.jsonl, "utf8").trim().split("\n");
    lines[2] = lines[2]!.replace('"id":"T2",', "");
    writeFileSync(bad, `${lines.join("\n")}\n`);
    const r = cli(["labelstudio", "export", bad, "--job", jobPath, "-o", "bad-tasks.json", "--config", "bad-config.xml"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("line 3: no id");
    expect(existsSync(join(dir, "bad-tasks.json"))).toBe(false);
    expect(existsSync(join(dir, "bad-config.xml"))).toBe(false);
  }, 120_000);
});

describe("a Label Studio export as gold", () => {
  it("assess reads it directly as --gold; labelstudio import writes the same gold as CSV", () => {
    const exportPath = join(dir, "export.json");
    writeFileSync(exportPath, exported(tasksOf("tasks.json")));
    expect(isLabelStudioExport(exportPath)).toBe(true);
    expect(isLabelStudioExport(review.jsonl)).toBe(false);
    const a = cli(["assess", review.jsonl, "--gold", exportPath, "--job", jobPath, "--json", "--bootstrap", "0"]);
    expect(a.code, a.stderr).toBe(0);
    const assessment = JSON.parse(a.stdout);
    expect(assessment.rows.matched).toBe(N);
    // The person differs from the model on every fifth row.
    for (const q of assessment.questions) expect(q.metrics.accuracy).toBeCloseTo(1 - 8 / N, 12);
    const i = cli(["labelstudio", "import", exportPath, "--job", jobPath, "-o", "gold.csv"]);
    expect(i.code, i.stderr).toBe(0);
    const csv = readFileSync(join(dir, "gold.csv"), "utf8").trim().split("\n");
    expect(csv[0]).toBe("id,refund,team,mood");
    expect(csv).toHaveLength(N + 1);
    const b = cli(["assess", review.jsonl, "--gold", "gold.csv", "--job", jobPath, "--json", "--bootstrap", "0"]);
    expect(JSON.parse(b.stdout).questions).toEqual(assessment.questions);
  }, 120_000);

  it("calibrate and thresholds take it as --gold", () => {
    const exportPath = join(dir, "export.json");
    const c = cli(["calibrate", review.jsonl, "--gold", exportPath, "--job", jobPath, "-o", "calibration.json"]);
    expect(c.code, c.stderr).toBe(0);
    expect(JSON.parse(readFileSync(join(dir, "calibration.json"), "utf8")).fitted_on.gold).toBe(exportPath);
    const t = cli(["thresholds", review.jsonl, "--gold", exportPath, "--job", jobPath, "--target-accuracy", "0.5", "--json", "--bootstrap", "0"]);
    expect(t.code, t.stderr).toBe(0);
    expect(JSON.parse(t.stdout)).toHaveLength(3);
  }, 120_000);

  it("takes the ground-truth annotation when annotators disagree, and skips cancelled ones beside a real one", () => {
    const tasks = tasksOf("tasks.json");
    const path = join(dir, "export-multi.json");
    writeFileSync(
      path,
      exported(tasks, (task, i) => {
        const [first] = task["annotations"] as Record<string, unknown>[];
        if (i === 0) {
          // A second annotator disagrees everywhere but the first one is marked ground truth.
          const other = structuredClone(first!);
          for (const r of other["result"] as { value: { choices: string[] } }[])
            r.value.choices = ["no"].includes(r.value.choices[0]!) ? ["yes"] : r.value.choices;
          first!["ground_truth"] = true;
          task["annotations"] = [first, other];
        }
        if (i === 1) task["annotations"] = [{ ...first, id: 1, result: [], was_cancelled: true }, first];
      }),
    );
    const a = cli(["assess", review.jsonl, "--gold", path, "--job", jobPath, "--json", "--bootstrap", "0"]);
    expect(a.code, a.stderr).toBe(0);
    for (const q of JSON.parse(a.stdout).questions) expect(q.metrics.accuracy).toBeCloseTo(1 - 8 / N, 12);
  }, 120_000);

  const cases: [string, (task: Record<string, unknown>, i: number) => void, RegExp][] = [
    [
      "an unknown option",
      (task, i) => {
        if (i === 2) (task["annotations"] as { result: { value: { choices: string[] } }[] }[])[0]!.result[1]!.value.choices = ["refunds"];
      },
      /task 1003 \(item 3\), id "T2", team: "refunds" is not an option of team; options: shipping, billing, product/,
    ],
    [
      "a missing id",
      (task, i) => {
        if (i === 4) delete (task["data"] as Record<string, unknown>)["id"];
      },
      /task 1005 \(item 5\): no data\.id/,
    ],
    [
      "a task with no annotation",
      (task, i) => {
        if (i === 6) task["annotations"] = [];
      },
      /task 1007 \(item 7\), id "T6": not labelled \(no annotation\)/,
    ],
    [
      "a cancelled annotation",
      (task, i) => {
        if (i === 7) (task["annotations"] as Record<string, unknown>[])[0]!["was_cancelled"] = true;
      },
      /task 1008 \(item 8\), id "T7": its annotation was cancelled \(skipped\)/,
    ],
    [
      "annotators who disagree",
      (task, i) => {
        if (i === 8) {
          const [a] = task["annotations"] as Record<string, unknown>[];
          const b = structuredClone(a!);
          (b["result"] as { from_name: string; value: { choices: string[] } }[])[2]!.value.choices = ["2: furious"];
          (a!["result"] as { from_name: string; value: { choices: string[] } }[])[2]!.value.choices = ["0: calm"];
          task["annotations"] = [a, b];
        }
      },
      /task 1009 \(item 9\), id "T8", mood: annotations disagree \(0: calm, 2: furious\); settle it or mark one ground truth/,
    ],
  ];
  const info = Object.entries(questions).map(([name, q]) => infoOf(name, q));
  for (const [what, edit, message] of cases) {
    it(`${what} is a problem naming the task`, async () => {
      const path = join(dir, `${what.replaceAll(" ", "-")}.json`);
      writeFileSync(path, exported(tasksOf("tasks.json"), edit));
      await expect(readLabelStudioGold(path, info)).rejects.toThrow(message);
    });
  }

  it("a bad export is exit 2 with one message for all its problems, and nothing written", () => {
    const path = join(dir, "bad-export.json");
    writeFileSync(
      path,
      exported(tasksOf("tasks.json"), (task, i) => {
        for (const [, edit] of cases) edit(task, i);
      }),
    );
    const a = cli(["assess", review.jsonl, "--gold", path, "--job", jobPath, "--html", "bad.html", "--suspects", "bad-suspects.csv"]);
    expect(a.code).toBe(2);
    expect(a.stderr).toContain(`${path}: 5 problems:`);
    for (const [, , message] of cases) expect(a.stderr).toMatch(message);
    expect(a.stderr).not.toMatch(/\n\s+at /);
    expect(existsSync(join(dir, "bad.html"))).toBe(false);
    expect(existsSync(join(dir, "bad-suspects.csv"))).toBe(false);
    const i = cli(["labelstudio", "import", path, "--job", jobPath, "-o", "bad-gold.csv"]);
    expect(i.code).toBe(2);
    expect(i.stderr).toContain("5 problems");
    expect(existsSync(join(dir, "bad-gold.csv"))).toBe(false);
  }, 120_000);

  it("a JSON file that is not an export says so", async () => {
    const path = join(dir, "not-an-export.json");
    writeFileSync(path, JSON.stringify([{ id: "T1", team: "billing" }]));
    expect(isLabelStudioExport(path)).toBe(true);
    await expect(readLabelStudioGold(path, info)).rejects.toThrow("(item 1): no data object; is this a Label Studio JSON export");
  });
});
