/**
 * The v1 wire contract, written once. These TypeBox schemas are JSON Schema
 * objects: `Static<>` gives the TypeScript types, `validate.ts` walks them to
 * produce pydantic-shaped 422 details, and `openapi.ts` hoists every schema
 * carrying an `$id` into `components.schemas`.
 */
import { Type, type Static, type TSchema } from "@sinclair/typebox";
import { ANSWER_SCHEMAS, QUESTION_KINDS, QUESTION_SCHEMAS } from "../questions/index.js";
import { AnyObject, Content, MapOf } from "../questions/wire.js";

/** A discriminated union over the registered question types, named as the OpenAPI document names its members. */
function TaggedUnion<T extends TSchema[]>(members: [...T], id: string) {
  return Type.Union(members, {
    $id: id,
    title: id,
    discriminator: {
      propertyName: "type",
      mapping: Object.fromEntries(QUESTION_KINDS.map((kind, i) => [kind.type, `#/components/schemas/${members[i]?.$id}`])),
    },
  });
}

/** A question of any registered type (`src/questions`). */
export const Question = TaggedUnion(QUESTION_SCHEMAS, "Question");

export const SystemOneRequest = Type.Object(
  {
    state: Content({ title: "State", description: "Content that all questions refer to." }),
    model: Type.String({ title: "Model", description: "Model name or alias, or a versioned model id." }),
    questions: MapOf(Question, { title: "Questions", description: "Caller-chosen name -> question.", minProperties: 1 }),
  },
  { $id: "SystemOneRequest", title: "SystemOneRequest", additionalProperties: true },
);

/** An answer of any registered type (`src/questions`). */
export const Answer = TaggedUnion(ANSWER_SCHEMAS, "Answer");

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

export type { Content } from "../questions/wire.js";
export type Question = Static<typeof Question>;
export type QuestionType = Question["type"];
export type SystemOneRequest = Static<typeof SystemOneRequest>;
export type Answer = Static<typeof Answer>;
export type Usage = Static<typeof Usage>;
export type SystemOneResponse = Static<typeof SystemOneResponse>;
export type ModelMetadata = Static<typeof ModelMetadata>;
export type ModelMetadataList = Static<typeof ModelMetadataList>;
export type ValidationErrorItem = Static<typeof ValidationErrorItem>;
export type HTTPValidationError = Static<typeof HTTPValidationError>;
