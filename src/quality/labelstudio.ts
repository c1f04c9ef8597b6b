/**
 * A review round trip through Label Studio. The review queue (and audit
 * sample) a run wrote become Label Studio tasks: the state the model read,
 * the record id, why the row is in review and the kept fields as `data`,
 * the model's answers as pre-annotations (`predictions`, one `choices`
 * result per unit: a question, or each part of a question with parts,
 * scored by the answer's probability), with a labeling
 * config to match. Label Studio's JSON, JSON-MIN and CSV exports of those
 * tasks, once people have labelled them, read back as gold for assess,
 * calibrate and thresholds.
 *
 * Every name we put in a task starts with `te_` (data `te_id`, `te_state`,
 * `te_reason`, `te_keep_<field>`; controls `te_q_<question>`), so none can
 * collide with a field Label Studio adds (`id`, `annotations`,
 * `predictions`, `annotator`, `created_at`, ...). That matters: its JSON-MIN
 * export writes its own task id over a `data.id`, its CSV export writes
 * task and data fields into the same columns, and a round trip joined by
 * Label Studio's id labels the wrong records. The import joins by `te_id`,
 * our record id, only.
 *
 * Formats as Label Studio documents them: tasks and predictions
 * (labelstud.io/guide/predictions, /guide/task_format), the Choices and
 * Choice tags (labelstud.io/tags/choices, /tags/choice), the exports
 * (labelstud.io/guide/export: JSON, JSON_MIN, CSV, as its converter writes
 * them: label_studio_converter/converter.py convert_to_json_min and
 * exports/csv2.py).
 */
