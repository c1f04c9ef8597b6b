/**
 * An evaluator that calls any `/v1/systemone` endpoint: the hosted service,
 * an SGLang deployment, another typed-eval server. It obeys the client retry
 * convention of spec section 7, and refuses responses that break the
 * contract: no answer is ever taken from an invalid response.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { describeIssues, errorFromResponse, InvocationError, oneLine, type TypedEvalError, UpstreamUnavailableError } from "../api/errors.js";
import { DEFAULT_RETRY, retryDelayMs, serverDelayMs, sleep, type HeaderSource, type RetryPolicy } from "../api/retry.js";
import type { ModelMetadata, EvaluatorRequest, SystemOneResponse } from "../api/schema.js";
import { responseViolations } from "../api/consistency.js";
import { offWireQuestions, validateResponseShape } from "../api/validate.js";
import { isRetryableStatus } from "../api/errors.js";
import { describeSystemError } from "../api/system-errors.js";
import { requestChars } from "../api/billing.js";
import { registerSecret, scrub } from "../logging/secrets.js";
import type { EvaluateOptions, Evaluation, Evaluator, FirstContactOptions } from "./evaluator.js";
import { renderPrefix, renderQuestion, TEMPLATES, type ChatTemplate, type Segment } from "./prompt.js";
import { unitsOf } from "../questions/index.js";
import { declaredPromptFormat, PROMPT_FORMAT_HEADER } from "../api/prompt-format.js";

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
  /** The budget response bodies share (default: one of 16 MiB for this evaluator); several evaluators may share one. */
  bodies?: BodyBudget;
  /** For tests: waiting and jitter. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  random?: () => number;
}

const USER_AGENT = "typed-eval/0.1 (remote evaluator)";

/** How long an attempt waits for an answer unless told otherwise. */
export const DEFAULT_TIMEOUT_MS = 60_000;

/** The outcome of one attempt: a response, or an error and whether to retry it. */
type Attempt = { ok: true; response: SystemOneResponse; promptFormat: string } | { ok: false; error: TypedEvalError; retry: boolean; headers?: HeaderSource };

interface Reply {
  status: number;
  headers: HeaderSource;
  text: string;
  /** Gives the body's bytes back to the budget: call once the text is parsed. */
  release(): void;
}

function headerSource(headers: IncomingHttpHeaders): HeaderSource {
  return {
    get: (name) => {
      const value = headers[name.toLowerCase()];
      return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value;
    },
  };
}

/** No valid answer comes near this (255 options x many questions is well under 4 MiB); anything larger is refused. */
const MAX_RESPONSE_BYTES = 32 * 1024 * 1024;

/**
 * Response bodies an evaluator holds at once, all requests together (the one
 * holding the most may still grow to the cap, so one can always finish).
 */
export const BODY_BUDGET_BYTES = 16 * 1024 * 1024;

/** What one read of a socket may bring: the room a response needs to be let read. */
const CHUNK_BYTES = 64 * 1024;

/** Connection errors that mean nothing is listening or the host is unknown: the endpoint is down, whatever the request. */
const UNREACHABLE = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL"]);

/**
 * One budget for the bytes of response bodies an evaluator holds at once,
 * across all its requests in flight (a body is held until it is parsed). Past
 * the budget, a response's socket is paused until bytes are given back,
 * except the response holding the most, so one can always finish (or reach
 * the cap and be refused). Peak body memory is then about the budget plus one
 * capped response, whatever the concurrency: 32 responses of 40 MB each held
 * up to 32 MiB at once before.
 */
export class BodyBudget {
  private held = 0;
  private top = 0;
  private readonly holds = new Set<BodyHold>();
  private readonly paused = new Set<BodyHold>();

  constructor(readonly limit: number) {}

  /**
   * A new response's share, resumed by `resume` when it was paused and may
   * read again. `admitted` is false when the budget is spent: the response is
   * paused before it reads.
   */
  open(resume: () => void): { hold: BodyHold; admitted: boolean } {
    const hold = new BodyHold(this, resume);
    this.holds.add(hold);
    if (this.held + CHUNK_BYTES <= this.limit) {
      this.admit(hold);
      return { hold, admitted: true };
    }
    this.paused.add(hold);
    return { hold, admitted: false };
  }

  /** Lets a response read: a first read's worth is counted before it arrives, so many responses starting at once cannot pass the budget. */
  private admit(hold: BodyHold): void {
    if (hold.reserved > 0 || hold.bytes > 0) return;
    hold.reserved = CHUNK_BYTES;
    this.held += CHUNK_BYTES;
  }

