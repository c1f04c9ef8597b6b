/**
 * The OpenAPI 3.1 document of spec section 4, generated from `schema.ts`:
 * every schema with an `$id` becomes a component and is referenced by `$ref`.
 */
import { HTTPValidationError, ModelMetadataList, SystemOneRequest, SystemOneResponse } from "./schema.js";

/** Document version of the machine-readable description (spec section 9). */
export const OPENAPI_DOCUMENT_VERSION = "0.2.0";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export interface OpenAPIDocument {
  openapi: "3.1.0";
  info: { title: string; version: string; description: string };
  paths: Record<string, Record<string, Json>>;
  components: { schemas: Record<string, Json>; securitySchemes: Record<string, Json> };
}

/** Replaces nested `$id` schemas by `$ref`s, collecting each into `components`. */
function hoist(node: Json, components: Record<string, Json>, isRoot = false): Json {
  if (Array.isArray(node)) return node.map((item) => hoist(item, components));
  if (node === null || typeof node !== "object") return node;
  const id = node["$id"];
  if (typeof id === "string" && !isRoot) {
    if (!(id in components)) components[id] = hoist(node, components, true);
    return { $ref: `#/components/schemas/${id}` };
  }
  const out: { [key: string]: Json } = {};
  for (const [key, value] of Object.entries(node)) {
    if (key !== "$id") out[key] = hoist(value, components);
  }
  return out;
}

/** JSON Schema of a TypeBox schema, without TypeBox's symbol-keyed metadata. */
function plain(schema: object): Json {
  return JSON.parse(JSON.stringify(schema)) as Json;
}

const json = (ref: string): Json => ({ "application/json": { schema: { $ref: `#/components/schemas/${ref}` } } });

const validationError: Json = { description: "Validation Error", content: json("HTTPValidationError") };

/** Builds the OpenAPI 3.1 document served at `/openapi.json`. */
export function buildOpenAPIDocument(): OpenAPIDocument {
  const schemas: Record<string, Json> = {};
  for (const schema of [SystemOneRequest, SystemOneResponse, ModelMetadataList, HTTPValidationError]) {
    hoist(plain(schema), schemas);
  }
  const sorted = Object.fromEntries(Object.entries(schemas).sort(([a], [b]) => a.localeCompare(b)));
  return {
    openapi: "3.1.0",
    info: {
      title: "Typed Question Evaluation Service",
      version: OPENAPI_DOCUMENT_VERSION,
      description: "System One typed-question API v1, served by typed-eval.",
    },
    paths: {
      "/v1/systemone": {
        post: {
          operationId: "systemone_v1_systemone_post",
          summary: "Evaluate typed questions against one state",
          security: [{ HTTPBearer: [] }],
          requestBody: { required: true, content: json("SystemOneRequest") },
          responses: {
            "200": { description: "Successful Response", content: json("SystemOneResponse") },
            "422": validationError,
          },
        },
      },
      "/v1/models": {
        get: {
          operationId: "models_v1_v1_models_get",
          summary: "List the model names the account may send",
          security: [{ HTTPBearer: [] }],
          responses: {
            "200": { description: "Successful Response", content: json("ModelMetadataList") },
            "422": validationError,
          },
        },
      },
    },
    components: {
      schemas: sorted,
      securitySchemes: { HTTPBearer: { type: "http", scheme: "bearer" } },
    },
  };
}
