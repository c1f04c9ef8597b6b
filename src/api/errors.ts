/**
 * One error class per failure kind. Each knows its HTTP status, its JSON body
 * and its response headers, so the server renders any of them the same way and
 * the remote client turns an upstream status back into the same class.
 *
 * Bodies follow FastAPI: 422 is `{detail: [...]}`, every other status
 * `{detail: "message", type: "code"}`.
 */
import type { ValidationErrorItem } from "./schema.js";
import { scrub } from "../logging/secrets.js";

export type ErrorBody = { detail: string; type: string } | { detail: ValidationErrorItem[] };

export abstract class TypedEvalError extends Error {
  abstract readonly status: number;
  /** Machine-readable kind, stable across releases. */
  abstract readonly code: string;

  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }

  /** Whether the spec's client convention (section 7) retries this status. */
  get retryable(): boolean {
    return isRetryableStatus(this.status);
  }

  body(): ErrorBody {
    return { detail: this.message, type: this.code };
  }

  headers(): Record<string, string> {
    return {};
  }
}

/** Statuses a client retries (spec section 7): 408, 429 and every 5xx. */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || (status >= 500 && status <= 599);
}

export class BadRequestError extends TypedEvalError {
  readonly status = 400;
  readonly code = "bad_request";
}

export class AuthenticationError extends TypedEvalError {
  readonly status = 401;
  readonly code = "authentication_error";
  override headers(): Record<string, string> {
    return { "www-authenticate": "Bearer" };
  }
}

export class PermissionDeniedError extends TypedEvalError {
  readonly status = 403;
  readonly code = "permission_denied";
}

export class NotFoundError extends TypedEvalError {
  readonly status = 404;
  readonly code = "not_found";
}

export class MethodNotAllowedError extends TypedEvalError {
  readonly status = 405;
  readonly code = "method_not_allowed";
  constructor(
    message: string,
    readonly allow: readonly string[],
  ) {
    super(message);
  }
  override headers(): Record<string, string> {
    return { allow: this.allow.join(", ") };
  }
}

export class RequestTimeoutError extends TypedEvalError {
  readonly status = 408;
  readonly code = "request_timeout";
}

export class PayloadTooLargeError extends TypedEvalError {
  readonly status = 413;
  readonly code = "payload_too_large";
}

export class UnsupportedMediaTypeError extends TypedEvalError {
  readonly status = 415;
  readonly code = "unsupported_media_type";
}

/** 422: the body failed validation; `detail` is pydantic-shaped. */
/** Validation problems in one line each: `loc.path: message` (the top level named as such). */
export function describeIssues(issues: readonly Pick<ValidationErrorItem, "loc" | "msg">[], separator = "; "): string {
  return issues.map((e) => `${e.loc.length > 0 ? e.loc.join(".") : "(top level)"}: ${e.msg}`).join(separator);
}

export class UnprocessableEntityError extends TypedEvalError {
  readonly status = 422;
  readonly code = "validation_error";
  constructor(readonly detail: ValidationErrorItem[]) {
    super(describeIssues(detail) || "validation failed");
  }
  override body(): ErrorBody {
    return { detail: this.detail };
  }
}

/** Shared by 429 and 529: a delay after which capacity frees. */
abstract class RetryAfterError extends TypedEvalError {
  constructor(
    message: string,
    readonly retryAfterMs: number,
    /** Whether the delay came from the server (`retry-after-ms`/`retry-after`) rather than a default. */
    readonly serverDelay = true,
  ) {
    super(message);
  }
  override headers(): Record<string, string> {
    const ms = Math.max(0, Math.ceil(this.retryAfterMs));
    return { "retry-after": String(Math.ceil(ms / 1000)), "retry-after-ms": String(ms) };
  }
}

export class RateLimitError extends RetryAfterError {
  readonly status = 429;
  readonly code = "rate_limit_exceeded";
}

