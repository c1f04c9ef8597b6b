/**
 * An evaluator that calls any `/v1/systemone` endpoint: the hosted service,
 * an SGLang deployment, another typed-eval server. It obeys the client retry
 * convention of spec section 7, and refuses responses that break the
 * contract: no answer is ever taken from an invalid response.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { describeIssues, errorFromResponse, InvocationError, type TypedEvalError, UpstreamUnavailableError } from "../api/errors.js";
import { DEFAULT_RETRY, retryDelayMs, serverDelayMs, sleep, type HeaderSource, type RetryPolicy } from "../api/retry.js";
import type { ModelMetadata, EvaluatorRequest, SystemOneResponse } from "../api/schema.js";
import { responseViolations } from "../api/consistency.js";
import { offWireQuestions, validateResponseShape } from "../api/validate.js";
import { isRetryableStatus } from "../api/errors.js";
import type { EvaluateOptions, Evaluation, Evaluator } from "./evaluator.js";

export interface RemoteOptions {
  /** Base URL, without `/v1/systemone`. */
  baseUrl: string;
  apiKey?: string | undefined;
  /** The model name sent upstream; default: the request's own. */
  model?: string | undefined;
  /** Per attempt. Default 60 s. */
  timeoutMs?: number;
  retry?: Partial<RetryPolicy>;
  /** Names listed for this evaluator. */
  metadata?: ModelMetadata[];
  /** Characters per token of the documented estimate (see `estimateInputTokens`). Default 4. */
  charsPerToken?: number;
  /** For tests: waiting and jitter. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  random?: () => number;
}

const USER_AGENT = "typed-eval/0.1 (remote evaluator)";

/** How long an attempt waits for an answer unless told otherwise. */
export const DEFAULT_TIMEOUT_MS = 60_000;

/** The outcome of one attempt: a response, or an error and whether to retry it. */
type Attempt = { ok: true; response: SystemOneResponse } | { ok: false; error: TypedEvalError; retry: boolean; headers?: HeaderSource };

interface Reply {
  status: number;
  headers: HeaderSource;
  text: string;
}

function headerSource(headers: IncomingHttpHeaders): HeaderSource {
  return {
    get: (name) => {
      const value = headers[name.toLowerCase()];
      return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value;
    },
  };
}

/** No valid answer comes near this (255 options x many questions is well under 4 MiB); anything larger is refused unread. */
const MAX_RESPONSE_BYTES = 32 * 1024 * 1024;

/** Connection errors that mean nothing is listening or the host is unknown: the endpoint is down, whatever the request. */
const UNREACHABLE = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL"]);

/**
 * One POST over node:http(s) with a keep-alive agent. (undici `fetch` measured
 * 3-4 ms slower a request on loopback, and allocates web streams per call.)
 */
function post(url: URL, agent: HttpAgent, headers: Record<string, string>, body: string, timeoutMs: number, signal: AbortSignal | undefined): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const send = url.protocol === "https:" ? httpsRequest : httpRequest;
    const req = send(url, { method: "POST", agent, headers: { ...headers, "content-length": Buffer.byteLength(body) } }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (c: Buffer) => {
        size += c.length;
        if (size > MAX_RESPONSE_BYTES) return void req.destroy(new Error(`response larger than ${MAX_RESPONSE_BYTES} bytes`));
        chunks.push(c);
      });
      res.on("end", () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, headers: headerSource(res.headers), text: Buffer.concat(chunks).toString("utf8") });
      });
      res.on("error", fail);
    });
    const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    function fail(error: Error) {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      reject(error);
    }
    const onAbort = () => req.destroy(signal?.reason instanceof Error ? signal.reason : new Error("aborted"));
    signal?.addEventListener("abort", onAbort, { once: true });
    req.on("error", fail);
    req.on("close", () => signal?.removeEventListener("abort", onAbort));
    req.end(body);
  });
}

export class RemoteEvaluator implements Evaluator {
  private readonly policy: RetryPolicy;
  private readonly endpoint: string;
  private readonly url: URL;
  private readonly agent: HttpAgent;

