/** Valid, consistent answers to any request, for upstream stand-ins in tests and benchmarks. */
import type { Answer, SystemOneRequest } from "../../src/api/schema.js";
import type { SpecQuestion } from "../../src/questions/index.js";

/** `noul` is the probability every yes/no answer gets, so a stand-in can make each record's answers its own. */
export function plausibleAnswers(questions: SystemOneRequest["questions"], noul = 0.25): Record<string, Answer> {
  const answers: Record<string, Answer> = {};
  for (const [name, q] of Object.entries(questions) as [string, SpecQuestion][]) {
    if (q.type === "noul") answers[name] = { type: "noul", noul };
    else if (q.type === "choice") {
      const options = Object.keys(q.criteria);
      answers[name] = { type: "choice", choice: options[0]!, probabilities: Object.fromEntries(options.map((o) => [o, 1 / options.length])), confidence: 0 };
    } else {
      answers[name] = {
        type: "score",
        score: 0,
        legend: Object.fromEntries(q.criteria.map((c, k) => [String(k), c])),
        probabilities: Object.fromEntries(q.criteria.map((_, k) => [String(k), k === 0 ? 1 : 0])),
        confidence: 1,
      };
    }
  }
  return answers;
}
