import { existsSync, statSync } from "node:fs";
import type { Argv, CommandModule } from "yargs";
import type { ArgsOf } from "./args.js";
import { pullModel, sha256File } from "../models/download.js";
import { defaultModelsDir, ModelRegistry, versionedId } from "../models/registry.js";
import { env } from "../api/env.js";
import { VerdictError } from "../api/verdict.js";
import { GPU_CHOICES, probeBackend } from "../engines/llama.js";
import { defaultGpu } from "./model-options.js";
import { progressBar } from "./progress.js";

function withListOptions<T>(y: Argv<T>) {
  return y
    .option("models-file", { type: "string", default: env("TYPED_EVAL_MODELS_FILE"), describe: "extra registry file" })
    .option("json", { type: "boolean", default: false, describe: "print JSON" })
    .option("gpu", {
      choices: GPU_CHOICES,
      default: defaultGpu(),
      defaultDescription: "$TYPED_EVAL_GPU, else auto",
      describe: "the backend choice to check",
    });
}

const listCommand: CommandModule<object, ArgsOf<typeof withListOptions>> = {
  command: "list",
  describe: "List the models of the registry and whether each is on this machine",
  builder: withListOptions,
  handler: async (args) => {
    const registry = ModelRegistry.load({ file: args["models-file"] });
    const rows = registry.entries.map((entry) => {
      const file = registry.modelFile(entry);
      return {
        name: entry.name,
        id: versionedId(entry),
        aliases: entry.aliases,
        description: entry.description,
        release_date: entry.release_date,
        price_per_million_input_tokens: entry.price_per_million_input_tokens,
        file,
        downloaded: existsSync(file),
      };
    });
    if (args.json) {
      process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
      return;
    }
    for (const r of rows) {
      process.stdout.write(
        `${r.id}  aliases: ${r.aliases.join(", ") || "-"}  $${r.price_per_million_input_tokens}/M input tokens  ${r.downloaded ? "downloaded" : "not downloaded"}\n  ${r.description}\n  ${r.file}\n`,
      );
    }
    process.stdout.write(`llama.cpp backend with --gpu ${args.gpu}: ${await probeBackend(args.gpu)}\n`);
  },
};

function withPullOptions<T>(y: Argv<T>) {
  return y
    .positional("name", { type: "string", default: "default", describe: "model name, alias or versioned id" })
    .option("models-file", { type: "string", default: env("TYPED_EVAL_MODELS_FILE"), describe: "extra registry file" })
    .option("models-dir", { type: "string", default: defaultModelsDir(), describe: "where models are stored ($TYPED_EVAL_MODELS_DIR)" });
}

const pullCommand: CommandModule<object, ArgsOf<typeof withPullOptions>> = {
  command: "pull [name]",
  describe: "Download a model's weights and verify their SHA-256",
  builder: withPullOptions,
  handler: async (args) => {
    const registry = ModelRegistry.load({ file: args["models-file"] });
    const entry = registry.resolve(args.name);
    const file = registry.modelFile(entry, args["models-dir"]);
    if (existsSync(file)) {
      if (entry.source) {
        const digest = await sha256File(file);
        if (digest !== entry.source.sha256) {
          // Exit 1, as for failed inputs: the file is there but is not the registry's (a truncated copy, another file).
          throw new VerdictError("failures", `${file}: SHA-256 ${digest} does not match the registry's ${entry.source.sha256}; delete it and pull again`);
        }
      }
      process.stdout.write(`${versionedId(entry)} is already at ${file} (${statSync(file).size} bytes, verified)\n`);
      return;
    }
    const bar = progressBar(`downloading ${entry.name}`, "bytes");
    await pullModel(entry, file, { onProgress: (done, total) => bar.update(done, total) });
    bar.finish("SHA-256 verified");
    process.stdout.write(`${versionedId(entry)} saved to ${file}\n`);
  },
};

/** `typed-eval models list|pull`. */
export const modelsCommand: CommandModule = {
  command: "models <command>",
  describe: "List and download models",
  builder: (y) => y.command(listCommand).command(pullCommand).demandCommand(1),
  handler: () => undefined,
};
