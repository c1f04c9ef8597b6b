/**
 * What a question type is: one object per type (`noul.ts`, `choice.ts`,
 * `score.ts`) holding everything that differs by type, from its wire schema
 * to its report panels. Code outside `src/questions` asks a type object
 * (through the registry in `index.ts`) and never switches on a type's name.
 *
 * A type's answer is either one distribution over labels (`DistributionKind`:
 * the spec's three) or made of parts (`PartsKind`: a multi-label question is
 * one yes/no per option), each part a question of a distribution type. What
 * is asked, assessed, calibrated, thresholded, routed to review and exported
 * on its own is a *unit*: a question of a distribution type, or one part of a
 * question with parts, named `<question>.<part>` (`unitsOf` in `index.ts`).
 *
 * A unit's labels are its answer distribution's order: ["false", "true"]
 * for a noul, the option names for a choice, "0".."k-1" for a score. Every
 * distribution in the code (readout, calibration, columns, quality) is in
 * that order.
 */
import { isDeepStrictEqual } from "node:util";
import type { TSchema } from "@sinclair/typebox";
import type { Content } from "./wire.js";

/** A question as the quality tools see it, without its wire form: its labels in answer order, and level texts where the type has them. */
export interface LabelInfo {
  name: string;
  labels: string[];
  levels?: Content[];
}

/** The lines a question adds to its prompt after its `Question:` line, the label the model answers with per option (prompt order), and the closing ask. */
export interface PromptBlock {
  lines: string[];
  labels: string[];
  ask: string;
}

/**
 * A flat output column of an answer, named `<question>.<suffix>` (CSV and
 * Parquet). `value` sees only answers of the column's own type.
 */
export interface AnswerColumn<A> {
  suffix: string;
  kind: "double" | "string";
  value(answer: A): unknown;
}

/**
 * One probability an answer is read back from: its flat column suffix, how
 * to find it in a JSON answer, and how an error names it.
 */
export interface ProbabilityField {
  column: string;
  pick(answer: Record<string, unknown>): unknown;
  /** Appended to the place in an error message: "" or " probability of <label>". */
  what: string;
}

/** A single number per answer that the report charts and bins (a noul's p(yes), a score's expected level). */
export interface ValueAxis {
  of(p: readonly number[]): number;
  /** The value's range is [0, top]. */
  top(info: { labels: string[] }): number;
  /** Chart title after the question name, and the chart's axis. */
  title: string;
  axis: string;
  /** What population stability is computed over, with `bins` equal bins. */
  psiBasis(info: { labels: string[] }, bins: number): string;
}

/** What every question type has: its tag, its schemas and its consistency rules. Q is its question and A its answer. */
interface KindBase<Q extends { type: string }, A extends { type: string }> {
  /** The `type` tag of the question and its answer, and (for a distribution type) the suffix of its main output column. */
  readonly type: Q["type"];
  /** Schemas (each with an `$id`: the OpenAPI document names the spec's). */
  readonly question: TSchema & { static: Q };
  readonly answer: TSchema & { static: A };
  /** Every way `answer` breaks the consistency rules (spec 2.7) for `question`; `where` names it. */
  violations(where: string, question: Q, answer: A): string[];
}

/** A type whose answer is one distribution over its labels: how it is asked, read, calibrated, exported and assessed. */
export interface DistributionKind<Q extends { type: string }, A extends { type: string }> extends KindBase<Q, A> {
  /** A distribution type has no parts: it is its own unit. */
  readonly parts?: undefined;

  /** How the model replies to a question of this type, in the system text of every request that asks the type ("the level number for a rating"). */
  readonly replyHint: string;
  /** The instructions used when the question gives none. */
  readonly defaultInstructions: string;
  prompt(question: Q): PromptBlock;
  /** The answer from the label distribution in the prompt's label order. */
  readout(question: Q, p: readonly number[]): A;

  labels(question: Q): string[];
  /** Level texts, for a type whose labels stand for ordered texts. */
  levels?(question: Q): Content[];
  /** Its labels are ordered levels: a person's wrong label is likeliest a neighbouring level (label-noise estimates read it). */
  readonly ordered?: true;
  /** The distribution an answer carries, in label order. */
  distribution(question: Q, answer: A): number[];
  /** The answer a distribution (label order) gives by the v1 rules, e.g. after calibration. */
  answerFrom(question: Q, p: readonly number[]): A;
  /** What a calibrated run keeps of the raw answer (JSONL `raw`), and the answer fields it stands for. */
  raw(answer: A): number | Record<string, number>;
  fromRaw(raw: unknown): Record<string, unknown>;

  /** The answer's own columns; one double column per probability field not among them follows. */
  readonly columns: readonly AnswerColumn<A>[];
  fields(info: LabelInfo): ProbabilityField[];
  /** The distribution from the probabilities of `fields`, in their order. */
  toDistribution(values: number[]): number[];