  /** Bytes held now, across every response. */
  get bytes(): number {
    return this.held;
  }

  /** The most bytes held at once so far. */
  get peak(): number {
    return this.top;
  }

  /** @internal Counts bytes a response received; false when it must pause until bytes are given back. */
  grow(hold: BodyHold, n: number): boolean {
    const fromReserve = Math.min(hold.reserved, n);
    hold.reserved -= fromReserve;
    this.held += n - fromReserve;
    this.top = Math.max(this.top, this.held);
    if (this.held <= this.limit || this.largest(hold)) return true;
    this.paused.add(hold);
    return false;
  }

  /**
   * @internal Gives a response's bytes back and resumes paused responses,
   * largest first, as far as the budget has room for a read each (the
   * largest always: it must be able to finish).
   */
  give(hold: BodyHold, n: number): void {
    this.held -= n + hold.reserved;
    hold.reserved = 0;
    this.holds.delete(hold);
    this.paused.delete(hold);
    for (const waiting of [...this.paused].sort((a, b) => b.bytes - a.bytes)) {
      if (this.held + CHUNK_BYTES > this.limit && !this.largest(waiting)) break;
      this.paused.delete(waiting);
      this.admit(waiting);
      waiting.resume();
    }
  }

  private largest(hold: BodyHold): boolean {
    for (const other of this.holds) if (other.bytes > hold.bytes) return false;
    return true;
  }
}

/** One response's bytes in a `BodyBudget`. */
export class BodyHold {
  bytes = 0;
  /** Counted in the budget ahead of this response's first read (see `BodyBudget.admit`). */
  reserved = 0;
  private released = false;

  constructor(
    private readonly budget: BodyBudget,
    readonly resume: () => void,
  ) {}

  /** Counts `n` more bytes; false when the response must pause until resumed. */
  add(n: number): boolean {
    this.bytes += n;
    return this.budget.grow(this, n);
  }

  /** Gives the bytes back (once; later calls do nothing). */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.budget.give(this, this.bytes);
  }
}

/** An attempt's time limit, whose clock stops while the attempt waits on this client (a paused response). */
class AttemptTimer {
  private left: number;
  private since = performance.now();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    limitMs: number,
    private readonly onTimeout: () => void,
  ) {
    this.left = limitMs;
    this.timer = setTimeout(onTimeout, limitMs);
  }

  pause(): void {
    if (!this.timer) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.left -= performance.now() - this.since;
  }

  resume(): void {
    if (this.timer || this.left === Number.NEGATIVE_INFINITY) return;
    this.since = performance.now();
    this.timer = setTimeout(this.onTimeout, Math.max(0, this.left));
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.left = Number.NEGATIVE_INFINITY;
  }
}

/**
 * One POST (a request's body) or GET (`body` undefined) over node:http(s)
 * with a keep-alive agent. (undici `fetch` measured 3-4 ms slower a request
 * on loopback, and allocates web streams per call.) The body's bytes count
 * against `budget` until the reply is released; a body over the cap is
 * refused, unread when its length is declared.
 */
function call(
  url: URL,
  agent: HttpAgent,
  headers: Record<string, string>,
  body: string | undefined,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  budget: BodyBudget,
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const send = url.protocol === "https:" ? httpsRequest : httpRequest;
    let hold: BodyHold | undefined;
    const tooLarge = () => req.destroy(new Error(`response larger than ${MAX_RESPONSE_BYTES} bytes`));
    const timer = new AttemptTimer(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    const method = body === undefined ? "GET" : "POST";
    const length = body === undefined ? {} : { "content-length": Buffer.byteLength(body) };
    const req = send(url, { method, agent, headers: { ...headers, ...length } }, (res) => {
      if (Number(res.headers["content-length"]) > MAX_RESPONSE_BYTES) return tooLarge();
      const chunks: Buffer[] = [];
      // Waiting for the budget is this client's doing, not the endpoint's: the attempt's clock stops meanwhile.
      const { hold: held, admitted } = budget.open(() => {
        timer.resume();
        res.resume();
      });
      hold = held;
      const pause = () => {
        timer.pause();
        res.pause();
      };
      res.on("data", (c: Buffer) => {
        chunks.push(c);
        if (!held.add(c.length)) pause();
        if (held.bytes > MAX_RESPONSE_BYTES) tooLarge();
      });
      if (!admitted) pause();
      res.on("end", () => {
        timer.stop();
        const text = Buffer.concat(chunks).toString("utf8");
        chunks.length = 0;
        resolve({ status: res.statusCode ?? 0, headers: headerSource(res.headers), text, release: () => held.release() });
      });
      res.on("error", fail);
    });
    function fail(error: Error) {
      timer.stop();
      signal?.removeEventListener("abort", onAbort);
      hold?.release();
      reject(error);
    }
    const onAbort = () => req.destroy(signal?.reason instanceof Error ? signal.reason : new Error("aborted"));
    signal?.addEventListener("abort", onAbort, { once: true });
    req.on("error", fail);
    req.on("close", () => signal?.removeEventListener("abort", onAbort));
    req.end(body ?? "");
  });
}

