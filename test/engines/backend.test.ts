/** Choosing llama.cpp's backend on these CPU-only machines: auto and off give the CPU, a named GPU backend is a clear error. */
import { describe, expect, it } from "vitest";
import { BackendError, LlamaEngine, probeBackend } from "../../src/engines/llama.js";
import { generatedModel, TINY } from "../support/models.js";

describe("--gpu", () => {
  it("auto falls back to the CPU without error, off is the CPU", async () => {
    expect(await probeBackend("auto")).toBe("cpu");
    expect(await probeBackend("off")).toBe("cpu");
    const engine = await LlamaEngine.load({ modelPath: generatedModel(TINY), gpu: "auto", threads: 1, contextSize: 1024, sequences: 1 });
    try {
      expect(engine.backend).toBe("cpu");
    } finally {
      await engine.close();
    }
  });

  it("a GPU backend named explicitly that cannot load is a clear error saying what to do", async () => {
    for (const gpu of ["cuda", "vulkan"] as const) {
      await expect(probeBackend(gpu)).rejects.toThrow(BackendError);
      await expect(probeBackend(gpu)).rejects.toThrow(new RegExp(`--gpu ${gpu}: no ${gpu.toUpperCase()} build of llama.cpp can be loaded here.*--gpu auto`));
    }
  });
});
