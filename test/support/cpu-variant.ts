/**
 * llama.cpp's CPU variants, for the tests that must hold on every CPU the
 * prebuilt binary supports: which variants the binary holds, which one a
 * process loaded, and the environment that forces one on a child process
 * (the mechanism, a module resolve hook, is `cpu-variant.mjs`).
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { loadedCpuVariants } from "./cpu-variant.mjs";

export { loadedCpuVariants };

const HOOK = pathToFileURL(join(import.meta.dirname, "cpu-variant.mjs")).href;
const ARCH = process.arch === "arm" ? "armv7l" : process.arch;
const BINS = join(import.meta.dirname, "../../node_modules/@node-llama-cpp", `${process.platform}-${ARCH}`, "bins", `${process.platform}-${ARCH}`);

/** The variant this process was forced onto (`make test CPU_VARIANT=...`), if any. */
export const FORCED_CPU_VARIANT: string | undefined = process.env["TYPED_EVAL_TEST_CPU_VARIANT"] || undefined;

/**
 * The variant every CPU of this architecture runs: plain x86-64 (SSE2, no
 * AVX) or ARMv8.0. The farthest from any vector variant, so the widest
 * spread a CPU can give (ggml/src/CMakeLists.txt lists the variants).
 */
export const BASELINE_CPU_VARIANT: string | undefined = { x64: "x64", arm64: "armv8.0_1" }[process.arch as string];

/** The CPU variants the prebuilt binary of this platform holds (`libggml-cpu-<variant>.so`), by name. */
export function cpuVariantsInBinary(): string[] {
  try {
    return readdirSync(BINS)
      .flatMap((f) => /^libggml-cpu-(.+)\.so$/.exec(f)?.[1] ?? [])
      .sort();
  } catch {
    return [];
  }
}

/**
 * The environment that runs a Node process, and every Node process it
 * starts, on llama.cpp's CPU variant `variant`; with `report`, each one that
 * loaded a CPU back end appends `<pid> <variant>` to that file as it exits.
 */
export function cpuVariantEnv(variant: string, report?: string): Record<string, string> {
  const options = process.env["NODE_OPTIONS"] ?? "";
  return {
    NODE_OPTIONS: options.includes(HOOK) ? options : `${options} --import=${HOOK}`.trim(),
    TYPED_EVAL_TEST_CPU_VARIANT: variant,
    ...(report === undefined ? {} : { TYPED_EVAL_TEST_CPU_REPORT: report }),
  };
}
