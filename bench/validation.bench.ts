/** Cost of validating a request body relative to parsing its JSON, for a typical and a maximal body. */
import { validateRequest } from "../src/api/validate.js";
import { timeMs, type Benchmark } from "./harness.js";

function body(options: number, levels: number, questions: number): string {
  const qs: Record<string, unknown> = {};
  for (let q = 0; q < questions; q++) {
    qs[`choice${q}`] = {
      type: "choice",
      instructions: "Which team should handle this ticket?",
      criteria: Object.fromEntries(Array.from({ length: options }, (_, i) => [`team ${i}`, `Handles topic ${i}`])),
    };
    qs[`score${q}`] = { type: "score", instructions: "How urgent?", criteria: Array.from({ length: levels }, (_, i) => `level ${i}`) };
    qs[`noul${q}`] = { type: "noul", instructions: "Is a refund requested?", criteria: { true: "asks for money back", false: null } };
  }
  return JSON.stringify({ state: { ticket: "My order never arrived.".repeat(20), history: [1, 2, 3] }, model: "m", questions: qs });
}

const benchmark: Benchmark = {
  name: "validation",
  description: "validateRequest time / JSON.parse time of the same body",
  async run() {
    const typical = body(5, 5, 1);
    const maximal = body(255, 10, 16);
    const figures: Record<string, number> = {};
    const ratios = [];
    for (const [name, text] of [
      ["typical (3 questions)", typical],
      ["maximal (48 questions, 255 options)", maximal],
    ] as const) {
      const parse = await timeMs(() => JSON.parse(text), 2000);
      const validate = await timeMs(() => validateRequest(JSON.parse(text)), 2000);
      figures[`${name}: parse ms`] = parse;
      figures[`${name}: parse+validate ms`] = validate;
      ratios.push({ name: `${name} (parse+validate)/parse`, value: validate / parse });
    }
    return { figures, ratios };
  },
};
export default benchmark;
