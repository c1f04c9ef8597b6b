/** Options every command that runs an embedded model shares, and opening the model from them. */
import type { Argv } from "yargs";
import type { ModelRouter } from "../evaluator/router.js";
import { openModels, DEFAULT_CONTEXT } from "../evaluator/factory.js";
import { CONTEXT_STEP } from "../engines/llama.js";
import { ModelRegistry } from "../models/registry.js";
import { progressBar } from "./progress.js";
import { numeric } from "./checks.js";
import { GPU_CHOICES, type GpuChoice } from "../engines/llama.js";
import { cliLogger } from "./logger.js";
import { env } from "../api/env.js";
import type { ArgsOf } from "./args.js";

/** The model options, declared once: their types are `ModelArgs`. */
export function withModelOptions<T>(y: Argv<T>) {
  return y
    .option("model", { type: "string", default: "default", describe: "model name, alias or versioned id (see `typed-eval models list`)" })
    .option("model-path", {
      type: "string",
      default: env("TYPED_EVAL_MODEL_PATH"),
      defaultDescription: "$TYPED_EVAL_MODEL_PATH",
      describe: "a local GGUF file to run instead of downloading the model (works offline)",
    })
    .option("models-file", {
      type: "string",
      default: env("TYPED_EVAL_MODELS_FILE"),
      defaultDescription: "$TYPED_EVAL_MODELS_FILE",
      describe: "a JSON model registry that extends the bundled one",
    })
    .option("gpu", {
      choices: GPU_CHOICES,
      default: defaultGpu(),
      defaultDescription: "$TYPED_EVAL_GPU, else auto",
      describe: "llama.cpp backend: auto uses a GPU build when one loads and the CPU otherwise; off is the CPU",
    })
    .option("threads", numeric("threads", { integer: true, min: 1, max: 1024 }, { describe: "CPU threads (default: every core)" }))
    .option(
      "context-size",
      numeric(
        "context-size",
        { integer: true, min: CONTEXT_STEP, max: 1_048_576 },
        { describe: `tokens per sequence (default: the model's, at most ${DEFAULT_CONTEXT})` },
      ),
    );
}

export type ModelArgs = ArgsOf<typeof withModelOptions>;

/** The default backend: `$TYPED_EVAL_GPU` (checked in api/env.ts), else auto. */
export function defaultGpu(): GpuChoice {
  return env("TYPED_EVAL_GPU");
}

/** One log line naming the backend a model runs on. */
export function logBackend(backend: string, model: string): void {
  cliLogger().info({ backend, model }, `llama.cpp backend for ${model}: ${backend === "cpu" ? "CPU" : `${backend} (GPU, layers offloaded)`}`);
}

/**
 * Loads the models the arguments name (`args.model`, or `models` when given:
 * `serve --models`), downloading each with a progress bar on first use. The
 * one way `ask`, `run`, `estimate`, `calibrate` and `serve` open models.
 */
export async function openModelFromArgs(
  args: ModelArgs,
  options: { announce?: boolean; models?: readonly string[]; sequences?: number | undefined } = {},
): Promise<ModelRouter> {
  const registry = ModelRegistry.load({ file: args["models-file"] });
  let bar: ReturnType<typeof progressBar> | undefined;
  const names = options.models && options.models.length > 0 ? options.models : [args.model];
  const router = await openModels(names, {
    registry,
    modelPath: args["model-path"],
    threads: args.threads,
    contextSize: args["context-size"],
    gpu: args.gpu,
    ...(options.sequences ? { sequences: options.sequences } : {}),
    ...(options.announce ? { onBackend: logBackend } : {}),
    onProgress: (done, total) => {
      bar ??= progressBar(names.length === 1 ? `downloading ${registry.resolve(names[0] as string).name}` : "downloading model", "bytes");
      bar.update(done, total);
    },
  });
  bar?.finish();
  return router;
}