  constructor(private readonly options: RemoteOptions) {
    this.policy = { ...DEFAULT_RETRY, ...options.retry };
    this.endpoint = `${options.baseUrl.replace(/\/+$/, "")}/v1/systemone`;
    this.url = new URL(this.endpoint);
    this.agent = this.url.protocol === "https:" ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true });
  }

  models(): ModelMetadata[] {
    return this.options.metadata ?? [];
  }

  /** The endpoint and the name sent to it: what the remote serves behind that name is its own affair. */
  identity(model: string): string {
    return JSON.stringify(["remote", this.endpoint, this.options.model ?? model]);
  }

  /**
   * Input tokens a remote model will bill, estimated without its tokenizer:
   * the characters of the state and questions as JSON, divided by 4
   * (English text runs 3.5-4.5 characters per token for current BPE
   * vocabularies; code and non-Latin text run fewer).
   */
  exactTokenCounts(): boolean {
    return false;
  }

  estimateInputTokens(request: EvaluatorRequest): number {
    const chars = JSON.stringify(request.state).length + JSON.stringify(request.questions).length;
    return Math.ceil(chars / (this.options.charsPerToken ?? 4));
  }

  private async attempt(request: EvaluatorRequest, retryCount: number, options: EvaluateOptions): Promise<Attempt> {
    const { signal } = options;
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json", "user-agent": USER_AGENT };
    if (this.options.apiKey) headers["authorization"] = `Bearer ${this.options.apiKey}`;
    if (retryCount > 0) headers["x-service-retry-count"] = String(retryCount);
    const body = JSON.stringify({ ...request, model: this.options.model ?? request.model });
    let res: Reply;
    try {
      res = await post(this.url, this.agent, headers, body, options.timeoutMs ?? this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS, signal);
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      const code = (error as NodeJS.ErrnoException).code;
      // TLS failures (bad certificate, https to a plain-http port) are the endpoint's, whatever the request.
      const unreachable = code !== undefined && (UNREACHABLE.has(code) || /CERT|TLS|SSL|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code));
      return { ok: false, error: new UpstreamUnavailableError(`${this.endpoint}: ${(error as Error).message}`, { cause: error, unreachable }), retry: true };
    }
    let json: unknown;
    try {
      json = res.text ? JSON.parse(res.text) : undefined;
    } catch {
      json = res.text;
    }
    if (res.status < 200 || res.status > 299) {
      const error = errorFromResponse(res.status, json, serverDelayMs(res.headers));
      return { ok: false, error, retry: isRetryableStatus(res.status), headers: res.headers };
    }
    const shape = validateResponseShape(json);
    const problems = shape.ok ? responseViolations(request, shape.value) : [describeIssues(shape.errors)];
    if (!shape.ok || problems.length > 0) {
      const error = new UpstreamUnavailableError(`${this.endpoint} answered with an invalid response: ${problems.slice(0, 5).join("; ")}`);
      return { ok: false, error, retry: true };
    }
    return { ok: true, response: shape.value };
  }

  async evaluate(request: EvaluatorRequest, options: EvaluateOptions = {}): Promise<Evaluation> {
    refuseOffWire(request.questions, this.endpoint);
    const wait = this.options.sleep ?? sleep;
    const first = options.retryCount ?? 0;
    for (let attempt = 0; ; attempt++) {
      const result = await this.attempt(request, first + attempt, options);
      if (result.ok) return { response: result.response };
      if (options.once || !result.retry || attempt >= this.policy.maxRetries) throw result.error;
      await wait(retryDelayMs(attempt, result.headers, this.policy, this.options.random), options.signal);
    }
  }

  async close(): Promise<void> {
    this.agent.destroy();
  }
}

/** A question the wire cannot carry is refused before anything is sent: only the embedded model asks types registered in process. */
export function refuseOffWire(questions: EvaluatorRequest["questions"], endpoint: string): void {
  const problems = offWireQuestions(questions);
  if (problems.length > 0)
    throw new InvocationError(`${endpoint} takes the spec's question types only: ${problems.join("; ")}; ask it with the embedded model`);
}
