/**
 * Validation against the schemas of `schema.ts`, reporting every failure the
 * way FastAPI/pydantic v2 does (`{loc, msg, type, input, ctx}`), because
 * clients of the hosted service parse `detail` programmatically.
 *
 * The walker understands exactly the JSON Schema keywords `schema.ts` uses and
 * throws on any other, so the schema stays the single source of truth.
 */
import type { TSchema } from "@sinclair/typebox";
import { findKind, isSpecType } from "../questions/index.js";
import { evaluatorRequestSchema, SystemOneRequest, SystemOneResponse, type EvaluatorRequest, type ValidationErrorItem } from "./schema.js";

export type Loc = (string | number)[];

/** A location as a linked path, turned into a `loc` array only when something fails: no garbage on valid input. */
type Path = { up: Path; key: string | number } | null;

function materialize(prefix: Loc, path: Path): Loc {
  const keys: (string | number)[] = [];
  for (let p = path; p; p = p.up) keys.push(p.key);
  return [...prefix, ...keys.reverse()];
}
export type Validation<T> = { ok: true; value: T } | { ok: false; errors: ValidationErrorItem[] };

/** Keywords that only document a schema; they never fail a value. */
const ANNOTATIONS = new Set(["$id", "title", "description", "format", "discriminator"]);
const HANDLED = new Set([
  "type",
  "anyOf",
  "const",
  "properties",
  "required",
  "additionalProperties",
  "minProperties",
  "maxProperties",
  "items",
  "minItems",
  "maxItems",
  "minimum",
  "maximum",
]);

interface Schema {
  type?: string;
  anyOf?: Schema[];
  const?: unknown;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  minProperties?: number;
  maxProperties?: number;
  items?: Schema;
  minItems?: number;
  maxItems?: number;
  minimum?: number;
  maximum?: number;
  discriminator?: { propertyName: string };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function kindName(schema: Schema): string {
  switch (schema.type) {
    case "string":
      return "string";
    case "object":
      return "dictionary";
    case "array":
      return "list";
    case "null":
      return "null";
    case "number":
    case "integer":
      return "number";
    default:
      return "value";
  }
}

function listPhrase(words: string[]): string {
  if (words.length <= 1) return words.join("");
  return `${words.slice(0, -1).join(", ")} or ${words[words.length - 1]}`;
}

function andList(words: string[]): string {
  return words.length <= 1 ? words.join("") : `${words.slice(0, -1).join(", ")} and ${words[words.length - 1]}`;
}

function quoted(values: string[]): string {
  return values.map((v) => `'${v}'`).join(", ");
}

class Walker {
  readonly errors: ValidationErrorItem[] = [];

  constructor(private readonly prefix: Loc) {}

  private fail(path: Path, type: string, msg: string, input: unknown, ctx?: Record<string, unknown>): void {
    const error: ValidationErrorItem = { type, loc: materialize(this.prefix, path), msg, input };
    if (ctx !== undefined) error.ctx = ctx;
    this.errors.push(error);
  }

  walk(schema: Schema, value: unknown, loc: Path): void {
    for (const key of Object.keys(schema)) {
      if (!ANNOTATIONS.has(key) && !HANDLED.has(key)) throw new Error(`validate: unsupported schema keyword "${key}"`);
    }
    if (schema.anyOf) return this.union(schema, schema.anyOf, value, loc);
    if (schema.const !== undefined) {
      if (value !== schema.const) {
        this.fail(loc, "literal_error", `Input should be ${JSON.stringify(schema.const).replaceAll('"', "'")}`, value, {
          expected: `'${String(schema.const)}'`,
        });
      }
      return;
    }
    switch (schema.type) {
      case undefined:
        return;
      case "string":
        if (typeof value !== "string") this.fail(loc, "string_type", "Input should be a valid string", value);
        return;
      case "number":
      case "integer":
        return this.number(schema, value, loc);
      case "null":
        if (value !== null) this.fail(loc, "none_required", "Input should be None", value);
        return;
      case "array":
        return this.array(schema, value, loc);
      case "object":
        return this.object(schema, value, loc);
      default:
        throw new Error(`validate: unsupported schema type "${schema.type}"`);
    }
  }

  private number(schema: Schema, value: unknown, loc: Path): void {
    const integer = schema.type === "integer";
    if (typeof value !== "number" || !Number.isFinite(value) || (integer && !Number.isInteger(value))) {
      this.fail(loc, integer ? "int_type" : "float_type", `Input should be a valid ${integer ? "integer" : "number"}`, value);
      return;
    }
    if (schema.minimum !== undefined && value < schema.minimum) {
      this.fail(loc, "greater_than_equal", `Input should be greater than or equal to ${schema.minimum}`, value, {
        ge: schema.minimum,
      });
    }
    if (schema.maximum !== undefined && value > schema.maximum) {
      this.fail(loc, "less_than_equal", `Input should be less than or equal to ${schema.maximum}`, value, {
        le: schema.maximum,
      });
    }
  }

