/**
 * The review round trip through Label Studio. A review file written by the
 * runner's own encoders (from a job that does not keep its state field, as
 * the bundled job does not) becomes tasks holding the state the model read,
 * under names of our own; Label Studio's JSON, JSON-MIN and CSV exports of
 * those tasks (test/quality/fixtures/labelstudio-exports.ts, with Label
 * Studio's own fields) read back as gold joined by our record id, for a job
 * with an id field and for one keyed by line numbers, where Label Studio's
 * task ids look like ours; bad exports are exit 2, naming the task, with
 * nothing written.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { Question } from "../../src/api/schema.js";
import { answerFrom } from "../../src/calibration/maps.js";
import { infoOf } from "../../src/quality/answers.js";
import { controlName, isLabelStudioExport, type LabelStudioTask, readLabelStudioGold, reviewTasks } from "../../src/quality/labelstudio.js";
import { seededRandom } from "../../src/quality/metrics.js";
import type { Job } from "../../src/records/job.js";
import { encoderFor } from "../../src/runner/output/outputs.js";
import { outputFormat } from "../../src/records/formats.js";
import { reviewVerdict } from "../../src/runner/output/review.js";
import type { AnswerEntry } from "../../src/runner/state/journal.js";
import { runInProcess } from "../support/cli.js";
import { type Choose, csvExport, FIRST_TASK_ID, jsonExport, jsonMinExport } from "./fixtures/labelstudio-exports.js";

const dir = mkdtempSync(join(tmpdir(), "te-labelstudio-"));
const questions: Record<string, Question> = {
  refund: { type: "noul", instructions: "Does the customer ask for their money back?", criteria: { true: "A refund or chargeback", false: "Anything else" } },
  team: { type: "choice", instructions: "Which team?", criteria: { shipping: "Late or lost deliveries", billing: "Charges & invoices", product: null } },
  mood: { type: "score", instructions: "How upset?", criteria: ["calm", "annoyed", "furious"] },
};
/** Two jobs, neither keeping its state field (as the bundled job does not): one with an id field, one keyed by line numbers. */
const withIds: Job = { model: "default", state: "ticket", id: "ticket_id", keep: ["customer.tier", "created_at"], questions };
const byLine: Job = { model: "default", state: "ticket", keep: ["customer.tier"], questions };
const N = 40;

const cli = (args: string[]) => runInProcess(args, {}, { cwd: dir });

/** What a person chose for task i (index into each question's labels): the model's top answer on most tasks, another on every fifth. */
const person = (i: number, k: number, top: number) => (i % 5 === 0 ? (top + 1) % k : top);

let config: string;
function choicesOf(name: string): string[] {
  const block = new RegExp(`<Choices name="${name}"[^>]*>([\\s\\S]*?)</Choices>`).exec(config)?.[1] ?? "";
  return [...block.matchAll(/<Choice value="([^"]*)"/g)].map((m) => (m[1] as string).replaceAll("&amp;", "&"));
}

/** The person's choices for a task: the model's pre-annotation, changed on every fifth task. */
const chooser: Choose = (t, i) =>
  new Map(
    t.predictions[0]!.result.map((r) => {
      const values = choicesOf(r.from_name);
      return [r.from_name, values[person(i, values.length, values.indexOf(r.value.choices[0] as string))] as string];
    }),
  );

interface Fixture {
  job: string;
  input: string;
  review: { jsonl: string; csv: string; parquet: string };
  /** Review rows: the input lines routed to review (every third line is left out, so ids are not 1..n). */
  lines: number[];
}
const fixtures: Record<"ids" | "lines", Fixture> = {} as Record<"ids" | "lines", Fixture>;

/** The ticket text of input line `line`. */
const ticketText = (line: number) => `Ticket ${line}: "where is my parcel", says the customer, twice`;