  /** Labels (and levels) of a question met first in a JSONL answer; undefined when the answer cannot say. */
  discoverJson(answer: Record<string, unknown>): Omit<LabelInfo, "name"> | undefined;
  /** Labels (and levels) of question `name` from the columns of a CSV or Parquet answers file. */
  discoverColumns(name: string, columns: readonly string[]): Omit<LabelInfo, "name">;
  /** What a flat row teaches beyond the distribution (a score's level texts); changes `info` in place. */
  learn?(info: LabelInfo, dist: readonly number[], get: (column: string) => unknown): void;

  /** A gold cell (not empty) to a class index, or what is wrong with it. */
  goldClass(info: LabelInfo, value: unknown): number | string;
  /** A class index as gold files write it. */
  goldText(info: LabelInfo, y: number): string;
  /** Labels as people read them. */
  displayLabels(info: { labels: string[]; levels?: unknown[] | undefined }): string[];
  /** The value the report charts, for types that have one. */
  readonly value?: ValueAxis;
  /** The description a labeling tool shows beside a label. */
  hint(question: Q, label: string): Content | null | undefined;
}

/**
 * A type whose answer has parts: each part is a question of a distribution
 * type (a multi-label question's part is a noul per option), asked, read,
 * calibrated, assessed, thresholded, routed to review and exported as that
 * question under the unit name `<question>.<part>`. Its prompt, labels and
 * columns are its parts'; the type itself says only how a question splits
 * into parts and how their answers make its own.
 */
export interface PartsKind<
  Q extends { type: string },
  A extends { type: string },
  PQ extends { type: string } = { type: string },
  PA extends { type: string } = { type: string },
> extends KindBase<Q, A> {
  readonly parts: {
    /** The parts of a question in answer order: a name (unique within the question) and a question of a registered distribution type. */
    of(question: Q): [string, PQ][];
    /** The answer made of the parts' answers, given in the order of `of`. */
    join(question: Q, answers: readonly PA[]): A;
    /** An answer's parts by name, each an answer of its part's type: from the answer alone (the quality tools meet answers without their questions). */
    split(answer: A): [string, PA][];
  };
}

/** A question type: one distribution, or parts. */
export type QuestionKind<
  Q extends { type: string },
  A extends { type: string },
  PQ extends { type: string } = { type: string },
  PA extends { type: string } = { type: string },
> = DistributionKind<Q, A> | PartsKind<Q, A, PQ, PA>;

/** How far a probability map's sum may stray from 1 ("approximately 1"). */
export const SUM_TOLERANCE = 1e-6;

export function inUnitInterval(x: number): boolean {
  return Number.isFinite(x) && x >= 0 && x <= 1;
}

/** Consistency of a probability map with the keys it must have. */
export function probabilityViolations(where: string, probabilities: Record<string, number>, keys: string[]): string[] {
  const problems: string[] = [];
  const got = Object.keys(probabilities).sort();
  const want = [...keys].sort();
  if (!isDeepStrictEqual(got, want)) {
    problems.push(`${where}: probabilities keys ${JSON.stringify(got)} differ from ${JSON.stringify(want)}`);
  }
  let sum = 0;
  for (const [key, p] of Object.entries(probabilities)) {
    if (!inUnitInterval(p)) problems.push(`${where}: probability of ${JSON.stringify(key)} is ${p}, outside [0, 1]`);
    sum += p;
  }
  if (!(Math.abs(sum - 1) <= SUM_TOLERANCE)) problems.push(`${where}: probabilities sum to ${sum}, not 1`);
  return problems;
}

export function confidenceViolations(where: string, confidence: number): string[] {
  return inUnitInterval(confidence) ? [] : [`${where}: confidence ${confidence} outside [0, 1]`];
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The prefix of per-label probability columns: `<question>.p.<label>`. */
export const PROBABILITY_COLUMN = "p.";

/** A probability per label, in a `probabilities` map (choice and score answers). */
export function labelFields(info: LabelInfo): ProbabilityField[] {
  return info.labels.map((label) => ({
    column: `${PROBABILITY_COLUMN}${label}`,
    pick: (a) => (isObject(a["probabilities"]) ? a["probabilities"][label] : undefined),
    what: ` probability of ${label}`,
  }));
}

/** Labels named by `<name>.p.<label>` columns, in column order. */
export function labelsFromColumns(name: string, columns: readonly string[]): string[] {
  const prefix = `${name}.${PROBABILITY_COLUMN}`;
  return columns.filter((c) => c.startsWith(prefix)).map((c) => c.slice(prefix.length));
}

/** Inline form of an option or level description in a prompt. */
export function inline(content: Content | null | undefined): string {
  if (content === null || content === undefined) return "";
  return typeof content === "string" ? content : JSON.stringify(content);
}
