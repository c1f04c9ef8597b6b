/**
 * The registry of question types. The spec's three come first, one line
 * each; the wire contract (`api/schema.ts`) builds its `Question` and
 * `Answer` unions from that list and no other, so the wire stays the spec's.
 * A type registered in process (`registerKind`: a test's, an embedding
 * program's) follows them: the local evaluator, the runner and the quality
 * tools know it, the server's validation and the remote evaluator refuse it.
 * Everything else finds a question's type object here.
 */
import type { Static } from "@sinclair/typebox";
import { choice } from "./choice.js";
import type { DistributionKind, LabelInfo, PartsKind, QuestionKind } from "./kind.js";
import { noul } from "./noul.js";
import { score } from "./score.js";
import type { Content } from "./wire.js";

/** The spec's question types, in the spec's order: the wire union. */
export const SPEC_KINDS = [
  noul, // yes or no
  choice, // one option of many
  score, // one of ordered levels
] as const;

type SpecKinds = typeof SPEC_KINDS;
/** A question of one of the spec's types, and its answer, as on the wire. */
export type SpecQuestion = Static<SpecKinds[number]["question"]>;
export type SpecAnswer = Static<SpecKinds[number]["answer"]>;
/** The spec's type names. */
export type SpecType = SpecQuestion["type"];

/** A question of a type registered in process: its type object knows its shape, TypeScript only its tag. */
export interface RegisteredQuestion {
  type: string;
  instructions?: Content | null | undefined;
  [field: string]: unknown;
}
export interface RegisteredAnswer {
  type: string;
  [field: string]: unknown;
}

/** A question of any registered type, and its answer: what the evaluator, the runner and the quality tools take. */
export type Question = SpecQuestion | RegisteredQuestion;
export type Answer = SpecAnswer | RegisteredAnswer;
export type QuestionType = Question["type"];

/** A unit as the quality tools see it: its name, the type of its question and its labels in answer order (see `LabelInfo`). */
export interface QuestionInfo extends LabelInfo {
  type: QuestionType;
}

/** The spec's question (answer) schemas, as a tuple so that a union of them keeps each member's type. */
type SchemasOf<T extends readonly { question: unknown; answer: unknown }[], F extends "question" | "answer"> = { -readonly [I in keyof T]: T[I][F] };
export const QUESTION_SCHEMAS = SPEC_KINDS.map((k) => k.question) as SchemasOf<SpecKinds, "question">;
export const ANSWER_SCHEMAS = SPEC_KINDS.map((k) => k.answer) as SchemasOf<SpecKinds, "answer">;

/**
 * A question's type object. The registry dispatches on the value's own
 * `type`, so each type object only ever sees its own questions and answers
 * (the casts say what the lookup guarantees).
 */
export type AnyKind = QuestionKind<Question, Answer, Question, Answer>;
export type AnyDistributionKind = DistributionKind<Question, Answer>;
export type AnyPartsKind = PartsKind<Question, Answer, Question, Answer>;

const KINDS: AnyKind[] = SPEC_KINDS.map((k) => k as unknown as AnyKind);
const BY_TYPE = new Map<string, AnyKind>(KINDS.map((k) => [k.type, k]));
const SPEC_TYPES: ReadonlySet<string> = new Set(SPEC_KINDS.map((k) => k.type));

/**
 * Adds a question type in process, after the spec's. Nothing on the wire
 * changes (the server refuses it, the OpenAPI document does not list it);
 * job files, the local evaluator and the quality tools take it. The same
 * object twice is one registration; another type of a taken name is refused.
 */
export function registerKind<Q extends { type: string }, A extends { type: string }, PQ extends Question, PA extends Answer>(
  kind: QuestionKind<Q, A, PQ, PA>,
): void {
  const known = BY_TYPE.get(kind.type);
  if (known === (kind as unknown as AnyKind)) return;
  if (known) throw new TypeError(`a question type ${JSON.stringify(kind.type)} is registered already`);
  KINDS.push(kind as unknown as AnyKind);
  BY_TYPE.set(kind.type, kind as unknown as AnyKind);
}

/** Every registered type in registry order: the spec's, then those registered in process. */
export function registeredKinds(): readonly AnyKind[] {
  return KINDS;
}

/** Whether a type is one of the spec's (the only ones the wire carries). */
export function isSpecType(type: string): boolean {
  return SPEC_TYPES.has(type);
}

/** The type object for a question, an answer or a type name; undefined when no type of that name is registered. */
export function findKind(of: string | { type: unknown }): AnyKind | undefined {
  return BY_TYPE.get(typeof of === "string" ? of : String(of.type));
}