function writeFixture(name: "ids" | "lines", job: Job): void {
  const jobPath = join(dir, `${name}.job.json`);
  writeFileSync(jobPath, JSON.stringify(job));
  const input = join(dir, `${name}.tickets.jsonl`);
  const records = Array.from({ length: N + N / 2 }, (_, i) => ({
    ticket_id: `T${i + 1}`,
    ticket: ticketText(i + 1),
    customer: { tier: i % 2 ? "free" : "gold" },
    created_at: `2026-11-2${i % 3}`,
  }));
  writeFileSync(input, `${records.map((r) => JSON.stringify(r)).join("\n")}\n`);
  const random = seededRandom(name === "ids" ? 4 : 5);
  const entries: AnswerEntry[] = [];
  const lines: number[] = [];
  for (let line = 1; lines.length < N; line++) {
    if (line % 3 === 0) continue;
    lines.push(line);
    const answers: AnswerEntry["answers"] = {};
    for (const [qname, q] of Object.entries(questions)) {
      const k = q.type === "noul" ? 2 : 3;
      const w = Array.from({ length: k }, () => random() ** 2);
      const s = w.reduce((a, b) => a + b, 0);
      answers[qname] = answerFrom(
        q,
        w.map((x) => x / s),
      );
    }
    const record = records[line - 1]!;
    entries.push({
      k: "answer",
      seq: line - 1,
      line,
      source: input,
      id: job.id === undefined ? String(line) : record.ticket_id,
      h: "0",
      model: "qwen-test-1",
      answers,
      usage: { input_tokens: 10, output_tokens: 3 },
      keep: Object.fromEntries((job.keep ?? []).map((f) => [f, f === "customer.tier" ? record.customer.tier : record.created_at])),
    } as AnswerEntry);
  }
  const policy = { thresholds: { team: 0.99 }, auditRate: 0, seed: 1 };
  const review = { jsonl: join(dir, `${name}.review.jsonl`), csv: join(dir, `${name}.review.csv`), parquet: join(dir, `${name}.review.parquet`) };
  for (const format of ["jsonl", "csv", "parquet"] as const) {
    const encoder = encoderFor(outputFormat(review[format]), { job, shape: { calibrated: new Set(), review: true } });
    const parts = entries.map((entry) => encoder.row({ entry, answers: entry.answers, review: reviewVerdict(policy, questions, entry.answers, entry.id) }));
    parts.push(encoder.end());
    writeFileSync(review[format], Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p) : p))));
  }
  fixtures[name] = { job: jobPath, input, review, lines };
}

beforeAll(async () => {
  writeFixture("ids", withIds);
  writeFixture("lines", byLine);
  for (const name of ["ids", "lines"] as const) {
    const r = await cli([
      "labelstudio",
      "export",
      fixtures[name].review.jsonl,
      "--job",
      fixtures[name].job,
      "-o",
      `${name}.tasks.json`,
      "--config",
      `${name}.config.xml`,
    ]);
    expect(r.code, r.stderr).toBe(0);
  }
  config = readFileSync(join(dir, "ids.config.xml"), "utf8");
}, 60_000);

const tasksOf = (path: string) => JSON.parse(readFileSync(join(dir, path), "utf8")) as LabelStudioTask[];

