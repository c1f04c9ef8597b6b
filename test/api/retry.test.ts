import { describe, expect, it } from "vitest";
import { backoffMs, DEFAULT_RETRY, retryDelayMs, serverDelayMs } from "../../src/api/retry.js";

const headers = (h: Record<string, string>) => new Headers(h);

describe("retry convention (spec section 7)", () => {
  it("prefers retry-after-ms, then retry-after in seconds", () => {
    expect(serverDelayMs(headers({ "retry-after-ms": "1234", "retry-after": "9" }))).toBe(1234);
    expect(serverDelayMs(headers({ "retry-after": "3" }))).toBe(3000);
    expect(serverDelayMs(headers({ "retry-after": "0.5" }))).toBe(500);
    expect(serverDelayMs(headers({}))).toBeUndefined();
  });

  it("reads retry-after as an HTTP date", () => {
    const now = Date.parse("2026-11-21T10:00:00Z");
    expect(serverDelayMs(headers({ "retry-after": "Sat, 21 Nov 2026 10:00:07 GMT" }), now)).toBe(7000);
  });

  it("ignores malformed or negative delays", () => {
    expect(serverDelayMs(headers({ "retry-after-ms": "soon", "retry-after": "2" }))).toBe(2000);
    expect(serverDelayMs(headers({ "retry-after-ms": "-5" }))).toBeUndefined();
    expect(serverDelayMs(headers({ "retry-after": "never" }))).toBeUndefined();
  });

  it("backs off from 500 ms doubling to a 5 s cap, subtracting up to 25% jitter", () => {
    expect([0, 1, 2, 3, 4, 10].map((a) => backoffMs(a, DEFAULT_RETRY, () => 0))).toEqual([500, 1000, 2000, 4000, 5000, 5000]);
    expect(backoffMs(0, DEFAULT_RETRY, () => 1)).toBe(375);
    expect(backoffMs(3, DEFAULT_RETRY, () => 0.5)).toBe(3500);
  });

  it("uses the server's delay unless it exceeds 60 s", () => {
    expect(retryDelayMs(0, headers({ "retry-after-ms": "60000" }), DEFAULT_RETRY, () => 0)).toBe(60000);
    expect(retryDelayMs(0, headers({ "retry-after-ms": "60001" }), DEFAULT_RETRY, () => 0)).toBe(500);
    expect(retryDelayMs(1, undefined, DEFAULT_RETRY, () => 0)).toBe(1000);
  });
});
