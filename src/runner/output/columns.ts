/**
 * The flat columns of an answers output, shared by every format of columns
 * (CSV, Parquet, ...): one definition of each column's name, kind and value,
 * so no two formats can disagree about what a row holds. Each question type names its own
 * columns (`src/questions`); a question with parts has its parts' columns,
 * each part named `<question>.<part>` like a question of its type.
 */
import type { Answer, Question } from "../../api/schema.js";
import { kindOf as questionKind, unitAnswers, unitsOf } from "../../questions/index.js";
import type { AnswerEntry } from "../state/journal.js";
import type { Column, ColumnKind } from "../../records/format.js";
import { reviewReason, type ReviewVerdict } from "../../records/review.js";
import { temporalKindOf } from "../../records/time-text.js";

/** What one output row holds: the journal entry, the answers as written (calibrated or not), the raw ones, a review verdict. */
export interface OutputRow {
  entry: AnswerEntry;
  answers: Record<string, Answer>;
  /** Raw answers of calibrated units: p(yes) for a noul, else the probability map. */
  raw?: Record<string, number | Record<string, number>> | undefined;
  review?: ReviewVerdict | undefined;
}

/** Options that change a row's columns: raw probabilities of calibrated questions, review columns. */
export interface RowShape {
  /** Units whose raw probabilities are written beside the calibrated ones. */
  calibrated: ReadonlySet<string>;
  /** Review files lead each row with why it is there. */
  review: boolean;
}

export const PLAIN: RowShape = { calibrated: new Set(), review: false };

/** A column of an answers output (its kind: `ColumnKind`, records/format.ts). */
export type FlatColumn = Column<OutputRow>;

/** The kinds of the kept fields, for typed formats; a field not listed is JSON. */
export type KeptKinds = ReadonlyMap<string, ColumnKind>;

/** The answers of a row by unit, worked out once per row (a row's answers are written once, then dropped). */
const UNIT_ANSWERS = new WeakMap<Record<string, Answer>, Record<string, Answer>>();
function unitAnswersOf(answers: Record<string, Answer>): Record<string, Answer> {
  let units = UNIT_ANSWERS.get(answers);
  if (!units) {
    units = unitAnswers(answers);
    UNIT_ANSWERS.set(answers, units);
  }
  return units;
}

/** A unit's columns: its type's own answer columns, then one per probability its answer is read back from (`<name>.p.<label>`). */
function questionColumns(name: string, question: Question): FlatColumn[] {
  const kind = questionKind(question);
  const answer = (r: OutputRow): Answer | undefined => {
    const a = unitAnswersOf(r.answers)[name];
    return a?.type === kind.type ? a : undefined;
  };
  const own = new Set(kind.columns.map((c) => c.suffix));
  return [
    ...kind.columns.map((c): FlatColumn => ({ name: `${name}.${c.suffix}`, kind: c.kind, value: (r) => mapped(answer(r), c.value) })),
    ...kind
      .fields({ name, labels: kind.labels(question) })
      .filter((f) => !own.has(f.column))
      .map((f): FlatColumn => ({ name: `${name}.${f.column}`, kind: "double", value: (r) => mapped(answer(r), f.pick) })),
  ];
}

function mapped<T, U>(x: T | undefined, f: (x: T) => U): U | undefined {
  return x === undefined ? undefined : f(x);
}

/** Raw probabilities of a calibrated question, beside the calibrated ones: `<name>.raw.<column>` for each probability column. */
function rawColumns(name: string, question: Question): FlatColumn[] {
  const kind = questionKind(question);
  return kind.fields({ name, labels: kind.labels(question) }).map((f) => ({
    name: `${name}.raw.${f.column}`,
    kind: "double",
    value: (r) => mapped(r.raw?.[name], (raw) => f.pick(kind.fromRaw(raw))),
  }));
}

/** A job's flat columns: id, line, model, kept fields, each question's values, usage. */
export function flatColumns(questions: Record<string, Question>, keep: readonly string[], shape: RowShape = PLAIN, kept?: KeptKinds): FlatColumn[] {
  const columns: FlatColumn[] = [
    { name: "id", kind: "string", value: (r) => r.entry.id },
    { name: "line", kind: "int", value: (r) => r.entry.line },
    { name: "source", kind: "string", value: (r) => r.entry.source },
    { name: "model", kind: "string", value: (r) => r.entry.model },
  ];
  if (shape.review) {
    columns.push(
      { name: "review_reason", kind: "string", value: (r) => reviewReason(r.review) },
      { name: "audit", kind: "bool", value: (r) => r.review?.audit ?? false },
    );
  }
  // Kept cells are the input's text: a text format keeps a spreadsheet from running them (Column.fromInput).
  for (const field of keep) columns.push({ name: field, kind: kept?.get(field) ?? "json", value: (r) => r.entry.keep?.[field], fromInput: true });
  for (const [name, { question }] of unitsOf(questions)) {
    columns.push(...questionColumns(name, question));
    if (shape.calibrated.has(name)) columns.push(...rawColumns(name, question));
    // As JSONL's label_mass: the report and assess read the same figures from every format (empty where the model gives none).
    columns.push({ name: `${name}.label_mass`, kind: "double", value: (r) => r.entry.label_mass?.[name] });
  }
  columns.push(
    { name: "input_tokens", kind: "int", value: (r) => r.entry.usage.input_tokens },
    { name: "output_tokens", kind: "int", value: (r) => r.entry.usage.output_tokens },
    { name: "dedup_of", kind: "string", value: (r) => r.entry.dedup_of },
  );
  return columns;
}

/**
 * The kind of each kept field, from every value it takes in the output: one
 * kind when all agree (whole numbers are `int`, any fraction or NaN makes the
 * field `double`; text that is every time a date, or a timestamp of one unit
 * and zone, is that), text when all are text of different kinds, else JSON
 * text, which holds any value. Nulls and missing values do not count.
 */
export class KeptKindsOf {
  private readonly seen = new Map<string, ColumnKind | "none">();
  constructor(private readonly fields: readonly string[]) {
    for (const f of fields) this.seen.set(f, "none");
  }
  add(keep: Record<string, unknown> | undefined): void {
    if (!keep) return;
    for (const field of this.fields) {
      const value = keep[field];
      if (value === null || value === undefined) continue;
      const kind = kindOf(value);
      const before = this.seen.get(field);
      if (before !== kind) this.seen.set(field, before === "none" || before === undefined ? kind : joined(before, kind));
    }
  }
  kinds(): KeptKinds {
    // A field that is always empty is text (of nulls).
    return new Map([...this.seen].map(([f, k]) => [f, k === "none" ? "string" : k]));
  }
}

const NUMBERS: ReadonlySet<ColumnKind> = new Set(["int", "double"]);
/** Text of any kind: plain, or dates and timestamps (time-text.ts). */
const isText = (kind: ColumnKind) => kind === "string" || kind === "date" || kind.startsWith("timestamp");

/** The kind that holds values of two different kinds. */
function joined(a: ColumnKind, b: ColumnKind): ColumnKind {
  if (NUMBERS.has(a) && NUMBERS.has(b)) return "double";
  if (isText(a) && isText(b)) return "string";
  return "json";
}

function kindOf(value: unknown): ColumnKind {
  switch (typeof value) {
    case "string":
      return temporalKindOf(value) ?? "string";
    case "boolean":
      return "bool";
    case "number":
      return Number.isSafeInteger(value) ? "int" : "double";
    default:
      return "json";
  }
}
