/** Opening embedded models: a file given by --model-path is named from itself unless its bytes are the registry's. */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { UnprocessableEntityError } from "../../src/api/errors.js";
import { openLocalModel } from "../../src/evaluator/factory.js";
import { sha256File } from "../../src/models/download.js";
import { ModelRegistry, VERSIONED_ID } from "../../src/models/registry.js";
import { generatedModel, TINY } from "../support/models.js";

describe("a model run from a file", () => {
  it("lists and answers as the file's own model, under the registry's aliases but never its versioned id", async () => {
    const modelPath = generatedModel(TINY);
    const sha = await sha256File(modelPath);
    const modelsDir = mkdtempSync(join(tmpdir(), "te-factory-"));
    const router = await openLocalModel({ registry: ModelRegistry.load({}), model: "default", modelPath, modelsDir, threads: 1, contextSize: 2048 });
    try {
      const id = `typed-eval-test-byte-${sha.slice(0, 8)}-0.0.0`;
      expect(id).toMatch(VERSIONED_ID);
      expect(router.models().map((m) => m.name)).toEqual([id, "qwen2.5-0.5b-instruct", "default", "small"]);
      expect(router.models()[0]!.description).toMatch(/general\.name: typed-eval test byte\), sha256 [0-9a-f]{16}…, run with --model-path/);
      expect(router.pricePerMillion("default")).toBe(0);
      expect(() => router.route("qwen2.5-0.5b-instruct-1.0.0")).toThrow(UnprocessableEntityError);
      const { response } = await router.evaluate({ state: "hello", model: "default", questions: { q: { type: "noul" } } });
      expect(response.model).toBe(id);
      expect(router.identity("default")).toContain(`sha256:${sha}`);
    } finally {
      await router.close();
    }
  }, 60_000);
});