import { closeSync, openSync, readFileSync, readSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import type { Question } from "../api/schema.js";
import { kindOf, unitsOf } from "../questions/index.js";
import type { Job } from "../records/job.js";
import { reviewReason } from "../records/review.js";
import { valueAt } from "../records/source.js";
import type { Column } from "../records/format.js";
import { encodeAll, type FileFormat, inputFormat } from "../records/formats.js";
import { plural } from "./numbers.js";
import { displayLabels, type Gold, goldClass, infoOf, openFile, QualityInputError, type QuestionInfo, readAnswers, unitInfos } from "./answers.js";

type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** Our prefix: no field Label Studio adds to a task or an export starts with it. */
const PREFIX = "te_";
/** Task data keys of our own. */
export const ID_KEY = `${PREFIX}id`;
export const STATE_KEY = `${PREFIX}state`;
export const REASON_KEY = `${PREFIX}reason`;

/** The Choice values a question offers, in label order: no/yes, option names, "2: angry" (the report's labels). */
export function choiceValues(info: QuestionInfo): string[] {
  return displayLabels(info);
}

/** A name Label Studio reads in a config (`$name`): letters, digits and `_` only. */
function safe(name: string): string {
  return name.replace(/[^A-Za-z0-9_]/g, "_");
}

/** The task data key of a kept field. */
export const keptKey = (field: string) => `${PREFIX}keep_${safe(field)}`;
/** The control (Choices) name of a question: the `from_name` of its results, and its column in JSON-MIN and CSV exports. */
export const controlName = (question: string) => `${PREFIX}q_${safe(question)}`;

const xml = (s: string) => s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" })[c] as string);
const text = (v: unknown) => (typeof v === "string" ? v : v === undefined || v === null ? "" : JSON.stringify(v, null, 1));

/** Two names that become one key: the export is refused, naming both. */
function unique(pairs: { name: string; key: string }[], what: string): void {
  const taken = new Map<string, string>();
  for (const { name, key } of pairs) {
    const other = taken.get(key);
    if (other !== undefined) throw new QualityInputError(`${what} "${name}" and "${other}" both become "${key}" in Label Studio; rename one of them`);
    taken.set(key, name);
  }
}

/** The kept fields as task data (the state among them or not: it has its own key). */
function keptFields(job: Job): { field: string; key: string }[] {
  const out = (job.keep ?? []).map((field) => ({ field, key: keptKey(field) }));
  unique(
    out.map((k) => ({ name: k.field, key: k.key })),
    "kept field",
  );
  unique(
    [...unitsOf(job.questions).keys()].map((q) => ({ name: q, key: controlName(q) })),
    "question",
  );
  return out;
}

function hint(question: Question, label: string): string | undefined {
  const c = kindOf(question).hint(question, label);
  return c === undefined || c === null ? undefined : text(c);
}

/** The Text tag the choices point at: the state the model read. */
const STATE_TAG = `${PREFIX}text_state`;

/** A Label Studio labeling config for a job's review tasks: the state the model read, the record, why it is in review, one single-choice control per unit. */
export function labelingConfig(job: Job): string {
  const kept = keptFields(job);
  const lines = [
    "<View>",
    `  <Header value="${xml(job.state ? `What the model read (${job.state})` : "What the model read")}"/>`,
    `  <Text name="${STATE_TAG}" value="$${STATE_KEY}"/>`,
    `  <Header value="Record"/>`,
    `  <Text name="${PREFIX}text_id" value="$${ID_KEY}"/>`,
    `  <Text name="${PREFIX}text_reason" value="$${REASON_KEY}"/>`,
  ];
  for (const { field, key } of kept)
    lines.push(`  <Header value="${xml(field)}"/>`, `  <Text name="${PREFIX}text_${key.slice(PREFIX.length)}" value="$${key}"/>`);
  for (const [name, { question }] of unitsOf(job.questions)) {
    const info = infoOf(name, question);
    lines.push(`  <Header value="${xml(question.instructions ? `${name}: ${question.instructions}` : name)}"/>`);
    lines.push(`  <Choices name="${xml(controlName(name))}" toName="${STATE_TAG}" choice="single-radio" showInline="true">`);
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

/** Where a review row's record was read: the run's input and its line (as the run wrote them beside the answers). */
interface Origin {
  source: string;
  line: number;
}

function originOf(record: Obj): Origin | undefined {
  const line = Number(record["line"]);
  const source = record["source"];
  return typeof source === "string" && source !== "" && Number.isInteger(line) && line > 0 ? { source, line } : undefined;
}

/**
 * The states of the review rows, read back from the run's input (`input`,
 * else each row's source): the state field by its path, or the whole record
 * when the job names none. A record whose id is not the row's (the input
 * changed since the run) is refused.
 */
async function statesFromInput(
  job: Job,
  rows: { id: string; origin: Origin | undefined }[],
  input: string | undefined,
  reviewPath: string,
): Promise<(string | undefined)[]> {
  const wanted = new Map<string, Map<number, number[]>>();
  rows.forEach((r, i) => {
    if (!r.origin) return;
    const source = input ?? r.origin.source;
    const lines = wanted.get(source) ?? new Map<number, number[]>();
    lines.set(r.origin.line, [...(lines.get(r.origin.line) ?? []), i]);
    wanted.set(source, lines);
  });
  const states: (string | undefined)[] = rows.map(() => undefined);
  for (const [source, lines] of wanted) {
    if (source === "stdin" || source === "-")
      throw new QualityInputError(`the run read its records from stdin, so their states cannot be read back: pass --input <the file the run read>`);
    const location = isAbsolute(source) || /^s3:\/\//.test(source) ? source : resolve(source);
    let left = lines.size;
    let found: Awaited<ReturnType<typeof openFile>>;
    try {
      found = await openFile(location, inputFormat(location), "input", false);
    } catch (error) {
      throw new QualityInputError(
        `the tasks would give annotators nothing to read: the state ${job.state ?? "(the whole record)"} is not kept in ${reviewPath}, and ${(error as Error).message}; pass --input <the file the run read>, or keep the state field in the job`,
      );
    }
    for await (const item of found.items) {
      const at = lines.get(item.line);
      if (!at) continue;
      if ("error" in item) throw new QualityInputError(`${location} line ${item.line}: ${item.error}`);
      for (const i of at) {
        const row = rows[i] as (typeof rows)[number];
        if (job.id !== undefined) {
          const id = valueAt(item.record, job.id);
          const named = typeof id === "string" ? id : JSON.stringify(id);
          if (named !== row.id)
            throw new QualityInputError(
              `${location} line ${item.line} holds id ${named}, but the review row of that line is ${row.id}: the input changed since the run; pass --input <the file the run read>`,
            );
        }
        const state = job.state === undefined ? item.record : valueAt(item.record, job.state);
        states[i] = state === undefined || state === null ? undefined : text(state);
      }
      if (--left === 0) break;
    }
  }
  return states;
}

/**
 * A review file (or any answers file of the job) as Label Studio tasks with
 * the model's answers as pre-annotations. The state comes from the kept
 * fields when the job keeps it, else from the run's input (`input`, or the
 * source each row names); tasks that would show annotators nothing to read
 * are refused.
 */
export async function reviewTasks(reviewPath: string, job: Job, options: { input?: string | undefined } = {}): Promise<LabelStudioTask[]> {
  const kept = keptFields(job);
  const questions = unitInfos(job.questions);
  const tasks: LabelStudioTask[] = [];
  const rows: { id: string; origin: Origin | undefined; kept: unknown }[] = [];
  for await (const row of await readAnswers(reviewPath, { questions })) {
    const record = row.record ?? {};
    const fields = isObject(record["fields"]) ? record["fields"] : record;
    const data: Record<string, string> = { [ID_KEY]: row.id, [STATE_KEY]: "", [REASON_KEY]: reasonOf(record) };
    for (const { field, key } of kept) data[key] = text(fields[field]);
    rows.push({ id: row.id, origin: originOf(record), kept: job.state !== undefined && (job.keep ?? []).includes(job.state) ? fields[job.state] : undefined });
    const result: LabelStudioTask["predictions"][number]["result"] = [];
    for (const q of questions) {
      const dist = row.dist.get(q.name) as number[];
      let best = 0;
      for (let j = 1; j < dist.length; j++) if ((dist[j] as number) > (dist[best] as number)) best = j;
      result.push({
        id: controlName(q.name),
        from_name: controlName(q.name),
        to_name: STATE_TAG,
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
  const fromKept = rows.map((r) => (r.kept === undefined || r.kept === null || r.kept === "" ? undefined : text(r.kept)));
  const missing = fromKept.some((s) => s === undefined);
  const read = missing ? await statesFromInput(job, rows, options.input, reviewPath) : [];
  const empty: string[] = [];
  tasks.forEach((t, i) => {
    const state = fromKept[i] ?? read[i];
    if (state === undefined || state.trim() === "")
      empty.push(rows[i]?.origin ? `${t.data[ID_KEY]} (line ${rows[i]?.origin?.line})` : (t.data[ID_KEY] as string));
    else t.data[STATE_KEY] = state;
  });
  if (empty.length > 0)
    throw new QualityInputError(
      `the tasks would give annotators nothing to read: ${empty.length} of ${tasks.length} review rows have no ${job.state ?? "record"} (${empty.slice(0, 5).join(", ")}${empty.length > 5 ? ", ..." : ""}); ${
        rows.some((r) => !r.origin) ? "the review file names no source line to read it from; keep the state field in the job, or " : ""
      }pass --input <the file the run read>`,
    );
  return tasks;
}

/** Whether a file is a Label Studio export: a `.json` file holding a list, or a `.csv` file whose header has our `te_id` or Label Studio's annotation columns. */
export function isLabelStudioExport(path: string): boolean {
  const head = headOf(path);
  if (head === undefined) return false;
  if (/\.json$/i.test(path)) return /^\s*\[/.test(head);
  if (/\.csv$/i.test(path)) return LS_CSV_HEADER.test(head.split(/\r?\n/)[0] ?? "");
  return false;
}

/** A header naming our record id or one of the columns Label Studio's CSV export always writes (exports/csv2.py). */
const LS_CSV_HEADER = /(^|,)"?(te_id|annotation_id|annotator|lead_time)"?(,|$)/;

/** The first 4 KB of a file as text, BOM dropped; undefined when unreadable (the ordinary gold reader says why). */
function headOf(path: string): string | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(path, "r");
    const head = Buffer.alloc(4096);
    const n = readSync(fd, head, 0, head.length, 0);
    return head
      .subarray(0, n)
      .toString("utf8")
      .replace(/^\uFEFF/, "");
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** One annotation of a labelled task, whichever export it came from: per control, the choices made. */
interface Annotation {
  cancelled: boolean;
  groundTruth: boolean;
  choices: Map<string, unknown[]>;
}

/** One task as read from an export: where it was (for messages), its record id, its annotations. */
interface ExportedTask {
  where: string;
  id: string | undefined;
  /** Why there is no id, when there is none. */
  noId?: string;
  annotations: Annotation[];
}

/** A Label Studio JSON export: tasks with `data` and nested `annotations[].result[]`. */
function fromJson(tasks: unknown[], path: string): ExportedTask[] {
  return tasks.map((task, t): ExportedTask => {
    const where = `${path} task ${isObject(task) && task["id"] !== undefined ? `${String(task["id"])} (item ${t + 1})` : `item ${t + 1}`}`;
    if (!isObject(task) || !isObject(task["data"])) return { where, id: undefined, noId: "no data object", annotations: [] };
    const data = task["data"];
    // data.id is ours in tasks an earlier typed-eval exported; in this format Label Studio keeps its own id outside data.
    const raw = data[ID_KEY] ?? data["id"];
    const annotations = (Array.isArray(task["annotations"]) ? task["annotations"].filter(isObject) : []).map((a) => {
      const choices = new Map<string, unknown[]>();
      for (const item of Array.isArray(a["result"]) ? a["result"].filter(isObject) : []) {
        if (item["type"] !== "choices" || typeof item["from_name"] !== "string") continue;
        const value = isObject(item["value"]) && Array.isArray(item["value"]["choices"]) ? item["value"]["choices"] : [];
        choices.set(item["from_name"], [...(choices.get(item["from_name"]) ?? []), ...value]);
      }
      return { cancelled: a["was_cancelled"] === true, groundTruth: a["ground_truth"] === true, choices };
    });
    return raw === undefined || raw === null || raw === ""
      ? { where, id: undefined, noId: `no data.${ID_KEY}, the record id typed-eval labelstudio export puts in each task`, annotations }
      : { where, id: String(raw), annotations };
  });
}

/**
 * JSON-MIN and CSV exports: one flat row per annotation (cancelled ones left
 * out by the converter), the task's data and Label Studio's own columns
 * side by side, each control's choice under its name. Rows of one record
 * are grouped by our id; Label Studio's `id` is never read.
 */
function fromFlat(rows: Obj[], where: (i: number, row: Obj) => string, columns: (row: Obj) => string[], controls: ReadonlySet<string>): ExportedTask[] {
  const byId = new Map<string, ExportedTask>();
  const out: ExportedTask[] = [];
  rows.forEach((row, i) => {
    const at = where(i, row);
    const raw = row[ID_KEY];
    if (raw === undefined || raw === null || raw === "") {
      const lsOnly = row["id"] !== undefined;
      out.push({
        where: at,
        id: undefined,
        noId: lsOnly
          ? `no ${ID_KEY} column, only Label Studio's own id (its task id, not the record's): export tasks with typed-eval labelstudio export, or read a JSON export whose data.id is the record id`
          : `no ${ID_KEY}, the record id typed-eval labelstudio export puts in each task`,
        annotations: [],
      });
      return;
    }
    const id = String(raw);
    let task = byId.get(id);
    if (!task) {
      task = { where: at, id, annotations: [] };
      byId.set(id, task);
      out.push(task);
    }
    // A task nobody labelled is exported with empty annotation columns.
    const annotated = row["annotation_id"] !== undefined && row["annotation_id"] !== null && row["annotation_id"] !== "";
    if (!annotated) return;
    const choices = new Map<string, unknown[]>();
    for (const column of columns(row)) {
      if (!controls.has(column)) continue;
      const value = row[column];
      if (value === undefined || value === null || value === "") continue;
      choices.set(column, flatChoices(value));
    }
    task.annotations.push({
      cancelled: row["was_cancelled"] === true || row["was_cancelled"] === "True" || row["was_cancelled"] === "true",
      groundTruth: false,
      choices,
    });
  });
  return out;
}

/** A flat export's choice cell: the choice itself when one was made (prettify_result), else a list of `{choices: [...]}` (in CSV as JSON text). */
function flatChoices(value: unknown): unknown[] {
  if (typeof value === "string" && /^\s*[[{]/.test(value)) {
    try {
      return flatChoices(JSON.parse(value));
    } catch {
      return [value];
    }
  }
  if (Array.isArray(value)) return value.flatMap((v) => (isObject(v) && Array.isArray(v["choices"]) ? v["choices"] : [v]));
  if (isObject(value) && Array.isArray(value["choices"])) return value["choices"];
  return [value];
}

/** A CSV export's rows, each with the line of the file it starts on (a cell holding line breaks spans several), read as every CSV input is. */
async function csvExportRows(path: string): Promise<{ rows: Obj[]; lines: number[] }> {
  const source = await openFile(path, inputFormat(path), "Label Studio CSV export", false);
  const rows: Obj[] = [];
  const lines: number[] = [];
  try {
    for await (const item of source.items) {
      if ("error" in item) throw new Error(`line ${item.line}: ${item.error}`);
      if (!isObject(item.record)) throw new Error(`line ${item.line}: not a row of named cells`);
      rows.push(item.record);
      lines.push(item.line);
    }
  } catch (error) {
    if (error instanceof QualityInputError) throw error;
    throw new QualityInputError(`cannot read Label Studio CSV export ${path}: ${(error as Error).message}`);
  }
  return { rows, lines };
}

/** The export's tasks, whatever its format: JSON (nested), JSON-MIN or CSV (flat). */
async function exportedTasks(path: string, controls: ReadonlySet<string>): Promise<ExportedTask[]> {
  if (/\.csv$/i.test(path)) {
    const { rows, lines } = await csvExportRows(path);
    return fromFlat(
      rows,
      (i, row) => `${path} line ${lines[i]}${row["id"] !== undefined ? ` (task ${String(row["id"])})` : ""}`,
      (row) => Object.keys(row),
      controls,
    );
  }
  let content: string;
  try {
    content = readFileSync(path, "utf8").replace(/^\uFEFF/, "");
  } catch (error) {
    throw new QualityInputError(`cannot read Label Studio export ${path}: ${(error as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(content);
  } catch (error) {
    throw new QualityInputError(`cannot read Label Studio export ${path}: ${(error as Error).message}`);
  }
  if (!Array.isArray(parsed)) throw new QualityInputError(`${path} is not a Label Studio export (a list of tasks)`);
  // JSON keeps each task's data in `data`; JSON-MIN flattens it beside the annotation's columns.
  const nested = parsed.some((t) => isObject(t) && (isObject(t["data"]) || Array.isArray(t["annotations"])));
  if (nested || parsed.length === 0 || !parsed.every(isObject)) return fromJson(parsed, path);
  return fromFlat(
    parsed as Obj[],
    (i, row) => `${path} item ${i + 1}${row["id"] !== undefined ? ` (task ${String(row["id"])})` : ""}`,
    (row) => Object.keys(row),
    controls,
  );
}

/**
 * Reads a Label Studio export (JSON, JSON-MIN or CSV) as gold. The record id
 * is our `te_id` (a JSON export's `data.id` in tasks an older typed-eval
 * exported), never Label Studio's task id; per question, the choice of its
 * control (`te_q_<question>`, or the question's own name in older tasks). A
 * task whose every annotation was cancelled (skipped) is left out and counted,
 * as the converter leaves it out of JSON-MIN and CSV. A task with no
 * annotation, annotations that
 * disagree (and none marked ground truth), an unknown option, or no record
 * id is a problem naming the task; every problem (up to 20) is thrown at once.
 * Long: each rule a task can break, checked in turn while the label table is
 * filled; the rules read in the order a person fixes an export.
 */
export async function readLabelStudioGold(path: string, questions: QuestionInfo[]): Promise<Gold> {
  const nq = questions.length;
  const byControl = new Map<string, number>();
  questions.forEach((q, j) => {
    byControl.set(controlName(q.name), j);
    if (!byControl.has(q.name)) byControl.set(q.name, j);
  });
  const tasks = await exportedTasks(path, new Set(byControl.keys()));
  const gold: Gold = { rows: new Map(), lines: [], labels: new Int32Array(Math.max(tasks.length, 1) * nq).fill(-1), questions, ignored: [] };
  const ignored = new Set<string>();
  let skipped = 0;
  const problems: string[] = [];
  const problem = (message: string) => {
    if (problems.length < 20) problems.push(message);
    else if (problems.length === 20) problems.push("... and more");
  };
  // Long: the body of readLabelStudioGold's one pass over the tasks.
  tasks.forEach((task, t) => {
    if (task.id === undefined) {
      problem(`${task.where}: ${task.noId ?? "no record id"}`);
      return;
    }
    const id = task.id;
    const named = `${task.where}, id ${JSON.stringify(id)}`;
    if (task.annotations.length === 0) {
      problem(`${named}: not labelled (no annotation); label it or leave it out of the export`);
      return;
    }
    let kept = task.annotations.filter((a) => !a.cancelled);
    // Skipped by everyone who saw it: no label, and left out, as Label Studio's converter leaves it out of JSON-MIN and CSV.
    if (kept.length === 0) {
      skipped++;
      return;
    }
    const truth = kept.filter((a) => a.groundTruth);
    if (truth.length > 0) kept = truth;
    if (gold.rows.has(id)) {
      problem(`${named}: id labelled twice (first in ${tasks[gold.lines[gold.rows.get(id) as number] as number]?.where ?? "an earlier task"})`);
      return;
    }
    const row = gold.lines.length;
    const seen = new Map<number, Set<number>>();
    for (const a of kept) {
      for (const [control, choices] of a.choices) {
        const j = byControl.get(control);
        if (j === undefined) {
          ignored.add(control);
          continue;
        }
        const q = questions[j] as QuestionInfo;
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
    // The task's index: its place in the export names it in messages.
    gold.lines.push(t);
  });
  if (problems.length > 0)
    throw new QualityInputError(
      `${path}: ${problems.length > 20 ? "20+" : problems.length} problem${problems.length > 1 ? "s" : ""}:\n  ${problems.join("\n  ")}`,
    );
  if (gold.lines.length === 0)
    throw new QualityInputError(`${path} holds no ${skipped > 0 ? `labelled tasks (${plural(skipped, "task")} skipped in Label Studio)` : "tasks"}`);
  gold.labels = gold.labels.subarray(0, gold.lines.length * nq);
  gold.ignored = [...ignored];
  if (skipped > 0) gold.skipped = skipped;
  if (!questions.some((_, j) => gold.lines.some((__, r) => (gold.labels[r * nq + j] as number) >= 0)))
    throw new QualityInputError(
      `${path} labels none of the questions ${questions.map((q) => q.name).join(", ")}${ignored.size ? `; its choices are named ${[...ignored].join(", ")}` : ""}`,
    );
  // The gold's "line" of each row: the export's item number (1-based), as assess names gold rows.
  gold.lines = gold.lines.map((t) => t + 1);
  return gold;
}

/**
 * Gold as a file of `file`'s format (id, then one column per question: the
 * option name, yes/no, or the level index; empty where it was left
 * unlabeled), for `labelstudio import`.
 */
export function goldFile(gold: Gold, file: FileFormat): Buffer {
  const { questions } = gold;
  const nq = questions.length;
  const label = (r: number, j: number) => {
    const y = gold.labels[r * nq + j] as number;
    return y < 0 ? undefined : kindOf(questions[j] as QuestionInfo).goldText(questions[j] as QuestionInfo, y);
  };
  type Row = [id: string, row: number];
  const columns: Column<Row>[] = [
    { name: "id", kind: "string", value: ([id]) => id },
    ...questions.map((q, j): Column<Row> => ({ name: q.name, kind: "string", value: ([, r]) => label(r, j) })),
  ];
  const record = (row: Row) => Object.fromEntries(columns.map((c) => [c.name, c.value(row) ?? null]));
  return encodeAll(file, { columns, record }, gold.rows);
}
