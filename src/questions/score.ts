/** The score question: one of up to 10 ordered levels, answered with a probability per level and the expected level. */
import { isDeepStrictEqual } from "node:util";
import { Type, type Static } from "@sinclair/typebox";
import { argmax, assertNoNaN, checkLengths, clamp01 } from "./distribution.js";
import {
  confidenceViolations,
  inline,
  isObject,
  labelFields,
  labelsFromColumns,
  probabilityViolations,
  type LabelInfo,
  type DistributionKind,
} from "./kind.js";
import { Confidence, Content, instructions, MapOf, Probability } from "./wire.js";

/** The most levels a score may have (spec section 8): labels are the digits 0-9. */
export const MAX_SCORE_LEVELS = 10;

export const ScoreQuestion = Type.Object(
  {
    type: Type.Literal("score"),
    instructions,
    criteria: Type.Array(Content(), {
      title: "Criteria",
      description: "Ordered level descriptions; a level's zero-based position is its score.",
      minItems: 1,
      maxItems: MAX_SCORE_LEVELS,
    }),
  },
  { $id: "ScoreQuestion", title: "ScoreQuestion", additionalProperties: true },
);

export const ScoreAnswer = Type.Object(
  {
    type: Type.Literal("score"),
    score: Type.Number({ description: "Probability-weighted average of the level numbers." }),
    legend: MapOf(Content()),
    probabilities: MapOf(Probability("Probability of this level.")),
    confidence: Confidence(),
  },
  { $id: "ScoreAnswer", title: "ScoreAnswer" },
);

export type ScoreQuestion = Static<typeof ScoreQuestion>;
export type ScoreAnswer = Static<typeof ScoreAnswer>;

/**
 * v1 score confidence: `1 - sum_i p_i |i - m| / mad_uniform`, m the most
 * likely level and mad_uniform the mean absolute deviation of a uniform
 * distribution from its centre, clipped to [0, 1]; 1 for one level.
 */
export function scoreConfidence(probabilities: readonly number[]): number {
  assertNoNaN(probabilities, "probabilities");
  const k = probabilities.length;
  if (k <= 1) return 1;
  const m = argmax(probabilities);
  const centre = (k - 1) / 2;
  let madUniform = 0;
  let spread = 0;
  for (let i = 0; i < k; i++) {
    madUniform += Math.abs(i - centre) / k;
    spread += (probabilities[i] as number) * Math.abs(i - m);
  }
  return clamp01(1 - spread / madUniform);
}

/** A score answer: `levels` are the question's criteria, `probabilities` aligned with them. */
export function scoreAnswer(levels: readonly Content[], probabilities: readonly number[]): ScoreAnswer {
  checkLengths(levels.length, probabilities);
  let score = 0;
  probabilities.forEach((p, k) => (score += k * p));
  return {
    type: "score",
    score: Math.min(Math.max(score, 0), levels.length - 1),
    legend: Object.fromEntries(levels.map((level, k) => [String(k), level])),
    probabilities: Object.fromEntries(probabilities.map((p, k) => [String(k), clamp01(p)])),
    confidence: scoreConfidence(probabilities),
  };
}

/** The most likely level's label: its text when the level is text, else its index. */
function levelLabel(a: ScoreAnswer): string {
  let best = "0";
  for (const [k, p] of Object.entries(a.probabilities)) if (p > (a.probabilities[best] ?? -1)) best = k;
  const legend = a.legend[best];
  return typeof legend === "string" ? legend : best;
}

const levelKeys = (question: ScoreQuestion) => question.criteria.map((_, k) => String(k));

