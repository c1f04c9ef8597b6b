/**
 * The v1 wire contract, written once. These TypeBox schemas are JSON Schema
 * objects: `Static<>` gives the TypeScript types, `validate.ts` walks them to
 * produce pydantic-shaped 422 details, and `openapi.ts` hoists every schema
 * carrying an `$id` into `components.schemas`.
 */
import { Type, type Static, type TSchema } from "@sinclair/typebox";
import { ANSWER_SCHEMAS, QUESTION_SCHEMAS, registeredKinds, type Answer as AnyAnswer, type Question as AnyQuestion } from "../questions/index.js";
import { AnyObject, Content, MapOf } from "../questions/wire.js";

/** A union tagged by `type`, named as the OpenAPI document names its members. */
function TaggedUnion<T extends TSchema[]>(members: [...T], id: string) {
  return Type.Union(members, {
    $id: id,
    title: id,
    discriminator: {
      propertyName: "type",
      mapping: Object.fromEntries(members.map((m) => [String(m["properties"]?.type?.const), `#/components/schemas/${m.$id}`])),
    },
  });
}

/** A question of one of the spec's types (`src/questions`): the wire's union, frozen. */
export const Question = TaggedUnion(QUESTION_SCHEMAS, "Question");

export const SystemOneRequest = Type.Object(
  {
    state: Content({ title: "State", description: "Content that all questions refer to." }),
    model: Type.String({ title: "Model", description: "Model name or alias, or a versioned model id." }),
    questions: MapOf(Question, { title: "Questions", description: "Caller-chosen name -> question.", minProperties: 1 }),
  },
  { $id: "SystemOneRequest", title: "SystemOneRequest", additionalProperties: true },
);

/**
 * The request an evaluator takes (and the questions of a job file): the
 * wire's, whose questions may be of any type registered now, the spec's and
 * those registered in process. Built again only when a type was registered
 * since (registration happens at run time); never on the wire, never in the
 * OpenAPI document.
 */
export function evaluatorRequestSchema() {
  const kinds = registeredKinds();
  if (built?.count !== kinds.length) built = { count: kinds.length, schema: evaluatorSchemaOf(kinds) };
  return built.schema;
}

function evaluatorSchemaOf(kinds: readonly { question: TSchema }[]) {
  const questions = Type.Union(
    kinds.map((k) => k.question),
    { discriminator: { propertyName: "type" } },
  );
  return Type.Object(
    { ...SystemOneRequest.properties, questions: MapOf(questions, { title: "Questions", description: "Caller-chosen name -> question.", minProperties: 1 }) },
    { additionalProperties: true },
  );
}
let built: { count: number; schema: ReturnType<typeof evaluatorSchemaOf> } | undefined;

/** An answer of one of the spec's types (`src/questions`): the wire's union, frozen. */
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
/** A question and an answer of any registered type (the wire's are the spec's: `SystemOneRequest`). */
export type Question = AnyQuestion;
export type Answer = AnyAnswer;
export type { QuestionType, SpecType } from "../questions/index.js";
/** A request and a response as the wire carries them: questions and answers of the spec's types. */
export type SystemOneRequest = Static<typeof SystemOneRequest>;
export type Usage = Static<typeof Usage>;
export type SystemOneResponse = Static<typeof SystemOneResponse>;
/**
 * What an evaluator takes: the wire's request, whose questions may also be
 * of a type registered in process. Only the local evaluator asks those; the
 * remote one refuses them, since the wire does not carry them.
 */
export type EvaluatorRequest = Omit<SystemOneRequest, "questions"> & { questions: Record<string, AnyQuestion> };
/** What an evaluator answers: the wire's response, with answers of the request's types. */
export type EvaluatorResponse = Omit<SystemOneResponse, "answers"> & { answers: Record<string, AnyAnswer> };
export type ModelMetadata = Static<typeof ModelMetadata>;
export type ModelMetadataList = Static<typeof ModelMetadataList>;
export type ValidationErrorItem = Static<typeof ValidationErrorItem>;
export type HTTPValidationError = Static<typeof HTTPValidationError>;
