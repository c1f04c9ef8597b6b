/**
 * Applying a calibration to a run's answers: each calibrated question's
 * answer is recomputed from its mapped distribution, and the raw one kept.
 * The runner does this when it writes its outputs from the journal, which
 * keeps the model's raw answers: a new calibration needs only a rerun, which
 * asks the model nothing.
 */
import type { Answer, Question } from "../api/schema.js";
import { kindOf } from "../questions/index.js";
import { answerDistribution, answerFrom, applyMap, type QuestionCalibration } from "./maps.js";

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
