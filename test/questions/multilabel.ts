/**
 * A question type that lives in the test suite only: a multi-label question
 * (named options, any number of which may apply), answered with one
 * probability per option. It is the recipe of docs/architecture.md ("A
 * question type", a type with parts) followed as written: one object
 * implementing `PartsKind`, registered in process. Each option is a part, a
 * noul ("does this option apply?"), so everything a noul has (prompt,
 * readout, columns, calibration, review, gold, Label Studio, metrics) it has
 * per option, under the unit name `<question>.<option>`.
 */
import { Type, type Static } from "@sinclair/typebox";
import { registerKind } from "../../src/questions/index.js";
import { inline, inUnitInterval, type PartsKind } from "../../src/questions/kind.js";
import { noulAnswer, type NoulAnswer, type NoulQuestion } from "../../src/questions/noul.js";
import { instructions, MapOf, NullableContent, Probability } from "../../src/questions/wire.js";

export const MultiLabelQuestion = Type.Object(
  {
    type: Type.Literal("multilabel"),
    instructions,
    criteria: MapOf(NullableContent(), {
      title: "Criteria",
      description: "Option name -> what makes it apply; any number of options may apply.",
      minProperties: 1,
      maxProperties: 64,
    }),
  },
  { $id: "MultiLabelQuestion", title: "MultiLabelQuestion", additionalProperties: true },
);

export const MultiLabelAnswer = Type.Object(
  {
    type: Type.Literal("multilabel"),
    labels: Type.Array(Type.String(), { description: "The options whose probability is at least 0.5, in option order." }),
    probabilities: MapOf(Probability("Probability that this option applies.")),
  },
  { $id: "MultiLabelAnswer", title: "MultiLabelAnswer" },
);

export type MultiLabelQuestion = Static<typeof MultiLabelQuestion>;
export type MultiLabelAnswer = Static<typeof MultiLabelAnswer>;

const options = (q: MultiLabelQuestion) => Object.keys(q.criteria);

export const multilabel: PartsKind<MultiLabelQuestion, MultiLabelAnswer, NoulQuestion, NoulAnswer> = {
  type: "multilabel",
  question: MultiLabelQuestion,
  answer: MultiLabelAnswer,

  violations(where, question, answer) {
    const problems: string[] = [];
    const want = options(question);
    const got = Object.keys(answer.probabilities);
    if (got.join("\u0000") !== want.join("\u0000")) problems.push(`${where}: probabilities keys ${JSON.stringify(got)} differ from ${JSON.stringify(want)}`);
    for (const [option, p] of Object.entries(answer.probabilities)) {
      if (!inUnitInterval(p)) problems.push(`${where}: probability of ${JSON.stringify(option)} is ${p}, outside [0, 1]`);
    }
    const above = want.filter((o) => (answer.probabilities[o] ?? 0) >= 0.5);
    if (above.join("\u0000") !== answer.labels.join("\u0000"))
      problems.push(`${where}: labels ${JSON.stringify(answer.labels)} are not the options at or above 0.5`);
    return problems;
  },

  parts: {
    of: (question) =>
      options(question).map((option) => {
        const about = inline(question.instructions) || "Which of the options apply to the data?";
        const description = question.criteria[option];
        const part: NoulQuestion = { type: "noul", instructions: `${about} Does "${option}" apply?` };
        if (description !== null && description !== undefined) part.criteria = { true: description };
        return [option, part];
      }),
    join(question, answers) {
      const probabilities = Object.fromEntries(options(question).map((o, i) => [o, (answers[i] as NoulAnswer).noul]));
      return { type: "multilabel", labels: options(question).filter((o) => (probabilities[o] as number) >= 0.5), probabilities };
    },
    split: (answer) => Object.entries(answer.probabilities).map(([option, p]) => [option, noulAnswer(p)]),
  },
};

/** Registers the type in this process (again: nothing happens). */
export function registerMultiLabel(): void {
  registerKind(multilabel);
}