export class RemoteEvaluator implements Evaluator {
  private readonly policy: RetryPolicy;
  /** The base URL as given, without a trailing slash. */
  private readonly base: string;
  private readonly endpoint: string;
  private readonly url: URL;
  private readonly agent: HttpAgent;
  /** Response bodies held at once, across every request of this evaluator. */
  private readonly bodies: BodyBudget;

  constructor(private readonly options: RemoteOptions) {
    this.bodies = options.bodies ?? new BodyBudget(BODY_BUDGET_BYTES);
    this.policy = { ...DEFAULT_RETRY, ...options.retry };
    this.base = options.baseUrl.replace(/\/+$/, "");
    this.endpoint = `${this.base}/v1/systemone`;
    this.url = new URL(this.endpoint);
    // The key (however it was read), and a password in the address (https://user:pass@host): no message shows either.
    registerSecret(options.apiKey);
    if (this.url.password) registerSecret(decodeURIComponent(this.url.password));
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
    const chars = requestChars(request);
    return Math.ceil((chars.state + chars.questions) / (this.options.charsPerToken ?? 4));
  }

  /** The headers of every call: JSON, who calls, and the key. */
  private headers(): Record<string, string> {
    const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json", "user-agent": USER_AGENT };
    if (this.options.apiKey) headers["authorization"] = `Bearer ${this.options.apiKey}`;
    return headers;
  }

  private async attempt(request: EvaluatorRequest, retryCount: number, options: EvaluateOptions): Promise<Attempt> {
    const { signal } = options;
    const headers = this.headers();
    if (retryCount > 0) headers["x-service-retry-count"] = String(retryCount);
    const body = JSON.stringify({ ...request, model: this.options.model ?? request.model });
    let res: Reply;
    try {
      res = await call(this.url, this.agent, headers, body, options.timeoutMs ?? this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS, signal, this.bodies);
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      const unreachable = isUnreachable(error);
      return { ok: false, error: new UpstreamUnavailableError(`${this.endpoint}: ${(error as Error).message}`, { cause: error, unreachable }), retry: true };
    }
    const { json, parsed } = readReply(res);
    if (notTheApi(res.status, json, parsed)) return { ok: false, error: this.notTheApiError(this.endpoint, res.status, json), retry: false };
    if (res.status < 200 || res.status > 299) {
      const error = errorFromResponse(res.status, json, serverDelayMs(res.headers));
      return { ok: false, error, retry: isRetryableStatus(res.status), headers: res.headers };
    }
    const shape = validateResponseShape(json);
    const problems = shape.ok ? responseViolations(request, shape.value) : [describeIssues(shape.errors)];
    if (!shape.ok || problems.length > 0) {
      const error = new UpstreamUnavailableError(`${this.endpoint} answered with an invalid response: ${scrub(problems.slice(0, 5).join("; "))}`);
      return { ok: false, error, retry: true };
    }
    // The endpoint renders the prompt: its format is what it names (a typed-eval server names its own), else unnamed.
    return { ok: true, response: shape.value, promptFormat: declaredPromptFormat(res.headers.get(PROMPT_FORMAT_HEADER)) };
  }

  /** An address that answers, but not as the System One API: the message quotes a little of what it said (scrubbed: a store echoes the key). */
  private notTheApiError(url: string, status: number, body: unknown): UpstreamUnavailableError {
    const said = oneLine(scrub(typeof body === "string" ? body : JSON.stringify(body ?? "")), 80);
    const message = `${url} answered HTTP ${status}${said ? ` (${said})` : ""}: that is not a System One API; check --base-url (the address before /v1/systemone)`;
    return new UpstreamUnavailableError(message, { notTheApi: true });
  }

