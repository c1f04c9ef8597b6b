/**
 * Reading what a run wrote (answers) and what people labeled (gold), in any
 * registered format (src/records/formats.ts), streamed, into per-question label distributions and
 * gold class indices. Everything downstream (assess, calibrate, thresholds,
 * report) works on these, so it is the same for the embedded model and for
 * any remote endpoint.
 */
import { distributionKinds, findKind, kindOf, unitAnswers, type AnyDistributionKind, type ProbabilityField, type QuestionInfo } from "../questions/index.js";
import { isObject } from "../questions/kind.js";
import type { Format } from "../records/format.js";
import { inputFormat } from "../records/formats.js";
import { openLocalSource } from "../records/sources.js";
import { openS3Source } from "../records/s3-source.js";
import type { Source } from "../records/source.js";
import { isS3 } from "../records/s3.js";
import { NoInputError, StorageError, SourceError } from "../api/verdict.js";
import { InvocationError } from "../api/errors.js";
import { valueAt } from "../records/source.js";
import { refuseOtherKinds } from "../records/file-kind.js";

export { infoOf, unitInfos, type QuestionInfo } from "../questions/index.js";

/** Labels as people read them: no/yes for a noul, level texts for a score when known. */
export function displayLabels(q: { type: QuestionInfo["type"]; labels: string[]; levels?: unknown[] | undefined }): string[] {
  return kindOf(q).displayLabels(q);
}

/** One answered row: per unit (a question, or a part of one with parts) its distribution in label order, and the raw one when the run calibrated. */
export interface AnswerRow {
  id: string;
  line: number;
  dist: Map<string, number[]>;
  raw?: Map<string, number[]>;
  mass?: Record<string, number>;
  /** The row as read, for readers that want more than the answers (kept fields, review reasons). */
  record?: Record<string, unknown>;
  /** The model the row names, when it does. */
  model?: string;
  /** The prompt format the row names, when it does (rows written before formats were named do not). */
  promptFormat?: string;
}

export class QualityInputError extends InvocationError {
  override name = "QualityInputError";
}

type Record_ = Record<string, unknown>;

/** A unit's main column in a flat answers file is named after its type. */
const mainColumn = () => new RegExp(`^(.*)\\.(${distributionTypes().join("|")})$`);
const distributionTypes = () => distributionKinds().map((k) => k.type);

/** Units named by the first JSONL answers row (a question with parts names its parts). */
function discoverJsonl(row: Record_): QuestionInfo[] {
  const answers = row["answers"];
  if (!isObject(answers)) return [];
  const known = Object.fromEntries(Object.entries(answers).filter(([, a]) => isObject(a) && findKind(String(a["type"]))));
  const out: QuestionInfo[] = [];
  for (const [name, a] of Object.entries(unitAnswers(known as Record<string, { type: string }>))) {
    const kind = findKind(a);
    if (!kind || kind.parts) continue;
    const found = kind.discoverJson(a);
    if (found) out.push({ name, type: kind.type, ...found });
  }
  return out;
}

/** Units named by the columns of a flat answers file (a format of columns: CSV, Parquet, ...): `<unit>.<type>` (the type's main column), then whatever its type reads. */
function discoverColumns(columns: string[]): QuestionInfo[] {
  const out: QuestionInfo[] = [];
  const main = mainColumn();
  for (const column of columns) {
    const m = main.exec(column);
    if (!m) continue;
    const [, name, type] = m as unknown as [string, string, string];
    const kind = kindOf(type);
    out.push({ name, type: kind.type, ...kind.discoverColumns(name, columns) });
  }
  // A calibrated run writes `q.raw.noul` beside `q.noul`: that is q's raw answer, not a question "q.raw".
  const names = new Set(out.map((q) => q.name));
  return out.filter((q) => !(q.name.endsWith(".raw") && names.has(q.name.slice(0, -4))));
}

/** A probability cell; the place in the error message is `where` + `what`, joined only when the cell is bad (this runs for every cell). */
function probability(v: unknown, where: string, what = ""): number {
  const x = typeof v === "number" ? v : typeof v === "string" && v.trim() !== "" ? Number(v) : NaN;
  if (!(x >= 0 && x <= 1)) throw new QualityInputError(`${where}${what}: ${JSON.stringify(v)} is not a probability`);
  return x;
}