  private lengths(schema: Schema, count: number, fieldType: "List" | "Dictionary", value: unknown, loc: Path): void {
    const min = fieldType === "List" ? schema.minItems : schema.minProperties;
    const max = fieldType === "List" ? schema.maxItems : schema.maxProperties;
    const noun = (n: number) => `${n} item${n === 1 ? "" : "s"}`;
    if (min !== undefined && count < min) {
      this.fail(loc, "too_short", `${fieldType} should have at least ${noun(min)} after validation, not ${count}`, value, {
        field_type: fieldType,
        min_length: min,
        actual_length: count,
      });
    }
    if (max !== undefined && count > max) {
      this.fail(loc, "too_long", `${fieldType} should have at most ${noun(max)} after validation, not ${count}`, value, {
        field_type: fieldType,
        max_length: max,
        actual_length: count,
      });
    }
  }

  private array(schema: Schema, value: unknown, loc: Path): void {
    if (!Array.isArray(value)) {
      this.fail(loc, "list_type", "Input should be a valid list", value);
      return;
    }
    if (schema.items) {
      const items = schema.items;
      value.forEach((item, index) => this.walk(items, item, { up: loc, key: index }));
    }
    this.lengths(schema, value.length, "List", value, loc);
  }

  private object(schema: Schema, value: unknown, loc: Path): void {
    const isModel = schema.properties !== undefined;
    if (!isPlainObject(value)) {
      if (isModel) {
        this.fail(loc, "model_attributes_type", "Input should be a valid dictionary or object to extract fields from", value);
      } else {
        this.fail(loc, "dict_type", "Input should be a valid dictionary", value);
      }
      return;
    }
    const required = new Set(schema.required ?? []);
    for (const [name, propertySchema] of Object.entries(schema.properties ?? {})) {
      if (Object.hasOwn(value, name)) this.walk(propertySchema, value[name], { up: loc, key: name });
      else if (required.has(name)) this.fail({ up: loc, key: name }, "missing", "Field required", value);
    }
    const extra = schema.additionalProperties;
    if (typeof extra === "object") {
      for (const [key, item] of Object.entries(value)) this.walk(extra, item, { up: loc, key });
    }
    this.lengths(schema, Object.keys(value).length, "Dictionary", value, loc);
  }

  private union(schema: Schema, members: Schema[], value: unknown, loc: Path): void {
    if (schema.discriminator) return this.tagged(schema.discriminator.propertyName, members, value, loc);
    const nonNull = members.filter((m) => m.type !== "null");
    if (value === null && nonNull.length < members.length) return;
    if (nonNull.length > 1 && nonNull.every((m) => m.const !== undefined)) {
      const allowed = nonNull.map((m) => m.const);
      if (!allowed.includes(value)) {
        const expected = listPhrase(allowed.map((v) => `'${String(v)}'`));
        this.fail(loc, "literal_error", `Input should be ${expected}`, value, { expected });
      }
      return;
    }
    // Optional[X]: report X's own errors, as pydantic does.
    const only = nonNull[0];
    if (nonNull.length === 1 && only) return this.walk(only, value, loc);
    for (const member of nonNull) {
      const probe = new Walker(this.prefix);
      probe.walk(member, value, loc);
      if (probe.errors.length === 0) return;
    }
    const expected = members.map(kindName);
    const article = expected[0] === "null" ? "" : "a valid ";
    const got = value === null ? ", not null" : "";
    this.fail(loc, "union_type", `Input should be ${article}${listPhrase(expected)}${got}`, value, {
      expected: expected.join(", "),
    });
  }

