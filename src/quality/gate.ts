/**
 * Quality and drift gates: `--fail-if "urgent.ece>0.05,agreement<0.9"` for
 * `assess` and `report`. One parser and one checker; each command only says
 * which questions and metrics exist and what their values are.
 */
import { QualityInputError } from "./answers.js";

/** A gate condition: `question.metric` (or a bare `metric`: every question) compared with a number. */
export interface Condition {
  /** Undefined: the metric of every question. */
  question?: string | undefined;
  metric: string;
  op: ">" | "<" | ">=" | "<=";
  value: number;
  text: string;
}

/** A condition that holds for one question: a breach. */
export interface Breach {
  condition: Condition;
  question: string;
  /** NaN when the figure could not be computed (a breach too: a gate fails closed). */
  actual: number;
}

/** What a gate checks against: each question's metrics (undefined: the metric does not exist for that question). */
export interface GateSubject {
  questions: { name: string; metrics: Record<string, number | undefined> }[];
  /** Names a metric may take, for the message when one is unknown. */
  known: (question: string) => string[];
}

/** Parses `--fail-if "urgent.ece>0.05,topic.macro_f1<0.8,agreement<0.9"`. */
export function parseConditions(text: string): Condition[] {
  return text
    .split(",")
    .map((part) => part.trim())
    .filter((part) => part !== "")
    .map((part) => {
      const m = /^(?:(.+)\.)?([a-z][a-z0-9_]*)\s*(>=|<=|>|<)\s*(-?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)$/i.exec(part);
      if (!m || !Number.isFinite(Number(m[4]))) {
        throw new QualityInputError(
          `--fail-if: cannot read "${part}"; write question.metric>number or metric>number (every question), e.g. urgent.ece>0.05,topic.macro_f1<0.8`,
        );
      }
      return { question: m[1], metric: m[2] as string, op: m[3] as Condition["op"], value: Number(m[4]), text: part };
    });
}

/** Every question and metric a condition names must exist: one line naming the first that does not. */
export function checkNames(subject: GateSubject, conditions: readonly Condition[]): void {
  const names = subject.questions.map((q) => q.name);
  for (const c of conditions) {
    const targets = c.question === undefined ? subject.questions : subject.questions.filter((q) => q.name === c.question);
    if (c.question !== undefined && targets.length === 0) {
      throw new QualityInputError(`--fail-if: no question "${c.question}" in "${c.text}"; the questions are ${names.join(", ")}`);
    }
    for (const q of targets) {
      if (!subject.known(q.name).includes(c.metric)) {
        throw new QualityInputError(`--fail-if: question ${q.name} has no metric "${c.metric}" (in "${c.text}"); it has ${subject.known(q.name).join(", ")}`);
      }
    }
  }
}

/** The breaches: conditions that hold, one per question they hold for. */
export function breaches(subject: GateSubject, conditions: readonly Condition[]): Breach[] {
  checkNames(subject, conditions);
  const out: Breach[] = [];
  for (const c of conditions) {
    for (const q of subject.questions) {
      if (c.question !== undefined && q.name !== c.question) continue;
      const actual = q.metrics[c.metric] ?? NaN;
      const holds = c.op === ">" ? actual > c.value : c.op === "<" ? actual < c.value : c.op === ">=" ? actual >= c.value : actual <= c.value;
      if (holds || Number.isNaN(actual)) out.push({ condition: c, question: q.name, actual });
    }
  }
  return out;
}

/** One line per breach, naming the question, the metric, its value and the limit. */
export function describeBreach(b: Breach, why?: string): string {
  const c = b.condition;
  const value = Number.isNaN(b.actual) ? `n/a${why ? ` (${why})` : ""}` : formatActual(b.actual);
  return `${b.question}.${c.metric} = ${value}, breaking ${c.text}`;
}

function formatActual(x: number): string {
  return Math.abs(x) >= 0.001 || x === 0 ? x.toFixed(4) : x.toPrecision(3);
}