describe("labelstudio export", () => {
  it("puts the state the model read in every task, though the job does not keep it, under names Label Studio never uses", () => {
    const tasks = tasksOf("ids.tasks.json");
    expect(tasks).toHaveLength(N);
    const line = fixtures.ids.lines[3]!;
    expect(tasks[3]!.data).toEqual({
      te_id: `T${line}`,
      te_state: ticketText(line),
      te_reason: expect.stringMatching(/^team 0\.\d{3} < 0\.99$/),
      te_keep_customer_tier: line % 2 === 0 ? "free" : "gold",
      te_keep_created_at: `2026-11-2${(line - 1) % 3}`,
    });
    // No key of ours is one Label Studio adds to a task or an export.
    for (const key of Object.keys(tasks[3]!.data)) expect(key).toMatch(/^te_/);
    const p = tasks[3]!.predictions[0]!;
    expect(p.model_version).toBe("qwen-test-1");
    expect(p.result.map((r) => [r.from_name, r.to_name, r.type])).toEqual([
      ["te_q_refund", "te_text_state", "choices"],
      ["te_q_team", "te_text_state", "choices"],
      ["te_q_mood", "te_text_state", "choices"],
    ]);
    expect(p.score).toBe(Math.min(...p.result.map((r) => r.score)));
    expect(choicesOf("te_q_refund")).toEqual(["no", "yes"]);
    expect(choicesOf("te_q_team")).toEqual(["shipping", "billing", "product"]);
    expect(choicesOf("te_q_mood")).toEqual(["0: calm", "1: annoyed", "2: furious"]);
    // The choices point at the state, and the state is shown.
    expect(config).toContain('<Text name="te_text_state" value="$te_state"/>');
    expect(config).toContain('<Choices name="te_q_team" toName="te_text_state" choice="single-radio"');
    expect(config).toContain('<Choice value="billing" hint="Charges &amp; invoices"/>');
    // Keyed by line numbers: the id is the input line, and the state is that line's.
    const byLines = tasksOf("lines.tasks.json");
    expect(byLines.map((t) => t.data["te_id"])).toEqual(fixtures.lines.lines.map(String));
    expect(byLines.map((t) => t.data["te_state"])).toEqual(fixtures.lines.lines.map(ticketText));
  });

  it("gives the same tasks from a CSV or Parquet review file", async () => {
    const a = tasksOf("ids.tasks.json");
    for (const path of [fixtures.ids.review.csv, fixtures.ids.review.parquet]) {
      const b = await reviewTasks(path, withIds);
      expect(b).toEqual(a);
    }
  });

  it("refuses tasks that would give annotators nothing to read, and writes nothing; --input names where the run read", async () => {
    const moved = join(dir, "moved.tickets.jsonl");
    const review = join(dir, "moved.review.jsonl");
    writeFileSync(moved, readFileSync(fixtures.ids.input));
    writeFileSync(
      review,
      readFileSync(fixtures.ids.review.jsonl, "utf8").replaceAll(JSON.stringify(fixtures.ids.input), JSON.stringify(join(dir, "gone.jsonl"))),
    );
    const r = await cli(["labelstudio", "export", review, "--job", fixtures.ids.job, "-o", "moved.tasks.json", "--config", "moved.config.xml"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /^typed-eval: the tasks would give annotators nothing to read: the state ticket is not kept in .*; pass --input <the file the run read>/,
    );
    expect(existsSync(join(dir, "moved.tasks.json"))).toBe(false);
    expect(existsSync(join(dir, "moved.config.xml"))).toBe(false);
    const ok = await cli(["labelstudio", "export", review, "--job", fixtures.ids.job, "-o", "moved.tasks.json", "--input", moved]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(tasksOf("moved.tasks.json")).toEqual(tasksOf("ids.tasks.json"));
    // An input that changed since the run (another record on a review row's line) is refused, not shown.
    const changed = join(dir, "changed.tickets.jsonl");
    writeFileSync(changed, readFileSync(fixtures.ids.input, "utf8").replace('"ticket_id":"T1"', '"ticket_id":"T99"'));
    const bad = await cli(["labelstudio", "export", review, "--job", fixtures.ids.job, "-o", "changed.tasks.json", "--input", changed]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/line 1 holds id T99, but the review row of that line is T1: the input changed since the run/);
    rmSync(join(dir, "moved.tasks.json"));
  });

  it("a review row without an id is exit 2 naming its line, and no tasks file", async () => {
    const bad = join(dir, "bad.review.jsonl");
    const lines = readFileSync(fixtures.ids.review.jsonl, "utf8").trim().split("\n");
    lines[2] = lines[2]!.replace(/"id":"T\d+",/, "");
    writeFileSync(bad, `${lines.join("\n")}\n`);
    const r = await cli(["labelstudio", "export", bad, "--job", fixtures.ids.job, "-o", "bad-tasks.json", "--config", "bad-config.xml"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("line 3: no id");
    expect(existsSync(join(dir, "bad-tasks.json"))).toBe(false);
    expect(existsSync(join(dir, "bad-config.xml"))).toBe(false);
  });
});

const FORMATS = { json: [jsonExport, "json"], "json-min": [jsonMinExport, "json"], csv: [csvExport, "csv"] } as const;

describe("Label Studio's exports as gold, joined by our record id", () => {
  for (const name of ["ids", "lines"] as const) {
    for (const [format, [write, ext]] of Object.entries(FORMATS)) {
      it(`${format}, ${name === "ids" ? "a job with an id field" : "a job keyed by line numbers"}: assess reads it as --gold, labelstudio import writes the same gold`, async () => {
        const f = fixtures[name];
        const tasks = tasksOf(`${name}.tasks.json`);
        const path = join(dir, `${name}.export.${format}.${ext}`);
        writeFileSync(path, write(tasks, chooser));
        expect(isLabelStudioExport(path)).toBe(true);
        // Label Studio's task ids (1, 2, 3...) are never the records' ids: joined by them, the labels would land on other rows.
        expect(tasks.map((t) => t.data["te_id"])).not.toEqual(tasks.map((_, i) => String(FIRST_TASK_ID + i)));
        const a = await cli(["assess", f.review.jsonl, "--gold", path, "--job", f.job, "--json", "--bootstrap", "0"]);
        expect(a.code, a.stderr).toBe(0);
        const assessment = JSON.parse(a.stdout);
        expect(assessment.rows.matched).toBe(N);
        // The person differs from the model on every fifth task, exactly: any wrong join shows.
        for (const q of assessment.questions) expect(q.metrics.accuracy).toBeCloseTo(1 - 8 / N, 12);
        const i = await cli(["labelstudio", "import", path, "--job", f.job, "-o", `${name}.${format}.gold.csv`]);
        expect(i.code, i.stderr).toBe(0);
        const csv = readFileSync(join(dir, `${name}.${format}.gold.csv`), "utf8")
          .trim()
          .split("\n");
        expect(csv[0]).toBe("id,refund,team,mood");
        expect(csv).toHaveLength(N + 1);
        const b = await cli(["assess", f.review.jsonl, "--gold", `${name}.${format}.gold.csv`, "--job", f.job, "--json", "--bootstrap", "0"]);
        expect(JSON.parse(b.stdout).questions).toEqual(assessment.questions);
      });
    }
  }

  it("a CSV export with only Label Studio's id (tasks without te_id) is refused, never joined by that id", async () => {
    const f = fixtures.lines;
    const tasks = tasksOf("lines.tasks.json").map((t) => {
      const { te_id: _, ...data } = t.data;
      return { ...t, data: { ...data, id: t.data["te_id"] as string } };
    });
    const path = join(dir, "no-te-id.csv");
    writeFileSync(path, csvExport(tasks, chooser));
    const r = await cli(["assess", f.review.jsonl, "--gold", path, "--job", f.job, "--json"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/line 2 \(task 1\): no te_id column, only Label Studio's own id \(its task id, not the record's\)/);
  });

  it("JSON-MIN and CSV rows of several annotators: agreeing ones count once; disagreeing ones are a problem", async () => {
    const f = fixtures.ids;
    const tasks = tasksOf("ids.tasks.json");
    const agree = join(dir, "two-annotators.csv");
    writeFileSync(agree, csvExport(tasks, chooser, 2));
    const a = await cli(["assess", f.review.jsonl, "--gold", agree, "--job", f.job, "--json", "--bootstrap", "0"]);
    expect(a.code, a.stderr).toBe(0);
    for (const q of JSON.parse(a.stdout).questions) expect(q.metrics.accuracy).toBeCloseTo(1 - 8 / N, 12);
    const records = JSON.parse(jsonMinExport(tasks, chooser, 2)) as Record<string, unknown>[];
    records[1]!["te_q_team"] = records[1]!["te_q_team"] === "billing" ? "product" : "billing";
    const disagree = join(dir, "disagree.json");
    writeFileSync(disagree, JSON.stringify(records));
    await expect(readLabelStudioGold(disagree, info)).rejects.toThrow(/item 1 \(task 1\), id "T1", team: annotations disagree/);
  });

  it("takes the ground-truth annotation when annotators disagree, and skips cancelled ones beside a real one (JSON)", async () => {
    const f = fixtures.ids;
    const path = join(dir, "export-multi.json");
    writeFileSync(
      path,
      jsonExport(tasksOf("ids.tasks.json"), chooser, (task, i) => {
        const [first] = task["annotations"] as Record<string, unknown>[];
        if (i === 0) {
          const other = structuredClone(first!);
          for (const r of other["result"] as { value: { choices: string[] } }[]) r.value.choices = r.value.choices[0] === "no" ? ["yes"] : r.value.choices;
          first!["ground_truth"] = true;
          task["annotations"] = [first, other];
        }
        if (i === 1) task["annotations"] = [{ ...first, id: 1, result: [], was_cancelled: true }, first];
      }),
    );
    const a = await cli(["assess", f.review.jsonl, "--gold", path, "--job", f.job, "--json", "--bootstrap", "0"]);
    expect(a.code, a.stderr).toBe(0);
    for (const q of JSON.parse(a.stdout).questions) expect(q.metrics.accuracy).toBeCloseTo(1 - 8 / N, 12);
  });

  const info = Object.entries(questions).map(([name, q]) => infoOf(name, q));
  const cases: [string, (task: Record<string, unknown>, i: number) => void, RegExp][] = [
    [
      "an unknown option",
      (task, i) => {
        if (i === 2) (task["annotations"] as { result: { value: { choices: string[] } }[] }[])[0]!.result[1]!.value.choices = ["refunds"];
      },
      /task 3 \(item 3\), id "T4", team: "refunds" is not an option of team; options: shipping, billing, product/,
    ],
    [
      "a missing id",
      (task, i) => {
        if (i === 4) delete (task["data"] as Record<string, unknown>)["te_id"];
      },
      /task 5 \(item 5\): no data\.te_id/,
    ],
    [
      "a task with no annotation",
      (task, i) => {
        if (i === 6) task["annotations"] = [];
      },
      /task 7 \(item 7\), id "T10": not labelled \(no annotation\)/,
    ],
    [
      "annotators who disagree",
      (task, i) => {
        if (i === 8) {
          const [a] = task["annotations"] as Record<string, unknown>[];
          const b = structuredClone(a!);
          (b["result"] as { value: { choices: string[] } }[])[2]!.value.choices = ["2: furious"];
          (a!["result"] as { value: { choices: string[] } }[])[2]!.value.choices = ["0: calm"];
          task["annotations"] = [a, b];
        }
      },
      /task 9 \(item 9\), id "T13", mood: annotations disagree \(0: calm, 2: furious\); settle it or mark one ground truth/,
    ],
  ];
  for (const [what, edit, message] of cases) {
    it(`${what} is a problem naming the task`, async () => {
      const path = join(dir, `${what.replaceAll(" ", "-")}.json`);
      writeFileSync(path, jsonExport(tasksOf("ids.tasks.json"), chooser, edit));
      await expect(readLabelStudioGold(path, info)).rejects.toThrow(message);
    });
  }

  it("an unlabelled task in a JSON-MIN or CSV export is a problem naming it", async () => {
    const tasks = tasksOf("ids.tasks.json");
    const skipThird: Choose = (t, i) => (i === 2 ? new Map() : chooser(t, i));
    const min = join(dir, "unlabelled.json");
    writeFileSync(min, jsonMinExport(tasks, skipThird));
    await expect(readLabelStudioGold(min, info)).rejects.toThrow(/item 3 \(task 3\), id "T4": not labelled/);
    const csv = join(dir, "unlabelled.csv");
    writeFileSync(csv, csvExport(tasks, skipThird));
    await expect(readLabelStudioGold(csv, info)).rejects.toThrow(/line 4 \(task 3\), id "T4": not labelled/);
  });

  it("a session with skipped tasks reads alike from JSON, JSON-MIN and CSV: the skipped tasks are left out, and import says how many", async () => {
    const f = fixtures.ids;
    const tasks = tasksOf("ids.tasks.json");
    // The person pressed Skip on two tasks: JSON keeps them with a cancelled annotation, the converter leaves them out of JSON-MIN and CSV.
    const skipTwo: Choose = (t, i) => (i === 2 || i === 7 ? "skip" : chooser(t, i));
    const golds = [];
    for (const [format, [write, ext]] of Object.entries(FORMATS)) {
      const path = join(dir, `skipped.${format}.${ext}`);
      writeFileSync(path, write(tasks, skipTwo));
      const gold = await readLabelStudioGold(path, info);
      expect([...gold.rows.keys()], format).toEqual(tasks.filter((_, i) => i !== 2 && i !== 7).map((t) => t.data["te_id"]));
      golds.push({ format, labels: [...gold.labels], skipped: gold.skipped ?? 0 });
      const a = await cli(["assess", f.review.jsonl, "--gold", path, "--job", f.job, "--json", "--bootstrap", "0"]);
      expect(a.code, a.stderr).toBe(0);
      expect(JSON.parse(a.stdout).rows.matched).toBe(N - 2);
    }
    expect(golds.map((g) => g.labels)).toEqual([golds[0]!.labels, golds[0]!.labels, golds[0]!.labels]);
    // Only the JSON export still holds the skipped tasks, so only it can count them.
    expect(golds.map((g) => g.skipped)).toEqual([2, 0, 0]);
    const i = await cli(["labelstudio", "import", "skipped.json.json", "--job", f.job, "-o", "skipped.gold.csv"]);
    expect(i.code, i.stderr).toBe(0);
    expect(i.stderr).toBe("38 gold rows (2 tasks skipped in Label Studio, left out): skipped.gold.csv\n");
  });

  it("a CSV export's problems name the file's own line, after cells holding line breaks", async () => {
    // Every ticket's text runs over two lines, so each task takes two lines of the file: task 3 starts on line 6.
    const tasks = tasksOf("ids.tasks.json").map((t) => ({
      ...t,
      data: Object.fromEntries(Object.entries(t.data).map(([k, v]) => [k, typeof v === "string" && v.startsWith("Ticket") ? `${v}\nsecond line` : v])),
    }));
    expect(tasks.every((t) => Object.values(t.data).some((v) => typeof v === "string" && v.includes("\n")))).toBe(true);
    const skipThird: Choose = (t, i) => (i === 2 ? new Map() : chooser(t, i));
    const csv = join(dir, "multi-line.csv");
    writeFileSync(csv, csvExport(tasks, skipThird));
    expect(
      readFileSync(csv, "utf8")
        .split("\n")
        .findIndex((line) => line.includes('"T4"')) + 1,
    ).toBe(6);
    await expect(readLabelStudioGold(csv, info)).rejects.toThrow(/multi-line\.csv line 6 \(task 3\), id "T4": not labelled/);
  });

  it("a bad export is exit 2 with one message for all its problems, and nothing written", async () => {
    const f = fixtures.ids;
    const path = join(dir, "bad-export.json");
    writeFileSync(
      path,
      jsonExport(tasksOf("ids.tasks.json"), chooser, (task, i) => {
        for (const [, edit] of cases) edit(task, i);
      }),
    );
    const a = await cli(["assess", f.review.jsonl, "--gold", path, "--job", f.job, "--html", "bad.html", "--suspects", "bad-suspects.csv"]);
    expect(a.code).toBe(2);
    expect(a.stderr).toContain(`${path}: 4 problems:`);
    for (const [, , message] of cases) expect(a.stderr).toMatch(message);
    expect(a.stderr).not.toMatch(/\n\s+at /);
    expect(existsSync(join(dir, "bad.html"))).toBe(false);
    expect(existsSync(join(dir, "bad-suspects.csv"))).toBe(false);
    const i = await cli(["labelstudio", "import", path, "--job", f.job, "-o", "bad-gold.csv"]);
    expect(i.code).toBe(2);
    expect(i.stderr).toContain("4 problems");
    expect(existsSync(join(dir, "bad-gold.csv"))).toBe(false);
  });

  it("a JSON file that is not an export says so; an ordinary gold CSV is not taken for one", async () => {
    const path = join(dir, "not-an-export.json");
    writeFileSync(path, JSON.stringify([{ id: "T1", team: "billing" }]));
    expect(isLabelStudioExport(path)).toBe(true);
    await expect(readLabelStudioGold(path, info)).rejects.toThrow(/item 1 \(task T1\): no te_id column, only Label Studio's own id/);
    const gold = join(dir, "plain-gold.csv");
    writeFileSync(gold, "id,team\nT1,billing\n");
    expect(isLabelStudioExport(gold)).toBe(false);
    expect(controlName("a.b c")).toBe("te_q_a_b_c");
  });
});
