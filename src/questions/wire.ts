/**
 * The TypeBox pieces every question type's wire schema is built from, and
 * that `api/schema.ts` uses for the state and the errors. They live here, at
 * the bottom of the dependency graph, so that a type module and the wire
 * contract that lists it can both use them without importing each other.
 */
import { Type, type SchemaOptions, type Static, type TSchema } from "@sinclair/typebox";

/** A JSON object with any properties (`dict[str, Any]`). */
export const AnyObject = Type.Unsafe<{ [key: string]: unknown }>({ type: "object", additionalProperties: true });
/** A JSON array of anything (`list[Any]`). */
const AnyArray = Type.Unsafe<unknown[]>({ type: "array", items: {} });

/** Text or structured content: string, object or array. */
export const Content = (options: SchemaOptions = {}) => Type.Union([Type.String(), AnyObject, AnyArray], options);
/** Content or null. */
export const NullableContent = (options: SchemaOptions = {}) => Type.Union([Type.String(), AnyObject, AnyArray, Type.Null()], options);

/** Content: a string, an object or an array. */
export type Content = Static<ReturnType<typeof Content>>;

/** A string-keyed map whose values follow `value` (JSON Schema `additionalProperties`). */
export function MapOf<T extends TSchema>(value: T, options: SchemaOptions = {}) {
  return Type.Unsafe<{ [key: string]: Static<T> }>({ ...options, type: "object", additionalProperties: value });
}

/** Every question's optional `instructions`. */
export const instructions = Type.Optional(
  NullableContent({ title: "Instructions", description: "What the model should decide, rate, or answer yes/no about." }),
);

/** A probability in an answer. */
export const Probability = (description: string) => Type.Number({ minimum: 0, maximum: 1, description });

/** An answer's confidence (choice and score). */
export const Confidence = () => Probability("Derived from the probabilities; higher is more certain.");
