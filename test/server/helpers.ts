/** Shared set-up for server tests: a real tiny-model evaluator, accounts, and one way to call over inject or HTTP. */
import { Writable } from "node:stream";
import type { FastifyInstance } from "fastify";
import { LlamaEngine } from "../../src/engines/llama.js";
import { LocalEvaluator } from "../../src/evaluator/local.js";
import { detectTemplate } from "../../src/evaluator/prompt.js";
import { ModelRouter } from "../../src/evaluator/router.js";
import { createLogger, type Logger } from "../../src/logging/logger.js";
import { AccountStore, hashKey, type AccountsFile } from "../../src/server/accounts.js";
import { generatedModel, TINY } from "../support/models.js";

export const KEYS = {
  all: "te_all_models_key_0123456789abcdef",
  tinyOnly: "te_tiny_only_key_0123456789abcdef",
  slow: "te_three_per_minute_0123456789ab",
  frugal: "te_few_tokens_per_second_0123456",
};

function account(name: string, key: string, models: string[], limits?: AccountsFile["accounts"][number]["limits"]) {
  const sha256 = hashKey(key);
  return { name, models, keys: [{ id: sha256.slice(0, 12), sha256, created: "2026-11-21T00:00:00Z" }], ...(limits ? { limits } : {}) };
}

export function testAccounts(): AccountStore {
  return new AccountStore({
    accounts: [
      account("acme", KEYS.all, ["*"]),
      account("tiny-shop", KEYS.tinyOnly, ["tiny"]),
      account("slowpoke", KEYS.slow, ["*"], { requests_per_minute: 3 }),
      account("frugal", KEYS.frugal, ["*"], { tokens_per_second: 1000 }),
    ],
  });
}

/** Two real local models over one engine: "tiny" and "other", so that 403 paths have somewhere to point. */
export async function testRouter(threads?: number): Promise<{ router: ModelRouter; engine: LlamaEngine }> {
  const engine = await LlamaEngine.load({ modelPath: generatedModel(TINY), contextSize: 8192, sequences: 2, ...(threads ? { threads } : {}) });
  const template = detectTemplate(engine.chatTemplate);
  const meta = (name: string) => ({ name, description: `${name} test model`, release_date: "2026-11-21" });
  const tiny = new LocalEvaluator(engine, { id: "tiny-1.0.0", temperature: 1, template, metadata: [meta("tiny"), meta("tiny-latest")] });
  const other = new LocalEvaluator(engine, { id: "other-2.0.0", temperature: 2, template, metadata: [meta("other")] });
  const router = new ModelRouter([
    { names: ["tiny", "tiny-latest", "tiny-1.0.0"], evaluator: tiny },
    { names: ["other", "other-2.0.0"], evaluator: other },
  ]);
  return { router, engine };
}

/** A logger whose lines the test can read. */
export function memoryLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: createLogger({ destination, level: "info" }), lines };
}

export interface Reply {
  status: number;
  headers: Record<string, string>;
  json: unknown;
  text: string;
}

export interface CallOptions {
  key?: string | null;
  body?: unknown;
  /** A raw body, sent as is. */
  raw?: string;
  contentType?: string | null;
  headers?: Record<string, string>;
}

export type Transport = "inject" | "http";

/** One call through `inject` or real HTTP, with the same shape back. */
export async function call(app: FastifyInstance, transport: Transport, method: string, url: string, options: CallOptions = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...options.headers };
  const key = options.key === undefined ? KEYS.all : options.key;
  if (key !== null) headers["authorization"] = `Bearer ${key}`;
  const payload = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
  const contentType = options.contentType === undefined ? (payload === undefined ? null : "application/json") : options.contentType;
  if (contentType !== null) headers["content-type"] = contentType;
  if (transport === "inject") {
    const res = await app.inject({ method: method as "GET", url, headers, ...(payload !== undefined ? { payload } : {}) });
    const flat = Object.fromEntries(Object.entries(res.headers).map(([k, v]) => [k, String(v)]));
    let json: unknown;
    try {
      json = res.json();
    } catch {
      json = undefined;
    }
    return { status: res.statusCode, headers: flat, json, text: res.body };
  }
  const address = app.server.address();
  if (!address || typeof address === "string") throw new Error("server is not listening");
  const res = await fetch(`http://127.0.0.1:${address.port}${url}`, { method, headers, ...(payload !== undefined ? { body: payload } : {}) });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: Object.fromEntries(res.headers.entries()), json, text };
}
