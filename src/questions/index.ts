/**
 * The registry of question types: one line per type. The wire contract
 * (`api/schema.ts`) builds its `Question` and `Answer` unions from this list,
 * in this order, and everything else finds a question's type object here.
 */
import type { Static } from "@sinclair/typebox";
import { choice } from "./choice.js";
import type { LabelInfo, QuestionKind } from "./kind.js";
import { noul } from "./noul.js";
import { score } from "./score.js";

export const QUESTION_KINDS = [
  noul, // yes or no
  choice, // one option of many
  score, // one of ordered levels
] as const;

type Kinds = typeof QUESTION_KINDS;
/** A question of any registered type, and its answer, as on the wire. */
export type Question = Static<Kinds[number]["question"]>;
export type Answer = Static<Kinds[number]["answer"]>;
export type QuestionType = Question["type"];

/** A question as the quality tools see it: its type and its labels in answer order (see `LabelInfo`). */
export interface QuestionInfo extends LabelInfo {
  type: QuestionType;
}

/** The registered question (answer) schemas, as a tuple so that a union of them keeps each member's type. */
type SchemasOf<T extends readonly { question: unknown; answer: unknown }[], F extends "question" | "answer"> = { -readonly [I in keyof T]: T[I][F] };
export const QUESTION_SCHEMAS = QUESTION_KINDS.map((k) => k.question) as SchemasOf<Kinds, "question">;
export const ANSWER_SCHEMAS = QUESTION_KINDS.map((k) => k.answer) as SchemasOf<Kinds, "answer">;

/**
 * A question's type object. The registry dispatches on the value's own
 * `type`, so each type object only ever sees its own questions and answers
 * (the cast says what the lookup guarantees).
 */
export type AnyKind = QuestionKind<Question, Answer>;
const BY_TYPE = new Map<string, AnyKind>(QUESTION_KINDS.map((k) => [k.type, k as unknown as AnyKind]));

/** The type object for a question, an answer or a type name; undefined when no type of that name is registered. */
export function findKind(of: string | { type: unknown }): AnyKind | undefined {
  return BY_TYPE.get(typeof of === "string" ? of : String(of.type));
}

/** The type object of something already validated: an unknown type here is a bug. */
export function kindOf(of: string | { type: unknown }): AnyKind {
  const kind = findKind(of);
  if (!kind) throw new TypeError(`no question type ${JSON.stringify(typeof of === "string" ? of : of.type)}`);
  return kind;
}

/** The suffixes of every type's own answer columns (`<question>.<suffix>`), across types. */
export const ANSWER_COLUMN_SUFFIXES: readonly string[] = [...new Set(QUESTION_KINDS.flatMap((k) => k.columns.map((c) => c.suffix)))];

/** The answer's labels (and levels, where the type has them) of a question, as the quality tools see it. */
export function infoOf(name: string, question: Question): QuestionInfo {
  const kind = kindOf(question);
  const info: QuestionInfo = { name, type: question.type, labels: kind.labels(question) };
  const levels = kind.levels?.(question);
  if (levels) info.levels = levels;
  return info;
}

export type { AnswerColumn, LabelInfo, ProbabilityField, PromptBlock, QuestionKind, ValueAxis } from "./kind.js";
export { PROBABILITY_COLUMN } from "./kind.js";
