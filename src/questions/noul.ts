/** The noul question: yes or no, answered with the probability of yes. */
import { Type, type Static } from "@sinclair/typebox";
import { assertNoNaN, clamp01 } from "./distribution.js";
import { inline, inUnitInterval, type DistributionKind } from "./kind.js";
import { instructions, NullableContent, Probability } from "./wire.js";

export const NoulCriteria = Type.Object(
  {
    true: Type.Optional(NullableContent({ description: "What counts as yes (answer near 1)." })),
    false: Type.Optional(NullableContent({ description: "What counts as no (answer near 0)." })),
  },
  { $id: "NoulCriteria", title: "NoulCriteria", additionalProperties: true },
);

export const NoulQuestion = Type.Object(
  {
    type: Type.Literal("noul"),
    instructions,
    criteria: Type.Optional(Type.Union([NoulCriteria, Type.Null()])),
  },
  { $id: "NoulQuestion", title: "NoulQuestion", additionalProperties: true },
);

export const NoulAnswer = Type.Object(
  {
    type: Type.Literal("noul"),
    noul: Probability("Probability of yes."),
  },
  { $id: "NoulAnswer", title: "NoulAnswer" },
);

export type NoulQuestion = Static<typeof NoulQuestion>;
export type NoulAnswer = Static<typeof NoulAnswer>;

/** The labels the model answers with, in prompt order (yes first). */
export const NOUL_LABELS = ["Yes", "No"] as const;

/** A noul answer from the probability of yes. */
export function noulAnswer(pYes: number): NoulAnswer {
  assertNoNaN([pYes], "probability of yes");
  return { type: "noul", noul: clamp01(pYes) };
}

const YES = new Set(["true", "yes", "1", "y", "t"]);
const NO = new Set(["false", "no", "0", "n", "f"]);

export const noul: DistributionKind<NoulQuestion, NoulAnswer> = {
  type: "noul",
  question: NoulQuestion,
  answer: NoulAnswer,

  violations(where, _question, answer) {
    const problems: string[] = [];
    if (!inUnitInterval(answer.noul)) problems.push(`${where}: noul ${answer.noul} outside [0, 1]`);
    if ("confidence" in answer) problems.push(`${where}: a noul answer has no confidence`);
    return problems;
  },

  replyHint: "Yes or No",
  defaultInstructions: "Is the following true of the data?",
  prompt(question) {
    const lines: string[] = [];
    const yes = inline(question.criteria?.true);
    const no = inline(question.criteria?.false);
    if (yes) lines.push(`Yes means: ${yes}`);
    if (no) lines.push(`No means: ${no}`);
    return { lines, labels: [...NOUL_LABELS], ask: "Yes or No?" };
  },
  readout: (_question, p) => noulAnswer(p[0] as number),

  labels: () => ["false", "true"],
  distribution: (_question, answer) => [1 - answer.noul, answer.noul],
  answerFrom: (_question, p) => noulAnswer(p[1] as number),
  raw: (answer) => answer.noul,
  fromRaw: (raw) => ({ noul: raw }),

  columns: [{ suffix: "noul", kind: "double", value: (a) => a.noul }],
  fields: () => [{ column: "noul", pick: (a) => a["noul"], what: "" }],
  toDistribution: ([p]) => [1 - (p as number), p as number],

  discoverJson: () => ({ labels: ["false", "true"] }),
  discoverColumns: () => ({ labels: ["false", "true"] }),

  goldClass(_info, value) {
    const s = String(value).trim().toLowerCase();
    if (YES.has(s)) return 1;
    if (NO.has(s)) return 0;
    return `${JSON.stringify(value)} is not a noul label; write true/false, yes/no or 1/0`;
  },
  goldText: (_info, y) => (y === 1 ? "yes" : "no"),
  displayLabels: () => ["no", "yes"],
  value: {
    of: (p) => p[1] as number,
    top: () => 1,
    title: "p(yes)",
    axis: "probability of yes",
    psiBasis: (_info, bins) => `p(yes) in ${bins} equal bins`,
  },
  hint: (question, label) => question.criteria?.[label as "true" | "false"],
};
