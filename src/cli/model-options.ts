/** Options every command that runs an embedded model shares, and opening the model from them. */
import type { Argv } from "yargs";
import type { ModelRouter } from "../evaluator/router.js";
import { openLocalModel } from "../evaluator/factory.js";
import { ModelRegistry } from "../models/registry.js";
import { progressBar } from "./progress.js";
import { numeric } from "./checks.js";

export interface ModelArgs {
  model: string;
  "model-path": string | undefined;
  "models-file": string | undefined;
  threads: number | undefined;
  "context-size": number | undefined;
}

export function withModelOptions<T>(y: Argv<T>): Argv<T & ModelArgs> {
  return y
    .option("model", { type: "string", default: "default", describe: "model name, alias or versioned id (see `typed-eval models list`)" })
    .option("model-path", {
      type: "string",
      default: process.env["TYPED_EVAL_MODEL_PATH"],
      defaultDescription: "$TYPED_EVAL_MODEL_PATH",
      describe: "a local GGUF file to run instead of downloading the model (works offline)",
    })
    .option("models-file", {
      type: "string",
      default: process.env["TYPED_EVAL_MODELS_FILE"],
      defaultDescription: "$TYPED_EVAL_MODELS_FILE",
      describe: "a JSON model registry that extends the bundled one",
    })
    .option("threads", numeric("threads", { integer: true, min: 1, max: 1024 }, { describe: "CPU threads (default: every core)" }))
    .option("context-size", numeric("context-size", { integer: true, min: 64, max: 1_048_576 }, { describe: "tokens per sequence (default: the model's, at most 8192)" })) as Argv<T & ModelArgs>;
}

/** Loads the model the arguments name, downloading it with a progress bar on first use. */
export async function openModelFromArgs(args: ModelArgs): Promise<ModelRouter> {
  const registry = ModelRegistry.load({ file: args["models-file"] });
  let bar: ReturnType<typeof progressBar> | undefined;
  const router = await openLocalModel({
    registry,
    model: args.model,
    modelPath: args["model-path"],
    threads: args.threads,
    contextSize: args["context-size"],
    onProgress: (done, total) => {
      bar ??= progressBar(`downloading ${registry.resolve(args.model).name}`, "bytes");
      bar.update(done, total);
    },
  });
  bar?.finish();
  return router;
}
