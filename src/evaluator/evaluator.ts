/**
 * The one interface joining everything: a request in, a response out. The
 * runner and the server never know whether the answers come from an embedded
 * model or a remote endpoint.
 */
import { UnprocessableEntityError } from "../api/errors.js";
import type { EvaluatorRequest, EvaluatorResponse, ModelMetadata, ValidationErrorItem } from "../api/schema.js";

/** A request that does not fit the model's context window (a 422): how many tokens it needs, and the window it was held to. */
export class ContextTooSmallError extends UnprocessableEntityError {
  constructor(
    detail: ValidationErrorItem[],
    /** Tokens the deepest of its questions needs: the prefix, the question and its longest label. */
    readonly need: number,
    readonly window: number,
  ) {
    super(detail);
  }
}

export interface EvaluateOptions {
  signal?: AbortSignal;
  /** Attempt number of a retried request (sent upstream as X-Service-Retry-Count). */
  retryCount?: number;
  /**
   * Exactly one attempt: the caller retries (the batch runner, whose limiter
   * and pacing every attempt must pass). Without it a remote evaluator follows
   * the client retry convention by itself.
   */
  once?: boolean;
  /** Per attempt, for evaluators that wait on a network; overrides their own default. */
  timeoutMs?: number;
}

/** How long, and until what, a first contact may wait. */
export interface FirstContactOptions {
  signal?: AbortSignal;
  /** The run's per-attempt timeout; the contact waits at most this long (and never more than its own bound). */
  timeoutMs?: number;
}

/** A response plus what the wire format has no field for. */
export interface Evaluation {
  response: EvaluatorResponse;
  /** Per question: the share of the next-token distribution that fell on its labels (local models only). */
  labelMass?: Record<string, number>;
  /**
   * The prompt format the answers were read from (`PROMPT_FORMAT` in
   * prompt.ts for an embedded model; a remote endpoint's as its response
   * names it, else `endpoint`): recorded with every answer.
   */
  promptFormat?: string;
}

export interface Evaluator {
  /**
   * Input tokens the request will bill, before evaluating it: exact for a
   * local model (its tokenizer), estimated for a remote one. Throws the 422s a
   * request over the token limits would get.
   */
  estimateInputTokens(request: EvaluatorRequest): number;
  /** Whether `estimateInputTokens` is exact for a model (its own tokenizer) or an approximation (a remote endpoint). */
  exactTokenCounts(model: string): boolean;
  /** Answers every question of a valid request; throws a `TypedEvalError` for anything else. */
  evaluate(request: EvaluatorRequest, options?: EvaluateOptions): Promise<Evaluation>;
  /**
   * What stands behind a model name: a string that changes whenever the
   * answers could (other weights, template, temperature, endpoint). A resumed
   * run keeps a record's answer only when it was made by the same identity.
   */
  identity(model: string): string;
  /**
   * The versioned id (`<name>-<major.minor.patch>`) a name answers as, when the evaluator knows it
   * (embedded models); a remote endpoint names its model in each response.
   */
  versionedId?(model: string): string | undefined;
  /**
   * The exact text the model reads for a request: the shared prefix, then
   * each question's suffix up to the answer position. Only evaluators that
   * render prompts themselves (embedded models) have it; a remote endpoint
   * renders its own.
   */
  promptText?(request: EvaluatorRequest): string;
  /**
   * The name of the prompt format a model's requests are rendered in, when
   * the evaluator renders them itself (embedded models: `PROMPT_FORMAT`).
   * Part of every request's hash, beside `promptFingerprint`: a run resumed
   * under another format asks again. A remote endpoint renders its own and
   * names it, if at all, in each response (`Evaluation.promptFormat`).
   */
  promptFormat?(model: string): string | undefined;
  /**
   * A fingerprint of how the evaluator renders requests with these questions
   * into what the model reads (system text, the state's framing, each unit's
   * block, reply hint and labels), for evaluators that render prompts
   * themselves: a release that rewords any of it changes the fingerprint,
   * and a resumed run asks again what the old wording answered, even when
   * the format's name was left unchanged. A remote endpoint's identity
   * already covers its rendering.
   */
  promptFingerprint?(model: string, questions: EvaluatorRequest["questions"]): string;
  /**
   * Before a run sends its first request for `model`: whether the evaluator
   * behind it can be reached and takes the key, checked at no cost (a remote
   * endpoint's `GET /v1/models`). Throws the `TypedEvalError` that says why
   * not: unreachable, the key refused (401, 403), not the API. Resolves true
   * when an endpoint was contacted: the run then sends its first request
   * alone before any other, so a refusal the check cannot see (a model the
   * key may not use) costs one request, not a batch. Absent, or false: there
   * is nothing to reach (an embedded model). A run that asks nothing (every
   * record journaled) never calls it.
   */
  firstContact?(model: string, options?: FirstContactOptions): Promise<boolean>;
  /** USD per million input tokens of a model, when the evaluator knows it (embedded models); else the caller's default. */
  pricePerMillion?(model: string): number | undefined;
  /** The names this evaluator accepts in `model`, for listings. */
  models(): ModelMetadata[];
  close(): Promise<void>;
}

/** Several models behind one evaluator, each selected by any of its names: what the server serves. */
export interface ModelSet extends Evaluator {
  /** Every name accepted in `model`, sorted. */
  names(): string[];
  /** The evaluator a name selects, if any (two names select the same model when this returns the same evaluator). */
  lookup(name: string): Evaluator | undefined;
  /** The evaluator a name selects; a 422 naming the valid names when none. */
  route(model: string): Evaluator;
}

/**
 * An identity (see `Evaluator.identity`) as a person would name it: "local
 * file model.gguf (120 MB), chatml", "local, sha256 67c4f157…, chatml",
 * "remote https://host/v1/systemone, model jev-latest". Anything else is
 * returned as it is.
 */
export function describeIdentity(identity: string): string {
  let parts: unknown;
  try {
    parts = JSON.parse(identity);
  } catch {
    return identity;
  }
  if (!Array.isArray(parts)) return identity;
  const [where, ...rest] = parts as unknown[];
  if (where === "remote") return `remote ${String(rest[0])}, model ${String(rest[1])}`;
  if (where !== "local") return identity;
  const [, weights, template, temperature] = rest;
  const w = typeof weights === "string" ? weights : "";
  const out = ["local"];
  if (w.startsWith("sha256:")) out.push(`sha256 ${w.slice(7, 15)}…`);
  else if (w.startsWith("file:")) {
    // file:<real path>:<size>:<mtime>; the path may hold colons itself.
    const fields = w.slice(5).split(":");
    const path = fields.slice(0, -2).join(":");
    const size = Number(fields[fields.length - 2]);
    out[0] = `local file ${path.split(/[\\/]/).pop() ?? path}`;
    if (Number.isFinite(size)) out.push(size >= 1e6 ? `${(size / 1e6).toFixed(size >= 1e8 ? 0 : 1)} MB` : `${Math.round(size / 1e3)} kB`);
  }
  if (typeof template === "string" && template) out.push(template);
  if (typeof temperature === "number" && temperature !== 1) out.push(`temperature ${temperature}`);
  return out.join(", ");
}
