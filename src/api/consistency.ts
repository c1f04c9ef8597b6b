/**
 * The consistency rules of spec section 2.7: what must hold between a request
 * and its response beyond each one's shape. Used to test our own answers and
 * to refuse a remote endpoint's answers that break them.
 */
import { isDeepStrictEqual } from "node:util";
import type { Answer, Question, SystemOneRequest, SystemOneResponse } from "./schema.js";

/** How far a probability map's sum may stray from 1 ("approximately 1"). */
export const SUM_TOLERANCE = 1e-6;

function inUnitInterval(x: number): boolean {
  return Number.isFinite(x) && x >= 0 && x <= 1;
}

function checkProbabilities(where: string, probabilities: Record<string, number>, keys: string[]): string[] {
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

/** Every way `answer` breaks rules 1-5 for `question`; empty when consistent. */
export function answerViolations(name: string, question: Question, answer: Answer): string[] {
  const where = `answers.${name}`;
  if (answer.type !== question.type) return [`${where}: type ${answer.type} answers a ${question.type} question`];
  const problems: string[] = [];
  if (answer.type === "noul") {
    if (!inUnitInterval(answer.noul)) problems.push(`${where}: noul ${answer.noul} outside [0, 1]`);
    if ("confidence" in answer) problems.push(`${where}: a noul answer has no confidence`);
    return problems;
  }
  if (!inUnitInterval(answer.confidence)) problems.push(`${where}: confidence ${answer.confidence} outside [0, 1]`);
  if (answer.type === "choice" && question.type === "choice") {
    const options = Object.keys(question.criteria);
    if (!Object.hasOwn(question.criteria, answer.choice)) {
      problems.push(`${where}: choice ${JSON.stringify(answer.choice)} is not an option`);
    }
    problems.push(...checkProbabilities(where, answer.probabilities, options));
  }
  if (answer.type === "score" && question.type === "score") {
    const levels = question.criteria.map((_, k) => String(k));
    problems.push(...checkProbabilities(where, answer.probabilities, levels));
    const legendKeys = Object.keys(answer.legend).sort();
    if (!isDeepStrictEqual(legendKeys, [...levels].sort())) {
      problems.push(`${where}: legend keys ${JSON.stringify(legendKeys)} are not the levels 0..${levels.length - 1}`);
    } else {
      question.criteria.forEach((level, k) => {
        if (!isDeepStrictEqual(answer.legend[String(k)], level)) problems.push(`${where}: legend[${k}] differs from criteria[${k}]`);
      });
    }
    const top = question.criteria.length - 1;
    if (!(answer.score >= 0 && answer.score <= top)) problems.push(`${where}: score ${answer.score} outside [0, ${top}]`);
  }
  return problems;
}

/** Every way `response` breaks the consistency rules for `request`; empty when consistent. */
export function responseViolations(request: SystemOneRequest, response: SystemOneResponse): string[] {
  const problems: string[] = [];
  for (const name of Object.keys(response.answers)) {
    if (!Object.hasOwn(request.questions, name)) problems.push(`answers.${name}: no question of that name`);
  }
  for (const [name, question] of Object.entries(request.questions)) {
    const answer = Object.hasOwn(response.answers, name) ? response.answers[name] : undefined;
    if (!answer) problems.push(`answers.${name}: missing`);
    else problems.push(...answerViolations(name, question, answer));
  }
  return problems;
}
