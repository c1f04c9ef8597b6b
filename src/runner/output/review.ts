/**
 * Review routing: rows whose answers are not confident enough go to the
 * review file, plus a seeded audit sample of the rest. It acts when the
 * outputs are written from the journal, so a new threshold needs only a
 * rerun, and a resumed run can never write a review row twice.
 */
import type { Answer, Question } from "../../api/schema.js";
import { answerDistribution } from "../../calibration/maps.js";
import { unitAnswers, unitsOf } from "../../questions/index.js";
import type { ReviewVerdict } from "../../records/review.js";
import { unitHash } from "../input/requests.js";

/** Review routing: per-unit thresholds on the top label's probability, and the audit sample. */
export interface ReviewPolicy {
  /** Unit (a question, or a part `<question>.<part>`) -> threshold; a row goes to review when any gated answer's top-label probability is below it. */
  thresholds: Record<string, number>;
  /** Share of accepted rows sampled for audit, 0..1. */
  auditRate: number;
  seed: number;
}

/** The top label's probability of an answer: for a noul max(p, 1 - p), else the largest option or level probability. */
export function topLabelProbability(question: Question, answer: Answer): number {
  return Math.max(...answerDistribution(question, answer));
}

/**
 * The audit sample's key for a record: its id when the job names an id field,
 * else its source and line. Never its place in the run, so the same records
 * in another order or another shard split are sampled alike.
 */
export function auditKey(job: { id?: string | undefined }, record: { source: string; id: string }): string {
  return job.id === undefined ? `${record.source}:${record.id}` : record.id;
}

/** Why a row goes to review (each unit whose answer is below its threshold), and whether it is sampled for audit. */
export function reviewVerdict(policy: ReviewPolicy, questions: Record<string, Question>, answers: Record<string, Answer>, key: string): ReviewVerdict {
  const reasons: ReviewVerdict["reasons"] = [];
  const units = unitsOf(questions);
  const given = unitAnswers(answers);
  for (const [name, threshold] of Object.entries(policy.thresholds)) {
    const q = units.get(name)?.question;
    const a = given[name];
    if (!q || !a) continue;
    const confidence = topLabelProbability(q, a);
    if (confidence < threshold) reasons.push({ question: name, confidence, threshold });
  }
  return { reasons, audit: reasons.length === 0 && policy.auditRate > 0 && unitHash(`${policy.seed}:${key}`) < policy.auditRate };
}

/**
 * Review thresholds per unit from one number (every unit) or a map by
 * question or part: a question with parts passes its number to each part
 * (a part's own number wins).
 */
export function reviewThresholds(questions: Record<string, Question>, below: number | Record<string, number>): Record<string, number> {
  const units = [...unitsOf(questions)];
  if (typeof below === "number") return Object.fromEntries(units.map(([name]) => [name, below]));
  const own = (key: string) => (Object.hasOwn(below, key) ? below[key] : undefined);
  return Object.fromEntries(
    units.flatMap(([name, unit]) => {
      const threshold = own(name) ?? (unit.of === undefined ? undefined : own(unit.of));
      return threshold === undefined ? [] : [[name, threshold]];
    }),
  );
}
