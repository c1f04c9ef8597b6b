/**
 * A review round trip through Label Studio. The review queue (and audit
 * sample) a run wrote become Label Studio tasks: the record id and kept
 * fields as `data`, the model's answers as pre-annotations (`predictions`,
 * one `choices` result per question, scored by the answer's probability),
 * with a labeling config whose control names are the question names. A
 * Label Studio JSON export of those tasks, once people have labelled them,
 * reads back as gold for assess, calibrate and thresholds.
 *
 * Formats as Label Studio documents them: tasks and predictions
 * (labelstud.io/guide/predictions, /guide/task_format), the Choices and
 * Choice tags (labelstud.io/tags/choices, /tags/choice).
 */
import { closeSync, openSync, readFileSync, readSync } from "node:fs";
import type { Question } from "../api/schema.js";
import { kindOf } from "../questions/index.js";
import type { Job } from "../records/job.js";
import { displayLabels, goldClass, infoOf, QualityInputError, readAnswers, type Gold, type QuestionInfo } from "./answers.js";
import { csvLine } from "./csv-line.js";
import { reviewReason } from "../records/review.js";

type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** The Choice values a question offers, in label order: no/yes, option names, "2: angry" (the report's labels). */
export function choiceValues(info: QuestionInfo): string[] {
  return displayLabels(info);
}

/** A task data key for a kept field: Label Studio reads `$name` in a config, so only letters, digits and `_`. */
export function dataKey(field: string): string {
  return field.replace(/[^A-Za-z0-9_]/g, "_");
}

const xml = (s: string) => s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" })[c] as string);
const text = (v: unknown) => (typeof v === "string" ? v : v === undefined || v === null ? "" : JSON.stringify(v));

/** The kept fields as task data: key per field, checked for clashes. */
function keptKeys(job: Job): { field: string; key: string }[] {
  const out = (job.keep ?? []).map((field) => ({ field, key: dataKey(field) }));
  const taken = new Map<string, string>([
    ["id", "id"],
    ["review_reason", "review_reason"],
  ]);
  for (const { field, key } of out) {
    const other = taken.get(key);
    if (other !== undefined)
      throw new QualityInputError(`kept field "${field}" and "${other}" both become task data "${key}" in Label Studio; rename one of them in the job's keep`);
    taken.set(key, field);
  }
  return out;
}

/** The Text tag the choices point at: the state when it is kept, else the first kept field, else the id. */
function shownKey(job: Job, kept: { field: string; key: string }[]): string {
  const state = kept.find((k) => k.field === job.state);
  return `text_${(state ?? kept[0])?.key ?? "id"}`;
}

function hint(question: Question, label: string): string | undefined {
  const c = kindOf(question).hint(question, label);
  return c === undefined || c === null ? undefined : text(c);
}

/** A Label Studio labeling config for a job's review tasks: the record, why it is in review, one single-choice control per question. */
export function labelingConfig(job: Job): string {
  const kept = keptKeys(job);
  const lines = ["<View>", `  <Header value="Record"/>`, `  <Text name="text_id" value="$id"/>`, `  <Text name="text_review_reason" value="$review_reason"/>`];
  for (const { field, key } of kept) lines.push(`  <Header value="${xml(field)}"/>`, `  <Text name="text_${key}" value="$${key}"/>`);
  const to = shownKey(job, kept);
  for (const [name, question] of Object.entries(job.questions)) {
    const info = infoOf(name, question);
    lines.push(`  <Header value="${xml(question.instructions ? `${name}: ${question.instructions}` : name)}"/>`);
    lines.push(`  <Choices name="${xml(name)}" toName="${xml(to)}" choice="single-radio" showInline="true">`);
    choiceValues(info).forEach((value, at) => {
      const h = hint(question, info.labels[at] as string);
      lines.push(`    <Choice value="${xml(value)}"${h ? ` hint="${xml(h)}"` : ""}/>`);
    });
    lines.push("  </Choices>");
  }
  lines.push("</View>", "");
  return lines.join("\n");
}

/** One Label Studio task. */
export interface LabelStudioTask {
  data: Record<string, string>;
  predictions: {
    model_version: string;
    score: number;
    result: { id: string; from_name: string; to_name: string; type: "choices"; value: { choices: string[] }; score: number }[];
  }[];
}

/** The review reason of a review row, JSONL (`review_reasons`, `audit`) or flat (`review_reason`). */
function reasonOf(record: Obj): string {
  if (typeof record["review_reason"] === "string") return record["review_reason"];
  const reasons = Array.isArray(record["review_reasons"]) ? (record["review_reasons"] as { question: string; confidence: number; threshold: number }[]) : [];
  return reviewReason({ reasons, audit: record["audit"] === true || record["audit"] === "true" });
}

/** A review file (or any answers file of the job) as Label Studio tasks with the model's answers as pre-annotations. */
export async function reviewTasks(reviewPath: string, job: Job): Promise<LabelStudioTask[]> {
  const kept = keptKeys(job);
  const to = shownKey(job, kept);
  const questions = Object.entries(job.questions).map(([name, q]) => infoOf(name, q));
  const tasks: LabelStudioTask[] = [];
  for await (const row of await readAnswers(reviewPath, { questions })) {
    const record = row.record ?? {};
    const fields = isObject(record["fields"]) ? record["fields"] : record;
    const data: Record<string, string> = { id: row.id, review_reason: reasonOf(record) };
    for (const { field, key } of kept) data[key] = text(fields[field]);
    const result: LabelStudioTask["predictions"][number]["result"] = [];
    for (const q of questions) {
      const dist = row.dist.get(q.name) as number[];
      let best = 0;
      for (let j = 1; j < dist.length; j++) if ((dist[j] as number) > (dist[best] as number)) best = j;
      result.push({
        id: `${q.name}`,
        from_name: q.name,
        to_name: to,
        type: "choices",
        value: { choices: [choiceValues(q)[best] as string] },
        score: dist[best] as number,
      });
    }
    const model = typeof record["model"] === "string" && record["model"] !== "" ? record["model"] : "typed-eval";
    // The task's score is its least confident answer: Label Studio sorts by it, so the rows most in doubt come first.
    tasks.push({ data, predictions: [{ model_version: model, score: Math.min(...result.map((r) => r.score)), result }] });
  }
  if (tasks.length === 0) throw new QualityInputError(`${reviewPath} holds no rows: nothing to review`);
  return tasks;
}

/** A `.json` file whose first character is `[`: a Label Studio JSON export (gold files are JSONL, CSV or Parquet). */
export function isLabelStudioExport(path: string): boolean {
  if (!/\.json$/i.test(path)) return false;
  let fd: number | undefined;
  try {
    fd = openSync(path, "r");
    const head = Buffer.alloc(256);
    const n = readSync(fd, head, 0, head.length, 0);
    return /^\uFEFF?\s*\[/.test(head.subarray(0, n).toString("utf8"));
  } catch {
    // Unreadable: the ordinary gold reader says why.
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * Reads a Label Studio JSON export as gold. The record id is each task's
 * `data.id`; per question, the `choices` result whose `from_name` is the
 * question. A task with no annotation, only cancelled (skipped) ones, or
 * annotations that disagree (and none marked ground truth), an unknown
 * option, or a missing id is a problem naming the task; every problem (up
 * to 20) is thrown at once.
 */
export async function readLabelStudioGold(path: string, questions: QuestionInfo[]): Promise<Gold> {
  let tasks: unknown;
  try {
    tasks = JSON.parse(readFileSync(path, "utf8").replace(/^\uFEFF/, ""));
  } catch (error) {
    throw new QualityInputError(`cannot read Label Studio export ${path}: ${(error as Error).message}`);
  }
  if (!Array.isArray(tasks)) throw new QualityInputError(`${path} is not a Label Studio JSON export (a list of tasks)`);
  const nq = questions.length;
  const byName = new Map(questions.map((q, j) => [q.name, j]));
  const gold: Gold = { rows: new Map(), lines: [], labels: new Int32Array(Math.max(tasks.length, 1) * nq).fill(-1), questions, ignored: [] };
  const ignored = new Set<string>();
  const problems: string[] = [];
  const problem = (message: string) => {
    if (problems.length < 20) problems.push(message);
    else if (problems.length === 20) problems.push("... and more");
  };
  tasks.forEach((task: unknown, t) => {
    const where = `${path} task ${isObject(task) && task["id"] !== undefined ? `${String(task["id"])} (item ${t + 1})` : `item ${t + 1}`}`;
    if (!isObject(task) || !isObject(task["data"])) {
      problem(`${where}: no data object; is this a Label Studio JSON export (not JSON-MIN or CSV)?`);
      return;
    }
    const rawId = task["data"]["id"];
    if (rawId === undefined || rawId === null || rawId === "") {
      problem(`${where}: no data.id, the record id typed-eval labelstudio export puts in each task`);
      return;
    }
    const id = String(rawId);
    const named = `${where}, id ${JSON.stringify(id)}`;
    const annotations = Array.isArray(task["annotations"]) ? task["annotations"].filter(isObject) : [];
    if (annotations.length === 0) {
      problem(`${named}: not labelled (no annotation); label it or leave it out of the export`);
      return;
    }
    let kept = annotations.filter((a) => a["was_cancelled"] !== true);
    if (kept.length === 0) {
      problem(`${named}: its annotation was cancelled (skipped); label it or leave it out of the export`);
      return;
    }
    const truth = kept.filter((a) => a["ground_truth"] === true);
    if (truth.length > 0) kept = truth;
    if (gold.rows.has(id)) {
      problem(`${named}: id labelled twice (first in item ${gold.lines[gold.rows.get(id) as number]})`);
      return;
    }
    const row = gold.lines.length;
    const seen = new Map<number, Set<number>>();
    for (const a of kept) {
      const result = Array.isArray(a["result"]) ? a["result"].filter(isObject) : [];
      for (const item of result) {
        if (item["type"] !== "choices" || typeof item["from_name"] !== "string") continue;
        const j = byName.get(item["from_name"]);
        if (j === undefined) {
          ignored.add(item["from_name"]);
          continue;
        }
        const q = questions[j] as QuestionInfo;
        const choices = isObject(item["value"]) && Array.isArray(item["value"]["choices"]) ? item["value"]["choices"] : [];
        if (choices.length !== 1) {
          problem(`${named}, ${q.name}: ${choices.length} choices; choose exactly one`);
          continue;
        }
        const value = choices[0];
        const exact = typeof value === "string" ? choiceValues(q).indexOf(value) : -1;
        try {
          const y = exact >= 0 ? exact : goldClass(q, value, `${named}, ${q.name}`);
          if (y === undefined) continue;
          const set = seen.get(j) ?? new Set<number>();
          set.add(y);
          seen.set(j, set);
        } catch (error) {
          problem(`${(error as Error).message} (the config's choices: ${choiceValues(q).join(", ")})`);
        }
      }
    }
    for (const [j, ys] of seen) {
      const q = questions[j] as QuestionInfo;
      if (ys.size > 1) {
        problem(`${named}, ${q.name}: annotations disagree (${[...ys].map((y) => choiceValues(q)[y]).join(", ")}); settle it or mark one ground truth`);
        continue;
      }
      gold.labels[row * nq + j] = [...ys][0] as number;
    }
    gold.rows.set(id, row);
    gold.lines.push(t + 1);
  });
  if (problems.length > 0)
    throw new QualityInputError(
      `${path}: ${problems.length > 20 ? "20+" : problems.length} problem${problems.length > 1 ? "s" : ""}:\n  ${problems.join("\n  ")}`,
    );
  if (gold.lines.length === 0) throw new QualityInputError(`${path} holds no tasks`);
  gold.labels = gold.labels.subarray(0, gold.lines.length * nq);
  gold.ignored = [...ignored];
  if (!questions.some((_, j) => gold.lines.some((__, r) => (gold.labels[r * nq + j] as number) >= 0)))
    throw new QualityInputError(
      `${path} labels none of the questions ${questions.map((q) => q.name).join(", ")}${ignored.size ? `; its choices are named ${[...ignored].join(", ")}` : ""}`,
    );
  return gold;
}

/** Gold as CSV (id, then one column per question: the option name, yes/no, or the level index), for `labelstudio import`. */
export function goldCsv(gold: Gold): string {
  const { questions } = gold;
  const nq = questions.length;
  const label = (q: QuestionInfo, y: number) => (y < 0 ? "" : kindOf(q).goldText(q, y));
  const lines = [csvLine(["id", ...questions.map((q) => q.name)])];
  for (const [id, r] of gold.rows) lines.push(csvLine([id, ...questions.map((q, j) => label(q, gold.labels[r * nq + j] as number))]));
  return lines.join("");
}
