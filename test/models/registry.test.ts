import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ModelRegistry, RegistryError, versionedId } from "../../src/models/registry.js";

function userFile(models: unknown[]): string {
  const dir = mkdtempSync(join(tmpdir(), "te-reg-"));
  const file = join(dir, "models.json");
  writeFileSync(file, JSON.stringify({ models }));
  return file;
}

const local = {
  name: "my-model",
  aliases: ["mine"],
  version: "0.3.1",
  description: "A local test model",
  release_date: "2026-01-02",
  engine: "llama",
  path: "weights/my.gguf",
  context_size: 4096,
  temperature: 0.8,
  price_per_million_input_tokens: 0,
};

describe("ModelRegistry", () => {
  it("bundles a default model with a versioned id, source and checksum", () => {
    const registry = ModelRegistry.load({ file: undefined });
    const entry = registry.resolve("default");
    expect(versionedId(entry)).toMatch(/^[a-z0-9.-]+-\d+\.\d+\.\d+$/);
    expect(entry.source?.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(entry.price_per_million_input_tokens).toBe(0.042);
  });

  it("resolves a model by name, alias and versioned id to the same entry", () => {
    const registry = ModelRegistry.load({ file: userFile([local]) });
    const entry = registry.resolve("my-model");
    expect(registry.resolve("mine")).toBe(entry);
    expect(registry.resolve("my-model-0.3.1")).toBe(entry);
    expect(registry.namesOf(entry).sort()).toEqual(["mine", "my-model", "my-model-0.3.1"]);
  });

  it("lists the aliases with description and release date, not the versioned id", () => {
    const registry = ModelRegistry.load({ file: userFile([local]) });
    expect(registry.metadata(registry.resolve("mine"))).toEqual([
      { name: "my-model", description: "A local test model", release_date: "2026-01-02" },
      { name: "mine", description: "A local test model", release_date: "2026-01-02" },
    ]);
  });

  it("resolves a relative path against the registry file's folder", () => {
    const file = userFile([local]);
    const registry = ModelRegistry.load({ file });
    expect(registry.modelFile(registry.resolve("mine"))).toBe(join(file, "..", "weights/my.gguf"));
  });

  it("puts downloads in the models folder under the source's file name", () => {
    const registry = ModelRegistry.load({ file: undefined });
    expect(registry.modelFile(registry.resolve("default"), "/m")).toBe("/m/qwen2.5-0.5b-instruct-q4_0.gguf");
  });

  it("lets a user file replace a bundled entry of the same name", () => {
    const bundled = ModelRegistry.load({ file: undefined }).resolve("default");
    const registry = ModelRegistry.load({ file: userFile([{ ...bundled, version: "9.9.9", aliases: ["default"] }]) });
    expect(versionedId(registry.resolve("default"))).toBe(`${bundled.name}-9.9.9`);
    expect(registry.entries).toHaveLength(1);
  });

  it("refuses an unknown name, listing the known ones", () => {
    const registry = ModelRegistry.load({ file: undefined });
    expect(() => registry.resolve("gpt-17")).toThrow(/unknown model "gpt-17"; known: .*default/);
  });

  it("refuses a registry with bad entries, naming every problem", () => {
    const bad = { ...local, version: "1.0", release_date: "May 2026", temperature: 0, template: "vicuna" };
    delete (bad as Partial<typeof local>).path;
    let error: unknown;
    try {
      ModelRegistry.load({ file: userFile([bad]) });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(RegistryError);
    const message = (error as Error).message;
    for (const part of ["major.minor.patch", "YYYY-MM-DD", "temperature must be positive", "needs a source", 'template "vicuna"']) {
      expect(message).toContain(part);
    }
  });

  it("refuses a registry whose fields have the wrong types, and two models sharing a name", () => {
    expect(() => ModelRegistry.load({ file: userFile([{ ...local, context_size: "big" }]) })).toThrow(/context_size: Input should be a valid integer/);
    expect(() => ModelRegistry.load({ file: userFile([local, { ...local, name: "other" }]) })).toThrow(/name "mine" belongs to both/);
  });
});
