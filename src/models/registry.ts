/**
 * The model registry: a JSON file of models, each with a name, aliases, a
 * version, where its weights come from, and what it costs. The bundled file
 * can be extended or overridden by a user file (`TYPED_EVAL_MODELS_FILE`).
 */
import { describeIssues, InvocationError } from "../api/errors.js";
import { readJsonFile } from "../api/json.js";
import { env } from "../api/env.js";
import { homedir } from "node:os";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { Type, type Static } from "@sinclair/typebox";
import type { ModelMetadata } from "../api/schema.js";
import { validateAgainst } from "../api/validate.js";
import bundled from "./models.json" with { type: "json" };

export const ModelEntry = Type.Object(
  {
    name: Type.String({ description: "Canonical name; `<name>-<version>` is the versioned id." }),
    aliases: Type.Array(Type.String()),
    version: Type.String({ description: "major.minor.patch" }),
    description: Type.String(),
    release_date: Type.String({ description: "YYYY-MM-DD" }),
    engine: Type.Union([Type.Literal("llama"), Type.Literal("remote")], {
      description: "llama: embedded llama.cpp; remote: any /v1/systemone endpoint",
    }),
    source: Type.Optional(
      Type.Object({
        uri: Type.String({ description: "hf://owner/repo/file.gguf or an https:// URL" }),
        sha256: Type.String(),
        size: Type.Optional(Type.Integer({ minimum: 1 })),
      }),
    ),
    path: Type.Optional(Type.String({ description: "A local GGUF file; relative to the registry file." })),
    base_url: Type.Optional(Type.String({ description: "remote: the endpoint's base URL (without /v1/systemone)" })),
    remote_model: Type.Optional(Type.String({ description: "remote: the model name to send; default this entry's name" })),
    api_key_env: Type.Optional(Type.String({ description: "remote: the environment variable holding the endpoint's API key" })),
    context_size: Type.Integer({ minimum: 256 }),
    temperature: Type.Number({ description: "Calibration temperature for label probabilities." }),
    template: Type.Optional(Type.String({ description: "chatml, llama3, gemma or plain; default: detected from the GGUF." })),
    price_per_million_input_tokens: Type.Number({ minimum: 0 }),
  },
  { additionalProperties: true },
);
export type ModelEntry = Static<typeof ModelEntry>;

const RegistryFile = Type.Object({ models: Type.Array(ModelEntry) }, { additionalProperties: true });
type RegistryFile = Static<typeof RegistryFile>;

const TEMPLATE_NAMES = new Set(["chatml", "llama3", "gemma", "plain"]);

/** A registry file that fails its checks; the message lists every problem. */
export class RegistryError extends InvocationError {
  override name = "RegistryError";
}

/** The id a response reports: `<name>-<major.minor.patch>`. */
export function versionedId(entry: ModelEntry): string {
  return `${entry.name}-${entry.version}`;
}

/** `<name>-<major.minor.patch>` (spec section 9): the form of every `model` a response reports. */
export const VERSIONED_ID = /^(.+)-(\d+)\.(\d+)\.(\d+)$/;

/** The version a model run from a file reports: it has no release of its own; the hash in its name tells files apart. */
export const FILE_MODEL_VERSION = "0.0.0";

/**
 * The versioned id of a model run from a file (`--model-path`) that is not a
 * registry entry's weights: its GGUF `general.name` (or file name) as a slug,
 * then 8 hex digits of its SHA-256, then version 0.0.0, such as
 * `qwen2.5-0.5b-instruct-ab12cd34-0.0.0`. The hash in the name part tells two
 * files apart (and with the full hash in the identity, keys resume); 0.0.0
 * says "no release", so the id keeps the `<name>-<major.minor.patch>` form
 * clients parse and send back.
 */
export function fileModelId(generalName: string | undefined, file: string, sha256: string): string {
  const base = (generalName ?? basename(file).replace(/\.gguf$/i, ""))
    .toLowerCase()
    .replace(/[^a-z0-9.]+/g, "-")
    .replace(/^-+|-+$/g, "");
  return `${base || "model"}-${sha256.slice(0, 8)}-${FILE_MODEL_VERSION}`;
}

function check(file: RegistryFile, origin: string): string[] {
  const problems: string[] = [];
  file.models.forEach((m, i) => {
    const at = `${origin}: models[${i}] (${m.name})`;
    if (!/^\d+\.\d+\.\d+$/.test(m.version)) problems.push(`${at}: version "${m.version}" is not major.minor.patch`);
    if (!/^\d{4}-\d{2}-\d{2}$/.test(m.release_date)) problems.push(`${at}: release_date "${m.release_date}" is not YYYY-MM-DD`);
    if (!(m.temperature > 0 && Number.isFinite(m.temperature))) problems.push(`${at}: temperature must be positive`);
    if (m.engine === "remote") {
      if (!m.base_url || !/^https?:\/\/.+/.test(m.base_url)) problems.push(`${at}: a remote model needs base_url, an http(s) URL`);
    } else if (!m.source && !m.path) {
      problems.push(`${at}: needs a source (uri and sha256) or a path`);
    }
    if (m.source && !/^[0-9a-f]{64}$/.test(m.source.sha256)) problems.push(`${at}: source.sha256 must be 64 lowercase hex digits`);
    if (m.source && !/^(hf:\/\/[^/]+\/[^/]+\/.+|https?:\/\/.+)$/.test(m.source.uri)) {
      problems.push(`${at}: source.uri "${m.source.uri}" is neither hf://owner/repo/file nor an http(s) URL`);
    }
    if (m.template !== undefined && !TEMPLATE_NAMES.has(m.template)) {
      problems.push(`${at}: template "${m.template}" is not one of ${[...TEMPLATE_NAMES].join(", ")}`);
    }
  });
  return problems;
}