/** How a question's answers are read: its type, and the probabilities its distribution is made of (once per question, not per row). */
interface Reading {
  kind: AnyDistributionKind;
  fields: ProbabilityField[];
  /** Flat column names of the fields, and of the raw answer's fields; how an error names each. */
  columns: string[];
  rawColumns: string[];
  whats: string[];
  rawWhats: string[];
}
const readings = new WeakMap<QuestionInfo, Reading>();
function readingOf(q: QuestionInfo): Reading {
  let reading = readings.get(q);
  if (!reading) {
    const kind = kindOf(q);
    const fields = kind.fields(q);
    const raw = `${q.name}.raw`;
    reading = {
      kind,
      fields,
      columns: fields.map((f) => `${q.name}.${f.column}`),
      rawColumns: fields.map((f) => `${raw}.${f.column}`),
      whats: fields.map((f) => `: ${q.name}${f.what}`),
      rawWhats: fields.map((f) => `: ${raw}${f.what}`),
    };
    readings.set(q, reading);
  }
  return reading;
}

/** A question's distribution (or its raw one) from a flat row. */
function distributionOf(q: QuestionInfo, raw: boolean, get: (key: string) => unknown, where: string): number[] {
  const r = readingOf(q);
  const columns = raw ? r.rawColumns : r.columns;
  const whats = raw ? r.rawWhats : r.whats;
  return r.kind.toDistribution(columns.map((column, i) => probability(get(column), where, whats[i])));
}

/**
 * Opens an answers or gold file, local or `s3://` (a night's answers usually
 * live beside its run's S3 output). An unreadable one is a one-line usage
 * error (exit 2); a missing one too, unless it is the command's own input
 * (`primary`): then it is an absent input (exit 6, as for every command), not
 * a mistake in a flag such as --gold or --compare. A store that stays down
 * past its retries is a `StorageError` (exit 9: rerun once it is back).
 */
export async function openFile(path: string, format: Format, what: string, primary: boolean): Promise<Source> {
  try {
    return isS3(path) ? await openS3Source(path, format.name) : openLocalSource(path, format);
  } catch (error) {
    if (error instanceof StorageError) throw error;
    // A source names the file itself ("cannot read s3://...: no such key", "cannot read input x.jsonl: ENOENT"): say it once.
    const message = `cannot read ${what} ${path}: ${(error as Error).message.replace(`cannot read ${path}: `, "").replace(`cannot read input ${path}: `, "")}`;
    if (primary && error instanceof SourceError && error.absent) throw new SourceError(message, { absent: true });
    throw new QualityInputError(message);
  }
}

/**
 * Reads an answers file row by row. `questions` comes from the job file, or is discovered from the file.
 * Long: the row reader is one generator over every format's row (flat columns or an answers object), run once per row
 * of a night's answers; split, each row would cross a call per question and format.
 */
