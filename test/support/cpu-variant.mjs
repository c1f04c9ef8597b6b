/**
 * Forces llama.cpp's prebuilt CPU binary onto one of its CPU variants, so a
 * test can run on this machine the kernels another CPU would get.
 *
 * The prebuilt package (`@node-llama-cpp/linux-x64`) holds one CPU back end
 * per CPU family (`bins/linux-x64/libggml-cpu-<variant>.so`: x64, sse42,
 * sandybridge, ivybridge, piledriver, haswell, alderlake, skylakex, ...,
 * zen4, sapphirerapids). At load, ggml opens every `libggml-cpu-*.so` of the
 * binary's folder, asks each for its score on this CPU (0 when the CPU lacks
 * one of the instructions it was built for, else a sum of feature bits) and
 * keeps the highest (`ggml_backend_load_best` in llama.cpp's
 * ggml/src/ggml-backend-reg.cpp). The binary has no switch for it, so this
 * module gives node-llama-cpp a copy of the package whose folder holds only
 * the variant asked for (in the OS temp folder, made once, the rest of the
 * package as it is), through a module resolve hook.
 *
 *   NODE_OPTIONS="--import=$PWD/test/support/cpu-variant.mjs" TYPED_EVAL_TEST_CPU_VARIANT=x64 <command>
 *
 * (what `make test CPU_VARIANT=x64` sets). Every Node process that inherits
 * the environment takes it: vitest, its workers and the CLIs the tests
 * spawn. A variant this CPU cannot run scores 0, so none loads and the
 * command fails to load llama.cpp: never a silent fallback to another one.
 * With `TYPED_EVAL_TEST_CPU_REPORT=<file>` (forced or not), each process
 * that loaded a CPU back end appends `<pid> <variant>` to the file when it
 * exits, read from its own memory map: the proof of which variant ran.
 *
 * Plain JavaScript, not TypeScript: `--import` loads it before any loader
 * that strips types. Linux only (it reads /proc and the Linux packages).
 */
import { appendFileSync, copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { registerHooks } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const VARIANT = process.env["TYPED_EVAL_TEST_CPU_VARIANT"];
const REPORT = process.env["TYPED_EVAL_TEST_CPU_REPORT"];
const ARCH = process.arch === "arm" ? "armv7l" : process.arch;
/** The CPU package node-llama-cpp imports on this platform (its `getPrebuiltBinariesPackageDirectoryForBuildOptions`). */
const PACKAGE = `@node-llama-cpp/${process.platform}-${ARCH}`;
const CPU_LIBRARY = /^libggml-cpu-(.+)\.so$/;

/** The CPU variants whose back end this process has loaded, from its memory map. */
export function loadedCpuVariants(pid = "self") {
  let maps = "";
  try {
    maps = readFileSync(`/proc/${pid}/maps`, "utf8");
  } catch {
    return [];
  }
  const names = new Set();
  for (const line of maps.split("\n")) {
    const file = line.slice(line.lastIndexOf("/") + 1);
    const m = CPU_LIBRARY.exec(file);
    if (m) names.add(m[1]);
  }
  return [...names].sort();
}

/** A copy of the package at `packageDir` whose binary folder holds one CPU variant; made once per version and variant. */
function singleVariantCopy(packageDir, variant) {
  const { name, version } = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8"));
  const binsDir = join(packageDir, "bins", `${process.platform}-${ARCH}`);
  const available = readdirSync(binsDir)
    .map((f) => CPU_LIBRARY.exec(f)?.[1])
    .filter((v) => v !== undefined);
  if (!available.includes(variant)) {
    throw new Error(`TYPED_EVAL_TEST_CPU_VARIANT=${variant}: ${name} ${version} has no such CPU variant (it has ${available.sort().join(", ")})`);
  }
  const target = join(tmpdir(), "typed-eval-cpu-variants", `${name.replace("/", "+")}-${version}-${variant}`);
  if (existsSync(join(target, "package.json"))) return target;
  // Built aside, then renamed: a process that finds the folder finds it whole (several start at once).
  const staging = `${target}.${process.pid}.tmp`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(join(staging, "bins", `${process.platform}-${ARCH}`), { recursive: true });
  cpSync(join(packageDir, "dist"), join(staging, "dist"), { recursive: true });
  for (const file of readdirSync(binsDir)) {
    const v = CPU_LIBRARY.exec(file)?.[1];
    if (v === undefined || v === variant) copyFileSync(join(binsDir, file), join(staging, "bins", `${process.platform}-${ARCH}`, file));
  }
  // package.json last: its presence marks a finished copy.
  copyFileSync(join(packageDir, "package.json"), join(staging, "package.json"));
  try {
    renameSync(staging, target);
  } catch (error) {
    // Another process renamed its copy first: use that one.
    rmSync(staging, { recursive: true, force: true });
    if (!existsSync(join(target, "package.json"))) throw error;
  }
  return target;
}

// Once per process, even if a test imports this module again (for loadedCpuVariants) after `--import` ran it.
if (!globalThis.__typedEvalCpuVariantHook) {
  globalThis.__typedEvalCpuVariantHook = true;
  if (VARIANT) forceVariant(VARIANT);
  if (REPORT) {
    process.on("exit", () => {
      const loaded = loadedCpuVariants();
      if (loaded.length > 0) appendFileSync(REPORT, `${process.pid} ${loaded.join(",")}\n`);
    });
  }
}

/** Sends node-llama-cpp's import of the CPU package to a copy holding only `variant`. */
function forceVariant(variant) {
  if (process.platform !== "linux") throw new Error("TYPED_EVAL_TEST_CPU_VARIANT works on Linux only (it reads /proc and swaps the Linux binary package)");
  if (typeof registerHooks !== "function")
    throw new Error(`TYPED_EVAL_TEST_CPU_VARIANT needs module.registerHooks (Node 22.15 or later; this is ${process.version})`);
  registerHooks({
    resolve(specifier, context, next) {
      if (specifier !== PACKAGE) return next(specifier, context);
      const real = next(specifier, context);
      // .../node_modules/@node-llama-cpp/linux-x64/dist/index.js -> the package folder
      const packageDir = dirname(dirname(fileURLToPath(real.url)));
      const copy = singleVariantCopy(packageDir, variant);
      return { ...real, url: pathToFileURL(join(copy, "dist", "index.js")).href, shortCircuit: true };
    },
  });
}
