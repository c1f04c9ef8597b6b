/**
 * What a run does to its answers on the way out: calibration (a file fitted
 * by `typed-eval calibrate`, or batch calibration from the run's own answers)
 * and review routing (rows whose answers are not confident enough, plus a
 * seeded audit sample of the rest). Both act when the outputs are written
 * from the journal, which keeps the model's raw answers: a new calibration or
 * threshold needs only a rerun, which asks the model nothing, and a resumed
 * run can never write a review row twice.
 */
import type { Answer, Question } from "../../api/schema.js";
import type { ReviewVerdict } from "../../records/review.js";
import { InvocationError } from "../../api/errors.js";
import {
  answerDistribution,
  answerFrom,
  applyMap,
  batchFlattens,
  priorMap,
  questionLabels,
  type Method,
  type QuestionCalibration,
} from "../../evaluator/calibration.js";
import { kindOf } from "../../questions/index.js";
import { unitHash } from "../input/requests.js";

/** Review routing: per-question thresholds on the top label's probability, and the audit sample. */
export interface ReviewPolicy {
  /** Question -> threshold; a row goes to review when any gated answer's top-label probability is below it. */
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

export function reviewVerdict(policy: ReviewPolicy, questions: Record<string, Question>, answers: Record<string, Answer>, key: string): ReviewVerdict {
  const reasons: ReviewVerdict["reasons"] = [];
  for (const [name, threshold] of Object.entries(policy.thresholds)) {
    const q = questions[name];
    const a = answers[name];
    if (!q || !a) continue;
    const confidence = topLabelProbability(q, a);
    if (confidence < threshold) reasons.push({ question: name, confidence, threshold });
  }
  return { reasons, audit: reasons.length === 0 && policy.auditRate > 0 && unitHash(`${policy.seed}:${key}`) < policy.auditRate };
}

/** The calibration a run applies: maps per question (questions without one pass unchanged). */
export type CalibrationMaps = Map<string, QuestionCalibration>;

/** Applies calibration maps: the calibrated answers (recomputed by the v1 rules) and the raw distributions. */
export function calibrateAnswers(
  maps: CalibrationMaps,
  questions: Record<string, Question>,
  answers: Record<string, Answer>,
): { answers: Record<string, Answer>; raw: Record<string, number | Record<string, number>> } {
  const out: Record<string, Answer> = { ...answers };
  const raw: Record<string, number | Record<string, number>> = {};
  for (const [name, map] of maps) {
    const q = questions[name];
    const a = answers[name];
    if (!q || !a) continue;
    const p = answerDistribution(q, a);
    out[name] = answerFrom(q, applyMap(map, p));
    raw[name] = kindOf(a).raw(a);
  }
  return { answers: out, raw };
}

/** Accumulates mean raw distributions per question, for batch calibration. */
export class PriorEstimate {
  private readonly sums = new Map<string, number[]>();
  private n = 0;
  constructor(private readonly questions: Record<string, Question>) {}
  add(answers: Record<string, Answer>): void {
    this.n++;
    for (const [name, q] of Object.entries(this.questions)) {
      const a = answers[name];
      if (!a) continue;
      const p = answerDistribution(q, a);
      const sum = this.sums.get(name) ?? new Array<number>(p.length).fill(0);
      p.forEach((v, i) => (sum[i]! += v));
      this.sums.set(name, sum);
    }
  }
  /** Maps that divide out each question's label prior: batch calibration, or contextual when the answers were to content-free states. */
  maps(method: Extract<Method, "batch" | "contextual"> = "batch"): CalibrationMaps {
    const out: CalibrationMaps = new Map();
    if (this.n === 0) return out;
    for (const [name, sum] of this.sums) {
      const q = this.questions[name] as Question;
      out.set(
        name,
        priorMap(
          { type: q.type, labels: questionLabels(q) },
          sum.map((s) => s / this.n),
          method,
        ),
      );
    }
    return out;
  }
  priors(): Record<string, number[]> {
    return Object.fromEntries([...this.sums].map(([name, sum]) => [name, sum.map((s) => s / Math.max(this.n, 1))]));
  }
}

/** Batch calibration would flatten a skewed question; nothing was written. */
export class BatchFlattensError extends InvocationError {
  override name = "BatchFlattensError";
}

/**
 * Refuses batch calibration (one line, exit 2, before any output is written)
 * where it would move a question's label shares further than BATCH_MAX_MOVE:
 * that may be a real skew flattened. `answers` yields the raw answers again.
 */
export async function refuseFlattening(
  questions: Record<string, Question>,
  maps: CalibrationMaps,
  before: PriorEstimate,
  answers: AsyncIterable<Record<string, Answer>>,
): Promise<void> {
  const after = new PriorEstimate(questions);
  for await (const a of answers) after.add(calibrateAnswers(maps, questions, a).answers);
  const shares = after.priors();
  const flat = Object.entries(before.priors()).flatMap(([name, p]) => batchFlattens(name, p, shares[name] ?? p) ?? []);
  if (flat.length > 0)
    throw new BatchFlattensError(`${flat.join("; ")}; no output written: rerun with --force-calibration to apply it anyway (the model is not asked again)`);
}

/** Review thresholds per question from one number (every question) or a map. */
export function reviewThresholds(questions: Record<string, Question>, below: number | Record<string, number>): Record<string, number> {
  return typeof below === "number" ? Object.fromEntries(Object.keys(questions).map((name) => [name, below])) : { ...below };
}
