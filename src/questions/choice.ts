/** The choice question: one option of up to 255, answered with a probability per option. */
import { Type, type Static } from "@sinclair/typebox";
import { argmax, assertNoNaN, checkLengths, clamp01 } from "./distribution.js";
import { confidenceViolations, inline, isObject, labelFields, labelsFromColumns, probabilityViolations, type DistributionKind } from "./kind.js";
import { Confidence, instructions, MapOf, NullableContent, Probability } from "./wire.js";

/** The most options a choice may have (spec section 8). */
export const MAX_CHOICE_OPTIONS = 255;

export const ChoiceQuestion = Type.Object(
  {
    type: Type.Literal("choice"),
    instructions,
    criteria: MapOf(NullableContent(), {
      title: "Criteria",
      description: "Option name -> description; a null description means the option is read by its name alone.",
      minProperties: 1,
      maxProperties: MAX_CHOICE_OPTIONS,
    }),
  },
  { $id: "ChoiceQuestion", title: "ChoiceQuestion", additionalProperties: true },
);

export const ChoiceAnswer = Type.Object(
  {
    type: Type.Literal("choice"),
    choice: Type.String({ description: "The option with the highest probability." }),
    probabilities: MapOf(Probability("Probability of this option.")),
    confidence: Confidence(),
  },
  { $id: "ChoiceAnswer", title: "ChoiceAnswer" },
);

export type ChoiceQuestion = Static<typeof ChoiceQuestion>;
export type ChoiceAnswer = Static<typeof ChoiceAnswer>;

/** Letters for up to 26 options; beyond that, numbers from 1. */
export function choiceLabels(count: number): string[] {
  if (count <= 26) return Array.from({ length: count }, (_, i) => String.fromCharCode(65 + i));
  return Array.from({ length: count }, (_, i) => String(i + 1));
}

/** v1 choice confidence: `(n * p_max - 1) / (n - 1)` clipped to [0, 1]; 1 for one option. */
export function choiceConfidence(probabilities: readonly number[]): number {
  assertNoNaN(probabilities, "probabilities");
  const n = probabilities.length;
  if (n <= 1) return 1;
  const pMax = probabilities[argmax(probabilities)] as number;
  return clamp01((n * pMax - 1) / (n - 1));
}

/** A choice answer: `options` in the question's order, `probabilities` aligned with them. */
export function choiceAnswer(options: readonly string[], probabilities: readonly number[]): ChoiceAnswer {
  checkLengths(options.length, probabilities);
  return {
    type: "choice",
    choice: options[argmax(probabilities)] as string,
    // fromEntries defines own properties, so an option named "__proto__" stays an option.
    probabilities: Object.fromEntries(options.map((name, i) => [name, clamp01(probabilities[i] as number)])),
    confidence: choiceConfidence(probabilities),
  };
}

export const choice: DistributionKind<ChoiceQuestion, ChoiceAnswer> = {
  type: "choice",
  question: ChoiceQuestion,
  answer: ChoiceAnswer,

  violations(where, question, answer) {
    const problems = confidenceViolations(where, answer.confidence);
    if (!Object.hasOwn(question.criteria, answer.choice)) {
      problems.push(`${where}: choice ${JSON.stringify(answer.choice)} is not an option`);
    }
    problems.push(...probabilityViolations(where, answer.probabilities, Object.keys(question.criteria)));
    return problems;
  },

  replyHint: "the letter or number of one option",
  defaultInstructions: "Which option fits the data best?",
  prompt(question) {
    const options = Object.keys(question.criteria);
    const labels = choiceLabels(options.length);
    const lines = ["Options:"];
    options.forEach((name, i) => {
      const description = inline(question.criteria[name]);
      lines.push(`${labels[i]}) ${name}${description ? `: ${description}` : ""}`);
    });
    const range = labels.length === 1 ? labels[0] : `${labels[0]}-${labels[labels.length - 1]}`;
    return { lines, labels, ask: `Label (${range})?` };
  },
  readout: (question, p) => choiceAnswer(Object.keys(question.criteria), p),

  labels: (question) => Object.keys(question.criteria),
  distribution: (question, answer) => Object.keys(question.criteria).map((o) => answer.probabilities[o] ?? 0),
  answerFrom: (question, p) => choiceAnswer(Object.keys(question.criteria), p),
  raw: (answer) => ({ ...answer.probabilities }),
  fromRaw: (raw) => ({ probabilities: raw }),

  columns: [
    { suffix: "choice", kind: "string", value: (a) => a.choice },
    { suffix: "confidence", kind: "double", value: (a) => a.confidence },
  ],
  fields: labelFields,
  toDistribution: (values) => values,

  discoverJson: (answer) => (isObject(answer["probabilities"]) ? { labels: Object.keys(answer["probabilities"]) } : undefined),
  discoverColumns: (name, columns) => ({ labels: labelsFromColumns(name, columns) }),

  goldClass(info, value) {
    if (typeof value !== "string") return `${JSON.stringify(value)} is not an option name; options: ${info.labels.join(", ")}`;
    const at = info.labels.indexOf(value);
    if (at >= 0) return at;
    const folded = info.labels.findIndex((l) => l.toLowerCase() === value.trim().toLowerCase());
    if (folded >= 0) return folded;
    return `${JSON.stringify(value)} is not an option of ${info.name}; options: ${info.labels.join(", ")}`;
  },
  goldText: (info, y) => info.labels[y] as string,
  displayLabels: (info) => info.labels,
  hint: (question, label) => question.criteria[label],
};