function parse(json: unknown, origin: string): RegistryFile {
  const result = validateAgainst<RegistryFile>(RegistryFile, json, [origin]);
  if (!result.ok) {
    throw new RegistryError(describeIssues(result.errors, "\n"));
  }
  return result.value;
}

export interface RegistryOptions {
  /** A user registry file whose entries replace bundled ones of the same name and add the rest. */
  file?: string | undefined;
}

export class ModelRegistry {
  private readonly byName = new Map<string, ModelEntry>();
  /** Where each entry's relative `path` is resolved from. */
  private readonly baseDir = new Map<ModelEntry, string>();

  constructor(
    readonly entries: readonly ModelEntry[],
    baseDirs: ReadonlyMap<ModelEntry, string> = new Map(),
  ) {
    const problems: string[] = [];
    for (const entry of entries) {
      this.baseDir.set(entry, baseDirs.get(entry) ?? process.cwd());
      for (const name of new Set([entry.name, ...entry.aliases, versionedId(entry)])) {
        const other = this.byName.get(name);
        if (other) problems.push(`name "${name}" belongs to both ${other.name} and ${entry.name}`);
        this.byName.set(name, entry);
      }
    }
    if (problems.length > 0) throw new RegistryError(problems.join("\n"));
  }

  /** The bundled registry, extended by `options.file` or `TYPED_EVAL_MODELS_FILE`. */
  static load(options: RegistryOptions = {}): ModelRegistry {
    const own = parse(bundled, "models.json");
    const problems = check(own, "models.json");
    const userFile = options.file ?? env("TYPED_EVAL_MODELS_FILE");
    const dirs = new Map<ModelEntry, string>();
    let entries = own.models;
    if (userFile) {
      const json = readJsonFile(userFile, "model registry", RegistryError);
      const extra = parse(json, basename(userFile));
      problems.push(...check(extra, userFile));
      const replaced = new Set(extra.models.map((m) => m.name));
      entries = [...entries.filter((m) => !replaced.has(m.name)), ...extra.models];
      for (const m of extra.models) dirs.set(m, dirname(resolve(userFile)));
    }
    if (problems.length > 0) throw new RegistryError(problems.join("\n"));
    return new ModelRegistry(entries, dirs);
  }

  /** The entry a name, alias or versioned id selects; undefined when none. */
  find(name: string): ModelEntry | undefined {
    return this.byName.get(name);
  }

  /** Like `find`, but an unknown name is an error that lists the known ones. */
  resolve(name: string): ModelEntry {
    const entry = this.find(name);
    if (!entry) throw new RegistryError(`unknown model "${name}"; known: ${this.names().join(", ")}`);
    return entry;
  }

  /** Every accepted name: canonical names, aliases and versioned ids. */
  names(): string[] {
    return [...this.byName.keys()].sort();
  }

  /** Names that select `entry`. */
  namesOf(entry: ModelEntry): string[] {
    return [...new Set([entry.name, ...entry.aliases, versionedId(entry)])];
  }

  /** The listing of spec section 2.5: the aliases (and canonical name) with description and release date. */
  metadata(entry: ModelEntry): ModelMetadata[] {
    return [entry.name, ...entry.aliases].map((name) => ({
      name,
      description: entry.description,
      release_date: entry.release_date,
    }));
  }

  /** The local path of an entry's weights: its `path`, or its download location in `modelsDir`. */
  modelFile(entry: ModelEntry, modelsDir: string = defaultModelsDir()): string {
    if (entry.path) return isAbsolute(entry.path) ? entry.path : resolve(this.baseDir.get(entry) ?? process.cwd(), entry.path);
    if (!entry.source) throw new RegistryError(`model ${entry.name} has neither a path nor a source`);
    return join(modelsDir, basename(new URL(entry.source.uri.replace(/^hf:\/\//, "https://hf/")).pathname));
  }
}

/** Where downloads go: `TYPED_EVAL_MODELS_DIR`, else the user cache folder. */
export function defaultModelsDir(): string {
  const own = env("TYPED_EVAL_MODELS_DIR");
  if (own) return own;
  const cache = env("XDG_CACHE_HOME") ?? join(homedir(), ".cache");
  return join(cache, "typed-eval", "models");
}
