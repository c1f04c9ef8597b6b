/**
 * The v1 wire contract, written once. These TypeBox schemas are JSON Schema
 * objects: `Static<>` gives the TypeScript types, `validate.ts` walks them to
 * produce pydantic-shaped 422 details, and `openapi.ts` hoists every schema
 * carrying an `$id` into `components.schemas`.
 */
import { Type, type Static, type TSchema, type SchemaOptions } from "@sinclair/typebox";

/** Limits of spec section 8 that the schema itself enforces. */
export const MAX_CHOICE_OPTIONS = 255;
export const MAX_SCORE_LEVELS = 10;

/** A JSON object with any properties (`dict[str, Any]`). */
const AnyObject = Type.Unsafe<{ [key: string]: unknown }>({ type: "object", additionalProperties: true });
/** A JSON array of anything (`list[Any]`). */
const AnyArray = Type.Unsafe<unknown[]>({ type: "array", items: {} });

/** Text or structured content: string, object or array. */
const Content = (options: SchemaOptions = {}) => Type.Union([Type.String(), AnyObject, AnyArray], options);
/** Content or null. */
const NullableContent = (options: SchemaOptions = {}) => Type.Union([Type.String(), AnyObject, AnyArray, Type.Null()], options);

/** A string-keyed map whose values follow `value` (JSON Schema `additionalProperties`). */
function MapOf<T extends TSchema>(value: T, options: SchemaOptions = {}) {
  return Type.Unsafe<{ [key: string]: Static<T> }>({ ...options, type: "object", additionalProperties: value });
}

const instructions = Type.Optional(NullableContent({ title: "Instructions", description: "What the model should decide, rate, or answer yes/no about." }));

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

export const Question = Type.Union([NoulQuestion, ChoiceQuestion, ScoreQuestion], {
  $id: "Question",
  title: "Question",
  discriminator: {
    propertyName: "type",
    mapping: {
      noul: "#/components/schemas/NoulQuestion",
      choice: "#/components/schemas/ChoiceQuestion",
      score: "#/components/schemas/ScoreQuestion",
    },
  },
});

export const SystemOneRequest = Type.Object(
  {
    state: Content({ title: "State", description: "Content that all questions refer to." }),
    model: Type.String({ title: "Model", description: "Model name or alias, or a versioned model id." }),
    questions: MapOf(Question, { title: "Questions", description: "Caller-chosen name -> question.", minProperties: 1 }),
  },
  { $id: "SystemOneRequest", title: "SystemOneRequest", additionalProperties: true },
);

const Probability = (description: string) => Type.Number({ minimum: 0, maximum: 1, description });

export const NoulAnswer = Type.Object(
  {
    type: Type.Literal("noul"),
    noul: Probability("Probability of yes."),
  },
  { $id: "NoulAnswer", title: "NoulAnswer" },
);

export const ChoiceAnswer = Type.Object(
  {
    type: Type.Literal("choice"),
    choice: Type.String({ description: "The option with the highest probability." }),
    probabilities: MapOf(Probability("Probability of this option.")),
    confidence: Probability("Derived from the probabilities; higher is more certain."),
  },
  { $id: "ChoiceAnswer", title: "ChoiceAnswer" },
);

export const ScoreAnswer = Type.Object(
  {
    type: Type.Literal("score"),
    score: Type.Number({ description: "Probability-weighted average of the level numbers." }),
    legend: MapOf(Content()),
    probabilities: MapOf(Probability("Probability of this level.")),
    confidence: Probability("Derived from the probabilities; higher is more certain."),
  },
  { $id: "ScoreAnswer", title: "ScoreAnswer" },
);

export const Answer = Type.Union([NoulAnswer, ChoiceAnswer, ScoreAnswer], {
  $id: "Answer",
  title: "Answer",
  discriminator: {
    propertyName: "type",
    mapping: {
      noul: "#/components/schemas/NoulAnswer",
      choice: "#/components/schemas/ChoiceAnswer",
      score: "#/components/schemas/ScoreAnswer",
    },
  },
});

export const Usage = Type.Object(
  {
    input_tokens: Type.Integer({ minimum: 0, description: "Billable input tokens." }),
    output_tokens: Type.Integer({ minimum: 0, description: "Output tokens (currently free)." }),
  },
  { $id: "Usage", title: "Usage" },
);

export const SystemOneResponse = Type.Object(
  {
    model: Type.String({ description: "Versioned id of the model that answered." }),
    answers: MapOf(Answer, { minProperties: 1 }),
    usage: Usage,
  },
  { $id: "SystemOneResponse", title: "SystemOneResponse" },
);

export const ModelMetadata = Type.Object(
  {
    name: Type.String({ description: "Model id or alias, as accepted by the `model` request field." }),
    description: Type.String(),
    release_date: Type.String({ format: "date" }),
  },
  { $id: "ModelMetadata", title: "ModelMetadata" },
);

export const ModelMetadataList = Type.Object({ models: Type.Array(ModelMetadata) }, { $id: "ModelMetadataList", title: "ModelMetadataList" });

export const ValidationErrorItem = Type.Object(
  {
    loc: Type.Array(Type.Union([Type.String(), Type.Integer()])),
    msg: Type.String(),
    type: Type.String(),
    input: Type.Optional(Type.Unknown()),
    ctx: Type.Optional(AnyObject),
  },
  { $id: "ValidationError", title: "ValidationError" },
);

export const HTTPValidationError = Type.Object(
  { detail: Type.Optional(Type.Array(ValidationErrorItem)) },
  { $id: "HTTPValidationError", title: "HTTPValidationError" },
);

/** Content: a string, an object or an array. */
export type Content = Static<ReturnType<typeof Content>>;
export type NoulQuestion = Static<typeof NoulQuestion>;
export type ChoiceQuestion = Static<typeof ChoiceQuestion>;
export type ScoreQuestion = Static<typeof ScoreQuestion>;
export type Question = Static<typeof Question>;
export type QuestionType = Question["type"];
export type SystemOneRequest = Static<typeof SystemOneRequest>;
export type NoulAnswer = Static<typeof NoulAnswer>;
export type ChoiceAnswer = Static<typeof ChoiceAnswer>;
export type ScoreAnswer = Static<typeof ScoreAnswer>;
export type Answer = Static<typeof Answer>;
export type Usage = Static<typeof Usage>;
export type SystemOneResponse = Static<typeof SystemOneResponse>;
export type ModelMetadata = Static<typeof ModelMetadata>;
export type ModelMetadataList = Static<typeof ModelMetadataList>;
export type ValidationErrorItem = Static<typeof ValidationErrorItem>;
export type HTTPValidationError = Static<typeof HTTPValidationError>;
