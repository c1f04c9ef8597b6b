/** Opens an embedded model from the registry: file (downloaded when missing), engine, evaluator. */
import { existsSync, realpathSync, statSync } from "node:fs";
import { LlamaEngine, type GpuChoice } from "../engines/llama.js";
import { cachedSha256, pullModel, type Progress } from "../models/download.js";
import { basename } from "node:path";
import { secret } from "../api/env.js";
import { defaultModelsDir, fileModelId, RegistryError, versionedId, type ModelRegistry } from "../models/registry.js";

import { LocalEvaluator } from "./local.js";
import { detectTemplate, TEMPLATES, type ChatTemplate } from "./prompt.js";
import type { ModelEntry } from "../models/registry.js";
import type { Evaluator } from "./evaluator.js";
import { RemoteEvaluator, type RemoteOptions } from "./remote.js";
import { ModelRouter } from "./router.js";
import { InvocationError } from "../api/errors.js";
import { describeSystemError } from "../api/system-errors.js";

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
  /** llama.cpp backend (default "auto": a GPU when a GPU build loads, else the CPU). */
  gpu?: GpuChoice | undefined;
  /** Told which backend each loaded model runs on, for the log. */
  onBackend?: (backend: string, model: string) => void;
}

/** The default context per sequence: enough for most states, without reserving a 32k KV cache per sequence. */
export const DEFAULT_CONTEXT = 8192;

/**
 * Every remote evaluator is built here, whether from `--base-url` or a
 * registry entry. Retries: on its own it follows the client convention of
 * spec section 7 (`ask`, `serve` forwarding); the batch runner asks it for one
 * attempt at a time (`EvaluateOptions.once`) and retries through its limiter.
 */
export function endpointEvaluator(options: RemoteOptions): RemoteEvaluator {
  return new RemoteEvaluator(options);
}

/** A remote registry entry as an evaluator; its key comes from the environment variable the entry names. */
export function remoteEvaluator(registry: ModelRegistry, entry: ModelEntry): RemoteEvaluator {
  const apiKey = entry.api_key_env ? secret(entry.api_key_env) : undefined;
  if (entry.api_key_env && !apiKey) {
    throw new RegistryError(`model ${entry.name} reads its API key from $${entry.api_key_env}, which is not set`);
  }
  return endpointEvaluator({ baseUrl: entry.base_url as string, apiKey, model: entry.remote_model ?? entry.name, metadata: registry.metadata(entry) });
}

/** Opens every named model (local ones loaded, remote ones as clients) behind one router. */
export async function openModels(names: readonly string[], options: Omit<OpenLocalOptions, "model">): Promise<ModelRouter> {
  const { registry } = options;
  const entries = [...new Set(names.map((n) => registry.resolve(n)))];
  if (options.modelPath && entries.filter((e) => e.engine !== "remote").length > 1) {
    throw new RegistryError("--model-path names one GGUF file: it can stand in for one local model only");
  }
  const routes: { names: string[]; evaluator: Evaluator }[] = [];
  try {
    for (const entry of entries) {
      const evaluator = entry.engine === "remote" ? remoteEvaluator(registry, entry) : await openLocal(entry, options);
      // A file that is not the registry's weights answers to its own name and the aliases, never the registry's versioned id.
      const own = evaluator.models().map((m) => m.name);
      const fromFile = own[0] !== undefined && own[0] !== entry.name && entry.engine !== "remote";
      routes.push({ names: fromFile ? own : registry.namesOf(entry), evaluator });
    }
  } catch (error) {
    await Promise.all(routes.map((r) => r.evaluator.close()));
    throw error;
  }
  return new ModelRouter(routes);
}

/** Loads one registry model as an evaluator that accepts all its names. */
export async function openLocalModel(options: OpenLocalOptions): Promise<ModelRouter> {
  return openModels([options.model], options);
}

async function openLocal(entry: ModelEntry, options: Omit<OpenLocalOptions, "model">): Promise<LocalEvaluator> {
  const { registry } = options;
  const file = options.modelPath ?? registry.modelFile(entry, options.modelsDir);
  if (!existsSync(file)) {
    if (options.modelPath) throw new RegistryError(`model file ${options.modelPath} does not exist`);
    if (options.download === false) {
      throw new RegistryError(`model ${entry.name} is not downloaded (${file}); run: typed-eval models pull ${entry.name}`);
    }
    await pullModel(entry, file, options.onProgress ? { onProgress: options.onProgress } : {});
  }
  if (!statSync(file).isFile()) throw new RegistryError(`model file ${file} is a directory, not a GGUF file: name the .gguf file in it`);
  // A file given by --model-path is the registry's model only when its bytes are the registry's.
  const sha256 = options.modelPath ? await cachedSha256(file, options.modelsDir ?? defaultModelsDir()) : entry.source?.sha256;
  const registryWeights = !options.modelPath || (entry.source !== undefined && entry.source.sha256 === sha256);
  let engine: LlamaEngine;
  try {
    engine = await LlamaEngine.load({
      modelPath: file,
      contextSize: Math.min(entry.context_size, options.contextSize ?? DEFAULT_CONTEXT),
      ...(options.threads ? { threads: options.threads } : {}),
      ...(options.gpu ? { gpu: options.gpu } : {}),
      ...(options.sequences ? { sequences: options.sequences } : {}),
    });
  } catch (error) {
    if (error instanceof InvocationError) throw error;
    // llama.cpp says only "Failed to load model" for a truncated or unsupported file: name the file.
    const why = describeSystemError(error) ?? `${(error as Error).message} (a truncated or unsupported GGUF file, or too little memory)`;
    throw new RegistryError(`cannot load model file ${file}: ${why}`, { cause: error });
  }
  // The one name of the model that runs: the registry's versioned id for its own weights, else the file's (registry.ts).
  const id = registryWeights ? versionedId(entry) : fileModelId(engine.modelName, file, sha256 as string);
  options.onBackend?.(engine.backend, id);
  const template: ChatTemplate = entry.template ? (TEMPLATES[entry.template] as ChatTemplate) : detectTemplate(engine.chatTemplate);
  if (registryWeights) {
    return new LocalEvaluator(engine, {
      id,
      weights: weightsOf(file, sha256),
      temperature: entry.temperature,
      template,
      metadata: registry.metadata(entry),
      price: entry.price_per_million_input_tokens,
    });
  }
  // Another file: named from its own metadata and bytes, never as the registry's model, and priced at 0.
  const stat = statSync(file);
  const described = `${basename(file)}${engine.modelName ? ` (general.name: ${engine.modelName})` : ""}, sha256 ${(sha256 as string).slice(0, 16)}…, run with --model-path`;
  return new LocalEvaluator(engine, {
    id,
    weights: weightsOf(file, sha256),
    temperature: entry.temperature,
    template,
    metadata: [id, ...registry.namesOf(entry).filter((n) => n !== versionedId(entry))].map((name) => ({
      name,
      description: name === id ? described : `stands for ${id}: ${described}`,
      release_date: new Date(stat.mtimeMs).toISOString().slice(0, 10),
    })),
    price: 0,
  });
}

/**
 * Which weights a file holds, for resume: the registry's SHA-256 for its own
 * verified download, else the file's real path, size and modification time
 * (hashing a multi-gigabyte file on every run would cost seconds).
 */
function weightsOf(file: string, sha256: string | undefined): string {
  if (sha256) return `sha256:${sha256}`;
  const stat = statSync(file);
  return `file:${realpathSync(file)}:${stat.size}:${Math.trunc(stat.mtimeMs)}`;
}