export async function readAnswers(
  path: string,
  options: {
    questions?: QuestionInfo[] | undefined;
    /** A registered format's name; by default the file's extension says. */
    format?: string | undefined;
    onQuestions?: (q: QuestionInfo[]) => void;
    /** The flag that names it (`--compare`): missing, it is a mistake in the invocation (exit 2), not an absent input (6). */
    secondary?: string | undefined;
  },
): Promise<AsyncGenerator<AnswerRow>> {
  const format = inputFormat(path, options.format);
  refuseOtherKinds(path, ["answers"], "answers typed-eval wrote");
  const flat = format.layout === "columns";
  const source = await openFile(path, format, options.secondary ?? "answers", options.secondary === undefined);
  let questions = options.questions;
  let notify = options.onQuestions;
  let read = 0;
  // Long: as readAnswers says, one generator for every format's row.
  async function* rows(): AsyncGenerator<AnswerRow> {
    try {
      for await (const item of source.items) {
        read++;
        const where = `${path} line ${item.line}`;
        if ("error" in item) throw new QualityInputError(`${where}: ${item.error}`);
        if (!isObject(item.record)) throw new QualityInputError(`${where}: not an object`);
        const record = item.record;
        if (!questions) {
          questions = flat ? discoverColumns(Object.keys(record)) : discoverJsonl(record);
          if (questions.length === 0)
            throw new QualityInputError(
              `${path} holds no answers typed-eval wrote (no answers object or <question>.${distributionTypes().join("/.")} columns)`,
            );
        }
        notify?.(questions);
        notify = undefined;
        const id = record["id"];
        if (id === undefined || id === null || id === "") throw new QualityInputError(`${where}: no id`);
        const row: AnswerRow = { id: String(id), line: item.line, dist: new Map(), record };
        if (typeof record["model"] === "string" && record["model"] !== "") row.model = record["model"];
        if (typeof record["prompt_format"] === "string" && record["prompt_format"] !== "") row.promptFormat = record["prompt_format"];
        if (flat) {
          for (const q of questions) {
            if (!(`${q.name}.${q.type}` in record))
              throw new QualityInputError(`${path}: no column ${q.name}.${q.type}; is this the answers file of this job?`);
            const dist = distributionOf(q, false, (key) => record[key], where);
            row.dist.set(q.name, dist);
            readingOf(q).kind.learn?.(q, dist, (key) => record[key]);
            const mass = record[`${q.name}.label_mass`];
            const m = typeof mass === "number" ? mass : typeof mass === "string" && mass.trim() !== "" ? Number(mass) : NaN;
            if (m >= 0 && m <= 1) (row.mass ??= {})[q.name] = m;
            const rawProbe = readingOf(q).rawColumns[0];
            if (rawProbe !== undefined && rawProbe in record) {
              row.raw ??= new Map();
              row.raw.set(
                q.name,
                distributionOf(q, true, (key) => record[key], where),
              );
            }
          }
        } else {
          const asked = isObject(record["answers"]) ? record["answers"] : undefined;
          if (!asked) throw new QualityInputError(`${where}: no answers object; is this an answers file typed-eval wrote?`);
          // A question with parts is read as its parts, each its own unit (`<question>.<part>`).
          const answers = unitAnswers(asked as Record<string, { type: string }>) as Record_;
          const raw = isObject(record["raw"]) ? record["raw"] : undefined;
          for (const q of questions) {
            const a = answers[q.name];
            if (!isObject(a)) throw new QualityInputError(`${where}: no answer to ${q.name}; the answers hold ${Object.keys(answers).join(", ")}`);
            row.dist.set(q.name, jsonDistribution(q, a, `${where}: ${q.name}`));
            if (raw && raw[q.name] !== undefined) {
              row.raw ??= new Map();
              row.raw.set(q.name, jsonDistribution(q, { type: q.type, ...readingOf(q).kind.fromRaw(raw[q.name]) }, `${where}: raw ${q.name}`));
            }
          }
          if (isObject(record["label_mass"])) row.mass = record["label_mass"] as Record<string, number>;
        }
        yield row;
      }
    } catch (error) {
      if (error instanceof SourceError) throw new QualityInputError(error.message);
      throw error;
    }
    // The command's own answers with no row: nothing to work on, exit 6 as for an absent file; an empty --compare is a mistake in a flag.
    if (read === 0 && options.secondary === undefined) throw new NoInputError(`${path} holds no answers: check that it is the file you meant`);
    if (read === 0) throw new QualityInputError(`${path} holds no answers`);
  }
  return rows();
}

function jsonDistribution(q: QuestionInfo, a: Record_, where: string): number[] {
  if (a["type"] !== q.type) throw new QualityInputError(`${where}: a ${String(a["type"])} answer, but ${q.name} is a ${q.type} question`);
  const { kind, fields } = readingOf(q);
  return kind.toDistribution(fields.map((f) => probability(f.pick(a), where, f.what)));
}

/** Gold labels: one row per labeled record, -1 where a question was left unlabeled. */
export interface Gold {
  /** Record id -> row. */
  rows: Map<string, number>;
  /** Line of each row in the gold file. */
  lines: number[];
  /** rows x questions, class index or -1. */
  labels: Int32Array;
  questions: QuestionInfo[];
  /** Gold columns that are not questions of the answers (listed, not assessed). */
  ignored: string[];
  /** Label Studio tasks left out because everyone who saw them pressed Skip (a JSON export still holds them). */
  skipped?: number;
}

