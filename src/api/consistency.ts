/**
 * The consistency rules of spec section 2.7: what must hold between a request
 * and its response beyond each one's shape. Used to test our own answers and
 * to refuse a remote endpoint's answers that break them. Each question type
 * holds its own rules (`src/questions`).
 */
import { findKind } from "../questions/index.js";
import type { Answer, EvaluatorRequest, EvaluatorResponse, Question } from "./schema.js";

/** Every way `answer` breaks rules 1-5 for `question`; empty when consistent. */
export function answerViolations(name: string, question: Question, answer: Answer): string[] {
  const where = `answers.${name}`;
  if (answer.type !== question.type) return [`${where}: type ${answer.type} answers a ${question.type} question`];
  const kind = findKind(question);
  return kind ? kind.violations(where, question, answer) : [`${where}: no question type ${question.type}`];
}

/** Every way `response` breaks the consistency rules for `request`; empty when consistent. */
export function responseViolations(request: EvaluatorRequest, response: EvaluatorResponse): string[] {
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
