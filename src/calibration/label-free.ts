/**
 * The calibrations that need no gold labels: batch calibration divides out
 * the label prior of the run's own answers, contextual calibration that of
 * answers to content-free states (Zhao et al. 2021). Both are a prior map
 * (maps.ts); batch calibration is refused where it would flatten a real skew.
 */
import { InvocationError } from "../api/errors.js";
import type { Answer, Question } from "../api/schema.js";
import { calibrateAnswers, type CalibrationMaps } from "./apply.js";
import { CalibrationError, type FittedQuestion } from "./file.js";
import { unitAnswers, unitsOf } from "../questions/index.js";
import { answerDistribution, batchFlattens, meanDistribution, movement, priorMap, questionLabels, type Method, type QuestionCalibration } from "./maps.js";

/** Accumulates mean raw distributions per unit (a question, or a part of one), for batch calibration. */
export class PriorEstimate {
  private readonly sums = new Map<string, number[]>();
  private n = 0;
  private readonly units: Map<string, Question>;
  constructor(questions: Record<string, Question>) {
    this.units = new Map([...unitsOf(questions)].map(([name, unit]) => [name, unit.question]));
  }
  add(answers: Record<string, Answer>): void {
    this.n++;
    const given = unitAnswers(answers);
    for (const [name, q] of this.units) {
      const a = given[name];
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
      const q = this.units.get(name) as Question;
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

/** Batch calibration: the label prior is the mean answer of the rows themselves (no gold, no extra calls). */
export function batchQuestion(info: Pick<QuestionCalibration, "type" | "labels">, p: Float64Array, k: number): FittedQuestion {
  const map = priorMap(info, meanDistribution(p, k), "batch");
  return { ...map, rows: p.length / k, ...movement(p, k, map) };
}

/** The content-free states of contextual calibration (Zhao et al. 2021 use "N/A", "" and "[MASK]"). */
export const CONTENT_FREE_STATES = ["N/A", "", "[MASK]"];

/**
 * Contextual calibration: asks every question about content-free states
 * through the evaluator the run uses, and takes the mean answer as the label
 * bias to divide out. `ask` answers one request (the caller's evaluator).
 */
export async function contextualMaps(
  questions: Record<string, Question>,
  ask: (state: string) => Promise<Record<string, Answer>>,
): Promise<{ maps: Record<string, FittedQuestion>; priors: Record<string, number[]> }> {
  const prior = new PriorEstimate(questions);
  for (const state of CONTENT_FREE_STATES) {
    const answers = await ask(state);
    const missing = Object.keys(questions).find((name) => !answers[name]);
    if (missing !== undefined) throw new CalibrationError(`the content-free request got no answer to ${missing}`);
    prior.add(answers);
  }
  return { maps: Object.fromEntries(prior.maps("contextual")), priors: prior.priors() };
}
