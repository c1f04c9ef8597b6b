/**
 * Applying a calibration to a run's answers: each calibrated unit's answer
 * (a question's, or a part's of a question with parts) is recomputed from
 * its mapped distribution, and the raw one kept.
 * The runner does this when it writes its outputs from the journal, which
 * keeps the model's raw answers: a new calibration needs only a rerun, which
 * asks the model nothing.
 */
import type { Answer, Question } from "../api/schema.js";
import { joinUnits, kindOf, unitAnswers, unitsOf } from "../questions/index.js";
import { answerDistribution, answerFrom, applyMap, type QuestionCalibration } from "./maps.js";

/** The calibration a run applies: maps per unit (a question, or `<question>.<part>`); units without one pass unchanged. */
export type CalibrationMaps = Map<string, QuestionCalibration>;

/** Applies calibration maps: the calibrated answers (recomputed by the v1 rules) and the raw ones, by unit. */
export function calibrateAnswers(
  maps: CalibrationMaps,
  questions: Record<string, Question>,
  answers: Record<string, Answer>,
): { answers: Record<string, Answer>; raw: Record<string, number | Record<string, number>> } {
  const units = unitsOf(questions);
  const given = unitAnswers(answers);
  // Maps, not assignment into objects: a question named "__proto__" stays a question.
  const out = new Map(Object.entries(given));
  const raw = new Map<string, number | Record<string, number>>();
  for (const [name, map] of maps) {
    const q = units.get(name)?.question;
    const a = out.get(name);
    if (!q || !a) continue;
    const p = answerDistribution(q, a);
    out.set(name, answerFrom(q, applyMap(map, p)));
    raw.set(name, kindOf(a).raw(a));
  }
  const calibrated = Object.fromEntries(out);
  return { answers: given === answers ? calibrated : { ...answers, ...joinUnits(questions, calibrated) }, raw: Object.fromEntries(raw) };
}