  /**
   * Before a run's first request: one `GET /v1/models` with the key, which
   * the spec guards with the same bearer auth and nobody bills. Nothing
   * listening (refused, no such host, TLS failing) is an unreachable
   * `UpstreamUnavailableError`; a 401 or 403 is the key refused (its error
   * class); a 400 whose body is not JSON (an S3 store's XML) is not the API.
   * Anything else, a timeout or a 404 included (an endpoint may serve only
   * the POST), leaves the verdict to the first request.
   */
  async firstContact(_model?: string, options: FirstContactOptions = {}): Promise<boolean> {
    const url = new URL(`${this.base}/v1/models`);
    let res: Reply;
    try {
      res = await call(
        url,
        this.agent,
        this.headers(),
        undefined,
        Math.min(options.timeoutMs ?? FIRST_CONTACT_MS, FIRST_CONTACT_MS),
        options.signal,
        this.bodies,
      );
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      if (!isUnreachable(error)) return true;
      const why = describeSystemError(error) ?? (error as Error).message;
      throw new UpstreamUnavailableError(`nothing answers at ${this.base} (${why}): check --base-url and that the endpoint is up, then rerun`, {
        cause: error,
        unreachable: true,
      });
    }
    const { json, parsed } = readReply(res);
    if (res.status === 401 || res.status === 403) throw errorFromResponse(res.status, json, undefined);
    if (res.status === 400 && !parsed) throw this.notTheApiError(url.href, res.status, json);
    return true;
  }

  async evaluate(request: EvaluatorRequest, options: EvaluateOptions = {}): Promise<Evaluation> {
    refuseOffWire(request.questions, this.endpoint);
    const wait = this.options.sleep ?? sleep;
    const first = options.retryCount ?? 0;
    for (let attempt = 0; ; attempt++) {
      const result = await this.attempt(request, first + attempt, options);
      if (result.ok) return { response: result.response, promptFormat: result.promptFormat };
      if (options.once || !result.retry || attempt >= this.policy.maxRetries) throw result.error;
      await wait(retryDelayMs(attempt, result.headers, this.policy, this.options.random), options.signal);
    }
  }

  async close(): Promise<void> {
    this.agent.destroy();
  }
}

/**
 * The characters of a request as the embedded model renders it (ChatML):
 * the system text, the state's framing and each question's block and
 * labels, around what the request carries. What an endpoint that renders
 * as typed-eval does reads; `estimate` tells it beside characters / 4 of the
 * request, which leaves an endpoint's framing out.
 */
export function embeddedRenderingChars(request: EvaluatorRequest): number {
  const template = TEMPLATES["chatml"] as ChatTemplate;
  const chars = (segments: readonly Segment[]) => segments.reduce((sum, s) => sum + s.text.length, 0);
  let total = chars(renderPrefix(template, request.state));
  for (const { question } of unitsOf(request.questions).values()) total += chars(renderQuestion(template, question).suffix);
  return total;
}

/** How long the first contact waits for the listing before leaving the verdict to the first request. */
const FIRST_CONTACT_MS = 10_000;

/** A connection that could not be made at all, whatever the request: refused, no such host, no route, TLS failing. */
function isUnreachable(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  // TLS failures (bad certificate, https to a plain-http port) are the endpoint's, whatever the request.
  return code !== undefined && (UNREACHABLE.has(code) || /CERT|TLS|SSL|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code));
}

/** A reply's body as JSON when it is JSON (`parsed`), else as its text; the body's bytes go back to the budget. */
function readReply(res: Reply): { json: unknown; parsed: boolean } {
  try {
    return { json: res.text ? JSON.parse(res.text) : undefined, parsed: true };
  } catch {
    return { json: res.text, parsed: false };
  } finally {
    res.release();
  }
}

/**
 * Whether an error answer says the address is not the System One API, rather
 * than refusing this request: 405 and 501 (nothing takes a POST there), a
 * 404 without the API's own error body, and a 400 whose body is not JSON
 * (the API's errors are JSON; an S3 store refuses a Bearer header with an
 * XML 400). The API's 404 (an unknown model, say) is a JSON object whose
 * `detail` names what was not found; a wrong path gets a page, nothing, or a
 * router's stock reply ("Not Found", our server's "No route").
 */
export function notTheApi(status: number, body: unknown, parsed = true): boolean {
  if (status === 405 || status === 501) return true;
  if (status === 400 && !parsed) return true;
  if (status !== 404) return false;
  const detail = body && typeof body === "object" && !Array.isArray(body) ? (body as { detail?: unknown }).detail : undefined;
  return typeof detail !== "string" || /^(not found|no route\b)/i.test(detail.trim());
}

/** A question the wire cannot carry is refused before anything is sent: only the embedded model asks types registered in process. */
export function refuseOffWire(questions: EvaluatorRequest["questions"], endpoint: string): void {
  const problems = offWireQuestions(questions);
  if (problems.length > 0)
    throw new InvocationError(`${endpoint} takes the spec's question types only: ${problems.join("; ")}; ask it with the embedded model`);
}