  private tagged(property: string, members: Schema[], value: unknown, loc: Path): void {
    const tags = members.map((m) => String(m.properties?.[property]?.const));
    if (!isPlainObject(value)) {
      this.fail(loc, "model_attributes_type", "Input should be a valid dictionary or object to extract fields from", value);
      return;
    }
    if (!Object.hasOwn(value, property)) {
      this.fail(loc, "union_tag_not_found", `Unable to extract tag using discriminator '${property}'`, value, {
        discriminator: `'${property}'`,
      });
      return;
    }
    const tag = value[property];
    const index = tags.indexOf(String(tag));
    const member = typeof tag === "string" ? members[index] : undefined;
    if (!member) {
      this.fail(
        loc,
        "union_tag_invalid",
        `Input tag '${String(tag)}' found using '${property}' does not match any of the expected tags: ${quoted(tags)}`,
        value,
        { discriminator: `'${property}'`, tag: String(tag), expected_tags: quoted(tags) },
      );
      return;
    }
    // pydantic puts the variant's tag into the location of its errors.
    this.walk(member, value, { up: loc, key: String(tag) });
  }
}

/** Validates `value` against a schema of `schema.ts`; `loc` prefixes every error location. */
export function validateAgainst<T>(schema: TSchema, value: unknown, loc: Loc): Validation<T> {
  const walker = new Walker(loc);
  walker.walk(schema as Schema, value, null);
  if (walker.errors.length > 0) return { ok: false, errors: walker.errors };
  return { ok: true, value: value as T };
}

/**
 * Validates a parsed request body: the typed request, or every failure with a
 * `loc` starting at `"body"`. Unknown extra fields are ignored.
 */
export interface RequestChecks {
  /**
   * Ignore what strict checking refuses (unknown keys inside a question, noul
   * criteria keys other than true/false, images and videos), as servers that
   * accept extensions do. Off by default.
   */
  lenient?: boolean;
}

/** Media fields other servers of this API accept; no model here can see them. */
const MEDIA_KEYS = ["images", "videos"];

/** The keys an object schema names, or that the object member of a union (`X | null`) names; undefined for a free map. */
function namedKeys(schema: Schema | undefined): string[] | undefined {
  if (schema?.properties) return Object.keys(schema.properties);
  for (const member of schema?.anyOf ?? []) {
    const keys = namedKeys(member);
    if (keys) return keys;
  }
  return undefined;
}

/**
 * What strict checking refuses in a request of a valid shape: a key its
 * type's schema does not name inside a question (`instruction` for
 * `instructions` would be answered as a question with no instructions) or
 * inside criteria whose keys the schema names (a noul's `true` and `false`),
 * and images or videos. Unknown top-level fields stay ignored.
 */
export function strictProblems(body: EvaluatorRequest): ValidationErrorItem[] {
  const errors: ValidationErrorItem[] = [];
  const record = body as unknown as Record<string, unknown>;
  for (const key of MEDIA_KEYS) {
    const media = record[key];
    if (media === undefined || media === null || (Array.isArray(media) && media.length === 0)) continue;
    errors.push({
      type: "value_error",
      loc: ["body", key],
      msg: `Value error, this server answers from text only: ${key} cannot be seen by its models; send the content as text in state (or ask an endpoint whose model sees ${key})`,
      input: "[omitted]",
    });
  }
  for (const [name, question] of Object.entries(body.questions)) {
    const schema = findKind(question)?.question as Schema;
    const known = new Set(namedKeys(schema));
    for (const [key, value] of Object.entries(question)) {
      if (known.has(key)) continue;
      const hint = key === "instruction" ? " (did you mean instructions?)" : key === "criterion" || key === "options" ? " (did you mean criteria?)" : "";
      errors.push({
        type: "extra_forbidden",
        loc: ["body", "questions", name, question.type, key],
        msg: `Extra inputs are not permitted${hint}`,
        input: value,
      });
    }
    const criteriaKeys = namedKeys(schema.properties?.["criteria"]);
    if (criteriaKeys && isPlainObject(question.criteria)) {
      for (const [key, value] of Object.entries(question.criteria)) {
        if (criteriaKeys.includes(key)) continue;
        errors.push({
          type: "extra_forbidden",
          loc: ["body", "questions", name, question.type, "criteria", key],
          msg: `Extra inputs are not permitted: ${question.type} criteria take the keys ${andList(criteriaKeys)}`,
          input: value,
        });
      }
    }
  }
  return errors;
}

export function validateRequest(body: unknown, checks: RequestChecks = {}): Validation<SystemOneRequest> {
  return checkedRequest(SystemOneRequest, body, checks);
}

/**
 * Validates a request an evaluator takes (a job file's questions): as
 * `validateRequest`, but its questions may be of any registered type, those
 * registered in process too. The server never takes these.
 */
export function validateEvaluatorRequest(body: unknown, checks: RequestChecks = {}): Validation<EvaluatorRequest> {
  return checkedRequest(evaluatorRequestSchema(), body, checks);
}

function checkedRequest<T extends EvaluatorRequest>(schema: TSchema, body: unknown, checks: RequestChecks): Validation<T> {
  const result = validateAgainst<T>(schema, body, ["body"]);
  if (result.ok) {
    const problems = checks.lenient ? [] : strictProblems(result.value);
    return problems.length > 0 ? { ok: false, errors: problems } : result;
  }
  if (!isPlainObject(body) || !Object.hasOwn(body, "document") || Object.hasOwn(body, "state")) {
    return result;
  }
  // The preview API called the content `document`; say so instead of a bare "Field required".
  for (const error of result.errors) {
    if (error.type === "missing" && error.loc.length === 2 && error.loc[1] === "state") {
      error.msg = "Field required: v1 takes the content as `state`; the preview field `document` is no longer accepted";
    }
  }
  return result;
}

/**
 * What the wire cannot carry of the questions an evaluator takes: a question of
 * a type registered in process (one line per question, empty when none).
 */
export function offWireQuestions(questions: EvaluatorRequest["questions"]): string[] {
  return Object.entries(questions)
    .filter(([, q]) => !isSpecType(q.type))
    .map(([name, q]) => `question ${name} is a ${q.type} question, a type registered in this process, which the wire does not carry`);
}

/** Validates the shape of a response body (not its consistency with a request: see `consistency.ts`). */
export function validateResponseShape(body: unknown): Validation<SystemOneResponse> {
  return validateAgainst<SystemOneResponse>(SystemOneResponse, body, ["response"]);
}
