import { describe, expect, it } from "vitest";
import { buildOpenAPIDocument } from "../../src/api/openapi.js";

type Node = { [key: string]: unknown };
const doc = buildOpenAPIDocument();
const schemas = doc.components.schemas as Record<string, Node>;

/** The field tables of spec section 2: component -> field -> required. */
const SPEC_TABLES: Record<string, Record<string, boolean>> = {
  SystemOneRequest: { state: true, model: true, questions: true },
  NoulQuestion: { type: true, instructions: false, criteria: false },
  ChoiceQuestion: { type: true, instructions: false, criteria: true },
  ScoreQuestion: { type: true, instructions: false, criteria: true },
  NoulCriteria: { true: false, false: false },
  SystemOneResponse: { model: true, answers: true, usage: true },
  Usage: { input_tokens: true, output_tokens: true },
  NoulAnswer: { type: true, noul: true },
  ChoiceAnswer: { type: true, choice: true, probabilities: true, confidence: true },
  ScoreAnswer: { type: true, score: true, legend: true, probabilities: true, confidence: true },
  ModelMetadataList: { models: true },
  ModelMetadata: { name: true, description: true, release_date: true },
  HTTPValidationError: { detail: false },
  ValidationError: { loc: true, msg: true, type: true, input: false, ctx: false },
};

function resolve(ref: string): Node {
  const name = ref.replace("#/components/schemas/", "");
  const schema = schemas[name];
  if (!schema) throw new Error(`dangling $ref ${ref}`);
  return schema;
}

function refsIn(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) node.forEach((n) => refsIn(n, out));
  else if (node && typeof node === "object") {
    for (const [key, value] of Object.entries(node)) {
      if (key === "$ref" && typeof value === "string") out.push(value);
      else refsIn(value, out);
    }
  }
  return out;
}

describe("the generated OpenAPI document", () => {
  it("is OpenAPI 3.1.0 with document version 0.2.0", () => {
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.info.version).toBe("0.2.0");
  });

  it("has the two operations of spec section 4 with their operation ids", () => {
    expect(Object.keys(doc.paths).sort()).toEqual(["/v1/models", "/v1/systemone"]);
    expect((doc.paths["/v1/systemone"]!["post"] as Node)["operationId"]).toBe("systemone_v1_systemone_post");
    expect((doc.paths["/v1/models"]!["get"] as Node)["operationId"]).toBe("models_v1_v1_models_get");
  });

  it("declares 200 and 422 per path, with bearer security", () => {
    for (const [path, method, ok] of [
      ["/v1/systemone", "post", "SystemOneResponse"],
      ["/v1/models", "get", "ModelMetadataList"],
    ] as const) {
      const op = doc.paths[path]![method] as Node;
      const responses = op["responses"] as Record<string, Node>;
      expect(Object.keys(responses).sort()).toEqual(["200", "422"]);
      expect(refsIn(responses["200"])).toEqual([`#/components/schemas/${ok}`]);
      expect(refsIn(responses["422"])).toEqual(["#/components/schemas/HTTPValidationError"]);
      expect(op["security"]).toEqual([{ HTTPBearer: [] }]);
    }
    expect(doc.components.securitySchemes["HTTPBearer"]).toEqual({ type: "http", scheme: "bearer" });
    expect(refsIn((doc.paths["/v1/systemone"]!["post"] as Node)["requestBody"])).toEqual(["#/components/schemas/SystemOneRequest"]);
  });

  it("matches every field table of spec section 2: names and required flags", () => {
    for (const [name, fields] of Object.entries(SPEC_TABLES)) {
      const schema = schemas[name];
      expect(schema, name).toBeDefined();
      const properties = Object.keys((schema!["properties"] as Node) ?? {}).sort();
      expect(properties, name).toEqual(Object.keys(fields).sort());
      const required = ((schema!["required"] as string[]) ?? []).sort();
      const want = Object.entries(fields)
        .filter(([, r]) => r)
        .map(([f]) => f)
        .sort();
      expect(required, name).toEqual(want);
    }
  });

  it("tags both unions on `type` with the three variants", () => {
    for (const [union, variants] of [
      ["Question", ["NoulQuestion", "ChoiceQuestion", "ScoreQuestion"]],
      ["Answer", ["NoulAnswer", "ChoiceAnswer", "ScoreAnswer"]],
    ] as const) {
      const schema = schemas[union]!;
      expect(refsIn(schema["anyOf"])).toEqual(variants.map((v) => `#/components/schemas/${v}`));
      const discriminator = schema["discriminator"] as { propertyName: string; mapping: Record<string, string> };
      expect(discriminator.propertyName).toBe("type");
      expect(Object.keys(discriminator.mapping)).toEqual(["noul", "choice", "score"]);
      for (const [tag, ref] of Object.entries(discriminator.mapping)) {
        expect((resolve(ref)["properties"] as Record<string, Node>)["type"]!["const"]).toBe(tag);
      }
    }
  });

  it("encodes the constraints of the field tables", () => {
    const request = schemas["SystemOneRequest"]!["properties"] as Record<string, Node>;
    expect(request["questions"]!["minProperties"]).toBe(1);
    expect(refsIn(request["questions"]!["additionalProperties"])).toEqual(["#/components/schemas/Question"]);
    // state: string, object or array; never null.
    const stateTypes = (request["state"]!["anyOf"] as Node[]).map((m) => m["type"]);
    expect(stateTypes).toEqual(["string", "object", "array"]);
    const score = (schemas["ScoreQuestion"]!["properties"] as Record<string, Node>)["criteria"]!;
    expect([score["type"], score["minItems"], score["maxItems"]]).toEqual(["array", 1, 10]);
    expect(((score["items"] as Node)["anyOf"] as Node[]).map((m) => m["type"])).not.toContain("null");
    const choice = (schemas["ChoiceQuestion"]!["properties"] as Record<string, Node>)["criteria"]!;
    expect([choice["type"], choice["minProperties"], choice["maxProperties"]]).toEqual(["object", 1, 255]);
    const release = (schemas["ModelMetadata"]!["properties"] as Record<string, Node>)["release_date"]!;
    expect(release).toMatchObject({ type: "string", format: "date" });
    const noul = (schemas["NoulAnswer"]!["properties"] as Record<string, Node>)["noul"]!;
    expect(noul).toMatchObject({ type: "number", minimum: 0, maximum: 1 });
  });

  it("has no dangling references and no TypeBox internals", () => {
    for (const ref of refsIn(doc)) expect(() => resolve(ref)).not.toThrow();
    expect(JSON.stringify(doc)).not.toContain("$id");
    expect(JSON.parse(JSON.stringify(doc))).toEqual(doc);
  });
});
