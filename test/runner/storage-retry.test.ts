/** The one storage retry policy: what is retried, for how long, and what ends as the storage verdict. */
import { afterEach, describe, expect, it } from "vitest";
import { isTransient, setStorageRetry, STORAGE_RETRY_MS, storageCall } from "../../src/runner/s3.js";
import { StorageError } from "../../src/runner/verdict.js";

const http = (status: number, name = "Error") => Object.assign(new Error(name), { name, $metadata: { httpStatusCode: status } });
const net = (code: string) => Object.assign(new Error(code), { code });

afterEach(() => setStorageRetry(STORAGE_RETRY_MS / 1000));

describe("storage retries", () => {
  it("classifies 5xx, 408, 429, resets, refusals and timeouts as transient; 403, 404 and 412 not", () => {
    for (const e of [http(500), http(503), http(408), http(429), net("ECONNRESET"), net("ECONNREFUSED"), net("ETIMEDOUT"), { name: "TimeoutError" }])
      expect(isTransient(e)).toBe(true);
    for (const e of [http(403, "AccessDenied"), http(404, "NoSuchKey"), http(412, "PreconditionFailed"), new SyntaxError("x")])
      expect(isTransient(e)).toBe(false);
  });

  it("retries transient failures until one succeeds", async () => {
    let calls = 0;
    const value = await storageCall("reading", "s3://b/k", async () => {
      if (++calls < 4) throw calls % 2 ? http(503) : net("ECONNRESET");
      return "ok";
    });
    expect(value).toBe("ok");
    expect(calls).toBe(4);
  });

  it("ends as a StorageError naming the place and the last failure once the window is spent", async () => {
    setStorageRetry(0.6);
    let calls = 0;
    const started = Date.now();
    const error = await storageCall("shipping to", "s3://b/k", async () => {
      calls++;
      throw http(503, "ServiceUnavailable");
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StorageError);
    expect((error as StorageError).location).toBe("s3://b/k");
    expect((error as StorageError).message).toMatch(/^shipping to s3:\/\/b\/k: the store kept failing for 1 s \(HTTP 503 ServiceUnavailable/);
    expect(calls).toBeGreaterThan(1);
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it("a 403 is a StorageError at once; a missing key is the caller's", async () => {
    let calls = 0;
    const refused = await storageCall("uploading to", "s3://b/k", async () => {
      calls++;
      throw http(403, "AccessDenied");
    }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StorageError);
    expect((refused as Error).message).toMatch(/refused access \(HTTP 403 AccessDenied/);
    expect(calls).toBe(1);
    const missing = await storageCall("reading", "s3://b/k", async () => {
      throw http(404, "NoSuchKey");
    }).catch((e: unknown) => e);
    expect(missing).not.toBeInstanceOf(StorageError);
    expect((missing as Error).name).toBe("NoSuchKey");
  });
});