/** A gold cell to a class index; undefined when empty (not labeled). */
export function goldClass(q: QuestionInfo, value: unknown, where: string): number | undefined {
  if (value === undefined || value === null || value === "") return undefined;
  const y = kindOf(q).goldClass(q, value);
  if (typeof y === "string") throw new QualityInputError(`${where}: ${y}`);
  return y;
}

/** A field by its exact name (CSV columns may hold dots), else as a dotted path. */
function field(record: Record_, path: string): unknown {
  return Object.hasOwn(record, path) ? record[path] : valueAt(record, path);
}

/**
 * Reads a gold file. The id is the field `idField` (default: `id`, else the
 * job's id field); every other field named like a question holds its label.
 * Every problem is collected (up to 20) and thrown at once, naming lines and fields.
 * Long: one pass that checks, collects problems and fills the label table at once; split, the problem list and the
 * table would travel between the pieces.
 */
export async function readGold(
  path: string,
  questions: QuestionInfo[],
  options: { idField?: string | undefined; jobIdField?: string | undefined; format?: string | undefined },
): Promise<Gold> {
  const format = inputFormat(path, options.format);
  const source = await openFile(path, format, "gold", false);
  const gold: Gold = { rows: new Map(), lines: [], labels: new Int32Array(1024 * questions.length), questions, ignored: [] };
  const problems: string[] = [];
  const problem = (message: string) => {
    if (problems.length < 20) problems.push(message);
    else if (problems.length === 20) problems.push("... and more");
  };
  let idField: string | undefined;
  const seenColumns = new Set<string>();
  try {
    for await (const item of source.items) {
      const where = `${path} line ${item.line}`;
      if ("error" in item) {
        problem(`${where}: ${item.error}`);
        continue;
      }
      if (!isObject(item.record)) {
        problem(`${where}: not an object`);
        continue;
      }
      const record = item.record;
      for (const key of Object.keys(record)) seenColumns.add(key);
      const first = idField === undefined;
      idField ??= options.idField ?? ("id" in record ? "id" : (options.jobIdField ?? "id"));
      const id = field(record, idField);
      // A table without the id column: say so once, with the columns it has, not once per row.
      if (first && id === undefined && format.layout === "columns") {
        const flag = options.idField ? "--id-field" : "--id-field (the job's id field by default)";
        throw new QualityInputError(`it has no column ${idField}; its columns are ${Object.keys(record).join(", ")}: name its id column with ${flag}`);
      }
      if (id === undefined || id === null || id === "") {
        problem(`${where}: no id in field "${idField}"${options.idField ? "" : " (set the id field with --id-field)"}`);
        continue;
      }
      const key = String(id);
      if (gold.rows.has(key)) {
        problem(`${where}: id ${JSON.stringify(key)} is labeled twice (first on line ${gold.lines[gold.rows.get(key) as number]})`);
        continue;
      }
      const row = gold.lines.length;
      if ((row + 1) * questions.length > gold.labels.length) {
        const next = new Int32Array(gold.labels.length * 2);
        next.set(gold.labels);
        gold.labels = next;
      }
      questions.forEach((q, j) => {
        try {
          gold.labels[row * questions.length + j] = goldClass(q, field(record, q.name), `${where}, field ${q.name}`) ?? -1;
        } catch (error) {
          problem((error as Error).message);
        }
      });
      gold.rows.set(key, row);
      gold.lines.push(item.line);
    }
  } catch (error) {
    throw new QualityInputError(`cannot read gold ${path}: ${(error as Error).message}`);
  }
  if (problems.length > 0)
    throw new QualityInputError(
      `${path}: ${problems.length > 20 ? "20+" : problems.length} problem${problems.length > 1 ? "s" : ""}:\n  ${problems.join("\n  ")}`,
    );
  if (gold.lines.length === 0) throw new QualityInputError(`${path} holds no gold rows`);
  const names = new Set(questions.map((q) => q.name));
  gold.ignored = [...seenColumns].filter((c) => c !== idField && !names.has(c));
  const labeled = questions.filter((_, j) => gold.lines.some((__, r) => (gold.labels[r * questions.length + j] as number) >= 0));
  if (labeled.length === 0) {
    throw new QualityInputError(`${path} labels none of the questions ${[...names].join(", ")}; its fields are ${[...seenColumns].join(", ")}`);
  }
  return gold;
}
