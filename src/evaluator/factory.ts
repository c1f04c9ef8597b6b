/** Opens an embedded model from the registry: file (downloaded when missing), engine, evaluator. */
import { existsSync } from "node:fs";
import { LlamaEngine } from "../engines/llama.js";
import { pullModel, type Progress } from "../models/download.js";
import { RegistryError, versionedId, type ModelRegistry } from "../models/registry.js";
import { LocalEvaluator } from "./local.js";
import { detectTemplate, TEMPLATES, type ChatTemplate } from "./prompt.js";
import { ModelRouter } from "./router.js";

export interface OpenLocalOptions {
  registry: ModelRegistry;
  /** Name, alias or versioned id. */
  model: string;
  /** A local GGUF to use instead of the registry's file: no download, fully offline. */
  modelPath?: string | undefined;
  modelsDir?: string | undefined;
  /** Download the weights when they are missing (default true). */
  download?: boolean;
  onProgress?: Progress;
  threads?: number | undefined;
  sequences?: number | undefined;
  /** Tokens per sequence; default the model's context, at most 8,192. */
  contextSize?: number | undefined;
}

/** The default context per sequence: enough for most states, without reserving a 32k KV cache per sequence. */
export const DEFAULT_CONTEXT = 8192;

/** Loads one registry model as an evaluator that accepts all its names. */
export async function openLocalModel(options: OpenLocalOptions): Promise<ModelRouter> {
  const { registry } = options;
  const entry = registry.resolve(options.model);
  const file = options.modelPath ?? registry.modelFile(entry, options.modelsDir);
  if (!existsSync(file)) {
    if (options.modelPath) throw new RegistryError(`model file ${options.modelPath} does not exist`);
    if (options.download === false) {
      throw new RegistryError(`model ${entry.name} is not downloaded (${file}); run: typed-eval models pull ${entry.name}`);
    }
    await pullModel(entry, file, options.onProgress ? { onProgress: options.onProgress } : {});
  }
  const engine = await LlamaEngine.load({
    modelPath: file,
    contextSize: Math.min(entry.context_size, options.contextSize ?? DEFAULT_CONTEXT),
    ...(options.threads ? { threads: options.threads } : {}),
    ...(options.sequences ? { sequences: options.sequences } : {}),
  });
  const template: ChatTemplate = entry.template ? (TEMPLATES[entry.template] as ChatTemplate) : detectTemplate(engine.chatTemplate);
  const evaluator = new LocalEvaluator(engine, {
    id: versionedId(entry),
    temperature: entry.temperature,
    template,
    metadata: registry.metadata(entry),
  });
  return new ModelRouter([{ names: registry.namesOf(entry), evaluator }]);
}