/** The type object of a unit (a question whose answer is one distribution), already validated: anything else here is a bug. */
export function kindOf(of: string | { type: unknown }): AnyDistributionKind {
  const kind = findKind(of);
  const name = JSON.stringify(typeof of === "string" ? of : of.type);
  if (!kind) throw new TypeError(`no question type ${name}`);
  if (kind.parts) throw new TypeError(`a ${name} answer has parts, not one distribution: ask for its units (unitsOf)`);
  return kind;
}

/** The registered types whose answer is one distribution, in registry order. */
export function distributionKinds(): AnyDistributionKind[] {
  return KINDS.filter((k): k is AnyDistributionKind => !k.parts);
}

/** The suffixes of every distribution type's own answer columns (`<unit>.<suffix>`), across types. */
export function answerColumnSuffixes(): string[] {
  return [...new Set(distributionKinds().flatMap((k) => k.columns.map((c) => c.suffix)))];
}

/** What is asked, assessed, calibrated, thresholded, routed to review and exported on its own. */
export interface Unit {
  /** A question of a distribution type: the question itself, or one of its parts. */
  question: Question;
  /** For a part, the question it belongs to (the unit is named `<question>.<part>`). */
  of?: string;
}

/** The name of a part's unit. */
export function unitName(question: string, part: string): string {
  return `${question}.${part}`;
}

const UNITS = new WeakMap<Record<string, Question>, ReadonlyMap<string, Unit>>();

/**
 * The units of a question set, in question order: each question of a
 * distribution type, and each part of a question with parts. Kept per
 * question set (a job's is asked of every record).
 */
export function unitsOf(questions: Record<string, Question>): ReadonlyMap<string, Unit> {
  const known = UNITS.get(questions);
  if (known) return known;
  const units = new Map<string, Unit>();
  const add = (name: string, unit: Unit) => {
    // Job files refuse a question named like another's part (records/job.ts): here that is a bug.
    if (units.has(name)) throw new TypeError(`two units are named ${JSON.stringify(name)}`);
    units.set(name, unit);
  };
  for (const [name, question] of Object.entries(questions)) {
    const kind = findKind(question);
    if (!kind?.parts) {
      add(name, { question });
      continue;
    }
    for (const [part, partQuestion] of kind.parts.of(question)) {
      // A part of a part would be a unit nobody can name in a flat column: a type's parts are distribution types.
      kindOf(partQuestion);
      add(unitName(name, part), { question: partQuestion, of: name });
    }
  }
  UNITS.set(questions, units);
  return units;
}

/** Each unit's answer from the questions' answers, by unit name; `answers` itself when none has parts. What is not an answer passes as it is. */
export function unitAnswers(answers: Record<string, Answer>): Record<string, Answer> {
  const entries = Object.entries(answers);
  if (!entries.some(([, answer]) => hasParts(answer))) return answers;
  // Built from entries, never by assignment: a unit named "__proto__" stays a unit.
  return Object.fromEntries(
    entries.flatMap(([name, answer]): [string, Answer][] => {
      const kind = hasParts(answer) ? findKind(answer) : undefined;
      return kind?.parts ? kind.parts.split(answer).map(([part, a]) => [unitName(name, part), a]) : [[name, answer]];
    }),
  );
}

const hasParts = (answer: unknown): answer is Answer => typeof answer === "object" && answer !== null && findKind(answer as Answer)?.parts !== undefined;

/**
 * The questions' answers from their units' answers, in question order: a
 * question with parts joins its parts' answers, a question of a distribution
 * type takes its unit's. A question whose units are not all answered is left out.
 */
export function joinUnits(questions: Record<string, Question>, units: Record<string, Answer>): Record<string, Answer> {
  const out: [string, Answer][] = [];
  for (const [name, question] of Object.entries(questions)) {
    const kind = findKind(question);
    if (!kind?.parts) {
      const answer = Object.hasOwn(units, name) ? units[name] : undefined;
      if (answer) out.push([name, answer]);
      continue;
    }
    const parts = kind.parts.of(question).map(([part]) => units[unitName(name, part)]);
    if (parts.every((a) => a !== undefined)) out.push([name, kind.parts.join(question, parts as Answer[])]);
  }
  return Object.fromEntries(out);
}

/** The answer's labels (and levels, where the type has them) of a unit, as the quality tools see it. */
export function infoOf(name: string, question: Question): QuestionInfo {
  const kind = kindOf(question);
  const info: QuestionInfo = { name, type: question.type, labels: kind.labels(question) };
  const levels = kind.levels?.(question);
  if (levels) info.levels = levels;
  return info;
}

/** The units of a question set as the quality tools see them, in question order. */
export function unitInfos(questions: Record<string, Question>): QuestionInfo[] {
  return [...unitsOf(questions)].map(([name, unit]) => infoOf(name, unit.question));
}

export type { AnswerColumn, DistributionKind, LabelInfo, PartsKind, ProbabilityField, PromptBlock, QuestionKind, ValueAxis } from "./kind.js";
export { PROBABILITY_COLUMN } from "./kind.js";