export const score: DistributionKind<ScoreQuestion, ScoreAnswer> = {
  type: "score",
  question: ScoreQuestion,
  answer: ScoreAnswer,
  ordered: true,

  violations(where, question, answer) {
    const problems = confidenceViolations(where, answer.confidence);
    const levels = levelKeys(question);
    problems.push(...probabilityViolations(where, answer.probabilities, levels));
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
    return problems;
  },

  replyHint: "the level number for a rating",
  defaultInstructions: "Which level fits the data best?",
  prompt(question) {
    const labels = levelKeys(question);
    const lines = ["Levels:"];
    question.criteria.forEach((level, k) => lines.push(`${k}: ${inline(level)}`));
    return { lines, labels, ask: `Level (0-${labels.length - 1})?` };
  },
  readout: (question, p) => scoreAnswer(question.criteria, p),

  labels: levelKeys,
  levels: (question) => question.criteria,
  distribution: (question, answer) => question.criteria.map((_, k) => answer.probabilities[String(k)] ?? 0),
  answerFrom: (question, p) => scoreAnswer(question.criteria, p),
  raw: (answer) => ({ ...answer.probabilities }),
  fromRaw: (raw) => ({ probabilities: raw }),

  columns: [
    { suffix: "score", kind: "double", value: (a) => a.score },
    { suffix: "level", kind: "string", value: levelLabel },
    { suffix: "confidence", kind: "double", value: (a) => a.confidence },
  ],
  fields: labelFields,
  toDistribution: (values) => values,

  discoverJson(answer) {
    if (!isObject(answer["probabilities"])) return undefined;
    const k = Object.keys(answer["probabilities"]).length;
    const legend = isObject(answer["legend"]) ? answer["legend"] : {};
    return {
      labels: Array.from({ length: k }, (_, i) => String(i)),
      levels: Array.from({ length: k }, (_, i) => (legend[String(i)] ?? String(i)) as Content),
    };
  },
  // A score's level texts are not in the header: they are learned from its `.level` column as rows come (see learn).
  discoverColumns(name, columns) {
    const labels = labelsFromColumns(name, columns);
    return { labels, levels: [...labels] };
  },
  /**
   * CSV and Parquet answers name a score's most likely level by its text in
   * `<q>.level` (its index when the level is not text): each row teaches the
   * text of its top level, so the report names levels as it does for JSONL,
   * whose rows carry the whole legend. `info.levels` is changed in place, so
   * whoever holds the questions sees the texts as they arrive.
   */
  learn(info, dist, get) {
    const level = get(`${info.name}.level`);
    if (typeof level !== "string" || level === "" || !info.levels) return;
    let best = 0;
    for (let i = 1; i < dist.length; i++) if ((dist[i] as number) > (dist[best] as number)) best = i;
    if (info.levels[best] === info.labels[best] && level !== info.labels[best]) info.levels[best] = level;
  },

  goldClass(info: LabelInfo, value) {
    const k = info.labels.length;
    const text = typeof value === "string" ? value.trim() : value;
    if (typeof text === "number" || (typeof text === "string" && /^\d+$/.test(text))) {
      const level = Number(text);
      if (Number.isInteger(level) && level >= 0 && level < k) return level;
      return `level ${JSON.stringify(value)} is outside 0..${k - 1}`;
    }
    if (typeof text === "string" && info.levels) {
      const at = info.levels.findIndex((l) => typeof l === "string" && l.trim().toLowerCase() === text.toLowerCase());
      if (at >= 0) return at;
    }
    return `${JSON.stringify(value)} is not a level of ${info.name}; write its index 0..${k - 1}${info.levels ? " or its text" : ""}`;
  },
  goldText: (info, y) => info.labels[y] as string,
  displayLabels: (info) =>
    info.levels
      ? info.labels.map((l, i) => (typeof info.levels?.[i] === "string" && info.levels[i] !== l ? `${l}: ${info.levels[i] as string}` : l))
      : info.labels,
  value: {
    of: (p) => p.reduce((e, v, i) => e + i * v, 0),
    top: (info) => info.labels.length - 1,
    title: "expected score",
    axis: "expected score",
    psiBasis: (info, bins) => `expected level in ${bins} equal bins over 0..${info.labels.length - 1}`,
  },
  hint: () => undefined,
};
