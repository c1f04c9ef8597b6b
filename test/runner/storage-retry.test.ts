/** The one storage retry policy: what is retried, for how long, and what ends as the storage verdict. */
import { afterEach, describe, expect, it } from "vitest";
import { ConfigError, env } from "../../src/api/env.js";
import { endStorageRetries, isTransient, S3SetupError, setStorageRetry, STORAGE_RETRY_MS, storageCall, withStorageStop } from "../../src/records/s3.js";
import { classify, isStorageFailure, StorageError } from "../../src/api/verdict.js";

const checkFailure = (e: unknown) => classify(e, "check");

const http = (status: number, name = "Error") => Object.assign(new Error(name), { name, $metadata: { httpStatusCode: status } });
const net = (code: string) => Object.assign(new Error(code), { code });

afterEach(() => setStorageRetry(STORAGE_RETRY_MS / 1000));

describe("storage retries", () => {
  it("read $TYPED_EVAL_STORAGE_RETRY as the CLI does, for every command: units, a bare number in seconds, 0", () => {
    const retry = (text: string | undefined) => env("TYPED_EVAL_STORAGE_RETRY", { TYPED_EVAL_STORAGE_RETRY: text }) * 1000;
    expect(retry("2m")).toBe(120_000);
    expect(retry("90")).toBe(90_000);
    expect(retry("500ms")).toBe(500);
    expect(retry("0")).toBe(0);
    expect(retry(undefined)).toBe(STORAGE_RETRY_MS);
    expect(retry("")).toBe(STORAGE_RETRY_MS);
    // Not quietly the default: a malformed value names the variable.
    expect(() => retry("soon")).toThrow(ConfigError);
    expect(() => retry("soon")).toThrow(/^\$TYPED_EVAL_STORAGE_RETRY takes a duration/);
  });

  it("classifies 5xx, 408, 429, resets, refusals and timeouts as transient; 403, 404, 412 and 501 not", () => {
    for (const e of [http(500), http(503), http(408), http(429), net("ECONNRESET"), net("ECONNREFUSED"), net("ETIMEDOUT"), { name: "TimeoutError" }])
      expect(isTransient(e)).toBe(true);
    for (const e of [http(403, "AccessDenied"), http(404, "NoSuchKey"), http(412, "PreconditionFailed"), http(501, "NotImplemented"), new SyntaxError("x")])
      expect(isTransient(e)).toBe(false);
  });

  it("one classifier: a network failure, however wrapped, is retried by S3, a storage failure mid-run and resumable at the check; a file system's refusal is the user's at the check", () => {
    const wrapped = (code: string) => new TypeError("fetch failed", { cause: new Error("socket", { cause: net(code) }) });
    for (const e of [net("ECONNABORTED"), net("ENOTFOUND"), net("UND_ERR_SOCKET"), wrapped("ECONNRESET"), wrapped("EHOSTUNREACH")]) {
      expect(isTransient(e)).toBe(true);
      expect(isStorageFailure(e)).toBe(true);
      expect(checkFailure(e).verdict).toBe("storage-unavailable");
    }
    for (const code of ["ENOSPC", "EACCES", "EROFS", "EISDIR", "EEXIST", "EIO"]) {
      const e = Object.assign(new Error(code), { code, path: "/x/out.jsonl" });
      expect(isTransient(e)).toBe(false);
      expect(isStorageFailure(e)).toBe(true);
      expect(checkFailure(e).verdict).toBe("bad-input");
    }
  });

  it("a stop ends the retries at once, as a StorageError saying so", async () => {
    const stop = new AbortController();
    let calls = 0;
    const started = Date.now();
    const pending = withStorageStop(stop.signal, () =>
      storageCall("shipping the journal to", "s3://b/j", async () => {
        if (++calls === 2) setTimeout(() => stop.abort(), 10);
        throw http(503, "ServiceUnavailable");
      }),
    ).catch((e: unknown) => e);
    const error = await pending;
    expect(error).toBeInstanceOf(StorageError);
    expect((error as Error).message).toMatch(/^shipping the journal to s3:\/\/b\/j: the run was stopped while the store was failing \(HTTP 503/);
    expect(calls).toBeLessThanOrEqual(3);
    // Not the 120 s window.
    expect(Date.now() - started).toBeLessThan(5_000);
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
    expect((refused as Error).message).toMatch(/^uploading to s3:\/\/b\/k: HTTP 403 AccessDenied: the store denied the credentials in use/);
    expect(calls).toBe(1);
    const missing = await storageCall("reading", "s3://b/k", async () => {
      throw http(404, "NoSuchKey");
    }).catch((e: unknown) => e);
    expect(missing).not.toBeInstanceOf(StorageError);
    expect((missing as Error).name).toBe("NoSuchKey");
  });

  it("a store refusing this client: credentials it rejects exit 2 wherever met; a permission denied exits 2 before anything is paid, 9 after (a permission lost mid-run)", async () => {
    const refusal = async (error: unknown) =>
      (await storageCall("reading", "s3://b/k", async () => {
        throw error;
      }).catch((e: unknown) => e)) as StorageError;
    const credentials = [http(403, "InvalidAccessKeyId"), http(403, "SignatureDoesNotMatch"), http(400, "ExpiredToken"), http(401, "Unauthorized")];
    for (const e of credentials) {
      const refused = await refusal(e);
      expect(refused.refused).toBe("credentials");
      expect(refused.message).toMatch(/AWS_ACCESS_KEY_ID|AWS_SECRET_ACCESS_KEY|AWS_SESSION_TOKEN/);
      for (const [stage, paid] of [
        ["check", false],
        ["lock", false],
        ["answer", true],
        ["write", true],
        ["command", false],
      ] as const)
        expect(classify(refused, stage, { paid }).verdict).toBe("bad-input");
    }
    // A HEAD's 403 has no code: it may be either, and is said so.
    for (const e of [http(403, "AccessDenied"), http(403, "Unknown"), http(403, "Forbidden")]) {
      const refused = await refusal(e);
      expect(refused.refused).toBe("permission");
      expect(classify(refused, "check").verdict).toBe("bad-input");
      expect(classify(refused, "lock").verdict).toBe("bad-input");
      expect(classify(refused, "answer", { paid: true }).verdict).toBe("storage-unavailable");
      // Wrapped as an upload's failure is (s3-target.ts), it keeps what the store said.
      const wrapped = new StorageError(`${refused.message}; the output is kept at x`, "s3://b/k", { cause: refused });
      expect(classify(wrapped, "write", { paid: true }).verdict).toBe("storage-unavailable");
      expect(classify(wrapped, "lock").verdict).toBe("bad-input");
    }
    expect((await refusal(http(403, "Unknown"))).message).toMatch(/the store refused access: check the credentials in use .* and their permission/);
    // The store failing is not a refusal: resumable wherever met.
    setStorageRetry(0);
    expect(classify(await refusal(http(503, "ServiceUnavailable")), "check").verdict).toBe("storage-unavailable");
  });

  it("once the store failed for a whole window, what the run still writes shares the grace, not a window each", async () => {
    setStorageRetry(2);
    const failing = async () => {
      throw http(503, "ServiceUnavailable");
    };
    const started = performance.now();
    const ended: number[] = [];
    const errors = await withStorageStop(
      undefined,
      async () => {
        const first = await storageCall("shipping the journal to", "s3://b/j", failing).catch((e: unknown) => e);
        ended.push(performance.now() - started);
        // The summary, the last shipment and the lock: three more writes to the same dead store.
        const rest = await Promise.all(["s3://b/usage", "s3://b/j2", "s3://b/lock"].map((at) => storageCall("writing", at, failing).catch((e: unknown) => e)));
        ended.push(performance.now() - started);
        return [first, ...rest];
      },
      300,
    );
    for (const e of errors) expect(e).toBeInstanceOf(StorageError);
    expect((errors[1] as Error).message).toMatch(/^writing s3:\/\/b\/usage: the run was ending and the store was still failing \(HTTP 503/);
    // A window's backoffs take at least 0.875 s before the next would pass 2 s.
    expect(ended[0]).toBeGreaterThan(800);
    // Within the 0.3 s grace of the first one's end (and some slack), not another window (again at least 0.875 s).
    expect((ended[1] as number) - (ended[0] as number)).toBeLessThan(600);
  });

  it("after the verdict, an attempt that hangs is cut at the end of the grace", async () => {
    const started = performance.now();
    const error = await withStorageStop(
      undefined,
      async () => {
        endStorageRetries();
        return storageCall("writing the summary to", "s3://b/usage", () => new Promise<never>(() => undefined)).catch((e: unknown) => e);
      },
      200,
    );
    expect(error).toBeInstanceOf(StorageError);
    expect(performance.now() - started).toBeLessThan(1_500);
  });

  it("a setup mistake is named at once, never retried: no credentials, no such bucket", async () => {
    let calls = 0;
    const credentials = await storageCall("reading", "s3://b/k", async () => {
      calls++;
      throw Object.assign(new Error("Could not load credentials from any providers"), { name: "CredentialsProviderError" });
    }).catch((e: unknown) => e);
    expect(credentials).toBeInstanceOf(S3SetupError);
    expect((credentials as S3SetupError).setting).toBe("AWS credentials");
    const bucket = await storageCall("reading", "s3://nope/k", async () => {
      calls++;
      throw http(404, "NoSuchBucket");
    }).catch((e: unknown) => e);
    expect((bucket as Error).message).toBe("the bucket nope does not exist (s3://nope/k): create it, or correct its name");
    expect(checkFailure(bucket).verdict).toBe("bad-input");
    expect(calls).toBe(2);
  });
});