export class OverloadedError extends RetryAfterError {
  readonly status = 529;
  readonly code = "overloaded";
}

export class InternalServerError extends TypedEvalError {
  readonly status = 500;
  readonly code = "internal_error";
}

/** Any other status an upstream returned, kept as it came. */
export class UpstreamError extends TypedEvalError {
  readonly code = "upstream_error";
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** A remote endpoint that could not be reached, timed out, or gave no usable answer. */
export class UpstreamUnavailableError extends TypedEvalError {
  readonly status = 502;
  readonly code = "upstream_unavailable";
  /**
   * True when no connection could be made at all (refused, no such host, no
   * route): the endpoint is down, not this request's fault. False for resets,
   * timeouts and invalid answers, which may be one request's doing.
   */
  readonly unreachable: boolean;
  /** True when the address answers, but is not the System One API (a wrong `--base-url` path, another kind of server): not retried. */
  readonly notTheApi: boolean;

  constructor(message: string, options?: ErrorOptions & { unreachable?: boolean; notTheApi?: boolean }) {
    super(message, options);
    this.unreachable = options?.unreachable ?? false;
    this.notTheApi = options?.notTheApi ?? false;
  }
}

/** An error body as one short line: an HTML page's text, whitespace collapsed, cut at `max` characters. */
export function oneLine(text: string, max = 160): string {
  const plain = /^\s*</.test(text) ? text.replace(/<(script|style)[\s\S]*?<\/\1>/gi, " ").replace(/<[^>]*>/g, " ") : text;
  const line = plain.replace(/\s+/g, " ").trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** An error body's message in one line, scrubbed before it is cut (a key echoed near the end is not left half shown). */
function messageOf(body: unknown, fallback: string): string {
  if (body && typeof body === "object" && "detail" in body) {
    const detail = (body as { detail: unknown }).detail;
    if (typeof detail === "string") return oneLine(scrub(detail));
  }
  if (typeof body === "string" && body.trim()) return oneLine(scrub(body));
  return fallback;
}

/** A JSON error body with every secret scrubbed from it, at any depth (its text, when scrubbing cut through an escape). */
function scrubbedBody(body: object): unknown {
  const text = scrub(JSON.stringify(body));
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/**
 * The error class for an upstream's error response, keeping its status,
 * message, 422 detail and retry delay, so it can be passed on faithfully.
 * What the upstream said is scrubbed here, where it enters: an endpoint
 * that echoes the Authorization header gives its text to every message,
 * journal entry and summary made from the error.
 */
export function errorFromResponse(status: number, given: unknown, retryAfterMs: number | undefined): TypedEvalError {
  const body = given !== null && typeof given === "object" ? scrubbedBody(given) : given;
  const message = messageOf(body, `upstream answered HTTP ${status}`);
  switch (status) {
    case 400:
      return new BadRequestError(message);
    case 401:
      return new AuthenticationError(message);
    case 403:
      return new PermissionDeniedError(message);
    case 404:
      return new NotFoundError(message);
    case 408:
      return new RequestTimeoutError(message);
    case 422: {
      const detail =
        body && typeof body === "object" && Array.isArray((body as { detail?: unknown }).detail)
          ? (body as { detail: ValidationErrorItem[] }).detail
          : [{ loc: ["body"], msg: message, type: "value_error" }];
      return new UnprocessableEntityError(detail);
    }
    case 429:
      return new RateLimitError(message, retryAfterMs ?? 1000, retryAfterMs !== undefined);
    case 529:
      return new OverloadedError(message, retryAfterMs ?? 1000, retryAfterMs !== undefined);
    default:
      return new UpstreamError(status, message);
  }
}

/**
 * The invocation, a file it names, or the input cannot be used (a bad flag,
 * job file, registry, accounts file, input or journal): the command line
 * prints the message on one line and exits 2. Every layer's such errors
 * extend it, so the command line needs no list of them.
 */
export class InvocationError extends Error {
  override name = "InvocationError";
}
