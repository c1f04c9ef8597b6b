import { describe, expect, it } from "vitest";
import {
  AuthenticationError,
  MethodNotAllowedError,
  NotFoundError,
  OverloadedError,
  PermissionDeniedError,
  RateLimitError,
  UnprocessableEntityError,
  UpstreamError,
  isRetryableStatus,
} from "../../src/api/errors.js";

describe("error classes", () => {
  it("each knows its status and code and renders a FastAPI-style body", () => {
    const cases = [
      [new AuthenticationError("Missing bearer token"), 401, "authentication_error"],
      [new PermissionDeniedError("No access to model x"), 403, "permission_denied"],
      [new NotFoundError("No route"), 404, "not_found"],
    ] as const;
    for (const [error, status, code] of cases) {
      expect(error.status).toBe(status);
      expect(error.code).toBe(code);
      expect(error.body()).toEqual({ detail: error.message, type: code });
      expect(error).toBeInstanceOf(Error);
      expect(error.name).toBe(error.constructor.name);
    }
  });

  it("401 asks for a bearer token; 405 says which methods are allowed", () => {
    expect(new AuthenticationError("x").headers()).toEqual({ "www-authenticate": "Bearer" });
    expect(new MethodNotAllowedError("x", ["POST"]).headers()).toEqual({ allow: "POST" });
  });

  it("422 carries the pydantic detail list as its body", () => {
    const detail = [{ loc: ["body", "state"], msg: "Field required", type: "missing" }];
    const error = new UnprocessableEntityError(detail);
    expect(error.status).toBe(422);
    expect(error.body()).toEqual({ detail });
    expect(error.message).toBe("body.state: Field required");
  });

  it("429 and 529 give retry-after in whole seconds (rounded up) and in ms", () => {
    expect(new RateLimitError("slow down", 1234.2).headers()).toEqual({ "retry-after": "2", "retry-after-ms": "1235" });
    expect(new OverloadedError("busy", 0).headers()).toEqual({ "retry-after": "0", "retry-after-ms": "0" });
    expect(new OverloadedError("busy", 10).status).toBe(529);
  });

  it("only 408, 429 and 5xx are retryable (spec section 7)", () => {
    const retryable = [400, 401, 403, 404, 408, 413, 422, 429, 500, 503, 529, 599, 600].filter(isRetryableStatus);
    expect(retryable).toEqual([408, 429, 500, 503, 529, 599]);
    expect(new RateLimitError("x", 1).retryable).toBe(true);
    expect(new UpstreamError(502, "bad gateway").retryable).toBe(true);
    expect(new UnprocessableEntityError([]).retryable).toBe(false);
  });
});
